"""The workbench over one run: replayed from events and from a JSONL file, live, and saved as a
static page — each checked against the trace it was fed."""

from __future__ import annotations

from prism.trace import CandidateRejected, CandidateVerified, StageFinished, write_jsonl
from widgets import Workbench
from widgets.workbench import WINNER


def check_summary(events):
    return next(e.summary for e in events if isinstance(e, StageFinished) and e.stage == "check")


def test_a_replayed_run_shows_every_candidate_and_the_winner(recorded, tmp_path):
    events = recorded.events
    path = tmp_path / "trace.jsonl"
    write_jsonl(events, path)
    for source in (events, path):
        bench = Workbench.from_trace(source)
        want = {e.id for e in events if isinstance(e, CandidateVerified | CandidateRejected)}
        assert set(bench.candidates) == want
        assert bench.winner is not None
        assert bench.winner["best"] == check_summary(events)["best"]
        assert bench.explorer.state.generated == sum(
            e.type == "FamilyGenerated" for e in events)
        values = [v for _, v in bench.choice.options]
        assert values[0] == WINNER and set(values[1:]) == want


def test_choosing_a_candidate_shows_its_sgraph_and_proof(recorded):
    bench = Workbench.from_trace(recorded.events)
    verified = next(e for e in recorded.events if isinstance(e, CandidateVerified))
    bench.choice.value = verified.id
    sgraph, proof = bench.detail.children
    assert "custom kernel" in sgraph.picture.value
    steps = verified.proof["proof"][0]
    assert all(s["axiom"] in proof.children[0].value for s in steps)
    bench.choice.value = WINNER
    _head, winner, _proof, _source = bench.detail.children
    assert winner.state.graph.num_kernels == recorded.result.best.num_kernels


def test_save_html_writes_a_page_with_everything(recorded, tmp_path):
    bench = Workbench.from_trace(recorded.events)
    page = bench.save_html(tmp_path / "bench.html").read_text()
    summary = check_summary(recorded.events)
    assert "<svg" in page
    finite = sum(e.type == "Measured" and e.latency_us < float("inf") for e in recorded.events)
    plot = page.split("<svg class='prism-tuning'", 1)[1].split("</svg>", 1)[0]
    assert plot.count("<circle class='point'") == finite > 0
    assert f"{summary['latency_us']:.2f} µs" in page
    pruned = next(e.summary for e in recorded.events if e.type == "SearchFinished")
    for rule, n in pruned["families"]["pruned"].items():
        assert f"<td>{rule}</td><td>{n}</td>" in page
    best = recorded.result.best
    if best.verdict is not None and best.verdict.steps and best.verdict.steps[0]:
        assert best.verdict.steps[0][0].rule in page


def test_a_live_run_fills_every_view(small, tmp_path):
    bench = Workbench(small.workload, search_config=small.config, max_trials=2,
                      compile_ptx=False, out=tmp_path / "run")
    assert bench.result is None and not bench.explorer.running
    result = bench.run().join(timeout=300)
    assert result is not None and result.best is not None
    assert bench.winner is not None and bench.winner["best"] == result.best.config
    assert bench.explorer.state.generated == result.search.generated
    modeled = bench.tuning.state.points["modeled"]
    assert len(modeled) == sum(t.modeled_us < float("inf") for t in result.tuning.screened)
    assert {cid for cid in bench.candidates} == {c.id for c in result.search.candidates}
    # out=: the run's own files, the winner's kernel among them; export writes the same kernel
    assert (tmp_path / "run" / "kernel.py").read_text() == result.best.triton_source
    assert bench.export()["kernel"].read_text() == result.best.triton_source


def test_save_html_is_the_page_prism_optimize_writes(small, tmp_path):
    import prism
    prism.superoptimize(small.workload, search_config=small.config, max_trials=2,
                        compile_ptx=False, out=tmp_path / "run")
    report = (tmp_path / "run" / "report.html").read_text()
    bench = Workbench.from_trace(tmp_path / "run" / "trace.jsonl.gz")
    assert bench.save_html(tmp_path / "bench.html").read_text() == report


def test_cancel_keeps_the_best_kernel_found_so_far(small, until):
    """Cancelled during its search, the run still tunes by the model what it proved, keeps its
    best kernel (the check not run, and saying why), lists no finalist as failed, and every
    view names the same best."""
    import asyncio
    bench = Workbench(small.workload, search_config=small.config, max_trials=3,
                      compile_ptx=False)
    bench.run()
    until(lambda: bench.explorer.state.status_counts()["verified"] >= 1, timeout=120)
    bench.explorer.cancel()
    result = asyncio.run(bench.wait(timeout=300))
    assert result.search.stop_reason == "cancelled" and not result.search.complete
    assert result.best is not None and result.best.latency_kind == "modeled"
    assert result.best.check.status == "not run" and "cancelled" in result.best.check.reason
    assert not any(t.failed for t in result.tuning.finalists)
    proved = {c.id for c in result.search.equivalent}
    assert result.best.candidate in proved
    assert bench.winner["best"] == result.best.config
    header = bench.tuning.header.value
    assert f"best <code>{result.best.config}</code>" in header and "chosen" not in header
    assert "0 failed" in header
    assert "took effect" in bench.explorer.progress.value


def test_a_cancelled_tuning_lists_finalists_as_not_measured(small):
    """Tuning cancelled before any measurement with the interpreter: every finalist is `not
    measured (cancelled)`, none failed, and the best is the best by the model, labelled so."""
    import threading

    from prism.pipeline import superoptimize
    from prism.trace import Tracer
    cancel = threading.Event()
    tracer = Tracer()
    tracer.subscribe(lambda e: cancel.set() if isinstance(e, StageFinished)
                     and e.stage == "instantiate" else None)
    result = superoptimize(small.workload, search_config=small.config, measure="interpret",
                           max_trials=3, compile_ptx=False, cancel=cancel, tracer=tracer)
    finalists = result.tuning.finalists
    assert finalists and all(t.not_measured == "cancelled" for t in finalists)
    assert not any(t.failed for t in finalists)
    assert result.tuning.summary()["not_measured"] == len(finalists)
    assert result.tuning.summary()["failed"] == 0
    by_model = min(finalists, key=lambda t: (t.modeled_us, t.config.id))
    assert result.best is not None and result.best.config == by_model.config.id
    assert result.best.latency_kind == "modeled" and result.best.latency_us == by_model.modeled_us
    assert any("best by the model" in n for n in result.notes)
    from prism.report import page
    html = page(result.trace)
    assert f"{len(finalists)} finalist(s) not measured: tuning stopped (cancelled)" in html
    assert "No configuration failed." in html


def test_the_winner_is_selected_and_shown_whole(recorded):
    """Replayed, the candidates tab opens on the winner: its id, latency with its kind, its
    check, its sGraph, its proof and its Triton source, which is the run's own text."""
    from widgets.source import SourceView
    bench = Workbench.from_trace(recorded.events)
    best = recorded.result.best
    assert bench.choice.value == WINNER
    head, _sgraph, proof, source = bench.detail.children
    assert f"<code>{best.config}</code>" in head.value
    assert f"{best.latency_us:.4g} µs ({best.latency_kind})" in head.value
    assert f"check: {best.check.status}" in head.value
    steps = best.verdict.steps[0] if best.verdict and best.verdict.steps else []
    assert all(step.rule in proof.children[0].value for step in steps)
    assert bench.winner_source() == best.triton_source
    assert isinstance(source, type(SourceView("").widget))


def test_export_writes_a_kernel_that_runs(recorded, tmp_path):
    """The exported kernel.py, loaded as a module, computes the program (the float64
    interpreter of the input program, within fp16 tolerance) under Triton's interpreter."""
    import importlib.util

    import numpy as np
    import torch

    from prism.ir.interpret import interpret
    from prism.tune.backends import random_inputs
    bench = Workbench.from_trace(recorded.events)
    files = bench.export(tmp_path / "winner")
    assert set(files) == {"kernel", "report"}         # a replay has no PTX to give
    assert files["report"].read_text() == bench.save_html(tmp_path / "page.html").read_text()
    spec = importlib.util.spec_from_file_location("exported", files["kernel"])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    program = recorded.result.graph                  # the input program, not the winner
    inputs = random_inputs(program)
    want = interpret(program, *(x.astype(np.float64) for x in inputs))
    got = module.run(*(torch.tensor(x, dtype=torch.float16) for x in inputs))
    got = got if isinstance(got, tuple | list) else (got,)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g.float().numpy(), w, rtol=2e-2, atol=2e-2)


def test_export_before_a_winner_is_a_clear_error(tmp_path):
    import pytest

    from prism.errors import PrismError
    with pytest.raises(PrismError, match="no winner to export"):
        Workbench().export(tmp_path)
