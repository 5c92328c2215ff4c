"""Flat explanations and their independent checker.

A flat explanation of `a = b` is a list of `Step`s: whole terms from `a` to `b`, each one rule
application at one subterm. `check_explanation` replays it using only terms and rules — never the
e-graph that produced it — and, unlike egg's `check_proof`, re-checks rule conditions.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from prism.errors import PrismError, ProofCheckError
from prism.expr.rules import DIRECTIONS, FORWARD, Analysis, Rule, TermFacts, rules_by_name
from prism.expr.terms import Path, Term


@dataclass(frozen=True)
class Step:
    """`before` rewritten to `after` by one application of `rule` at `path` in `before`.

    `subst` binds the rule's variables to terms: `before.at(path)` is the matched side (lhs when
    `direction` is "forward", rhs when "backward") instantiated with it, and `after` is `before`
    with that subterm replaced by the other side instantiated with it.
    """

    rule: str
    direction: str
    before: Term
    after: Term
    path: Path
    subst: dict[str, Term] = field(hash=False)

    def __str__(self) -> str:
        """egg's flat form: `after`, with the rewritten subterm wrapped as `(Rewrite=> rule t)`."""
        arrow = "=>" if self.direction == FORWARD else "<="
        return _show_marked(self.after, self.path, f"(Rewrite{arrow} {self.rule} ")


def _show_marked(term: Term, path: Path, opener: str) -> str:
    if not path:
        return f"{opener}{term})"
    args = [_show_marked(a, path[1:], opener) if i == path[0] else str(a)
            for i, a in enumerate(term.args)]
    return f"({term.head} {' '.join(args)})"


def check_explanation(steps: Iterable[Step], rules: Iterable[Rule], start: Term, end: Term,
                      analysis: Analysis | None = None) -> None:
    """Replay a flat explanation of `start = end`; raise ProofCheckError at the first bad step.

    Checks that the steps chain from `start` to `end`, and that every step is one application of
    a known rule (either direction: a rule is an equation) at a valid path, with a substitution
    that binds exactly the rule's variables, makes the matched side equal the subterm, builds
    `after`, and satisfies the rule's condition (data folded from `analysis.make` over the bound
    terms).
    """
    table = rules_by_name(list(rules))
    current = start
    for index, step in enumerate(steps):
        if step.before is not current:
            raise ProofCheckError(f"step {index}: starts from {step.before}, but the explanation "
                                  f"is at {current}")
        try:
            _check_step(step, table, analysis)
        except ProofCheckError as failure:
            raise ProofCheckError(f"step {index} ({step.rule}, {step.direction}, at path "
                                  f"{step.path}): {failure}") from None
        current = step.after
    if current is not end:
        raise ProofCheckError(f"the explanation ends at {current}, not at {end}")


def _check_step(step: Step, table: dict[str, Rule], analysis: Analysis | None) -> None:
    rule = table.get(step.rule)
    if rule is None:
        raise ProofCheckError(f"no rule named {step.rule!r} was given")
    if step.direction not in DIRECTIONS:  # any rule may be used backward: equations are symmetric
        raise ProofCheckError(f"direction must be one of {DIRECTIONS}, not {step.direction!r}")
    matched, built = rule.sides(step.direction)
    if set(step.subst) != set(rule.vars):
        raise ProofCheckError(f"substitution binds {sorted(step.subst)}, the rule's variables "
                              f"are {sorted(rule.vars)}")
    try:
        subterm = step.before.at(step.path)
    except IndexError as bad_path:
        raise ProofCheckError(str(bad_path)) from None
    if matched.instantiate(step.subst) is not subterm:
        raise ProofCheckError(f"{subterm} is not {matched} under the substitution "
                              f"{_show_subst(step.subst)}")
    expected = step.before.replace_at(step.path, built.instantiate(step.subst))
    if step.after is not expected:
        raise ProofCheckError(f"rewriting gives {expected}, the step claims {step.after}")
    if rule.condition is not None:
        try:
            holds = rule.condition(TermFacts(step.subst, analysis))
        except PrismError as cannot:
            raise ProofCheckError(f"condition cannot be evaluated: {cannot}") from None
        if not holds:
            raise ProofCheckError(f"condition does not hold for {_show_subst(step.subst)}")


def _show_subst(subst: dict[str, Term]) -> str:
    return "{" + ", ".join(f"{v} ↦ {t}" for v, t in subst.items()) + "}"
