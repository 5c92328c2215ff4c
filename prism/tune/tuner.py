"""The tuner: concrete kernels from verified sGraphs, compiled in parallel and measured.

    result = tune(configs, backend, device=get_device("h100"), tracer=tracer)

1. **screen**: every configuration (candidate × parameter assignment) is modeled — cheap, and
   the only ranking that means anything without a GPU. Each is an `Instantiated` and a
   `Measured(kind="modeled")` event.
2. **finalists**: the best `max_trials` by model get Triton code and are compiled for sm_90 in
   parallel worker processes; as each compile finishes, its kernel is measured by the backend
   (one at a time, as on a GPU) and a `Measured` event carries the number and its kind (with the
   model backend, only a finalist that fails gets a second event: its `inf`).
   A configuration that fails to generate, compile or run scores `inf` — it is reported, it never
   stops the run.
3. the best finalist wins: by the backend's latency, except that interpreted timings rank nothing
   (they are CPU wall times), so the interpreter's finalists are ranked by the model.

Triton's own knobs are tuning parameters too (`Config.knobs`: `num_warps`, `num_stages`). Only a
measuring backend can rank them (the model and the interpreter give every setting one number),
so with one the best `KNOB_FINALISTS` finalists are also tried at each setting of `KNOBS`;
otherwise every kernel is launched with Triton's defaults and 4 warps (Prism's 128 threads).

Measurements are cached in a `ResultDB` under a key holding everything that can invalidate them
(the device's dtype among them). Programs are generated for the device's dtype.
"""

from __future__ import annotations

import hashlib
import math
import os
import queue
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np

from prism.cost import DeviceSpec, modeled, roofline_us
from prism.errors import PrismError
from prism.instantiate.codegen import NUM_WARPS, TritonProgram, generate
from prism.ir.graph import KernelGraph
from prism.ir.serialize import graph_to_json
from prism.ir.spec import substitute_graph
from prism.trace import Instantiated, Measured, Tracer
from prism.tune.backends import Backend
from prism.tune.database import ResultDB, result_key, source_version

MAX_TRIALS = 8
# Triton's launch knobs a measuring backend tries on its best finalists (the first is the
# default every other backend launches with); num_stages None is Triton's own default
KNOBS: tuple[tuple[tuple[str, int], ...], ...] = (
    (), (("num_warps", 8),), (("num_stages", 2), ("num_warps", 4)),
    (("num_stages", 2), ("num_warps", 8)))
KNOB_FINALISTS = 3


@dataclass(frozen=True)
class Config:
    """One concrete kernel to try: a verified candidate, an assignment of its sizes, and
    Triton's launch knobs (sorted (name, value): `num_warps`, `num_stages`; none: defaults)."""

    candidate: str
    graph: KernelGraph                      # the candidate (sizes may be symbolic)
    params: tuple[tuple[str, int], ...]     # sorted (variable, value)
    knobs: tuple[tuple[str, int], ...] = ()

    @property
    def id(self) -> str:
        inside = ",".join(f"{k}={v}" for k, v in self.params)
        knobs = "".join(f",{k}={v}" for k, v in self.knobs)
        return f"{self.candidate}[{inside}{knobs}]" if inside or not knobs else \
            f"{self.candidate}[{knobs[1:]}]"

    def concrete(self) -> KernelGraph:
        return substitute_graph(self.graph, dict(self.params)) if self.params else self.graph


@dataclass
class Trial:
    config: Config
    modeled_us: float
    latency_us: float = math.inf
    kind: str = "modeled"
    error: str | None = None
    program: TritonProgram | None = None
    ptx: dict[str, str] = field(default_factory=dict)
    cached: bool = False
    # why a finalist was never measured (tuning stopped before it: cancelled, budget): not a
    # failure, and not ranked
    not_measured: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.not_measured is None and \
            math.isfinite(self.latency_us)

    @property
    def failed(self) -> bool:
        return not self.ok and self.not_measured is None

    def to_json(self) -> dict[str, Any]:
        return {"id": self.config.id, "candidate": self.config.candidate,
                "params": dict(self.config.params), "knobs": dict(self.config.knobs),
                "modeled_us": _num(self.modeled_us),
                "latency_us": _num(self.latency_us), "kind": self.kind, "error": self.error,
                "cached": self.cached,
                **({"not_measured": self.not_measured} if self.not_measured else {})}


def _num(x: float) -> float | None:
    return round(x, 4) if math.isfinite(x) else None


@dataclass
class TuningResult:
    screened: list[Trial]               # every configuration, modeled
    finalists: list[Trial]              # compiled and measured by the backend
    backend: str
    kind: str
    seconds: float = 0.0
    stopped: str | None = None          # why tuning ended early (budget, cancel), if it did

    def ranked(self) -> list[Trial]:
        """The finalists that compiled and ran, best first: by the backend's latency, except
        that interpreted wall times rank nothing, so the interpreter's are ranked by the model."""
        rank: Callable[[Trial], float] = (
            (lambda t: t.modeled_us) if self.kind == "interpreted" else (lambda t: t.latency_us))
        return sorted((t for t in self.finalists if t.ok), key=lambda t: (rank(t), t.config.id))

    @property
    def best(self) -> Trial | None:
        ranked = self.ranked()
        return ranked[0] if ranked else None

    def summary(self) -> dict[str, Any]:
        return {"backend": self.backend, "kind": self.kind, "screened": len(self.screened),
                "finalists": len(self.finalists),
                "failed": sum(1 for t in self.finalists if t.failed),
                "not_measured": sum(1 for t in self.finalists if t.not_measured),
                "best": self.best.config.id if self.best else None,
                "seconds": round(self.seconds, 3),
                **({"stopped": self.stopped} if self.stopped else {})}


def tune(configs: Sequence[Config], backend: Backend, device: DeviceSpec, *,
         tracer: Tracer | None = None, max_trials: int = MAX_TRIALS, compile_ptx: bool = True,
         workers: int | None = None, db: ResultDB | None = None, budget_s: float | None = None,
         cancel: threading.Event | None = None,
         prefer: Callable[[Config], bool] | None = None,
         order: Callable[[Sequence[Config]], Sequence[float]] | None = None) -> TuningResult:
    """Screen `configs` by the model, measure the `max_trials` best distinct ones (with
    `prefer`, an advisor's hints: the configurations it prefers first, then the rest, each
    group in the model's order, and the model's own best always among them: a hint reorders
    the queue, it cannot push out what the model would measure first). `order` is another
    trial order than the model's: a score per configuration, lower first (the learned
    evaluator's, `prism.learn.tuning_scores`); every configuration is still screened."""
    tracer = tracer or Tracer()
    started = tracer.budget.now()      # the budget's clock: it stands still while paused
    screened = [_screen(c, device, tracer) for c in configs]
    finite = [t for t in screened if math.isfinite(t.modeled_us)]
    score = {id(t): t.modeled_us for t in finite} if order is None else \
        dict(zip(map(id, finite), order([t.config for t in finite]), strict=True))
    ranked = sorted(finite, key=lambda t: (prefer is not None and not prefer(t.config),
                                           score[id(t)], t.config.id))
    finalists = _distinct(ranked, max_trials)
    if prefer is not None and ranked:
        own = min(ranked, key=lambda t: (t.modeled_us, t.config.id))
        if own not in finalists:
            finalists = [*_distinct([t for t in ranked if t is not own], max_trials - 1), own]
    if backend.kind == "measured":
        finalists = with_knobs(finalists)
    result = TuningResult(screened, finalists, backend.name, backend.kind)
    context = _context(backend, device)

    def out_of_time() -> str | None:
        if cancel is not None and cancel.is_set():
            return "cancelled"
        if budget_s is not None and tracer.budget.now() - started > budget_s:
            return "budget"
        return None

    for trial in finalists:
        _generate(trial, device)
    workers = workers or max(1, min(4, os.cpu_count() or 1))
    built: queue.Queue[Trial] = queue.Queue()
    threads = _compile_in_background(finalists, compile_ptx, workers, built)
    waiting = list(finalists)
    while waiting:
        stop = out_of_time()
        if stop:
            # keep everything measured so far; the rest is reported, not waited for. The
            # model's number needs no compiled kernel, so a modeled finalist is measured now;
            # another is "not measured", which is not a failure
            result.stopped = stop
            for trial in waiting:
                if backend.name == "model" or trial.error is not None:
                    _measure(trial, backend, device, db, context)
                    if not trial.ok:
                        _emit(tracer, trial, device)
                else:
                    trial.kind = backend.kind
                    trial.not_measured = ("cancelled" if stop == "cancelled" else
                                          "the tuning budget was spent")
            break
        try:
            trial = built.get(timeout=0.25)
        except queue.Empty:
            continue
        waiting.remove(trial)
        _measure(trial, backend, device, db, context)
        if backend.kind != "modeled" or not trial.ok:
            _emit(tracer, trial, device)      # a modeled finalist was already on the trace
    if not result.stopped:
        for thread in threads:
            thread.join()
    result.seconds = tracer.budget.now() - started
    return result


def tune_one(config: Config, backend: Backend, device: DeviceSpec, *,
             tracer: Tracer | None = None, db: ResultDB | None = None) -> Trial:
    """One configuration screened, generated and measured as a finalist is (without PTX): the
    pipeline's last resort, the input program, when no finalist passed its check."""
    tracer = tracer or Tracer()
    trial = _screen(config, device, tracer)
    _generate(trial, device)
    _measure(trial, backend, device, db, _context(backend, device))
    if backend.kind != "modeled" or not trial.ok:
        _emit(tracer, trial, device)
    return trial


def _distinct(ranked: list[Trial], limit: int) -> list[Trial]:
    """The first `limit` trials whose concrete kernels differ (candidates from different
    families can instantiate to the same program; compiling it twice tells nothing)."""
    seen: set[str] = set()
    out = []
    for t in ranked:
        key = result_key(graph=_anonymous(graph_to_json(t.config.concrete())))
        if key in seen:
            continue
        seen.add(key)
        out.append(t)
        if len(out) == limit:
            break
    return out


def with_knobs(finalists: list[Trial], knobs: Sequence[tuple[tuple[str, int], ...]] = KNOBS,
               top: int = KNOB_FINALISTS) -> list[Trial]:
    """The finalists, the best `top` of them (by the model) also at each setting of `knobs`:
    one trial per setting, modeled alike (the model does not see the knobs)."""
    out: list[Trial] = []
    for k, trial in enumerate(finalists):
        settings = knobs if k < top else knobs[:1]
        out += [trial if not setting else
                Trial(replace(trial.config, knobs=setting), trial.modeled_us)
                for setting in settings]
    return out


def _anonymous(doc: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if k != "name"}


def _emit(tracer: Tracer, trial: Trial, device: DeviceSpec) -> None:
    tracer.emit(Measured(trial.config.id, trial.config.candidate, _params_json(trial),
                         trial.latency_us, trial.kind, device.name))


def device_json(device: DeviceSpec) -> dict[str, Any]:
    """Every field of `device`, its dtype by name (`prism.steps` builds the device again)."""
    out = {f.name: getattr(device, f.name) for f in fields(device) if f.name != "dtype"}
    return {**out, "dtype": device.dtype.name}


def _params_json(trial: Trial) -> dict[str, Any]:
    out: dict[str, Any] = {**dict(trial.config.params), **dict(trial.config.knobs)}
    if trial.error:
        out["error"] = trial.error
    return out


def _screen(config: Config, device: DeviceSpec, tracer: Tracer) -> Trial:
    tracer.emit(Instantiated(config.id, config.candidate, dict(config.params),
                             device_json(device)))
    try:
        latency = modeled(config.concrete(), device).latency_us
    except PrismError as e:
        trial = Trial(config, math.inf, error=str(e))
    else:
        trial = Trial(config, latency, latency_us=latency)
    tracer.emit(Measured(config.id, config.candidate, _params_json(trial), trial.modeled_us,
                         "modeled", device.name))
    trial.latency_us = math.inf
    return trial


def _generate(trial: Trial, device: DeviceSpec) -> None:
    try:
        knobs = dict(trial.config.knobs)
        trial.program = generate(trial.config.concrete(), name=trial.config.id,
                                 dtype=device.dtype, num_warps=knobs.get("num_warps", NUM_WARPS),
                                 num_stages=knobs.get("num_stages"))
    except PrismError as e:
        trial.error = str(e)


def _compile_in_background(trials: list[Trial], compile_ptx: bool, workers: int,
                           built: queue.Queue[Trial]) -> list[threading.Thread]:
    """Compile the trials' programs in `workers` subprocesses (each pays Triton's import once),
    putting each trial on `built` as soon as its compile is done (at once when there is nothing
    to compile)."""
    todo = [t for t in trials if compile_ptx and t.program is not None and t.error is None]
    for t in trials:
        if t not in todo:
            built.put(t)
    if not todo:
        return []
    from prism.instantiate.triton_backend import Compiled, CompileError, compile_many

    def run(chunk: list[Trial]) -> None:
        reported: set[int] = set()

        def done(i: int, result: list[Compiled] | CompileError) -> None:
            trial = chunk[i]
            if isinstance(result, CompileError):
                trial.error = str(result)
            else:
                trial.ptx = {c.kernel: c.ptx for c in result}
            reported.add(i)
            built.put(trial)
        try:
            compile_many([t.program for t in chunk if t.program is not None], on_done=done)
        except Exception as e:  # the compiler itself broke: every trial left scores inf
            for i, trial in enumerate(chunk):
                if i not in reported:
                    trial.error = f"not compiled: {type(e).__name__}: {e}"
                    built.put(trial)

    chunks = [todo[k::workers] for k in range(min(workers, len(todo)))]
    threads = [threading.Thread(target=run, args=(c,), daemon=True) for c in chunks]
    for thread in threads:
        thread.start()
    return threads


def _context(backend: Backend, device: DeviceSpec) -> dict[str, Any]:
    # the dtype too: an fp32 timing (twice the bytes) is never an fp16 one
    ctx: dict[str, Any] = {"backend": backend.name, "device": device.name,
                           "dtype": device.dtype.name,
                           "model": source_version("prism.cost.model", "prism.cost.devices",
                                                   "prism.ir.dtypes")}
    held = getattr(backend, "inputs", None)
    if held is not None:    # a check's verdict holds for the inputs it ran on
        digest = hashlib.sha256()
        for a in held:
            digest.update(np.ascontiguousarray(a).tobytes())
        ctx["check_inputs"] = digest.hexdigest()[:16]
    if backend.name != "model":
        from prism.instantiate.triton_backend import versions
        ctx.update(versions(), codegen=source_version("prism.instantiate.codegen",
                                                       "prism.instantiate.lowering"))
    return ctx


def _measure(trial: Trial, backend: Backend, device: DeviceSpec, db: ResultDB | None,
             context: dict[str, Any]) -> None:
    trial.kind = backend.kind
    if trial.error is not None:
        return
    key = result_key(graph=graph_to_json(trial.config.concrete()), **context,
                     source=trial.program.source if trial.program else None)
    hit = db.get(key, kind=trial.kind) if db is not None else None
    if hit is not None:
        trial.latency_us = float(hit["latency_us"])
        trial.error = hit.get("error")
        trial.cached = True
        return
    try:
        trial.latency_us = (trial.modeled_us if backend.name == "model"
                            else backend.measure(trial.config.concrete(), trial.program))
    except PrismError as e:
        trial.error = str(e)
    except Exception as e:  # a kernel crashing in Triton or torch scores inf; keep going
        trial.error = f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e) else ''}"
    if trial.error is not None:
        trial.latency_us = math.inf
    if db is not None:
        # the roofline bound lets the database check a modeled latency when it reads it back
        db.put(key, {"config": trial.config.id, "latency_us": trial.latency_us,
                     "kind": trial.kind, "error": trial.error,
                     "roofline_us": roofline_us(trial.config.concrete(), device)})
