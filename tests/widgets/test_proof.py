"""Proofs and counterexamples from a real trace: the steps are the verifier's, each mark holds
exactly the subterm the step rewrote (the oracle: `Term.at(path)` of the parsed term), HTML is
escaped, and the views draw every step and every counterexample key."""

from __future__ import annotations

import html
import re
import shutil

import pytest

from prism.expr.terms import parse
from prism.trace import CandidateRejected, CandidateVerified
from widgets.proof import (
    CounterexampleState,
    ProofState,
    ProofView,
    counterexample_html,
    highlight,
    parse_sexpr,
    proof_html,
    subterm_span,
    term_dot,
)

MARK = re.compile(r"<mark>(.*?)</mark>")


def verified(events) -> list[CandidateVerified]:
    found = [e for e in events if isinstance(e, CandidateVerified)]
    assert any(e.proof["proof_steps"] > 0 for e in found)
    return found


def rejected(events) -> list[CandidateRejected]:
    found = [e for e in events if isinstance(e, CandidateRejected)]
    assert found
    return found


def test_the_steps_are_the_proofs_steps(recorded):
    for e in verified(recorded.events):
        state = ProofState.from_event(e)
        assert [s.to_json() for s in state.steps] == [s for out in e.proof["proof"] for s in out]
        assert len(state.steps) == e.proof["proof_steps"]
        assert [s.number for s in state.steps] == list(range(1, len(state.steps) + 1))
        assert (state.candidate, state.family, state.method) == (e.id, e.family, e.method)
        assert state.sizes == e.proof["sizes"] and state.egraph == e.proof["egraph"]


def test_each_mark_holds_what_the_step_rewrote(recorded):
    steps = [s for e in verified(recorded.events) for s in ProofState.from_event(e).steps]
    for s in steps:
        (before,) = MARK.findall(s.before_html())
        (after,) = MARK.findall(s.after_html())
        assert html.unescape(before) == s.rewrote
        assert html.unescape(after) == s.into
        # the marked occurrence is the one at the step's path (the oracle: the parsed term)
        a, b = subterm_span(s.before, s.path)
        assert str(parse(s.before).at(s.path)) == s.before[a:b] == s.rewrote
        assert html.unescape(MARK.sub(lambda m: m.group(1), s.before_html())) == s.before


def test_marks_prefer_the_path_over_the_first_occurrence():
    term = "(add (exp x) (exp x))"
    assert highlight(term, "(exp x)", (1,)) == "(add (exp x) <mark>(exp x)</mark>)"
    assert highlight(term, "(exp x)") == "(add <mark>(exp x)</mark> (exp x))"
    assert highlight(term, "(exp x)", (7,)) == "(add <mark>(exp x)</mark> (exp x))"
    assert highlight(term, "(log x)") == term                   # nothing to mark
    assert highlight("(lt <a> b)", "<a>") == "(lt <mark>&lt;a&gt;</mark> b)"   # escaped
    assert subterm_span(term, (0, 0)) == (10, 11)
    assert subterm_span(term, (0, 1)) is None
    assert parse_sexpr(term) == ("add", [("exp", [("x", [])]), ("exp", [("x", [])])])


def test_proof_html_numbers_every_step(recorded):
    e = max(verified(recorded.events), key=lambda e: e.proof["proof_steps"])
    text = proof_html(ProofState.from_event(e))
    state = ProofState.from_event(e)
    assert text.count("<li>") == len(state.steps) == text.count("<mark>") // 2
    for s in state.steps:
        assert html.escape(s.axiom) in text and f"({s.direction})" in text
        assert f"[{s.evidence}]" in text
    assert "e-graph:" in text


def test_a_proof_from_the_verdict_itself(recorded):
    verdict = recorded.result.best.verdict
    state = ProofState.from_json(verdict.to_json())
    assert [s.to_json() for s in state.steps] == \
        [s for out in verdict.to_json().get("proof", []) for s in out]
    assert state.verdict == "equivalent"
    empty = ProofState.from_json({"verdict": "equivalent", "method": "e-graph", "proof": [[]]})
    assert "no rewrite needed" in proof_html(empty) and empty.final() is None


def test_a_counterexample_table_has_every_key(recorded):
    for e in rejected(recorded.events):
        state = CounterexampleState.from_event(e)
        assert [k for k, _ in state.rows()] == list(e.counterexample)
        text = counterexample_html(state)
        assert text.count("<tr>") == len(e.counterexample)
        assert "not equivalent" in text and e.id in text
        if "target" in e.counterexample:
            assert f"{e.counterexample['target']:.6g}" in state.headline()
    reason = CounterexampleState("c9", "f1", {"reason": "input X has shape [8, 64]"})
    assert reason.headline() == "input X has shape [8, 64]"


def test_the_views_construct(recorded):
    e = max(verified(recorded.events), key=lambda e: e.proof["proof_steps"])
    view = ProofView(e)
    assert view.html.value.count("<li>") == e.proof["proof_steps"]
    view = ProofView(rejected(recorded.events)[0])
    assert isinstance(view.state, CounterexampleState) and "<table>" in view.html.value
    assert isinstance(ProofView(e.proof).state, ProofState)
    with pytest.raises(TypeError, match="cannot show"):
        ProofView(42)  # type: ignore[arg-type]


def test_the_final_term_as_a_drawing(recorded):
    e = max(verified(recorded.events), key=lambda e: e.proof["proof_steps"])
    state = ProofState.from_event(e)
    dot = term_dot(state.final())

    def nodes(t) -> int:
        return 1 + sum(nodes(a) for a in t.args)

    assert dot.count("->") == nodes(parse(state.final())) - 1    # a tree: one edge per child
    if shutil.which("dot") is None:
        pytest.skip("Graphviz's dot program is not installed")
    view = ProofView(state, graph=True)
    svg = view.widget.children[1].value
    assert svg.startswith("<details open") and "<svg" in svg and "rms_norm" in svg


def test_the_egraph_around_the_final_class_is_drawn(recorded):
    from widgets.proof import ProofView, egraph_dot
    event = next(e for e in recorded.events if isinstance(e, CandidateVerified)
                 and e.proof["proof_steps"] > 0)
    state = ProofState.from_event(event)
    view = state.egraph_view
    assert view is not None and view["classes"][0]["id"] == view["root"]
    dot = egraph_dot(view)
    shown = {c["id"] for c in view["classes"]}
    for cls in view["classes"]:
        assert f"subgraph cluster_{cls['id']} " in dot
        for k, node in enumerate(cls["nodes"]):
            for child in node["children"]:      # an arrow to every child class, shown or cut
                assert child in shown or child in view["cut"]
                assert f"n{cls['id']}_{k} -> " in dot
    assert "penwidth=2.5" in dot.split(f"cluster_{view['root']} ", 1)[1].split("\n", 1)[0]
    svg = ProofView(event).widget.children[1].value
    assert "<svg" in svg and f"class {view['root']}" in svg


def test_an_unknowns_gap_is_shown():
    gap = {"output": 0, "sizes": "concrete", "candidate": "(red (part (comb x 0 n8) 0 n4) n4)",
           "target": "(red x n8)"}
    state = ProofState.from_json({"verdict": "unknown", "method": "e-graph", "gap": gap,
                                  "reason": "no proof"})
    text = proof_html(state)
    assert state.gap == gap and "nearest gap" in text
    assert f"<code>{html.escape(gap['candidate'])}</code>" in text
    assert f"<code>{html.escape(gap['target'])}</code>" in text
    assert "nearest gap" not in proof_html(ProofState.from_json({"verdict": "unknown"}))


def test_a_wide_drawing_is_fitted_to_its_width_and_can_be_folded():
    """The e-graph picture was clipped on the right (issue 20): each inline SVG keeps its
    natural width as an upper bound, scales to the width it is given (max-width 100%, height
    from its viewBox), and sits in a <details> the reader can fold."""
    import re

    from widgets.proof import fitted
    wide = '<svg width="2400pt" height="300pt" viewBox="0 0 2400 300"><g/></svg>' * 2
    out = fitted(wide, "the e-graph around the final class")
    tags = re.findall(r"<svg\b[^>]*>", out)
    assert len(tags) == 2
    for tag in tags:
        assert 'width="2400pt"' in tag and "height=" not in tag.replace("height:auto", "")
        assert "max-width:100%" in tag and 'viewBox="0 0 2400 300"' in tag
    assert out.startswith("<details open") and \
        "<summary>the e-graph around the final class</summary>" in out
