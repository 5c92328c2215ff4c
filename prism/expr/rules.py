"""Patterns, rewrite rules, analyses, and the facts a rule condition may ask about.

A rule is data: `Rule("mul-one", "(* ?a 1)", "?a")` states the identity a·1 = a. Its condition, if
any, is a function of `Facts` — never of an e-class or a term directly — so that the e-graph (which
binds variables to e-classes) and the proof checker (which binds them to concrete terms) ask the
same questions of the same concrete witnesses and reach the same verdict.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from prism.errors import RuleError, TermSyntaxError
from prism.expr.terms import Term, parse

FORWARD = "forward"  # rewrite lhs → rhs
BACKWARD = "backward"  # rewrite rhs → lhs (bidirectional rules only)
DIRECTIONS = (FORWARD, BACKWARD)


def is_var(head: str) -> bool:
    """Pattern variables are leaves named `?name`."""
    return len(head) > 1 and head[0] == "?"


class Pattern:
    """A term whose `?name` leaves are variables: `(+ ?a 0)`."""

    __slots__ = ("term", "vars")

    def __init__(self, source: str | Term | Pattern):
        if isinstance(source, Pattern):
            term = source.term
        else:
            term = parse(source) if isinstance(source, str) else source
        for _, sub in term.subterms():
            if is_var(sub.head) and sub.args:
                raise TermSyntaxError(f"pattern {term}: variable {sub.head} cannot take "
                                      "arguments; variables stand for whole subterms")
        self.term: Term = term
        # variables in order of first appearance
        self.vars: tuple[str, ...] = tuple(dict.fromkeys(
            sub.head for _, sub in term.subterms() if is_var(sub.head)))

    def instantiate(self, subst: Mapping[str, Term]) -> Term:
        """The pattern with every variable replaced by its term in `subst`."""
        return _instantiate(self.term, subst)

    def __str__(self) -> str:
        return str(self.term)

    def __repr__(self) -> str:
        return f"Pattern({str(self.term)!r})"


def _instantiate(term: Term, subst: Mapping[str, Term]) -> Term:
    if is_var(term.head):
        if term.head not in subst:
            raise RuleError(f"substitution binds no term to {term.head}")
        return subst[term.head]
    if not term.args:
        return term
    return Term(term.head, [_instantiate(a, subst) for a in term.args])


class Facts(ABC):
    """What a rule condition may know about the terms its pattern variables are bound to."""

    @abstractmethod
    def atom(self, var: str) -> str | None:
        """The atom of the bound term if it is a leaf (`"0"`, `"X"`), else None."""

    @abstractmethod
    def data(self, var: str) -> Any:
        """The analysis data of the bound term (`Analysis.make` folded over it)."""


Condition = Callable[[Facts], bool]


class Analysis(Protocol):
    """An e-class analysis (as in egg): data per term, computed bottom-up and merged on union.

    `make(head, child_data)` is the data of a node from its children's data; `merge(a, b)` is the
    data of a class that holds terms with data `a` and `b` (it may raise a PrismError subclass when
    they conflict, e.g. two different shapes). Data must support `==`.
    """

    def make(self, head: str, child_data: tuple[Any, ...]) -> Any: ...

    def merge(self, a: Any, b: Any) -> Any: ...


def fold_data(term: Term, analysis: Analysis, cache: dict[Term, Any] | None = None) -> Any:
    """`analysis.make` folded bottom-up over a term; `cache` memoises shared subterms."""
    cache = {} if cache is None else cache
    if term not in cache:
        child_data = tuple(fold_data(a, analysis, cache) for a in term.args)
        cache[term] = analysis.make(term.head, child_data)
    return cache[term]


class TermFacts(Facts):
    """Facts about concrete terms: what the proof checker (and any term rewriter) uses."""

    def __init__(self, subst: Mapping[str, Term], analysis: Analysis | None = None):
        self._subst = subst
        self._analysis = analysis
        self._cache: dict[Term, Any] = {}

    def _term(self, var: str) -> Term:
        if var not in self._subst:
            raise RuleError(f"a condition asks about {var}, which its pattern does not bind "
                            f"(bound: {', '.join(self._subst) or 'nothing'})")
        return self._subst[var]

    def atom(self, var: str) -> str | None:
        term = self._term(var)
        return term.head if term.is_leaf else None

    def data(self, var: str) -> Any:
        term = self._term(var)
        if self._analysis is None:
            raise RuleError(f"a condition reads the analysis data of {var}, but no analysis "
                            "was given; pass the analysis the e-graph used")
        return fold_data(term, self._analysis, self._cache)


class Rule:
    """A named equation `lhs = rhs`, used by the e-graph as the rewrite `lhs => rhs`.

    A `bidirectional` rule is also matched on its rhs (rewriting `rhs => lhs`). Explanations may
    use any rule backward, since an equation is symmetric: a proof path can cross a rule edge
    either way. `condition(facts)` guards both directions; it sees the terms bound to the variables.
    """

    __slots__ = ("bidirectional", "condition", "lhs", "name", "rhs")

    def __init__(self, name: str, lhs: str | Pattern, rhs: str | Pattern,
                 condition: Condition | None = None, bidirectional: bool = False):
        self.name = name
        self.lhs = Pattern(lhs)
        self.rhs = Pattern(rhs)
        self.condition = condition
        self.bidirectional = bidirectional
        _check_bound(name, self.lhs, self.rhs)
        if bidirectional:
            _check_bound(name, self.rhs, self.lhs)

    @property
    def vars(self) -> tuple[str, ...]:
        """Every variable of the rule (a forward-only rhs binds no new ones)."""
        return tuple(dict.fromkeys(self.lhs.vars + self.rhs.vars))

    def sides(self, direction: str) -> tuple[Pattern, Pattern]:
        """(the side rewritten from, the side rewritten to) in a direction."""
        if direction == FORWARD:
            return self.lhs, self.rhs
        if direction == BACKWARD:
            return self.rhs, self.lhs
        raise RuleError(f"direction must be {FORWARD!r} or {BACKWARD!r}, not {direction!r}")

    def directions(self) -> tuple[str, ...]:
        """The directions the e-graph matches this rule in."""
        return DIRECTIONS if self.bidirectional else (FORWARD,)

    def __repr__(self) -> str:
        arrow = "<=>" if self.bidirectional else "=>"
        guard = " if <condition>" if self.condition else ""
        return f"Rule({self.name}: {self.lhs} {arrow} {self.rhs}{guard})"


def _check_bound(name: str, source: Pattern, target: Pattern) -> None:
    """Every variable the built side uses must be bound by the matched side."""
    unbound = [v for v in target.vars if v not in source.vars]
    if unbound:
        raise RuleError(f"rule {name}: {', '.join(unbound)} in {target} is not bound by {source}")


def rules_by_name(rules: list[Rule]) -> dict[str, Rule]:
    """Rules keyed by name; explanations and reports name rules, so names must be unique."""
    table: dict[str, Rule] = {}
    for rule in rules:
        if rule.name in table:
            raise RuleError(f"two rules are named {rule.name!r}; rule names must be unique")
        table[rule.name] = rule
    return table
