"""The tuner: screening by the model, finalists compiled and measured, failures scored inf, the
result database, cancellation; and the backends' labels."""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass

import pytest

from prism.cost import get_device, modeled
from prism.errors import PrismError
from prism.instantiate.params import assignments
from prism.trace import Instantiated, Measured, Tracer
from prism.tune import Config, MeasureError, ResultDB, make_backend, tune
from prism.tune.backends import InterpretBackend, ModelBackend

H100 = get_device("h100")


def configs_of(cases, name, limit=None):
    out = []
    for cand in cases.searched(name).equivalent:
        for env in assignments(cand.graph):
            out.append(Config(cand.id, cand.graph, tuple(sorted(env.items()))))
    return out[:limit] if limit else out


def test_screening_models_every_configuration_and_the_best_finalist_wins(cases):
    configs = configs_of(cases, "rmsnorm_matmul")
    tracer = Tracer()
    result = tune(configs, ModelBackend(H100), H100, tracer=tracer, max_trials=3,
                  compile_ptx=False)
    assert len(result.screened) == len(configs) and len(result.finalists) == 3
    instantiated = [e for e in tracer.events if isinstance(e, Instantiated)]
    measured = [e for e in tracer.events if isinstance(e, Measured)]
    assert len(instantiated) == len(configs)
    # one event per configuration: a modeled finalist that compiled gets no second one
    assert len(measured) == len(configs) and all(e.kind == "modeled" for e in measured)
    # the oracle: the cost model on each configuration's concrete graph
    lat = {c.id: modeled(c.concrete(), H100).latency_us for c in configs}
    assert result.best is not None
    assert result.best.latency_us == pytest.approx(min(lat.values()))
    finals = [lat[t.config.id] for t in result.finalists]
    assert finals == sorted(finals) and finals[0] == min(lat.values())
    assert all(t.program is not None and "@triton.jit" in t.program.source
               for t in result.finalists)


def test_finalists_are_distinct_programs(cases):
    configs = configs_of(cases, "rmsnorm_matmul")
    result = tune(configs + configs, ModelBackend(H100), H100, max_trials=50,
                  compile_ptx=False)
    sources = [t.program.source.split('"""', 2)[2] for t in result.finalists if t.program]
    assert len(sources) == len(set(sources))


@dataclass
class Flaky:
    """A backend that measures with the model but fails on one configuration."""

    bad: str
    name: str = "flaky"
    kind: str = "modeled"

    def measure(self, graph, program):
        if program is not None and self.bad in program.name:
            raise MeasureError("this one breaks")
        return modeled(graph, H100).latency_us


def test_a_failing_configuration_scores_inf_and_the_run_goes_on(cases):
    configs = configs_of(cases, "swiglu")
    # the tuner's order: modeled latency, ties by id
    ranked = sorted(configs, key=lambda c: (modeled(c.concrete(), H100).latency_us, c.id))
    tracer = Tracer()
    result = tune(configs, Flaky(ranked[0].id), H100, tracer=tracer, max_trials=3,
                  compile_ptx=False)
    failed = [t for t in result.finalists if not t.ok]
    assert [t.config.id for t in failed] == [ranked[0].id]
    assert failed[0].error == "this one breaks" and math.isinf(failed[0].latency_us)
    assert result.best is not None and result.best.config.id != ranked[0].id
    last = [e for e in tracer.events if isinstance(e, Measured) and e.id == ranked[0].id][-1]
    assert math.isinf(last.latency_us) and last.params["error"] == "this one breaks"


def test_the_result_database_caches_and_keys_on_the_device(cases, tmp_path):
    configs = configs_of(cases, "rmsnorm_matmul", limit=6)
    db = ResultDB(tmp_path / "results.jsonl")
    first = tune(configs, ModelBackend(H100), H100, max_trials=2, compile_ptx=False, db=db)
    again = tune(configs, ModelBackend(H100), H100, max_trials=2, compile_ptx=False,
                 db=ResultDB(tmp_path / "results.jsonl"))
    assert all(not t.cached for t in first.finalists)
    assert all(t.cached for t in again.finalists)
    assert [t.latency_us for t in again.finalists] == [t.latency_us for t in first.finalists]
    a100 = get_device("a100")
    other = tune(configs, ModelBackend(a100), a100, max_trials=2, compile_ptx=False, db=db)
    assert all(not t.cached for t in other.finalists)
    (tmp_path / "results.jsonl").open("a").write("{not json\n")
    assert ResultDB(tmp_path / "results.jsonl").damaged == 1


def test_cancel_stops_tuning_and_keeps_what_was_screened(cases):
    configs = configs_of(cases, "rmsnorm_matmul")
    stop = threading.Event()
    stop.set()
    result = tune(configs, ModelBackend(H100), H100, max_trials=3, compile_ptx=False,
                  cancel=stop)
    assert result.stopped == "cancelled" and len(result.screened) == len(configs)
    # the model's number needs no compiled kernel: a cancel keeps every modeled finalist
    assert all(t.ok and t.latency_us == t.modeled_us for t in result.finalists)
    assert result.best is not None and result.best.modeled_us == min(
        t.modeled_us for t in result.screened)
    # another backend's finalists are "not measured (cancelled)": neither failed nor ranked
    result = tune(configs, InterpretBackend(), H100, max_trials=3, compile_ptx=False,
                  cancel=stop)
    assert result.best is None and not any(t.failed for t in result.finalists)
    assert all(t.not_measured == "cancelled" for t in result.finalists)
    assert result.summary()["not_measured"] == 3 and result.summary()["failed"] == 0


def test_finalists_compile_for_hopper(cases):
    result = tune(configs_of(cases, "attention"), ModelBackend(H100), H100, max_trials=2)
    assert len(result.finalists) == 2
    for t in result.finalists:
        assert t.ok, t.error
        assert t.ptx and all(".target sm_90" in p for p in t.ptx.values())


def test_the_interpreter_backend_runs_and_checks_each_finalist(cases):
    configs = configs_of(cases, "swiglu")
    tracer = Tracer()
    result = tune(configs, InterpretBackend(), H100, tracer=tracer, max_trials=2,
                  compile_ptx=False)
    assert result.kind == "interpreted" and result.best is not None
    kinds = [e.kind for e in tracer.events if isinstance(e, Measured)]
    assert kinds.count("interpreted") == 2
    # interpreted wall times rank nothing: the best finalist is the best by the model
    assert result.best.modeled_us == min(t.modeled_us for t in result.finalists)


def test_backends_name_their_kind_and_refuse_what_they_cannot_do():
    assert make_backend("model", H100).kind == "modeled"
    assert make_backend("interpret", H100).kind == "interpreted"
    with pytest.raises(PrismError, match="unknown measure backend"):
        make_backend("fast", H100)
    import torch
    if not torch.cuda.is_available():
        with pytest.raises(MeasureError, match="needs a CUDA GPU"):
            make_backend("cuda", H100)


def test_checks_run_on_the_workloads_own_inputs():
    """Found on an H200: qknorm_attention normalises Q, so the tuner's uniform draw gives logits
    of about ±16 and every program of it, its input program too, overflows fp16's exp; the
    workload's inputs, drawn at the scales it declares (Q, K × 0.1), do not. The oracle is the
    float64 interpreter on the same values in both."""
    import prism
    from prism.instantiate.codegen import generate
    from prism.tune.backends import check_arrays
    from prism.tune.tuner import _context
    w = prism.get_workload("qknorm_attention")
    program = generate(w.graph)
    with pytest.raises(MeasureError, match="non-finite"):
        InterpretBackend().measure(w.graph, program)
    held = make_backend("interpret", H100, w.random_inputs(0))
    assert held.measure(w.graph, program) > 0
    # a verdict is cached for the inputs it ran on
    other = make_backend("interpret", H100, w.random_inputs(1))
    assert _context(held, H100)["check_inputs"] != _context(other, H100)["check_inputs"]
    assert "check_inputs" not in _context(InterpretBackend(), H100)
    # a graph at other shapes (another shape set) is checked on the uniform draw
    small = prism.get_workload("qknorm_attention").with_shapes(K=(2, 128, 1024),
                                                                V=(2, 1024, 128))
    assert [a.shape for a in check_arrays(small.graph, tuple(w.random_inputs(0)))] == \
        [tuple(s) for s in small.graph.user_input_shapes()]
