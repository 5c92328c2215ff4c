"""The builder API: `prism.Graph` for kernel graphs and `prism.Block` for block graphs.

    g = prism.Graph()
    X = g.input("X", (8, 4096)); W = g.input("W", (4096, 4096))
    g.output(g.matmul(g.rms_norm(X), W))

A hand-built custom kernel (the fused RMSNorm+MatMul of DESIGN.md §5):

    tb = prism.Block(grid=(64,), forloop_range=16)
    x = tb.input(X, imap=(-1,), fmap=1)     # replicated over the grid, walked on d by the loop
    w = tb.input(W, imap=(1,), fmap=0)      # columns split over the grid, rows walked by the loop
    y = tb.div(tb.accum(tb.matmul(x, w), "nored"), tb.accum(x, "red_ld_rms"))
    tb.output(y, omap=(1,))
    (O,) = g.customized(tb)

Grid sizes and the loop range may be names ("g0", "F") for a symbolic block graph; maps may be
`"symbolic"` for 0/1 map variables. Every op's shape is checked as it is added; `build()` returns
the immutable `KernelGraph` after the full `spec` check.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from prism.errors import ShapeError
from prism.ir.dims import Dim, DimLike, dim
from prism.ir.graph import (
    MAX_GRID_DIMS,
    BlockGraph,
    KernelGraph,
    Map,
    Op,
    Shape,
    check_shape,
    input_tile_shape,
    output_data_shape,
)
from prism.ir.ops import infer_shape, op_def

MapLike = Map | Sequence[int] | int | str | None


@dataclass(frozen=True)
class Tensor:
    """A handle to a tensor of a graph under construction."""

    owner: _Builder
    name: str
    shape: Shape

    def __repr__(self) -> str:
        return f"Tensor({self.name}: [{', '.join(str(d) for d in self.shape)}])"


class _Builder:
    """Op methods shared by kernel and block builders."""

    level = ""

    def __init__(self) -> None:
        self._ops: list[Op] = []
        self._tensors: dict[str, Shape] = {}
        self._counts: dict[str, int] = {}

    def _fresh(self, base: str) -> str:
        while True:
            n = self._counts.get(base, 0)
            self._counts[base] = n + 1
            name = f"{base}{n}" if n or base in self._tensors else base
            if name not in self._tensors:
                return name

    def _own(self, t: Tensor) -> str:
        if not isinstance(t, Tensor) or t.owner is not self:
            raise ShapeError(f"{t!r} does not belong to this {self.level} graph; "
                             "pass tensors made by the same builder")
        return t.name

    def _new(self, name: str, shape: Shape) -> Tensor:
        if name in self._tensors:
            raise ShapeError(f"tensor name {name!r} is used twice; give each tensor its own name")
        self._tensors[name] = shape
        return Tensor(self, name, shape)

    def _compute(self, kind: str, *xs: Tensor, name: str | None = None, **attrs: Any) -> Tensor:
        if self.level not in op_def(kind).levels:
            raise ShapeError(f"op {kind} is not available in a {self.level} graph")
        names = [self._own(x) for x in xs]
        shape = infer_shape(kind, [x.shape for x in xs], attrs)
        out = self._new(name or self._fresh(kind), shape)
        self._ops.append(Op.make(kind, names, [out.name], attrs))
        return out

    def apply(self, kind: str, *xs: Tensor, name: str | None = None, **attrs: Any) -> Tensor:
        """Any compute op of the op table by name, with its attributes (`apply("clamp", x,
        lo=0.0, hi=None)`): what the torch.fx frontend emits through."""
        return self._compute(kind, *xs, name=name, **attrs)

    # The compute ops, Mirage's spelling.
    def matmul(self, a: Tensor, b: Tensor, name: str | None = None) -> Tensor:
        return self._compute("matmul", a, b, name=name)

    def exp(self, x: Tensor, name: str | None = None) -> Tensor:
        return self._compute("exp", x, name=name)

    def silu(self, x: Tensor, name: str | None = None) -> Tensor:
        return self._compute("silu", x, name=name)

    def relu(self, x: Tensor, name: str | None = None) -> Tensor:
        return self._compute("relu", x, name=name)

    def gelu(self, x: Tensor, name: str | None = None) -> Tensor:
        return self._compute("gelu", x, name=name)

    def sqrt(self, x: Tensor, name: str | None = None) -> Tensor:
        return self._compute("sqrt", x, name=name)

    def square(self, x: Tensor, name: str | None = None) -> Tensor:
        return self._compute("square", x, name=name)

    def add(self, a: Tensor, b: Tensor, name: str | None = None) -> Tensor:
        return self._compute("add", a, b, name=name)

    def mul(self, a: Tensor, b: Tensor, name: str | None = None) -> Tensor:
        return self._compute("mul", a, b, name=name)

    def div(self, a: Tensor, b: Tensor, name: str | None = None) -> Tensor:
        return self._compute("div", a, b, name=name)

    def pow(self, a: Tensor, b: Tensor, name: str | None = None) -> Tensor:
        return self._compute("pow", a, b, name=name)

    def mul_scalar(self, x: Tensor, scalar: float, name: str | None = None) -> Tensor:
        return self._compute("mul_scalar", x, name=name, scalar=float(scalar))

    def sum(self, x: Tensor, dim: int = -1, name: str | None = None) -> Tensor:
        return self._compute("sum", x, name=name, dim=_axis(dim, len(x.shape)))

    reduction = sum

    def mean(self, x: Tensor, dim: int = -1, name: str | None = None) -> Tensor:
        return self._compute("mean", x, name=name, dim=_axis(dim, len(x.shape)))

    def rms_norm(self, x: Tensor, name: str | None = None, eps: float = 0.0) -> Tensor:
        """x / sqrt(mean(x², last dim) + eps); eps 0 is Mirage's rms_norm."""
        return self._compute("rms_norm", x, name=name, **({"eps": float(eps)} if eps else {}))


def _axis(d: int, rank: int) -> int:
    if not isinstance(d, int) or not -rank <= d < rank:
        raise ShapeError(f"dim {d!r} is out of range for rank {rank}; use -{rank}..{rank - 1}")
    return d % rank


class Graph(_Builder):
    """Builds a `KernelGraph`, op by op, checking shapes as it goes."""

    level = "kernel"

    def __init__(self, name: str = "") -> None:
        super().__init__()
        self.name = name

    def input(self, name: str, shape: Sequence[DimLike]) -> Tensor:
        if not isinstance(name, str) or not name:
            raise ShapeError(f"input name {name!r} must be a non-empty string")
        out = self._new(name, check_shape(shape, f"input {name}"))
        self._ops.append(Op.make("input", (), [name]))
        return out

    new_input = input

    def output(self, t: Tensor) -> None:
        self._ops.append(Op.make("output", [self._own(t)]))

    mark_output = output

    def customized(self, *args: Any) -> list[Tensor]:
        """Add a custom kernel: `customized(block)` or Mirage's `customized(inputs, block)`."""
        if len(args) == 1:
            (block,) = args
            inputs = None
        elif len(args) == 2:
            inputs, block = args
        else:
            raise ShapeError("customized takes (block) or (inputs, block)")
        if not isinstance(block, Block):
            raise ShapeError("customized needs a prism.Block describing the custom kernel")
        if inputs is not None and [t.name for t in inputs] != [t.name for t in block.sources]:
            raise ShapeError("customized: the inputs differ from the tensors the block's "
                             "input ops read; pass them in the order of block.input calls")
        bg = block.build()
        names = [self._own(t) for t in block.sources]
        outs = [self._new(self._fresh("custom"), shape) for shape in block.output_shapes]
        self._ops.append(Op.make("customized", names, [o.name for o in outs], block=bg))
        return outs

    def build(self) -> KernelGraph:
        from prism.ir.spec import check
        graph = KernelGraph(tuple(self._ops), tuple(self._tensors.items()), self.name)
        check(graph)
        return graph


class Block(_Builder):
    """Builds a `BlockGraph`: what each thread block of a custom kernel runs."""

    level = "block"

    def __init__(self, grid: Sequence[DimLike], forloop_range: DimLike = 1,
                 reduction_dimx: int = 64) -> None:
        super().__init__()
        sizes = tuple(dim(g) for g in grid)
        if not 1 <= len(sizes) <= MAX_GRID_DIMS:
            raise ShapeError(f"a block graph has 1 to {MAX_GRID_DIMS} grid dims, got {len(sizes)}")
        for size in (*sizes, dim(forloop_range)):
            if size.is_const and size.value < 1:
                raise ShapeError(f"grid sizes and the loop range must be ≥ 1, got {size.value}")
        self.grid: tuple[Dim, ...] = sizes
        self.forloop_range = dim(forloop_range)
        self.reduction_dimx = int(reduction_dimx)
        self.sources: list[Tensor] = []
        self.output_shapes: list[Shape] = []

    def input(self, source: Tensor, imap: MapLike = None, fmap: MapLike = None,
              name: str | None = None) -> Tensor:
        """Load tiles of kernel tensor `source`: imap per grid dim (a data dim or -1), fmap the
        data dim the loop walks (or -1), either may be "symbolic"."""
        if not isinstance(source, Tensor) or not isinstance(source.owner, Graph):
            raise ShapeError("Block.input reads a tensor of the kernel graph "
                             "(a prism.Graph tensor)")
        rank = len(source.shape)
        tile_name = name or self._fresh(f"{source.name}_tile")
        im = _as_map(imap, len(self.grid), rank, f"{tile_name}_im")
        fm = _as_map(fmap, 1, rank, f"{tile_name}_fm")
        tile = input_tile_shape(source.shape, im, fm, self.grid, self.forloop_range)
        out = self._new(tile_name, tile)
        self._ops.append(Op.make("input", (), [out.name], {"imap": im, "fmap": fm}))
        self.sources.append(source)
        return out

    new_input = input

    def accum(self, x: Tensor, kind: str = "nored", name: str | None = None,
              eps: float = 0.0) -> Tensor:
        """Close the loop body on `x` with accumulator `kind` (nored, red_ld_sum, red_ld_mean,
        red_ld_rms, redtox_ld_sum); `eps` is added under red_ld_rms's square root."""
        if op_def(kind).category != "accum":
            raise ShapeError(f"{kind!r} is not an accumulator; use nored, red_ld_sum, "
                             "red_ld_mean, red_ld_rms or redtox_ld_sum")
        attrs: dict[str, Any] = {"dimx": self.reduction_dimx} if kind == "redtox_ld_sum" else {}
        if eps:
            if kind != "red_ld_rms":
                raise ShapeError(f"only red_ld_rms takes an epsilon, not {kind}")
            attrs["eps"] = float(eps)
        return self._compute(kind, x, name=name, **attrs)

    forloop_accum = accum

    def output(self, x: Tensor, omap: MapLike = None) -> None:
        om = _as_map(omap, len(self.grid), len(x.shape), f"{x.name}_om")
        self._ops.append(Op.make("output", [self._own(x)], (), {"omap": om}))
        self.output_shapes.append(output_data_shape(x.shape, om, self.grid))

    new_output = output

    def build(self) -> BlockGraph:
        return BlockGraph(self.grid, self.forloop_range, tuple(self._ops),
                          tuple(self._tensors.items()), self.reduction_dimx)


def _as_map(m: MapLike, rows: int, rank: int, prefix: str) -> Map:
    if isinstance(m, Map):
        if m.num_rows != rows or m.rank != rank:
            raise ShapeError(f"map {m} has {m.num_rows}×{m.rank} entries; expected "
                             f"{rows} row(s) × {rank} data dims")
        return m
    if m == "symbolic":
        return Map.symbolic(prefix, rows, rank)
    if m is None:
        dims: list[int] = [-1] * rows
    elif isinstance(m, int):
        dims = [m]
    elif isinstance(m, str):
        raise ShapeError(f"map {m!r} is not understood; give data dims per row, -1, or 'symbolic'")
    else:
        dims = [int(d) for d in m]
    if len(dims) < rows:
        dims += [-1] * (rows - len(dims))
    if len(dims) != rows:
        raise ShapeError(f"map {tuple(dims)} has {len(dims)} entries for {rows} parallel dim(s)")
    return Map.concrete(dims, rank)
