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

from collections.abc import Sequence
from dataclasses import dataclass

from prism.expr.axioms import rules
from prism.expr.egraph import EGraph, RunReport
from prism.expr.tensor_terms import TensorAnalysis
from prism.expr.terms import Term
from prism.ir.graph import KernelGraph
from prism.ir.ops import OPS, with_defaults
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
