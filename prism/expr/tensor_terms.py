"""Tensor terms: what the verifier's terms mean, and what it knows about each one.

A term denotes a *stacked* tensor: a tensor of data dims, stacked along named parallel axes (a
grid dim `gx`, `gy`, `gz`, the loop `F`, or a chunk axis `k0`, ... of a redtox accumulator). The
leaves are kernel tensors (no axes) and atoms (a data-dim index such as `1`, an axis name such as
`gx`, a scalar such as `0.5`). Data dims are counted from the outermost, as everywhere in prism.

Data movement (the nesting order of several splits of one dim is outermost first):

    (part t d g)   split data dim d into |g| equal chunks; chunk i goes to position i of new axis g
    (rep t g)      the same t at every position of new axis g
    (comb t d g)   concatenate along data dim d the tensors at the positions of axis g (inverse
                   of part), removing axis g
    (red t g)      Σ over the positions of axis g, removing it
    (mred t g)     mean over the positions of axis g, removing it: (red t g) / |g|

Compute heads are the op table's, applied at every position of the axes: `(exp t)`, `(add a b)`,
`(matmul a b)`, ..., the binary ones on operands with the same axes; an op's attributes follow
its operands as atoms, in the order of its `term_attrs`: `(sum t d)`, `(mul_scalar t c)`,
`(clamp t lo hi)` (`none` for an absent bound), `(rms_norm t d eps)` over dim d (the last dim,
where graphs come from).

`TensorAnalysis` computes, for the e-graph and for the proof checker alike, each term's axes and
its symbolic data shape (axis sizes are the dimension variables of the same names); a term that
has no well-defined shape has no analysis data (None) and no axiom applies to it.
`evaluate` computes a term's value with numpy in float64: the definition of the term language,
and the oracle of every axiom's randomized soundness check.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from prism.errors import PrismError, ShapeError
from prism.ir.dims import Dim, dim, var
from prism.ir.ops import OPS, infer_shape

MOVEMENT = frozenset({"part", "rep", "comb", "red", "mred"})
COMPUTE = frozenset(name for name, od in OPS.items()
                    if od.category in ("unary", "binary", "scalar", "matmul", "reduce", "norm"))
# Heads whose atom arguments are attributes, and where: (head → index of the atom → meaning).
# A compute op's atoms are its `term_attrs` (the op table), after its tensor operands: the
# attribute each names (`TERM_ATTRS`), read as a dim index or a scalar.
TERM_ATTRS: dict[str, dict[int, str]] = {
    name: {od.arity + j: a for j, a in enumerate(od.term_attrs)}
    for name, od in OPS.items() if name in COMPUTE and od.term_attrs}
ATOM_ARGS: dict[str, dict[int, str]] = {
    "part": {1: "dim", 2: "axis"}, "comb": {1: "dim", 2: "axis"}, "rep": {1: "axis"},
    "red": {1: "axis"}, "mred": {1: "axis"},
    **{head: {i: "dim" if a in ("dim", "last") else "scalar" for i, a in attrs.items()}
       for head, attrs in TERM_ATTRS.items()}}


class TermLike(Protocol):
    @property
    def head(self) -> str: ...

    @property
    def args(self) -> Sequence[Any]: ...


class TermError(PrismError):
    """A term that is not well-formed (unknown head, wrong arguments, mismatched axes)."""


@dataclass(frozen=True)
class TensorInfo:
    """What the analysis knows of a tensor term: its parallel axes and its data shape."""

    axes: frozenset[str]
    shape: tuple[Dim, ...]

    @property
    def rank(self) -> int:
        return len(self.shape)


@dataclass(frozen=True)
class AtomInfo:
    """A leaf that is not a tensor: a dim index, an axis name (with its size, when the analysis
    knows it) or a scalar."""

    text: str
    size: Dim | None = None


Info = TensorInfo | AtomInfo | None


class TensorAnalysis:
    """The e-class analysis: TensorInfo of every tensor term, from the input shapes."""

    def __init__(self, input_shapes: Mapping[str, Sequence[int | Dim]],
                 axis_sizes: Mapping[str, Dim | int] | None = None):
        self.input_shapes = {k: tuple(dim(d) for d in v) for k, v in input_shapes.items()}
        # Known axis sizes (constants for a concrete graph); others are the variable of the name.
        self.axis_sizes = {k: dim(v) for k, v in (axis_sizes or {}).items()}

    def make(self, head: str, child_data: tuple[Info, ...]) -> Info:
        if not child_data:
            if head in self.input_shapes:
                return TensorInfo(frozenset(), self.input_shapes[head])
            return AtomInfo(head, self.axis_sizes.get(head))
        return make_info(head, child_data)

    def merge(self, a: Info, b: Info) -> Info:
        if a is None:
            return b
        if b is None or a == b:
            return a
        if isinstance(a, TensorInfo) and isinstance(b, TensorInfo) and a.axes == b.axes and \
                len(a.shape) == len(b.shape):
            # Shapes that are equal expressions under different spellings: keep the first.
            return a
        raise TermError(f"an equality merged tensors of different shapes ({_fmt(a)} and "
                        f"{_fmt(b)}): an axiom was applied unsoundly; report it")


def _fmt(info: Info) -> str:
    if isinstance(info, TensorInfo):
        return f"axes {sorted(info.axes)} shape [{', '.join(str(d) for d in info.shape)}]"
    return str(info)


def _atom(info: Info, meaning: str) -> str:
    if not isinstance(info, AtomInfo):
        raise TermError(f"expected a {meaning} atom, got {_fmt(info)}")
    return info.text


def _dim_index(info: Info, rank: int) -> int:
    text = _atom(info, "dim")
    if not text.isdigit() or int(text) >= rank:
        raise TermError(f"dim {text} is not a data dim of a rank-{rank} tensor")
    return int(text)


def _tensor(info: Info) -> TensorInfo:
    if not isinstance(info, TensorInfo):
        raise TermError(f"expected a tensor, got {_fmt(info)}")
    return info


@functools.lru_cache(maxsize=1 << 17)
def make_info(head: str, kids: tuple[Info, ...]) -> Info:
    """The info of a compound term from its children's: None when it is not well-shaped.
    Remembered: a function of its arguments alone (their `Dim`s compare by normal form), and
    an e-graph asks it for the same ones again and again (a rule's condition builds both
    sides' infos, then the union adds the same nodes)."""
    try:
        return _make(head, kids)
    except (PrismError, ValueError):
        return None


def _axis_size(info: Info, name: str) -> Dim:
    return info.size if isinstance(info, AtomInfo) and info.size is not None else var(name)


def _make(head: str, kids: tuple[Info, ...]) -> Info:
    t = _tensor(kids[0])
    if head in ("part", "comb"):
        d, g = _dim_index(kids[1], t.rank), _atom(kids[2], "axis")
        shape = list(t.shape)
        if head == "part":
            if g in t.axes:
                raise TermError(f"axis {g} is already present")
            shape[d] = shape[d] / _axis_size(kids[2], g)
            return TensorInfo(t.axes | {g}, tuple(shape))
        if g not in t.axes:
            raise TermError(f"comb over axis {g}, which the tensor does not have")
        shape[d] = shape[d] * _axis_size(kids[2], g)
        return TensorInfo(t.axes - {g}, tuple(shape))
    if head in ("rep", "red", "mred"):
        g = _atom(kids[1], "axis")
        if (head == "rep") == (g in t.axes):
            state = "already present" if head == "rep" else "absent"
            raise TermError(f"{head} over axis {g}, {state}")
        return TensorInfo(t.axes | {g} if head == "rep" else t.axes - {g}, t.shape)
    od = OPS.get(head)
    if od is None or head not in COMPUTE:
        raise TermError(f"unknown head {head!r}")
    if len(kids) != od.arity + len(od.term_attrs):
        raise TermError(f"{head} takes {od.arity} tensor(s) and {len(od.term_attrs)} atom(s), "
                        f"got {len(kids)} argument(s)")
    tensors = [k for k in kids if isinstance(k, TensorInfo)]
    if any(k.axes != t.axes for k in tensors):
        raise TermError(f"{head} of operands with different axes")
    attrs = _attrs(head, kids, t.rank)
    return TensorInfo(t.axes, infer_shape(head, [k.shape for k in tensors], attrs))


def _attrs(head: str, kids: Sequence[Info], rank: int) -> dict[str, Any]:
    attrs: dict[str, Any] = {}
    for index, name in TERM_ATTRS.get(head, {}).items():
        if name == "last":
            if _dim_index(kids[index], rank) != rank - 1:
                raise TermError(f"{head} normalises the last dim only")
        elif name == "dim":
            attrs["dim"] = _dim_index(kids[index], rank)
        else:
            attrs[name] = scalar_value(_atom(kids[index], "scalar"))
    return attrs


def scalar_value(text: str) -> float | None:
    """A scalar atom's value (`none`: an absent clamp bound). A symbolic scalar of a generic
    instance (`c_…`, `prism.expr.instances`) stands for every value; shapes never depend on
    one, and a float64 evaluation reads it as SYMBOLIC_SCALAR (a counterexample at one value
    refutes an identity claimed for all)."""
    if text == "none":
        return None
    if text.startswith(SYMBOLIC_PREFIX):
        return SYMBOLIC_SCALAR
    return float(text)


SYMBOLIC_PREFIX = "c_"
SYMBOLIC_SCALAR = 0.7


# -- numeric semantics ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Stacked:
    """A value: `array` has one leading axis per name in `axes` (in that order), then data."""

    axes: tuple[str, ...]
    array: np.ndarray

    def to(self, order: Sequence[str]) -> np.ndarray:
        """The array with its axes in `order` (the same set of names)."""
        return np.transpose(self.array, [self.axes.index(a) for a in order] +
                            list(range(len(self.axes), self.array.ndim)))


def evaluate(term: TermLike, inputs: Mapping[str, np.ndarray], sizes: Mapping[str, int]
             ) -> Stacked:
    """The value of `term` with kernel tensors `inputs` and axis sizes `sizes`."""
    memo: dict[int, Stacked | str] = {}

    def ev(t: TermLike) -> Stacked | str:
        key = id(t)
        if key not in memo:
            memo[key] = _eval(t, [ev(a) for a in t.args], inputs, sizes)
        return memo[key]

    out = ev(term)
    if isinstance(out, str):
        raise TermError(f"term {term} is an atom, not a tensor")
    return out


def _eval(t: TermLike, kids: list[Stacked | str], inputs: Mapping[str, np.ndarray],
          sizes: Mapping[str, int]) -> Stacked | str:
    if not kids:
        return Stacked((), np.asarray(inputs[t.head], dtype=np.float64)) \
            if t.head in inputs else t.head
    x = kids[0]
    if not isinstance(x, Stacked):
        raise TermError(f"{t.head}: first argument must be a tensor")
    k = len(x.axes)
    if t.head in ("part", "comb"):
        d, g = int(str(kids[1])), str(kids[2])
        return _part(x, d, g, sizes[g]) if t.head == "part" else _comb(x, d, g)
    if t.head == "rep":
        g = str(kids[1])
        arr = np.broadcast_to(np.expand_dims(x.array, k),
                              (*x.array.shape[:k], sizes[g], *x.array.shape[k:]))
        return Stacked((*x.axes, g), arr)
    if t.head in ("red", "mred"):
        g = str(kids[1])
        i = x.axes.index(g)
        arr = x.array.sum(axis=i) if t.head == "red" else x.array.mean(axis=i)
        return Stacked(x.axes[:i] + x.axes[i + 1:], arr)
    tensors = [kid for kid in kids if isinstance(kid, Stacked)]
    arrays = [s.to(x.axes) for s in tensors]
    attrs = _numeric_attrs(t.head, kids, x.array.ndim - k)
    ref = OPS[t.head].reference
    if ref is None:
        raise TermError(f"unknown head {t.head!r}")
    return Stacked(x.axes, ref(arrays, attrs, k))


def _numeric_attrs(head: str, kids: list[Stacked | str], rank: int) -> dict[str, Any]:
    attrs: dict[str, Any] = {}
    for index, name in TERM_ATTRS.get(head, {}).items():
        value = str(kids[index])
        if name == "dim":
            attrs["dim"] = int(value)
        elif name != "last":
            attrs[name] = scalar_value(value)
    return attrs


def _part(x: Stacked, d: int, g: str, parts: int) -> Stacked:
    k = len(x.axes)
    axis = k + d
    size = x.array.shape[axis]
    if size % parts:
        raise ShapeError(f"part: dim {d} of size {size} does not split into {parts}")
    split = x.array.reshape(*x.array.shape[:axis], parts, size // parts, *x.array.shape[axis + 1:])
    return Stacked((*x.axes, g), np.moveaxis(split, axis, k))


def _comb(x: Stacked, d: int, g: str) -> Stacked:
    i = x.axes.index(g)
    rest = x.axes[:i] + x.axes[i + 1:]
    k = len(rest)
    arr = np.moveaxis(x.array, i, k + d)  # the g axis just before data dim d
    shape = arr.shape
    merged = arr.reshape(*shape[:k + d], shape[k + d] * shape[k + d + 1], *shape[k + d + 2:])
    return Stacked(rest, merged)
