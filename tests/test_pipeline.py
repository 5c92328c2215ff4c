"""`superoptimize` end to end, on every workload at small shapes and reduced caps: a fused
kernel, proved, tuned, compiled for sm_90, and matching torch in Triton's interpreter; its stages
on the trace; what it writes; what it does with bad input and a cancelled run; and that it
claims no more than it showed (a check that could not run, a candidate without a verdict, a trace
file that cannot be written)."""

from __future__ import annotations

import json
import threading

import numpy as np
import pytest
import torch

from prism.errors import PrismError, UnknownDeviceError
from prism.instantiate.triton_backend import load
from prism.pipeline import INPUT_PROGRAM, Check, superoptimize
from prism.trace import Measured, StageFinished, StageStarted, read_jsonl

NINE = ["rmsnorm_matmul", "rmsnorm_mlp", "swiglu", "attention", "qknorm_attention", "gated_mlp",
        "lora", "gqa", "ntrans"]
STAGES = ["search", "instantiate", "tune", "check", "write"]


def run_small(cases, name, **kw):
    return superoptimize(cases.small(name), search_config=cases.reduced(name), **kw)


@pytest.mark.parametrize("name", NINE)
def test_every_workload_gets_a_fused_kernel_that_matches_torch(cases, name, tmp_path):
    result = run_small(cases, name, max_trials=1, out=tmp_path)
    best = result.best
    assert best is not None and best.candidate != INPUT_PROGRAM
    assert best.num_kernels == 1 and len(best.graph.custom_ops) == 1
    assert best.verdict is not None and best.verdict.verdict == "equivalent"
    assert best.latency_kind == "modeled" and best.latency_us < result.eager_us
    assert best.latency_us >= result.roofline_us * 0.999    # the bound holds
    assert best.check.passed, best.check
    assert best.check.max_rel_err_vs_torch is not None and best.check.max_rel_err_vs_torch <= 2e-2
    assert best.ptx and all(".target sm_90" in p for p in best.ptx.values())
    # the written module, imported as a user would, against the torch reference
    w = cases.small(name)
    arrays = w.random_inputs(7)
    module = load((tmp_path / "kernel.py").read_text())
    with np.errstate(all="ignore"):     # padded rows are 0/0 in the interpreter's numpy
        got = module.run(*[torch.tensor(a, dtype=torch.float16) for a in arrays])
    want = w.reference(*[torch.tensor(a, dtype=torch.float16).double().numpy()
                         for a in arrays])[0]
    err = np.abs(got.double().numpy() - want).max() / np.abs(want).max()
    assert err <= 2e-2


def test_the_trace_holds_every_stage_and_the_files_are_written(cases, tmp_path):
    result = run_small(cases, "rmsnorm_matmul", max_trials=2, out=tmp_path)
    started = [e.stage for e in result.trace if isinstance(e, StageStarted)]
    finished = {e.stage: e for e in result.trace if isinstance(e, StageFinished)}
    assert started == STAGES and set(finished) == set(STAGES)
    assert all(finished[s].error is None for s in STAGES)
    on_disk = list(read_jsonl(tmp_path / "trace.jsonl.gz"))
    assert len(on_disk) == len(result.trace)
    failed = sum(not t.ok for t in result.tuning.finalists)
    assert sum(isinstance(e, Measured) for e in on_disk) == len(result.tuning.screened) + failed
    doc = json.loads((tmp_path / "result.json").read_text())
    assert doc["best"]["latency_kind"] == "modeled"
    assert set(doc["files"]) >= {"kernel", "ptx", "trace", "report"}
    html = (tmp_path / "report.html").read_text()
    assert "<svg" in html
    # the tuning plot: one point per finite measurement on the trace
    finite = sum(isinstance(e, Measured) and e.latency_us < float("inf") for e in on_disk)
    plot = html.split("<svg class='prism-tuning'", 1)[1].split("</svg>", 1)[0]
    assert plot.count("<circle class='point'") == finite > 0
    assert "roofline" in html and "modeled" in html
    assert result.best.verdict.steps[0][0].rule in html    # the proof's first axiom
    ptx = (tmp_path / "kernel.ptx").read_text()
    assert ".target sm_90" in ptx and ".loc" not in ptx


def test_a_cancelled_run_still_returns_the_input_program(cases):
    stop = threading.Event()
    stop.set()
    result = run_small(cases, "swiglu", cancel=stop, max_trials=1, compile_ptx=False)
    assert result.search is not None and not result.search.complete
    # tuning was cancelled too: nothing lost, no exception; the model's numbers need no
    # compiled kernel, so the input program is kept as the best, its check not run
    assert result.tuning is not None and result.tuning.stopped == "cancelled"
    assert {t.config.candidate for t in result.tuning.screened} >= {INPUT_PROGRAM}
    assert result.best is not None and result.best.candidate == INPUT_PROGRAM
    assert result.best.latency_kind == "modeled"
    assert result.best.check.status == "not run" and "cancelled" in result.best.check.reason


def test_an_exhausted_budget_falls_back_to_the_input_program(cases):
    """A search with no room finds nothing; the user's own program is still tuned and kept."""
    config = cases.reduced("swiglu", max_families=1)
    result = superoptimize(cases.small("swiglu"), search_config=config, max_trials=1,
                           compile_ptx=False)
    assert result.best is not None and result.best.candidate == INPUT_PROGRAM
    assert result.best.verdict is None and result.best.check.passed


def test_bad_input_is_a_clear_error(cases):
    with pytest.raises(UnknownDeviceError):
        superoptimize(cases.small("swiglu"), device="v100")
    with pytest.raises(PrismError, match="unknown measure backend"):
        superoptimize(cases.small("swiglu"), measure="fast")
    with pytest.raises(PrismError, match="positive"):
        superoptimize(cases.small("swiglu"), budget_s=0)
    with pytest.raises(PrismError, match="cannot optimize"):
        superoptimize(42)


def test_a_winner_too_large_to_interpret_is_checked_at_a_smaller_member(cases, monkeypatch):
    import prism.pipeline as pipeline
    monkeypatch.setattr(pipeline, "MAX_CHECK_STEPS", 2)
    result = run_small(cases, "rmsnorm_matmul", max_trials=1, compile_ptx=False)
    check = result.best.check
    assert pipeline._steps(result.best.graph) > 2
    assert check.passed and "smallest member" in (check.instance or ""), check
    # a winner with no smaller member (a concrete program, as a log-sum-exp split is) is
    # checked itself, up to the larger limit, and past it the check says why it did not run
    from dataclasses import replace
    concrete = replace(result.best, symbolic=None)
    work = cases.small("rmsnorm_matmul")
    itself = pipeline.check_best(concrete, work, "interpret")
    assert itself.passed and not itself.instance, itself
    monkeypatch.setattr(pipeline, "MAX_WHOLE_CHECK_STEPS", 2)
    skipped = pipeline.check_best(concrete, work, "interpret")
    assert skipped.status == "not run" and "no smaller member" in skipped.reason, skipped


def test_a_symbolic_checkpoint_is_optimized_at_other_shapes_without_searching(cases, tmp_path):
    ck = tmp_path / "swiglu.ck.json"
    first = run_small(cases, "swiglu", max_trials=1, compile_ptx=False, checkpoint=ck)
    assert ck.exists() and first.search.stop_reason != "checkpoint"
    wide = cases.small("swiglu").with_shapes(X=(16, 128), Wgate=(128, 96), Wup=(128, 96))
    again = superoptimize(wide, search_config=cases.reduced("swiglu"), max_trials=1,
                          compile_ptx=False, checkpoint=ck)
    assert again.search.stop_reason == "checkpoint" and again.search.generated == 0
    best = again.best
    assert best is not None and best.candidate != INPUT_PROGRAM and best.check.passed
    assert tuple(d.value for d in best.graph.shape(best.graph.inputs[0])) == (16, 128)


def test_a_winner_that_fails_its_check_gives_way_to_the_next(cases, monkeypatch):
    import prism.pipeline as pipeline
    real = pipeline.check_best
    failed = []

    def first_fails(best, workload, measure):
        if not failed:
            failed.append(best.config)
            return Check("failed", "wrong on purpose")
        return real(best, workload, measure)
    monkeypatch.setattr(pipeline, "check_best", first_fails)
    result = run_small(cases, "rmsnorm_matmul", max_trials=3, compile_ptx=False)
    assert result.best is not None and result.best.config != failed[0]
    assert result.best.check.passed
    loser = next(t for t in result.tuning.finalists if t.config.id == failed[0])
    assert loser.latency_us == float("inf") and "wrong on purpose" in loser.error


# --- what the pipeline says it checked (issue 13, item 5) -------------------------------------


def no_triton(monkeypatch):
    """Make the check impossible here: loading a generated module raises, as it does where
    Triton is not installed (measure="model" with compile_ptx=False loads nothing else)."""
    import prism.instantiate.triton_backend as tb

    def missing(*args, **kwargs):
        raise ImportError("No module named 'triton'")
    monkeypatch.setattr(tb, "load", missing)


def test_a_winner_whose_check_cannot_run_is_not_run_never_passed(cases, monkeypatch, tmp_path):
    from prism.report import check_text
    no_triton(monkeypatch)
    result = run_small(cases, "rmsnorm_matmul", max_trials=1, compile_ptx=False, out=tmp_path)
    check = result.best.check
    assert check.status == "not run" and not check.passed
    assert "ImportError" in check.reason and "triton" in check.reason
    assert check_text(check).startswith("not run (") and "passed" not in check_text(check)
    written = json.loads((tmp_path / "result.json").read_text())["best"]["check"]
    assert written["status"] == "not run" and written["passed"] is False
    assert "ImportError" in written["reason"]
    html = (tmp_path / "report.html").read_text()
    line = html.split("<p>Check: ", 1)[1].split("</p>", 1)[0]
    assert line.startswith("not run (") and "passed" not in line
    # the trace says the same: the check stage's summary, as the widgets read it
    stage = next(e for e in read_jsonl(tmp_path / "trace.jsonl.gz")
                 if isinstance(e, StageFinished) and e.stage == "check")
    assert Check.from_json(stage.summary["check"]) == check


def test_a_check_record_that_does_not_say_it_passed_is_not_read_as_passed():
    """Readers of older traces and of `check_kernel`'s report: nothing is passed by default."""
    assert Check.from_json({"checked": False, "reason": "too large"}) == Check.not_run("too large")
    assert Check.from_json({}).status == "not run"
    assert Check.from_json(None).status == "not run"
    assert Check.from_json({"checked": True, "passed": True}).passed
    failed = Check.from_json({"checked": True, "passed": False, "max_rel_err_vs_torch": 0.5})
    assert failed.status == "failed" and "5.0e-01" in failed.reason
    for check in (Check.not_run("no GPU"), failed, Check("passed", where="gpu",
                                                           max_rel_err_vs_torch=1e-3)):
        assert Check.from_json(check.to_json()) == check


def test_a_candidate_is_the_input_program_by_its_id_not_by_a_missing_verdict(cases,
                                                                            monkeypatch):
    import prism.pipeline as pipeline
    real = pipeline.instantiate

    def verdicts_lost(graph, found, *rest):
        configs = real(graph, found, *rest)
        found.candidates.clear()       # every fused finalist's verdict lookup now misses
        return configs
    monkeypatch.setattr(pipeline, "instantiate", verdicts_lost)
    monkeypatch.setattr(pipeline, "MAX_CHECKED", 1000)
    result = run_small(cases, "rmsnorm_matmul", max_trials=1000, compile_ptx=False)
    set_aside = [t for t in result.tuning.finalists if t.config.candidate != INPUT_PROGRAM]
    assert set_aside and all("no equivalence proof" in (t.error or "") for t in set_aside)
    assert any("no equivalence proof" in n for n in result.notes)
    best = result.best       # the input program, which is proved by identity
    assert best is not None and best.candidate == INPUT_PROGRAM and best.is_input_program
    assert best.to_json()["proof"] == "identity (the input program)"
    # a fused kernel whose verdict is missing is never called the input program
    fused = pipeline.replace(best, candidate="c7", config="c7[gx=8]")
    assert not fused.proved and fused.to_json()["verdict"] == "unknown"
    assert "identity" not in fused.to_json()["proof"]


class FillsUp:
    """A file that takes `room` writes, then fails as a full disk does."""

    def __init__(self, file, room):
        self.file, self.room = file, room

    def write(self, text):
        if self.room == 0:
            raise OSError(28, "No space left on device")
        self.room -= 1
        return self.file.write(text)

    def __getattr__(self, name):
        return getattr(self.file, name)


def test_a_trace_file_that_cannot_be_written_stops_the_run_with_a_clear_error(
        cases, monkeypatch, tmp_path):
    import prism.pipeline as pipeline
    from prism.errors import TraceWriteError
    from prism.trace import JsonlWriter, Tracer

    class SmallDisk(JsonlWriter):
        def __init__(self, path, **kw):
            super().__init__(path, **kw)
            self._file = FillsUp(self._file, 5)
    monkeypatch.setattr(pipeline, "JsonlWriter", SmallDisk)
    tracer, view = Tracer(), []
    tracer.subscribe(view.append)          # a widget: it hears everything up to the error
    out = tmp_path / "out"
    with pytest.raises(TraceWriteError) as err:
        run_small(cases, "rmsnorm_matmul", max_trials=1, compile_ptx=False, out=out,
                  tracer=tracer)
    message = str(err.value)
    assert f"the trace file {out / 'trace.jsonl.gz'} could not be written" in message
    assert "No space left on device" in message and "--out" in message
    assert not out.exists()             # a failed run never takes the output folder's place
    (failed,) = tmp_path.glob("out.failed-*")             # its partial results, beside it
    assert len(read_jsonl(failed / "trace.jsonl.gz")) == 5
    assert len(view) > 6 and view[5].seq == 5             # the event that failed reached it
    last = view[-1]
    assert isinstance(last, StageFinished) and "could not be written" in (last.error or "")
    assert not (failed / "result.json").exists()          # no result claims a complete run


def test_a_view_that_fails_is_reported_in_the_notes_not_only_kept_in_a_list(cases):
    from prism.trace import Tracer

    def broken(event):
        raise RuntimeError("the view fell over")
    tracer = Tracer()
    tracer.subscribe(broken)
    result = run_small(cases, "swiglu", max_trials=1, compile_ptx=False, tracer=tracer)
    assert result.best is not None          # a view is optional: the run goes on
    assert any("the view fell over" in n and "broken" in n for n in result.notes)


@pytest.mark.parametrize("where", ["local", "processes"])
def test_a_sampled_trace_builds_only_the_families_it_keeps(cases, tmp_path, monkeypatch, where):
    """With no trace file, the run's sampler (`FamilySampler`) tells the search beforehand
    which pruned families it would drop, and those are counted, never built. Locally,
    result.trace holds the very family events of a run that writes every event; on worker
    processes each task keeps its share in full and one pruned example per rule (a note says
    so). The search's counts and candidates are the same either way."""
    import prism.pipeline as pipeline
    import prism.search.driver as driver
    from prism.search.executors import Executor
    monkeypatch.setattr(pipeline, "MAX_TRACE_FAMILIES", 40)
    counted = []                # families counted unbuilt under a tracer someone listens to
    plain = driver._Run.counted

    def counting(self, why, parent):
        if self.tracer.wants_events:        # not a silent pass (the cuts' first pass)
            counted.append(why.rule)
        plain(self, why, parent)
    monkeypatch.setattr(driver._Run, "counted", counting)
    executor = Executor(where, 2 if where == "processes" else None)
    written = run_small(cases, "rmsnorm_matmul", max_trials=1, compile_ptx=False,
                        out=tmp_path / "run", executor=executor)
    assert not counted          # a trace file wants every family: each one is built
    sampled = run_small(cases, "rmsnorm_matmul", max_trials=1, compile_ptx=False,
                        executor=executor)

    def families(result):
        return [(e.type, e.id, getattr(e, "rule", None)) for e in result.trace
                if e.type in ("FamilyGenerated", "FamilyPruned")]

    def found(result):
        summary = result.search.summary()
        summary.pop("seconds")
        summary["notes"] = [n for n in summary.get("notes", []) if "each task's first" not in n]
        return summary, [(c.id, c.verdict.verdict) for c in result.search.candidates]

    assert found(sampled) == found(written)
    rules = {rule for kind, _, rule in families(written) if kind == "FamilyPruned"}
    kept = families(sampled)
    assert {rule for kind, _, rule in kept if kind == "FamilyPruned"} == rules
    if where == "local":
        assert counted and kept == families(written)     # the same events, fewer built
    else:
        full = [(e.type, e.id, getattr(e, "rule", None))
                for e in read_jsonl(tmp_path / "run" / "trace.jsonl.gz")
                if e.type in ("FamilyGenerated", "FamilyPruned")]
        assert kept == [e for e in full if e in set(kept)] and len(kept) < len(full)
        assert any("each task's first 2 family events" in n for n in sampled.search.notes)


def test_result_trace_is_bounded_and_the_report_is_still_whole(cases, tmp_path, monkeypatch):
    """Past MAX_TRACE_FAMILIES family events, result.trace keeps one pruned example per rule;
    the counts stay whole, the note says so, and the report made from it is the one made from
    the complete trace file."""
    import prism.pipeline as pipeline
    from prism.report import page
    monkeypatch.setattr(pipeline, "MAX_TRACE_FAMILIES", 40)
    result = run_small(cases, "rmsnorm_matmul", max_trials=1, compile_ptx=False,
                       out=tmp_path / "run")
    full = list(read_jsonl(tmp_path / "run" / "trace.jsonl.gz"))
    families = [e for e in full if e.type in ("FamilyGenerated", "FamilyPruned")]
    kept = [e for e in result.trace if e.type in ("FamilyGenerated", "FamilyPruned")]
    rules = {e.rule for e in families if e.type == "FamilyPruned"}
    assert len(families) > 40 + len(rules) + 1
    assert kept == [e for e in families if e in kept] and len(kept) <= 40 + len(rules) + 1
    assert {e.rule for e in kept if e.type == "FamilyPruned"} == rules
    assert [e for e in result.trace if e.type not in ("FamilyGenerated", "FamilyPruned")] == \
        [e for e in full if e.type not in ("FamilyGenerated", "FamilyPruned")]
    generated = sum(s.generated for s in [*(result.fusion.searches if result.fusion else []),
                                          result.search])
    assert any(f"first 40 family events of {generated:,} families" in n for n in result.notes)
    assert page(result.trace) == page(full)
    assert (tmp_path / "run" / "report.html").read_text() == page(full)
