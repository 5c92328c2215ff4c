"""The proof forest behind explanations (REFERENCE.md §4.6, after Nieuwenhuis & Oliveras 2005).

Every e-node the e-graph adds gets an id, and the id stands for one concrete term: the node's head
applied to the terms of the ids it was added with. Every union adds one edge between the two ids
that caused it, justified by a rule application or by congruence, after re-rooting one tree so the
edges form a spanning forest. Two ids are proved equal iff they are in one tree, and the unique
path between them is the proof:

- a rule edge u → v is one rewrite at the root: term(u) = side[σ] and term(v) = other side[σ];
- a congruence edge u → v joins f(x1..xn) and f(y1..yn): each xi = yi is explained recursively
  and lifted into argument i.

A congruence edge is only added once its children are already connected, and the forest only
grows, so every sub-proof uses strictly older edges: the recursion terminates. Sub-proofs are
memoised per pair of ids, so shared sub-proofs are computed once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from prism.expr.proof import Step
from prism.expr.rules import BACKWARD, FORWARD
from prism.expr.terms import Term

Node = tuple[str, tuple[int, ...]]  # (head, child ids)

CONGRUENCE = "congruence"


class RuleEdge(NamedTuple):  # a NamedTuple: one is made per rule application, cheaply
    """The term of the edge's source rewrites to the term of its target by `rule` in
    `direction`, with each variable bound to the term of an id."""

    rule: str
    direction: str
    subst: tuple[tuple[str, int], ...]

    def flipped(self) -> RuleEdge:
        back = BACKWARD if self.direction == FORWARD else FORWARD
        return RuleEdge(self.rule, back, self.subst)


Justification = RuleEdge | str  # str: CONGRUENCE


def _flip(edge: Justification) -> Justification:
    return edge.flipped() if isinstance(edge, RuleEdge) else edge


class ProofForest:
    """Edges between e-node ids; `explain(a, b)` reads a flat explanation off the path."""

    def __init__(self, node_of: Callable[[int], Node], term_of: Callable[[int], Term]):
        self._parent: list[int] = []
        self._edge: list[Justification | None] = []  # how id rewrites to its parent
        self._node_of = node_of
        self._term_of = term_of
        self._memo: dict[tuple[int, int], list[Step]] = {}

    def add(self) -> int:
        new = len(self._parent)
        self._parent.append(new)
        self._edge.append(None)
        return new

    def union(self, a: int, b: int, why: Justification) -> None:
        """Record that term(a) = term(b) because of `why` (stated from a to b)."""
        self._make_root(a)
        self._parent[a] = b
        self._edge[a] = why

    def _make_root(self, x: int) -> None:
        """Reverse the edges on the path from x to its root, so that x becomes the root."""
        parent, edge = self._parent, self._edge
        cur, new_parent, new_edge = x, x, None
        while True:
            up, up_edge = parent[cur], edge[cur]
            parent[cur], edge[cur] = new_parent, new_edge
            if up == cur or up_edge is None:
                return
            new_parent, new_edge, cur = cur, _flip(up_edge), up

    def _path(self, a: int, b: int) -> list[tuple[int, int, Justification]]:
        """The forest path from a to b as (from, to, why) edges; empty if a == b."""
        parent = self._parent
        up_a = [a]
        while parent[up_a[-1]] != up_a[-1]:
            up_a.append(parent[up_a[-1]])
        depth = {n: i for i, n in enumerate(up_a)}
        up_b: list[int] = []
        n = b
        while n not in depth:
            if parent[n] == n:
                raise ValueError(f"ids {a} and {b} are not connected in the proof forest")
            up_b.append(n)
            n = parent[n]
        path: list[tuple[int, int, Justification]] = []
        for x in up_a[:depth[n]]:
            path.append((x, parent[x], _edge(self._edge[x])))
        for y in reversed(up_b):
            path.append((parent[y], y, _flip(_edge(self._edge[y]))))
        return path

    def explain(self, a: int, b: int) -> list[Step]:
        """Whole-term steps from term(a) to term(b), one rule application each."""
        key = (a, b)
        if key not in self._memo:
            steps: list[Step] = []
            for u, v, why in self._path(a, b):
                if isinstance(why, RuleEdge):
                    subst = {var: self._term_of(i) for var, i in why.subst}
                    steps.append(Step(why.rule, why.direction, self._term_of(u),
                                      self._term_of(v), (), subst))
                else:
                    steps.extend(self._congruence(u, v))
            self._memo[key] = steps
        return self._memo[key]

    def _congruence(self, u: int, v: int) -> list[Step]:
        """f(x1..xn) = f(y1..yn): rewrite the arguments one after another, left to right."""
        head, xs = self._node_of(u)
        _, ys = self._node_of(v)
        args = list(self._term_of(u).args)
        steps: list[Step] = []
        for i, (x, y) in enumerate(zip(xs, ys, strict=True)):
            if x == y:
                continue
            for sub in self.explain(x, y):
                before = Term(head, args)
                args[i] = sub.after
                steps.append(Step(sub.rule, sub.direction, before, Term(head, args),
                                  (i, *sub.path), sub.subst))
        return steps


def _edge(edge: Justification | None) -> Justification:
    assert edge is not None, "a non-root id always has an edge to its parent"
    return edge
