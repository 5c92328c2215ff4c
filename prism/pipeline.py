"""`superoptimize`: the whole pipeline, stage by stage (a table of contents).

    result = prism.superoptimize("rmsnorm_matmul", device="h100", measure="model", budget_s=120)
    result.best.triton_source; result.best.latency_us; result.best.latency_kind; result.trace

1. **search**     symbolic search and verification (`prism.search`), or a symbolic checkpoint
                  re-instantiated at this program's shapes; when no program of one custom
                  kernel holding every op is proved equivalent, a second search (*partial
                  fusion*, ids `pf`/`pc`) lets the program's ops also run as pre-defined
                  kernel ops, so the ops a block cannot hold stay outside and the rest is
                  still fused (`Fusion`: which ops stayed outside and why);
2. **instantiate** grid sizes and loop ranges for every verified sGraph
                  (`prism.instantiate.params`); the input program itself is always a candidate
                  too, so a search that finds nothing still leaves a kernel (labelled as such);
3. **tune**       screen every configuration with the cost model, generate and compile the best in
                  parallel, measure them with the chosen backend (`prism.tune`);
4. **check**      run the winner in Triton's interpreter (or on the GPU) against the float64
                  interpreter and the workload's torch reference: a `Check` that says `passed`
                  or `failed` only when the check ran, else `not run` and why; a finalist is a
                  winner only when it is proved (the input program by its id, or a candidate
                  with an `equivalent` verdict);
5. **write**      `kernel.py`, `kernel.ptx`, `trace.jsonl.gz`, `report.html` and `result.json` into
                  the output folder, when one is given: into a fresh folder beside it, renamed
                  into place when the run is done (`prism.outputs`), so a run that fails or is
                  interrupted leaves the previous results as they were and its own beside them
                  (`OUT.failed-<time>`, `OUT.interrupted-<time>`); a lock refuses a second run
                  into the same folder.

Everything a run will write is checked before the search: the argument types, the output
folder, the result database, and that the program's tensors fit in memory. `interrupt` (Ctrl-C
in `prism optimize`) stops the search as its budget would: what it found is still tuned,
checked and written, and the result says it was interrupted; `cancel` stops every stage.

Every stage is a `StageStarted`/`StageFinished` pair on the trace; every decision inside is an
event. The budget is shared: the search gets most of it, tuning what the search leaves. The trace
file is a required listener: when it cannot be written the run stops with `TraceWriteError`
rather than leave an incomplete record; a failing optional listener (a view) becomes a note.
"""

from __future__ import annotations

import functools
import itertools
import math
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from prism.cost import DeviceSpec, default_device, eager_us, get_device, roofline_us
from prism.errors import ArgumentTypeError, PrismError
from prism.frontend.workload import Workload
from prism.ir.graph import KernelGraph
from prism.ir.spec import is_tail
from prism.search import SearchConfig, SearchResult, search
from prism.search.executors import Executor
from prism.trace import TRACE_FILE, Event, FamilySampler, JsonlWriter, Tracer
from prism.tune import Config, ResultDB, Trial, TuningResult, make_backend, tune
from prism.verify.equiv import Verdict

SEARCH_SHARE = 0.75        # of the budget; tuning and checking get the rest
MAX_CHECK_STEPS = 2048     # blocks × loop iterations the interpreter runs for the final check
# ...and for a winner with no smaller member (a concrete program: a log-sum-exp split is proved
# member by member), the winner itself up to this many: a longer check (gqa_safe's 4,224 steps
# take about 40 s) rather than none
MAX_WHOLE_CHECK_STEPS = 4 * MAX_CHECK_STEPS
MAX_CHECKED = 3            # finalists tried in turn when the best fails its check
INPUT_PROGRAM = "input"    # the candidate id of the user's own program
PARTIAL_SHARE = 0.25       # of the search's budget, kept for the partial-fusion search at least
# Family events `result.trace` holds in memory; beyond them, only the first pruned family of each
# rule (the report's examples). A search of millions of families would otherwise hold gigabytes
# (ntrans at the bench's budget was killed for memory at 24 GiB). trace.jsonl.gz keeps them all.
MAX_TRACE_FAMILIES = 200_000
PARTIAL_IDS = ("pf", "pc")  # its family and candidate ids, beside the fusion search's f/c

CheckStatus = Literal["passed", "failed", "not run"]
CHECK_STATUSES: tuple[CheckStatus, ...] = ("passed", "failed", "not run")
_CHECK_FIELDS = ("reason", "where", "dtype", "tolerance", "max_rel_err_vs_interpreter",
                 "max_rel_err_vs_torch", "instance", "seconds")


@dataclass(frozen=True)
class Check:
    """What the winner's check showed (DESIGN.md §1, Claims): `passed` or `failed` only for a
    check that ran, else `not run` with the reason. Nothing is passed by default."""

    status: CheckStatus
    reason: str = ""                    # failed: what was wrong; not run: why it did not run
    where: str | None = None            # "triton interpreter" (and how, for bf16) or "gpu"
    dtype: str | None = None            # what the kernel ran in ("float16", ...)
    tolerance: float | None = None      # that dtype's: the relative errors are held to it
    max_rel_err_vs_interpreter: float | None = None
    max_rel_err_vs_torch: float | None = None
    instance: str | None = None         # set when a smaller member of the sGraph was checked
    seconds: float | None = None

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    @classmethod
    def not_run(cls, reason: str) -> Check:
        return cls("not run", reason)

    def to_json(self) -> dict[str, Any]:
        # `checked` and `passed` stay for readers of older result files; `status` decides
        out: dict[str, Any] = {"status": self.status, "checked": self.status != "not run",
                               "passed": self.passed}
        out.update({k: getattr(self, k) for k in _CHECK_FIELDS
                    if getattr(self, k) not in (None, "")})
        return out

    @classmethod
    def from_json(cls, doc: Mapping[str, Any] | None) -> Check:
        """A check from `to_json`, from `check_kernel`'s report, or from an older trace
        (`checked`/`passed` only). A document that does not say the check passed is not read
        as passed: without a status it is `not run`."""
        doc = doc or {}
        status = next((s for s in CHECK_STATUSES if s == doc.get("status")), None)
        if status is None:
            status = ("not run" if doc.get("checked") is False else
                      "passed" if doc.get("passed") is True else
                      "failed" if doc.get("passed") is False else None)
        if status is None:
            return cls.not_run("the record does not say whether a check ran")
        reason = str(doc.get("reason") or doc.get("error") or "")
        if status == "failed" and not reason and "max_rel_err_vs_torch" in doc:
            from prism.ir.dtypes import get_dtype  # a record without a dtype is fp16's
            reason = (f"max relative error {doc['max_rel_err_vs_torch']:.1e} against torch is "
                      f"over the {get_dtype(doc.get('dtype') or 'float16').tolerance_text}")
        return cls(status, reason or ("" if status == "passed" else "no reason recorded"),
                   **{k: doc.get(k) for k in _CHECK_FIELDS if k != "reason"})


NOT_CHECKED = Check.not_run("the pipeline has not checked it")


@dataclass(frozen=True)
class Fusion:
    """How much of the program the custom kernels hold: the fusion search (one custom kernel
    holding every op) and, when it proved no program, the partial-fusion search that may also
    run the program's ops as pre-defined kernel ops (`kernel_ops`)."""

    fusion_search: dict[str, Any]               # its summary
    partial_search: dict[str, Any] | None = None
    kernel_ops: tuple[str, ...] = ()            # what the partial search may run outside
    # the fusion search itself when the partial one ran (`OptimizeResult.search` is the
    # partial one then): what a run's search cost adds up (`prism bench`)
    first: SearchResult | None = field(default=None, compare=False, repr=False)
    # proved programs of the fusion search with a member that fits the device (modeled)
    fits: int = 0

    @property
    def searches(self) -> list[SearchResult]:
        """The searches that ran before the partial one (the fusion search, when it ran)."""
        return [self.first] if self.first is not None else []

    def why_outside(self, best: BestKernel | None) -> str:
        """Why the winner runs some ops as pre-defined kernels: from the searches' outcomes."""
        f = self.fusion_search
        if "not_run" in f:
            return (f"the search's block vocabulary cannot hold it ({f['not_run']}), so only "
                    "the partial-fusion search ran, with pre-defined kernel ops "
                    f"{', '.join(self.kernel_ops)}")
        how = (f"was exhaustive over {f['families']['generated']:,} families"
               if f.get("exhaustive") else
               f"stopped ({f.get('stop_reason')}) after {f['families']['generated']:,} families")
        pruned = ", ".join(f"{rule} {n:,}" for rule, n in f["families"]["pruned"].items() if n)
        proved = f["verdicts"].get("equivalent", 0)
        if self.fits:
            fused = (f"the fusion search {how} (pruned: {pruned or 'none'}) and proved "
                     f"{proved:,} programs, {self.fits:,} with a member that fits the "
                     "device; none was faster than the input program or passed its check")
        else:
            fits = (f"{proved:,} proved equivalent, none with a member that fits the device"
                    if proved else "none proved equivalent")
            fused = (f"no program of one custom kernel holding every op fits: the fusion "
                     f"search {how} (pruned: {pruned or 'none'}; {fits})")
        if best is not None and best.is_input_program:
            if self.partial_search is None:
                return f"the input program was kept: {fused}"
            return (f"the input program was kept: {fused}, and no proved program of the "
                    "partial-fusion search was faster or passed its check")
        if self.partial_search is None:
            return "the search's best program runs it as a pre-defined kernel op"
        return (f"{fused}; the partial-fusion search, with pre-defined kernel ops "
                f"{', '.join(self.kernel_ops)}, found this program the best")

    def to_json(self, best: BestKernel | None = None) -> dict[str, Any]:
        outside = outside_ops(best.graph) if best is not None else []
        why = self.why_outside(best) if outside else None
        return {"outside": [{**o, "why": why} for o in outside],
                "fusion_search": self.fusion_search, "partial_search": self.partial_search,
                **({"kernel_ops": list(self.kernel_ops)} if self.kernel_ops else {})}


def outside_ops(graph: KernelGraph) -> list[dict[str, str]]:
    """The compute ops `graph` runs as pre-defined kernels, outside every custom kernel."""
    from prism.ir.ops import OPS
    return [{"op": op.kind, "tensor": op.outputs[0]} for op in graph.ops
            if op.kind in OPS and OPS[op.kind].compute]


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
    verdict: Verdict | None             # None: the input program, or no verdict is recorded
    triton_source: str
    ptx: dict[str, str]
    symbolic: KernelGraph | None = None  # the verified sGraph this kernel instantiates
    check: Check = NOT_CHECKED
    dtype: str = "float16"              # what it was generated for, runs and is checked in

    @property
    def num_kernels(self) -> int:
        return self.graph.num_kernels

    @property
    def num_tails(self) -> int:
        """Kernels that run as the tail of the one before, in its launch (`launch="tail"`)."""
        return sum(map(is_tail, self.graph.ops))

    @property
    def kernels_text(self) -> str:
        """'2 kernel(s)', or '2 kernel(s) in 1 launch' where a tail shares a launch."""
        text = f"{self.num_kernels} kernel(s)"
        return text + (f" in {self.num_kernels - self.num_tails} launch(es)"
                       if self.num_tails else "")

    @property
    def is_input_program(self) -> bool:
        """Whether this is the user's own program, by its candidate id (never inferred from a
        missing verdict)."""
        return self.candidate == INPUT_PROGRAM

    @property
    def proved(self) -> bool:
        """Equivalent to the input program: it is that program, or its verdict says so."""
        return self.is_input_program or (self.verdict is not None
                                         and self.verdict.verdict == "equivalent")

    def to_json(self) -> dict[str, Any]:
        if self.is_input_program:
            verdict, proof = "equivalent", "identity (the input program)"
        elif self.verdict is None:
            verdict, proof = "unknown", f"none: no verdict is recorded for {self.candidate}"
        else:
            verdict = self.verdict.verdict
            proof = (f"{self.verdict.method}, {self.verdict.proof_steps} steps, "
                     f"{self.verdict.sizes or 'concrete'} sizes")
        return {"candidate": self.candidate, "config": self.config,
                "latency_us": round(self.latency_us, 4), "latency_kind": self.latency_kind,
                "modeled_us": round(self.modeled_us, 4), "roofline_us": round(self.roofline_us, 4),
                "num_kernels": self.num_kernels, "num_tails": self.num_tails,
                "num_custom_kernels": len(self.graph.custom_ops), "verdict": verdict,
                "proof": proof, "params": self.params, "check": self.check.to_json()}


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
    interrupted: bool = False           # the search was stopped by `interrupt` (Ctrl-C)
    output: Path | None = None          # where the output folder ended up, when one was given
    fusion: Fusion | None = None        # what stayed outside custom kernels and why
    dtype: str = "float16"              # what the program's tensors are: every stage's bytes
    shapes: list[ShapeResult] = field(default_factory=list)   # also_at's, in order
    advised: Any = None                 # prism.advice.Advised: the advice and what it did

    @property
    def searches(self) -> list[SearchResult]:
        """Every search the run made: the fusion search and, when it proved no program that
        fits, the partial-fusion one after it."""
        return [*(self.fusion.searches if self.fusion else []),
                *([self.search] if self.search else [])]

    def to_json(self) -> dict[str, Any]:
        best = self.best.to_json() if self.best else None
        speedup = (self.eager_us / self.best.modeled_us) if self.best else None
        return {"target": self.target, "device": self.device, "dtype": self.dtype,
                "measure": self.measure,
                "seconds": round(self.seconds, 3), "best": best,
                "baseline": {"eager_latency_us": round(self.eager_us, 4),
                             "eager_latency_kind": "modeled",
                             "roofline_us": round(self.roofline_us, 4),
                             "modeled_speedup_vs_eager": round(speedup, 3) if speedup else None},
                "search": self.search.summary() if self.search else None,
                **({"fusion": self.fusion.to_json(self.best)} if self.fusion else {}),
                "tuning": self.tuning.summary() if self.tuning else None,
                "trials": [t.to_json() for t in self.tuning.finalists] if self.tuning else [],
                "files": self.files, **({"notes": self.notes} if self.notes else {}),
                **({"shapes": [s.to_json() for s in self.shapes]} if self.shapes else {}),
                **({"advice": self.advised.to_json()} if self.advised else {}),
                **({"interrupted": True} if self.interrupted else {})}


def superoptimize(target: Any, *, device: str | DeviceSpec = "h100", dtype: Any = None,
                  measure: str = "model", budget_s: float = 600.0, out: str | Path | None = None,
                  search_config: SearchConfig | None = None, checkpoint: str | Path | None = None,
                  max_trials: int = 8, compile_ptx: bool = True, tracer: Tracer | None = None,
                  cancel: threading.Event | None = None, db: ResultDB | None = None,
                  label: str | None = None,
                  interrupt: threading.Event | None = None,
                  executor: Executor | str = "local",
                  also_at: Sequence[Mapping[str, Sequence[int]]] = (),
                  advice: Any = None) -> OptimizeResult:
    """Optimize `target` (a workload name, `path.py:function`, a `Workload`, a `KernelGraph` or a
    builder `Graph`) for `device`, measuring with `measure` (`model`, `interpret` or `cuda`);
    the search's tasks run on `executor` (`prism.search.executors`). The program runs in `dtype`
    (float16, bfloat16 or float32; None: the workload's, float16 for a graph): every stage counts
    its bytes, and the winner is checked in it, within its tolerance. The budget runs on
    `tracer.budget`, a clock that stands still while a live view holds the run paused.

    `also_at` (a workload's parameter shapes, one mapping per shape set) serves more shapes from
    the one search: the search's symbolic checkpoint (`checkpoint`, or one beside the outputs) is
    re-instantiated at each (no new search), tuned, proved and checked there, and `kernel.py`
    carries every shape whose kernel passed, dispatching on the input shapes
    (`prism.instantiate.bundle`); `result.shapes` says what each shape got.

    `advice` (a `prism.Advice` or a mapping of its fields) narrows the search and reorders the
    tuning queue (`prism.advice`); every candidate is still proved and the winner checked. What
    it changed and what came of it are the trace's `advice` stage and `result.advised`."""
    runner = executor if isinstance(executor, Executor) else Executor(executor)
    _check_arguments(device=device, measure=measure, budget_s=budget_s, out=out,
                     search_config=search_config, checkpoint=checkpoint, max_trials=max_trials,
                     tracer=tracer, cancel=cancel, db=db, label=label, interrupt=interrupt)
    tracer = tracer or Tracer(keep=False)   # the run keeps its own (a `FamilySampler`)
    started = tracer.budget.now()
    graph, workload, name = _resolve(target)
    name = label or name
    from prism.ir.dtypes import get_dtype
    run_dtype = get_dtype(dtype if dtype is not None else
                          workload.dtype if workload is not None else "float16")
    spec = get_device(device).for_dtype(run_dtype)   # its bytes and peak, in every stage
    if search_config is not None:       # a caller's config searches in the run's dtype too
        search_config = replace(search_config,
                                device=search_config.device.for_dtype(run_dtype))
    make_backend(measure, spec)         # an unknown measure or a missing GPU: before any work
    if not (math.isfinite(budget_s) and budget_s > 0):
        raise PrismError(f"the budget is {budget_s} s; give a positive time, e.g. --budget 120")
    from prism.targets import refuse_too_large
    refuse_too_large(graph, name)
    if checkpoint is not None and not Path(checkpoint).exists():
        from prism.outputs import check_file
        check_file(Path(checkpoint), "--checkpoint")
    more = _also_at(workload, also_at, name)
    from prism.advice import Advice, Advised
    advised = Advised(Advice.of(advice)) if advice is not None else None
    if db is not None:
        db.check_writable()             # before the search, not after it
    from prism.outputs import OutputFolder
    folder = OutputFolder(out, "--out") if out is not None else None
    try:
        result = _run(graph, workload, name, spec, measure, budget_s, search_config, checkpoint,
                      max_trials, compile_ptx, tracer, cancel, interrupt, db, runner,
                      folder, started, _Shapes(more, dict(device=device, dtype=dtype,
                                                         measure=measure, budget_s=budget_s,
                                                         search_config=search_config,
                                                         max_trials=max_trials, db=db,
                                                         cancel=cancel, executor=runner)),
                      advised)
    except BaseException as e:
        if folder is not None:          # the previous results stay; this run's go beside them
            folder.abandon(interrupted=isinstance(e, KeyboardInterrupt))
        raise
    if folder is not None:
        result.output = folder.finish()
    return result


def _run(graph: KernelGraph, workload: Workload | None, name: str, spec: DeviceSpec,
         measure: str, budget_s: float, search_config: SearchConfig | None,
         checkpoint: str | Path | None, max_trials: int, compile_ptx: bool, tracer: Tracer,
         cancel: threading.Event | None, interrupt: threading.Event | None, db: ResultDB | None,
         runner: Executor, folder: Any, started: float, more: _Shapes | None = None,
         advised: Any = None) -> OptimizeResult:
    """The stages in order, writing into `folder.staging` (an `OutputFolder`) when given."""
    if more is not None and more.shapes and checkpoint is None:
        # the search's checkpoint, which the other shapes re-instantiate: an output of the run
        checkpoint = (folder.staging if folder is not None else more.scratch()) / \
            "checkpoint.json"
    seen_errors = len(tracer.listener_errors)
    events: list[Event] = []             # the run's own events, whatever the tracer keeps
    keeper = FamilySampler(events, MAX_TRACE_FAMILIES)
    listening = [tracer.subscribe(keeper)]
    writer = None
    if folder is not None:
        writer = JsonlWriter(folder.staging / TRACE_FILE,
                             fix="free space there or choose another output folder (--out)",
                             shown=folder.path / TRACE_FILE)
        # required: a run whose trace file cannot be written stops (TraceWriteError)
        listening.append(tracer.subscribe(writer, required=True))
    # the tuner's checks run on the workload's inputs, drawn at the scales it declares (the
    # model checks nothing: no inputs drawn)
    backend = make_backend(measure, spec, workload.random_inputs(0)
                           if workload is not None and measure != "model" else None)
    result = OptimizeResult(name, spec.name, measure, graph, None, None, None,
                            eager_us(graph, spec), roofline_us(graph, spec), [],
                            dtype=spec.dtype.name)
    if folder is not None:
        result.notes += folder.notes
    prefer = None
    try:
        if advised is not None:
            # advice narrows the search and reorders tuning, and says so on the trace
            with tracer.stage("advice") as summary:
                narrowed, advised.effects = advised.advice.narrow(
                    search_config or search_config_for(graph, budget_s * SEARCH_SHARE, spec))
                if advised.effects:          # else the run's own config, as without advice
                    search_config = narrowed
                if advised.advice.params or advised.advice.kernels is not None:
                    prefer = advised.advice.prefers
                    advised.effects.append("tuning measures the hinted configurations first")
                summary.update(advised.to_json())
        # the search is its own stage on the trace ("search", from `prism.search`)
        halt = _either(cancel, interrupt)
        result.search, result.fusion = _fused_or_partial(
            graph, name, search_config, budget_s * SEARCH_SHARE, checkpoint, tracer, halt, spec,
            runner)
        result.interrupted = interrupt is not None and interrupt.is_set()
        result.notes += result.search.notes
        with tracer.stage("instantiate") as summary:
            configs = instantiate(graph, result.search, spec)
            summary.update({"configs": len(configs),
                            "candidates": len({c.candidate for c in configs})})
        with tracer.stage("tune") as summary:
            left = max(30.0, budget_s - (tracer.budget.now() - started))
            # an order that also ranks trials (the learned one) orders the tuner's too
            trial_scores = getattr(search_config.order, "trial_scores", None) \
                if search_config is not None else None
            result.tuning = tune(configs, backend, spec, tracer=tracer, max_trials=max_trials,
                                 compile_ptx=compile_ptx, db=db, budget_s=left, cancel=cancel,
                                 prefer=prefer, order=None if trial_scores is None else
                                 functools.partial(trial_scores, device=spec))
            summary.update(result.tuning.summary())
            if db is not None:
                summary["database"] = db.summary()
                result.notes += db.notes()
        with tracer.stage("check") as summary:
            # the best finalist that is proved and does not fail its check (a check that could
            # not run says so); one set aside is scored inf, as in tuning
            cancelled = cancel is not None and cancel.is_set()
            finalists = result.tuning.ranked()[:MAX_CHECKED] or _by_model(result)
            for trial in itertools.chain(finalists, _last_resort(
                    result, finalists, configs, backend, spec, tracer, db, cancel)):
                best = _best_kernel(result, trial, spec)
                if not best.proved:
                    _set_aside(result, trial, "has no equivalence proof on record (no verdict "
                               f"for {best.candidate})")
                    continue
                # a cancel keeps the best kernel found so far, unchecked (and says so)
                best.check = (Check.not_run("the run was cancelled before its check")
                              if cancelled else check_best(best, workload, result.measure))
                if best.check.status != "failed":
                    result.best = best
                    break
                _set_aside(result, trial, f"failed its check: {best.check.reason}")
            summary.update(best_summary(result))
        if advised is not None:
            result.advised = advised
            advised.outcome = _advice_outcome(advised.advice, result, prefer)
            with tracer.stage("advice outcome") as summary:
                summary.update(advised.to_json())
        if more is not None and more.shapes:
            with tracer.stage("shapes") as summary:
                result.shapes = more.serve(Path(checkpoint) if checkpoint else None, workload,
                                           name, result)
                summary.update({"shapes": [s.to_json() for s in result.shapes]})
        result.interrupted = interrupt is not None and interrupt.is_set()
        result.trace = events           # the write stage's page reads it; later events append
        if keeper.dropped:
            result.notes.append(
                f"result.trace holds the first {MAX_TRACE_FAMILIES:,} family events of "
                f"{sum(s.generated for s in result.searches):,} families and one pruned "
                "example per rule after them (memory; the families after them that no one "
                "kept were counted, not built); the search's counts are whole, and "
                f"{TRACE_FILE} (--out) holds every event")
        if folder is not None:
            if result.interrupted:
                folder.mark("interrupted")
            with tracer.stage("write") as summary:
                from prism.report import write_outputs
                result.files = write_outputs(result, folder.staging, folder.final)
                summary.update(result.files)
    finally:
        for stop in listening:          # a tracer the caller passes is left as it was
            stop()
        if writer is not None:
            writer.close()
    for err in tracer.listener_errors[seen_errors:]:    # an optional view that fell over
        where = "; ".join(getattr(err, "__notes__", []))
        result.notes.append(f"a listener failed: {type(err).__name__}: {err} ({where})")
    result.seconds = tracer.budget.now() - started     # pauses excluded, as from the budget
    if folder is not None:
        from prism.report import write_result_json
        write_result_json(result, folder.staging)
    return result


def _advice_outcome(advice: Any, result: OptimizeResult, prefer: Any) -> str:
    """What came of the advice, from the run: the winner against the hints."""
    best = result.best
    if best is None:
        return "no kernel was found"
    if prefer is None:
        return f"the winner is {best.candidate} ({best.latency_kind} {best.latency_us:.2f} µs)"
    trials = result.tuning.finalists if result.tuning else []
    hinted = [t for t in trials if prefer(t.config)]
    took = any(t.config.id == best.config for t in hinted)
    return (f"{len(hinted)} of {len(trials)} finalists took the hints; the winner "
            f"{best.config} ({best.latency_kind} {best.latency_us:.2f} µs) "
            + ("is one of them" if took else
               f"is not: its {best.latency_kind} latency was the best"))


@dataclass
class ShapeResult:
    """What one more shape of a run (`superoptimize(..., also_at=...)`) got from the run's
    checkpoint: its best kernel, and whether `kernel.py` carries it."""

    shapes: dict[str, tuple[int, ...]]
    best: BestKernel | None
    seconds: float
    reason: str = ""                    # why kernel.py does not carry it ("" when it does)

    @property
    def carried(self) -> bool:
        return not self.reason

    def to_json(self) -> dict[str, Any]:
        return {"shapes": {k: list(v) for k, v in self.shapes.items()},
                "best": self.best.to_json() if self.best else None,
                "seconds": round(self.seconds, 3), "carried": self.carried,
                **({"reason": self.reason} if self.reason else {})}


@dataclass
class _Shapes:
    """The run's other shapes and the options each of their runs takes."""

    shapes: list[dict[str, tuple[int, ...]]]
    options: dict[str, Any]
    _tmp: Any = None

    def scratch(self) -> Path:
        import tempfile
        self._tmp = tempfile.TemporaryDirectory(prefix="prism-shapes-")
        return Path(self._tmp.name)

    def serve(self, checkpoint: Path | None, workload: Workload | None, name: str,
              main: OptimizeResult) -> list[ShapeResult]:
        """Each shape re-instantiated from the checkpoint, tuned, proved and checked."""
        assert workload is not None              # `_also_at` refused also_at without one
        out: list[ShapeResult] = []
        for shapes in self.shapes:
            started = time.perf_counter()
            if checkpoint is None or not checkpoint.exists() or \
                    (main.search is not None and main.search.stop_reason == "cancelled"):
                out.append(ShapeResult(shapes, None, 0.0, "the search was stopped before its "
                                       "checkpoint was written: no shape is served from it"))
                continue
            at = ", ".join(f"{k}={'x'.join(map(str, v))}" for k, v in shapes.items())
            got = superoptimize(workload.with_shapes(**shapes), checkpoint=checkpoint,
                                label=f"{name} at {at}", **self.options)
            best, why = got.best, ""
            if best is None:
                why = "no kernel: " + "; ".join(got.notes[:1]) if got.notes else "no kernel"
            elif not best.proved:
                why = "its best kernel has no proof on record"
            elif not best.check.passed:
                why = f"its best kernel's check {best.check.status}: {best.check.reason}"
            out.append(ShapeResult(shapes, best, time.perf_counter() - started,
                                   why))
        if self._tmp is not None:
            self._tmp.cleanup()
        return out


def _also_at(workload: Workload | None, also_at: Any, name: str
             ) -> list[dict[str, tuple[int, ...]]]:
    """`also_at` checked: shape sets of the workload's parameters, each other than the run's."""
    if isinstance(also_at, Mapping):
        also_at = [also_at]
    sets = list(also_at or ())
    if not sets:
        return []
    if workload is None:
        raise PrismError(f"also_at needs a workload (a name, path.py:function or Workload); "
                         f"{name} is a graph, whose shapes are fixed: build it at each shape")
    out: list[dict[str, tuple[int, ...]]] = []
    seen = [dict(workload.shapes)]
    for s in sets:
        if not isinstance(s, Mapping) or not s:
            raise ArgumentTypeError(f"superoptimize: also_at holds {s!r}; pass one mapping of "
                                    "parameter shapes per shape set, e.g. also_at=[{'X': "
                                    "(16, 1024)}]")
        unknown = sorted(set(s) - set(workload.shapes))
        if unknown:
            raise PrismError(f"also_at names {', '.join(unknown)}; {workload.name} has "
                             f"parameters {', '.join(workload.shapes)}")
        shapes = {k: tuple(int(d) for d in v) for k, v in s.items()}
        whole = {**workload.shapes, **shapes}
        if whole in seen:
            raise PrismError(f"also_at repeats the shapes {shapes}: give each shape set once, "
                             "other than the run's own")
        seen.append(whole)
        out.append(shapes)
    return out


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


def search_config_for(graph: KernelGraph, budget_s: float,
                      device: DeviceSpec | str | None = None) -> SearchConfig:
    """Prism's caps with two changes that fit the search to the program:

    - the block vocabulary is Prism's (`BLOCK_OPS`) plus every op the program uses that
      Prism's lacks (a `sub`, a `max`, an `rsqrt`...), in the op table's order: no op is left
      out because this program does not apply it, so an identity that needs one (a norm's
      `rms_norm` as `div` and `sqrt`, a gate's `mul`) is searched too. The sibling bounds of
      `out_of_reach` keep that tree small enough for every workload and corpus program to be
      searched exhaustively (bench/full_vocabulary.py);
    - a block may read every input of the program (Prism's 3 would make one fused kernel
      impossible for a program with 4 inputs, such as LoRA).

    The split move is on (`SearchConfig.split_loops`): a proved one-kernel program whose loop
    only sums is also tried with its loop split across blocks and a second kernel summing the
    parts, which is how attention over many keys fills the device (split-key attention); one
    that takes a row max over the keys (safe softmax) is tried with the keys split and the
    parts merged by their maxes (log-sum-exp split).

    Branch and bound reads each complete program's members (`SearchConfig.member_bound`): a
    program whose members that may be equivalent all model slower than the best found so far
    is pruned before its proofs (bench/member_bound.py: lora prunes 73, about a tenth less CPU
    time, the same best).

    Pass a `SearchConfig` (or `--block-ops` on the command line) to search more narrowly. The
    device (the default one when None) sets the hardware rule's limits and the cost model."""
    from prism.search.config import BLOCK_OPS, BLOCK_VOCABULARY
    wanted = set(BLOCK_OPS) | {op.kind for op in graph.ops}
    return SearchConfig(budget_s=budget_s, max_block_inputs=max(3, len(graph.inputs)),
                        block_ops=tuple(op for op in BLOCK_VOCABULARY if op in wanted),
                        device=get_device(device) if device is not None else default_device(),
                        split_loops=True, member_bound=True)


def program_block_ops(graph: KernelGraph) -> tuple[str, ...]:
    """A narrow block vocabulary: the ops the program uses, plus `div` and `mul` (what norms
    and gates decompose into), in the op table's order. `superoptimize` searched with these
    until the sibling bounds made Prism's whole vocabulary affordable; a quick search (a test,
    a notebook's demo) may still pass them: `replace(search_config_for(g, s),
    block_ops=program_block_ops(g))`. It finds fewer programs: none that needs an op the
    program does not apply."""
    from prism.search.config import BLOCK_VOCABULARY
    used = {op.kind for op in graph.ops} | {"div", "mul"}
    return tuple(op for op in BLOCK_VOCABULARY if op in used)


def _fused_or_partial(graph: KernelGraph, name: str, config: SearchConfig | None,
                      budget_s: float, checkpoint: str | Path | None, tracer: Tracer,
                      cancel: threading.Event | None, device: DeviceSpec,
                      runner: Executor) -> tuple[SearchResult, Fusion]:
    """The fusion search (`_search`) and, when it proved no program, the partial-fusion search:
    the same caps with the program's own ops also allowed as pre-defined kernel ops, so an op
    no block can hold here (a row too long for one tile, a reduction the accumulators cannot
    stream) runs as one while the ops around it are still fused. Its candidates are the ones
    instantiated; the input program stays a candidate either way. It gets what is left of the
    search's budget, and at least PARTIAL_SHARE of it (so a run may take that much longer
    than its budget). Not run for a checkpoint, a config that already allows kernel ops, a
    program of one op, or a cancelled run."""
    started = tracer.budget.now()
    from prism.search.config import KERNEL_VOCABULARY
    from prism.search.driver import expressible
    kinds = {op.kind for op in graph.ops}
    kernel_ops = tuple(k for k in KERNEL_VOCABULARY if k in kinds)
    computing = [op for op in graph.ops if op.kind in KERNEL_VOCABULARY]
    # a config whose block vocabulary lacks some of the program's ops: no fusion search can
    # hold them, so only the partial one runs (never refuse what was traced)
    missing = expressible(graph, config) if config is not None and checkpoint is None and \
        computing else []
    fused: SearchResult | None = None
    if missing:
        fusion = Fusion({"not_run": "; ".join(missing)})
    else:
        fused = _search(graph, name, config, budget_s, checkpoint, tracer, cancel, device,
                        runner)
        # a proved program with a member that fits the device: the search models each one at
        # its best fitting assignment (None: none fits; `params.assignments` is not asked, as
        # it passes a graph without size variables unchecked against the device's limits)
        fits = [c for c in fused.equivalent if c.modeled_us is not None]
        fusion = Fusion(fused.summary(), fits=len(fits))
        if (fits or checkpoint is not None or len(computing) < 2
                or (config is not None and config.kernel_ops)
                or (cancel is not None and cancel.is_set())):
            return fused, fusion
    left = max(budget_s - (tracer.budget.now() - started), budget_s * PARTIAL_SHARE)
    base = config or search_config_for(graph, left, device)
    partial = replace(base, kernel_ops=kernel_ops, budget_s=left)
    found = _search(graph, name, partial, left, None, tracer, cancel, device, runner,
                    ids=PARTIAL_IDS)
    why = (f"the search's block vocabulary cannot hold {'; '.join(missing)}" if missing else
           "no program of one custom kernel holding every op was proved equivalent with a "
           "member that fits the device")
    found.notes.insert(0, f"{why}, so a partial-fusion search ran with pre-defined kernel ops "
                       f"{', '.join(kernel_ops)} allowed (its candidates are named pc1, pc2, "
                       "...)")
    return found, replace(fusion, partial_search=found.summary(), kernel_ops=kernel_ops,
                          first=fused)


def _search(graph: KernelGraph, name: str, config: SearchConfig | None, budget_s: float,
            checkpoint: str | Path | None, tracer: Tracer,
            cancel: threading.Event | None, device: DeviceSpec,
            runner: Executor, ids: tuple[str, str] = ("f", "c")) -> SearchResult:
    """The search on the run's device: a caller's config keeps its caps and rules but takes
    the device the run optimizes for (its hardware limits and its cost model)."""
    from prism.search.checkpoint import load_checkpoint, reinstantiate, save_checkpoint
    config = replace(config, budget_s=min(config.budget_s, budget_s),
                     device=_run_device(config, device)) if config else \
        search_config_for(graph, budget_s, device)
    path = Path(checkpoint) if checkpoint is not None else None
    if path is not None and path.exists():
        with tracer.stage("search") as summary:
            found = reinstantiate(load_checkpoint(path), graph, config, tracer=tracer,
                                  label=name)
            summary.update({**found.summary(), "checkpoint": str(path)})
        return found
    result = search(graph, config, tracer=tracer, cancel=cancel, label=name, executor=runner,
                    ids=ids)
    if path is not None:
        # an interrupted search's checkpoint goes beside the path: a later run would load the
        # path as the search's result instead of searching
        from prism.outputs import sibling
        where = sibling(path, "interrupted" if result.stop_reason == "cancelled" else "done")
        save_checkpoint(result, graph, where)
        if where != path:
            result.notes.append(f"the search was stopped: its checkpoint is {where}; pass "
                                "that file to --checkpoint to re-instantiate it")
    return result


class _Either(threading.Event):
    """Set when either of two events is: the search stops on a cancel or an interrupt."""

    def __init__(self, *events: threading.Event):
        super().__init__()
        self._events = events

    def is_set(self) -> bool:
        return any(e.is_set() for e in self._events)


def _either(a: threading.Event | None, b: threading.Event | None) -> threading.Event | None:
    return a if b is None else b if a is None else _Either(a, b)


def _check_arguments(**given: Any) -> None:
    """Each API argument has a type `superoptimize` can use; else one line naming it, what it
    got and what to pass (a `TypeError` too, as Python's own would be)."""
    from os import PathLike
    none = type(None)
    event = (threading.Event, none)
    expect: dict[str, tuple[tuple[type, ...], str]] = {
        "device": ((str, DeviceSpec), "a device name such as 'h100' or a prism.cost.DeviceSpec"),
        "measure": ((str,), "'model', 'interpret' or 'cuda'"),
        "budget_s": ((int, float), "seconds as a number, e.g. budget_s=120"),
        "out": ((str, PathLike, none), "a folder path (str or pathlib.Path) or None"),
        "search_config": ((SearchConfig, none), "a prism.SearchConfig(...) or None"),
        "checkpoint": ((str, PathLike, none), "a file path (str or pathlib.Path) or None"),
        "max_trials": ((int,), "a positive count, e.g. max_trials=8"),
        "tracer": ((Tracer, none), "a prism.trace.Tracer or None"),
        "cancel": (event, "a threading.Event or None"),
        "interrupt": (event, "a threading.Event or None"),
        "db": ((ResultDB, none), "a prism.tune.ResultDB, e.g. db=ResultDB('results.jsonl'), "
               "or None"),
        "label": ((str, none), "a name (str) or None"),
    }
    for name, value in given.items():
        types, want = expect[name]
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            raise ArgumentTypeError(f"superoptimize: {name}={value!r} is a "
                                    f"{type(value).__name__}; pass {want}")
    if given["max_trials"] < 1:
        raise PrismError(f"superoptimize: max_trials is {given['max_trials']}; give at least 1 "
                         "(the configurations compiled and measured)")


def _run_device(config: SearchConfig, device: DeviceSpec) -> DeviceSpec:
    """A config's own variant of the run's device (same name, other limits: a test's small
    shared memory) is kept; a config for another device (or the default) takes the run's."""
    return config.device if config.device.name == device.name else device


def instantiate(graph: KernelGraph, result: SearchResult | None,
                device: DeviceSpec | None = None) -> list[Config]:
    """Every verified candidate at each of its feasible parameter assignments on `device` (the
    search's own when None), and the input program itself. A candidate of several kernels
    that the search modeled on this device is also tried at the assignment it was modeled at,
    when the tuner's rule (`prism.instantiate.params`) does not make it: a split program's
    loop walks what is left of a dim after the split, which Prism's loop-range rule (made
    for one kernel's loop walking the whole dim) does not reach."""
    from prism.instantiate.params import assignments
    device = device or (result.config.device if result else default_device())
    configs = [Config(INPUT_PROGRAM, graph, ())]
    same_device = result is not None and result.config.device == device
    for cand in result.equivalent if result else []:
        # a candidate takes and returns the user's tensors as the program does (its views)
        member = replace(cand.graph, interface=graph.interface)
        envs = assignments(member, device)
        if same_device and cand.assignment and cand.num_kernels > 1 and \
                cand.assignment not in envs:
            envs.append(dict(cand.assignment))
        for env in envs:
            configs.append(Config(cand.id, member, tuple(sorted(env.items()))))
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
            "modeled_us": b.modeled_us, "num_kernels": b.num_kernels,
            "kernels_text": b.kernels_text, "dtype": b.dtype,
            **bounds,
            "proof": b.to_json()["proof"], "check": b.check.to_json(),
            **({"outside": result.fusion.to_json(b)["outside"]} if result.fusion else {}),
            "graph": graph_to_json(b.graph),
            "target": graph_to_json(result.graph)}


def _by_model(result: OptimizeResult) -> list[Trial]:
    """When tuning stopped before it measured any finalist: the finalists by the model, each
    as its modeled latency (labelled `modeled`), so a cancelled run keeps its best kernel."""
    assert result.tuning is not None
    if not result.tuning.stopped:
        return []
    waiting = [t for t in result.tuning.finalists if t.not_measured and t.program is not None
               and math.isfinite(t.modeled_us)]
    if waiting:
        result.notes.append(f"tuning stopped ({result.tuning.stopped}) before it measured any "
                            "finalist, so the best kernel is the best by the model (modeled)")
    return [replace(t, latency_us=t.modeled_us, kind="modeled", not_measured=None)
            for t in sorted(waiting, key=lambda t: (t.modeled_us, t.config.id))][:MAX_CHECKED]


def _last_resort(result: OptimizeResult, finalists: list[Trial], configs: list[Config],
                 backend: Any, spec: DeviceSpec, tracer: Tracer, db: ResultDB | None,
                 cancel: threading.Event | None = None) -> Iterator[Trial]:
    """The input program, measured only when the loop reaches it (every finalist set aside)
    and it was not a finalist: it computes the program by definition, so a traced program
    always leaves a checked kernel. Not after a cancel, which stops every stage."""
    if any(t.config.candidate == INPUT_PROGRAM for t in finalists) or (
            cancel is not None and cancel.is_set()):
        return
    from prism.tune.tuner import tune_one
    config = next(c for c in configs if c.candidate == INPUT_PROGRAM)
    trial = tune_one(config, backend, spec, tracer=tracer, db=db)
    if trial.ok:
        result.notes.append("no finalist passed its check, so the input program (its ops as "
                            "pre-defined kernels) was checked as the last resort")
        yield trial


def _set_aside(result: OptimizeResult, trial: Trial, why: str) -> None:
    trial.error = f"not taken: {why}"
    trial.latency_us = math.inf
    result.notes.append(f"{trial.config.id} {why}; the next finalist was tried")


def _best_kernel(result: OptimizeResult, trial: Trial, spec: Any) -> BestKernel:
    """The finalist as a winner; its verdict is the search's for its candidate, or None (the
    input program, or a candidate the search has no verdict for: `proved` tells them apart)."""
    assert trial.program is not None
    verdicts = {c.id: c.verdict for c in result.search.candidates} if result.search else {}
    concrete = trial.config.concrete()
    return BestKernel(trial.config.candidate, trial.config.id, concrete,
                      dict(trial.config.params), trial.latency_us, trial.kind, trial.modeled_us,
                      roofline_us(concrete, spec), verdicts.get(trial.config.candidate),
                      trial.program.source, trial.ptx, trial.config.graph,
                      dtype=spec.dtype.name)


def check_best(best: BestKernel, workload: Workload | None, measure: str) -> Check:
    """The winner against the float64 interpreter of its graph and, for a workload, its torch
    reference (`prism.tune.backends.check_kernel`), run in the winner's dtype within that
    dtype's tolerance; a bf16 winner under the interpreter runs with fp32 tiles holding bf16
    values, and its check says so. The interpreter costs ~1.7 ms a block step,
    so a winner with more than MAX_CHECK_STEPS is checked at the smallest instantiation of the
    same sGraph instead (the fewest block steps of its feasible assignments), and says so; a
    winner that has no smaller member is checked itself up to MAX_WHOLE_CHECK_STEPS. A
    check that cannot run here (too many steps, no interpreter or GPU, the check itself raising)
    is `not run` with the reason."""
    try:
        return _check_best(best, workload, measure)
    except Exception as e:  # Triton, torch or the interpreter could not run it: no claim
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        return Check.not_run(f"the check raised {type(e).__name__}: {first}")


def _check_best(best: BestKernel, workload: Workload | None, measure: str) -> Check:
    from prism.instantiate.codegen import generate
    from prism.instantiate.params import assignments
    from prism.ir.spec import substitute_graph
    from prism.tune.backends import check_kernel
    graph, source, params = best.graph, best.triton_source, best.params
    if measure != "cuda" and _steps(graph) > MAX_CHECK_STEPS:
        smaller = [substitute_graph(best.symbolic, env) for env in
                   assignments(best.symbolic, limit=10_000)] if best.symbolic else []
        smaller = [g for g in smaller if _steps(g) <= MAX_CHECK_STEPS]
        if smaller:
            graph = min(smaller, key=_steps)
            source = generate(graph, dtype=best.dtype).source
            params = {"block_steps": _steps(graph)}
        elif _steps(graph) > MAX_WHOLE_CHECK_STEPS:
            return Check.not_run(f"{_steps(graph)} block steps are too many to interpret "
                                 f"(limit {MAX_WHOLE_CHECK_STEPS} for a program with no "
                                 f"smaller member, {MAX_CHECK_STEPS} otherwise)")
    arrays = workload.random_inputs(0) if workload is not None else None
    out = check_kernel(graph, source, arrays,
                       workload.reference if workload is not None else None, best.dtype)
    if graph is not best.graph:
        out["instance"] = ("the smallest member of the same sGraph "
                           f"({params['block_steps']} block steps; the winner has "
                           f"{_steps(best.graph)})")
    return Check.from_json(out)


def _steps(graph: KernelGraph) -> int:
    """Blocks × loop iterations over the custom kernels: what the interpreter walks."""
    return sum(math.prod(g.value for g in bg.grid) * bg.forloop_range.value
               for _, bg in graph.iter_blocks())
