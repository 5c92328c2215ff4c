"""The search's partial programs: a kernel graph being built and the block graph being built in it.

Both are immutable values; extending one returns a new one (the depth-first search backtracks by
dropping it). Every tensor carries its shape (symbolic inside a block: tile dims are dimension
expressions over the grid sizes `gx gy gz`, the loop range `F` and the map bits) and its abstract
expression (`prism.search.abstract`). Every shape match decided symbolically is recorded as an
`Equality` for map instantiation. In the concrete mode (`prism.search.concrete`) a block graph is
opened with some of its sizes and maps decided (`OpenChoice`), and its tiles' dims are numbers
or expressions without those variables.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from prism.errors import ShapeError
from prism.expr.terms import Term
from prism.ir.dims import Dim, dim, substitute, var
from prism.ir.graph import (
    BlockGraph,
    KernelGraph,
    Map,
    Op,
    Shape,
    input_tile_shape,
)
from prism.ir.ops import OPS, bit_names, data_dim, infer_shape
from prism.search.abstract import op_term

if TYPE_CHECKING:
    from prism.search.concrete import OpenChoice

GRID_NAMES = ("gx", "gy", "gz")


@dataclass(frozen=True)
class Tensor:
    name: str
    shape: Shape
    term: Term
    post: bool = False            # after the loop (block tensors only)
    loads: frozenset[int] = frozenset()   # the block's input tiles it reads (block tensors)
    # Partial sums, one per block of a split over a grid dim, concatenated along the last dim
    # (a kernel tensor a split close stored, or a block's load of one): no program's output
    # until a later kernel sums them (`redtox_ld_sum`, or `red_ld_sum` of a last dim of 1).
    split: bool = False


@dataclass(frozen=True)
class Equality:
    """Two dims the symbolic shape rule matched: equal once the maps are chosen."""

    a: Dim
    b: Dim
    where: str


@dataclass(frozen=True)
class BlockState:
    kernel: int                   # which custom kernel of the graph (for names)
    grid: tuple[Dim, ...]
    loop: Dim
    sources: tuple[str, ...]      # kernel tensors loaded, in order
    ops: tuple[Op, ...]
    tensors: tuple[Tensor, ...]
    equalities: tuple[Equality, ...] = ()
    last_key: tuple[object, ...] = ()
    compute_ops: int = 0
    accumulators: int = 0
    consumed: frozenset[int] = frozenset()       # tensors some op has consumed
    looped: frozenset[int] = frozenset()         # input tiles the accumulators read
    epilogue: frozenset[int] = frozenset()       # input tiles read after the loop as they are
    choice: OpenChoice | None = None             # the concrete mode's decisions at the open

    @staticmethod
    def open(kernel: int, grid_dims: int, sources: list[Tensor],
             choice: OpenChoice | None = None) -> BlockState:
        """The block graph's loads: fresh symbolic sizes and maps, except what `choice` (the
        concrete mode) decided."""
        suffix = str(kernel) if kernel else ""
        c = choice
        grid = tuple(dim(v) for v in c.grid) if c is not None and c.grid is not None else \
            tuple(var(GRID_NAMES[p] + suffix) for p in range(grid_dims))
        loop = dim(c.loop) if c is not None and c.loop is not None else var("F" + suffix)
        ops: list[Op] = []
        tensors: list[Tensor] = []
        for i, src in enumerate(sources):
            tile = f"{src.name}_tile{suffix}"
            # A dim of size 1 is never split (a split of it is no program, or a split into one
            # part: the same program), so its map entries are 0, not bits: the tile dim is 1 and
            # broadcasts as the data dim does (a bias [1, N]).
            ones = [d for d, n in enumerate(src.shape) if n == dim(1)]
            rank = len(src.shape)
            imap = Map.concrete(c.imaps[i], rank) if c is not None and c.imaps is not None \
                else _unsplit(Map.symbolic(f"m_{tile}", grid_dims, rank), ones)
            fmap = Map.concrete((c.fmaps[i],), rank) if c is not None and c.fmaps is not None \
                else _unsplit(Map.symbolic(f"f_{tile}", 1, rank), ones)
            shape = _tile_shape(src.shape, imap, fmap, grid, loop)
            ops.append(Op.make("input", (), (tile,), {"imap": imap, "fmap": fmap}))
            tensors.append(Tensor(tile, shape, src.term, loads=frozenset({len(tensors)}),
                                  split=src.split))
        return BlockState(kernel, grid, loop, tuple(s.name for s in sources), tuple(ops),
                          tuple(tensors), choice=choice)

    def extend(self, kind: str, operands: tuple[int, ...], key: tuple[object, ...],
               accumulator: bool, attrs: Mapping[str, Any] | None = None) -> BlockState:
        """Add `kind` (with `attrs`) on the tensors at `operands`; ShapeError when the shapes
        cannot fit."""
        attrs = dict(attrs or {})
        shapes = [self.tensors[i].shape for i in operands]
        shape, term = self.probe(kind, operands, accumulator, attrs)
        name = self.name_of(kind)
        args = [self.tensors[i] for i in operands]
        post = accumulator or any(t.post for t in args)
        eqs = _equalities(kind, shapes, name)
        looped, epilogue = self._loop_reads(args, accumulator)
        if post and not accumulator:
            # An epilogue reads a pre-loop tile after the loop: the loop must not walk the
            # inputs it comes from (their fmap bits 0: the same tile in every iteration).
            eqs += tuple(Equality(d, _unwalked(d), name) for t in args if not t.post
                         for i in sorted(t.loads) for d in self.tensors[i].shape
                         if _unwalked(d) != d)
        if args[0].split:
            # the partial sums are summed whole: no map splits their last dim
            last = self.tensors[operands[0]].shape[-1]
            if _unsplit_dim(last) != last:
                eqs += (Equality(last, _unsplit_dim(last), name),)
        loads = frozenset().union(*(t.loads for t in args))
        return replace(
            self, ops=(*self.ops, Op.make(kind, (self.tensors[i].name for i in operands),
                                          (name,), attrs)),
            tensors=(*self.tensors, Tensor(name, shape, term, post, loads)),
            equalities=self.equalities + eqs, last_key=key, looped=looped,
            epilogue=epilogue,
            compute_ops=self.compute_ops + 1,
            accumulators=self.accumulators + (1 if accumulator else 0),
            consumed=self.consumed | frozenset(operands))

    def probe(self, kind: str, operands: tuple[int, ...], accumulator: bool,
              attrs: Mapping[str, Any]) -> tuple[Shape, Term]:
        """The shape and abstract expression `extend` would give the new tensor, without
        building the state: ShapeError exactly when `extend` raises it."""
        found = self.try_probe(kind, operands, accumulator, attrs)
        if isinstance(found, str):
            raise ShapeError(found)
        return found

    def try_probe(self, kind: str, operands: tuple[int, ...], accumulator: bool,
                  attrs: Mapping[str, Any]) -> tuple[Shape, Term] | str:
        """`probe`, with why the op does not fit returned instead of raised (the search asks
        this of every child it tries, and about half do not fit)."""
        tensors = self.tensors
        args = [tensors[i] for i in operands]
        frozen = tuple(sorted(attrs.items())) if attrs else ()
        shape = _shape_of(kind, tuple([t.shape for t in args]), frozen)
        if isinstance(shape, ShapeError):
            return str(shape)
        looped, epilogue = self._loop_reads(args, accumulator)
        if looped & epilogue:
            # A tile both accumulated and read as it is after the loop: either the loop walks
            # it (no program) or walks nothing (the program without a loop, reached without
            # the epilogue reading it), so the family is not built.
            return f"{self.name_of(kind)}: a tile read after the loop is also accumulated"
        fmaps = self.choice.fmaps if self.choice is not None else None
        if fmaps is not None and epilogue - self.epilogue and any(
                fmaps[i] >= 0 for i in epilogue - self.epilogue):
            # a concrete fmap: what the symbolic search states as an equality (the loop must
            # not walk a tile read after the loop, `extend`) is decided here
            return f"{self.name_of(kind)}: reads after the loop a tile the loop walks"
        if args[0].split:
            # Summing a split's partial sums: at the trivial instantiation (one block, so one
            # partial sum) the sum is the one partial sum, whatever the maps.
            return shape, args[0].term
        return shape, _op_term(kind, tuple([t.term for t in args]), len(args[0].shape), frozen)

    def _loop_reads(self, args: list[Tensor], accumulator: bool
                    ) -> tuple[frozenset[int], frozenset[int]]:
        """(looped, epilogue) once an op on `args` is added: the input tiles the accumulators
        read, and those read after the loop as they are."""
        if accumulator:
            return self.looped | args[0].loads, self.epilogue
        if any(t.post for t in args):
            return self.looped, self.epilogue.union(*(t.loads for t in args if not t.post))
        return self.looped, self.epilogue

    def name_of(self, kind: str) -> str:
        """The name the next tensor, made by `kind`, gets."""
        return f"{kind}{len(self.tensors)}" + (f"_{self.kernel}" if self.kernel else "")

    def pending_after(self, operands: tuple[int, ...]) -> int:
        """How many tensors wait for a consumer once an op on `operands` is added."""
        return len(self.tensors) + 1 - len(self.consumed | frozenset(operands))

    def replay(self, grid_dims: int, sources: list[Tensor]) -> BlockState:
        """The same block graph with `grid_dims` grid dims (fresh symbolic shapes, and the
        same concrete choice)."""
        out = BlockState.open(self.kernel, grid_dims, sources, self.choice)
        index = {t.name: i for i, t in enumerate(self.tensors)}
        for op in self.ops[len(sources):]:
            out = out.extend(op.kind, tuple(index[t] for t in op.inputs), self.last_key,
                             OPS[op.kind].category == "accum", op.attr)
        return out

    @property
    def open_tensors(self) -> list[int]:
        """Tensors nothing consumes yet: what the block would store if it closed now."""
        return [i for i in range(len(self.tensors)) if i not in self.consumed]

    def output_map(self, tile: Tensor, j: int = 0) -> Map:
        """Output `j`'s symbolic omap."""
        suffix = (str(self.kernel) if self.kernel else "") + (f"_{j}" if j else "")
        return Map.symbolic(f"o_out{suffix}", len(self.grid), len(tile.shape))

    def data_shape(self, index: int, sources: list[Tensor]) -> Shape:
        """The data shape of tensor `index`: the ops replayed on the inputs' data shapes (every
        split undone). A tile with concrete sizes has numbers for dims, so the data dim behind
        one can no longer be read off it as `data_dim` does for a symbolic tile."""
        shapes = [s.shape for s in sources]
        index_of = {t.name: i for i, t in enumerate(self.tensors)}
        for op in self.ops[len(sources):]:
            shape = _shape_of(op.kind, tuple([shapes[index_of[t]] for t in op.inputs]),
                              tuple(sorted(op.attr.items())))
            if isinstance(shape, ShapeError):
                raise ShapeError(str(shape))
            shapes.append(shape)
        return shapes[index]

    def block_graph(self, outputs: tuple[int, ...] = (), omap: Map | None = None) -> BlockGraph:
        """The block graph, storing `outputs` through symbolic omaps (or `omap`)."""
        ops = list(self.ops)
        for j, i in enumerate(outputs):
            t = self.tensors[i]
            ops.append(Op.make("output", (t.name,), (),
                               {"omap": omap if omap is not None else self.output_map(t, j)}))
        dimx = [op.attr["dimx"] for op in self.ops if op.kind == "redtox_ld_sum"]
        return BlockGraph(self.grid, self.loop, tuple(ops),
                          tuple((t.name, t.shape) for t in self.tensors),
                          **({"reduction_dimx": dimx[0]} if dimx else {}))

    def signature(self) -> tuple[object, ...]:
        ops = (self.sources, len(self.grid),
               tuple((op.kind, op.inputs, op.attrs) for op in self.ops if op.kind != "input"))
        return ops if self.choice is None else (*ops, self.choice)


@functools.lru_cache(maxsize=1 << 14)
def _tile_shape(data: Shape, imap: Map, fmap: Map, grid: tuple[Dim, ...], loop: Dim) -> Shape:
    """`input_tile_shape`, remembered: every custom kernel the search opens, and every block
    it replays with another grid, loads the same inputs through the same symbolic maps."""
    return input_tile_shape(data, imap, fmap, grid, loop)


@functools.lru_cache(maxsize=1 << 18)
def _op_term(kind: str, args: tuple[Term, ...], rank: int,
             attrs: tuple[tuple[str, Any], ...]) -> Term:
    """`op_term`, remembered (terms are interned values)."""
    return op_term(kind, list(args), rank, dict(attrs))


_SHAPES: dict[tuple[object, ...], Shape | ShapeError] = {}


def _shape_of(kind: str, shapes: tuple[Shape, ...], attrs: tuple[tuple[str, Any], ...]
              ) -> Shape | ShapeError:
    """`infer_shape`, remembered, with its error returned: the search asks the same question
    at many nodes (the same op on tiles of the same shapes), and a shape of Dims is a value."""
    key = (kind, shapes, attrs)
    found = _SHAPES.get(key)
    if found is None:
        try:
            found = infer_shape(kind, list(shapes), dict(attrs))
        except ShapeError as e:
            found = e
        _SHAPES[key] = found
    return found


def _equalities(kind: str, shapes: list[Shape], where: str) -> tuple[Equality, ...]:
    """The dim pairs the op's shape rule matched that are not already the same expression."""
    if kind == "matmul":
        a, b = shapes
        pairs = list(zip((*a[:-2], a[-1]), (*b[:-2], b[-2]), strict=True))
    elif len(shapes) == 2:
        pairs = [(x, y) for x, y in zip(*shapes, strict=True) if dim(1) not in (x, y)]
    else:
        pairs = []
    return tuple(Equality(x, y, where) for x, y in pairs if x != y)


def _unsplit(m: Map, dims: list[int]) -> Map:
    """`m` with its entries for data dims `dims` 0."""
    if not dims:
        return m
    return Map(tuple(tuple(dim(0) if d in dims else e for d, e in enumerate(row))
                     for row in m.rows))


@functools.cache
def _unsplit_dim(d: Dim) -> Dim:
    """Tile dim `d` with every map bit 0: the dim when no map splits it."""
    bits = bit_names(d)
    return substitute(d, dict.fromkeys(bits, 0)) if bits else d


@functools.cache
def _unwalked(d: Dim) -> Dim:
    """Tile dim `d` with its loop bits 0: what it is when the loop does not walk it."""
    loop_bits = {n for n in bit_names(d) if n.startswith("f_")}
    return substitute(d, dict.fromkeys(loop_bits, 0)) if loop_bits else d


@dataclass(frozen=True)
class KernelState:
    """A kernel graph being built: its tensors (inputs first) and its kernels."""

    tensors: tuple[Tensor, ...]
    ops: tuple[Op, ...]
    num_inputs: int
    last_key: tuple[object, ...] = ()
    kernels: int = 0
    custom: int = 0
    equalities: tuple[Equality, ...] = ()

    def with_kernel_op(self, kind: str, operands: tuple[int, ...], key: tuple[object, ...],
                       attrs: Mapping[str, Any] | None = None) -> KernelState:
        attrs = dict(attrs or {})
        shapes = [self.tensors[i].shape for i in operands]
        shape = infer_shape(kind, shapes, attrs)
        name = f"t{len(self.tensors)}"
        term = op_term(kind, [self.tensors[i].term for i in operands], len(shapes[0]), attrs)
        op = Op.make(kind, (self.tensors[i].name for i in operands), (name,), attrs)
        return replace(self, tensors=(*self.tensors, Tensor(name, shape, term)),
                       ops=(*self.ops, op), last_key=key, kernels=self.kernels + 1)

    def with_custom(self, block: BlockState, outputs: tuple[int, ...], key: tuple[object, ...],
                    omap: Map | None = None, shape: Shape | None = None,
                    split: int | None = None) -> KernelState:
        """The kernel graph with `block` as a custom kernel storing the tensors at `outputs`
        as kernel tensors of their data shapes (`shape` when given: the concrete mode's, one
        output), through symbolic omaps (or `omap`). With `split`, grid dim `split` is a split
        of a reduction: each block stores partial sums, concatenated along the last dim (the
        kernel tensor's last dim is the data dim times that grid size), and the kernel
        tensors are `split` ones that a later kernel must sum."""
        made = []
        for j, output in enumerate(outputs):
            tile = block.tensors[output]
            whole = shape if shape is not None else tuple(data_dim(d) for d in tile.shape)
            if split is not None:
                whole = (*whole[:-1], whole[-1] * block.grid[split])
            made.append(Tensor(f"t{len(self.tensors) + j}", whole, tile.term,
                               split=split is not None))
        op = Op.make("customized", block.sources, tuple(t.name for t in made),
                     block=block.block_graph(outputs, omap))
        return replace(self, tensors=(*self.tensors, *made),
                       ops=(*self.ops, op), last_key=key, kernels=self.kernels + 1,
                       custom=self.custom + 1,
                       equalities=self.equalities + block.equalities)

    def graph(self, outputs: tuple[int, ...] = (), open_block: BlockState | None = None,
              name: str = "family") -> KernelGraph:
        """The family as a kernel graph (an open block graph as a custom kernel without
        outputs, for the rules that read its tiles)."""
        ops = [Op.make("input", (), (t.name,)) for t in self.tensors[:self.num_inputs]]
        ops += list(self.ops)
        if open_block is not None:
            ops.append(Op.make("customized", open_block.sources, (),
                               block=open_block.block_graph()))
        ops += [Op.make("output", (self.tensors[i].name,)) for i in outputs]
        return KernelGraph(tuple(ops), tuple((t.name, t.shape) for t in self.tensors), name)
