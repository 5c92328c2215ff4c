"""Static snapshots (issue 20, item 6): displaying a view leaves its live widget and then a
`text/html` output of its own, with a display id, that a reopened or exported notebook still
shows. What each snapshot holds is checked against the trace the view was fed (or the view's
model), never against the snapshot's own formatting; how it looks in a real JupyterLab after
the kernel is gone is tests/browser/test_lab.py's."""

from __future__ import annotations

import html
import math
import re
from collections import Counter

import pytest

from prism.trace import (
    CandidateRejected,
    CandidateVerified,
    FamilyGenerated,
    FamilyPruned,
    Measured,
    StageFinished,
)
from widgets import SearchExplorer, SearchTree, TuningMonitor, Workbench
from widgets.proof import ProofView
from widgets.snapshot import page_body

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def check_summary(events):
    return next(e.summary for e in events if isinstance(e, StageFinished) and e.stage == "check")


def text_of(snapshot: str) -> str:
    """The snapshot as a reader sees it: tags dropped, entities decoded."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", snapshot)).split())


def summary_of(snapshot: str) -> str:
    found = re.search(r"<span class='prism-snapshot-summary'>(.*?)</span></summary>", snapshot,
                      re.S)
    assert found, "a snapshot has a summary line"
    return text_of(found.group(1))


@pytest.fixture
def displayed(monkeypatch):
    """What IPython would publish: each `display` and `update_display` call, in order."""
    import IPython.display
    calls: list[tuple[str, dict, str | None]] = []
    monkeypatch.setattr(IPython.display, "display", lambda obj, raw=False, display_id=None:
                        calls.append(("display", obj, display_id)))
    monkeypatch.setattr(IPython.display, "update_display", lambda obj, raw=False,
                        display_id=None: calls.append(("update", obj, display_id)))
    return calls


def test_the_workbench_snapshot_names_the_winner_its_latency_and_kind_and_the_counts(recorded):
    events = recorded.events
    bench = Workbench.from_trace(events)
    snapshot = bench.snapshot_html()
    win = check_summary(events)
    line = summary_of(snapshot)
    found = re.search(r"best kernel (\S+) ?: ([0-9.e+-]+) µs \((\w+)\), check (\w+)", line)
    assert found, line
    assert found.group(1) == win["best"]
    assert math.isclose(float(found.group(2)), win["latency_us"], rel_tol=1e-3)
    assert found.group(3) == win["latency_kind"] == "modeled"
    assert found.group(4) == win["check"]["status"]
    families = sum(isinstance(e, FamilyGenerated) for e in events)
    assert f"{families} families" in line
    body = text_of(snapshot)
    assert win["best"] in body and "<script" not in snapshot
    # the page's style is scoped to the snapshot: it must not restyle the notebook's body
    assert "body{" not in snapshot and ".prism-page" in snapshot


def test_displaying_a_workbench_leaves_the_widget_then_a_snapshot_that_a_finished_run_updates(
        recorded, displayed):
    events = recorded.events
    bench = Workbench()
    bench._ipython_display_()
    (kind1, widget, _), (kind2, first, display_id) = displayed
    assert (kind1, kind2) == ("display", "display")
    assert WIDGET_MIME in widget and set(first) == {"text/html"} and display_id
    assert "best kernel" not in summary_of(first["text/html"])   # nothing has run yet
    for event in events:                                          # the run, as it goes
        bench.add(event)
    bench._finished()                                             # what wait() ends with
    kind, last, same_id = displayed[-1]
    assert (kind, same_id) == ("update", display_id)
    assert check_summary(events)["best"] in summary_of(last["text/html"])


def test_the_tree_snapshot_counts_what_the_trace_holds_and_draws_its_rows(recorded):
    events = recorded.events
    tree = SearchTree.from_events(events)
    line = summary_of(tree.snapshot_html())
    pruned = Counter(e.rule for e in events if isinstance(e, FamilyPruned))
    assert f"{sum(isinstance(e, FamilyGenerated) for e in events)} families" in line
    assert f"{sum(pruned.values())} pruned" in line
    assert f"{sum(isinstance(e, CandidateVerified) for e in events)} verified" in line
    assert f"{sum(isinstance(e, CandidateRejected) for e in events)} rejected" in line
    verified = next(e for e in events if isinstance(e, CandidateVerified))
    tree.jump_to(verified.id)                       # a row deep in the tree, opened and chosen
    body = text_of(tree.snapshot_html())
    drawn = [row["id"] for row in tree.rows() if row["id"]]
    assert verified.id in drawn and all(fid in body for fid in drawn)


def test_the_explorer_snapshot_holds_the_prunes_per_rule(recorded):
    events = recorded.events
    explorer = SearchExplorer.from_events(events)
    snapshot = explorer.snapshot_html()
    rows = dict(re.findall(r"<tr><td>pruned</td><td>([^<]+)</td><td>(\d+)</td></tr>", snapshot))
    pruned = Counter(e.rule for e in events if isinstance(e, FamilyPruned))
    # the chart also lists the rules that ran and pruned nothing, at 0
    assert {rule: int(n) for rule, n in rows.items() if n != "0"} == dict(pruned)


def test_the_tuning_snapshot_has_the_best_of_its_kind_and_every_point(recorded):
    events = recorded.events
    monitor = TuningMonitor.from_events(events)
    snapshot = monitor.snapshot_html()
    measured = [e for e in events if isinstance(e, Measured)]
    finite = [e for e in measured if math.isfinite(e.latency_us)]
    best = min(finite, key=lambda e: e.latency_us)
    found = re.search(r"best so far (\S+) ?: ([0-9.e+-]+) µs \((\w+)\)", summary_of(snapshot))
    assert found and found.group(3) == best.kind
    assert math.isclose(float(found.group(2)), best.latency_us, rel_tol=1e-3)
    assert snapshot.count("class='point'") == len(finite)
    kinds = {e.kind for e in finite}
    assert snapshot.count("<svg class='prism-tuning'") == len(kinds)   # one plot per kind


def test_the_proof_snapshot_holds_every_step_of_the_proof(recorded):
    verified = next(e for e in recorded.events if isinstance(e, CandidateVerified)
                    and e.proof.get("proof"))
    view = ProofView(verified, graph=False)
    snapshot = view.snapshot_html()
    steps = [s for out in verified.proof["proof"] for s in out]
    assert f"{len(steps)} steps" in summary_of(snapshot) and verified.id in summary_of(snapshot)
    assert all(s["axiom"] in snapshot for s in steps)


def test_the_sgraph_and_block_snapshots_follow_their_controls(recorded):
    from prism.ir.graph import KernelGraph
    from widgets.blocks import BlockView
    from widgets.sgraph import SGraphView
    win = check_summary(recorded.events)
    graph = KernelGraph.from_json(win["graph"])          # concrete: the winner
    symbolic = next(c.graph for c in recorded.result.search.equivalent
                    if len(c.graph.free_vars()) == 2)       # a symbolic grid and loop range
    sgraph = SGraphView(symbolic)
    assert "<svg" in sgraph.snapshot_html()
    name, box = next(iter(sgraph.sizes.items()))
    last = box.options[-1][1]
    box.value = last
    assert f"{name}={last}" in summary_of(sgraph.snapshot_html())
    blocks = BlockView(graph)
    block = tuple(g - 1 for g in blocks.state.grid)     # the last block, the last iteration
    blocks.show(block, blocks.state.forloop_range - 1)
    assert max(blocks.state.grid) > 1
    assert blocks.state.sentence(block, blocks.state.forloop_range - 1) in \
        summary_of(blocks.snapshot_html())


def test_page_body_scopes_the_pages_style():
    page = ("<!doctype html><html><head><style>body{margin:2em;color:red}td,th{padding:1px}"
            "</style></head><body><h1>x</h1></body></html>")
    out = page_body(page)
    assert out == ("<style>.prism-page{margin:0;color:red}.prism-page td, .prism-page th"
                   "{padding:1px}</style><div class='prism-page'><h1>x</h1></div>")
