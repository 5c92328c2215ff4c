"""The order in which the depth-first search tries a node's children (`SearchConfig.order`).

    canonical   the generator's own order (`prism.search.generate`): accumulators first, then
                block ops, each in vocabulary order; custom kernels reading most inputs first
    analytic    by a modeled estimate of each child: its family's lower bound
                (`pruning.family_bound_us`, the bound `cost_bound` reads), children that the
                first rules will prune at once (`cannot_close`, `abstract_expression`,
                `out_of_reach`: they read only counts and expressions) last
    learned     by a trained evaluator's estimate of the best latency reachable below each child
                (`prism.learn.learned_order()`: built outside the search, which never imports
                torch, and passed in as `SearchConfig(order=...)`)

An order only permutes the children a node tries: every child is still generated and judged by
the same rules, so the same programs are valid and proven. What an order changes is which
program comes first, hence which incumbent branch and bound holds when (the families
`cost_bound` prunes, and the candidates left to verify) and how soon a good one is found. A
child that cannot be built (its shapes do not fit) scores `inf`: the generator skips it anyway.
Sorting is stable, so ties keep the canonical (or the seed's shuffled) order.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from prism.errors import PrismError
from prism.ir.ops import OPS
from prism.search.pruning import (
    Context,
    Family,
    abstract_miss,
    cannot_close_counts,
    family_bound_us,
    out_of_reach,
)
from prism.search.state import BlockState, KernelState

ORDERS = ("canonical", "analytic", "learned")
# a child as the generator lists it: (kind, operands, key, attrs)
Extension = tuple[object, ...]
# what an analytic score adds for a child the first rules prune at once (after every other)
DOOMED = 1e12


@runtime_checkable
class Order(Protocol):
    """Scores for a node's children, lower first; `name` is what results and traces show."""

    name: str

    def scores(self, ctx: Context, kernel: KernelState, block: BlockState | None,
               children: Sequence[Extension]) -> Sequence[float]: ...


def ordered(order: Order, ctx: Context, kernel: KernelState, block: BlockState | None,
            children: list[object]) -> list[object]:
    """`children` sorted by `order`'s scores, stably (ties keep their order)."""
    if len(children) < 2:
        return children
    scores = order.scores(ctx, kernel, block, children)  # type: ignore[arg-type]
    return [c for _, _, c in sorted(zip(scores, range(len(children)), children, strict=True),
                                    key=lambda t: (t[0], t[1]))]


def child_family(kernel: KernelState, block: BlockState | None, ext: Extension
                 ) -> Family | None:
    """The family the generator would make for `ext` at the node (`kernel`, `block`), built
    the way it builds it (a custom kernel opens with one grid dim and symbolic maps); None when
    its shapes do not fit (no family)."""
    kind, operands, key, attrs = ext
    assert isinstance(kind, str) and isinstance(operands, tuple) and isinstance(key, tuple)
    assert isinstance(attrs, dict)
    try:
        if block is not None:
            child = block.extend(kind, operands, key, OPS[kind].category == "accum", attrs)
            return Family("", None, "block", kind, "", kernel, child, child.tensors[-1],
                          operands)
        if kind == "customized":
            opened = BlockState.open(kernel.custom, 1, [kernel.tensors[i] for i in operands])
            return Family("", None, "open", kind, "", kernel, opened, None, operands)
        made = kernel.with_kernel_op(kind, operands, key, attrs)
        return Family("", None, "kernel", kind, "", made, None, made.tensors[-1], operands)
    except PrismError:
        return None


def doomed(ctx: Context, fam: Family) -> bool:
    """Whether `cannot_close`, `abstract_expression` or `out_of_reach` prunes this block family
    at once (what the generator's fast path decides before building it)."""
    if fam.level != "block" or fam.block is None or fam.new is None:
        return False
    disabled = ctx.config.disabled
    return ("cannot_close" not in disabled and cannot_close_counts(
        ctx, fam.block.compute_ops, len(fam.block.open_tensors)) is not None) or \
        ("abstract_expression" not in disabled and
         abstract_miss(ctx, fam.new.name, fam.new.term) is not None) or \
        ("out_of_reach" not in disabled and out_of_reach(ctx, fam) is not None)


class AnalyticOrder:
    """Children by their family's modeled lower bound; the doomed last, unbuildable after."""

    name = "analytic"

    def scores(self, ctx: Context, kernel: KernelState, block: BlockState | None,
               children: Sequence[Extension]) -> list[float]:
        out = []
        for ext in children:
            fam = child_family(kernel, block, ext)
            if fam is None:
                out.append(math.inf)
                continue
            try:
                bound = family_bound_us(fam, ctx)
            except PrismError:
                bound = DOOMED / 2
            out.append(bound + (DOOMED if doomed(ctx, fam) else 0.0))
        return out


class UnknownOrderError(PrismError):
    """An order name the search does not know, or the learned order asked for by name."""


def resolve(order: str | Order) -> Order | None:
    """The `Order` a config's `order` names (None: canonical, the generator's own)."""
    if isinstance(order, Order):
        return order
    if order == "canonical":
        return None
    if order == "analytic":
        return AnalyticOrder()
    raise UnknownOrderError(problem(order) or f"unknown order {order!r}")


def problem(order: object) -> str | None:
    """Why `order` cannot be a search's order (None when it can)."""
    if isinstance(order, Order) or order in ("canonical", "analytic"):
        return None
    if order == "learned":
        return ("the learned order needs its trained model: pass "
                "SearchConfig(order=prism.learn.learned_order()) (or a weights file: "
                "learned_order('model.pt')), or use `prism search --order learned`")
    return (f"unknown order {order!r}; choose from {', '.join(ORDERS)} "
            "(e.g. --order analytic)")
