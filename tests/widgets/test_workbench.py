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
    (winner,) = bench.detail.children
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


def test_a_live_run_fills_every_view(small):
    bench = Workbench(small.workload, search_config=small.config, max_trials=2,
                      compile_ptx=False)
    assert bench.result is None and not bench.explorer.running
    result = bench.run().join(timeout=300)
    assert result is not None and result.best is not None
    assert bench.winner is not None and bench.winner["best"] == result.best.config
    assert bench.explorer.state.generated == result.search.generated
    modeled = bench.tuning.state.points["modeled"]
    assert len(modeled) == sum(t.modeled_us < float("inf") for t in result.tuning.screened)
    assert {cid for cid in bench.candidates} == {c.id for c in result.search.candidates}


def test_save_html_is_the_page_prism_optimize_writes(small, tmp_path):
    import prism
    prism.superoptimize(small.workload, search_config=small.config, max_trials=2,
                        compile_ptx=False, out=tmp_path / "run")
    report = (tmp_path / "run" / "report.html").read_text()
    bench = Workbench.from_trace(tmp_path / "run" / "trace.jsonl")
    assert bench.save_html(tmp_path / "bench.html").read_text() == report
