"""The op table: one closed vocabulary for kernel graphs and block graphs.

Every op is looked up here for its shape rule and its float64 reference semantics (and, as later
stages land, its abstract expression, verifier term and Triton lowering). `tests/ir/test_ops.py`
checks that every op has every entry and that every reference agrees with torch.

Conventions:
- Data dims are counted from the outermost, 0-based, as in Mirage's JSON maps.
- Binary elementwise ops broadcast numpy-style between operands of the same rank (a dim of 1
  stretches), as Mirage's `bc_div` does for `[n, c] / [n, 1]`.
- Reductions keep the reduced dim with size 1 (Mirage's reduction_k), so ranks never change.
- `rms_norm` normalises over the last dim with no epsilon: x / sqrt(mean(x², -1)).
- Reference functions take `lead`, the number of leading axes that are not data dims (the block
  interpreter stacks every thread block of the grid in front of the tile).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from prism.errors import PrismError, ShapeError
from prism.ir.dims import Dim, dim, evaluate, shape_str

Shape = tuple[Dim, ...]
Attrs = Mapping[str, Any]
ShapeRule = Callable[[list[Shape], Attrs], Shape]
Reference = Callable[[list[np.ndarray], Attrs, int], np.ndarray]

KERNEL = "kernel"
BLOCK = "block"


@dataclass(frozen=True)
class Accumulation:
    """How a for-loop accumulator folds its per-iteration tiles.

    `step(x, attrs)` is what one iteration contributes (summed over iterations);
    `finish(total, width, attrs)` turns the sum into the post-loop tile, where `width` is the
    number of elements each row saw in all (last-dim width × loop range).
    """

    step: Callable[[np.ndarray, Attrs], np.ndarray]
    finish: Callable[[np.ndarray, int, Attrs], np.ndarray]


@dataclass(frozen=True)
class OpDef:
    name: str
    category: str  # io | custom | unary | binary | scalar | matmul | reduce | norm | accum
    levels: frozenset[str]
    arity: int               # number of tensor inputs (-1: any)
    shape: ShapeRule | None  # None for io/custom ops, whose shapes come from elsewhere
    reference: Reference | None
    mirage: tuple[str, ...] = ()          # Mirage op_type spellings, kernel and block level
    attrs: tuple[str, ...] = ()           # attribute names the op requires
    accumulation: Accumulation | None = None
    doc: str = ""


# -- shape rules ---------------------------------------------------------------------------------

def dims_match(x: Dim, y: Dim) -> bool:
    """Whether two dims may be equal. Structurally equal dims are. With symbolic maps, tile dims
    carry 0/1 map bits and Prism's *symbolic dimension matching* applies: they can be equal iff
    the underlying data dims are, i.e. they agree with every bit 0 (each map factor becomes 1)
    and every size 1. The search records each such match as a constraint on the maps; `spec`
    under an assignment checks the real values."""
    if x == y:
        return True
    if not any(_has_bits(d) for d in (x, y)):
        return False
    try:
        return data_dim(x) == data_dim(y)
    except PrismError:
        return False


def data_dim(d: Dim) -> Dim:
    """The data dim behind a tile dim: `d` with every map bit 0 (no split) and every other
    variable 1 — the *trivial instantiation* of symbolic dimension matching, of the search's
    abstract expressions and of the hardware rule's "whole, unsplit dim"."""
    names = d.free_vars()
    if not names:
        return d
    bits = bit_names(d)
    return dim(evaluate(d, {n: 0 if n in bits else 1 for n in names}))


def bit_names(d: Dim) -> set[str]:
    return {a.name for m, _ in d.terms for a, _ in m if a.is_bit} | {
        n for m, _ in d.terms for a, _ in m if a.num is not None and a.den is not None
        for n in bit_names(a.num) | bit_names(a.den)}


def _has_bits(d: Dim) -> bool:
    return bool(bit_names(d))


def _same(shapes: list[Shape], attrs: Attrs) -> Shape:
    return shapes[0]


def _broadcast(shapes: list[Shape], attrs: Attrs) -> Shape:
    a, b = shapes
    if len(a) != len(b):
        raise ShapeError(f"elementwise operands have ranks {len(a)} and {len(b)} "
                         f"({shape_str(a)} vs {shape_str(b)}); give both the same rank "
                         "(use keepdim=True on reductions)")
    out = []
    for x, y in zip(a, b, strict=True):
        if dims_match(x, y) or y == dim(1):
            out.append(x)
        elif x == dim(1):
            out.append(y)
        else:
            raise ShapeError(f"elementwise operands {shape_str(a)} and {shape_str(b)} do not "
                             "broadcast; each dim must match or be 1")
    return tuple(out)


def _matmul(shapes: list[Shape], attrs: Attrs) -> Shape:
    a, b = shapes
    if len(a) < 2 or len(a) != len(b):
        raise ShapeError(f"matmul needs operands of the same rank ≥ 2, got {shape_str(a)} @ "
                         f"{shape_str(b)}")
    if not all(dims_match(x, y) for x, y in zip((*a[:-2], a[-1]), (*b[:-2], b[-2]), strict=True)):
        raise ShapeError(f"matmul shapes {shape_str(a)} @ {shape_str(b)} do not fit: batch dims "
                         "must be equal and A's last dim must equal B's second-to-last")
    return (*a[:-1], b[-1])


def _reduce(shapes: list[Shape], attrs: Attrs) -> Shape:
    (a,) = shapes
    d = attrs["dim"]
    if not isinstance(d, int) or not 0 <= d < len(a):
        raise ShapeError(f"reduction dim {d!r} is out of range for a tensor of shape "
                         f"{shape_str(a)}")
    return (*a[:d], dim(1), *a[d + 1:])


def _last_to_one(shapes: list[Shape], attrs: Attrs) -> Shape:
    # A last dim of 1 is well-formed (the loop still reduces); the search skips it as useless.
    (a,) = shapes
    return (*a[:-1], dim(1))


def _last_to_dimx(shapes: list[Shape], attrs: Attrs) -> Shape:
    (a,) = shapes
    return (*a[:-1], dim(attrs["dimx"]))


# -- reference semantics (float64) ---------------------------------------------------------------

def _unary(fn: Callable[[np.ndarray], np.ndarray]) -> Reference:
    def ref(xs: list[np.ndarray], attrs: Attrs, lead: int) -> np.ndarray:
        with np.errstate(over="ignore"):
            return fn(xs[0])
    return ref


def _binary(fn: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Reference:
    def ref(xs: list[np.ndarray], attrs: Attrs, lead: int) -> np.ndarray:
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            return fn(xs[0], xs[1])
    return ref


def _silu(x: np.ndarray) -> np.ndarray:
    return x / (1.0 + np.exp(-x))


_erf = np.frompyfunc(math.erf, 1, 1)


def _gelu(x: np.ndarray) -> np.ndarray:
    # The exact (erf) GELU, as torch.nn.functional.gelu's default.
    erf = np.asarray(_erf(x / math.sqrt(2.0)), dtype=np.float64)
    return 0.5 * x * (1.0 + erf)


def _sum_ref(xs: list[np.ndarray], attrs: Attrs, lead: int) -> np.ndarray:
    return xs[0].sum(axis=lead + attrs["dim"], keepdims=True)


def _mean_ref(xs: list[np.ndarray], attrs: Attrs, lead: int) -> np.ndarray:
    return xs[0].mean(axis=lead + attrs["dim"], keepdims=True)


def _rms_norm_ref(xs: list[np.ndarray], attrs: Attrs, lead: int) -> np.ndarray:
    x = xs[0]
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True))


def _matmul_ref(xs: list[np.ndarray], attrs: Attrs, lead: int) -> np.ndarray:
    return np.matmul(xs[0], xs[1])


def _mul_scalar_ref(xs: list[np.ndarray], attrs: Attrs, lead: int) -> np.ndarray:
    return xs[0] * float(attrs["scalar"])


def _redtox_step(x: np.ndarray, attrs: Attrs) -> np.ndarray:
    # The last dim of length L is L/dimx consecutive chunks of width dimx, summed elementwise.
    rdx = int(attrs["dimx"])
    return x.reshape(*x.shape[:-1], x.shape[-1] // rdx, rdx).sum(axis=-2)


ACCUMULATIONS: dict[str, Accumulation] = {
    # Σ_iter x
    "nored": Accumulation(lambda x, a: x, lambda t, w, a: t),
    # Σ_iter Σ_last x
    "red_ld_sum": Accumulation(lambda x, a: x.sum(axis=-1, keepdims=True), lambda t, w, a: t),
    # (Σ_iter Σ_last x) / (width · F)
    "red_ld_mean": Accumulation(lambda x, a: x.sum(axis=-1, keepdims=True), lambda t, w, a: t / w),
    # sqrt((Σ_iter Σ_last x²) / (width · F)): the true RMS, as Mirage's kernels compute it
    "red_ld_rms": Accumulation(lambda x, a: (x * x).sum(axis=-1, keepdims=True),
                               lambda t, w, a: np.sqrt(t / w)),
    # out[..., j] = Σ_iter Σ_c x[..., c·dimx + j]
    "redtox_ld_sum": Accumulation(_redtox_step, lambda t, w, a: t),
}


# -- the table -----------------------------------------------------------------------------------

_BOTH = frozenset({KERNEL, BLOCK})
_K = frozenset({KERNEL})
_B = frozenset({BLOCK})


def _op(name: str, category: str, levels: frozenset[str], arity: int, shape: ShapeRule | None,
        reference: Reference | None, mirage: tuple[str, ...] = (), attrs: tuple[str, ...] = (),
        doc: str = "", accumulation: Accumulation | None = None) -> OpDef:
    return OpDef(name, category, levels, arity, shape, reference, mirage, attrs, accumulation, doc)


def _ew(name: str) -> tuple[str, str]:
    return (f"kn_{name}_op", f"tb_{name}_op")


OPS: dict[str, OpDef] = {o.name: o for o in [
    _op("input", "io", _BOTH, 0, None, None, ("kn_input_op", "tb_input_op"),
        doc="a graph input (kernel) or a tile loaded by imap/fmap (block)"),
    _op("output", "io", _BOTH, 1, None, None, ("kn_output_op", "tb_output_op"),
        doc="a graph output (kernel) or a tile stored by omap (block)"),
    _op("customized", "custom", _K, -1, None, None, ("kn_customized_op",),
        doc="a custom kernel defined by a block graph"),
    _op("matmul", "matmul", _BOTH, 2, _matmul, _matmul_ref, _ew("matmul"), doc="A @ B"),
    _op("exp", "unary", _BOTH, 1, _same, _unary(np.exp), _ew("exp"), doc="e^x"),
    _op("silu", "unary", _BOTH, 1, _same, _unary(_silu), _ew("silu"), doc="x·sigmoid(x)"),
    _op("relu", "unary", _BOTH, 1, _same, _unary(lambda x: np.maximum(x, 0.0)), _ew("relu"),
        doc="max(x, 0)"),
    _op("gelu", "unary", _BOTH, 1, _same, _unary(_gelu), _ew("gelu"), doc="x·Φ(x), exact (erf)"),
    _op("sqrt", "unary", _BOTH, 1, _same, _unary(np.sqrt), _ew("sqrt"), doc="√x"),
    _op("square", "unary", _BOTH, 1, _same, _unary(lambda x: x * x), _ew("square"), doc="x²"),
    _op("add", "binary", _BOTH, 2, _broadcast, _binary(np.add), _ew("add"), doc="a + b"),
    _op("mul", "binary", _BOTH, 2, _broadcast, _binary(np.multiply), _ew("mul"), doc="a · b"),
    _op("div", "binary", _BOTH, 2, _broadcast, _binary(np.divide), _ew("div"), doc="a / b"),
    _op("pow", "binary", _BOTH, 2, _broadcast, _binary(np.power), _ew("pow"), doc="a ^ b"),
    _op("mul_scalar", "scalar", _BOTH, 1, _same, _mul_scalar_ref, _ew("mul_scalar"),
        ("scalar",), doc="x · c for a constant c"),
    _op("sum", "reduce", _BOTH, 1, _reduce, _sum_ref,
        tuple(f"{lvl}_reduction_{k}_op" for lvl in ("kn", "tb") for k in range(3)), ("dim",),
        doc="Σ over one dim (kept with size 1)"),
    _op("mean", "reduce", _BOTH, 1, _reduce, _mean_ref, (), ("dim",),
        doc="mean over one dim (kept with size 1)"),
    _op("rms_norm", "norm", _BOTH, 1, _same, _rms_norm_ref, ("kn_rms_norm_op", "tb_rms_norm_op"),
        doc="x / sqrt(mean(x², last dim))"),
    *[_op(kind, "accum", _B, 1, _last_to_dimx if kind == "redtox_ld_sum" else
          _same if kind == "nored" else _last_to_one, None,
          (f"tb_accum_{kind}_op", f"tb_forloop_accum_{kind}_op") +
          (("tb_forloop_accum_no_red_op",) if kind == "nored" else ()),
          ("dimx",) if kind == "redtox_ld_sum" else (), accumulation=acc,
          doc="for-loop accumulator")
      for kind, acc in ACCUMULATIONS.items()],
]}

COMPUTE_CATEGORIES = frozenset({"unary", "binary", "scalar", "matmul", "reduce", "norm"})


def op_def(name: str) -> OpDef:
    try:
        return OPS[name]
    except KeyError:
        raise ShapeError(f"unknown op {name!r}; known ops: {', '.join(sorted(OPS))}") from None


def infer_shape(name: str, shapes: list[Shape], attrs: Attrs) -> Shape:
    """The output shape of op `name` on inputs of `shapes`, or a `ShapeError` saying why not."""
    od = op_def(name)
    if od.shape is None:
        raise ShapeError(f"op {name!r} has no shape rule of its own")
    if od.arity >= 0 and len(shapes) != od.arity:
        raise ShapeError(f"op {name} takes {od.arity} input(s), got {len(shapes)}")
    missing = [a for a in od.attrs if a not in attrs]
    if missing:
        raise ShapeError(f"op {name} needs attribute(s) {', '.join(missing)}")
    for key in od.attrs:
        if not _ATTR_CHECKS[key](attrs[key]):
            raise ShapeError(f"op {name}: attribute {key}={attrs[key]!r} is not {_ATTR_KINDS[key]}")
    return od.shape(shapes, attrs)


_ATTR_CHECKS: dict[str, Callable[[Any], bool]] = {
    "dim": lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0,
    "dimx": lambda v: isinstance(v, int) and not isinstance(v, bool) and v > 0,
    "scalar": lambda v: isinstance(v, int | float) and not isinstance(v, bool)
    and math.isfinite(v),
}
_ATTR_KINDS = {"dim": "a data-dim index (int ≥ 0)", "dimx": "a positive int",
               "scalar": "a finite number"}
