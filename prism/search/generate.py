"""Level 1: depth-first generation of symbolic families, one operator at a time.

At kernel level a node adds a kernel: a custom kernel (choose its inputs among the kernel
tensors and its number of grid dims, then build its block graph) or, when the vocabulary allows,
a pre-defined kernel op. Inside a block graph a node adds one block op or accumulator, or closes
the block (its unconsumed tensors, all post-loop and at most `max_block_outputs` of them, are
stored through symbolic omaps). Grid sizes,
the loop range and every map entry stay symbolic; shapes match symbolically (`dims_match`) and
each match is recorded as an `Equality`.

Canonical order: an op's key is (its operands' indices, largest first; its kind's index in the
canonical vocabulary; its operands in order), and a node only adds ops whose key exceeds the key
of the op added before it. An op that consumes another's result has the larger first index, so
every program is reachable, and a set of independent ops is added in one order only. The order
in which a node *tries* its extensions changes which programs come first, not which exist: for
seed 0 accumulators first, then block ops, each in vocabulary order; a shuffle of that for any
other seed, drawn per node from the seed and the node itself (not from a stream that every
earlier node advanced), so a subtree is ordered the same wherever it runs. Deterministic for a
given seed.

A search on an executor (`prism.search.executors`) cuts the tree where a custom kernel's block
graph has `split_depth` block ops: with `Callbacks.split` set, such a family is handed over (a
task) instead of descended into, and the task later runs `block_level` from it elsewhere.

In the concrete mode (`SearchConfig.concrete`, `prism.search.concrete`) opening a custom kernel
makes one family per concrete choice of its sizes and input maps, and closing it one per
output map, as Mirage's search does; the ops in between are generated under each.

Several kernels (`max_custom_kernels` ≥ 2): a block may also close with a *split*: grid dim 0
splits a sum, each block stores its partial sums, concatenated along the last dim (the kernel
tensor's last dim is the data dim times that grid size; `Tensor.split`), and the next kernel, a
custom one, reads them and sums them with `redtox_ld_sum` (chunks of the stored width) or
`red_ld_sum` (a last dim of 1) before anything else reads them: split-key attention as in
Mirage's gqa μGraphs, two launches. A kernel tensor nothing reads ends no program, the last
kernel reads every such tensor, and a non-last kernel never stores a copy of an input. Custom
kernels reading most inputs are tried first, so one-kernel programs come early.

Every node is a `Family`; `Generator.visit` hands it to the rules (`prism.search.pruning`) and the
driver hears every decision through its callbacks.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from prism.errors import PrismError, ShapeError
from prism.expr.terms import Term
from prism.ir.dims import dim
from prism.ir.graph import Map
from prism.ir.ops import OPS, data_dim
from prism.search.concrete import OPEN_PARAMS, OpenChoice, omap_choices, open_choices
from prism.search.config import SearchConfig
from prism.search.order import ordered, resolve
from prism.search.pruning import (
    RULES,
    Context,
    Family,
    Pruned,
    abstract_expression,
    abstract_miss,
    cannot_close,
    cannot_close_counts,
    egraph_claim,
    out_of_reach,
    reach_miss,
)
from prism.search.state import BlockState, KernelState, Tensor

_ONE = dim(1)


class Stop(Exception):
    """The budget ran out or the search was cancelled: unwind, keep what was found."""


@dataclass
class Callbacks:
    generated: Callable[[Family], None]
    pruned: Callable[[Family, Pruned], None]
    complete: Callable[[Family, tuple[int, ...]], None]   # kernel tensors of the outputs
    should_stop: Callable[[], bool]
    observed: Callable[[Family, Pruned], None] | None = None  # audit: would have pruned
    # an executor's cut: (kernel, block, kernel key, family id) of a subtree to run as a task
    split: Callable[[KernelState, BlockState, tuple[object, ...], str], None] | None = None
    # (rule, family id prefix) → no one keeps or hears a family pruned by the rule: count it
    # generated and pruned, nothing built
    quiet: Callable[[str, str], bool] | None = None
    counted: Callable[[Pruned, str | None], None] | None = None   # (why, parent)


class Generator:
    def __init__(self, ctx: Context, config: SearchConfig, callbacks: Callbacks,
                 observe: str | None = None):
        self.ctx, self.cfg, self.cb = ctx, config, callbacks
        self.observe = observe                 # audit: evaluate this rule, do not enforce it
        self.count = 0
        self.id_prefix = "f"                   # a task numbers its families provisionally
        self.seen: set[tuple[object, ...]] = set()
        self.vocab = {k: i for i, k in enumerate((*config.block_ops, *config.accumulators))}
        self._extensions: dict[int, list[tuple[Any, ...] | None]] = {}
        self.kvocab = {k: i for i, k in enumerate(("customized", *config.kernel_ops))}
        self.marked: dict[str, str] = {}       # audit: family → the observed prune above it
        self.rules = (*RULES.items(), *config.rules)   # built-ins first, then the user's
        # Block ops decided before they are built (`_prejudge`), except when each family's
        # graph is recorded or an audit observes one of the two rules that decide them (an
        # audit of another rule never evaluates its rule on a family these prune: they come
        # first; the family still takes the mark of an observed prune above it).
        # The two rules must be the built-ins (a test or notebook may swap a rule in RULES).
        self.quick = observe not in ("cannot_close", "abstract_expression", "out_of_reach") \
            and not config.record_graphs and RULES.get("cannot_close") is cannot_close and \
            RULES.get("abstract_expression") is abstract_expression and \
            RULES.get("out_of_reach") is out_of_reach
        self.rank = resolve(config.order)      # None: the canonical order (`_order`'s)

    # -- driving ---------------------------------------------------------------------------

    def run(self, inputs: list[Tensor]) -> None:
        kernel = KernelState(tuple(inputs), (), len(inputs))
        self.kernel_level(kernel, None)

    def _order(self, items: list[object], *node: object) -> list[object]:
        if self.cfg.seed:
            items = list(items)
            # str seeds are hashed with sha512: the same order in every process
            random.Random(f"{self.cfg.seed}:{node!r}").shuffle(items)
        return items

    def _ranked(self, items: list[object], kernel: KernelState, block: BlockState | None
                ) -> list[object]:
        """The children in `SearchConfig.order`'s order (`prism.search.order`): the same
        children, permuted; as they are for the canonical order."""
        if self.rank is None:
            return items
        return ordered(self.rank, self.ctx, kernel, block, items)

    def new_id(self) -> str:
        self.count += 1
        return f"{self.id_prefix}{self.count}"

    def visit(self, fam: Family) -> bool:
        """Emit the family and run the rules; True when it survives."""
        if self.cb.should_stop():
            raise Stop
        self.cb.generated(fam)
        if fam.parent in self.marked:
            self.marked[fam.id] = self.marked[fam.parent]
        for name, rule in self.rules:
            if name in self.cfg.disabled and name != self.observe:
                continue
            if name == self.observe and fam.id in self.marked:
                continue
            try:
                pruned = rule(self.ctx, fam)
            except ShapeError:
                pruned = None
            if pruned is None:
                continue
            if name == self.observe:
                self.marked[fam.id] = fam.id
                if self.cb.observed is not None:
                    self.cb.observed(fam, pruned)
                continue
            self.cb.pruned(fam, pruned)
            return False
        return True

    # -- kernel level -------------------------------------------------------------------------

    def kernel_level(self, kernel: KernelState, parent: str | None) -> None:
        outputs = self._outputs(kernel)
        if outputs is not None and kernel.kernels:
            if self.cfg.max_custom_kernels > 1 and _unused(kernel, outputs):
                return      # a kernel tensor nothing reads: the program without it is found
            fam_id = parent or "root"
            self.cb.complete(Family(fam_id, parent, "kernel", "complete", "complete program",
                                    kernel, None, None), outputs)
            return
        if kernel.kernels >= self.cfg.max_kernel_ops:
            return
        for ext in self._ranked(self._order(list(self._kernel_extensions(kernel)), kernel.ops),
                                kernel, None):
            assert isinstance(ext, tuple)
            kind, operands, key, attrs = ext
            if kind == "customized":
                self._open_custom(kernel, operands, key, parent)
                continue
            try:
                child = kernel.with_kernel_op(kind, operands, key, attrs)
            except ShapeError:
                continue
            args = ", ".join(kernel.tensors[i].name for i in operands)
            fam = Family(self.new_id(), parent, "kernel", kind,
                         f"kernel op {child.tensors[-1].name} = {kind}({args}{_shown(attrs)})",
                         child, None, child.tensors[-1], operands)
            if self.visit(fam):
                self.kernel_level(child, fam.id)

    def _outputs(self, kernel: KernelState) -> tuple[int, ...] | None:
        """The kernel tensors that compute the target's outputs (latest first), if all do."""
        return self.ctx.outputs(kernel)

    def _kernel_extensions(self, kernel: KernelState) -> Iterator[tuple[object, ...]]:
        n = len(kernel.tensors)
        # Partial sums are summed by the next kernel, a custom one that reads them all; in a
        # search of several custom kernels, the last kernel the caps allow reads every kernel
        # tensor nothing reads yet.
        unused = set(_unused(kernel, ()))
        partial = {i for i in unused if kernel.tensors[i].split}
        last = self.cfg.max_custom_kernels > 1 and self.ctx.last_kernel(
            replace(kernel, kernels=kernel.kernels + 1, custom=kernel.custom + 1))
        required = unused if last else partial
        if kernel.custom < self.cfg.max_custom_kernels:
            sizes = range(1, min(self.cfg.max_block_inputs, n) + 1)
            if self.cfg.max_custom_kernels > 1:
                # Several kernels: the kernels reading most inputs first, so one-kernel
                # programs come early and their incumbent bounds the rest (`cost_bound`).
                sizes = sizes[::-1]
            for size in sizes:
                for operands in itertools.combinations(range(n), size):
                    key = (tuple(sorted(operands, reverse=True)), 0, operands)
                    if key <= kernel.last_key or not required <= set(operands):
                        continue
                    yield ("customized", operands, key, {})
        if partial:
            return                  # only a custom kernel sums partial sums
        for kind in self.cfg.kernel_ops:
            for a, attrs in enumerate(self.ctx.target.choices(kind)):
                for operands in _operand_tuples(kind, n):
                    if any(kernel.tensors[i].split for i in operands) or \
                            not required <= set(operands):
                        continue
                    op_key: tuple[object, ...] = (tuple(sorted(operands, reverse=True)),
                                                  self.kvocab[kind], operands, a)
                    if op_key > kernel.last_key:
                        yield (kind, operands, op_key, attrs)

    # -- block level --------------------------------------------------------------------------

    def _open_custom(self, kernel: KernelState, operands: tuple[int, ...],
                     key: tuple[object, ...], parent: str | None) -> None:
        # The block graph is built with one grid dim; the number of grid dims (1-3) changes
        # no shape match (they are decided with every size 1) and no abstract expression, so
        # it is chosen when the block closes: one family per count, replayed from the ops.
        # In the concrete mode, one family per choice of what the config makes concrete.
        sources = [kernel.tensors[i] for i in operands]
        names = ", ".join(s.name for s in sources)
        choices: Iterable[OpenChoice | None] = [None]
        if self.cfg.concrete & OPEN_PARAMS:    # lazily: there may be millions
            choices = open_choices([s.shape for s in sources], self.cfg)
        for choice in choices:
            try:
                block = BlockState.open(kernel.custom, (choice.grid_dims or 1) if choice else 1,
                                        sources, choice)
            except ShapeError:
                continue
            what = "symbolic grid, loop and maps" if choice is None else \
                choice.describe([s.name for s in sources])
            fam = Family(self.new_id(), parent, "open", "customized",
                         f"custom kernel on {names}, {what}", kernel, block, None, operands)
            if self.visit(fam):
                self.block_level(kernel, block, key, fam.id)

    def block_level(self, kernel: KernelState, block: BlockState, kernel_key: tuple[object, ...],
                    parent: str) -> None:
        self._try_close(kernel, block, kernel_key, parent)
        if block.compute_ops >= self.cfg.max_block_ops:
            return
        held = _Once(lambda: self.ctx.held(block))     # what the children's ops may read
        for ext in self._ranked(self._order(list(self._block_extensions(block)), kernel.ops,
                                            block.signature()), kernel, block):
            assert isinstance(ext, tuple)
            kind, operands, key, attrs = ext
            accumulator = OPS[kind].category == "accum"
            try:
                if self._prejudge(kernel, block, kind, operands, accumulator, attrs, parent,
                                  held):
                    continue
                child = block.extend(kind, operands, key, accumulator, attrs)
            except ShapeError:
                continue
            new = child.tensors[-1]
            args = ", ".join(block.tensors[i].name for i in operands)
            fam = Family(self.new_id(), parent, "block", kind,
                         f"block op {new.name} = {kind}({args}{_shown(attrs)})", kernel, child,
                         new, operands)
            if not self.visit(fam):
                continue
            if self.cb.split is not None and child.compute_ops == self.cfg.split_depth:
                self.cb.split(kernel, child, kernel_key, fam.id)
            else:
                self.block_level(kernel, child, kernel_key, fam.id)

    def _prejudge(self, kernel: KernelState, block: BlockState, kind: str,
                  operands: tuple[int, ...], accumulator: bool, attrs: dict[str, object],
                  parent: str, held: Callable[[], frozenset[int]]) -> bool:
        """Decide a block op's family before building it, when the first rule that would
        prune it is `cannot_close`, `abstract_expression` or `out_of_reach` (the rules that
        read only the op count, the waiting tensors and their abstract expressions, and what
        the block graph holds: here the parent's, `held`, one op short, so `out_of_reach`'s
        sibling bounds take a slack of 1 and the built family is decided again in full): emit
        it generated and pruned exactly as `visit` would, and say True. Most families end so,
        and building their states was most of the search's time. True also when the op does
        not fit (no family: `extend` would raise ShapeError). Off when graphs are recorded or
        those rules audited. A family no one sees is counted by its rule and claim alone: the
        words of its reason are not written."""
        found = block.try_probe(kind, operands, accumulator, attrs)
        if isinstance(found, str):
            return True                 # it does not fit: no family (as `extend` would say)
        if not self.quick:
            return False
        shape, term = found
        pruned: Pruned | None = None
        if "cannot_close" not in self.cfg.disabled:
            pruned = cannot_close_counts(self.ctx, block.compute_ops + 1,
                                         block.pending_after(operands))
        name = block.name_of(kind)
        if pruned is None and "abstract_expression" not in self.cfg.disabled and \
                self.ctx.target.lookup(term) is None:
            if self._quiet(parent, "abstract_expression"):
                return self._count_quietly(Pruned("abstract_expression", "", {
                    "claim": egraph_claim(self.ctx)}), parent)
            pruned = abstract_miss(self.ctx, name, term)
        if pruned is None and "out_of_reach" not in self.cfg.disabled:
            pruned = reach_miss(self.ctx, kernel, block.compute_ops + 1, [
                *((block.tensors[i].name, block.tensors[i].term) for i in block.open_tensors
                  if i not in operands), (name, term)], held, 1)
        if pruned is None:
            return False
        if self._quiet(parent, pruned.rule):
            return self._count_quietly(pruned, parent)
        if self.cb.should_stop():
            raise Stop
        args = ", ".join(block.tensors[i].name for i in operands)
        fam = Family(self.new_id(), parent, "block", kind,
                     f"block op {name} = {kind}({args}{_shown(attrs)})", kernel, None,
                     Tensor(name, shape, term, accumulator or any(
                         block.tensors[i].post for i in operands)), operands)
        self.cb.generated(fam)
        if parent in self.marked:       # an audit counts it among those explored under a prune
            self.marked[fam.id] = self.marked[parent]
        self.cb.pruned(fam, pruned)
        return True

    def _quiet(self, parent: str, rule: str) -> bool:
        """Whether a family pruned by `rule` under `parent` is only counted: no one keeps or
        hears its events, and no audit explores under a prune above it."""
        return self.cb.quiet is not None and self.cb.counted is not None and \
            parent not in self.marked and self.cb.quiet(rule, self.id_prefix)

    def _count_quietly(self, pruned: Pruned, parent: str) -> bool:
        """Count a pruned family without building it (`_quiet`); True, as `_prejudge`."""
        if self.cb.should_stop():
            raise Stop
        assert self.cb.counted is not None
        self.count += 1                 # its id, unbuilt: the next family's stays the same
        self.cb.counted(pruned, parent)
        return True

    def _block_extensions(self, block: BlockState) -> Iterator[tuple[object, ...]]:
        tensors = block.tensors
        sums_splits = any(t.split for t in tensors[:len(block.sources)])
        last_key, full = block.last_key, block.accumulators >= self.cfg.max_accumulators
        for item in self._extensions_of(len(tensors)):
            if item is None:            # `redtox_ld_sum`: its chunk width, the split tile's
                if not full:
                    yield from self._redtox_extensions(block)
                continue
            kind, attrs, operands, key, accumulator = item
            if key <= last_key:
                continue
            if accumulator and (full or any(tensors[i].post for i in operands) or (
                    kind != "nored" and tensors[operands[0]].shape[-1] == _ONE)):
                # never after the loop; never reduce a last dim of 1. (Operands after the
                # loop may mix with pre-loop ones in an epilogue: a bias or a residual, which
                # the state then requires to be loop-invariant.)
                continue
            if sums_splits and not _sums_splits(kind, [tensors[i] for i in operands]):
                continue
            yield (kind, operands, key, attrs)

    def _extensions_of(self, n: int) -> list[tuple[Any, ...] | None]:
        """Every op the vocabulary could add to a block graph of `n` tensors, in the order of
        trying, as (kind, attrs, operands, key, accumulator); None where `redtox_ld_sum` goes.
        What `_block_extensions` then checks against the block is all that depends on it.
        Accumulators are tried first: every block graph stores a post-loop tensor, so the
        programs that close soonest are reached soonest (the order of trying, not the
        canonical order, which stays the vocabulary's). Made once per `n`."""
        found = self._extensions.get(n)
        if found is None:
            found = []
            for kind in (*self.cfg.accumulators, *self.cfg.block_ops):
                if kind == "redtox_ld_sum":
                    found.append(None)
                    continue
                accumulator = OPS[kind].category == "accum"
                for a, attrs in enumerate(self.ctx.target.choices(kind)):
                    for operands in _operand_tuples(kind, n):
                        found.append((kind, attrs, operands, (
                            tuple(sorted(operands, reverse=True)), self.vocab[kind],
                            operands, a), accumulator))
            self._extensions[n] = found
        return found

    def _custom_may_follow(self, kernel: KernelState) -> bool:
        """Whether a custom kernel may follow the one `kernel` is closing (the caps)."""
        return kernel.custom + 1 < self.cfg.max_custom_kernels and \
            kernel.kernels + 1 < self.cfg.max_kernel_ops

    def _redtox_extensions(self, block: BlockState) -> Iterator[tuple[object, ...]]:
        """`redtox_ld_sum` on each split tile not yet summed, folding its last dim into chunks
        of the width each block stored: the sum of the partial sums."""
        for i, t in enumerate(block.tensors[:len(block.sources)]):
            width = data_dim(t.shape[-1])
            if i in block.consumed or not width.is_const or \
                    not _sums_splits("redtox_ld_sum", [t]):
                continue
            key = ((i,), self.vocab["redtox_ld_sum"], (i,), 0)
            if key > block.last_key:
                yield ("redtox_ld_sum", (i,), key, {"dimx": width.value})

    def _try_close(self, kernel: KernelState, block: BlockState, kernel_key: tuple[object, ...],
                   parent: str) -> None:
        pending = tuple(block.open_tensors)
        if not 1 <= len(pending) <= self.cfg.max_block_outputs or \
                not all(block.tensors[i].post for i in pending):
            return                      # the stored tensors: every one waiting, after the loop
        # The same block graph in the same kernel graph, reached by another order of its ops.
        signature = (kernel.ops, block.signature())
        if signature in self.seen:
            return
        self.seen.add(signature)
        if self._custom_may_follow(kernel) and any(
                not block.tensors[i].term.args and self.ctx.output_index(block.tensors[i])
                is None for i in pending):
            return      # it stores a copy of an input: read the input instead, one kernel less
        sources = [next(t for t in kernel.tensors if t.name == s) for s in block.sources]
        fixed = block.choice is not None and block.choice.grid_dims is not None
        names = ", ".join(block.tensors[i].name for i in pending)
        for k in ((len(block.grid),) if fixed else self.cfg.grid_dims):
            try:        # the grid dims fixed at the open: the block as it is
                replayed = block if fixed else block.replay(k, sources)
            except PrismError:
                continue
            for child, omap, split in self._closes(kernel, replayed, sources, pending,
                                                   kernel_key):
                made = child.tensors[len(child.tensors) - len(pending):]
                stored = ", ".join(t.name for t in made)
                how = "symbolic omap" if omap is None else f"omap {omap}"
                if split is not None:
                    how = (f"partial sums over grid dim {split} ({replayed.grid[split]}), "
                           "concatenated along the last dim")
                fam = Family(self.new_id(), parent, "close", "customized",
                             f"store {names} as kernel tensor{'s' if len(made) > 1 else ''} "
                             f"{stored}, {k} grid dim(s), {how}", child, None, made[-1])
                if self.visit(fam):
                    self.kernel_level(child, fam.id)

    def _closes(self, kernel: KernelState, replayed: BlockState, sources: list[Tensor],
                outputs: tuple[int, ...], kernel_key: tuple[object, ...]
                ) -> Iterator[tuple[KernelState, Map | None, int | None]]:
        """The kernel graphs with the block closed: one with symbolic omaps, or in the
        concrete mode one per output map that stores the data shape; then, when a later
        custom kernel may sum them, one per grid dim that splits a reduction (`split`)."""
        if replayed.choice is None and "omap" not in self.cfg.concrete:
            try:
                yield kernel.with_custom(replayed, outputs, kernel_key), None, None
            except PrismError:
                return
            # Partial sums over grid dim 0 (any other is the same program with the grid
            # dims permuted: map instantiation keeps that dim in place, `maps._canonical`),
            # of tensors that sum something (else no map splits a sum over the grid).
            if self._custom_may_follow(kernel) and all(
                    _sums(replayed.tensors[i].term) for i in outputs):
                try:
                    yield kernel.with_custom(replayed, outputs, kernel_key, split=0), None, 0
                except PrismError:
                    return
            return
        if len(outputs) != 1:
            return              # the concrete mode stores one tensor, as Mirage's search does
        try:
            want = replayed.data_shape(outputs[0], sources)
        except PrismError:
            return
        tile = replayed.tensors[outputs[0]].shape
        omaps: list[Map | None] = [None]
        if "omap" in self.cfg.concrete:
            omaps = [Map.concrete(om, len(tile)) for om in omap_choices(tile, replayed.grid, want)]
        for omap in omaps:
            try:
                child = kernel.with_custom(replayed, outputs, kernel_key, omap, want)
            except PrismError:
                continue
            yield child, omap, None


SUMMING = frozenset({"matmul", "sum"})


def _sums(term: Term) -> bool:
    """Whether a tensor's abstract expression sums something (a matmul or a sum)."""
    return any(t.head in SUMMING for _, t in term.subterms())


def _unused(kernel: KernelState, outputs: tuple[int, ...]) -> list[int]:
    """The kernel tensors (inputs aside) that no op reads and no output is."""
    read = {name for op in kernel.ops for name in op.inputs}
    return [i for i in range(kernel.num_inputs, len(kernel.tensors))
            if i not in outputs and kernel.tensors[i].name not in read]


def _sums_splits(kind: str, args: list[Tensor]) -> bool:
    """Whether `kind` may apply to `args`: a split tile (a load of partial sums) is read only
    by the accumulator that sums it (`red_ld_sum` when the data's last dim is 1, else
    `redtox_ld_sum`, `_redtox_extensions`), and `redtox_ld_sum` reads only split tiles."""
    if not any(t.split for t in args):
        return kind != "redtox_ld_sum"
    if len(args) != 1:
        return False
    return kind == ("red_ld_sum" if data_dim(args[0].shape[-1]) == dim(1) else "redtox_ld_sum")


class _Once:
    """A value computed at its first call, then kept."""

    def __init__(self, make: Callable[[], frozenset[int]]):
        self.make = make
        self.value: frozenset[int] | None = None

    def __call__(self) -> frozenset[int]:
        if self.value is None:
            self.value = self.make()
        return self.value


def _shown(attrs: dict[str, object]) -> str:
    return "".join(f", {k}={v!r}" for k, v in attrs.items())


def _operand_tuples(kind: str, n: int) -> Iterator[tuple[int, ...]]:
    arity = OPS[kind].arity
    if arity == 1:
        yield from ((i,) for i in range(n))
    elif OPS[kind].commutative:
        yield from itertools.combinations_with_replacement(range(n), 2)
    else:
        yield from itertools.permutations(range(n), 2)
        if kind in ("div", "pow"):
            yield from ((i, i) for i in range(n))
