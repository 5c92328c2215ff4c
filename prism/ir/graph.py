"""Kernel graphs, block graphs and their maps: immutable values with structural equality.

A graph is a tuple of `Op`s in topological order plus the shape of every tensor it names. Graph
inputs and outputs are the `input` and `output` ops, in order (as Mirage's μGraphs have them).

A `customized` op carries a `BlockGraph`: what one thread block runs. Its `input` ops load tiles of
the custom op's inputs (block input i reads custom-op input i) through an **imap** (a `Map` with one
row per grid dim) and an **fmap** (a `Map` with one row, the for-loop); its `output` ops store
post-loop tiles into the custom op's outputs (block output i writes custom-op output i) through an
**omap**. A map entry is 1 when that parallel dim splits that data dim: a constant 0/1 for a
concrete map, a 0/1 `bit` variable m[T,d,p] for a symbolic one.

Tile shapes follow from the maps (DESIGN.md §1):
    input tile dim d  = D_d / (Π_p (1 − m[p,d] + m[p,d]·g_p) · (1 − f_d + f_d·F))
    output dim d      = tile_d · Π_p (1 − m[p,d] + m[p,d]·g_p)

A kernel graph's `interface` says how its inputs and outputs look to the torch code it was traced
from, where that differs from the IR: a bias `B[N]` is the IR input `[1, N]` (elementwise operands
have one rank), `W.T` is the IR input `[d, n]` read from the user's `W[n, d]` with permuted
strides, an output reduced with keepdim=False is the IR's `[M, 1]` returned as `[M]`. Every
engine stage works on the IR shapes; only what talks to the user's tensors (the generated
launcher, the checks against a torch reference) goes through the views.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from prism.errors import ShapeError
from prism.ir.dims import Dim, DimLike, bit, const, dim, mul, substitute
from prism.ir.ops import OPS

Shape = tuple[Dim, ...]
MAX_RANK = 4
MAX_GRID_DIMS = 3


@dataclass(frozen=True)
class Map:
    """A 0/1 matrix: `rows[p][d]` says whether parallel dim p splits data dim d."""

    rows: tuple[tuple[Dim, ...], ...]

    @classmethod
    def concrete(cls, dims: Sequence[int | None], rank: int) -> Map:
        """From Mirage's form: per parallel dim, the data dim it splits, or -1/None for none."""
        rows = []
        for d in dims:
            if d is not None and d >= 0 and d >= rank:
                raise ShapeError(f"map entry {d} is out of range for a tensor of rank {rank}; "
                                 "use a data dim in 0..rank-1 or -1")
            rows.append(tuple(const(1 if d is not None and d >= 0 and d == c else 0)
                              for c in range(rank)))
        return cls(tuple(rows))

    @classmethod
    def symbolic(cls, prefix: str, num_rows: int, rank: int) -> Map:
        """Every entry a fresh bit variable `{prefix}_d{d}_p{p}`."""
        return cls(tuple(tuple(bit(f"{prefix}_d{d}_p{p}") for d in range(rank))
                         for p in range(num_rows)))

    @property
    def num_rows(self) -> int:
        return len(self.rows)

    @property
    def rank(self) -> int:
        return len(self.rows[0]) if self.rows else 0

    @property
    def is_concrete(self) -> bool:
        return all(e.is_const for row in self.rows for e in row)

    def as_dims(self) -> tuple[int, ...]:
        """Mirage's form (-1 for none); the map must be concrete with at most one 1 per row."""
        out = []
        for row in self.rows:
            ones = [d for d, e in enumerate(row) if e == const(1)]
            if not self.is_concrete or len(ones) > 1:
                raise ShapeError(f"map {self._matrix()} has no single data dim per row; "
                                 "instantiate it (concrete 0/1 entries, one 1 per row at most)")
            out.append(ones[0] if ones else -1)
        return tuple(out)

    def _matrix(self) -> str:
        return "[" + "; ".join(" ".join(str(e) for e in row) for row in self.rows) + "]"

    def factor(self, d: int, sizes: Sequence[Dim]) -> Dim:
        """Π_p (1 − m[p,d] + m[p,d]·size_p): how many parts data dim d is split into."""
        return mul(*[1 - row[d] + row[d] * sizes[p] for p, row in enumerate(self.rows)])

    def __str__(self) -> str:
        if self.is_concrete and all(sum(e.value for e in row) <= 1 for row in self.rows):
            return "(" + ", ".join("-" if d < 0 else str(d) for d in self.as_dims()) + ")"
        return self._matrix()


@dataclass(frozen=True)
class Op:
    kind: str
    inputs: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()
    attrs: tuple[tuple[str, Any], ...] = ()   # sorted (key, value) pairs: hashable
    block: BlockGraph | None = None

    @staticmethod
    def make(kind: str, inputs: Iterable[str] = (), outputs: Iterable[str] = (),
             attrs: Mapping[str, Any] | None = None, block: BlockGraph | None = None) -> Op:
        return Op(kind, tuple(inputs), tuple(outputs), tuple(sorted((attrs or {}).items())), block)

    @cached_property
    def attr(self) -> dict[str, Any]:
        return dict(self.attrs)


class _Graph:
    """What kernel and block graphs share: ops in order and tensor shapes."""

    ops: tuple[Op, ...]
    tensors: tuple[tuple[str, Shape], ...]

    @cached_property
    def shapes(self) -> dict[str, Shape]:
        return dict(self.tensors)

    def shape(self, name: str) -> Shape:
        return self.shapes[name]

    @cached_property
    def producers(self) -> dict[str, Op]:
        return {t: op for op in self.ops for t in op.outputs}

    @cached_property
    def consumers(self) -> dict[str, list[Op]]:
        found: dict[str, list[Op]] = {t: [] for t, _ in self.tensors}
        for op in self.ops:
            for t in op.inputs:
                found.setdefault(t, []).append(op)
        return found

    @property
    def input_ops(self) -> list[Op]:
        return [op for op in self.ops if op.kind == "input"]

    @property
    def output_ops(self) -> list[Op]:
        return [op for op in self.ops if op.kind == "output"]

    @property
    def inputs(self) -> list[str]:
        return [op.outputs[0] for op in self.input_ops]

    @property
    def outputs(self) -> list[str]:
        return [op.inputs[0] for op in self.output_ops]


@dataclass(frozen=True)
class BlockGraph(_Graph):
    """What one thread block of a custom kernel executes."""

    grid: tuple[Dim, ...]
    forloop_range: Dim
    ops: tuple[Op, ...]
    tensors: tuple[tuple[str, Shape], ...]
    reduction_dimx: int = 64
    block_threads: int = 128   # fixed, never symbolic (Prism and Mirage alike)

    @cached_property
    def after_accum(self) -> frozenset[str]:
        """Tensors computed once per block, after the for-loop: accumulator results and what
        is computed from them. An op after the loop may also read a pre-loop tile that is the
        same in every iteration (`loop_walks` is False for every input it reads: a bias, a
        residual), as an epilogue does; `prism.ir.spec` checks that."""
        post: set[str] = set()
        for op in self.ops:
            od = OPS.get(op.kind)
            if od is None or od.category in ("io", "custom"):
                continue
            if od.category == "accum" or any(t in post for t in op.inputs):
                post.update(op.outputs)
        return frozenset(post)

    def loads(self, tensor: str) -> frozenset[str]:
        """The input tiles a tensor of this block graph is computed from."""
        producer = {t: op for op in self.ops for t in op.outputs}
        out: set[str] = set()
        todo = [tensor]
        while todo:
            t = todo.pop()
            op = producer.get(t)
            if op is None:
                continue
            if op.kind == "input":
                out.add(t)
            else:
                todo.extend(op.inputs)
        return frozenset(out)

    def loop_walks(self, tile: str, env: Mapping[str, int] | None = None) -> bool | None:
        """Whether the for-loop walks input tile `tile` (its fmap splits a data dim, and the loop
        range is not 1): True, False, or None while a map bit or the range is symbolic."""
        (op,) = [op for op in self.input_ops if op.outputs[0] == tile]
        loop = substitute(self.forloop_range, env) if env else self.forloop_range
        if loop.is_const and loop.value == 1:
            return False
        entries = [substitute(e, env) if env else e for e in op.attr["fmap"].rows[0]]
        if any(e.is_const and e.value == 1 for e in entries):
            return True
        return False if all(e.is_const for e in entries) else None

    @property
    def accumulators(self) -> list[Op]:
        return [op for op in self.ops if op.kind in OPS and OPS[op.kind].category == "accum"]

    def free_vars(self) -> frozenset[str]:
        names: set[str] = set(self.forloop_range.free_vars())
        for g in self.grid:
            names |= g.free_vars()
        for _, shape in self.tensors:
            for d in shape:
                names |= d.free_vars()
        return frozenset(names)

    def __str__(self) -> str:
        grid = "×".join(str(g) for g in self.grid)
        return f"BlockGraph(grid={grid}, forloop={self.forloop_range}, {len(self.ops)} ops)"


@dataclass(frozen=True)
class View:
    """A graph input or output as torch sees it, when that differs from its IR tensor.

    `shape` is the torch tensor's shape. For an input, the IR tensor is
    `user.permute(perm).reshape(ir_shape)` (`perm` empty: no permutation), and it must be a view
    of the user's contiguous tensor: the kernel reads the user's memory with `strides`, no copy.
    For an output (no `perm`), the user gets `ir.reshape(shape)` of the contiguous IR tensor.
    """

    shape: tuple[int, ...]
    perm: tuple[int, ...] = ()
    # A mask for a softmax, which the IR holds as an additive float tensor (0 where a key is
    # attended, MASKED where it is not): "" for an ordinary input; "keep" or "drop" for a
    # boolean tensor the user passes (True keeps the key, as F.scaled_dot_product_attention's
    # attn_mask; True drops it, as masked_fill's mask); "causal" for one the user does not
    # pass at all, made from its shape (is_causal=True: key j ≤ query i is kept)
    made: str = ""

    def permuted(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """The user's shape and contiguous strides (in elements), permuted by `perm`."""
        contiguous = [math.prod(self.shape[d + 1:]) for d in range(len(self.shape))]
        order = self.perm or tuple(range(len(self.shape)))
        return tuple(self.shape[p] for p in order), tuple(contiguous[p] for p in order)

    def strides(self, ir_shape: Sequence[int]) -> tuple[int, ...] | None:
        """The IR tensor's strides (elements) in the user's contiguous memory, or None when the
        reshape after the permutation would need a copy (dims merged that are not adjacent in
        memory). A dim of size 1 gets stride 0: it is never stepped over."""
        sizes, steps = self.permuted()
        pending = [(n, st) for n, st in zip(sizes, steps, strict=True) if n != 1]
        out: list[int] = []
        for n in ir_shape:
            size, stride = 1, 0
            while size < n:               # take user dims, outermost first, until size is n
                if not pending:
                    return None
                m, st = pending.pop(0)
                need = n // size
                if m > need:              # an IR dim that splits a user dim: its outer part
                    if m % need:
                        return None
                    pending.insert(0, (m // need, st))
                    m, st = need, st * (m // need)
                if size > 1 and stride != st * m:
                    return None           # merging dims that are not adjacent in memory
                size, stride = size * m, st
            if size != n:
                return None
            out.append(stride)
        return tuple(out) if not pending else None

    def to_json(self) -> dict[str, Any]:
        return {"shape": list(self.shape), **({"perm": list(self.perm)} if self.perm else {}),
                **({"made": self.made} if self.made else {})}


# The additive mask's value where a key is masked: a finite −∞. e^(x − 30000) is exactly 0 in
# every float type for any logit below 10⁴, and, unlike −∞, a part of a split whose keys are all
# masked still has a finite max (no ∞ − ∞). Representable in float16 (and bfloat16) exactly.
MASKED = -30000.0
MADE = ("keep", "drop", "causal")


def causal_keep(shape: Sequence[int]) -> np.ndarray:
    """is_causal's mask as F.scaled_dot_product_attention makes it: key j is kept for query i
    when j ≤ i (the top-left triangle of an [L, S] matrix, whatever L and S are)."""
    rows, cols = shape[-2], shape[-1]
    return np.broadcast_to(np.tril(np.ones((rows, cols), dtype=bool)), tuple(shape))


def additive_mask(keep: np.ndarray) -> np.ndarray:
    """A boolean keep-mask as the IR's additive float mask (0 kept, MASKED masked)."""
    return np.where(keep, 0.0, MASKED)


def made_input(view: View, shape: Sequence[int], given: Any = None) -> np.ndarray:
    """The IR array of a mask input: the causal mask made from `shape`, or the user's boolean
    mask `given` as additive floats; an array that is already additive (what the engine passes
    between its own stages) is taken as it is."""
    if view.made == "causal" and given is None:
        return additive_mask(causal_keep(shape))
    a = np.asarray(given)
    if a.dtype == bool:
        return additive_mask(a if view.made in ("keep", "causal") else ~a)
    return a


def mask_as_bool(view: View, additive: np.ndarray) -> np.ndarray:
    """The boolean mask the user's torch function takes for an additive one (the inverse of
    `made_input` for "keep" and "drop")."""
    kept = np.asarray(additive) > MASKED / 2
    return kept if view.made == "keep" else ~kept


@dataclass(frozen=True)
class Interface:
    """The views of a kernel graph's inputs and outputs, by position (None: the IR tensor as
    it is); empty tuples mean no views at all. By position, because the search's candidates
    keep the target's inputs and outputs in order but name their outputs afresh."""

    inputs: tuple[View | None, ...] = ()
    outputs: tuple[View | None, ...] = ()

    def __bool__(self) -> bool:
        return any(v is not None for v in (*self.inputs, *self.outputs))


@dataclass(frozen=True)
class KernelGraph(_Graph):
    """A DAG of kernels over device tensors; the unit everything else consumes."""

    ops: tuple[Op, ...]
    tensors: tuple[tuple[str, Shape], ...]
    name: str = ""
    interface: Interface = Interface()

    def __post_init__(self) -> None:
        if self.interface:
            problem = _interface_problem(self)
            if problem:
                raise ShapeError(f"graph {self.name or 'unnamed'}: {problem}")

    def input_view(self, i: int) -> View | None:
        views = self.interface.inputs
        return views[i] if i < len(views) else None

    def output_view(self, i: int) -> View | None:
        views = self.interface.outputs
        return views[i] if i < len(views) else None

    def user_input_shapes(self) -> list[tuple[int, ...]]:
        """The shape of each input as the user passes it (its view's, else its IR shape)."""
        out = []
        for i, t in enumerate(self.inputs):
            view = self.input_view(i)
            out.append(view.shape if view else tuple(d.value for d in self.shape(t)))
        return out

    def to_ir(self, arrays: Sequence[Any]) -> list[Any]:
        """Arrays in the user's layout (one per input) as the IR's inputs: each through its
        view (numpy transpose and reshape); arrays without a view pass as they are. A mask
        input takes the user's boolean mask or the additive one, and a causal mask is made when
        its array is left out (`made_input`)."""
        arrays = list(arrays)
        made = [i for i in range(len(self.inputs))
                if (v := self.input_view(i)) is not None and v.made == "causal"]
        if made and len(arrays) == len(self.inputs) - len(made):   # the user's: masks made here
            for i in made:
                arrays.insert(i, None)
        out = []
        for i, (t, a) in enumerate(zip(self.inputs, arrays, strict=True)):
            view = self.input_view(i)
            if view is None:
                out.append(a)
                continue
            if view.made:
                a = made_input(view, view.shape, a)
            a = np.asarray(a)
            if a.shape != view.shape:
                from prism.errors import InputError
                raise InputError(f"input {t} has shape {a.shape}; the traced function takes "
                                 f"{view.shape}")
            ir = tuple(d.value for d in self.shape(t))
            out.append((np.transpose(a, view.perm) if view.perm else a).reshape(ir))
        return out

    def to_user(self, outputs: Sequence[Any]) -> list[Any]:
        """The IR's outputs in the shapes the traced function returns."""
        return [np.asarray(a).reshape(v.shape) if (v := self.output_view(i)) else a
                for i, a in enumerate(outputs)]

    @property
    def custom_ops(self) -> list[Op]:
        return [op for op in self.ops if op.kind == "customized"]

    @property
    def num_kernels(self) -> int:
        return sum(1 for op in self.ops if op.kind not in ("input", "output"))

    def free_vars(self) -> frozenset[str]:
        names: set[str] = set()
        for _, shape in self.tensors:
            for d in shape:
                names |= d.free_vars()
        for _, block in self.iter_blocks():
            names |= block.free_vars()
        return frozenset(names)

    def iter_blocks(self) -> Iterator[tuple[Op, BlockGraph]]:
        """Each custom op with its block graph (a custom op without one is a spec problem)."""
        for op in self.custom_ops:
            if op.block is not None:
                yield op, op.block

    # Conveniences that delegate to the modules owning them (kept lazy: graphviz, json).
    def to_json(self) -> dict[str, Any]:
        from prism.ir.serialize import graph_to_json
        return graph_to_json(self)

    @staticmethod
    def from_json(doc: Any) -> KernelGraph:
        from prism.ir.serialize import graph_from_json
        return graph_from_json(doc)

    def to_dot(self) -> str:
        from prism.ir.render import to_dot
        return to_dot(self)

    def _repr_svg_(self) -> str:
        from prism.ir.render import to_svg
        return to_svg(self)

    def __str__(self) -> str:
        kinds = ", ".join(op.kind for op in self.ops if op.kind not in ("input", "output"))
        return (f"KernelGraph({self.name or 'unnamed'}: inputs {self.inputs}, "
                f"ops [{kinds}], outputs {self.outputs})")


def _interface_problem(g: KernelGraph) -> str:
    """What is wrong with `g`'s views, or "": one per input and output at most, each the same
    number of elements as its IR tensor, a permutation of the user's dims, an input view that
    is a view of the user's memory."""
    for kind, views, names in (("input", g.interface.inputs, g.inputs),
                               ("output", g.interface.outputs, g.outputs)):
        if len(views) > len(names):
            return f"{len(views)} {kind} views for {len(names)} {kind}s"
        for view, t in zip(views, names, strict=False):
            if view is None:
                continue
            shape = g.shape(t)
            if not all(d.is_const for d in shape):
                return f"{kind} {t} has a view but a symbolic shape"
            ir = tuple(d.value for d in shape)
            if not all(isinstance(n, int) and n >= 1 for n in view.shape) or \
                    math.prod(view.shape) != math.prod(ir):
                return f"{kind} {t}'s view {list(view.shape)} does not have the elements of " \
                       f"{list(ir)}"
            if view.made and (kind == "output" or view.made not in MADE or view.perm):
                return f"{kind} {t}'s view is made {view.made!r}: only an input, one of " \
                       f"{', '.join(MADE)}, and not permuted"
            rank = len(view.shape)
            if view.perm and (kind == "output" or sorted(view.perm) != list(range(rank))):
                return f"{kind} {t}'s view has the permutation {list(view.perm)}, " \
                       f"not one of its {len(view.shape)} dims"
            if kind == "input" and view.strides(ir) is None:
                return f"input {t}'s view {view.to_json()} is not a view of {list(ir)} " \
                       "(it would need a copy)"
    return ""


def check_shape(shape: Iterable[DimLike], what: str) -> Shape:
    """A user-given shape: rank 1..4, every concrete dim ≥ 1."""
    dims = tuple(dim(d) for d in shape)
    if not 1 <= len(dims) <= MAX_RANK:
        raise ShapeError(f"{what} has rank {len(dims)}; tensors have rank 1 to {MAX_RANK} "
                         "(reshape it into at most 4 dims)")
    for d in dims:
        if d.is_const and d.value <= 0:
            raise ShapeError(f"{what} has dimension {d.value} in shape "
                             f"{tuple(str(x) for x in dims)}; every dimension must be ≥ 1")
    return dims


def input_tile_shape(data: Shape, imap: Map, fmap: Map, grid: Sequence[Dim],
                     forloop_range: Dim) -> Shape:
    """D_d / (Π_p (1 − m[p,d] + m[p,d]·g_p) · (1 − f_d + f_d·F)) for every data dim d."""
    return tuple(data[d] / (imap.factor(d, grid) * fmap.factor(d, (forloop_range,)))
                 for d in range(len(data)))


def output_data_shape(tile: Shape, omap: Map, grid: Sequence[Dim]) -> Shape:
    """tile_d · Π_p (1 − m[p,d] + m[p,d]·g_p) for every data dim d."""
    return tuple(tile[d] * omap.factor(d, grid) for d in range(len(tile)))
