"""The pruning rules: a table of named entries, one check and one claim each.

A rule looks at a *family* just generated (a partial sGraph: every completion of it is in the
family) and either lets it be or prunes it with a `Pruned(rule, reason, evidence)` whose
`evidence["claim"]` says what the prune asserts of every completion. Rules are data: `RULES` in
order of cost, each switchable off by name (`SearchConfig.disabled`), each audited by name
(`prism search --audit-rule NAME`, `prism.search.audit`).

    cannot_close         no_equivalent  more tensors wait for a consumer than the op cap leaves
                                        ops for: the block graph can never store them
                                        (at most `max_block_outputs`, default one)
    dead_end_inputs      no_equivalent  the last kernel the caps allow cannot read an input
                                        the target's remaining outputs depend on
    dead_end_output      no_equivalent  no kernel can follow and the kernel tensor just made
                                        is no target output (read in the target's e-graph)
    abstract_expression  no_equivalent  the new tensor is not a subexpression of the target
                                        under the axioms (`prism.search.abstract`)
    out_of_reach         no_equivalent  in the last kernel the caps allow, a tensor waiting
                                        for a consumer is further from the target's output in
                                        its e-graph than the ops left can go, or the waiting
                                        tensors together need more ops on their ways to the
                                        one stored tensor than are left (`reach_miss`,
                                        `ops_needed`), or one of them does once the other
                                        operands its way reads are built too, or the output
                                        itself takes more ops to build from what the block
                                        graph holds (`prism.search.completion`)
    hardware             no_feasible    no assignment of grid sizes, loop range and map bits
                                        fits the device (z3; the unsat core is the evidence)
    cost_bound           not_better     a lower bound of the family's modeled latency over
                                        every assignment exceeds the best verified candidate's

The two rules that read the target's e-graph claim `no_equivalent` only when that e-graph
saturated; otherwise the same decision is taken with the claim `unproven` (the family is set
aside, counted apart, and the search is not exhaustive: `SearchResult.set_aside`).

Caps (ops, accumulators, kernels) bound what is generated at all; they are not pruning. Nor is
the canonical order (`prism.search.generate`), which already never builds the same op on the
same operands twice, so no rule needs to prune a duplicate tensor.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from prism.expr.terms import Term
from prism.ir.graph import KernelGraph
from prism.ir.ops import OPS
from prism.search.completion import Completion
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
    shape_outputs: bool = False      # complete by shape, not by abstract expression
    observed: str | None = None      # the rule an audit evaluates without enforcing it
    # assignments that fitted the device in earlier families (`check_hardware`'s witnesses)
    witnesses: list[dict[str, int]] = field(default_factory=list)
    # which members of a complete family (its kernel state, its members) may be equivalent:
    # the verifier's checks before a proof, which the driver keeps for the family's
    # completion. What `members_bound_us` bounds; None: every member counts
    screen: Callable[[KernelState, list[KernelGraph]], list[bool]] | None = None

    def output_index(self, tensor: Tensor) -> int | None:
        """Which target output a kernel tensor may be. With the abstract-expression rule on,
        the one whose expression equals it under the axioms; with it off (or audited), any
        output of the same shape — the verifier alone decides, so an audit of that rule does
        not lean on the e-graph it audits. Partial sums (`Tensor.split`) are no output."""
        if tensor.split:
            return None
        if self.shape_outputs:
            shapes = self.target.output_shapes
            return next((i for i, s in enumerate(shapes) if s == tensor.shape), None)
        return self.target.output_index(tensor.term)

    def outputs(self, kernel: KernelState) -> tuple[int, ...] | None:
        """The kernel tensors that compute the target's outputs (latest first), if all do."""
        found: dict[int, int] = {}
        for i in range(len(kernel.tensors) - 1, kernel.num_inputs - 1, -1):
            k = self.output_index(kernel.tensors[i])
            if k is not None and k not in found:
                found[k] = i
        n = len(self.target.roots)
        return tuple(found[k] for k in range(n)) if len(found) == n else None

    @cached_property
    def arity(self) -> int:
        """The most operands an op this search tries reads (`ops_needed`)."""
        return max_arity(_reach_kinds(self.config))

    @cached_property
    def completion(self) -> Completion:
        """The target's e-graph as the sibling bounds read it (`prism.search.completion`)."""
        return self.target.completion(_reach_kinds(self.config))

    def held(self, block: BlockState) -> frozenset[int]:
        """The classes of the tensors `block` holds, as `completion` numbers them."""
        lookup = self.target.lookup
        return self.completion.classes_of(lookup(t.term) for t in block.tensors)

    @cached_property
    def reach(self) -> dict[int, int]:
        """Each class's distance to the target's outputs in the block ops this search tries
        (`AbstractTarget.reach`)."""
        return self.target.reach(_reach_kinds(self.config))

    def last_kernel(self, kernel: KernelState) -> bool:
        """No kernel can follow the one just finished (or being built)."""
        cfg = self.config
        return (kernel.kernels >= cfg.max_kernel_ops
                or (kernel.custom >= cfg.max_custom_kernels and not cfg.kernel_ops))


Rule = Callable[[Context, Family], Pruned | None]


def cannot_close(ctx: Context, fam: Family) -> Pruned | None:
    # Each op adds one tensor and consumes at most two, so it lowers the count of tensors
    # waiting for a consumer by at most one; a block graph stores every one of them, and
    # stores at most `max_block_outputs`.
    if fam.level != "block" or fam.block is None:
        return None
    return cannot_close_counts(ctx, fam.block.compute_ops, len(fam.block.open_tensors))


def cannot_close_counts(ctx: Context, compute_ops: int, pending: int) -> Pruned | None:
    """`cannot_close` on a block graph of `compute_ops` ops with `pending` tensors waiting."""
    remaining = ctx.config.max_block_ops - compute_ops
    if pending - ctx.config.max_block_outputs <= remaining:
        return None
    return Pruned("cannot_close", f"{pending} tensors wait for a consumer but only {remaining} "
                  f"more op(s) fit the cap of {ctx.config.max_block_ops}: the block graph can "
                  f"never be left with at most {ctx.config.max_block_outputs} to store",
                  {"pending": pending, "remaining": remaining, "claim": "no_equivalent"})


def dead_end_inputs(ctx: Context, fam: Family) -> Pruned | None:
    if fam.level != "open" or fam.block is None:
        return None
    k, cfg = fam.kernel, ctx.config
    last = k.kernels + 1 >= cfg.max_kernel_ops or (
        k.custom + 1 >= cfg.max_custom_kernels and not cfg.kernel_ops)
    if not last:
        return None
    # The last kernel makes one tensor: one of the outputs no kernel has made yet (an output
    # already made needs nothing more). So it needs the inputs common to those outputs, and it
    # reads only what its sources were computed from.
    needed = _still_needed(ctx, k)
    by_name = {t.name: t for t in k.tensors}
    reached = set().union(*(leaves(by_name[s].term) for s in fam.block.sources))
    missing = sorted(needed - reached)
    if not missing:
        return None
    return Pruned("dead_end_inputs", f"the last kernel the caps allow reads "
                  f"{', '.join(fam.block.sources)}, but the target also needs "
                  f"{', '.join(missing)}", {"missing": missing, "claim": "no_equivalent"})


def _still_needed(ctx: Context, kernel: KernelState) -> set[str]:
    made = {ctx.output_index(t) for t in kernel.tensors[kernel.num_inputs:]}
    todo = [t for i, t in enumerate(ctx.target.terms) if i not in made]
    if not todo:
        return set()
    return set.intersection(*(leaves(t) for t in todo)) & ctx.needed_inputs


def dead_end_output(ctx: Context, fam: Family) -> Pruned | None:
    if fam.level not in ("close", "kernel") or fam.new is None or \
            not ctx.last_kernel(fam.kernel):
        return None
    # While another e-graph rule is audited (or off), outputs are told by shape, a proof that
    # does not lean on the e-graph; audited itself, this rule reads the e-graph as it would.
    if ctx.shape_outputs and ctx.observed != "dead_end_output":
        if ctx.output_index(fam.new) is not None:
            return None
        return Pruned("dead_end_output", f"no kernel can follow (caps) and {fam.new.name} has "
                      "no target output's shape", {"shape": str(fam.new.shape),
                                                   "claim": "no_equivalent"})
    if ctx.target.output_index(fam.new.term) is not None:
        return None
    return Pruned("dead_end_output", f"no kernel can follow (caps) and {fam.new.name} = "
                  f"{fam.new.term} is not a target output{_limit_note(ctx)}",
                  {**ctx.target.evidence(fam.new.term), "claim": egraph_claim(ctx)})


def egraph_claim(ctx: Context) -> str:
    """`no_equivalent` when the target's e-graph saturated (a miss is then a proof relative to
    the axioms); `unproven` when it stopped at a limit (it may not have reached the term)."""
    return "no_equivalent" if ctx.target.saturated else "unproven"


def _limit_note(ctx: Context) -> str:
    if ctx.target.saturated:
        return ""
    return (f" (unproven: the target's e-graph stopped at its {ctx.target.report.stop_reason}, "
            "so the family is set aside, not proven useless)")


def abstract_expression(ctx: Context, fam: Family) -> Pruned | None:
    if fam.new is None or fam.level == "open":
        return None
    return abstract_miss(ctx, fam.new.name, fam.new.term)


def abstract_miss(ctx: Context, name: str, term: Term) -> Pruned | None:
    """`abstract_expression` on a new tensor `name` whose abstract expression is `term`."""
    if ctx.target.lookup(term) is not None:
        return None
    return Pruned("abstract_expression",
                  f"{name} = {term} is not a subexpression of the target under "
                  f"the axioms{_limit_note(ctx)}",
                  {**ctx.target.evidence(term), "claim": egraph_claim(ctx)})


def out_of_reach(ctx: Context, fam: Family) -> Pruned | None:
    if fam.level != "block" or fam.block is None:
        return None
    block = fam.block
    return reach_miss(ctx, fam.kernel, block.compute_ops,
                      [(block.tensors[i].name, block.tensors[i].term)
                       for i in block.open_tensors], lambda: ctx.held(block))


def reach_applies(ctx: Context, kernel: KernelState) -> bool:
    """Whether `out_of_reach` reads a block graph opened on `kernel`: it is the last kernel the
    caps allow and stores one tensor, which must then be a target output (`dead_end_output`),
    so every tensor waiting in it ends inside that output's term."""
    if ctx.shape_outputs and ctx.observed != "out_of_reach":
        return False        # the e-graph rules are off: outputs are told by shape
    return ctx.config.max_block_outputs == 1 and ctx.last_kernel(
        replace(kernel, kernels=kernel.kernels + 1, custom=kernel.custom + 1))


def reach_miss(ctx: Context, kernel: KernelState, compute_ops: int,
               pending: list[tuple[str, Term]],
               held: Callable[[], frozenset[int]] | None = None, slack: int = 0
               ) -> Pruned | None:
    """`out_of_reach` on a block graph of `compute_ops` ops whose waiting tensors are
    `pending`. Each waiting tensor is consumed on the way to the one stored tensor, so its
    term is a subterm of that tensor's term, which is a target output; in the target's
    e-graph its class is then at most as far from an output class as the ops that follow it
    (`AbstractTarget.reach`). A tensor whose class is further than the ops left under the cap
    ends no program. A term the e-graph lacks is left to `abstract_expression`.

    With `held` (the classes the block graph holds, `Context.held`; with `slack` 1 those it
    held before its newest op), the sibling bounds of `prism.search.completion` too: the
    output's height over what is held, and each waiting tensor's chain bound."""
    if not reach_applies(ctx, kernel):
        return None
    found = _distance_miss(ctx, compute_ops, pending)
    if found is not None or held is None:
        return found
    return _sibling_miss(ctx, compute_ops, pending, held(), slack)


def _distance_miss(ctx: Context, compute_ops: int, pending: list[tuple[str, Term]]
                   ) -> Pruned | None:
    remaining = ctx.config.max_block_ops - compute_ops
    reach = ctx.reach
    far, farthest = -1, None
    spread: list[int] = []
    for name, term in pending:
        cls = ctx.target.lookup(term)
        if cls is None:     # a leaf all the same, at least 0 ops from the output
            spread.append(0)
            continue
        d = reach.get(cls, BELOW_NONE)
        spread.append(d)
        if d > far:
            far, farthest = d, (name, term)
    if farthest is None or far <= remaining:
        # a chain of binary ops over them, then the farthest one's distance, is some program's
        # way: within the ops left, the count together can prune nothing (and is not computed)
        if max(spread, default=0) + len(spread) - 1 <= remaining or \
                ops_needed(spread, ctx.arity) <= remaining:
            return None
        return _together(ctx, pending, spread, remaining)
    name, term = farthest
    how_far = "below no output" if far == BELOW_NONE else f"{far} op(s) from the output"
    return Pruned("out_of_reach",
                  f"{name} = {term} waits for a consumer, and in the "
                  f"target's e-graph it is {how_far}, but only {remaining} "
                  f"more fit the cap of {ctx.config.max_block_ops}{_limit_note(ctx)}",
                  {**ctx.target.evidence(term), "tensor": name,
                   "distance": None if far == BELOW_NONE else far, "remaining": remaining,
                   "cap": ctx.config.max_block_ops,
                   "ops": _ops_tried(ctx),
                   "claim": egraph_claim(ctx)})


def _sibling_miss(ctx: Context, compute_ops: int, pending: list[tuple[str, Term]],
                  held: frozenset[int], slack: int) -> Pruned | None:
    """`out_of_reach` by the sibling bounds (`prism.search.completion`)."""
    remaining = ctx.config.max_block_ops - compute_ops
    completion = ctx.completion
    if completion.output_height(held) - slack > remaining:
        return Pruned("out_of_reach",
                      f"no target output can be built from the {len(held)} classes the block "
                      f"graph holds (and the inputs) in the {remaining} op(s) left under the "
                      f"cap of {ctx.config.max_block_ops}{_limit_note(ctx)}",
                      {**{k: v for k, v in ctx.target.evidence(ctx.target.terms[0]).items()
                          if k != "expression"}, "tensor": None,
                       **_sibling_evidence(ctx, remaining)})
    for name, term in pending:
        cls = ctx.target.lookup(term)
        if cls is None or completion.fits(held, completion.number_of(cls), remaining, slack):
            continue
        return Pruned("out_of_reach",
                      f"{name} = {term} waits for a consumer, and on every way from it to the "
                      f"output in the target's e-graph the ops on the way, with those that "
                      f"must build the other operands the way reads from what the block graph "
                      f"holds, are more than the {remaining} left under the cap of "
                      f"{ctx.config.max_block_ops}{_limit_note(ctx)}",
                      {**ctx.target.evidence(term), "tensor": name,
                       **_sibling_evidence(ctx, remaining)})
    return None


def _sibling_evidence(ctx: Context, remaining: int) -> dict[str, Any]:
    return {"remaining": remaining, "cap": ctx.config.max_block_ops, "siblings": True,
            "ranks": list(ctx.target.ranks), "ops": _ops_tried(ctx),
            "claim": egraph_claim(ctx)}


def _ops_tried(ctx: Context) -> list[list[Any]]:
    """The ops the search tries, each with each attribute set (what a checker re-reads)."""
    return [[kind, attrs] for kind in _reach_kinds(ctx.config)
            for attrs in ctx.target.choices(kind)]


BELOW_NONE = 1 << 30      # a class in no output's term: no number of ops reaches an output


def _together(ctx: Context, pending: list[tuple[str, Term]], spread: list[int],
              remaining: int) -> Pruned:
    """`out_of_reach` when no one waiting tensor is too far, but all of them together are."""
    needed = ops_needed(spread, ctx.arity)
    shown = ", ".join(f"{name} {d}" for (name, _), d in zip(pending, spread, strict=True))
    return Pruned("out_of_reach",
                  f"{len(pending)} tensors wait for a consumer, at these numbers of ops from "
                  f"the output in the target's e-graph: {shown}; on their ways to the one "
                  f"stored tensor they need at least {needed} more ops together (an op takes "
                  f"at most {ctx.arity} of them), but only {remaining} more fit the cap of "
                  f"{ctx.config.max_block_ops}{_limit_note(ctx)}",
                  {**{k: v for k, v in ctx.target.evidence(pending[0][1]).items()
                      if k != "expression"},
                   "waiting": [[name, str(term), d]
                               for (name, term), d in zip(pending, spread, strict=True)],
                   "needed": needed, "arity": ctx.arity, "remaining": remaining,
                   "cap": ctx.config.max_block_ops,
                   "ops": _ops_tried(ctx),
                   "claim": egraph_claim(ctx)})


def max_arity(kinds: Iterable[str]) -> int:
    """The most operands an op of `kinds` reads (an op of any number of them: no limit)."""
    arities = [OPS[k].arity for k in kinds]
    return 1 << 20 if any(a < 0 for a in arities) else max(arities, default=1)


def ops_needed(distances: list[int], arity: int) -> int:
    """The fewest ops that carry tensors at these distances (in ops, from the output) to one
    stored tensor, when an op reads at most `arity` of the tensors and results on the way.

    The ops on the ways form a tree: each tensor's way to the stored one is a path through
    them, and picking one consumer per op on the ways leaves each op at most `arity` children.
    Number the ops by depth (the last op 1). A tensor at distance d has at least d ops above
    it, so its parent op is at depth ≥ d. With x_k the ops at depth ≥ k and n_k the tensors
    at distance ≥ k: the ops at depth ≥ k have as children every op at depth ≥ k + 1 and
    every tensor at distance ≥ k, so arity · x_k ≥ x_(k+1) + n_k; and below the deepest
    distance m there is an op at every depth, so x_k ≥ x_(k+1) + 1 for k ≤ m. Every op but
    the last is some op's child, and so is every tensor: arity · x_1 ≥ x_1 − 1 + (tensors).
    These bound x_1, all the ops, from below; with every distance 0 and arity 2 the bound is
    `cannot_close`'s (tensors − 1), with one tensor the distance (`out_of_reach`'s)."""
    if not distances:
        return 0
    if arity < 2:
        return BELOW_NONE if len(distances) > 1 else max(distances)
    x = 0
    for k in range(max(distances), 0, -1):
        n = sum(1 for d in distances if d >= k)
        x = max(x + 1, -(-(x + n) // arity))
    return max(x, -(-(len(distances) - 1) // (arity - 1)))


def _reach_kinds(config: Any) -> tuple[str, ...]:
    return (*config.block_ops, *config.accumulators)


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
    verdict = check_hardware(fam.graph, ctx.config.device, witnesses=ctx.witnesses)
    if verdict.feasible is False:
        return Pruned("hardware", verdict.reason, {"unsat_core": list(verdict.core),
                                                    "device": _device_json(ctx),
                                                    "claim": "no_feasible"})
    return None


def _device_json(ctx: Context) -> dict[str, object]:
    d = ctx.config.device
    return {"name": d.name, "smem_bytes": d.smem_bytes, "max_blocks": d.max_blocks,
            "min_matmul_tile": d.min_matmul_tile, "dtype_bytes": d.dtype_bytes}


def cost_bound(ctx: Context, fam: Family) -> Pruned | None:
    if fam.level not in ("close", "kernel") or ctx.incumbent_us is None:
        return None
    return cost_bound_prune(family_bound_us(fam, ctx), ctx.incumbent_us,
                            ctx.incumbent_id, ctx.config.device.name, ctx.screen is not None)


def family_bound_us(fam: Family, ctx: Context) -> float:
    """The modeled lower bound of every program of a close or kernel family: its kernels'
    (`lower_bound_us`), and, in a search of several custom kernels, while some target output
    is computed by none of them, the kernel that must still write it (`next_kernel_us`). The
    second term is what makes the rule bite there: a first kernel that is not the whole
    program costs a launch more than any one-kernel program. It is sound in every search; a
    search of one custom kernel and pre-defined kernel ops does not add it yet (it would cut
    notebook 03's search from 3,154 families to 658, whose text and oracles are written for
    the former).

    With `SearchConfig.member_bound`, a close family of a one-kernel search that computes
    every target output is one program (nothing follows it: `Generator.kernel_level`), and its
    bound is its members' that may be equivalent (`members_bound_us`)."""
    from prism.cost import lower_bound_us, next_kernel_us
    device = ctx.config.device
    if ctx.config.max_custom_kernels < 2:
        bound = lower_bound_us(fam.graph, device)
        if ctx.config.member_bound and fam.level == "close":
            outputs = ctx.outputs(fam.kernel)
            if outputs is not None:
                bound = max(bound, members_bound_us(fam.kernel, outputs, ctx))
        return bound
    kernel = fam.kernel
    done = {ctx.output_index(t) for t in kernel.tensors[kernel.num_inputs:]}
    missing = [tuple(d.value for d in shape)
               for i, shape in enumerate(ctx.target.output_shapes) if i not in done]
    return lower_bound_us(fam.graph, device) + next_kernel_us(missing, device)


MAP_LIMIT = 512     # concrete-map members verified per complete family


def members_bound_us(kernel: KernelState, outputs: tuple[int, ...], ctx: Context) -> float:
    """The least modeled latency any equivalent program of a complete family can reach, over
    the members the search verifies (its map instantiations): each
    member's best assignment over the tuner's sizes (`audit.best_assignment`, the number an
    incumbent is). A member that `ctx.screen` shows not equivalent (the spec check or the
    verifier's quick trial: a counterexample) is left out, and so is one that fits the device
    at no assignment (no program). A family none of whose members is left is bounded by 0:
    the verifier decides its members, each with its counterexample, and the family is no
    `not_better` prune. So is a family of `MAP_LIMIT` members or more: the search verifies
    only its first `MAP_LIMIT` (and says so), and a bound over those would claim more than
    was read.
    When the split move (`SearchConfig.split_loops`, which moves proved members only) makes a
    program of a member left, the family's memory floor instead (`memory_floor_us`: one
    launch and its kernel tensors once over HBM), below what any program the move makes
    costs: it reads the member's inputs and writes its outputs, in one kernel or two."""
    from prism.cost import memory_floor_us
    from prism.search.audit import best_assignment
    from prism.search.maps import instantiate
    graph = kernel.graph(outputs, name="bound")
    device = ctx.config.device
    fixed = ctx.config.concrete & {"imap", "fmap", "omap"}
    members = list(instantiate(graph, kernel.equalities, limit=MAP_LIMIT, fixed=fixed))
    if len(members) >= MAP_LIMIT:   # perhaps more than were read: no claim about the rest
        return 0.0
    if ctx.screen is not None:
        members = [m for m, may in zip(members, ctx.screen(kernel, members), strict=True)
                   if may]
    if ctx.config.split_loops and any(_moved(m) for m in members):
        # the members share their kernel tensors, so this floor is the family's (and below
        # `lower_bound_us`, which adds FLOPs): the bound says nothing more
        return memory_floor_us(graph, device)
    bests = [best[0] for best in (best_assignment(m, device) for m in members) if best]
    return min(bests, default=0.0)


def _moved(member: KernelGraph) -> bool:
    """Whether one of the split pass's moves makes a program of this member."""
    from prism.search.split import split_loop, split_softmax, stream_softmax
    return any(move(member)[0] is not None
               for move in (split_loop, stream_softmax, split_softmax))


def cost_bound_prune(bound: float, incumbent_us: float, incumbent_id: str | None,
                     device: str, screened: bool = False) -> Pruned | None:
    """`cost_bound`'s decision on a family whose programs take ≥ `bound` µs (`screened`: those
    of its programs the verifier does not show not equivalent before a proof, the member
    bound's)."""
    if bound <= incumbent_us:
        return None
    which = "that may be equivalent (the others fail the spec check or a random trial) " \
        if screened else ""
    return Pruned("cost_bound",
                  f"every program of this family {which}takes ≥ {bound:.2f} µs (modeled, "
                  f"{device}); candidate {incumbent_id} takes {incumbent_us:.2f} µs",
                  {"lower_bound_us": bound, "incumbent_us": incumbent_us,
                   "incumbent": incumbent_id, "device": device, "claim": "not_better"})


RULES: dict[str, Rule] = {
    "cannot_close": cannot_close,
    "dead_end_inputs": dead_end_inputs,
    "dead_end_output": dead_end_output,
    "abstract_expression": abstract_expression,
    "out_of_reach": out_of_reach,
    "hardware": hardware,
    "cost_bound": cost_bound,
}
