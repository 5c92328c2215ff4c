"""The search explorer against a real trace: its counts are the search's own summary, every
candidate sits under its family, pages cover each row once; the view draws what the state holds;
a live search pauses, steps, resumes and cancels; 100,000 events stay cheap."""

from __future__ import annotations

import re
import threading
import time
import types
from collections import Counter

import pytest

from prism.search import RULE_NAMES
from prism.trace import (
    CandidateRejected,
    CandidateVerified,
    FamilyGenerated,
    FamilyPruned,
    SearchFinished,
    StageStarted,
    Tracer,
    write_jsonl,
)
from widgets.explorer import STATUSES, SearchExplorer, SearchState, detail_html, evidence_html
from widgets.live import Gate, Throttle


def state_of(events) -> SearchState:
    state = SearchState()
    for e in events:
        state.add(e)
    return state


def summary_of(events) -> dict:
    (finished,) = [e for e in events if isinstance(e, SearchFinished)]
    return finished.summary


# -- the state -------------------------------------------------------------------------------

def test_counts_are_the_search_summary(recorded):
    state = state_of(recorded.events)
    families = summary_of(recorded.events)["families"]
    assert state.rule_counts() == families["pruned"]
    assert state.generated == families["generated"]
    assert state.status_counts()["kept"] == families["kept"]
    assert state.status_counts()["pruned"] == sum(families["pruned"].values())
    assert state.events == len(recorded.events)
    assert state.finished


def test_every_candidate_sits_under_its_family(recorded):
    state = state_of(recorded.events)
    verdicts = {CandidateVerified: "verified", CandidateRejected: "rejected"}
    checked = Counter()
    for e in recorded.events:
        status = verdicts.get(type(e))
        if status is None:
            continue
        assert e.id in state.children(e.family)
        node = state.node(e.id)
        assert node["status"] == status and node["family"] == e.family
        assert e.id in state.node(e.family)["candidates"]
        checked[status] += 1
    assert checked["verified"] == summary_of(recorded.events)["verdicts"]["equivalent"] > 0
    assert checked["rejected"] > 0


def test_the_tree_is_the_generated_parents(recorded):
    state = state_of(recorded.events)
    generated = [e for e in recorded.events if isinstance(e, FamilyGenerated)]
    for e in generated:
        assert e.id in state.children(e.parent)
        if e.parent is not None:
            assert state.ancestors(e.id)[-1] == e.parent
    assert {e.id for e in generated if e.parent is None} <= set(state.children(None))


def test_a_pruned_family_shows_its_rule_reason_and_evidence(recorded):
    state = state_of(recorded.events)
    pruned = [e for e in recorded.events if isinstance(e, FamilyPruned)]
    for e in pruned:
        node = state.node(e.id)
        assert (node["rule"], node["reason"], node["evidence"]) == (e.rule, e.reason, e.evidence)
    for rule in {e.rule for e in pruned}:
        e = next(p for p in pruned if p.rule == rule)
        text = detail_html(state, e.id)
        assert e.rule in text
        for key in e.evidence:
            assert key in text


def test_evidence_shows_whatever_keys_it_has():
    # z3's unsat core and the cost bound's numbers, as the pruning rules write them
    text = evidence_html({"unsat_core": ["smem(X_tile) <= 232448", "g0 * f <= 4096"],
                          "device": {"smem_bytes": 232448}, "lower_bound_us": 12.345678,
                          "incumbent": "c3"})
    assert text.count("<li>") == 2 and "g0 * f &lt;= 4096" in text
    assert "12.35" in text and "c3" in text and "smem_bytes" in text
    assert "no evidence" in evidence_html({})


@pytest.mark.parametrize("rule, status", [(None, None), ("cannot_close", None),
                                          ("abstract_expression", "pruned"), (None, "kept"),
                                          (None, "verified"), (None, "rejected"),
                                          ("cannot_close", "kept")])
def test_pages_cover_every_row_once(recorded, rule, status):
    state = state_of(recorded.events)
    # the oracle: the rows straight from the events, in order
    rows: dict[str, str] = {}
    ruled: dict[str, str | None] = {}
    for e in recorded.events:
        if isinstance(e, FamilyGenerated):
            rows[e.id], ruled[e.id] = "kept", None
        elif isinstance(e, FamilyPruned):
            rows[e.id], ruled[e.id] = "pruned", e.rule
        elif isinstance(e, CandidateVerified | CandidateRejected):
            rows[e.id] = "verified" if isinstance(e, CandidateVerified) else "rejected"
            ruled[e.id] = None
    expected = [i for i, s in rows.items()
                if (status is None or s == status) and (rule is None or ruled[i] == rule)]
    got, page = [], 0
    while chunk := state.filter(rule, status, page, page_size=7):
        assert len(chunk) <= 7
        got += [n.id for n in chunk]
        page += 1
    assert got == expected
    assert len(set(got)) == len(got) == state.count(rule, status)
    assert state.pages(rule, status, 7) == max(1, -(-len(expected) // 7))
    with pytest.raises(ValueError, match="status"):
        state.filter(status="nonsense")


# -- the view --------------------------------------------------------------------------------

def table_ids(html: str) -> list[str]:
    return re.findall(r"<tr data-id='([^']*)'", html)


def test_the_view_draws_the_state(recorded, tmp_path):
    path = tmp_path / "trace.jsonl"
    write_jsonl(recorded.events, path)
    view = SearchExplorer.from_events(path)       # a replayed trace file
    state = view.state
    assert table_ids(view.table.value) == [n.id for n in state.filter(page_size=50)]
    assert view.page_label.value == f"page 1 / {state.pages()}"
    bar = view.chart.data[0]
    assert dict(zip(bar.x, bar.y, strict=True)) == summary_of(recorded.events)["families"]["pruned"]
    assert view.chart.layout.yaxis.type == "log"  # a rule's 12 prunes stay visible beside 585
    assert "finished" in view.progress.value

    view.rule.value = "abstract_expression"       # a filter starts again at its first page
    ids = table_ids(view.table.value)
    assert ids and all(state.node(i)["rule"] == "abstract_expression" for i in ids)
    assert [v for _, v in view.select.options] == ids
    view.turn(+1)
    assert table_ids(view.table.value) == [n.id for n in state.filter("abstract_expression",
                                                                      page=1)]
    view.select.value = view.select.options[0][1]
    assert state.node(view.select.value)["reason"].replace("'", "&#x27;") in view.detail.value

    view._on_bar_click(bar, types.SimpleNamespace(point_inds=[0]), None)   # click a rule's bar
    assert view.rule.value == bar.x[0] and view.page == 0

    view.rule.value = ""
    view.status.value = "verified"
    cid = next(e.id for e in recorded.events if isinstance(e, CandidateVerified)
               and e.proof["proof_steps"] > 0)
    view.turn(-10)
    while cid not in [v for _, v in view.select.options]:
        view.turn(+1)
    view.select.value = cid
    assert "<mark>" in view.detail.value and "equivalent" in view.detail.value


def test_the_throttle_coalesces_and_always_draws_the_last_state():
    drawn = []
    seen = [0]
    throttle = Throttle(lambda: drawn.append(seen[0]), interval=0.2)
    start = time.monotonic()
    while time.monotonic() - start < 0.5:
        seen[0] += 1
        throttle.request()
        time.sleep(0.001)
    time.sleep(0.4)
    assert seen[0] > 50 and 1 <= len(drawn) <= 5   # about one per interval, not one per request
    assert drawn[-1] == seen[0]                   # the trailing draw saw the final state
    assert not throttle.errors


def test_the_gate_lets_steps_through_one_at_a_time():
    gate, passed = Gate(paused=True), []

    def emitter():
        for i in range(5):
            gate.wait()
            passed.append(i)

    thread = threading.Thread(target=emitter, daemon=True)
    thread.start()
    time.sleep(0.1)
    assert passed == []
    gate.step(2)
    time.sleep(0.1)
    assert passed == [0, 1]
    gate.resume()
    thread.join(5)
    assert passed == [0, 1, 2, 3, 4]


# -- a live search ---------------------------------------------------------------------------

def test_live_search_pauses_steps_and_resumes(small, until):
    view = SearchExplorer.live(small.graph, small.config, paused=True)
    time.sleep(0.3)
    assert view.state.events == 0 and view.running       # held at its first event
    view.step(5)
    until(lambda: view.state.events == 5)
    view.run()
    view.pause()
    time.sleep(0.1)                 # an event already past the gate lands
    paused_at = view.state.events
    time.sleep(0.5)
    assert view.state.events == paused_at
    view.redraw()
    assert "paused" in view.progress.value
    view.step()
    until(lambda: view.state.events == paused_at + 1)
    time.sleep(0.3)
    assert view.state.events == paused_at + 1
    view.run()
    result = view.join(timeout=120)
    assert result is not None and result.complete and view.error is None
    assert not view.running and view.state.finished
    assert view.state.rule_counts() == result.summary()["families"]["pruned"]
    assert view.state.generated == result.generated
    assert "finished" in view.progress.value


def test_cancel_ends_a_live_search_incomplete(small, until):
    view = SearchExplorer.live(small.graph, small.config, paused=True)
    view.step(10)
    until(lambda: view.state.events == 10)
    view.cancel()
    result = view.join(timeout=60)
    assert result is not None and result.complete is False
    assert result.stop_reason == "cancelled"
    assert view.state.summary is not None and view.state.summary["complete"] is False
    assert "cancelled" in view.progress.value


def test_a_pause_spends_none_of_the_budget(small, until):
    """A 3 s budget, held paused for 3.5 s after 20 events: the search still ends exhausted (it
    needs well under 3 s unpaused), and its seconds leave the pause out. Were the pause counted,
    it would stop on its time budget as soon as it resumed."""
    from dataclasses import replace
    view = SearchExplorer.live(small.graph, replace(small.config, budget_s=3.0), paused=True)
    view.step(20)
    until(lambda: view.state.events == 20)
    until(lambda: "took effect after" in view._progress_html())
    time.sleep(3.5)
    assert "the budget clock is stopped" in view._progress_html()
    started = time.perf_counter()
    view.run()
    result = view.join(timeout=120)
    assert result.complete, result.stop_reason
    assert view.budget.held_s >= 3.5
    assert result.seconds < 3.0 < 3.5 + (time.perf_counter() - started)
    assert "s paused, not counted" in view._progress_html()


def test_a_pause_says_when_it_took_effect(small, until):
    view = SearchExplorer.live(small.graph, small.config, paused=True)
    until(lambda: "took effect after 0 families" in view._progress_html())
    view.step(30)
    until(lambda: view.state.events == 30)
    view.run()
    view.pause()
    until(lambda: "took effect after" in view._progress_html())
    text = view._progress_html()
    families = int(text.split("took effect after ")[1].split(" families")[0])
    time.sleep(0.3)
    assert view.state.generated == families      # held where it said
    view.cancel()
    view.join(timeout=60)
    assert "took effect" in view._progress_html() and "after the click" in view._progress_html()


def test_after_steps_the_pause_says_where_the_steps_left_it(small, until):
    view = SearchExplorer.live(small.graph, small.config, paused=True)
    until(lambda: "took effect after 0 families" in view._progress_html())
    view.step(40)
    until(lambda: view.state.events == 40)
    until(lambda: "took effect after" in view._progress_html())
    text = view._progress_html()
    families = int(text.split("took effect after ")[1].split(" families")[0])
    time.sleep(0.3)
    assert families == view.state.generated > 0        # held where it says, not at 0
    view.cancel()
    view.join(timeout=60)


def test_await_wait_returns_the_result_without_blocking_the_loop(small):
    import asyncio

    view = SearchExplorer.live(small.graph, small.config)

    async def both():
        ticks = 0

        async def tick():
            nonlocal ticks
            while not view.done:
                ticks += 1
                await asyncio.sleep(0.01)
        result, _ = await asyncio.gather(view.wait(), tick())
        return result, ticks
    result, ticks = asyncio.run(both())
    assert result is view.result and result.complete
    assert ticks > 1                 # the loop ran other work while it waited


def test_only_a_live_run_shows_controls(recorded, small):
    assert SearchExplorer.from_events(recorded.events).controls.layout.display == "none"
    assert SearchExplorer().controls.layout.display == "none"       # a listener's view
    view = SearchExplorer()
    view.prepare(small.workload, small.config)
    assert view.controls.layout.display != "none"


def test_run_starts_a_prepared_search(small):
    view = SearchExplorer()
    with pytest.raises(RuntimeError, match="no search"):
        view._launch()
    view.prepare(small.workload, small.config)
    assert "ready to run" in view.progress.value
    view.run()
    assert view.join(timeout=120).complete


# -- scale -----------------------------------------------------------------------------------

@pytest.mark.slow
def test_100000_events_stay_cheap():
    rules = RULE_NAMES
    made = time.perf_counter()
    events = [StageStarted("search", seq=0)]
    parents: list[str | None] = [None]
    for i in range(1, 70_001):
        fid = f"f{i}"
        events.append(FamilyGenerated(fid, parents[i // 3], f"block op t{i}", seq=len(events)))
        parents.append(fid)
        if i % 7 < 3:   # 30,000 prunes, every rule of the table among them
            rule = rules[i // 7 % len(rules)]
            events.append(FamilyPruned(fid, parents[i // 3], rule, f"reason {i}",
                                       {"expression": f"(op{i} X)", "target": "(t X)"},
                                       seq=len(events)))
    events = events[:100_000]
    made = time.perf_counter() - made

    start = time.perf_counter()
    state = state_of(events)
    state_s = time.perf_counter() - start

    start = time.perf_counter()
    view = SearchExplorer(interval=0.05)
    for e in events:
        view.add(e)
    view._throttle.flush()
    view.rule.value = "hardware"
    view.turn(+10_000)                            # the last page
    view.select.value = view.select.options[-1][1]
    view_s = time.perf_counter() - start
    print(f"\n100,000 events: made in {made:.2f} s, SearchState {state_s:.2f} s, "
          f"SearchExplorer with rendering {view_s:.2f} s ({view._throttle.draws} draws)")

    assert len(events) == 100_000
    generated = sum(isinstance(e, FamilyGenerated) for e in events)
    assert view.state.generated == state.generated == generated
    assert sum(state.rule_counts().values()) == state.status_counts()["pruned"]
    assert view.page_label.value.startswith(f"page {state.pages('hardware')} /")
    assert "reason" in view.detail.value
    # Bounds that catch a quadratic walk (10^10 steps at 100,000 events: hours), not a speed
    # figure: those belong to benchmarks. At 3 s and 5 s this failed on a loaded 2-core machine
    # (4.9 s for the state while other tests ran beside the suite).
    assert state_s < 30.0
    assert view_s < 60.0
    assert view._throttle.draws < 200 and not view._throttle.errors


def test_a_view_listens_to_a_tracer(recorded, until):
    view = SearchExplorer(interval=0.05)
    tracer = Tracer()
    view.attach(tracer)
    for e in recorded.events:
        tracer.emit(e, stamp=False)
    until(lambda: "finished" in view.progress.value, timeout=10)
    assert view.state.status_counts() == state_of(recorded.events).status_counts()
    assert not tracer.listener_errors
    assert set(STATUSES) == set(view.state.status_counts())


def test_a_family_without_its_graph_says_it_was_not_kept_and_how_to_keep_it(recorded):
    state = state_of(recorded.events)
    pruned = next(e for e in recorded.events if isinstance(e, FamilyPruned))
    assert "graph" not in state.node(pruned.id)          # the default: graphs not recorded
    text = detail_html(state, pruned.id)
    assert "not kept" in text and "record_graphs=True" in text
    kept = FamilyGenerated("g1", None, "root", graph={"format": "prism.kernel_graph"})
    other = SearchState()
    other.add(kept)
    assert "not kept" not in detail_html(other, "g1")
