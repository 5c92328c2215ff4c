"""The `prism` command (also `python -m prism`).

Every command takes `--json` and then prints exactly one JSON document on stdout, on errors too
(`{"error": {"type", "message"}}`). Errors the user can fix — a bad option value, a path that
cannot be written, a file that is not what it should be — are one line on stderr naming the
problem and the fix, found before any work where they can be. The exit status says what
happened (the README's command table lists them):

    0    done: a kernel whose check passed, an `equivalent` verdict, a search that found one
    1    done, with no good answer: no kernel or its check failed or did not run (`optimize`),
         `not_equivalent` (`verify`), no equivalent candidate (`search`), an unsound rule
    2    bad input: the command line, a file, a path, a program prism cannot take
    3    `verify`: `unknown` (the limits ran out before a proof or a refutation)
    4    `verify`: `invalid` (the candidate is not a well-formed graph)
    70   an internal error: a bug in prism (PRISM_DEBUG=1 shows its traceback)
    130  interrupted (Ctrl-C): `search` and `optimize` stop as at their budget and keep their
         work (the result so far, the checkpoint, the trace); a second Ctrl-C stops at once
    141  stdout was closed early (`prism workloads | head`): quietly, as SIGPIPE would

Every output path (`--out`, `-o`, `--trace`, `--checkpoint`) is checked before any work, and
an output folder is written whole or not at all (`prism.outputs`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from prism.errors import PrismError, UsageError

Command = Callable[[argparse.Namespace], Any]


def _cmd_workloads(args: argparse.Namespace) -> Any:
    from prism.workloads import VARIANTS, workloads_json
    rows = workloads_json()
    variants = [w.to_json() for w in VARIANTS.values()]
    if args.json:
        return {"workloads": rows, "variants": variants}
    width = max(len(r["name"]) for r in (*rows, *variants))
    for title, listed in (("", rows), ("variants (not among the nine the bench runs):",
                                        variants)):
        if title:
            print(f"\n{title}")
        for r in listed:
            params = ", ".join(f"{k}{list(v)}" for k, v in r["params"].items())
            print(f"{r['name']:<{width}}  {r['program']}\n{'':<{width}}  {params}")
    return None


def _cmd_import_mirage(args: argparse.Namespace) -> Any:
    from prism.targets import resolve
    if not args.file.endswith(".json"):
        raise PrismError(f"{args.file}: expected a Mirage μGraph .json file")
    with _output_folder(args.out) as folder:
        targets = resolve(args.file, args.index)
        if folder is not None:
            from prism.ir.serialize import save
            for i, t in enumerate(targets):
                save(t.graph, folder.staging / f"{Path(args.file).stem}.{i}.json")
    if args.json:
        return {"file": args.file, "graphs": [t.graph.to_json() for t in targets]}
    for t in targets:
        print(t.graph)
    return None


def _cmd_render(args: argparse.Namespace) -> Any:
    from prism.ir.render import render
    from prism.outputs import check_file, check_folder
    targets = _graphs(args)
    if len(targets) == 1:
        paths = [Path(args.output or f"{_file_label(targets[0][0])}.svg")]
        check_file(paths[0], "-o")
    else:  # many graphs: -o names a folder
        check_folder(Path(args.output or "."), "-o")
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
    from prism.targets import refuse_too_large, resolve
    rows = []
    for t in resolve(args.target, args.index):
        graph = t.graph
        if args.known_best:
            from prism.workloads.known_best import known_best
            if t.workload is None:
                raise PrismError("--known-best needs a workload TARGET")
            graph = known_best(t.workload.name, t.workload.shapes)
        refuse_too_large(graph, t.label)
        rows.append(check_graph(t.label, graph, t.workload, seed=args.seed))
    bad = any(r["nan_outputs"] for r in rows)
    if args.json:
        return Exit({"results": rows}, 1) if bad else {"results": rows}
    for r in rows:
        err = "n/a (no reference)" if r["max_rel_err"] is None else f"{r['max_rel_err']:.2e}"
        if r["nan_outputs"]:
            also = " (torch's has NaN too)"
            err = "not computed: " + "; ".join(
                f"output {n['output']} holds {n['elements']} NaN(s){also if n['in_torch'] else ''}"
                for n in r["nan_outputs"])
        print(f"{r['label']}: {r['num_kernels']} kernel(s), outputs {r['output_shapes']}, "
              f"max rel err vs torch float64 {err}, {r['seconds']:.3f} s")
    return Exit(None, 1) if bad else None


def _cmd_check(args: argparse.Namespace) -> Any:
    from prism.check import run_check
    with _output_folder(args.out) as folder:
        assert folder is not None       # --out has a default
        report = run_check(args.workload, folder.staging, seed=args.seed, echo=not args.json,
                           shown=folder.destination)
    return report if args.json else None


def _cmd_verify(args: argparse.Namespace) -> Any:
    from prism.errors import SpecError
    from prism.targets import refuse_too_large, resolve
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
    for t in (*targets, *candidates):
        refuse_too_large(t.graph, t.label)
    limits = Limits(iterations=args.iterations, nodes=args.nodes, seconds=args.time_limit)
    results: list[dict[str, Any]] = []
    if not candidates:
        results.append({"index": args.index or 0, "verdict": "invalid", "method": "spec",
                        "proof_steps": 0, "seconds": 0.0, "reason": invalid})
        if not args.json:
            print(f"{args.candidate}: invalid (spec)\n  {invalid}")
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
            if verdict.gap:
                print(f"  nearest gap (output {verdict.gap['output']}, {verdict.gap['sizes']} "
                      f"sizes): the e-graph saturated with these two apart\n"
                      f"    candidate: {verdict.gap['candidate']}\n"
                      f"    target:    {verdict.gap['target']}")
            if verdict.counterexample:
                print(f"  counterexample: {json.dumps(verdict.counterexample)}")
    out = {"target": targets[0].label, "results": results} if args.json else None
    return Exit(out, _verify_code([r["verdict"] for r in results]))


# `verify T C && deploy` deploys only what is proved: 0 for equivalent alone, and a refutation
# outranks an invalid candidate, which outranks an undecided one, when a file holds several
VERIFY_CODES = {"equivalent": 0, "not_equivalent": 1, "unknown": 3, "invalid": 4}


def _verify_code(verdicts: list[str]) -> int:
    for verdict in ("not_equivalent", "invalid", "unknown"):
        if verdict in verdicts:
            return VERIFY_CODES[verdict]
    return 0 if all(v == "equivalent" for v in verdicts) else VERIFY_CODES["unknown"]


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


def _parse_shape(text: str, flag: str = "--shape") -> tuple[str, tuple[int, ...]]:
    name, sep, dims = text.partition("=")
    try:
        shape = tuple(int(x) for x in dims.lower().split("x"))
    except ValueError:
        shape = ()
    if not sep or not name or not shape or any(d < 1 for d in shape):
        raise PrismError(f"{flag} {text!r} is not NAME=8x1024 (a parameter name, then "
                         "positive dims joined by x)")
    return name, shape


def _search_target(args: argparse.Namespace) -> Any:
    from prism.targets import refuse_too_large, resolve
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
    refuse_too_large(target.graph, target.label)
    return target


def _search_config(args: argparse.Namespace, base: Any = None) -> Any:
    """The search settings from the command line, over `base` (default: Prism's caps)."""
    from dataclasses import replace

    from prism.search import SearchConfig
    from prism.search.config import BLOCK_OPS
    kw: dict[str, Any] = {"budget_s": args.budget, "seed": args.seed,
                          "disabled": frozenset(args.disable or ()), "device": args.device}
    for name in ("max_block_ops", "max_kernel_ops", "max_accumulators", "max_block_inputs",
                 "max_block_outputs", "max_custom_kernels", "max_families"):
        if getattr(args, name) is not None:
            kw[name] = getattr(args, name)
    if args.grid_dims:
        kw["grid_dims"] = args.grid_dims
    if args.block_ops:
        kw["block_ops"] = tuple(args.block_ops.split(","))
    elif args.kernel_ops:
        kw["block_ops"] = BLOCK_OPS
    if args.kernel_ops:
        kw["kernel_ops"] = tuple(args.kernel_ops.split(","))
    if args.accumulators:
        kw["accumulators"] = tuple(args.accumulators.split(","))
    if args.split_loops is not None:
        kw["split_loops"] = args.split_loops
    if getattr(args, "member_bound", None) is not None:
        kw["member_bound"] = args.member_bound
    if getattr(args, "trace_graphs", False):
        kw["record_graphs"] = True
    kw["order"] = getattr(args, "order", "canonical")
    if kw["order"] == "learned":    # torch only now: the model is built outside the search
        from prism.learn import learned_order
        kw["order"] = learned_order(args.order_model)
    return replace(base, **kw) if base is not None else SearchConfig(**kw)


@contextlib.contextmanager
def _interruptible(interrupt: threading.Event, what: str) -> Iterator[None]:
    """The first Ctrl-C (SIGINT) sets `interrupt`, which stops the run as its budget would, so it
    keeps its work; a second one raises KeyboardInterrupt at once. Outside the main thread (a
    caller's thread) signals cannot be caught, and Ctrl-C keeps Python's meaning."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_sigint(signum: int, frame: Any) -> None:
        if interrupt.is_set():
            raise KeyboardInterrupt
        interrupt.set()
        print(f"interrupted: {what} (Ctrl-C again to stop at once, keeping less)",
              file=sys.stderr, flush=True)

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@contextlib.contextmanager
def _output_folder(path: str | None, option: str = "--out") -> Iterator[Any]:
    """An `OutputFolder` for `path` (None: yields None), checked and locked before the work,
    moved into place when the body is done, beside it when the body raises."""
    if path is None:
        yield None
        return
    from prism.outputs import OutputFolder
    folder = OutputFolder(Path(path), option)
    for note in folder.notes:
        print(f"note: {note}", file=sys.stderr)
    try:
        yield folder
    except BaseException as e:
        folder.abandon(interrupted=isinstance(e, KeyboardInterrupt))
        raise
    folder.finish()


def _cmd_search(args: argparse.Namespace) -> Any:
    from prism.outputs import Outcome, OutputFile, check_file, sibling
    from prism.search import audit, search
    from prism.search.checkpoint import load_checkpoint, reinstantiate, save_checkpoint
    from prism.trace import JsonlWriter, Tracer
    target = _search_target(args)
    config = _search_config(args)
    checkpoint = Path(args.checkpoint) if args.checkpoint else None
    load = checkpoint is not None and checkpoint.is_file()
    if checkpoint is not None and not load:
        check_file(checkpoint, "--checkpoint")      # before the search, not after it
    trace = OutputFile(args.trace, "--trace") if args.trace else None
    tracer = Tracer(keep=False)
    writer = JsonlWriter(trace.staging, fix="free space there or choose another --trace",
                         shown=trace.path) if trace is not None else None
    if writer is not None:
        tracer.subscribe(writer, required=True)   # a trace that cannot be written stops the run
    interrupt = threading.Event()
    try:
        with _interruptible(interrupt, "the search stops now and keeps what it found"):
            if args.audit_rule:
                report = audit(target.graph, args.audit_rule, config, tracer=tracer,
                               label=target.label, cancel=interrupt).to_json()
            elif load:
                assert checkpoint is not None
                ck = load_checkpoint(checkpoint)
                result = reinstantiate(ck, target.graph, config, tracer=tracer,
                                       label=target.label)
                extra: dict[str, Any] = {"checkpoint": {"path": str(checkpoint), "loaded": True,
                                                        "search_seconds": ck.search_seconds}}
            else:
                result = search(target.graph, config, tracer=tracer, label=target.label,
                                cancel=interrupt, executor=_executor(args))
                extra = {}
    except BaseException as e:
        if writer is not None:
            writer.close()
        if trace is not None:       # the previous trace stays; this run's goes beside it
            trace.finish("interrupted" if isinstance(e, KeyboardInterrupt) else "failed")
        raise
    outcome: Outcome = "interrupted" if interrupt.is_set() else "done"
    if writer is not None:
        writer.close()
    trace_path = trace.finish(outcome) if trace is not None else None
    if args.audit_rule:
        if trace_path is not None:
            report["trace"] = str(trace_path)
        return _audit_result(args, report, outcome)
    if checkpoint is not None and not load:
        # an interrupted search's checkpoint goes beside the path: a later run would load it
        # from the path as the search's result instead of searching
        where = save_checkpoint(result, target.graph, sibling(checkpoint, outcome))
        extra = {"checkpoint": {"path": str(where), "loaded": False}}
    doc = {**result.to_json(), **extra}
    if trace_path is not None:
        doc["trace"] = str(trace_path)
    if outcome == "interrupted":
        doc["interrupted"] = True
    if not args.json:
        _print_search(doc)
        if outcome == "interrupted":
            kept = ", ".join(f"{k}: {v}" for k, v in (("trace", doc.get("trace")), (
                "checkpoint", doc.get("checkpoint", {}).get("path"))) if v)
            print(f"interrupted: the result so far is above{'; ' + kept if kept else ''}")
    out = doc if args.json else None
    if outcome == "interrupted":
        return Exit(out, 130)
    return out if result.equivalent else Exit(out, 1)


def _audit_result(args: argparse.Namespace, report: dict[str, Any], outcome: str) -> Any:
    """The audit's report, printed; 130 when interrupted, 1 when the rule pruned wrongly."""
    if not args.json:
        print(f"audit of {report['rule']} on {report['target']}: {report['pruned']} "
              f"families pruned, {report['explored']} explored under them, "
              f"{report['checked']} programs verified, {report['equivalent']} "
              f"equivalent; {'no' if report['sound'] else len(report['wrongly_pruned'])}"
              f" wrongly pruned ({report['seconds']:.1f} s)")
        for w in report["wrongly_pruned"]:
            print(f"  {w['family']} ({w['rule']}: {w['reason']}): {w['finding']}")
        if outcome == "interrupted":
            print("interrupted: the audit so far is above")
    if outcome == "interrupted":
        report["interrupted"] = True
    out = report if args.json else None
    return Exit(out, 130) if outcome == "interrupted" else out if report["sound"] else \
        Exit(out, 1)


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
    ex = doc.get("executor")
    if ex and ex.get("name") != "local":
        print(f"  on {ex['name']}: {ex['workers']} worker(s), {ex['tasks']} tasks")
    seed = doc.get("seed")
    if seed:
        again = f", found again as {seed['found_again_as']}" if seed["found_again_as"] else ""
        print(f"  branch and bound started from {seed['id']}, a one-kernel program modeled at "
              f"{seed['modeled_us']:.2f} µs{again}")
    tally = doc.get("by_kernel")
    if tally:
        print(f"  several kernels, proved kernel by kernel: "
              f"{tally.get('kernel_choices_proved', 0)} kernel map choices proved, "
              f"{tally.get('kernel_choices_refuted', 0)} refuted against their kernel unsplit "
              f"(not built into programs), {tally.get('unsplit_refuted', 0)} families whose "
              "unsplit program is not the target")
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
    db = ResultDB(Path(args.db)) if args.db else ResultDB()
    interrupt = threading.Event()
    copy: dict[str, Path | None] = {}        # where --trace's file went
    with _interruptible(interrupt, "the search stops now; what it found is tuned, checked and "
                        "written"), _extra_trace(args.trace, interrupt, copy) as tracer:
        result = superoptimize(target.workload or target.graph, device=args.device,
                               dtype=args.dtype, measure=args.measure, budget_s=args.budget,
                               out=Path(args.out),
                               search_config=config, checkpoint=args.checkpoint,
                               max_trials=args.max_trials, db=db, label=target.label,
                               interrupt=interrupt, executor=_executor(args),
                               also_at=[dict(_parse_shape(part, "--also-at")
                                             for part in text.split(","))
                                        for text in args.also_at or ()], tracer=tracer)
    doc = result.to_json()
    if copy.get("path") is not None:
        doc.setdefault("files", {})["trace_copy"] = str(copy["path"])
    if not args.json:
        dtype = "" if doc["dtype"] == "float16" else f", dtype: {doc['dtype']}"
        print(f"{doc['target']} on {doc['device']} (measure: {doc['measure']}{dtype}), "
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
            outside = doc.get("fusion", {}).get("outside", [])
            if outside:
                ops = ", ".join(f"{o['op']} ({o['tensor']})" for o in outside)
                print(f"  outside custom kernels: {ops}: {outside[0]['why']}")
        for shaped in result.shapes:
            at = ", ".join(f"{k}={'x'.join(map(str, v))}" for k, v in shaped.shapes.items())
            b = shaped.best
            got = (f"{b.candidate}, {b.latency_us:.2f} µs {b.latency_kind}" if b else
                   "no kernel")
            how = "in kernel.py" if shaped.carried else f"not carried: {shaped.reason}"
            print(f"  also at {at}: {got}, from the checkpoint in {shaped.seconds:.1f} s "
                  f"({how})")
        for name, path in doc["files"].items():
            print(f"  {name}: {path}")
        for note in doc.get("notes", []):
            print(f"  note: {note}")
        if result.interrupted:
            print(f"interrupted: the results so far are in {result.output}; {args.out} is "
                  "as the previous run left it")
    out = doc if args.json else None
    if result.interrupted:
        return Exit(out, 130)
    # 0 only for a kernel whose check ran and passed; a check not run is no pass
    return Exit(out, 0 if result.best is not None and result.best.check.passed else 1)


@contextlib.contextmanager
def _extra_trace(path: str | None, interrupt: threading.Event,
                 where: dict[str, Path | None]) -> Iterator[Any]:
    """`prism optimize --trace F`: a tracer whose events also go to F (plain text unless F ends
    in .gz), written beside F and moved there when the run ends (beside it when the run was
    interrupted or failed), as `prism search --trace`; `where["path"]` says where it went.
    Yields None (the pipeline's own tracer) without one."""
    if path is None:
        yield None
        return
    from prism.outputs import OutputFile
    from prism.trace import JsonlWriter, Tracer
    trace = OutputFile(path, "--trace")
    tracer = Tracer(keep=False)
    writer = JsonlWriter(trace.staging, fix="free space there or choose another --trace",
                         shown=trace.path)
    tracer.subscribe(writer, required=True)     # a trace that cannot be written stops the run
    try:
        yield tracer
    except BaseException as e:
        writer.close()
        where["path"] = trace.finish("interrupted" if isinstance(e, KeyboardInterrupt) else
                                     "failed")
        raise
    writer.close()
    where["path"] = trace.finish("interrupted" if interrupt.is_set() else "done")


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
        from prism.bench import NINE, measured_section
        results = bench_report.latest_results(out, covering=NINE)
        doc = dict(bench_report.load_results(results))
        # a GPU's files committed after the run count: the measured rows are read now
        doc["measured"] = measured_section(out)
        changed = bench_report.rewrite_readme(readme, doc, str(results))
        doc = {"readme": str(readme), "results": str(results), "changed": changed}
        if not args.json:
            print(f"{readme}: {'rewritten' if changed else 'unchanged'} from {results}")
        return doc if args.json else None
    return _bench_run(args, out)


def _bench_run(args: argparse.Namespace, out: Path) -> Any:
    from dataclasses import replace

    from prism import bench, bench_report
    base = (bench.QUICK_ABLATION if args.quick else bench.ABLATION) if args.ablation else \
        (bench.QUICK if args.quick else bench.FULL)
    settings = replace(base, device=args.device,
                       runs=args.runs, executor=args.executor, workers=args.workers,
                       ray_address=args.ray_address)
    _ = settings.where      # an unknown executor or a bad count: before any work
    if args.budget is not None:
        settings = replace(settings, budget_s=args.budget)
    if args.max_block_ops is not None:
        settings = replace(settings, max_block_ops=args.max_block_ops)
    if args.concrete_budget is not None:
        settings = replace(settings, concrete_budget_s=args.concrete_budget)
    caps = None
    if args.scaling:
        caps = bench.QUICK_SCALING_CAPS if args.quick else bench.SCALING_CAPS

    def progress(kind: str, item: dict[str, Any]) -> None:
        if kind in ("ablation", "flag"):
            what = item.get("label", "symbolic against concrete")
            print(f"ablation {item['workload']} ({what}): {_ratio_text(item)}", file=sys.stderr,
                  flush=True)
        elif kind == "row":
            state = item.get("error") or (f"{item['search_seconds']:.1f} s search, "
                                          f"{item['families_generated']} families, "
                                          f"{item['search_state']}")
            print(f"{item['workload']}: {state}", file=sys.stderr, flush=True)
        else:
            print(f"scaling {item['workload']} cap {item['cap']}: {item['search_seconds']:.1f} "
                  f"s, {item['families_generated']} families", file=sys.stderr, flush=True)

    if args.ablation:       # the ablation alone (its own run: `prism bench --ablation`)
        from prism.bench_ablation import PRISM_FIVE
        doc = bench.run_bench([], settings, ablation=args.workloads or PRISM_FIVE,
                              progress=progress, command=_bench_command(args))
    else:
        doc = bench.run_bench(args.workloads or bench.NINE, settings, scaling_caps=caps,
                              progress=progress, command=_bench_command(args))
    if not args.ablation:
        doc["measured"] = bench.measured_section(out)
    doc["files"] = bench_report.write_history(doc, out)
    if not args.json:
        print(bench_report.markdown(doc))
        for name, path in doc["files"].items():
            print(f"{name}: {path}")
    failed = any("error" in r for r in doc["rows"])
    return Exit(doc if args.json else None, 1 if failed else 0)


def _ratio_text(row: dict[str, Any]) -> str:
    ratio = "n/a" if row["ratio"] is None else f"{row['ratio']:.2f}x"
    return f"{ratio} ({row['ratio_kind']}), same best: {'yes' if row['same_best'] else 'no'}"


def _bench_command(args: argparse.Namespace) -> str:
    """The command line that reproduces this run, for the results file."""
    words = ["prism", "bench", *args.workloads]
    words += [flag for flag, on in (("--quick", args.quick), ("--scaling", args.scaling),
                                    ("--ablation", args.ablation)) if on]
    for flag, value in (("--budget", args.budget), ("--max-block-ops", args.max_block_ops),
                        ("--concrete-budget", args.concrete_budget),
                        ("--device", args.device), ("--out", args.out),
                        ("--executor", None if args.executor == "local" else args.executor),
                        ("--workers", args.workers), ("--ray-address", args.ray_address)):
        if value is not None:
            words += [flag, str(value)]
    return " ".join(words)


def _cmd_calibrate(args: argparse.Namespace) -> Any:
    """`prism calibrate`: the microbenchmarks (`prism.tune.calibrate`), written to `--out`."""
    from prism.cost import get_device
    from prism.tune import calibrate
    get_device(args.device)                 # an unknown device: before any work
    doc = calibrate.calibrate(args.device, quick=args.quick)
    doc["file"] = str(calibrate.write(doc, Path(args.out)))
    if not args.json:
        print(calibrate.text(doc))
        print(f"  written: {doc['file']}")
    return doc if args.json else None


def _cmd_axioms(args: argparse.Namespace) -> Any:
    """`prism axioms discover`: candidate identities from templates, decided by z3, tried on the
    Mirage corpus (`prism.expr.discover`)."""
    from prism.expr import discover as disc
    from prism.smt import prove_axiom
    from prism.verify.equiv import verify
    from prism.workloads import mirage_corpus
    ops = tuple(o.strip() for o in args.ops.split(",") if o.strip()) if args.ops \
        else disc.DEFAULT_OPS
    templates = tuple(t.strip() for t in args.templates.split(",")) if args.templates \
        else disc.TEMPLATES
    bad = sorted(set(templates) - set(disc.TEMPLATES))
    if bad:
        raise UsageError(f"unknown template {', '.join(bad)}: give some of "
                         f"{', '.join(disc.TEMPLATES)}")
    folder = Path(args.corpus) if args.corpus else mirage_corpus.default_folder()
    corpus = [] if args.no_corpus or folder is None else mirage_corpus.pairs(folder)
    try:
        report = disc.discover(
            prove_axiom, ops, templates=templates, without=tuple(args.without or ()),
            corpus=corpus, timeout_ms=int(args.timeout * 1000),
            check=lambda target, graph, table: verify(target, graph,
                                                      table=table).verdict == "equivalent")
    except ValueError as e:
        raise UsageError(str(e)) from None
    doc = report.to_json()
    doc["corpus"] = None if not corpus else str(folder)
    if not args.json:
        print(report.text())
        if not corpus:
            print("  no corpus: pass --corpus DIR (mirage_mugraphs) to try the new axioms on it")
    return doc if args.json else None


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


class _Parser(argparse.ArgumentParser):
    """argparse that raises `UsageError` instead of exiting, so that a bad command line is one
    line like every other error, and JSON with `--json`."""

    def error(self, message: str) -> Any:
        raise UsageError(f"{self.prog}: {message}; see `{self.prog} --help`")


def _count(text: str) -> int:
    """A count: an integer ≥ 1 (`--max-trials 0` is not "all")."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1 or str(value) != text.strip().lstrip("+"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer (a count, ≥ 1)")
    return value


def _natural(text: str) -> int:
    """An index or a seed: an integer ≥ 0."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer ≥ 0")
    return value


def _seconds(text: str) -> float:
    """A time: a finite number of seconds > 0."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive finite number of seconds")
    return value


def _dtype(text: str) -> str:
    """A dtype Prism runs programs in, by torch's name or an alias (`bf16`)."""
    from prism.ir.dtypes import get_dtype
    try:
        return get_dtype(text).name
    except PrismError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a dtype Prism runs: give float16, "
                                         "bfloat16 or float32 (or fp16, bf16, fp32)") from None


def _grid_dims(text: str) -> tuple[int, ...]:
    """Grid-dim counts such as `1,2`: each 1, 2 or 3."""
    parts = [p.strip() for p in text.split(",")]
    if not all(p in ("1", "2", "3") for p in parts):
        raise argparse.ArgumentTypeError(f"{text!r} is not grid-dim counts from 1, 2, 3 joined "
                                         "by commas, e.g. 1,2")
    return tuple(sorted({int(p) for p in parts}))


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="prism", description="Prism Workbench: a symbolic "
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
    sp.add_argument("--index", type=_natural, help="only the graph at this position")
    sp.add_argument("--out", help="also save each graph as our JSON into this folder")
    target_help = "a workload name, path.py:function, or a graph .json file (ours or Mirage's)"
    sp = command("render", _cmd_render, "render a graph to SVG: kernels, block-graph clusters "
                 "with grid, loop range, maps and tile shapes")
    sp.add_argument("target", help=target_help)
    sp.add_argument("--index", type=_natural, help="for a file of many graphs: only this one")
    sp.add_argument("--known-best", action="store_true",
                    help="render the workload's hand-built fused kernel instead")
    sp.add_argument("-o", "--output", help="the .svg (or .dot) file to write")
    sp = command("interpret", _cmd_interpret, "run a graph in the float64 reference "
                 "interpreter on random inputs and compare with torch")
    sp.add_argument("target", help=target_help)
    sp.add_argument("--index", type=_natural)
    sp.add_argument("--known-best", action="store_true")
    sp.add_argument("--seed", type=_natural, default=0)
    sp = command("check", _cmd_check, "list the workloads, trace one, interpret it and its "
                 "hand-fused kernel against torch, prove, render, print the table")
    sp.add_argument("workload", nargs="?", default=None, help="default: rmsnorm_matmul")
    sp.add_argument("--out", default="out", help="folder for the SVGs and the report")
    sp.add_argument("--seed", type=_natural, default=0)
    sp = command("verify", _cmd_verify, "prove a candidate graph equivalent to a target "
                 "(e-graph with the axiom table), or refute it with a counterexample")
    sp.add_argument("target", help=target_help)
    sp.add_argument("candidate", help="a graph .json file (ours or Mirage's: each graph is "
                    "verified, or only --index I), or a workload / path.py:function")
    sp.add_argument("--index", type=_natural)
    sp.add_argument("--time-limit", type=_seconds, default=10.0,
                    help="e-graph seconds per graph")
    sp.add_argument("--nodes", type=_count, default=20_000, help="e-graph node limit")
    sp.add_argument("--iterations", type=_count, default=30, help="e-graph iteration limit")
    sp = command("search", _cmd_search, "symbolic search and verification: families "
                 "generated, pruned per rule, kept, and the verified candidates")
    _search_arguments(sp)
    sp.add_argument("--trace", metavar="F.jsonl", help="write every decision to this file")
    sp.add_argument("--audit-rule", metavar="NAME", help="re-explore what rule NAME pruned "
                    "and verify it: exits 1 if an equivalent program was pruned wrongly")
    sp = command("optimize", _cmd_optimize, "the whole pipeline: search, instantiate, generate "
                 "Triton, tune; writes kernel.py, kernel.ptx, trace.jsonl.gz and report.html")
    _search_arguments(sp)
    sp.add_argument("--measure", default="model", choices=("model", "interpret", "cuda"),
                    help="model: the cost model; interpret: Triton's interpreter (correctness, "
                    "CPU); cuda: CUDA events on a GPU")
    sp.add_argument("--dtype", type=_dtype, help="float16, bfloat16 or float32 (or fp16, bf16, "
                    "fp32): what the program runs in, its bytes and its check's tolerance "
                    "(default: the workload's, float16 unless it says)")
    sp.add_argument("--out", default="out", help="folder for the outputs (default out/)")
    sp.add_argument("--max-trials", type=_count, default=8,
                    help="configurations compiled and measured (default 8)")
    sp.add_argument("--also-at", action="append", metavar="NAME=16x1024[,NAME=...]",
                    help="another shape set to serve from the same search (repeat for "
                    "several): the search's checkpoint re-instantiated and tuned there; "
                    "kernel.py carries every shape and dispatches on the input shapes")
    sp.add_argument("--db", metavar="F.jsonl", help="the result database (default "
                    "~/.cache/prism/results.jsonl, or $PRISM_CACHE_DIR/results.jsonl)")
    sp.add_argument("--trace", metavar="F.jsonl", help="also write every event to this file, "
                    "as plain text unless F ends in .gz (--out always holds trace.jsonl.gz)")
    sp = command("calibrate", _cmd_calibrate, "measure launch overhead, HBM and L2 bandwidth "
                 "and few-block bandwidth with Triton microbenchmarks, beside the cost model's "
                 "numbers (on a CPU: the kernels checked in the interpreter, times interpreted)")
    sp.add_argument("--device", default="h100", help="the cost model's device to compare with "
                    "(h100, h200, a100)")
    sp.add_argument("--quick", action="store_true", help="smaller buffers, fewer block counts")
    sp.add_argument("--out", default="bench/results/calibration",
                    help="folder for calibration-<device>-<kind>.json")
    sp = command("bench", _cmd_bench, "search cost and kernel quality per workload, the "
                 "search against the block-op cap, and the history of runs (DESIGN.md §6)")
    sp.add_argument("workloads", nargs="*", metavar="WORKLOAD",
                    help="workload names or path.py:function (default: the nine)")
    sp.add_argument("--quick", action="store_true",
                    help="reduced caps and budget, the program's own ops as the vocabulary (CI)")
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
    sp.add_argument("--ablation", action="store_true", help="instead of the rows: the "
                    "symbolic search against the same engine with grid sizes, loop range and "
                    "maps concrete, over each workload's shapes (default Prism's five; budget "
                    "60 s per search, 4 block ops; --quick: two shapes, 5 s per concrete "
                    "search)")
    sp.add_argument("--concrete-budget", type=float, metavar="S", help="with --ablation: "
                    "seconds per concrete search (default: --budget)")
    sp.add_argument("--runs", metavar="DIR", help="keep each workload's optimize outputs "
                    "(trace.jsonl.gz, result.json, report.html) in DIR/WORKLOAD")
    sp.add_argument("--compare", nargs=2, metavar=("A.json", "B.json"),
                    help="print what changed from run A to run B, row by row, as B / A")
    sp.add_argument("--readme", action="store_true", help="rewrite README.md's workload table "
                    "from the latest full run in --out (runs nothing)")
    _executor_arguments(sp)
    axioms = sub.add_parser("axioms", help="the axiom table's tools",
                            description="the axiom table's tools")
    asub = axioms.add_subparsers(dest="action", required=True, metavar="ACTION")
    sp = asub.add_parser("discover", help="propose identities from templates (ops through "
                         "movement heads and other ops, reductions over size-1 dims, "
                         "regroupings of split data), keep what z3 proves, report which "
                         "unproven corpus graphs each new one proves",
                         description="axiom discovery (prism.expr.discover)")
    sp.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    sp.set_defaults(func=_cmd_axioms)
    sp.add_argument("--ops", help="ops to propose identities for, comma-separated (default: "
                    "exp, neg, sqrt, mul_scalar, add, mul, div, sum, mean, max)")
    sp.add_argument("--templates", help="comma-separated: through-head, through-op, size-one, "
                    "regrouping (default: all)")
    sp.add_argument("--without", action="append", metavar="GROUP", help="run against the table "
                    "less this group or axiom (repeat): what discovery finds without it")
    sp.add_argument("--corpus", metavar="DIR", help="Mirage's mugraph folder (default: "
                    "$PRISM_MIRAGE_CORPUS, else shared/external/mirage_mugraphs beside the repo)")
    sp.add_argument("--no-corpus", action="store_true", help="do not try the axioms on a corpus")
    sp.add_argument("--timeout", type=_seconds, default=10.0, help="z3 seconds per query")
    _steps_commands(command)
    sp = command("lab", _cmd_lab, "JupyterLab on the notebooks (--json: print the command only)")
    sp.add_argument("--notebooks", default="notebooks")
    return p


# -- step records (prism.steps): export-steps, check-steps ---------------------------------------

def _steps_commands(command: Callable[[str, Command, str], argparse.ArgumentParser]) -> None:
    sp = command("export-steps", _cmd_export_steps, "one record per decision of a search "
                 "(state before, action, state after, evidence, rationale) from a trace "
                 "written with --trace-graphs, filtered to balance action kinds")
    sp.add_argument("trace", metavar="TRACE.jsonl")
    sp.add_argument("--out", required=True, metavar="STEPS.jsonl")
    sp.add_argument("--balance", type=float, default=4.0, help="a group of records keeps at "
                    "most this many times the rarest group's (at least 64); 0: keep all")
    sp.add_argument("--keep-duplicates", action="store_true",
                    help="keep near-duplicate records (the same action on the same state, "
                    "tensor numbering aside)")
    sp = command("check-steps", _cmd_check_steps, "replay step records: each action applied "
                 "to its state gives the next state, and the evidence re-checks; exits 1 on any "
                 "failure")
    sp.add_argument("steps", metavar="STEPS.jsonl")


def _cmd_export_steps(args: argparse.Namespace) -> Any:
    from prism.steps import export_steps
    summary = export_steps(args.trace, args.out, balance=args.balance,
                           dedupe=not args.keep_duplicates)
    if args.json:
        return {"out": args.out, **summary}
    print(f"{'group':28} {'exported':>9} {'near-dup':>9} {'balanced':>9} {'kept':>6}")
    for group, c in summary["groups"].items():
        print(f"{group:28} {c['exported']:>9} {c['near_duplicates']:>9} "
              f"{c['balanced_out']:>9} {c['kept']:>6}")
    for why, n in summary["skipped"].items():
        print(f"skipped {n}: {why}")
    print(f"{summary['kept']} of {summary['exported']} records written to {args.out}")
    return None


def _cmd_check_steps(args: argparse.Namespace) -> Any:
    from prism.steps import check_steps
    report = check_steps(args.steps)
    if not args.json:
        for f in report.failures:
            print(f"FAIL {f['id']} ({f['kind']}, {f['source']}): {f['problem']}")
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(report.checked.items()))
        print(f"{sum(report.checked.values())} records checked ({kinds}): "
              f"{len(report.failures)} failed")
        for why, n in report.not_rechecked.items():
            print(f"not re-checked: {n} {why}")
    result = report.to_json() if args.json else None
    return result if report.ok else Exit(result, 1)


def _executor_arguments(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--executor", default="local", choices=("local", "processes", "ray"),
                    help="where the search's tasks run: this process (default), a pool of "
                    "processes, or a Ray cluster; the result is the same on each")
    sp.add_argument("--workers", type=_count, help="how many worker processes (default: every "
                    "CPU of the machine, or of the Ray cluster)")
    sp.add_argument("--ray-address", metavar="ADDR", help="the Ray cluster to run on (default "
                    "$PRISM_RAY_ADDRESS, else a local one is started)")


def _executor(args: argparse.Namespace) -> Any:
    from prism.search.executors import Executor
    return Executor(args.executor, args.workers, args.ray_address)


def _search_arguments(sp: argparse.ArgumentParser) -> None:
    """The arguments `search` and `optimize` share: the target, shapes, budget and caps."""
    _executor_arguments(sp)
    sp.add_argument("target", help="a workload name or path.py:function (@prism.workload)")
    sp.add_argument("--shape", action="append", metavar="NAME=8x1024",
                    help="a parameter's shape (repeat for several)")
    sp.add_argument("--budget", type=_seconds, default=600.0, help="seconds (default 600)")
    sp.add_argument("--device", default="h100", help="h100, h200 or a100: the hardware rule's "
                    "limits, the parameter candidates, the cost model and the tuner (default "
                    "h100)")
    sp.add_argument("--checkpoint", metavar="F", help="load this symbolic checkpoint and "
                    "re-instantiate it at the shapes (no search); if it does not exist, "
                    "search and write it")
    sp.add_argument("--disable", action="append", metavar="RULE",
                    help="switch a pruning rule off (repeat for several)")
    sp.add_argument("--max-block-ops", type=_count)
    sp.add_argument("--max-kernel-ops", type=_count)
    sp.add_argument("--max-accumulators", type=_count)
    sp.add_argument("--max-block-inputs", type=_count)
    sp.add_argument("--max-block-outputs", type=_count,
                    help="tensors one block graph may store (default 1, Prism's)")
    sp.add_argument("--max-custom-kernels", type=_count)
    sp.add_argument("--max-families", type=_count, help="stop after this many families")
    sp.add_argument("--split-loops", action=argparse.BooleanOptionalAction, default=None,
                    help="also try each proved one-kernel program with its summing loop split "
                    "across blocks and a second kernel (split-key attention); on for "
                    "`optimize`, off for `search` (Prism's caps)")
    sp.add_argument("--member-bound", action=argparse.BooleanOptionalAction, default=None,
                    help="branch and bound on each complete program's best modeled member "
                    "that the quick trial does not refute, before its proof (prunes in a "
                    "one-kernel search); on for `optimize`, off for `search` (Prism's caps)")
    sp.add_argument("--grid-dims", type=_grid_dims, help="grid-dim counts to try, e.g. 1,2")
    sp.add_argument("--block-ops", help="block vocabulary, comma-separated (default: Prism's "
                    "twelve block ops; `optimize` adds the program's other ops)")
    sp.add_argument("--kernel-ops", help="pre-defined kernel ops to allow, comma-separated")
    sp.add_argument("--accumulators", help="accumulators to allow, comma-separated")
    sp.add_argument("--seed", type=_natural, default=0, help="0: canonical order")
    sp.add_argument("--order", default="canonical", metavar="ORDER",
                    help="the order each node tries its children in: canonical (default), "
                    "analytic (by the modeled lower bound) or learned (by the trained "
                    "evaluator, prism.learn); the same programs are found under each")
    sp.add_argument("--order-model", metavar="F", help="the learned order's weights (default: "
                    "the committed prism/learn/evaluator.pt)")
    sp.add_argument("--trace-graphs", action="store_true", help="record each family's partial "
                    "sGraph on the trace (about 10 KB a family)")


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    as_json = "--json" in argv       # known even when the command line does not parse
    started = time.perf_counter()
    try:
        args = _parser().parse_args(argv)
        result = args.func(args)
        code = 0
        if isinstance(result, Exit):
            result, code = result.result, result.code
        if args.json:
            if isinstance(result, dict):
                result.setdefault("seconds", round(time.perf_counter() - started, 3))
            print(json.dumps(result))
        sys.stdout.flush()              # a closed pipe shows here, not at exit
        return code
    except PrismError as e:
        return _fail(as_json, type(e).__name__, str(e), 2)
    except KeyboardInterrupt:
        return _fail(as_json, "KeyboardInterrupt", "interrupted (a second Ctrl-C stops at once; "
                     "what was written so far is beside the output, named .interrupted-)", 130)
    except BrokenPipeError:
        return _closed_pipe()
    except MemoryError as e:
        return _fail(as_json, "MemoryError", f"out of memory ({e}); give smaller shapes "
                     "(--shape)", 2)
    except Exception as e:  # a bug: one line and a code of its own, the traceback on request
        if os.environ.get("PRISM_DEBUG"):
            raise
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        return _fail(as_json, "InternalError", f"internal error: {type(e).__name__}: {first}; "
                     "this is a bug in prism: please report it with the command line "
                     "(PRISM_DEBUG=1 shows the traceback)", 70)


def _fail(as_json: bool, kind: str, message: str, code: int) -> int:
    try:
        if as_json:
            print(json.dumps({"error": {"type": kind, "message": message}}), flush=True)
        else:
            print(f"error: {message}", file=sys.stderr, flush=True)
    except BrokenPipeError:
        return _closed_pipe()
    return code


def _closed_pipe() -> int:
    """The reader of stdout went away (`prism workloads | head`): stop quietly, as a program
    killed by SIGPIPE would; stdout is pointed at /dev/null so that Python's own flush at exit
    does not complain."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    return 141


if __name__ == "__main__":
    sys.exit(main())
