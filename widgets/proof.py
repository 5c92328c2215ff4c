"""Why a candidate is equivalent to the target (its proof), or why not (a counterexample).

    ProofView(event)            # a CandidateVerified or CandidateRejected event
    ProofView(verdict.to_json())

`ProofState` reads a proof as the verifier writes it (`Verdict.to_json()`, the `proof` of a
`CandidateVerified`): `{"verdict", "method", "sizes", "proof": [[step, ...] per output],
"egraph"}`, each step `{"axiom", "direction", "path", "rewrote", "into", "before", "after",
"statement", "evidence"}`. A step rewrote the subterm of `before` at `path` (`rewrote`) into
`into`, giving `after`. `CounterexampleState` reads a `CandidateRejected`'s counterexample.
Both are plain Python; `proof_html` and `counterexample_html` render them, and `ProofView` is the
widget that shows that HTML (and, when Graphviz's `dot` is there, the proof's final term).

Highlighting: the rewritten subterm is found by following `path` through the s-expression; if the
text there is not `rewrote` (a proof from elsewhere), the first occurrence of `rewrote` is marked.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from prism.trace import CandidateRejected, CandidateVerified
from widgets.snapshot import Snapshotted


@dataclass(frozen=True)
class ProofStep:
    number: int                 # 1-based, counted across the outputs' proofs
    output: int                 # which output's proof it belongs to
    axiom: str
    direction: str
    path: tuple[int, ...]
    rewrote: str                # the subterm of `before` at `path`
    into: str                   # what it became: the subterm of `after` at `path`
    before: str
    after: str
    statement: str              # the axiom's identity, in words
    evidence: str               # how the axiom is known sound ("smt", "random", ...)
    raw: dict[str, Any]         # the step as the verifier wrote it

    @classmethod
    def from_json(cls, number: int, output: int, step: dict[str, Any]) -> ProofStep:
        return cls(number, output, str(step.get("axiom", "?")), str(step.get("direction", "")),
                   tuple(int(i) for i in step.get("path", ())), str(step.get("rewrote", "")),
                   str(step.get("into", "")), str(step.get("before", "")),
                   str(step.get("after", "")), str(step.get("statement", "")),
                   str(step.get("evidence", "")), dict(step))

    def to_json(self) -> dict[str, Any]:
        return dict(self.raw)

    def before_html(self) -> str:
        return highlight(self.before, self.rewrote, self.path)

    def after_html(self) -> str:
        return highlight(self.after, self.into, self.path)


@dataclass(frozen=True)
class ProofState:
    """One candidate's proof: its steps in order, per output, and what the e-graph did."""

    verdict: str
    method: str
    sizes: str                  # "symbolic" (holds for every grid size and loop range) | ...
    outputs: tuple[tuple[ProofStep, ...], ...]
    egraph: str                 # the e-graph's run report
    seconds: float | None = None
    reason: str = ""
    candidate: str | None = None
    family: str | None = None
    egraph_view: dict[str, Any] | None = None   # the e-graph around the first output's class
    gap: dict[str, Any] | None = None   # an unknown's nearest pair of subterms that never met

    @classmethod
    def from_json(cls, proof: dict[str, Any] | list[Any], *, candidate: str | None = None,
                  family: str | None = None) -> ProofState:
        """From `Verdict.to_json()`; a bare list is the steps (one list per output, or the steps
        of a single output)."""
        doc: dict[str, Any] = proof if isinstance(proof, dict) else {"proof": proof}
        per_output = doc.get("proof") or []
        if per_output and all(isinstance(s, dict) for s in per_output):
            per_output = [per_output]
        outputs, number = [], 0
        for k, steps in enumerate(per_output):
            out = []
            for step in steps:
                number += 1
                out.append(ProofStep.from_json(number, k, step))
            outputs.append(tuple(out))
        seconds = doc.get("seconds")
        return cls(str(doc.get("verdict", "equivalent")), str(doc.get("method", "")),
                   str(doc.get("sizes", "")), tuple(outputs), str(doc.get("egraph", "")),
                   float(seconds) if isinstance(seconds, int | float) else None,
                   str(doc.get("reason", "")), candidate, family, doc.get("egraph_view"),
                   doc.get("gap") if isinstance(doc.get("gap"), dict) else None)

    @classmethod
    def from_event(cls, event: CandidateVerified) -> ProofState:
        state = cls.from_json(event.proof, candidate=event.id, family=event.family)
        return state if state.method else replace(state, method=event.method or "")

    @property
    def steps(self) -> list[ProofStep]:
        """Every step, the outputs' proofs one after the other."""
        return [s for out in self.outputs for s in out]

    def final(self, output: int = 0) -> str | None:
        """The term the proof of `output` ends at (the target's), or None for a proof with no
        steps (the candidate's term was the target's already)."""
        steps = self.outputs[output] if output < len(self.outputs) else ()
        return steps[-1].after if steps else None


@dataclass(frozen=True)
class CounterexampleState:
    """Where a rejected candidate and the target differ (or, with no counterexample, why)."""

    candidate: str | None
    family: str | None
    counterexample: dict[str, Any]
    method: str | None = None

    @classmethod
    def from_event(cls, event: CandidateRejected) -> CounterexampleState:
        return cls(event.id, event.family, event.counterexample, event.method)

    def rows(self) -> list[tuple[str, str]]:
        """The counterexample key by key, values as text (numbers to 6 significant digits)."""
        return [(k, _text(v)) for k, v in self.counterexample.items()]

    def headline(self) -> str:
        c = self.counterexample
        if "target" in c and "candidate" in c:
            where = f"output {c.get('output', 0)} at index {_text(c.get('index', []))}"
            at = c.get("assignment")
            sizes = f" with {_text(at)}" if at else ""
            return (f"{where}{sizes}: the target gives {_text(c['target'])}, the candidate "
                    f"{_text(c['candidate'])}")
        return str(c.get("reason", "no counterexample recorded"))


def _text(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    if isinstance(v, dict):
        return ", ".join(f"{k}={_text(x)}" for k, x in v.items()) or "{}"
    if isinstance(v, list):
        return "[" + ", ".join(_text(x) for x in v) + "]"
    return str(v)


# -- highlighting --------------------------------------------------------------------------------

def highlight(term: str, sub: str, path: Sequence[int] = ()) -> str:
    """`term` as escaped HTML with `sub` inside `<mark>`: the subterm at `path` when its text is
    `sub`, else the first occurrence of `sub`; no mark when `sub` does not occur."""
    span = subterm_span(term, path)
    if span is None or term[span[0]:span[1]] != sub:
        start = term.find(sub) if sub else -1
        span = (start, start + len(sub)) if start >= 0 else None
    if span is None:
        return html.escape(term)
    a, b = span
    return (f"{html.escape(term[:a])}<mark>{html.escape(term[a:b])}</mark>"
            f"{html.escape(term[b:])}")


def subterm_span(term: str, path: Sequence[int]) -> tuple[int, int] | None:
    """Where the subterm at `path` (argument indices, as `Term.at`) lies in the text of an
    s-expression `(head arg ...)`; None when the path leaves the term."""
    start = len(term) - len(term.lstrip())
    if start >= len(term):
        return None
    for i in path:
        args = _arg_spans(term, start)
        if args is None or not 0 <= i < len(args):
            return None
        start = args[i][0]
    end = _end(term, start)
    return (start, end) if end is not None else None


def _end(text: str, start: int) -> int | None:
    """One past the s-expression that starts at `start`."""
    if text[start] == "(":
        depth = 0
        for j in range(start, len(text)):
            depth += {"(": 1, ")": -1}.get(text[j], 0)
            if depth == 0:
                return j + 1
        return None
    j = start
    while j < len(text) and text[j] not in "() \t\n":
        j += 1
    return j if j > start else None


def _arg_spans(text: str, start: int) -> list[tuple[int, int]] | None:
    """The spans of the arguments of the application at `start` (its head skipped)."""
    if text[start] != "(":
        return None
    pos = _end(text, start + 1)            # the head, an atom
    spans: list[tuple[int, int]] = []
    while pos is not None:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text) or text[pos] == ")":
            return spans
        end = _end(text, pos)
        if end is None:
            return None
        spans.append((pos, end))
        pos = end
    return None


def parse_sexpr(text: str) -> tuple[str, list[Any]]:
    """`(head a b)` → `("head", [a, b])`, an atom → `(atom, [])`; for drawing terms."""
    span = subterm_span(text, ())
    if span is None:
        return (text.strip(), [])
    start = span[0]
    args = _arg_spans(text, start)
    if args is None:
        return (text[span[0]:span[1]], [])
    head_end = _end(text, start + 1) or start + 1
    return (text[start + 1:head_end], [parse_sexpr(text[a:b]) for a, b in args])


def term_dot(term: str, title: str = "") -> str:
    """Graphviz DOT text drawing `term` as a tree (operators boxed, leaves plain)."""
    lines = ["digraph term {", '  node [fontname="Helvetica", fontsize=10];',
             '  edge [arrowsize=0.5];']
    if title:
        lines.append(f'  label="{_dot_escape(title)}"; labelloc=t;')
    counter = [0]

    def visit(node: tuple[str, list[Any]]) -> str:
        counter[0] += 1
        nid = f"n{counter[0]}"
        head, args = node
        shape = 'shape=box, style="rounded,filled", fillcolor="#fef3c7"' if args else \
            "shape=plaintext"
        lines.append(f'  {nid} [label="{_dot_escape(head)}", {shape}];')
        for a in args:
            lines.append(f"  {nid} -> {visit(a)};")
        return nid

    visit(parse_sexpr(term))
    lines.append("}")
    return "\n".join(lines)


def _dot_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


# -- HTML ----------------------------------------------------------------------------------------

def proof_html(state: ProofState) -> str:
    """The proof as a numbered list of steps: the axiom, its direction and evidence, the term
    before (the rewritten subterm marked) and after (its replacement marked)."""
    who = f"<code>{html.escape(state.candidate)}</code> " if state.candidate else ""
    sizes = f", {html.escape(state.sizes)} sizes" if state.sizes else ""
    out = [f"<div class='prism-proof'><p>{who}<b>{html.escape(state.verdict)}</b> by "
           f"{html.escape(state.method or '?')}: {len(state.steps)} steps{sizes}</p>"]
    for k, steps in enumerate(state.outputs):
        if len(state.outputs) > 1:
            out.append(f"<h5>output {k}</h5>")
        if not steps:
            out.append("<p><i>no rewrite needed: the candidate's term is the target's</i></p>")
            continue
        out.append(f"<ol start='{steps[0].number}'>")
        for s in steps:
            statement = f" — {html.escape(s.statement)}" if s.statement else ""
            evidence = (f" <span class='prism-evidence'>[{html.escape(s.evidence)}]</span>"
                        if s.evidence else "")
            out.append(
                f"<li><div><b>{html.escape(s.axiom)}</b> ({html.escape(s.direction)})"
                f"{statement}{evidence}</div>"
                f"<div>before: <code>{s.before_html()}</code></div>"
                f"<div>after: <code>{s.after_html()}</code></div></li>")
        out.append("</ol>")
    if state.gap:
        out.append(gap_html(state.gap))
    if state.egraph:
        out.append(f"<p class='prism-egraph'>e-graph: {html.escape(state.egraph)}</p>")
    if state.reason:
        out.append(f"<p>{html.escape(state.reason)}</p>")
    out.append("</div>")
    return "".join(out)


def gap_html(gap: dict[str, Any]) -> str:
    """Where an unproven candidate's terms came closest to the target's: the two subterms, one
    per side, that the saturated e-graph never joined (the identity a proof would need)."""
    where = f"output {gap.get('output', 0)}, {gap.get('sizes', '')} sizes"
    return (f"<div class='prism-gap'><p><b>nearest gap</b> ({html.escape(where)}): the e-graph "
            "saturated with these two apart; if the candidate is correct, an identity between "
            "them is missing from the axioms</p>"
            f"<div>candidate: <code>{html.escape(str(gap.get('candidate', '')))}</code></div>"
            f"<div>target: <code>{html.escape(str(gap.get('target', '')))}</code></div></div>")


def counterexample_html(state: CounterexampleState) -> str:
    """The counterexample: a headline, then a table of every key it has."""
    who = f"<code>{html.escape(state.candidate)}</code> " if state.candidate else ""
    method = f" ({html.escape(state.method)})" if state.method else ""
    rows = "".join(f"<tr><th style='text-align:left'>{html.escape(k)}</th>"
                   f"<td>{html.escape(v)}</td></tr>" for k, v in state.rows())
    return (f"<div class='prism-counterexample'><p>{who}<b>not equivalent</b>{method}: "
            f"{html.escape(state.headline())}</p><table>{rows}</table></div>")


# -- the view ------------------------------------------------------------------------------------

class ProofView(Snapshotted):
    """A proof or a counterexample as a widget, with a small picture of the e-graph around the
    final class when the proof carries one (else of the proof's final term); `graph=False`
    leaves the picture out (it needs Graphviz's `dot`; without it the view says so)."""

    def __init__(self, source: ProofState | CounterexampleState | CandidateVerified |
                 CandidateRejected | dict[str, Any], *, graph: bool = True):
        import ipywidgets as w

        self.state = _state(source)
        body = (proof_html(self.state) if isinstance(self.state, ProofState)
                else counterexample_html(self.state))
        self.html = w.HTML(body)
        children = [self.html]
        if graph and isinstance(self.state, ProofState):
            what = ("the e-graph around the final class" if self.state.egraph_view
                    else "the proof's final term")
            children.append(w.HTML(fitted(self.egraph_svg() if self.state.egraph_view
                                          else self.term_svg(), what)))
        self.widget = w.VBox(children)

    def egraph_svg(self) -> str:
        """The e-graph around the final class as inline SVG (or a note why not)."""
        assert isinstance(self.state, ProofState) and self.state.egraph_view is not None
        return _svg(egraph_dot(self.state.egraph_view))

    def term_svg(self) -> str:
        """The final term of each output's proof as inline SVG (or a note why not)."""
        assert isinstance(self.state, ProofState)
        parts = []
        for k in range(len(self.state.outputs)):
            term = self.state.final(k)
            if term is None:
                continue
            try:
                import graphviz
                svg = graphviz.Source(term_dot(term, f"output {k}: the proof's final term"))
                text = svg.pipe(format="svg").decode("utf-8")
                parts.append(text[text.find("<svg"):])    # inline: no XML prolog
            except Exception as err:  # no `dot` program, or it failed: say so, show the rest
                parts.append(f"<p><i>no drawing ({html.escape(type(err).__name__)}: "
                             f"{html.escape(str(err))})</i></p>")
        return "".join(parts)

    def snapshot_summary(self) -> str:
        """The snapshot's line: whose proof, its verdict and length (or the refutation)."""
        s = self.state
        who = f"{s.candidate}: " if s.candidate else ""
        if isinstance(s, ProofState):
            return html.escape(f"proof · {who}{s.verdict} ({s.method or '?'}, {len(s.steps)} "
                               f"steps, {s.sizes or '?'} sizes)")
        return html.escape(f"counterexample · {who}{s.headline()}")

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self.widget._repr_mimebundle_(**kwargs)


def egraph_dot(view: dict[str, Any]) -> str:
    """DOT of an e-graph neighbourhood (`EGraph.neighbourhood`): one dashed box per e-class
    holding its e-nodes, an arrow from each e-node to each child class; the final class (the
    one both programs reached) drawn bold, classes cut off by the size limit greyed."""
    def q(text: object) -> str:
        return '"' + str(text).replace("\\", "\\\\").replace('"', '\\"') + '"'
    lines = ["digraph egraph {", "compound=true; rankdir=TB; node [shape=box, fontsize=10, "
             "style=rounded, fontname=monospace]; edge [arrowsize=0.6];"]
    anchor: dict[int, str] = {}
    for cls in view["classes"]:
        cid = cls["id"]
        bold = "; penwidth=2.5" if cid == view["root"] else ""
        lines.append(f"subgraph cluster_{cid} {{ label={q(f'class {cid}')}; style=dashed{bold};")
        for k, node in enumerate(cls["nodes"]):
            name = f"n{cid}_{k}"
            anchor.setdefault(cid, name)
            lines.append(f"{name} [label={q(node['head'])}];")
        lines.append("}")
    for cid in view.get("cut", []):
        anchor[cid] = f"cut{cid}"
        lines.append(f"cut{cid} [label={q(f'class {cid} …')}, color=gray, fontcolor=gray];")
    for cls in view["classes"]:
        for k, node in enumerate(cls["nodes"]):
            for child in node["children"]:
                head = f", lhead=cluster_{child}" if child not in view.get("cut", []) else ""
                lines.append(f"n{cls['id']}_{k} -> {anchor[child]} [{head.lstrip(', ')}];")
    lines.append("}")
    return "\n".join(lines)


def fitted(svg: str, what: str) -> str:
    """Inline SVG drawings scaled to the width they are given (never clipped: a wide e-graph
    shrinks, its text readable on zoom), inside a `<details>` the reader can fold away."""
    import re

    def fit(m: re.Match[str]) -> str:
        tag = re.sub(r'\sheight="[^"]*"', "", m.group(0))    # natural width, at most 100%
        return tag[:-1] + ' style="max-width:100%;height:auto">'
    body = re.sub(r"<svg\b[^>]*>", fit, svg)
    return (f"<details open class='prism-fitted'><summary>{html.escape(what)}</summary>"
            f"<div style='max-width:100%;overflow-x:auto'>{body}</div></details>")


def _svg(dot: str) -> str:
    try:
        import graphviz
        text = graphviz.Source(dot).pipe(format="svg").decode("utf-8")
        return text[text.find("<svg"):]                   # inline: no XML prolog
    except Exception as err:  # no `dot` program, or it failed: say so, show the rest
        return (f"<p><i>no drawing ({html.escape(type(err).__name__)}: "
                f"{html.escape(str(err))})</i></p>")


def _state(source: Any) -> ProofState | CounterexampleState:
    if isinstance(source, ProofState | CounterexampleState):
        return source
    if isinstance(source, CandidateVerified):
        return ProofState.from_event(source)
    if isinstance(source, CandidateRejected):
        return CounterexampleState.from_event(source)
    if isinstance(source, dict):
        if source.get("counterexample") is not None and not source.get("proof"):
            return CounterexampleState(None, None, source["counterexample"],
                                       source.get("method"))
        return ProofState.from_json(source)
    raise TypeError(f"cannot show a {type(source).__name__} as a proof: give a "
                    "CandidateVerified or CandidateRejected event, or Verdict.to_json()")


__all__ = ["CounterexampleState", "ProofState", "ProofStep", "ProofView", "counterexample_html",
           "egraph_dot", "fitted", "highlight", "proof_html", "term_dot"]
