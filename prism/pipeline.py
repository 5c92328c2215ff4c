"""`superoptimize`: the whole pipeline, stage by stage (a table of contents).

    result = prism.superoptimize("rmsnorm_matmul", device="h100", measure="model", budget_s=120)
    result.best.triton_source; result.best.latency_us; result.best.latency_kind; result.trace

1. **search**     symbolic search and verification (`prism.search`), or a symbolic checkpoint
                  re-instantiated at this program's shapes;
2. **instantiate** grid sizes and loop ranges for every verified sGraph
                  (`prism.instantiate.params`); the input program itself is always a candidate
                  too, so a search that finds nothing still leaves a kernel (labelled as such);
3. **tune**       screen every configuration with the cost model, generate and compile the best in
                  parallel, measure them with the chosen backend (`prism.tune`);
4. **check**      run the winner in Triton's interpreter (or on the GPU) against the float64
                  interpreter and the workload's torch reference;
5. **write**      `kernel.py`, `kernel.ptx`, `trace.jsonl`, `report.html` and `result.json` into
                  the output folder, when one is given.

Every stage is a `StageStarted`/`StageFinished` pair on the trace; every decision inside is an
event. The budget is shared: the search gets most of it, tuning what the search leaves.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from prism.cost import eager_us, get_device, roofline_us
from prism.errors import PrismError
from prism.frontend.workload import Workload
from prism.ir.graph import KernelGraph
from prism.search import SearchConfig, SearchResult, search
from prism.trace import Event, JsonlWriter, Tracer
from prism.tune import Config, ResultDB, Trial, TuningResult, make_backend, tune
from prism.verify.equiv import Verdict

SEARCH_SHARE = 0.75        # of the budget; tuning and checking get the rest
MAX_CHECK_STEPS = 2048     # blocks × loop iterations the interpreter runs for the final check
MAX_CHECKED = 3            # finalists tried in turn when the best fails its check
INPUT_PROGRAM = "input"    # the candidate id of the user's own program


@dataclass
class BestKernel:
    candidate: str
    config: str
    graph: KernelGraph                  # concrete
    params: dict[str, int]
    latency_us: float
    latency_kind: str
    modeled_us: float
    roofline_us: float
    verdict: Verdict | None             # None for the input program (equivalent by identity)
    triton_source: str
    ptx: dict[str, str]
    symbolic: KernelGraph | None = None  # the verified sGraph this kernel instantiates
    check: dict[str, Any] = field(default_factory=dict)

    @property
    def num_kernels(self) -> int:
        return self.graph.num_kernels

    def to_json(self) -> dict[str, Any]:
        verdict = "equivalent" if self.verdict is None else self.verdict.verdict
        return {"candidate": self.candidate, "config": self.config,
                "latency_us": round(self.latency_us, 4), "latency_kind": self.latency_kind,
                "modeled_us": round(self.modeled_us, 4), "roofline_us": round(self.roofline_us, 4),
                "num_kernels": self.num_kernels,
                "num_custom_kernels": len(self.graph.custom_ops), "verdict": verdict,
                "proof": ("identity (the input program)" if self.verdict is None else
                          f"{self.verdict.method}, {self.verdict.proof_steps} steps, "
                          f"{self.verdict.sizes or 'concrete'} sizes"),
                "params": self.params, "check": self.check}


@dataclass
class OptimizeResult:
    target: str
    device: str
    measure: str
    graph: KernelGraph
    search: SearchResult | None
    tuning: TuningResult | None
    best: BestKernel | None
    eager_us: float
    roofline_us: float
    trace: list[Event]
    seconds: float = 0.0
    files: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        best = self.best.to_json() if self.best else None
        speedup = (self.eager_us / self.best.modeled_us) if self.best else None
        return {"target": self.target, "device": self.device, "measure": self.measure,
                "seconds": round(self.seconds, 3), "best": best,
                "baseline": {"eager_latency_us": round(self.eager_us, 4),
                             "eager_latency_kind": "modeled",
                             "roofline_us": round(self.roofline_us, 4),
                             "modeled_speedup_vs_eager": round(speedup, 3) if speedup else None},
                "search": self.search.summary() if self.search else None,
                "tuning": self.tuning.summary() if self.tuning else None,
                "trials": [t.to_json() for t in self.tuning.finalists] if self.tuning else [],
                "files": self.files, **({"notes": self.notes} if self.notes else {})}


def superoptimize(target: Any, *, device: str = "h100", measure: str = "model",
                  budget_s: float = 600.0, out: str | Path | None = None,
                  search_config: SearchConfig | None = None, checkpoint: str | Path | None = None,
                  max_trials: int = 8, compile_ptx: bool = True, tracer: Tracer | None = None,
                  cancel: threading.Event | None = None, db: ResultDB | None = None,
                  label: str | None = None) -> OptimizeResult:
    """Optimize `target` (a workload name, `path.py:function`, a `Workload`, a `KernelGraph` or a
    builder `Graph`) for `device`, measuring with `measure` (`model`, `interpret` or `cuda`)."""
    started = time.perf_counter()
    graph, workload, name = _resolve(target)
    name = label or name
    spec = get_device(device)
    backend = make_backend(measure, spec)
    if not budget_s > 0:
        raise PrismError(f"the budget is {budget_s} s; give a positive time, e.g. --budget 120")
    tracer = tracer or Tracer()
    events: list[Event] = []             # the run's own events, whatever the tracer keeps
    listening = [tracer.subscribe(events.append)]
    writer = None
    folder = Path(out) if out is not None else None
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
        writer = JsonlWriter(folder / "trace.jsonl")
        listening.append(tracer.subscribe(writer))
    result = OptimizeResult(name, spec.name, measure, graph, None, None, None,
                            eager_us(graph, spec), roofline_us(graph, spec), [])
    try:
        # the search is its own stage on the trace ("search", from `prism.search`)
        result.search = _search(graph, name, search_config, budget_s * SEARCH_SHARE,
                                checkpoint, tracer, cancel)
        result.notes += result.search.notes
        with tracer.stage("instantiate") as summary:
            configs = instantiate(graph, result.search)
            summary.update({"configs": len(configs),
                            "candidates": len({c.candidate for c in configs})})
        with tracer.stage("tune") as summary:
            left = max(30.0, budget_s - (time.perf_counter() - started))
            result.tuning = tune(configs, backend, spec, tracer=tracer, max_trials=max_trials,
                                 compile_ptx=compile_ptx, db=db, budget_s=left, cancel=cancel)
            summary.update(result.tuning.summary())
        with tracer.stage("check") as summary:
            # the best finalist that passes; one that fails is scored inf, as in tuning
            for trial in result.tuning.ranked()[:MAX_CHECKED]:
                best = _best_kernel(result, trial, spec)
                best.check = check_best(best, workload, measure)
                if best.check.get("passed", True):
                    result.best = best
                    break
                trial.error = f"check failed: {best.check.get('error', best.check)}"
                trial.latency_us = math.inf
                result.notes.append(f"{trial.config.id} failed its check; the next finalist "
                                    "was taken")
            summary.update(best_summary(result))
        result.trace = events           # the write stage's page reads it; later events append
        if folder is not None:
            with tracer.stage("write") as summary:
                from prism.report import write_outputs
                result.files = write_outputs(result, folder)
                summary.update(result.files)
    finally:
        for stop in listening:          # a tracer the caller passes is left as it was
            stop()
        if writer is not None:
            writer.close()
    result.seconds = time.perf_counter() - started
    if folder is not None:
        from prism.report import write_result_json
        write_result_json(result, folder)
    return result


def _resolve(target: Any) -> tuple[KernelGraph, Workload | None, str]:
    from prism.frontend.builder import Graph
    if isinstance(target, Workload):
        return target.graph, target, target.name
    if isinstance(target, KernelGraph):
        return target, None, target.name or "graph"
    if isinstance(target, Graph):
        g = target.build()
        return g, None, g.name or "graph"
    if isinstance(target, str):
        from prism.targets import resolve
        (found,) = resolve(target)[:1]
        return found.graph, found.workload, found.label
    raise PrismError(f"cannot optimize a {type(target).__name__}; pass a workload name, "
                     "path.py:function, a Workload, a KernelGraph or a prism.Graph")


def search_config_for(graph: KernelGraph, budget_s: float) -> SearchConfig:
    """Prism's caps with two changes that fit the search to the program:

    - the block vocabulary is the ops the program uses, plus `div` and `mul` (what norms and
      gates decompose into): an op the program never applies can only help through an identity
      the abstract-expression rule would have to find, and the full vocabulary multiplies the
      families (ntrans: no complete family in 300 s with all twelve ops, candidates with these);
    - a block may read every input of the program (Prism's 3 would make one fused kernel
      impossible for a program with 4 inputs, such as LoRA).

    Pass a `SearchConfig` (or `--block-ops` on the command line) to search more widely."""
    from prism.search.config import BLOCK_OPS
    used = {op.kind for op in graph.ops} | {"div", "mul"}
    return SearchConfig(budget_s=budget_s, max_block_inputs=max(3, len(graph.inputs)),
                        block_ops=tuple(op for op in BLOCK_OPS if op in used))


def _search(graph: KernelGraph, name: str, config: SearchConfig | None, budget_s: float,
            checkpoint: str | Path | None, tracer: Tracer,
            cancel: threading.Event | None) -> SearchResult:
    from prism.search.checkpoint import load_checkpoint, reinstantiate, save_checkpoint
    config = replace(config, budget_s=min(config.budget_s, budget_s)) if config else \
        search_config_for(graph, budget_s)
    path = Path(checkpoint) if checkpoint is not None else None
    if path is not None and path.exists():
        with tracer.stage("search") as summary:
            found = reinstantiate(load_checkpoint(path), graph, config, tracer=tracer,
                                  label=name)
            summary.update({**found.summary(), "checkpoint": str(path)})
        return found
    result = search(graph, config, tracer=tracer, cancel=cancel, label=name)
    if path is not None:
        save_checkpoint(result, graph, path)
    return result


def instantiate(graph: KernelGraph, result: SearchResult | None) -> list[Config]:
    """Every verified candidate at each of its feasible parameter assignments, and the input
    program itself."""
    from prism.instantiate.params import assignments
    configs = [Config(INPUT_PROGRAM, graph, ())]
    for cand in result.equivalent if result else []:
        for env in assignments(cand.graph):
            configs.append(Config(cand.id, cand.graph, tuple(sorted(env.items()))))
    return configs


def best_summary(result: OptimizeResult) -> dict[str, Any]:
    """What a replayed trace needs to show the winner (its config, numbers and graph) and the
    program's bounds; the check stage's summary, and the rows of the CLI's table."""
    from prism.ir.serialize import graph_to_json
    bounds = {"roofline_us": result.roofline_us, "eager_us": result.eager_us}
    if result.best is None:
        return {"best": None, **bounds}
    b = result.best
    return {"best": b.config, "candidate": b.candidate, "params": b.params,
            "latency_us": b.latency_us, "latency_kind": b.latency_kind,
            "modeled_us": b.modeled_us, "num_kernels": b.num_kernels, **bounds,
            "check": b.check, "graph": graph_to_json(b.graph),
            "target": graph_to_json(result.graph)}


def _best_kernel(result: OptimizeResult, trial: Trial, spec: Any) -> BestKernel:
    assert trial.program is not None
    verdicts = {c.id: c.verdict for c in result.search.candidates} if result.search else {}
    concrete = trial.config.concrete()
    return BestKernel(trial.config.candidate, trial.config.id, concrete,
                      dict(trial.config.params), trial.latency_us, trial.kind, trial.modeled_us,
                      roofline_us(concrete, spec), verdicts.get(trial.config.candidate),
                      trial.program.source, trial.ptx, trial.config.graph)


def check_best(best: BestKernel, workload: Workload | None, measure: str) -> dict[str, Any]:
    """The winner against the float64 interpreter of its graph and, for a workload, its torch
    reference (`prism.tune.backends.check_kernel`). The interpreter costs ~1.7 ms a block step,
    so a winner with more than MAX_CHECK_STEPS is checked at the smallest instantiation of the
    same sGraph instead (the fewest block steps of its feasible assignments), and says so."""
    from prism.instantiate.codegen import generate
    from prism.instantiate.params import assignments
    from prism.ir.spec import substitute_graph
    from prism.tune.backends import check_kernel
    graph, source, params = best.graph, best.triton_source, best.params
    if measure != "cuda" and _steps(graph) > MAX_CHECK_STEPS:
        smaller = [substitute_graph(best.symbolic, env) for env in
                   assignments(best.symbolic, limit=10_000)] if best.symbolic else []
        smaller = [g for g in smaller if _steps(g) <= MAX_CHECK_STEPS]
        if not smaller:
            return {"checked": False, "reason": f"{_steps(graph)} block steps are too many to "
                    f"interpret (limit {MAX_CHECK_STEPS}) and the sGraph has no smaller member"}
        graph = min(smaller, key=_steps)
        source = generate(graph).source
        params = {"block_steps": _steps(graph)}
    arrays = workload.random_inputs(0) if workload is not None else None
    out = check_kernel(graph, source, arrays,
                       workload.reference if workload is not None else None)
    if graph is not best.graph:
        out["instance"] = ("the smallest member of the same sGraph "
                           f"({params['block_steps']} block steps; the winner has "
                           f"{_steps(best.graph)})")
    return out


def _steps(graph: KernelGraph) -> int:
    """Blocks × loop iterations over the custom kernels: what the interpreter walks."""
    return sum(math.prod(g.value for g in bg.grid) * bg.forloop_range.value
               for _, bg in graph.iter_blocks())
