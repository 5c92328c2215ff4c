"""`prism bench --ablation`: the symbolic search against the same engine with its execution
parameters concrete, as Prism reports it (issue 15 item 2; DESIGN.md §6; REFERENCE §1.2, §1.8).

    section = run_ablation(["rmsnorm_matmul"], ABLATION)
    section["rows"][0]["ratio"], section["flags"]

**Rows.** Per workload, over its shapes (DESIGN.md §5: five, four for attention; the first
`settings.ablation_shapes` of them when set), two sides, each in a fresh process of its own:

- *symbolic*: the search at the first shape and its checkpoint written (`save_checkpoint`), then
  at every other shape the checkpoint read and re-instantiated (`reinstantiate`: no search), as
  Prism's harness does;
- *concrete*: at every shape the search with every parameter concrete (`SearchConfig.concrete`:
  grid sizes, loop range, imap, fmap, omap decided as each block graph opens or closes, its
  programs accepted by random testing at their own sizes: `prism.search.concrete`).

At each shape each side then instantiates the parameters of what it found and tunes it with the
cost model (`prism.pipeline.instantiate`, `prism.tune.tune`, a fresh result database, so nothing
comes from a cache): the pipeline's stages 1-3. Its last stage, the winner's check in the
interpreter, is left out: Prism's timing has no such check. A side's `seconds` are the wall time
of those stages summed over the shapes; `ratio` is concrete / symbolic (`search_ratio` the same
for the searches and re-instantiations alone). Every search gets `settings.budget_s`; one stopped
by it says so in its shape's `search_state`, the side is not `complete`, and `ratio_kind` says how
the ratio is bounded (a stopped side would have taken longer).

`same_best`: the two tuned winners model the same latency at every shape (relative 1e-9). Where
they do not, `why` names each such shape, the two kernels, and what the other side did with the
better one: not reached before a budget stopped it; among the candidates' sizes but not among
the at most `MAX_CONFIGS` the tuner takes; or not among the symbolic side's candidates at all
(its checkpoint was searched at the first shape, where branch and bound prunes by that shape's
incumbent).

**Flags.** Prism's per-flag ablation (its driver runs rmsnorm_mlp at one shape): at the first
shape of one workload, the search and tuning with grid sizes and loop range concrete (maps
symbolic) and with each map concrete alone, each in a fresh process, beside the symbolic side's
first shape (`ABLATION_FLAGS`).
"""

from __future__ import annotations

import hashlib
import math
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from prism.bench import BenchSettings

PRISM_FIVE = ("rmsnorm_matmul", "rmsnorm_mlp", "swiglu", "attention", "qknorm_attention")
ALL_CONCRETE = ("grid", "loop", "imap", "fmap", "omap")
# Prism's per-flag ablation: sizes concrete with maps symbolic, then each map concrete alone
ABLATION_FLAGS = (("grid", "loop"), ("imap",), ("fmap",), ("omap",))
FLAGS_TARGET = "rmsnorm_mlp"      # the workload Prism's ablation driver runs
SAME = 1e-9                       # relative: two winners' modeled latencies are the same


def run_ablation(targets: Sequence[str], settings: BenchSettings, *, flags: bool = True,
                 progress: Callable[[str, dict[str, Any]], None] | None = None
                 ) -> dict[str, Any]:
    """The ablation section: one row per workload and, with `flags`, the per-flag rows on
    `FLAGS_TARGET` (or the first target). `progress` hears ("ablation" | "flag", row)."""
    from prism.bench import _in_fresh_process
    rows, sides = [], {}
    for target in targets:
        symbolic = _in_fresh_process(ablation_side, target, (), settings)
        concrete = _in_fresh_process(ablation_side, target, ALL_CONCRETE, settings)
        sides[target] = symbolic
        row = ablation_row(target, symbolic, concrete)
        rows.append(row)
        if progress:
            progress("ablation", row)
    flag_rows: list[dict[str, Any]] = []
    if flags and targets:
        target = FLAGS_TARGET if FLAGS_TARGET in targets else targets[0]
        base = sides[target]
        for chosen in ABLATION_FLAGS:
            side = _in_fresh_process(ablation_side, target, chosen, replace(
                settings, ablation_shapes=1))
            flag_rows.append(flag_row(target, base, side))
            if progress:
                progress("flag", flag_rows[-1])
    return {"rows": rows, "flags": flag_rows, "note": ablation_note(rows, flag_rows, settings)}


def ablation_side(target: str, concrete: Sequence[str], settings: BenchSettings
                  ) -> dict[str, Any]:
    """One side over the workload's shapes, in this process: with `concrete` empty the
    symbolic side (one search, then its checkpoint at every other shape), else a search at
    every shape with those parameters concrete."""
    from prism.bench import peak_rss_mb
    from prism.cost import get_device
    from prism.ir.serialize import graph_to_json
    from prism.search import search
    from prism.search.checkpoint import load_checkpoint, reinstantiate, save_checkpoint
    from prism.targets import resolve
    (found,) = resolve(target)
    if found.workload is None:
        from prism.bench import BenchError
        raise BenchError(f"{target} is a graph file; the ablation needs a workload (its shapes "
                         "are changed): give a workload name or path.py:function")
    sets = list(found.workload.shape_sets)[:settings.ablation_shapes or None]
    spec = get_device(settings.device)
    budget = (settings.concrete_budget_s or settings.budget_s) if concrete else settings.budget_s
    entries: list[dict[str, Any]] = []
    programs: list[list[str]] = []
    candidates: list[list[dict[str, Any]]] = []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "checkpoint.json"
        for i, shapes in enumerate(sets):
            graph = found.workload.with_shapes(**shapes).graph
            config = settings.search_config(graph, budget, concrete=frozenset(concrete))
            start = time.perf_counter()
            if not concrete and i > 0:
                result = reinstantiate(load_checkpoint(path), graph, config, label=found.label)
            else:
                result = search(graph, config, label=found.label, executor=settings.where)
                if not concrete:
                    save_checkpoint(result, graph, path)
            searched = time.perf_counter() - start
            entry, configs = _tuned(graph, result, spec, settings, budget,
                                    Path(tmp) / f"db{i}.jsonl")
            entry.update({"shape": {k: list(v) for k, v in shapes.items()},
                          "search_seconds": round(searched, 3),
                          "seconds": round(time.perf_counter() - start, 3),
                          "search_state": "re-instantiated" if result.stop_reason ==
                          "checkpoint" else _state(result)})
            entries.append(entry)
            programs.append(sorted({_digest(c.concrete()) for c in configs}))
            # so that `why` can tell the tuner's sample from the search's reach, if it asks
            candidates.append([graph_to_json(c.graph) for c in result.equivalent]
                              if not concrete else [])
    return {"concrete": sorted(concrete), "shapes": entries,
            "seconds": round(sum(e["seconds"] for e in entries), 3),
            "search_seconds": round(sum(e["search_seconds"] for e in entries), 3),
            "complete": all(not e["search_state"].startswith("stopped") for e in entries),
            "peak_rss_mb": peak_rss_mb(), "device": settings.device, "_programs": programs,
            "_candidates": candidates}


def _tuned(graph: Any, result: Any, spec: Any, settings: BenchSettings, budget: float,
           db: Path) -> tuple[dict[str, Any], list[Any]]:
    """Parameter instantiation and tuning with the cost model: the shape's figures and its
    configurations."""
    from prism.ir.serialize import graph_to_json
    from prism.pipeline import instantiate
    from prism.search.maps import map_summary
    from prism.tune import ResultDB, make_backend, tune
    configs = instantiate(graph, result, spec)
    tuning = tune(configs, make_backend("model", spec), spec, compile_ptx=settings.compile_ptx,
                  db=ResultDB(db), budget_s=budget)
    accepted = result.equivalent
    entry: dict[str, Any] = {
        "tune_seconds": round(tuning.seconds, 3),
        "families_generated": result.generated, "candidates_checked": len(result.candidates),
        "candidates_accepted": len(accepted),
        "accepted_by": dict(Counter(c.verdict.method for c in accepted)),
        "check_seconds": round(sum(c.verdict.seconds for c in result.candidates), 3),
        "configs": len(configs), "best": None}
    best = tuning.best
    if best is not None:
        verdicts = {c.id: c.verdict for c in result.candidates}
        concrete = best.config.concrete()
        verdict = verdicts.get(best.config.candidate)
        entry["best"] = {
            "candidate": best.config.candidate, "config": best.config.id,
            "modeled_us": round(best.modeled_us, 6), "latency_kind": best.kind,
            "accepted_by": verdict.method if verdict else "the input program",
            "num_kernels": concrete.num_kernels, "program": _digest(concrete),
            "maps": map_summary(concrete), "graph": graph_to_json(concrete)}
    return entry, configs


def _reaches(side: dict[str, Any], k: int, program: str) -> bool:
    """Whether some accepted candidate of `side` at shape `k` is `program` at some feasible
    assignment of its sizes (all of them, not the tuner's sample)."""
    from prism.cost import get_device
    from prism.instantiate.params import assignments
    from prism.ir.serialize import graph_from_json
    from prism.ir.spec import substitute_graph
    spec = get_device(side["device"])
    for doc in side["_candidates"][k]:
        graph = graph_from_json(doc)
        if any(_digest(substitute_graph(graph, env)) == program
               for env in assignments(graph, spec, limit=10**6)):
            return True
    return False


def _digest(graph: Any) -> str:
    """A short name for a program, the same for the same program (`canonical_program`)."""
    from prism.search.concrete import canonical_program
    return hashlib.sha256(canonical_program(graph).encode()).hexdigest()[:12]


def _state(result: Any) -> str:
    from prism.bench import search_state
    return search_state(result.complete, result.exhaustive, result.stop_reason)


def ablation_row(target: str, symbolic: dict[str, Any], concrete: dict[str, Any]
                 ) -> dict[str, Any]:
    """The row of one workload from its two sides."""
    a, b = symbolic["seconds"], concrete["seconds"]
    diffs = [_why(s, c, symbolic, concrete, k) for k, (s, c)
             in enumerate(zip(symbolic["shapes"], concrete["shapes"], strict=True))
             if not _same(s, c)]
    row: dict[str, Any] = {
        "workload": target, "shapes": len(symbolic["shapes"]),
        "symbolic_seconds": a, "concrete_seconds": b, "ratio": _ratio(b, a),
        "ratio_kind": _kind(symbolic["complete"], concrete["complete"]),
        "search_ratio": _ratio(concrete["search_seconds"], symbolic["search_seconds"]),
        "same_best": not diffs,
        # per shape: the two winners are the same program, not only the same latency
        "same_program": [bool(s["best"] and c["best"] and s["best"]["program"] ==
                              c["best"]["program"])
                         for s, c in zip(symbolic["shapes"], concrete["shapes"], strict=True)],
        "symbolic": _public(symbolic), "concrete": _public(concrete)}
    if diffs:
        row["why"] = "; ".join(diffs)
    return row


def flag_row(target: str, symbolic: dict[str, Any], side: dict[str, Any]) -> dict[str, Any]:
    """One flag setting at the first shape, beside the symbolic side's first shape."""
    s, c = symbolic["shapes"][0], side["shapes"][0]
    row: dict[str, Any] = {
        "workload": target, "shape": c["shape"], "concrete": side["concrete"],
        "label": _flag_label(side["concrete"]),
        "symbolic_seconds": s["seconds"], "seconds": c["seconds"],
        "ratio": _ratio(c["seconds"], s["seconds"]),
        "search_ratio": _ratio(c["search_seconds"], s["search_seconds"]),
        "ratio_kind": _kind(not s["search_state"].startswith("stopped"), side["complete"]),
        "same_best": _same(s, c), "side": _public(side)}
    if not row["same_best"]:
        row["why"] = _why(s, c, symbolic, side, 0)
    return row


def _flag_label(concrete: Sequence[str]) -> str:
    if set(concrete) == {"grid", "loop"}:
        return "grid sizes and loop range concrete, maps symbolic"
    return f"{', '.join(concrete)} concrete, the rest symbolic"


def _same(s: dict[str, Any], c: dict[str, Any]) -> bool:
    a, b = (e["best"]["modeled_us"] if e["best"] else math.inf for e in (s, c))
    return a == b or abs(a - b) <= SAME * max(abs(a), abs(b))


def _why(s: dict[str, Any], c: dict[str, Any], symbolic: dict[str, Any],
         concrete: dict[str, Any], k: int) -> str:
    """Why the two winners at shape `k` differ, from what each side tried."""
    shape = ", ".join(f"{n}{tuple(v)}" for n, v in s["shape"].items())
    sb, cb = s["best"], c["best"]
    text = (f"at {shape}: symbolic {_kernel(sb)}, concrete {_kernel(cb)}")
    if cb is not None and (sb is None or cb["modeled_us"] < sb["modeled_us"]):
        if cb["program"] in symbolic["_programs"][k]:
            return text + " (the symbolic side tuned the concrete winner too; ranked otherwise)"
        if _reaches(symbolic, k, cb["program"]):
            return text + (" (the concrete winner is one of the symbolic candidates' sizes, "
                           "not among the at most 20 evenly spaced the tuner takes)")
        where = ("its checkpoint, searched at the first shape, holds no candidate with it "
                 "(branch and bound there prunes by that shape's incumbent)" if k > 0 else
                 "its search found no candidate with it")
        if s["search_state"].startswith("stopped"):
            where = f"its search was {s['search_state']} before it found it"
        return text + f" (the symbolic side: {where})"
    if sb is not None and sb["program"] in concrete["_programs"][k]:
        return text + " (the concrete side tuned the symbolic winner too; ranked otherwise)"
    if c["search_state"].startswith("stopped"):
        return text + f" (the concrete search was {c['search_state']} before it reached it)"
    return text + " (the concrete search's programs do not include the symbolic winner)"


def _kernel(best: dict[str, Any] | None) -> str:
    if best is None:
        return "no kernel"
    return (f"{best['modeled_us']:.4g} µs modeled ({best['config']}, {best['num_kernels']} "
            f"kernel(s), program {best['program']})")


def _kind(symbolic_complete: bool, concrete_complete: bool) -> str:
    if symbolic_complete and concrete_complete:
        return "exact"
    if symbolic_complete:
        return "lower bound (the concrete side was stopped by its budget)"
    if concrete_complete:
        return "upper bound (the symbolic side was stopped by its budget)"
    return "no bound (both sides were stopped by their budgets)"


def _public(side: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in side.items() if not k.startswith("_")}


def _ratio(a: float, b: float) -> float | None:
    return round(a / b, 3) if b > 0 and math.isfinite(a) and math.isfinite(b) else None


def ablation_note(rows: Sequence[dict[str, Any]], flags: Sequence[dict[str, Any]],
                  settings: BenchSettings) -> str:
    """What the section measured, in words, and where a budget stopped a side."""
    caps = (f"{settings.max_block_ops} block ops" if settings.max_block_ops is not None
            else "the pipeline's caps")
    text = (f"Each side: search, parameter instantiation and tuning with the cost model on "
            f"{settings.device} (the winner's interpreter check left out), wall time summed "
            f"over each workload's shapes; the symbolic side searches the first shape and "
            f"re-instantiates its checkpoint at the others, the concrete side searches every "
            f"shape with grid sizes, loop range, imap, fmap and omap decided as each block "
            f"graph opens or closes, accepting programs by random testing at their own sizes "
            f"(Mirage's check, not a proof). Caps: {caps}; budget {settings.budget_s:g} s per "
            f"symbolic search and {settings.concrete_budget_s or settings.budget_s:g} s per "
            f"concrete one.")
    stopped = [f"{r['workload']} ({side}: "
               f"{sum(e['search_state'].startswith('stopped') for e in r[side]['shapes'])} of "
               f"{r['shapes']} shapes)" for r in rows for side in ("symbolic", "concrete")
               if not r[side]["complete"]]
    if stopped:
        text += (" Stopped by the budget, so their seconds are partial and their ratios "
                 f"bounds: {', '.join(stopped)}.")
    if flags:
        text += (f" The per-flag rows search {flags[0]['workload']} at its first shape "
                 "only, as Prism's ablation driver does.")
    return text
