"""Hand-built fused kernels: the best known single-kernel program of a workload, for orientation,
for tests of the interpreter and (later) of the verifier and code generator.

Each builder takes the workload's shapes and returns a `KernelGraph` with one custom kernel whose
block graph never writes an intermediate to device memory. Tile sizes default to 64 where they
divide, so the grid and loop stay small enough to interpret quickly; pass `grid`/`loop` to choose.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from prism.errors import ShapeError, UnknownWorkloadError
from prism.frontend.builder import Block, Graph
from prism.ir.graph import KernelGraph

Shapes = Mapping[str, Sequence[int]]


def _parts(size: int, tile: int = 64) -> int:
    """How many parts of `tile` (or the whole dim when it does not divide)."""
    return size // tile if size % tile == 0 and size >= tile else 1


def rmsnorm_matmul(shapes: Shapes, grid: int | None = None, loop: int | None = None
                   ) -> KernelGraph:
    """DESIGN.md §5: grid over W's columns (W split on dim 1, X replicated), loop over d (X and W
    walked on d), X@W accumulated with `nored` and rms(X) with `red_ld_rms`, divided after the
    loop, stored with omap on the columns."""
    (n, d), (_, cols) = shapes["X"], shapes["W"]
    g = Graph("rmsnorm_matmul.known_best")
    X, W = g.input("X", (n, d)), g.input("W", (d, cols))
    tb = Block(grid=(grid or _parts(cols),), forloop_range=loop or _parts(d))
    x = tb.input(X, imap=(-1,), fmap=1)
    w = tb.input(W, imap=(1,), fmap=0)
    y = tb.div(tb.accum(tb.matmul(x, w), "nored"), tb.accum(x, "red_ld_rms"))
    tb.output(y, omap=(1,))
    (out,) = g.customized(tb)
    g.output(out)
    return g.build()


def rmsnorm_mlp(shapes: Shapes, grid: int | None = None, loop: int | None = None) -> KernelGraph:
    """(rms_norm(X) @ Wup) * (rms_norm(X) @ Wgate) in one kernel: both products accumulate over
    d with `nored`, rms(X) with `red_ld_rms`; rms² divides the product after the loop."""
    (n, d), (_, cols) = shapes["X"], shapes["Wup"]
    g = Graph("rmsnorm_mlp.known_best")
    X, Wup, Wgate = g.input("X", (n, d)), g.input("Wup", (d, cols)), g.input("Wgate", (d, cols))
    tb = Block(grid=(grid or _parts(cols),), forloop_range=loop or _parts(d))
    x = tb.input(X, imap=(-1,), fmap=1)
    up, gate = tb.input(Wup, imap=(1,), fmap=0), tb.input(Wgate, imap=(1,), fmap=0)
    a, b = tb.accum(tb.matmul(x, up), "nored"), tb.accum(tb.matmul(x, gate), "nored")
    r = tb.accum(x, "red_ld_rms")
    tb.output(tb.div(tb.mul(a, b), tb.mul(r, r)), omap=(1,))
    (out,) = g.customized(tb)
    g.output(out)
    return g.build()


def _gated(name: str, act_weight: str, lin_weight: str) -> Callable[..., KernelGraph]:
    def build(shapes: Shapes, grid: int | None = None, loop: int | None = None) -> KernelGraph:
        (n, d), (_, cols) = shapes["X"], shapes[act_weight]
        g = Graph(f"{name}.known_best")
        X = g.input("X", (n, d))
        handles = {p: g.input(p, tuple(shapes[p])) for p in shapes if p != "X"}
        tb = Block(grid=(grid or _parts(cols),), forloop_range=loop or _parts(d))
        x = tb.input(X, imap=(-1,), fmap=1)
        tiles = {p: tb.input(h, imap=(1,), fmap=0) for p, h in handles.items()}
        act = tb.accum(tb.matmul(x, tiles[act_weight]), "nored")
        lin = tb.accum(tb.matmul(x, tiles[lin_weight]), "nored")
        tb.output(tb.mul(tb.silu(act), lin), omap=(1,))
        (out,) = g.customized(tb)
        g.output(out)
        return g.build()
    build.__doc__ = f"silu(X @ {act_weight}) * (X @ {lin_weight}): two `nored` products over d, " \
                    "silu and mul after the loop, grid over the columns."
    return build


def _attention(name: str, qk_norm: bool) -> Callable[..., KernelGraph]:
    def build(shapes: Shapes, grid: int | None = None, loop: int | None = None) -> KernelGraph:
        (b, rows, _d), (_, _, keys) = shapes["Q"], shapes["K"]
        g = Graph(f"{name}.known_best")
        Q, K, V = (g.input(p, tuple(shapes[p])) for p in ("Q", "K", "V"))
        tb = Block(grid=(b, grid or _parts(rows)), forloop_range=loop or _parts(keys))
        q = tb.input(Q, imap=(0, 1))             # a block of query rows of one batch
        k = tb.input(K, imap=(0, -1), fmap=2)    # the keys walked by the loop
        v = tb.input(V, imap=(0, -1), fmap=1)    # the values walked alike
        e = tb.exp(tb.matmul(tb.rms_norm(q) if qk_norm else q, k))
        tb.output(tb.div(tb.accum(tb.matmul(e, v)), tb.accum(e, "red_ld_sum")), omap=(0, 1))
        (out,) = g.customized(tb)
        g.output(out)
        return g.build()
    build.__doc__ = ("exp/sum/div attention in one kernel, flash-style without the max: grid "
                     "over the batch and blocks of query rows, loop over the keys; E·V and the "
                     "row sums of E accumulate, one division after the loop" +
                     (", Q normalised in the block." if qk_norm else "."))
    return build


def lora(shapes: Shapes, grid: int | None = None, loop: int | None = None) -> KernelGraph:
    """X @ W + (X @ A) @ B in one kernel: grid over the output columns (W and B split on
    columns, X and A replicated), no loop (X @ A must be complete before it meets B)."""
    (_, cols) = shapes["W"]
    g = Graph("lora.known_best")
    X, W, A, B = (g.input(p, tuple(shapes[p])) for p in ("X", "W", "A", "B"))
    tb = Block(grid=(grid or _parts(cols),), forloop_range=1)
    x, w = tb.input(X, imap=(-1,)), tb.input(W, imap=(1,))
    a, bt = tb.input(A, imap=(-1,)), tb.input(B, imap=(1,))
    y = tb.add(tb.matmul(x, w), tb.matmul(tb.matmul(x, a), bt))
    tb.output(tb.accum(y), omap=(1,))
    (out,) = g.customized(tb)
    g.output(out)
    return g.build()


def ntrans(shapes: Shapes, grid: int | None = None, loop: int | None = None) -> KernelGraph:
    """rms_norm(X + alpha * (rms_norm(H) + X)) in one kernel: grid over rows, each block owns
    whole rows (rms_norm needs them), no loop."""
    (rows, _) = shapes["X"]
    g = Graph("ntrans.known_best")
    H, X, alpha = (g.input(p, tuple(shapes[p])) for p in ("H", "X", "alpha"))
    tb = Block(grid=(grid or rows,), forloop_range=1)
    h, x, al = (tb.input(t, imap=(0,)) for t in (H, X, alpha))
    y = tb.add(x, tb.mul(al, tb.add(tb.rms_norm(h), x)))
    tb.output(tb.rms_norm(tb.accum(y)), omap=(0,))
    (out,) = g.customized(tb)
    g.output(out)
    return g.build()


KNOWN_BEST: dict[str, Callable[..., KernelGraph]] = {
    "rmsnorm_matmul": rmsnorm_matmul,
    "rmsnorm_mlp": rmsnorm_mlp,
    "swiglu": _gated("swiglu", "Wgate", "Wup"),
    "attention": _attention("attention", qk_norm=False),
    "qknorm_attention": _attention("qknorm_attention", qk_norm=True),
    "gated_mlp": _gated("gated_mlp", "W1", "W2"),
    "lora": lora,
    "gqa": _attention("gqa", qk_norm=False),
    "ntrans": ntrans,
}


def known_best(name: str, shapes: Shapes, **params: int) -> KernelGraph:
    """The hand-built fused kernel of workload `name` at `shapes`."""
    try:
        build = KNOWN_BEST[name]
    except KeyError:
        raise UnknownWorkloadError(f"no hand-built kernel for {name!r}; available: "
                                   f"{', '.join(KNOWN_BEST)}") from None
    try:
        return build(shapes, **params)
    except KeyError as e:
        raise ShapeError(f"{name}: shapes lack parameter {e.args[0]!r}") from None
