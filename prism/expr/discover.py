"""Axiom discovery (after Axon): propose identities, keep what z3 proves, report what they prove.

Candidates come from templates, never from a corpus file:

- `through-head`: each op pushed through each data-movement head — a unary op through
  part / rep / comb / red / mred, a binary op through the same head on both operands, a
  reduction over a data dim through a head on another dim or axis;
- `through-op`: a unary op distributed over a binary op, and two unary ops commuted;
- `size-one`: a reduction over a dim of size 1;
- `regrouping`: compositions of movement heads that read a concatenation of |g| chunks in
  other groupings — split into |h| chunks, or into |f| parts summed and then |k| chunks —
  against the sum (or mean) of the |g| chunks, under each relation of the axes' sizes that can
  make the shapes agree (|h| = |g|, |g| = |f|·|k|).

Each candidate is tried with its conditions in order, weakest first (none, then the ones its
template names); the first that z3 proves (`prism.smt.prove_axiom`, every generic instance) is
kept. A candidate the table already holds (up to renaming its variables) is `known` and costs no
proof; a proved one that the table's own e-graph derives on its generic instances is
`derivable`; the others are `new`. A refuted candidate keeps its counterexample. Nothing is added
to the table here: a new axiom enters `prism.expr.axioms` by hand, with its statement, and the
table's tests prove it again (`tests/expr/test_smt.py`).

`discover(prove, ..., corpus=pairs, check=...)` then verifies every (target, graph) pair that
the table leaves unproven, once with each new axiom added and once with all of them, and reports
which graphs each makes provable. z3 and the verifier are passed in (`prove`, `check`): both sit
above `expr` in the package order, and `prism axioms discover` wires them.
`without=("regrouping",)` runs the whole procedure against the table less a group: what the
procedure would have found before that group was written.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from prism.expr.axioms import (
    AXIOMS,
    ELEMENTWISE,
    REDUCTIONS,
    UNARY,
    Axiom,
    Condition,
    axis_product,
    distinct,
    same_axis_size,
    size_one,
)
from prism.expr.egraph import EGraph
from prism.expr.instances import generic_instances
from prism.expr.rules import Pattern, Rule, is_var
from prism.expr.terms import Term
from prism.ir.ops import OPS

HEADS = ("part", "rep", "comb", "red", "mred")
DEFAULT_OPS = ("exp", "neg", "sqrt", "mul_scalar", "add", "mul", "div", "sum", "mean", "max")
TEMPLATES = ("through-head", "through-op", "size-one", "regrouping")


@dataclass(frozen=True)
class Candidate:
    """A proposed identity lhs = rhs, with the conditions to try, weakest first."""

    name: str
    lhs: str
    rhs: str
    template: str
    conditions: tuple[Condition | None, ...] = (None,)
    statement: str = ""

    def axiom(self, condition: Condition | None) -> Axiom:
        return Axiom(self.name, self.lhs, self.rhs, self.statement or f"{self.lhs} = {self.rhs}",
                     "smt", "discovered", False, condition)


@dataclass
class Finding:
    """What became of a candidate: `new` (proved, and the table cannot derive it), `derivable`
    (proved, but the table already derives it), `known` (in the table), `refuted` (with its
    counterexample), `unknown` or `not_stated` (z3 could not decide it, or it is outside the
    encoding)."""

    candidate: Candidate
    status: str
    condition: Condition | None = None
    detail: str = ""
    model: str | None = None
    seconds: float = 0.0
    makes_provable: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        c = self.candidate
        out: dict[str, Any] = {"name": c.name, "template": c.template, "lhs": c.lhs,
                               "rhs": c.rhs, "status": self.status,
                               "condition": None if self.condition is None
                               else str(self.condition),
                               "detail": self.detail, "seconds": round(self.seconds, 3)}
        if self.model:
            out["counterexample"] = self.model
        if self.status == "new":
            out["makes_provable"] = self.makes_provable
        return out


# -- candidates -----------------------------------------------------------------------------------

def _unary(op: str, operand: str) -> str:
    attrs = [f"?{a}" for a in OPS[op].term_attrs]
    return f"({' '.join((op, operand, *attrs))})"


def _moved(head: str, t: str, d: str = "?d", g: str = "?g") -> str:
    return f"({head} {t} {d} {g})" if head in ("part", "comb") else f"({head} {t} {g})"


def candidates(ops: Sequence[str] = DEFAULT_OPS,
               templates: Sequence[str] = TEMPLATES) -> Iterator[Candidate]:
    """Every candidate of the chosen templates over `ops` (op names of the op table)."""
    unknown = sorted(set(ops) - set(OPS))
    if unknown:
        raise ValueError(f"not ops of the table: {', '.join(unknown)}")
    unary = [o for o in ops if o in UNARY]
    binary = [o for o in ops if o in ELEMENTWISE]
    reductions = [o for o in ops if o in REDUCTIONS]
    if "through-head" in templates:
        for op, h in itertools.product(unary, HEADS):
            yield Candidate(f"{op}-{h}", _unary(op, _moved(h, "?t")),
                            _moved(h, _unary(op, "?t")), "through-head",
                            statement=f"{op} commutes with {h}")
        for op, h in itertools.product(binary, HEADS):
            yield Candidate(f"{op}-{h}-{h}", f"({op} {_moved(h, '?a')} {_moved(h, '?b')})",
                            _moved(h, f"({op} ?a ?b)"), "through-head",
                            (None, Condition("same_dim", ("?a", "?b", "?d")))
                            if h in ("part", "comb") else (None,),
                            statement=f"{op} of two tensors moved alike by {h}")
        for op, h in itertools.product(reductions, HEADS):
            moved = _moved(h, "?t", "?e")
            yield Candidate(f"{op}-{h}", f"({op} {moved} ?d)", _moved(h, f"({op} ?t ?d)", "?e"),
                            "through-head",
                            (None, distinct("?d", "?e")) if h in ("part", "comb") else (None,),
                            statement=f"{op} over a dim through {h}")
    if "through-op" in templates:
        for u, b in itertools.product(unary, binary):
            yield Candidate(f"{u}-over-{b}", _unary(u, f"({b} ?a ?b)"),
                            f"({b} {_unary(u, '?a')} {_unary(u, '?b')})", "through-op",
                            statement=f"{u} distributes over {b}")
        for u, v in itertools.combinations(unary, 2):
            yield Candidate(f"{u}-{v}-commute", _unary(u, _unary(v, "?t")),
                            _unary(v, _unary(u, "?t")), "through-op",
                            statement=f"{u} and {v} commute")
    if "size-one" in templates:
        for op in reductions:
            yield Candidate(f"{op}-size-one", f"({op} ?t ?d)", "?t", "size-one",
                            (None, size_one("?t", "?d")),
                            statement=f"{op} over a dim of size 1")
    if "regrouping" in templates:
        yield from _regrouping()


def _regrouping() -> Iterator[Candidate]:
    """Movement chains over a concatenation of |g| chunks along d, each introduced axis
    reduced again, against the sum or mean of the chunks: one re-split (h) or a split into
    parts reduced before a second split into chunks (f, then k)."""
    source = "(comb ?t ?d ?g)"
    for r1, rhs in itertools.product(("red", "mred"), repeat=2):
        yield Candidate(f"{r1}-resplit-as-{rhs}", f"({r1} (part {source} ?d ?h) ?h)",
                        f"({rhs} ?t ?g)", "regrouping", (None, same_axis_size("?g", "?h")),
                        statement=f"{r1} of a re-split concatenation is the {rhs} of its "
                                  "chunks")
    for r1, r2 in itertools.product(("red", "mred"), repeat=2):
        two = f"({r2} (part ({r1} (part {source} ?d ?f) ?f) ?d ?k) ?k)"
        for rhs in ("red", "mred"):
            yield Candidate(f"{r2}-of-{r1}-regroup-as-{rhs}", two, f"({rhs} ?t ?g)",
                            "regrouping", (None, axis_product("?g", "?f", "?k"),
                                           axis_product("?g", "?k", "?f")),
                            statement=f"{r1} over parts, then {r2} over chunks, of a "
                                      f"concatenation is the {rhs} of its chunks")


# -- deciding -------------------------------------------------------------------------------------

def canonical(lhs: str, rhs: str) -> tuple[str, str]:
    """The two sides with variables renamed ?v0, ?v1, ... in order of first appearance."""
    names: dict[str, str] = {}

    def walk(t: Term) -> Term:
        if is_var(t.head):
            names.setdefault(t.head, f"?v{len(names)}")
            return Term(names[t.head], ())
        return Term(t.head, [walk(a) for a in t.args]) if t.args else t

    left = walk(Pattern(lhs).term)
    return str(left), str(walk(Pattern(rhs).term))


def _known(table: Sequence[Axiom]) -> set[tuple[str, str]]:
    out = set()
    for ax in table:
        out.add(canonical(ax.lhs, ax.rhs))
        out.add(canonical(ax.rhs, ax.lhs))
    return out


def derivable(axiom: Axiom, table: Sequence[Rule], instances: int = 2) -> bool:
    """Whether the table's e-graph joins the two sides on the first and the last generic
    instances of `axiom` (a filter for what is worth adding, not a proof of anything)."""
    found = list(generic_instances(axiom))
    if not found:
        return False
    for inst in [found[0], found[-1]][:instances]:
        egraph = EGraph(inst.analysis)
        a, b = egraph.add(inst.lhs), egraph.add(inst.rhs)

        def met(e: EGraph, a: int = a, b: int = b) -> bool:
            return e.find(a) == e.find(b)

        egraph.run(table, iter_limit=12, node_limit=5_000, goal=met)
        if not met(egraph):
            return False
    return True


class Prover(Protocol):
    """`prism.smt.prove_axiom`: the z3 layer sits above `expr`, so its caller passes it in."""

    def __call__(self, axiom: Axiom, *, timeout_ms: int = ..., first_unknown: bool = ...
                 ) -> Any: ...


# (target, graph, rules) → whether `rules` prove the graph equal to the target
# (`prism.verify.equiv.verify(...).verdict == "equivalent"`, passed in by the caller)
Checker = Callable[[Any, Any, list[Rule]], bool]


def decide(c: Candidate, known: set[tuple[str, str]], table: Sequence[Rule], prove: Prover,
           timeout_ms: int = 10_000) -> Finding:
    """Try the candidate's conditions weakest first; z3 decides each (see the module)."""
    start = time.perf_counter()
    if canonical(c.lhs, c.rhs) in known:
        return Finding(c, "known", seconds=time.perf_counter() - start)
    first = None
    for cond in c.conditions:
        result = prove(c.axiom(cond), timeout_ms=timeout_ms, first_unknown=True)
        if result.status == "proved":
            status = "derivable" if derivable(c.axiom(cond), table) else "new"
            return Finding(c, status, cond, result.detail,
                           seconds=time.perf_counter() - start)
        first = first or result
    assert first is not None
    return Finding(c, first.status, c.conditions[0], first.detail, first.model,
                   time.perf_counter() - start)


@dataclass
class Report:
    findings: list[Finding]
    table: int                                   # axioms the run started from
    without: tuple[str, ...]
    unproven: list[str]                          # corpus graphs the table leaves unproven
    together: list[str] = field(default_factory=list)   # ... that all new axioms together prove
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        counts: dict[str, int] = {}
        for f in self.findings:
            counts[f.status] = counts.get(f.status, 0) + 1
        return {"table": self.table, "without": list(self.without), "counts": counts,
                "unproven": self.unproven, "made_provable_together": self.together,
                "seconds": round(self.seconds, 2),
                "findings": [f.to_json() for f in self.findings]}

    def text(self) -> str:
        doc = self.to_json()
        lines = [f"discovery against {self.table} axioms"
                 + (f" (the table without {', '.join(self.without)})" if self.without else "")
                 + f": {len(self.findings)} candidates, "
                 + ", ".join(f"{n} {k}" for k, n in sorted(doc["counts"].items()))]
        for f in self.findings:
            if f.status == "new":
                cond = f" if {f.condition}" if f.condition is not None else ""
                helps = (f"; makes provable: {', '.join(f.makes_provable)}"
                         if f.makes_provable else "")
                lines.append(f"  new  {f.candidate.name}: {f.candidate.lhs} = "
                             f"{f.candidate.rhs}{cond}{helps}")
        refuted = [f for f in self.findings if f.status == "refuted"]
        if refuted:
            lines.append(f"  refuted ({len(refuted)}), e.g. {refuted[0].candidate.name}: "
                         f"{refuted[0].detail[:200]}")
        if self.unproven:
            lines.append(f"  corpus graphs the table leaves unproven: {len(self.unproven)}; "
                         f"all new axioms together prove {len(self.together)} of them")
        return "\n".join(lines)


Pair = tuple[str, Any, Any]      # (name, target graph, candidate graph)


def discover(prove: Prover, ops: Sequence[str] = DEFAULT_OPS, *,
             templates: Sequence[str] = TEMPLATES, without: Iterable[str] = (),
             corpus: Sequence[Pair] = (), check: Checker | None = None,
             timeout_ms: int = 10_000) -> Report:
    """Propose, decide and report (see the module); `without` names groups (or axioms) of the
    table to leave out, `corpus` the (name, target, graph) pairs to try the new axioms on with
    `check`. `prism axioms discover` passes z3 (`prism.smt.prove_axiom`) and the verifier."""
    start = time.perf_counter()
    left_out = tuple(without)
    unknown = sorted(set(left_out) - {a.group for a in AXIOMS} - {a.name for a in AXIOMS})
    if unknown:
        raise ValueError(f"not groups or axioms of the table: {', '.join(unknown)}")
    table = [a for a in AXIOMS if a.group not in left_out and a.name not in left_out]
    rules = [a.rule() for a in table]
    known = _known(table)
    findings = [decide(c, known, rules, prove, timeout_ms) for c in candidates(ops, templates)]
    if corpus and check is None:
        raise ValueError("a corpus needs a check (the verifier) to try the axioms on")

    def proved(target: Any, graph: Any, table: list[Rule]) -> bool:
        assert check is not None
        return check(target, graph, table)

    unproven = [name for name, target, graph in corpus if not proved(target, graph, rules)]
    names = {a.name for a in AXIOMS}
    added: list[Rule] = []
    for f in findings:
        if f.status != "new":
            continue
        axiom = f.candidate.axiom(f.condition)
        if axiom.name in names:         # a name the full table uses for another identity
            axiom = Axiom(f"{axiom.name}-discovered", axiom.lhs, axiom.rhs, axiom.statement,
                          axiom.evidence, axiom.group, False, axiom.condition)
        added.append(axiom.rule())
        f.makes_provable = [name for name, target, graph in corpus
                            if name in unproven and proved(target, graph, [*rules, added[-1]])]
    together = [name for name, target, graph in corpus
                if name in unproven and added and proved(target, graph, [*rules, *added])]
    return Report(findings, len(table), left_out, unproven, together,
                  time.perf_counter() - start)


__all__ = ["Candidate", "Finding", "Report", "candidates", "canonical", "decide", "discover"]
