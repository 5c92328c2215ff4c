"""Abstract expressions: what a tensor of a symbolic family computes, whatever its maps.

A family's tensor is abstracted by its *trivial instantiation*: every map bit 0, every grid size
and the loop range 1. Then no data moves (`part`, `rep`, `comb`, `red` over an axis of size 1
are identities, as `prism.verify.translate` leaves them out), a tile is the whole tensor, and an
accumulator is its plain reduction: `nored` is the identity, `red_ld_sum` a `sum`, `red_ld_rms`
`sqrt(mean(square ·))` over the last dim. The abstract expression is the term of that
instantiation, in the verifier's own term language (`prism.expr.tensor_terms`): matmul(X, W),
sqrt(mean(square X, 1)), ... Indices are still there; grid, loop and maps are gone, which is
what Prism's *symbolic degrees* (bits 0, sizes 1) do to its coarser formulas (REFERENCE §1.4).

The pruning test: the target's terms are saturated once, in an e-graph, with **the verifier's
axiom table** (`prism.expr.axioms`, one table, not two). A family tensor is kept iff its
abstract expression is represented in that e-graph — it is a subterm of some term equal to the
target under the axioms. A miss prunes the family. The guarantee is relative to the axioms,
and holds only when the e-graph saturated: when it stopped at a limit, a miss proves nothing,
and the prune's claim is `unproven` (set aside, the search not exhaustive) instead of
`no_equivalent`. `prism search --audit-rule abstract_expression` checks it by exploring what
was pruned.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from prism.expr.axioms import rules
from prism.expr.egraph import EGraph, RunReport
from prism.expr.tensor_terms import TensorAnalysis
from prism.expr.terms import Term
from prism.ir.graph import KernelGraph
from prism.ir.ops import OPS, with_defaults
from prism.search.completion import Completion, ops_patterns
from prism.verify.translate import (
    ACCUMULATOR_KINDS,
    accumulator_term,
    compute_term,
    leaf,
    translate,
)


@dataclass(frozen=True)
class AbstractLimits:
    """Counts only, never wall-clock time, so a search prunes the same families on an idle and
    on a loaded machine. Large enough that every workload's target saturates (ntrans, the
    largest, saturates after 14 iterations at 12,234 e-nodes, the same with the
    regrouping and discovered axioms of issue 18 as without them); a target that does not
    gets `unproven` prunes instead of `no_equivalent` ones (`prism.search.pruning`)."""

    iterations: int = 40
    nodes: int = 50_000


class AbstractTarget:
    """The target's terms, saturated under the axioms; answers 'is this a subexpression?'."""

    def __init__(self, target: KernelGraph, limits: AbstractLimits = AbstractLimits()):
        tr = translate(target)
        self.inputs = tr.inputs
        self.leaves = dict(zip(target.inputs, tr.inputs, strict=True))
        self.terms = tr.terms
        self.egraph = EGraph(TensorAnalysis(
            dict(zip(tr.inputs, (target.shape(t) for t in target.inputs), strict=True)), {}))
        self.roots = [self.egraph.add(t) for t in tr.terms]
        self.output_shapes = [target.shape(t) for t in target.outputs]
        self.report: RunReport = self.egraph.run(
            rules(), iter_limit=limits.iterations, node_limit=limits.nodes)
        self.saturated = self.report.stop_reason == "saturated"
        self._memo: dict[Term, int | None] = {}
        self.attr_choices = _attr_choices(target)
        self._reach: dict[frozenset[str], dict[int, int]] = {}
        self._completion: dict[frozenset[str], Completion] = {}
        # the ranks an op's expression is built at (`completion`): every rank up to the
        # target's largest (its ops keep ranks; a rank more only adds matches, a weaker bound)
        self.ranks = tuple(range(1, 1 + max(len(target.shape(t)) for t in (
            *target.inputs, *target.outputs))))

    def choices(self, kind: str) -> list[dict[str, object]]:
        """The attributes the search tries for op `kind`: none for an op without attributes;
        else those the target's own ops of the kind have (an op with another constant
        computes nothing the target does, up to the axioms' identities, which keep the
        constants the target has)."""
        od = OPS[kind]
        if not od.attrs and not od.optional:
            return [{}]
        return self.attr_choices.get(kind, [] if od.attrs else [{}])

    def lookup(self, term: Term) -> int | None:
        """The e-class that represents `term`, or None when it is not a subexpression."""
        if term not in self._memo:
            found = self.egraph.lookup(term)
            self._memo[term] = None if found is None else self.egraph.find(found)
        return self._memo[term]

    def reach(self, kinds: Iterable[str]) -> dict[int, int]:
        """Each class's distance to the target's outputs, in ops of `kinds` (`distances`): at
        least how many ops a program must still apply to a tensor of that class before its
        result is a target output. Classes no output contains are absent."""
        free = inner_heads(kinds, self.choices)
        if free not in self._reach:
            self._reach[free] = distances(self.egraph, self.roots, free)
        return self._reach[free]

    def completion(self, kinds: Iterable[str]) -> Completion:
        """The e-graph as `out_of_reach`'s sibling bounds read it, in ops of `kinds`
        (`prism.search.completion`)."""
        kinds = frozenset(kinds)
        if kinds not in self._completion:
            self._completion[kinds] = Completion(self.egraph, self.roots, ops_patterns(
                sorted(kinds), self.choices, self.ranks))
        return self._completion[kinds]

    def output_index(self, term: Term) -> int | None:
        """Which target output `term` equals under the axioms, if any."""
        cls = self.lookup(term)
        if cls is None:
            return None
        for i, root in enumerate(self.roots):
            if self.egraph.find(root) == cls:
                return i
        return None

    def evidence(self, term: Term) -> dict[str, object]:
        """What a prune shows: the expression, the target, and whether the target's e-graph
        was saturated (else the stop reason: the answer is relative to what it reached)."""
        target = str(self.terms[0]) if len(self.terms) == 1 else [str(t) for t in self.terms]
        out: dict[str, object] = {"expression": str(term), "target": target,
                                  "saturated": self.saturated}
        if not self.saturated:
            out["stop"] = self.report.stop_reason
        return out


def _attr_choices(target: KernelGraph) -> dict[str, list[dict[str, object]]]:
    """Each op kind's attribute sets in the target (its block graphs' ops included), in the
    order they occur; an rms_norm's epsilon is also the epsilon of the RMS accumulator that
    computes it, and a negation is a multiplication by −1."""
    found: dict[str, list[dict[str, object]]] = {}

    def add(kind: str, attrs: dict[str, object]) -> None:
        if attrs not in found.setdefault(kind, []):
            found[kind].append(attrs)

    ops = [op for top in target.ops for op in (top.block.ops if top.block else (top,))]
    for op in ops:
        od = OPS.get(op.kind)
        if od is None or op.kind in ("input", "output", "customized"):
            continue
        full = with_defaults(op.kind, op.attr)
        if od.attrs or od.optional:     # an optional attribute at its default is left out
            add(op.kind, {k: full[k] for k in (*od.attrs, *od.optional)
                          if k in od.attrs or full[k] != od.optional[k]})
        if op.kind == "rms_norm":
            add("red_ld_rms", {"eps": full["eps"]} if full["eps"] else {})
        if op.kind == "neg":
            add("mul_scalar", {"scalar": -1.0})
    return found


def op_term(kind: str, args: Sequence[Term], rank: int, attrs: dict[str, object]) -> Term:
    """The abstract expression of a block or kernel op on operands with these expressions (the
    trivial instantiation: accumulators without a loop)."""
    if kind in ACCUMULATOR_KINDS:
        return accumulator_term(kind, args[0], None, leaf(rank - 1), "", attrs)
    if OPS[kind].category in ("io", "custom"):
        raise ValueError(f"{kind} has no abstract expression of its own")
    return compute_term(kind, list(args), rank, attrs)


def inner_heads(kinds: Iterable[str], choices: Callable[[str], list[dict[str, object]]]
                ) -> frozenset[str]:
    """The heads an op of `kinds` (with each of its attribute choices) puts below the top of
    its abstract expression: `red_ld_rms` makes sqrt(mean(square x)), so `mean` and `square`
    (and `add_scalar` with an epsilon) are inner. An op adds one top node and only inner ones
    below it, so a path of terms in which only heads outside this set count is at most as long
    as the number of ops that built it."""
    inner: set[str] = set()
    for kind in kinds:
        if kind == "redtox_ld_sum":
            continue        # it sums split tiles only, whose sum's term is the tile's (`probe`)
        args = [leaf(f"_v{i}") for i in range(max(OPS[kind].arity, 1))]
        for attrs in choices(kind):     # none: an attribute the target lacks, never tried
            top = op_term(kind, args, 2, dict(attrs))
            inner.update(t.head for _, t in top.subterms()
                         if t.args and t is not top)
    return frozenset(inner)


def distances(egraph: EGraph, roots: Sequence[int], free: frozenset[str]) -> dict[int, int]:
    """Shortest distance from each class to a root class, downward through e-nodes: a step
    through an e-node costs 0 when its head is in `free`, else 1 (Dijkstra on 0/1 weights).

    Why it bounds the ops still to come: a tensor that ends in a stored output has its term as
    a subterm of the output's term, and when the output's term is represented in the e-graph
    every subterm on the way down is too, node by node (`EGraph.lookup` is structural); each
    op between them adds one counted node at most (`inner_heads`)."""
    best: dict[int, int] = {}
    heap = [(0, egraph.find(r)) for r in roots]
    heapq.heapify(heap)
    while heap:
        d, cls = heapq.heappop(heap)
        if cls in best:
            continue
        best[cls] = d
        for node in egraph.nodes(cls):
            step = d + (node.head not in free)
            for child in node.children:
                child = egraph.find(child)
                if child not in best:
                    heapq.heappush(heap, (step, child))
    return best
