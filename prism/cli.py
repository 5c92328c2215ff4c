"""The `prism` command (also `python -m prism`).

Every command takes `--json` and then prints exactly one JSON document on stdout. Errors the
user can fix are one line on stderr (or `{"error": ...}` with `--json`) and exit status 2; a
trace file that cannot be written is one of them. `optimize` exits 1 when it has no kernel or when
the winner's check failed or did not run (its line says `check: not run (why)`).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from prism.errors import PrismError

Command = Callable[[argparse.Namespace], Any]


def _cmd_workloads(args: argparse.Namespace) -> Any:
    from prism.workloads import workloads_json
    rows = workloads_json()
    if args.json:
        return {"workloads": rows}
    width = max(len(r["name"]) for r in rows)
    for r in rows:
        params = ", ".join(f"{k}{list(v)}" for k, v in r["params"].items())
        print(f"{r['name']:<{width}}  {r['program']}\n{'':<{width}}  {params}")
    return None


def _cmd_import_mirage(args: argparse.Namespace) -> Any:
    from prism.targets import resolve
    if not args.file.endswith(".json"):
        raise PrismError(f"{args.file}: expected a Mirage μGraph .json file")
    targets = resolve(args.file, args.index)
    if args.out:
        from prism.ir.serialize import save
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        for i, t in enumerate(targets):
            save(t.graph, out / f"{Path(args.file).stem}.{i}.json")
    if args.json:
        return {"file": args.file, "graphs": [t.graph.to_json() for t in targets]}
    for t in targets:
        print(t.graph)
    return None


def _cmd_render(args: argparse.Namespace) -> Any:
    from prism.ir.render import render
    targets = _graphs(args)
    if len(targets) == 1:
        paths = [Path(args.output or f"{_file_label(targets[0][0])}.svg")]
    else:  # many graphs: -o names a folder
        paths = [Path(args.output or ".") / f"{_file_label(label)}.svg" for label, _ in targets]
    written = [str(render(graph, path)) for (_, graph), path in zip(targets, paths, strict=True)]
    if args.json:
        return {"files": written}
    print("\n".join(written))
    return None


def _file_label(label: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in label)


def _graphs(args: argparse.Namespace) -> list[tuple[str, Any]]:
    from prism.targets import resolve
    targets = resolve(args.target, args.index)
    if getattr(args, "known_best", False):
        from prism.workloads.known_best import known_best
        w = targets[0].workload
        if w is None:
            raise PrismError("--known-best needs a workload TARGET")
        return [(f"{w.name}.known_best", known_best(w.name, w.shapes))]
    return [(t.label, t.graph) for t in targets]


def _cmd_interpret(args: argparse.Namespace) -> Any:
    from prism.check import check_graph
    from prism.targets import resolve
    rows = []
    for t in resolve(args.target, args.index):
        graph = t.graph
        if args.known_best:
            from prism.workloads.known_best import known_best
            if t.workload is None:
                raise PrismError("--known-best needs a workload TARGET")
            graph = known_best(t.workload.name, t.workload.shapes)
        rows.append(check_graph(t.label, graph, t.workload, seed=args.seed))
    if args.json:
        return {"results": rows}
    for r in rows:
        err = "n/a (no reference)" if r["max_rel_err"] is None else f"{r['max_rel_err']:.2e}"
        print(f"{r['label']}: {r['num_kernels']} kernel(s), outputs {r['output_shapes']}, "
              f"max rel err vs torch float64 {err}, {r['seconds']:.3f} s")
    return None


def _cmd_check(args: argparse.Namespace) -> Any:
    from prism.check import run_check
    report = run_check(args.workload, Path(args.out), seed=args.seed, echo=not args.json)
    return report if args.json else None


def _cmd_verify(args: argparse.Namespace) -> Any:
    from prism.errors import SpecError
    from prism.targets import resolve
    from prism.verify.equiv import Limits, show_proof, verify
    targets = resolve(args.target)
    if len(targets) != 1:
        raise PrismError(f"{args.target} holds {len(targets)} graphs; a TARGET is one program "
                         "(a workload, path.py:function or a one-graph file)")
    try:
        candidates = resolve(args.candidate, args.index)
    except SpecError as e:
        candidates = []
        invalid = str(e)
    limits = Limits(iterations=args.iterations, nodes=args.nodes, seconds=args.time_limit)
    results = []
    if not candidates:
        results.append({"index": args.index or 0, "verdict": "invalid", "method": "spec",
                        "proof_steps": 0, "seconds": 0.0, "reason": invalid})
    for i, cand in enumerate(candidates):
        target = _target_at_shapes(targets[0], cand.graph)
        verdict = verify(target, cand.graph, limits)
        row = {"index": args.index if args.index is not None else i, "graph": cand.label,
               **verdict.to_json()}
        results.append(row)
        if not args.json:
            sizes = f", {verdict.sizes} sizes" if verdict.sizes else ""
            print(f"{cand.label}: {verdict.verdict} ({verdict.method}{sizes}, "
                  f"{verdict.proof_steps} step(s), {verdict.seconds:.3f} s)")
            for k, steps in enumerate(verdict.steps):
                print(f" output {k}:\n{show_proof(steps)}")
            if verdict.reason:
                print(f"  {verdict.reason}")
            if verdict.counterexample:
                print(f"  counterexample: {json.dumps(verdict.counterexample)}")
    return {"target": targets[0].label, "results": results} if args.json else None


def _target_at_shapes(target: Any, candidate: Any) -> Any:
    """The target's graph; a workload target is traced at the candidate's input shapes."""
    w = target.workload
    shapes = [tuple(d.value for d in candidate.shape(t)) for t in candidate.inputs
              if all(d.is_const for d in candidate.shape(t))]
    if w is None or len(shapes) != len(w.shapes) or shapes == list(w.shapes.values()):
        return target.graph
    return w.with_shapes(**dict(zip(w.shapes, shapes, strict=True))).graph


class Exit:
    """A command's result with a non-zero exit status (e.g. a search that found nothing)."""

    def __init__(self, result: Any, code: int):
        self.result, self.code = result, code


def _parse_shape(text: str) -> tuple[str, tuple[int, ...]]:
    name, sep, dims = text.partition("=")
    try:
        shape = tuple(int(x) for x in dims.lower().split("x"))
    except ValueError:
        shape = ()
    if not sep or not name or not shape or any(d < 1 for d in shape):
        raise PrismError(f"--shape {text!r} is not NAME=8x1024 (a parameter name, then "
                         "positive dims joined by x)")
    return name, shape


def _search_target(args: argparse.Namespace) -> Any:
    from prism.targets import resolve
    targets = resolve(args.target)
    if len(targets) != 1:
        raise PrismError(f"{args.target} holds {len(targets)} graphs; search one program")
    target = targets[0]
    if args.shape:
        w = target.workload
        if w is None:
            raise PrismError("--shape needs a workload TARGET (a name or path.py:function)")
        shapes = dict(_parse_shape(s) for s in args.shape)
        unknown = sorted(set(shapes) - set(w.shapes))
        if unknown:
            raise PrismError(f"--shape names {', '.join(unknown)}; {w.name} has parameters "
                             f"{', '.join(w.shapes)}")
        from prism.targets import Target
        w = w.with_shapes(**shapes)
        target = Target(target.label, w.graph, w)
    return target


def _search_config(args: argparse.Namespace, base: Any = None) -> Any:
    """The search settings from the command line, over `base` (default: Prism's caps)."""
    from dataclasses import replace

    from prism.search import SearchConfig
    from prism.search.config import BLOCK_OPS
    kw: dict[str, Any] = {"budget_s": args.budget, "seed": args.seed,
                          "disabled": frozenset(args.disable or ()), "device": args.device}
    for name in ("max_block_ops", "max_kernel_ops", "max_accumulators", "max_block_inputs",
                 "max_custom_kernels", "max_families"):
        if getattr(args, name) is not None:
            kw[name] = getattr(args, name)
    if args.grid_dims:
        kw["grid_dims"] = tuple(int(k) for k in args.grid_dims.split(","))
    if args.block_ops:
        kw["block_ops"] = tuple(args.block_ops.split(","))
    elif args.kernel_ops:
        kw["block_ops"] = BLOCK_OPS
    if args.kernel_ops:
        kw["kernel_ops"] = tuple(args.kernel_ops.split(","))
    if args.accumulators:
        kw["accumulators"] = tuple(args.accumulators.split(","))
    return replace(base, **kw) if base is not None else SearchConfig(**kw)


def _cmd_search(args: argparse.Namespace) -> Any:
    from prism.search import audit, search
    from prism.search.checkpoint import load_checkpoint, reinstantiate, save_checkpoint
    from prism.trace import JsonlWriter, Tracer
    target = _search_target(args)
    config = _search_config(args)
    tracer = Tracer(keep=False)
    writer = JsonlWriter(args.trace, fix="free space there or choose another --trace") \
        if args.trace else None
    if writer is not None:
        tracer.subscribe(writer, required=True)   # a trace that cannot be written stops the run
    try:
        if args.audit_rule:
            report = audit(target.graph, args.audit_rule, config, tracer=tracer,
                           label=target.label).to_json()
            if not args.json:
                print(f"audit of {report['rule']} on {report['target']}: {report['pruned']} "
                      f"families pruned, {report['explored']} explored under them, "
                      f"{report['checked']} programs verified, {report['equivalent']} "
                      f"equivalent; {'no' if report['sound'] else len(report['wrongly_pruned'])}"
                      f" wrongly pruned ({report['seconds']:.1f} s)")
                for w in report["wrongly_pruned"]:
                    print(f"  {w['family']} ({w['rule']}: {w['reason']}): {w['finding']}")
            out = report if args.json else None
            return out if report["sound"] else Exit(out, 1)
        checkpoint = Path(args.checkpoint) if args.checkpoint else None
        if checkpoint is not None and checkpoint.exists():
            ck = load_checkpoint(checkpoint)
            result = reinstantiate(ck, target.graph, config, tracer=tracer, label=target.label)
            extra = {"checkpoint": {"path": str(checkpoint), "loaded": True,
                                    "search_seconds": ck.search_seconds}}
        else:
            result = search(target.graph, config, tracer=tracer, label=target.label)
            extra = {}
            if checkpoint is not None:
                save_checkpoint(result, target.graph, checkpoint)
                extra = {"checkpoint": {"path": str(checkpoint), "loaded": False}}
    finally:
        if writer is not None:
            writer.close()
    doc = {**result.to_json(), **extra}
    if args.trace:
        doc["trace"] = args.trace
    if not args.json:
        _print_search(doc)
    out = doc if args.json else None
    return out if result.equivalent else Exit(out, 1)


def _print_search(doc: dict[str, Any]) -> None:
    fam = doc["families"]
    pruned = ", ".join(f"{k} {v}" for k, v in fam["pruned"].items())
    state = "complete" if doc["complete"] else f"stopped: {doc['stop_reason']}"
    if doc["complete"] and not doc["exhaustive"]:
        state = "complete, not exhaustive"
    aside = ", ".join(f"{k} {v}" for k, v in fam.get("set_aside", {}).items())
    aside = f"; set aside unproven: {aside}" if aside else ""
    print(f"{doc['target']} on {doc['device']}: {fam['generated']} families generated, "
          f"{fam['kept']} kept (pruned: {pruned}{aside}); {len(doc['candidates'])} candidates "
          f"verified in {doc['seconds']:.1f} s ({state})")
    for note in doc.get("notes", []):
        print(f"  note: {note}")
    for c in doc["candidates"]:
        if c["verdict"] == "equivalent":
            cost = f", modeled {c['modeled_us']:.2f} µs" if "modeled_us" in c else ""
            print(f"  {c['id']}: equivalent ({c['method']}, {c['proof_steps']} steps, "
                  f"{c['sizes']} sizes), {c['num_kernels']} kernel(s){cost}")
    if "message" in doc:
        print(doc["message"])


def _cmd_optimize(args: argparse.Namespace) -> Any:
    from prism.pipeline import best_summary, search_config_for, superoptimize
    from prism.report import check_text, result_rows
    from prism.tune import ResultDB
    target = _search_target(args)
    config = _search_config(args, search_config_for(target.graph, args.budget, args.device))
    out = Path(args.out)
    db = ResultDB(Path(args.db)) if args.db else ResultDB()
    result = superoptimize(target.workload or target.graph, device=args.device,
                           measure=args.measure, budget_s=args.budget, out=out,
                           search_config=config, checkpoint=args.checkpoint,
                           max_trials=args.max_trials, db=db, label=target.label)
    doc = result.to_json()
    if not args.json:
        print(f"{doc['target']} on {doc['device']} (measure: {doc['measure']}), "
              f"{doc['seconds']:.1f} s")
        rows = result_rows(best_summary(result))
        width = max(len(w) for w, _, _ in rows)
        for what, value, kind in rows:
            print(f"  {what:<{width}}  {f'{value:.2f} µs':>12}  {kind}")
        if result.best is not None:
            b = doc["best"]
            print(f"  proof: {b['proof']}")
            print(f"  check: {check_text(b['check'])}")
            print(f"  modeled speed-up over eager: "
                  f"{doc['baseline']['modeled_speedup_vs_eager']:.2f}x")
        for name, path in doc["files"].items():
            print(f"  {name}: {path}")
    # 0 only for a kernel whose check ran and passed; a check not run is no pass
    code = 0 if result.best is not None and result.best.check.passed else 1
    return Exit(doc if args.json else None, code)


def _cmd_bench(args: argparse.Namespace) -> Any:
    """`prism bench`: run and record (the default), `--compare A B`, or `--readme`."""
    from prism import bench_report
    if args.compare:
        diff = bench_report.compare(*(bench_report.load_results(p) for p in args.compare))
        if not args.json:
            print(bench_report.compare_text(diff))
        return diff if args.json else None
    out = Path(args.out)
    if args.readme:
        readme = Path("README.md")
        if not readme.is_file():
            raise PrismError("README.md: no such file here; run `prism bench --readme` from "
                             "the repository root")
        results = bench_report.latest_results(out)
        changed = bench_report.rewrite_readme(readme, bench_report.load_results(results),
                                              str(results))
        doc = {"readme": str(readme), "results": str(results), "changed": changed}
        if not args.json:
            print(f"{readme}: {'rewritten' if changed else 'unchanged'} from {results}")
        return doc if args.json else None
    return _bench_run(args, out)


def _bench_run(args: argparse.Namespace, out: Path) -> Any:
    from dataclasses import replace

    from prism import bench, bench_report
    settings = replace(bench.QUICK if args.quick else bench.FULL, device=args.device,
                       runs=args.runs)
    if args.budget is not None:
        settings = replace(settings, budget_s=args.budget)
    if args.max_block_ops is not None:
        settings = replace(settings, max_block_ops=args.max_block_ops)
    caps = None
    if args.scaling:
        caps = bench.QUICK_SCALING_CAPS if args.quick else bench.SCALING_CAPS

    def progress(kind: str, item: dict[str, Any]) -> None:
        if kind == "row":
            state = item.get("error") or (f"{item['search_seconds']:.1f} s search, "
                                          f"{item['families_generated']} families, "
                                          f"{item['search_state']}")
            print(f"{item['workload']}: {state}", file=sys.stderr, flush=True)
        else:
            print(f"scaling {item['workload']} cap {item['cap']}: {item['search_seconds']:.1f} "
                  f"s, {item['families_generated']} families", file=sys.stderr, flush=True)

    doc = bench.run_bench(args.workloads or bench.NINE, settings, scaling_caps=caps,
                          progress=progress, command=_bench_command(args))
    doc["files"] = bench_report.write_history(doc, out)
    if not args.json:
        print(bench_report.markdown(doc))
        for name, path in doc["files"].items():
            print(f"{name}: {path}")
    failed = any("error" in r for r in doc["rows"])
    return Exit(doc if args.json else None, 1 if failed else 0)


def _bench_command(args: argparse.Namespace) -> str:
    """The command line that reproduces this run, for the results file."""
    words = ["prism", "bench", *args.workloads]
    words += [flag for flag, on in (("--quick", args.quick), ("--scaling", args.scaling)) if on]
    for flag, value in (("--budget", args.budget), ("--max-block-ops", args.max_block_ops),
                        ("--device", args.device), ("--out", args.out)):
        if value is not None:
            words += [flag, str(value)]
    return " ".join(words)


def _cmd_lab(args: argparse.Namespace) -> Any:
    import os
    import subprocess
    folder = Path(args.notebooks)
    if not folder.is_dir():
        raise PrismError(f"{folder}: no such folder; run `prism lab` from the repository root "
                         "or pass --notebooks DIR")
    cmd = [sys.executable, "-m", "jupyter", "lab", f"--ServerApp.root_dir={folder}",
           "--LabApp.news_url=None"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")  # Jupyter refuses to run as root without it
    if args.json:
        return {"command": cmd}
    return subprocess.call(cmd)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="prism", description="Prism Workbench: a symbolic "
                                "superoptimizer for tensor programs.")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, fn: Command, help_text: str) -> argparse.ArgumentParser:
        sp = sub.add_parser(name, help=help_text, description=help_text)
        sp.add_argument("--json", action="store_true", help="print one JSON document on stdout")
        sp.set_defaults(func=fn)
        return sp

    command("workloads", _cmd_workloads, "list the named workloads")
    sp = command("import-mirage", _cmd_import_mirage, "read a Mirage μGraph JSON file")
    sp.add_argument("file")
    sp.add_argument("--index", type=int, help="only the graph at this position")
    sp.add_argument("--out", help="also save each graph as our JSON into this folder")
    target_help = "a workload name, path.py:function, or a graph .json file (ours or Mirage's)"
    sp = command("render", _cmd_render, "render a graph to SVG: kernels, block-graph clusters "
                 "with grid, loop range, maps and tile shapes")
    sp.add_argument("target", help=target_help)
    sp.add_argument("--index", type=int, help="for a file of many graphs: only this one")
    sp.add_argument("--known-best", action="store_true",
                    help="render the workload's hand-built fused kernel instead")
    sp.add_argument("-o", "--output", help="the .svg (or .dot) file to write")
    sp = command("interpret", _cmd_interpret, "run a graph in the float64 reference "
                 "interpreter on random inputs and compare with torch")
    sp.add_argument("target", help=target_help)
    sp.add_argument("--index", type=int)
    sp.add_argument("--known-best", action="store_true")
    sp.add_argument("--seed", type=int, default=0)
    sp = command("check", _cmd_check, "list the workloads, trace one, interpret it and its "
                 "hand-fused kernel against torch, prove, render, print the table")
    sp.add_argument("workload", nargs="?", default=None, help="default: rmsnorm_matmul")
    sp.add_argument("--out", default="out", help="folder for the SVGs and the report")
    sp.add_argument("--seed", type=int, default=0)
    sp = command("verify", _cmd_verify, "prove a candidate graph equivalent to a target "
                 "(e-graph with the axiom table), or refute it with a counterexample")
    sp.add_argument("target", help=target_help)
    sp.add_argument("candidate", help="a graph .json file (ours or Mirage's: each graph is "
                    "verified, or only --index I), or a workload / path.py:function")
    sp.add_argument("--index", type=int)
    sp.add_argument("--time-limit", type=float, default=10.0, help="e-graph seconds per graph")
    sp.add_argument("--nodes", type=int, default=20_000, help="e-graph node limit")
    sp.add_argument("--iterations", type=int, default=30, help="e-graph iteration limit")
    sp = command("search", _cmd_search, "symbolic search and verification: families "
                 "generated, pruned per rule, kept, and the verified candidates")
    _search_arguments(sp)
    sp.add_argument("--trace", metavar="F.jsonl", help="write every decision to this file")
    sp.add_argument("--audit-rule", metavar="NAME", help="re-explore what rule NAME pruned "
                    "and verify it: exits 1 if an equivalent program was pruned wrongly")
    sp = command("optimize", _cmd_optimize, "the whole pipeline: search, instantiate, generate "
                 "Triton, tune; writes kernel.py, kernel.ptx, trace.jsonl and report.html")
    _search_arguments(sp)
    sp.add_argument("--measure", default="model", choices=("model", "interpret", "cuda"),
                    help="model: the cost model; interpret: Triton's interpreter (correctness, "
                    "CPU); cuda: CUDA events on a GPU")
    sp.add_argument("--out", default="out", help="folder for the outputs (default out/)")
    sp.add_argument("--max-trials", type=int, default=8,
                    help="configurations compiled and measured (default 8)")
    sp.add_argument("--db", metavar="F.jsonl", help="the result database (default "
                    "~/.cache/prism/results.jsonl, or $PRISM_CACHE_DIR/results.jsonl)")
    sp = command("bench", _cmd_bench, "search cost and kernel quality per workload, the "
                 "search against the block-op cap, and the history of runs (DESIGN.md §6)")
    sp.add_argument("workloads", nargs="*", metavar="WORKLOAD",
                    help="workload names or path.py:function (default: the nine)")
    sp.add_argument("--quick", action="store_true", help="reduced caps and budget (CI)")
    sp.add_argument("--out", default="bench/results", help="folder for <date>-<commit>.json, "
                    ".md, .svg and .html (default bench/results)")
    sp.add_argument("--budget", type=float, help="seconds per workload (default 900; 120 with "
                    "--quick)")
    sp.add_argument("--device", default="h100", help="the device the pipeline optimizes for; "
                    "the winner is modeled on H100 and H200 either way (default h100)")
    sp.add_argument("--max-block-ops", type=int, help="the block-op cap (default: the "
                    "pipeline's; 5 with --quick)")
    sp.add_argument("--scaling", action="store_true", help="also search rmsnorm_matmul and "
                    "attention at block-op caps 5..11 (4, 5 with --quick)")
    sp.add_argument("--runs", metavar="DIR", help="keep each workload's optimize outputs "
                    "(trace.jsonl, result.json, report.html) in DIR/WORKLOAD")
    sp.add_argument("--compare", nargs=2, metavar=("A.json", "B.json"),
                    help="print what changed from run A to run B, row by row, as B / A")
    sp.add_argument("--readme", action="store_true", help="rewrite README.md's workload table "
                    "from the latest full run in --out (runs nothing)")
    sp = command("lab", _cmd_lab, "JupyterLab on the notebooks (--json: print the command only)")
    sp.add_argument("--notebooks", default="notebooks")
    return p


def _search_arguments(sp: argparse.ArgumentParser) -> None:
    """The arguments `search` and `optimize` share: the target, shapes, budget and caps."""
    sp.add_argument("target", help="a workload name or path.py:function (@prism.workload)")
    sp.add_argument("--shape", action="append", metavar="NAME=8x1024",
                    help="a parameter's shape (repeat for several)")
    sp.add_argument("--budget", type=float, default=600.0, help="seconds (default 600)")
    sp.add_argument("--device", default="h100", help="h100, h200 or a100: the hardware rule's "
                    "limits, the parameter candidates, the cost model and the tuner (default "
                    "h100)")
    sp.add_argument("--checkpoint", metavar="F", help="load this symbolic checkpoint and "
                    "re-instantiate it at the shapes (no search); if it does not exist, "
                    "search and write it")
    sp.add_argument("--disable", action="append", metavar="RULE",
                    help="switch a pruning rule off (repeat for several)")
    sp.add_argument("--max-block-ops", type=int)
    sp.add_argument("--max-kernel-ops", type=int)
    sp.add_argument("--max-accumulators", type=int)
    sp.add_argument("--max-block-inputs", type=int)
    sp.add_argument("--max-custom-kernels", type=int)
    sp.add_argument("--max-families", type=int, help="stop after this many families")
    sp.add_argument("--grid-dims", help="grid-dim counts to try, e.g. 1,2")
    sp.add_argument("--block-ops", help="block vocabulary, comma-separated")
    sp.add_argument("--kernel-ops", help="pre-defined kernel ops to allow, comma-separated")
    sp.add_argument("--accumulators", help="accumulators to allow, comma-separated")
    sp.add_argument("--seed", type=int, default=0, help="0: canonical order")


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    started = time.perf_counter()
    try:
        result = args.func(args)
    except PrismError as e:
        if args.json:
            print(json.dumps({"error": {"type": type(e).__name__, "message": str(e)}}))
        else:
            print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    code = 0
    if isinstance(result, Exit):
        result, code = result.result, result.code
    if args.json:
        if isinstance(result, dict):
            result.setdefault("seconds", round(time.perf_counter() - started, 3))
        print(json.dumps(result))
    return code


if __name__ == "__main__":
    sys.exit(main())
