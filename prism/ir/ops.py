"""The op table: one closed vocabulary for kernel graphs and block graphs, and the single source
of what every stage knows about an op.

Every op is looked up here for its shape rule, its float64 reference semantics, its verifier term
(`term_attrs`: which attributes become atom arguments; the abstract expression is that term at
the trivial instantiation), its Triton lowering in a kernel body and its torch form as a
pre-defined kernel, whether it keeps padded lanes zero, its FLOPs, its solver encoding
(`prism.smt`) and the operand domains the randomized checks draw from. Its axioms are in
`prism.expr.axioms`, generated from the categories here (an elementwise op commutes with every
data movement) plus the op's own identities, each proved by z3. `tests/ir/test_ops.py` checks
that every op has every entry and that every reference agrees with torch.

Conventions:
- Data dims are counted from the outermost, 0-based, as in Mirage's JSON maps.
- Binary elementwise ops broadcast numpy-style between operands of the same rank (a dim of 1
  stretches), as Mirage's `bc_div` does for `[n, c] / [n, 1]`.
- Reductions keep the reduced dim with size 1 (Mirage's reduction_k), so ranks never change.
- `rms_norm` normalises over the last dim: x / sqrt(mean(x², -1) + eps); an rms_norm without
  eps (Mirage's, and a hand-built graph's) has eps 0. The frontend gives torch's default.
- Reference functions take `lead`, the number of leading axes that are not data dims (the block
  interpreter stacks every thread block of the grid in front of the tile).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from prism.errors import PrismError, ShapeError
from prism.ir.dims import Dim, const, dim, evaluate, shape_str

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


# Operand domains for the randomized checks: what a value must be, for the ops that read it to
# be defined (any real, nonzero, or > 0); `OpDef.domains` and `OpDef.passes` use them.
ANY, NONZERO, POSITIVE = 0, 1, 2

# How an op reaches the solver (`prism.smt`): `POLY` ops are the encoder's own polynomial
# arithmetic (+, ·, ÷ and constants), `REDUCE` ops its sums over a data index; a callable
# `smt(z3, operands, attrs)` builds a z3 term from the operands' and the scalar attributes' z3
# terms (piecewise: relu, abs, max);
# None is an uninterpreted function of the operands, so an axiom about it holds for every
# function (exp, tanh, log, ...).
POLY, REDUCE = "poly", "reduce"
SmtRule = str | Callable[[Any, list[Any], Attrs], Any] | None
TritonRule = str | Callable[[list[str], Attrs], str] | None


@dataclass(frozen=True)
class OpDef:
    """Everything the stages need to know about one op, in one place.

    `triton` is the op's expression inside a kernel body: a template over fp32 operands (`{0}`,
    `{1}`) and attributes (`{scalar}`), or a function of the operand expressions and attributes;
    None for the ops the code generator lowers itself (`structural`: they reduce over a dim, so
    they need the tile's true sizes and a mask). `torch` is the launcher's one-call form of the op
    as a pre-defined kernel. `keeps_zero`: padded lanes stay 0 when the operands' do (f(0) = 0);
    a function of the attributes where it depends on them (clamp). `flops`: how many FLOPs each of
    the category's counted elements costs (`prism.cost.model`; a norm's rule counts 3 a row
    element already). `term_attrs`: the attributes that become atom
    arguments of the verifier's term, in order, after the tensor operands (`last` is the index
    of the last dim). `domains`: operand index → the values on which the op is defined;
    `passes(i, need)`: what operand i must be for the op's value to be `need` (default: `need`).
    """

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
    triton: TritonRule = None
    structural: bool = False
    torch: str | None = None
    keeps_zero: bool | Callable[[Attrs], bool] = False
    flops: int = 1
    smt: SmtRule = None
    term_attrs: tuple[str, ...] = ()
    commutative: bool = False
    domains: Mapping[int, int] = field(default_factory=dict)
    passes: Callable[[int, int], int] | None = None
    optional: Mapping[str, Any] = field(default_factory=dict)   # attribute → its default

    @property
    def compute(self) -> bool:
        return self.category in COMPUTE_CATEGORIES

    def zero_preserving(self, attrs: Attrs) -> bool:
        return self.keeps_zero(attrs) if callable(self.keeps_zero) else self.keeps_zero

    def triton_expr(self, operands: list[str], attrs: Attrs) -> str:
        """The op's fp32 expression in a kernel body, on operand expressions `operands`."""
        if self.triton is None:
            raise ValueError(f"{self.name} is lowered by the code generator itself")
        if callable(self.triton):
            return self.triton(operands, attrs)
        return self.triton.format(*operands, **attrs)


# -- shape rules ---------------------------------------------------------------------------------

@functools.cache
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


@functools.cache
def data_dim(d: Dim) -> Dim:
    """The data dim behind a tile dim: `d` with every map bit 0 (no split) and every other
    variable 1 — the *trivial instantiation* of symbolic dimension matching, of the search's
    abstract expressions and of the hardware rule's "whole, unsplit dim"."""
    names = d.free_vars()
    if not names:
        return d
    bits = bit_names(d)
    return dim(evaluate(d, {n: 0 if n in bits else 1 for n in names}))


@functools.cache
def bit_names(d: Dim) -> frozenset[str]:
    return frozenset({a.name for m, _ in d.terms for a, _ in m if a.is_bit} | {
        n for m, _ in d.terms for a, _ in m if a.num is not None and a.den is not None
        for n in bit_names(a.num) | bit_names(a.den)})


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

def _rescaled(shapes: list[Shape], attrs: Attrs) -> Shape:
    """`nored_rescale(x, m)`: x's shape; m one value per row of x (its last dim 1)."""
    x, m = shapes
    if len(m) != len(x) or m[-1] != const(1) or not all(
            dims_match(a, b) or b == const(1) for a, b in zip(x[:-1], m[:-1], strict=True)):
        raise ShapeError(f"nored_rescale(x, m) needs m of one value per row of x (x's shape with "
                         f"a last dim of 1), got x {shape_str(x)}, m {shape_str(m)}")
    return x


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


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _gelu_tanh(x: np.ndarray) -> np.ndarray:
    # GELU's tanh form, as torch.nn.functional.gelu(x, approximate="tanh").
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def _softplus(x: np.ndarray) -> np.ndarray:
    # torch's softplus (beta 1, threshold 20): x itself above the threshold.
    return np.where(x > 20.0, x, np.log1p(np.exp(np.minimum(x, 20.0))))


def _with_attrs(fn: Callable[[np.ndarray, Attrs], np.ndarray]) -> Reference:
    def ref(xs: list[np.ndarray], attrs: Attrs, lead: int) -> np.ndarray:
        with np.errstate(over="ignore", invalid="ignore"):
            return fn(xs[0], attrs)
    return ref


def _clamp(x: np.ndarray, attrs: Attrs) -> np.ndarray:
    lo, hi = attrs["lo"], attrs["hi"]
    if lo is not None:
        x = np.maximum(x, float(lo))
    if hi is not None:
        x = np.minimum(x, float(hi))
    return x


def _reduction(fn: Callable[..., np.ndarray]) -> Reference:
    def ref(xs: list[np.ndarray], attrs: Attrs, lead: int) -> np.ndarray:
        with np.errstate(over="ignore", invalid="ignore"):
            return fn(xs[0], axis=lead + attrs["dim"], keepdims=True)
    return ref


def _logsumexp(x: np.ndarray, axis: int, keepdims: bool) -> np.ndarray:
    top = np.max(x, axis=axis, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    return np.log(np.sum(np.exp(x - top), axis=axis, keepdims=True)) + top


def _rms_norm_ref(xs: list[np.ndarray], attrs: Attrs, lead: int) -> np.ndarray:
    x = xs[0]
    with np.errstate(divide="ignore", invalid="ignore"):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + float(attrs.get("eps", 0.0)))


def _layer_norm_ref(xs: list[np.ndarray], attrs: Attrs, lead: int) -> np.ndarray:
    x = xs[0]
    centred = x - np.mean(x, axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        return centred / np.sqrt(np.mean(centred * centred, axis=-1, keepdims=True)
                                 + float(attrs.get("eps", 0.0)))


def _matmul_ref(xs: list[np.ndarray], attrs: Attrs, lead: int) -> np.ndarray:
    a, b = xs
    if a.ndim > 2 or b.ndim > 2:
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        count = math.prod(batch)
        if count <= _BLAS_LOOP and a.shape[-2] * a.shape[-1] * b.shape[-1] >= _BLAS_SIZE:
            return _matmul_by_slice(a, b, batch)
    return np.matmul(a, b)


# NumPy's stacked matmul leaves BLAS for some shapes: a few rows against a long inner dim
# (an attention tile, [2, 8, 8192] @ [2, 8192, 128]) took 129 ms where the same products one
# slice at a time took 5 ms. A few large slices are therefore multiplied one at a time.
_BLAS_LOOP, _BLAS_SIZE = 64, 1 << 18


def _matmul_by_slice(a: np.ndarray, b: np.ndarray, batch: tuple[int, ...]) -> np.ndarray:
    """`np.matmul(a, b)` for stacked operands, one 2-D product per slice of the batch."""
    # broadcast views, indexed slice by slice: a tile every block shares is never copied
    left = np.broadcast_to(a, (*batch, *a.shape[-2:]))
    right = np.broadcast_to(b, (*batch, *b.shape[-2:]))
    out = np.empty((*batch, a.shape[-2], b.shape[-1]), dtype=np.result_type(a, b))
    for i in np.ndindex(*batch):
        np.matmul(left[i], right[i], out=out[i])
    return out


def _mul_scalar_ref(xs: list[np.ndarray], attrs: Attrs, lead: int) -> np.ndarray:
    return xs[0] * float(attrs["scalar"])


def _add_scalar_ref(xs: list[np.ndarray], attrs: Attrs, lead: int) -> np.ndarray:
    return xs[0] + float(attrs["scalar"])


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
    # sqrt((Σ_iter Σ_last x²) / (width · F) + eps): the true RMS, as Mirage's kernels compute it
    # (eps 0), with the epsilon of torch's rms_norm when one is given
    "red_ld_rms": Accumulation(lambda x, a: (x * x).sum(axis=-1, keepdims=True),
                               lambda t, w, a: np.sqrt(t / w + float(a.get("eps", 0.0)))),
    # out[..., j] = Σ_iter Σ_c x[..., c·dimx + j]
    "redtox_ld_sum": Accumulation(_redtox_step, lambda t, w, a: t),
}


# -- the table -----------------------------------------------------------------------------------

_BOTH = frozenset({KERNEL, BLOCK})
_K = frozenset({KERNEL})
_B = frozenset({BLOCK})


def _op(name: str, category: str, levels: frozenset[str], arity: int, shape: ShapeRule | None,
        reference: Reference | None, mirage: tuple[str, ...] = (), attrs: tuple[str, ...] = (),
        doc: str = "", accumulation: Accumulation | None = None, **code: Any) -> OpDef:
    return OpDef(name, category, levels, arity, shape, reference, mirage, attrs, accumulation, doc,
                 **code)


def _ew(name: str) -> tuple[str, str]:
    return (f"kn_{name}_op", f"tb_{name}_op")


def _unary_op(name: str, fn: Callable[[np.ndarray], np.ndarray], doc: str, triton: str,
              torch: str, keeps_zero: bool, smt: SmtRule = None, flops: int = 1,
              domains: Mapping[int, int] | None = None,
              passes: Callable[[int, int], int] | None = None) -> OpDef:
    return _op(name, "unary", _BOTH, 1, _same, _unary(fn), _ew(name), doc=doc, triton=triton,
               torch=torch, keeps_zero=keeps_zero, smt=smt, flops=flops,
               domains=domains or {}, passes=passes)


def _binary_op(name: str, fn: Callable[[np.ndarray, np.ndarray], np.ndarray], doc: str,
               triton: str, torch: str, keeps_zero: bool, smt: SmtRule = None,
               commutative: bool = False, domains: Mapping[int, int] | None = None,
               passes: Callable[[int, int], int] | None = None) -> OpDef:
    return _op(name, "binary", _BOTH, 2, _broadcast, _binary(fn), _ew(name), doc=doc,
               triton=triton, torch=torch, keeps_zero=keeps_zero, smt=smt,
               commutative=commutative, domains=domains or {}, passes=passes)


def _clamp_triton(xs: list[str], attrs: Attrs) -> str:
    out = xs[0]
    if attrs["lo"] is not None:
        out = f"tl.maximum({out}, {float(attrs['lo'])!r})"
    if attrs["hi"] is not None:
        out = f"tl.minimum({out}, {float(attrs['hi'])!r})"
    return out


def _clamp_smt(z3: Any, xs: list[Any], attrs: Attrs) -> Any:
    # attrs are z3 reals (None: no bound), as `prism.smt` hands them over
    x, lo, hi = xs[0], attrs["lo"], attrs["hi"]
    if lo is not None:
        x = z3.If(x < lo, lo, x)
    if hi is not None:
        x = z3.If(x > hi, hi, x)
    return x


def _clamp_keeps_zero(attrs: Attrs) -> bool:
    lo, hi = attrs["lo"], attrs["hi"]
    return (lo is None or lo <= 0) and (hi is None or hi >= 0)


def _leaky_smt(z3: Any, xs: list[Any], attrs: Attrs) -> Any:
    return z3.If(xs[0] > 0, xs[0], xs[0] * attrs["slope"])


# √(2/π), for GELU's tanh form; tanh(y) is 2·sigmoid(2y) − 1 in a kernel (exact in real
# arithmetic; Triton's core language has no tanh that runs in the interpreter).
_GELU_TANH = ("0.5 * {0} * (1.0 + (2.0 * tl.sigmoid(1.5957691216057308 * ({0} + 0.044715 * {0} "
              "* {0} * {0})) - 1.0))")

OPS: dict[str, OpDef] = {o.name: o for o in [
    _op("input", "io", _BOTH, 0, None, None, ("kn_input_op", "tb_input_op"),
        doc="a graph input (kernel) or a tile loaded by imap/fmap (block)"),
    _op("output", "io", _BOTH, 1, None, None, ("kn_output_op", "tb_output_op"),
        doc="a graph output (kernel) or a tile stored by omap (block)"),
    _op("customized", "custom", _K, -1, None, None, ("kn_customized_op",),
        doc="a custom kernel defined by a block graph"),
    _op("matmul", "matmul", _BOTH, 2, _matmul, _matmul_ref, _ew("matmul"), doc="A @ B",
        structural=True, torch="torch.matmul({0}, {1})", keeps_zero=True, smt=REDUCE),
    # -- unary -------------------------------------------------------------------------------
    _unary_op("exp", np.exp, "e^x", "tl.exp({0})", "torch.exp({0})", False,
              passes=lambda i, need: ANY),                      # e^x > 0 for every x
    _unary_op("silu", _silu, "x·sigmoid(x)", "{0} * tl.sigmoid({0})",
              "torch.nn.functional.silu({0})", True),
    _unary_op("relu", lambda x: np.maximum(x, 0.0), "max(x, 0)", "tl.maximum({0}, 0.0)",
              "torch.relu({0})", True, smt=lambda z3, xs, a: z3.If(xs[0] > 0, xs[0], 0),
              passes=lambda i, need: POSITIVE if need else ANY),  # relu(x) ≠ 0 iff x > 0
    _unary_op("gelu", _gelu, "x·Φ(x), exact (erf)",
              "0.5 * {0} * (1.0 + tl.erf({0} * 0.7071067811865476))",
              "torch.nn.functional.gelu({0})", True),
    _unary_op("gelu_tanh", _gelu_tanh, "x·Φ(x), GELU's tanh form", _GELU_TANH,
              "torch.nn.functional.gelu({0}, approximate='tanh')", True, flops=10),
    _unary_op("sqrt", np.sqrt, "√x", "tl.sqrt({0})", "torch.sqrt({0})", True,
              domains={0: POSITIVE}),
    _unary_op("square", lambda x: x * x, "x²", "{0} * {0}", "torch.square({0})", True,
              smt=POLY, passes=lambda i, need: min(need, NONZERO)),   # x² > 0 iff x ≠ 0
    _unary_op("neg", np.negative, "−x", "-{0}", "torch.neg({0})", True, smt=POLY,
              passes=lambda i, need: min(need, NONZERO)),
    _unary_op("reciprocal", lambda x: 1.0 / x, "1 / x", "1.0 / {0}", "torch.reciprocal({0})",
              False, smt=POLY, domains={0: NONZERO}),
    _unary_op("sigmoid", _sigmoid, "1 / (1 + e^−x)", "tl.sigmoid({0})", "torch.sigmoid({0})",
              False, flops=4, passes=lambda i, need: ANY),         # sigmoid(x) > 0
    _unary_op("tanh", np.tanh, "tanh x", "2.0 * tl.sigmoid(2.0 * {0}) - 1.0", "torch.tanh({0})",
              True, flops=5),
    _unary_op("abs", np.abs, "|x|", "tl.abs({0})", "torch.abs({0})", True,
              smt=lambda z3, xs, a: z3.If(xs[0] < 0, -xs[0], xs[0]),
              passes=lambda i, need: min(need, NONZERO)),          # |x| > 0 iff x ≠ 0
    _unary_op("log", np.log, "ln x", "tl.log({0})", "torch.log({0})", False,
              domains={0: POSITIVE}, passes=lambda i, need: POSITIVE),
    _unary_op("softplus", _softplus, "ln(1 + e^x), x above 20 (torch's threshold)",
              "tl.where({0} > 20.0, {0}, tl.log(1.0 + tl.exp(tl.minimum({0}, 20.0))))",
              "torch.nn.functional.softplus({0})", False, flops=4,
              passes=lambda i, need: ANY),                          # softplus(x) > 0
    _op("leaky_relu", "unary", _BOTH, 1, _same, _with_attrs(
        lambda x, a: np.where(x > 0, x, x * float(a["slope"]))), _ew("leaky_relu"), ("slope",),
        doc="x for x > 0, slope·x otherwise", triton="tl.where({0} > 0, {0}, {0} * {slope!r})",
        torch="torch.nn.functional.leaky_relu({0}, {slope!r})", keeps_zero=True,
        smt=_leaky_smt, term_attrs=("slope",)),
    _op("clamp", "unary", _BOTH, 1, _same, _with_attrs(_clamp), _ew("clamp"), ("lo", "hi"),
        doc="min(max(x, lo), hi); either bound may be None", triton=_clamp_triton,
        torch="torch.clamp({0}, {lo!r}, {hi!r})", keeps_zero=_clamp_keeps_zero, smt=_clamp_smt,
        term_attrs=("lo", "hi"), passes=lambda i, need: ANY if need == ANY else POSITIVE),
    # -- binary ------------------------------------------------------------------------------
    _binary_op("add", np.add, "a + b", "{0} + {1}", "torch.add({0}, {1})", True, smt=POLY,
               commutative=True),
    _binary_op("sub", np.subtract, "a − b", "{0} - {1}", "torch.sub({0}, {1})", True, smt=POLY),
    _binary_op("mul", np.multiply, "a · b", "{0} * {1}", "torch.mul({0}, {1})", True, smt=POLY,
               commutative=True),
    _binary_op("div", np.divide, "a / b", "{0} / {1}", "torch.div({0}, {1})", False, smt=POLY,
               domains={1: NONZERO}),
    _binary_op("pow", np.power, "a ^ b", "_pow({0}, {1})", "torch.pow({0}, {1})", False,
               domains={0: POSITIVE}, passes=lambda i, need: need if i == 0 else ANY),
    _binary_op("maximum", np.maximum, "max(a, b)", "tl.maximum({0}, {1})",
               "torch.maximum({0}, {1})", True, commutative=True,
               smt=lambda z3, xs, a: z3.If(xs[0] >= xs[1], xs[0], xs[1]),
               passes=lambda i, need: ANY if need == ANY else POSITIVE),
    _binary_op("minimum", np.minimum, "min(a, b)", "tl.minimum({0}, {1})",
               "torch.minimum({0}, {1})", True, commutative=True,
               smt=lambda z3, xs, a: z3.If(xs[0] <= xs[1], xs[0], xs[1]),
               passes=lambda i, need: ANY if need == ANY else POSITIVE),
    # -- scalar ------------------------------------------------------------------------------
    _op("mul_scalar", "scalar", _BOTH, 1, _same, _mul_scalar_ref, _ew("mul_scalar"),
        ("scalar",), doc="x · c for a constant c", triton="{0} * {scalar!r}",
        torch="torch.mul({0}, {scalar!r})", keeps_zero=True, smt=POLY, term_attrs=("scalar",)),
    _op("add_scalar", "scalar", _BOTH, 1, _same, _add_scalar_ref, _ew("add_scalar"),
        ("scalar",), doc="x + c for a constant c", triton="{0} + {scalar!r}",
        torch="torch.add({0}, {scalar!r})", keeps_zero=lambda a: a["scalar"] == 0, smt=POLY,
        term_attrs=("scalar",), passes=lambda i, need: ANY if need == ANY else POSITIVE),
    # -- reductions (the reduced dim is kept with size 1) --------------------------------------
    _op("sum", "reduce", _BOTH, 1, _reduce, _reduction(np.sum),
        tuple(f"{lvl}_reduction_{k}_op" for lvl in ("kn", "tb") for k in range(3)), ("dim",),
        doc="Σ over one dim", structural=True,
        torch="torch.sum({0}, dim={dim}, keepdim=True)", keeps_zero=True, smt=REDUCE,
        term_attrs=("dim",)),
    _op("mean", "reduce", _BOTH, 1, _reduce, _reduction(np.mean), (), ("dim",),
        doc="mean over one dim", structural=True,
        torch="torch.mean({0}, dim={dim}, keepdim=True)", smt=REDUCE,
        term_attrs=("dim",)),
    _op("max", "reduce", _BOTH, 1, _reduce, _reduction(np.max), (), ("dim",),
        doc="max over one dim", structural=True,
        torch="torch.amax({0}, dim={dim}, keepdim=True)", smt=REDUCE, term_attrs=("dim",),
        passes=lambda i, need: ANY if need == ANY else POSITIVE),
    _op("min", "reduce", _BOTH, 1, _reduce, _reduction(np.min), (), ("dim",),
        doc="min over one dim", structural=True,
        torch="torch.amin({0}, dim={dim}, keepdim=True)", smt=REDUCE, term_attrs=("dim",),
        passes=lambda i, need: ANY if need == ANY else POSITIVE),
    _op("logsumexp", "reduce", _BOTH, 1, _reduce, _reduction(_logsumexp), (), ("dim",),
        doc="ln Σ e^x over one dim (computed with the max subtracted)", structural=True,
        torch="torch.logsumexp({0}, dim={dim}, keepdim=True)", smt=REDUCE, flops=3,
        term_attrs=("dim",), passes=lambda i, need: ANY if need == ANY else POSITIVE),
    # -- norms over the last dim ---------------------------------------------------------------
    _op("rms_norm", "norm", _BOTH, 1, _same, _rms_norm_ref, ("kn_rms_norm_op", "tb_rms_norm_op"),
        doc="x / sqrt(mean(x², last dim) + eps)", structural=True, torch="_rms_norm({0}, {eps!r})",
        smt=REDUCE, term_attrs=("last", "eps"), optional={"eps": 0.0},
        domains={0: NONZERO}),
    _op("layer_norm", "norm", _BOTH, 1, _same, _layer_norm_ref, (),
        doc="(x − mean) / sqrt(var + eps) over the last dim (no weight or bias: those are a mul "
        "and an add)", structural=True,
        torch="torch.nn.functional.layer_norm({0}, ({0}.shape[-1],), eps={eps!r})",
        smt=REDUCE, flops=2, term_attrs=("last", "eps"), optional={"eps": 0.0},
        domains={0: NONZERO}),
    *[_op(kind, "accum", _B, 1, _last_to_dimx if kind == "redtox_ld_sum" else
          _same if kind == "nored" else _last_to_one, None,
          (f"tb_accum_{kind}_op", f"tb_forloop_accum_{kind}_op") +
          (("tb_forloop_accum_no_red_op",) if kind == "nored" else ()),
          ("dimx",) if kind == "redtox_ld_sum" else (), accumulation=acc,
          doc="for-loop accumulator", structural=True, keeps_zero=kind != "red_ld_mean" and
          kind != "red_ld_rms", flops=2 if kind == "red_ld_rms" else 1,
          optional={"eps": 0.0} if kind == "red_ld_rms" else {},
          passes=(lambda i, need: min(need, NONZERO)) if kind == "red_ld_rms" else None)
      for kind, acc in ACCUMULATIONS.items()],
    # The online-softmax accumulator (FlashAttention's recurrence): each iteration's tile x was
    # taken under its own row max m; the sum is kept under the running max M of the m seen so
    # far, rescaled by e^(M_old − M_new) as M grows, so after the loop it is Σ_i x_i · e^(m_i − M)
    # with M the max of every m_i. Two operands, so not an `Accumulation` (interpreter, verifier
    # and code generator each handle it by name).
    _op("nored_rescale", "accum", _B, 2, _rescaled, None, (),
        doc="for-loop accumulator: Σ_iter x · e^(m − max_iter m), kept under a running max",
        structural=True, flops=4),
]}

# The accumulators that take a row max beside their tile (`nored_rescale`).
RESCALED = frozenset({"nored_rescale"})

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
    for key in (*od.attrs, *(k for k in od.optional if k in attrs)):
        if not _ATTR_CHECKS[key](attrs[key]):
            raise ShapeError(f"op {name}: attribute {key}={attrs[key]!r} is not {_ATTR_KINDS[key]}")
    return od.shape(shapes, attrs)


def with_defaults(name: str, attrs: Attrs) -> dict[str, Any]:
    """`attrs` with the op's optional attributes filled in (rms_norm's eps: 0, Mirage's)."""
    return {**OPS[name].optional, **attrs}


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


_ATTR_CHECKS: dict[str, Callable[[Any], bool]] = {
    "dim": lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0,
    "dimx": lambda v: isinstance(v, int) and not isinstance(v, bool) and v > 0,
    "scalar": _number,
    "slope": _number,
    "lo": lambda v: v is None or _number(v),
    "hi": lambda v: v is None or _number(v),
    "eps": lambda v: _number(v) and v >= 0,
}
_ATTR_KINDS = {"dim": "a data-dim index (int ≥ 0)", "dimx": "a positive int",
               "scalar": "a finite number", "slope": "a finite number",
               "lo": "a finite number or None", "hi": "a finite number or None",
               "eps": "a finite number ≥ 0"}
