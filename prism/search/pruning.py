"""The pruning rules: a table of named entries, each returning its reason and evidence.

A rule looks at a *family* just generated (a partial sGraph: every completion of it is in the
family) and either lets it be or prunes it with a `Pruned(rule, reason, evidence)`. Rules are
data: `RULES` in order of cost, each switchable off (`SearchConfig.disabled`), each audited by
`prism search --audit-rule NAME` (see `prism.search.driver.audit`).

    structural           degenerate structure a simpler program covers (add(x, x), div(x, x),
                         a tensor accumulated twice), and dead ends (the last kernel the caps
                         allow cannot read every input the target needs, or does not compute it)
    abstract_expression  the new tensor is not a subexpression of the target under the axioms
                         (`prism.search.abstract`)
    hardware             no assignment of grid sizes, loop range and map bits fits the device
                         (z3 via `prism.search.hardware`; the unsat core is the evidence)
    cost_bound           a lower bound of the family's modeled latency over every assignment
                         exceeds the best verified candidate's modeled latency (branch and bound)

Caps (ops, accumulators, kernels) bound what is generated at all; they are not pruning.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from prism.expr.terms import Term
from prism.ir.graph import KernelGraph
from prism.ir.ops import OPS
from prism.search.hardware import check_hardware
from prism.search.state import BlockState, KernelState, Tensor


@dataclass(frozen=True)
class Pruned:
    rule: str
    reason: str
    evidence: dict[str, Any] = field(default_factory=dict)


@dataclass
class Family:
    """A node of the search: the partial program after one decision."""

    id: str
    parent: str | None
    level: str                 # "open" (a custom kernel's loads), "block" (a block op),
                               # "close" (the block stored its output), "kernel" (a kernel op)
    kind: str
    description: str
    kernel: KernelState
    block: BlockState | None
    new: Tensor | None         # the tensor the decision made
    operands: tuple[int, ...] = ()

    @cached_property
    def graph(self) -> KernelGraph:
        return self.kernel.graph(open_block=self.block, name=self.id)


@dataclass
class Context:
    """What the rules read besides the family: the target, the settings, the incumbent."""

    target: Any                      # AbstractTarget
    config: Any                      # SearchConfig
    needed_inputs: frozenset[str]    # the input leaves the target's terms read
    incumbent_us: float | None = None
    incumbent_id: str | None = None
    cost_device: Any = None
    shape_outputs: bool = False      # complete by shape, not by abstract expression

    def output_index(self, tensor: Tensor) -> int | None:
        """Which target output a kernel tensor may be. With the abstract-expression rule on,
        the one whose expression equals it under the axioms; with it off (or audited), any
        output of the same shape — the verifier alone decides, so an audit of that rule does
        not lean on the e-graph it audits."""
        if self.shape_outputs:
            shapes = self.target.output_shapes
            return next((i for i, s in enumerate(shapes) if s == tensor.shape), None)
        return self.target.output_index(tensor.term)

    def last_kernel(self, kernel: KernelState) -> bool:
        """No kernel can follow the one just finished (or being built)."""
        cfg = self.config
        return (kernel.kernels >= cfg.max_kernel_ops
                or (kernel.custom >= cfg.max_custom_kernels and not cfg.kernel_ops))


Rule = Callable[[Context, Family], Pruned | None]


def structural(ctx: Context, fam: Family) -> Pruned | None:
    if fam.level == "block" and fam.block is not None:
        names = [fam.block.tensors[i].name for i in fam.operands]
        if fam.kind in ("add", "div") and len(set(fam.operands)) == 1:
            what = "2·x" if fam.kind == "add" else "1"
            return Pruned("structural", f"{fam.kind}({names[0]}, {names[0]}) is {what}: a "
                          "simpler program computes the same",
                          {"check": "same operands", "claim": "not_better"})
        new = fam.block.tensors[-1]
        twin = next((t for t in fam.block.tensors[:-1] if t.value == new.value), None)
        if twin is not None:
            return Pruned("structural", f"{new.name} = {new.value} is computed again, as "
                          f"{twin.name} already is: a program without the copy is as good",
                          {"check": "duplicate", "twin": twin.name, "claim": "not_better"})
        remaining = ctx.config.max_block_ops - fam.block.compute_ops
        pending = len(fam.block.open_tensors)
        if pending - 1 > remaining:
            return Pruned("structural", f"{pending} tensors wait for a consumer but only "
                          f"{remaining} more op(s) fit the cap of {ctx.config.max_block_ops}: "
                          "the block graph can never store exactly one",
                          {"check": "cannot close", "pending": pending, "remaining": remaining,
                           "claim": "no_equivalent"})
        if OPS[fam.kind].category == "accum" and sum(
                1 for op in fam.block.ops if op.inputs == (names[0],)
                and OPS[op.kind].category == "accum") > 1:
            return Pruned("structural", f"{names[0]} is accumulated a second time (double "
                          "reduction): one accumulator and a post-loop op compute it",
                          {"check": "double reduction", "tensor": names[0],
                           "claim": "not_better"})
    if fam.level == "open" and fam.block is not None:
        k, cfg = fam.kernel, ctx.config
        last = k.kernels + 1 >= cfg.max_kernel_ops or (
            k.custom + 1 >= cfg.max_custom_kernels and not cfg.kernel_ops)
        by_name = {t.name: t for t in k.tensors}
        reached = set().union(*(leaves(by_name[s].term) for s in fam.block.sources))
        missing = sorted(ctx.needed_inputs - reached)
        if last and missing:
            return Pruned("structural", f"the last kernel the caps allow reads "
                          f"{', '.join(fam.block.sources)}, but the target also needs "
                          f"{', '.join(missing)}", {"check": "dead end", "missing": missing,
                                                    "claim": "no_equivalent"})
    if fam.level in ("close", "kernel") and fam.new is not None and \
            ctx.last_kernel(fam.kernel) and ctx.output_index(fam.new) is None:
        return Pruned("structural", f"no kernel can follow (caps) and {fam.new.name} = "
                      f"{fam.new.term} is not the target",
                      {"check": "dead end", "expression": str(fam.new.term),
                       "claim": "no_equivalent"})
    return None


def abstract_expression(ctx: Context, fam: Family) -> Pruned | None:
    if fam.new is None or fam.level == "open":
        return None
    if ctx.target.lookup(fam.new.term) is not None:
        return None
    limit = "" if ctx.target.saturated else \
        f" (the e-graph stopped at its {ctx.target.report.stop_reason})"
    return Pruned("abstract_expression",
                  f"{fam.new.name} = {fam.new.term} is not a subexpression of the target under "
                  f"the axioms{limit}",
                  {**ctx.target.evidence(fam.new.term), "claim": "no_equivalent"})


def leaves(term: Term) -> set[str]:
    return {t.head for _, t in term.subterms() if not t.args}


_NEEDS_SMEM_OR_TILES = frozenset({"matmul", "binary", "reduce", "norm", "accum"})


def hardware(ctx: Context, fam: Family) -> Pruned | None:
    # Infeasibility only grows with a family (every op adds constraints), so checking a block
    # graph once, when it is closed, prunes every program an earlier check would have; z3 is
    # called once per block graph rather than once per op (`every_op` checks each op that adds
    # a tile to shared memory or a matmul, pruning earlier at more z3 calls).
    if fam.level == "block":
        if not ctx.config.hardware_every_op or fam.kind == "nored" or \
                OPS[fam.kind].category not in _NEEDS_SMEM_OR_TILES:
            return None
    elif fam.level != "close":
        return None
    verdict = check_hardware(fam.graph, ctx.config.device, timeout_ms=5000)
    if verdict.feasible is False:
        return Pruned("hardware", verdict.reason, {"unsat_core": list(verdict.core),
                                                    "device": _device_json(ctx),
                                                    "claim": "no_feasible"})
    return None


def _device_json(ctx: Context) -> dict[str, int]:
    d = ctx.config.device
    return {"smem_bytes": d.smem_bytes, "max_blocks": d.max_blocks,
            "min_matmul_tile": d.min_matmul_tile, "dtype_bytes": d.dtype_bytes}


def cost_bound(ctx: Context, fam: Family) -> Pruned | None:
    if fam.level not in ("close", "kernel") or ctx.incumbent_us is None:
        return None
    from prism.cost import lower_bound_us
    bound = lower_bound_us(fam.graph, ctx.cost_device)
    if bound <= ctx.incumbent_us:
        return None
    return Pruned("cost_bound",
                  f"every program of this family takes ≥ {bound:.2f} µs (modeled, "
                  f"{ctx.cost_device.name}); candidate {ctx.incumbent_id} takes "
                  f"{ctx.incumbent_us:.2f} µs",
                  {"lower_bound_us": bound, "incumbent_us": ctx.incumbent_us,
                   "incumbent": ctx.incumbent_id, "device": ctx.cost_device.name,
                   "claim": "not_better"})


RULES: dict[str, Rule] = {
    "structural": structural,
    "abstract_expression": abstract_expression,
    "hardware": hardware,
    "cost_bound": cost_bound,
}
