"""Tracing torch code into a `KernelGraph` with torch.fx, at concrete shapes.

    def rmsnorm_matmul(X, W):
        return F.rms_norm(X, (X.shape[-1],)) @ W

    graph = trace(rmsnorm_matmul, {"X": (8, 1024), "W": (1024, 1024)})
    graph = trace_module(mlp, {"x": (8, 1024)})   # an nn.Module: its parameters become inputs

Tracing and lowering are one walk: a tracer subclass lowers each fx node to builder ops the moment
fx creates it, so every traced tensor's shape is known while the function still runs. Its proxies
answer `x.shape`, `x.size()`, `x.size(-1)`, `x.dim()` and `x.ndim` with plain ints, which makes
`x.shape[-1]`, `len(x.shape)` and Python `if`s on shapes ordinary Python.

**Logical and IR shapes.** Each traced tensor is a `_Value`: an IR tensor and the shape torch
gives it (its *logical* shape). They hold the same elements in the same row-major order, so a
`reshape`, `view`, `unsqueeze`, `squeeze`, `flatten` or a reduction with keepdim=False changes
only the logical shape: ranks in the IR never change and reductions keep their dims with size 1.
Where an op needs an operand in a particular IR shape, it asks for it:
- an elementwise op lines its operands up as torch broadcasts them, padded on the left to one
  rank (a bias `B[N]` against `[M, N]` is the IR's `[1, N]`), and follows the IR dims of an
  operand of the result's full shape (a `[b·s, n]` product stays merged);
- a reduction over a logical dim reduces the IR dims that hold exactly that dim;
- `X[b, s, d] @ W[d, n]` multiplies the IR's `[b·s, d]` by `[d, n]`: the leading dims merge.
A graph input can be laid out as needed; an intermediate cannot (the IR has no reshape op). So
the first trace learns how each input must be laid out (`_Layouts`: rank-aligned, leading dims
merged, read transposed) and the trace is run again with them, until nothing more is asked or an
input is asked for two layouts (refused). `.T`, `.t()`, `.transpose` and `.permute` of an input
are such layouts too: the graph input is the transposed tensor, and the generated launcher reads
the user's own tensor with permuted strides (no copy). A transpose of a computed tensor is
refused. Whatever differs between an input's or output's logical shape and its IR shape is
recorded in the graph's `interface` (`prism.ir.graph.View`), which the launcher and the checks
against torch read.

**The vocabulary** is the op table's, in the spellings model code uses (the tables at the end):
matmul / @ / mm / bmm / F.linear / addmm; + - * / with tensors or Python scalars on either side
(a scalar divided by a tensor is a reciprocal), torch.add/sub(alpha=), rsub, multiply, neg; exp,
log, sqrt, rsqrt, reciprocal, square, x ** 2, x ** 0.5, abs, sigmoid, tanh, silu, relu, gelu
(exact and tanh),
leaky_relu, softplus (beta=1, threshold=20), clamp / clip / hardtanh / relu6, maximum, minimum;
sum, mean, amax / amin, max / min (values only), logsumexp, over a dim, a tuple of dims or all
(chained one-dim reductions), keepdim either way; torch.norm and linalg.vector_norm (the 2-norm);
rms_norm and layer_norm over the last dim with eps and weight (and bias); softmax with the row max
subtracted, log_softmax (x − logsumexp); F.scaled_dot_product_attention (softmax(Q Kᵀ · scale +
mask) V with no mask, an additive one, a boolean one or is_causal=True; no dropout);
x.masked_fill(mask, -inf) of a boolean input; mse_loss. A boolean input (`bool_inputs`) is a
mask only, held as the additive float input it becomes (`View.made`); is_causal's mask is an input
the user never passes. Anything else is an
`UnsupportedOpError` that names the op, the line of the user's code and the nearest supported
spelling.

torch is imported inside the functions here: importing this module stays cheap.
"""

from __future__ import annotations

import difflib
import functools
import inspect
import math
import re
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from prism.errors import PrismError, ShapeError, UnsupportedOpError
from prism.frontend.builder import Graph, Tensor
from prism.ir.dims import evaluate
from prism.ir.graph import Interface, KernelGraph, View

# torch's default rms_norm epsilon is its input's dtype's machine epsilon. A workload's reference
# runs in float64, so a traced program has float64's (2.2e-16), the value torch gives that
# reference; a model run in fp16 adds 9.8e-4 instead (0.05% of a unit row's mean square, inside
# fp16's tolerance); pass eps to pin one.
DEFAULT_RMS_EPS = 2.220446049250313e-16
DEFAULT_LAYER_EPS = 1e-5
MAX_RETRACES = 16

Lowering = Callable[..., Any]
IntShape = tuple[int, ...]


class _Refusal(Exception):
    """Raised by a lowering: this call of a supported op cannot be expressed; the text says why."""


def trace(fn: Callable[..., Any], shapes: Mapping[str, Sequence[int]],
          name: str | None = None, bool_inputs: Iterable[str] = ()) -> KernelGraph:
    """The kernel graph of torch function `fn` with parameter `p` of shape `shapes[p]`.

    Inputs are named after the parameters, other tensors after their fx nodes. The parameters
    in `bool_inputs` are boolean masks (see `_Mask`).
    """
    name = name or str(getattr(fn, "__name__", "workload"))
    order = [p for p in inspect.signature(fn).parameters if p in shapes] + \
        [p for p in shapes if p not in inspect.signature(fn).parameters]
    return _trace_with_layouts(fn, name, {p: tuple(shapes[p]) for p in order}, {},
                               frozenset(bool_inputs))


def trace_module(module: Any, shapes: Mapping[str, Sequence[int]],
                 name: str | None = None, bool_inputs: Iterable[str] = ()) -> KernelGraph:
    """The kernel graph of `module.forward` with argument `p` of shape `shapes[p]`; each
    parameter and buffer is an input named after its path (`fc1.weight` → `fc1_weight`), after
    the arguments, with the module's shape."""
    name = name or type(module).__name__
    attrs = {path: tuple(t.shape) for path, t in module_tensors(module)}
    return _trace_with_layouts(module, name, {p: tuple(s) for p, s in shapes.items()}, attrs,
                               frozenset(bool_inputs))


def module_tensors(module: Any) -> list[tuple[str, Any]]:
    """A module's parameters, then its buffers, by path: the inputs `trace_module` adds."""
    return [*module.named_parameters(), *module.named_buffers()]


def input_name(path: str) -> str:
    """The graph input of a module tensor: its path as an identifier (`fc1.weight` →
    `fc1_weight`, `0.weight` → `t_0_weight`)."""
    base = re.sub(r"\W", "_", path) or "t"
    return f"t_{base}" if base[0].isdigit() else base


def _trace_with_layouts(root: Any, name: str, shapes: dict[str, IntShape],
                        attrs: dict[str, IntShape],
                        bools: frozenset[str] = frozenset()) -> KernelGraph:
    layouts = _Layouts()
    for _ in range(MAX_RETRACES):
        lowering = _Lowering(name, shapes, attrs, layouts, bools)
        tracer = _tracer_class()(lowering)
        try:
            tracer.trace(root)
        except _Relayout as again:
            layouts.learn(again, name)
            continue
        except PrismError:
            raise
        except Exception as err:  # fx's own failures: control flow on tensors, unknown Python
            raise UnsupportedOpError(
                f"workload {name}: torch.fx cannot trace it ({type(err).__name__}: "
                f"{_first_line(err)}); write it as straight-line tensor code without branching "
                "on tensor values") from err
        return lowering.build()
    raise UnsupportedOpError(f"workload {name}: its inputs' layouts did not settle after "
                             f"{MAX_RETRACES} traces; simplify the reshapes between its ops")


# -- values and layouts ----------------------------------------------------------------------

@dataclass(frozen=True)
class _Value:
    """A traced tensor: its IR tensor and its torch (logical) shape, the same elements in the
    same row-major order. `source` names the graph input it is, unchanged (whose layout can
    still be chosen); `perm`, for such an input only, is the permutation its IR tensor holds it
    in (the IR is `value.permute(perm)`): only a permute that undoes it may read it."""

    ir: Tensor
    shape: IntShape
    source: str | None = None
    perm: IntShape = ()

    @property
    def ir_shape(self) -> IntShape:
        return tuple(evaluate(d) for d in self.ir.shape)


@dataclass(frozen=True)
class _Mask:
    """A boolean input (`trace(..., bool_inputs=...)`): only a mask may read it, and the IR
    holds it as the additive float input it becomes there (`View.made`). `inverted`: written
    `~mask`."""

    target: str
    shape: IntShape
    inverted: bool = False


@dataclass(frozen=True)
class _Pair:
    """What max(x, dim) and min(x, dim) return: the values, and indices that are refused."""

    values: _Value
    op: str


class _Relayout(Exception):
    """Asks for another trace with input `input` laid out as `perm` then `shape`, or with every
    input whose shape starts with `merge` holding those leading dims as one."""

    def __init__(self, input: str | None = None, perm: IntShape = (),
                 shape: IntShape = (), merge: IntShape = ()) -> None:
        super().__init__(input or f"merge {merge}")
        self.input, self.perm, self.shape, self.merge = input, perm, shape, merge


@dataclass
class _Layouts:
    """How each graph input is laid out in the IR, learned trace by trace."""

    inputs: dict[str, tuple[IntShape, IntShape]] = field(default_factory=dict)  # (perm, shape)
    merges: list[IntShape] = field(default_factory=list)
    tried: set[tuple[str, IntShape, IntShape]] = field(default_factory=set)

    def learn(self, ask: _Relayout, workload: str) -> None:
        if ask.input is None:
            if ask.merge in self.merges:
                raise UnsupportedOpError(
                    f"workload {workload}: the leading dims {list(ask.merge)} cannot be merged "
                    "for a matmul (a tensor computed before it keeps them apart); reshape the "
                    "inputs to [-1, d] before the ops")
            self.merges.append(ask.merge)
            return
        key = (ask.input, ask.perm, ask.shape)
        if key in self.tried:
            raise UnsupportedOpError(
                f"workload {workload}: input {ask.input} is needed in two layouts (one of them "
                f"{list(ask.shape)}); pass each layout as its own parameter")
        self.tried.add(key)
        self.inputs[ask.input] = (ask.perm, ask.shape)

    def of(self, user: IntShape) -> IntShape:
        """The IR shape of an input of shape `user` without a layout of its own."""
        for prefix in self.merges:
            k = len(prefix)
            if len(user) > k and user[:k] == prefix:
                return (math.prod(prefix), *user[k:])
        return user


def _blocks(logical: IntShape, ir: IntShape) -> list[tuple[list[int], list[int]]] | None:
    """The runs of logical dims and of IR dims that hold the same elements (their products
    meet), size-1 dims left out; None if the two shapes do not have the same elements."""
    ls = [d for d, n in enumerate(logical) if n > 1]
    irs = [j for j, n in enumerate(ir) if n > 1]
    blocks: list[tuple[list[int], list[int]]] = []
    run_l: list[int] = []
    run_i: list[int] = []
    pl = pi = 1
    a = b = 0
    while a < len(ls) or b < len(irs):
        if b >= len(irs) or (pl <= pi and a < len(ls)):
            pl *= logical[ls[a]]
            run_l.append(ls[a])
            a += 1
        else:
            pi *= ir[irs[b]]
            run_i.append(irs[b])
            b += 1
        if pl == pi:
            blocks.append((run_l, run_i))
            run_l, run_i, pl, pi = [], [], 1, 1
    return None if run_l or run_i else blocks


def _ir_dims(v: _Value, d: int) -> list[int] | None:
    """The IR dims that hold exactly logical dim d of `v` ([] for a dim of size 1), or None
    when d shares an IR dim with another dim."""
    if v.shape[d] == 1:
        return []
    for run_l, run_i in _blocks(v.shape, v.ir_shape) or []:
        if d in run_l:
            return run_i if run_l == [d] else None
    return None


def _broadcast(a: IntShape, b: IntShape) -> IntShape:
    r = max(len(a), len(b))
    pa, pb = (1,) * (r - len(a)) + a, (1,) * (r - len(b)) + b
    out = []
    for x, y in zip(pa, pb, strict=True):
        if x != y and 1 not in (x, y):
            raise ShapeError(f"shapes {list(a)} and {list(b)} do not broadcast (each dim must "
                             "match or be 1)")
        out.append(max(x, y))
    return tuple(out)


def _perm_inverse(p: Sequence[int]) -> IntShape:
    inv = [0] * len(p)
    for k, q in enumerate(p):
        inv[q] = k
    return tuple(inv)


# -- the lowering: fx nodes to builder ops -------------------------------------------------------

class _Lowering:
    """Lowers fx nodes, in creation order, into a `prism.Graph` under construction."""

    def __init__(self, workload: str, shapes: Mapping[str, IntShape],
                 attrs: Mapping[str, IntShape], layouts: _Layouts,
                 bools: frozenset[str] = frozenset()) -> None:
        self.workload = workload
        self.bools = bools
        self.masks: dict[str, tuple[str, _Value]] = {}   # boolean input -> (made, its value)
        self.shapes = shapes
        self.attrs = attrs
        self.layouts = layouts
        self.g = Graph(workload)
        self.values: dict[Any, Any] = {}   # fx Node -> _Value (or _Pair)
        self._used: set[str] = set()
        self.order = {p: k for k, p in enumerate([*shapes, *attrs])}
        self.inputs: dict[str, tuple[int, View | None]] = {}   # name -> (order, view)
        self.outputs: list[View | None] = []
        self.calls = 0            # call nodes lowered so far

    def shape_of(self, node: Any) -> IntShape:
        value = self.values[node]
        if not isinstance(value, _Value):
            raise UnsupportedOpError(f"workload {self.workload}: the shape of a (values, "
                                     "indices) pair; take .values first")
        return value.shape

    def lower(self, node: Any) -> None:
        if node.op == "placeholder":
            if node.target not in self.shapes:
                raise ShapeError(f"workload {self.workload}: parameter {node.target} has no "
                                 "shape; give every parameter a shape")
            target = str(node.target)
            self.values[node] = (_Mask(target, self.shapes[target]) if target in self.bools
                                 else self._input(target, self.shapes[target]))
        elif node.op == "get_attr" and node.target in self.attrs:
            self.values[node] = self._input(str(node.target), self.attrs[node.target])
        elif node.op == "output":
            self._outputs(node.args[0])
        elif node.op in ("call_function", "call_method"):
            try:
                self.values[node] = self._call(node)
            except PrismError as err:
                # which call of the traced function was refused (0-based, in the order the
                # function makes them): `prism.dynamo` cuts a region there
                setattr(err, "call_index", self.calls)  # noqa: B010 (an exception's note)
                raise
            self.calls += 1
        else:  # get_attr: a tensor made inside the function (torch.ones, a captured tensor)
            raise UnsupportedOpError(
                f"workload {self.workload}: a constant tensor ({node.target}) at "
                f"{_user_line()} is not supported; pass every tensor as a parameter")

    def _input(self, target: str, user: IntShape) -> _Value:
        name = self.fresh(input_name(target))
        perm, ir = self.layouts.inputs.get(name, ((), self.layouts.of(user)))
        view = None if (not perm and ir == user) else View(user, perm)
        if view is not None and view.strides(ir) is None:
            raise UnsupportedOpError(f"workload {self.workload}: input {name} {list(user)} "
                                     f"cannot be read as {list(ir)} without a copy; pass it "
                                     "in that layout")
        tensor = self.g.input(name, ir)
        self.inputs[name] = (self.order[target], view)
        return _Value(tensor, user, name, perm)

    def mask(self, m: _Mask, true_keeps: bool) -> _Value:
        """Boolean input `m` as the additive mask it is where True keeps a key (`true_keeps`,
        an attn_mask) or drops it (masked_fill's mask): a graph input the user passes as a
        boolean tensor, made "keep" or "drop"."""
        made = "keep" if true_keeps != m.inverted else "drop"
        known = self.masks.get(m.target)
        if known is not None:
            if known[0] != made:
                raise _Refusal(f"boolean input {m.target} is used both as a keep-mask and as a "
                               "drop-mask; pass each as its own parameter")
            return known[1]
        value = self._input(m.target, m.shape)
        assert value.source is not None
        if value.perm:
            raise _Refusal(f"boolean input {m.target} read transposed; pass the mask in the "
                           "layout the scores have")
        self.inputs[value.source] = (self.order[m.target], View(m.shape, made=made))
        self.masks[m.target] = (made, value)
        return value

    def causal(self, shape: IntShape) -> _Value:
        """is_causal's mask for scores of `shape` (…, L, S) as an input of shape [L, S] the user
        does not pass (made "causal"), after every parameter; one per [L, S]."""
        rows_cols = tuple(shape[-2:])
        key = f"causal {rows_cols}"
        if key not in self.masks:
            name = self.fresh("causal_mask")
            ir = self.layouts.inputs.get(name, ((), rows_cols))[1]   # as the scores need it
            value = _Value(self.g.input(name, ir), rows_cols, name)
            self.inputs[name] = (len(self.order) + len(self.masks), View(rows_cols,
                                                                        made="causal"))
            self.masks[key] = ("causal", value)
        return self.masks[key][1]

    def fresh(self, base: str) -> str:
        """A tensor name not used yet in this graph, spelled like `base` (an identifier)."""
        base = input_name(str(base))
        name, n = base, 0
        while name in self._used:
            n += 1
            name = f"{base}_{n}"
        self._used.add(name)
        return name

    def _call(self, node: Any) -> Any:
        op = _op_name(node)
        table = _methods() if node.op == "call_method" else _functions()
        lowering = table.get(node.target)
        if lowering is None:
            raise UnsupportedOpError(f"workload {self.workload}: {op} at {_user_line()} is not "
                                     f"supported{_nearest(op)}")
        args, kwargs = self._values(node.args), self._values(node.kwargs)
        emit = _Emit(self, node.name)
        try:
            inspect.signature(lowering).bind(emit, *args, **kwargs)
        except TypeError as err:
            raise UnsupportedOpError(f"workload {self.workload}: {op} at {_user_line()} with "
                                     f"these arguments is not supported ({err}); pass only the "
                                     "arguments torch documents for it") from None
        try:
            return lowering(emit, *args, **kwargs)
        except _Refusal as why:
            raise UnsupportedOpError(f"workload {self.workload}: {op} at {_user_line()}: "
                                     f"{why}") from None
        except ShapeError as err:
            raise ShapeError(f"workload {self.workload}: {op} at {_user_line()}: {err}") from err

    def _values(self, args: Any) -> Any:
        from torch.fx.node import map_arg
        return map_arg(args, lambda n: self.values[n])

    def _outputs(self, result: Any) -> None:
        from torch.fx import Node

        results = result if isinstance(result, (tuple, list)) else [result]
        for r in results:
            value = self.values.get(r) if isinstance(r, Node) else None
            if not isinstance(value, _Value):
                raise UnsupportedOpError(
                    f"workload {self.workload}: it returns {r!r}, not a traced tensor; "
                    "return a tensor or a tuple of tensors computed from the parameters")
            if value.perm:
                raise UnsupportedOpError(
                    f"workload {self.workload}: it returns input {value.source} transposed; "
                    "return tensors computed from the inputs")
            self.g.output(value.ir)
            self.outputs.append(None if value.shape == value.ir_shape else View(value.shape))

    def build(self) -> KernelGraph:
        """The graph, inputs first in parameter order, with its interface."""

        unused = sorted((self.bools & set(self.shapes)) - set(self.masks))
        if unused:
            raise UnsupportedOpError(f"workload {self.workload}: boolean input(s) "
                                     f"{', '.join(unused)} are not used as a mask; a boolean "
                                     "input can only be a softmax's mask (attn_mask=, masked_fill)")
        graph = self.g.build()
        inputs = sorted((op for op in graph.ops if op.kind == "input"),
                        key=lambda op: self.inputs[op.outputs[0]][0])
        rest = [op for op in graph.ops if op.kind != "input"]
        views = tuple(self.inputs[op.outputs[0]][1] for op in inputs)
        interface = Interface(views if any(views) else (),
                              tuple(self.outputs) if any(self.outputs) else ())
        return replace(graph, ops=(*inputs, *rest), interface=interface)


class _Emit:
    """What a lowering adds ops through: the graph, the fx node's name for the op that computes
    the node's value (`out`), fresh names for intermediates (`tmp`), and the layout rules."""

    def __init__(self, lowering: _Lowering, node_name: str) -> None:
        self.g = lowering.g
        self.lowering = lowering
        self.out = lowering.fresh(node_name)
        self._fresh = lowering.fresh
        self.layouts = lowering.layouts

    def tmp(self, kind: str) -> str:
        return self._fresh(f"{self.out}_{kind}")

    def clean(self, v: _Value) -> _Value:
        """`v` as an ordinary value: an input held permuted is refused here."""
        if v.perm:
            raise _Refusal(f"input {v.source} is read both transposed and as it is; pass the "
                           "two as separate parameters")
        return v

    def need(self, v: _Value, shape: IntShape) -> Tensor:
        """`v`'s IR tensor in IR shape `shape`: an input is laid out so (by another trace),
        an intermediate must already be."""
        v = self.clean(v)
        if v.ir_shape == shape:
            return v.ir
        if v.source is not None:      # keep the input's permutation, change its IR shape
            raise _Relayout(v.source, self.layouts.inputs.get(v.source, ((), ()))[0], shape)
        raise _Refusal(f"a computed tensor of shape {list(v.shape)} is held as "
                       f"{list(v.ir_shape)} in the IR and would be needed as {list(shape)} (the "
                       "IR has no reshape); reshape the inputs instead")

    def op(self, kind: str, *xs: Tensor, name: str | None = None, **attrs: Any) -> Tensor:
        return self.g.apply(kind, *xs, name=name or self.tmp(kind), **attrs)

    def unary(self, kind: str, v: Any, name: str | None = None, **attrs: Any) -> _Value:
        x = self.clean(_tensor(v, "its input"))
        return _Value(self.op(kind, x.ir, name=name, **attrs), x.shape)

    def binary(self, kind: str, a: Any, b: Any, name: str | None = None) -> _Value:
        """Elementwise `kind` of two values, broadcast as torch does (see the docstring)."""
        a, b = self.clean(_tensor(a, "an operand")), self.clean(_tensor(b, "an operand"))
        shape = _broadcast(a.shape, b.shape)
        full = [v for v in (a, b) if v.shape == shape]
        ref = next((v for v in full if v.source is None), full[0] if full else None)
        ref_ir = ref.ir_shape if ref is not None else shape
        blocks = _blocks(shape, ref_ir)
        assert blocks is not None
        needs = []
        for v in (a, b):
            padded = (1,) * (len(shape) - len(v.shape)) + v.shape
            want = [1] * len(ref_ir)
            for run_l, run_i in blocks:
                dims = [padded[d] for d in run_l]
                if dims == [shape[d] for d in run_l]:
                    for j in run_i:
                        want[j] = ref_ir[j]
                elif any(n != 1 for n in dims):
                    raise _Refusal(f"an operand of shape {list(v.shape)} cannot broadcast over "
                                   f"dims {[shape[d] for d in run_l]}, which the IR holds as one "
                                   "dim; give it the full shape")
            needs.append(self.need(v, tuple(want)))
        return _Value(self.op(kind, *needs, name=name), shape)

    def scalar(self, kind: str, v: Any, c: float, name: str | None = None) -> _Value:
        return self.unary(kind, v, name=name, scalar=float(c))

    def reduce(self, kind: str, v: Any, dims: Any, keepdim: bool,
               name: str | None = None) -> _Value:
        """`kind` over logical dims `dims` (an int, a sequence, or None for all), as chained
        one-dim IR reductions; the result drops the dims unless `keepdim`."""
        x = self.clean(_tensor(v, "its input"))
        rank = len(x.shape)
        axes = sorted({_axis(d, rank) for d in _dims(dims, rank)})
        ir_axes: list[int] = []
        for d in axes:
            found = _ir_dims(x, d)
            if found is None:
                raise _Refusal(f"dim {d} of a tensor of shape {list(x.shape)} shares an IR dim "
                               f"({list(x.ir_shape)}) with another dim; reduce before merging "
                               "dims")
            ir_axes += found
        t = x.ir          # over dims of size 1 only: x itself
        for k, j in enumerate(ir_axes):
            last = k == len(ir_axes) - 1
            t = self.op(kind, t, name=name if last else None, dim=j)
        shape = tuple(1 if d in axes else n for d, n in enumerate(x.shape)) if keepdim else \
            tuple(n for d, n in enumerate(x.shape) if d not in axes)
        return _Value(t, shape)

    def last_dim(self, v: _Value, what: str, normalized_shape: Any) -> _Value:
        """`v` for an op over its last dim (rms_norm, layer_norm): normalized_shape must be that
        dim, and the IR's last dim must hold it alone."""
        x = self.clean(v)
        norm = [normalized_shape] if isinstance(normalized_shape, int) else \
            list(normalized_shape)
        if norm != [x.shape[-1]]:
            raise _Refusal(f"normalized_shape={tuple(norm)} is not supported; {what} normalises "
                           f"over the last dim only: pass ({x.shape[-1]},)")
        if _ir_dims(x, len(x.shape) - 1) != [len(x.ir_shape) - 1] and x.shape[-1] > 1:
            raise _Refusal(f"the last dim of a tensor held as {list(x.ir_shape)} in the IR is "
                           "not the IR's last dim")
        return x

    def view(self, v: Any, shape: IntShape) -> _Value:
        """The same elements with logical shape `shape` (a reshape of a row-major tensor)."""
        x = _tensor(v, "its input")
        if math.prod(shape) != math.prod(x.shape):
            raise ShapeError(f"shape {list(shape)} does not have the {math.prod(x.shape)} "
                             f"elements of {list(x.shape)}")
        if shape == x.shape:
            return x
        return _Value(self.clean(x).ir, shape, x.source)


def _user_line() -> str:
    """file:line of the innermost frame of the user's code on the stack (the line that made
    the fx node being lowered): the first frame outside torch and prism's frontend."""
    here = Path(__file__).resolve().parent
    for frame in reversed(traceback.extract_stack()):
        path = Path(frame.filename)
        if "torch" in path.parts or path.resolve().parent == here or frame.filename.startswith("<"):
            continue
        return f"{path.name}:{frame.lineno}"
    return "an unknown line"


@functools.cache
def _spellings() -> tuple[str, ...]:
    names = {f"{_target_name(t)}" for t in _functions()} | {f"Tensor.{m}" for m in _methods()}
    return tuple(sorted(names))


def _nearest(op: str) -> str:
    """The supported spelling closest to `op` by its last name (a method's among methods)."""
    short = op.rsplit(".", 1)[-1]
    kin = [s for s in _spellings() if s.startswith("Tensor.") == op.startswith("Tensor.")]
    by_name = {s.rsplit(".", 1)[-1]: s for s in kin}
    close = difflib.get_close_matches(short, list(by_name), n=1, cutoff=0.6) or \
        difflib.get_close_matches(op, list(_spellings()), n=1, cutoff=0.5)
    hint = by_name.get(close[0], close[0]) if close else None
    return (f"; the nearest supported spelling is {hint}" if hint else "") + \
        " (prism.frontend.fx's docstring lists what is)"


def _target_name(target: Any) -> str:
    module = getattr(target, "__module__", None) or ""
    module = {"_operator": "operator", "torch._C._nn": "torch.nn.functional",
              "torch._C._VariableFunctions": "torch", "torch._C._linalg": "torch.linalg",
              "torch.functional": "torch"}.get(module, module)
    name = getattr(target, "__name__", str(target))
    if module == "torch.linalg" and name.startswith("linalg_"):
        name = name[len("linalg_"):]
    return f"{module}.{name}".lstrip(".")


def _op_name(node: Any) -> str:
    """How the user wrote the op: torch.tanh, torch.nn.functional.silu, operator.sub, Tensor.T."""
    if node.op == "call_method":
        return f"Tensor.{node.target}"
    if node.target is getattr:
        return f"Tensor.{node.args[1]}"
    return _target_name(node.target)


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return text[0].strip() if text else "no message"


# -- the tracer: an fx.Tracer whose proxies know their shapes ------------------------------------

@functools.cache
def _tracer_class() -> type:
    from torch import Size, fx

    class ShapedProxy(fx.Proxy):
        """An fx proxy that answers shape queries with ints instead of recording them."""

        def __getattr__(self, attr: str) -> Any:
            if attr not in ("shape", "ndim", "size", "dim"):
                return super().__getattr__(attr)
            shape = self.tracer.lowering.shape_of(self.node)  # type: ignore[attr-defined]
            if attr == "shape":
                return Size(shape)
            if attr == "ndim":
                return len(shape)
            if attr == "dim":
                return lambda: len(shape)
            return lambda dim=None: Size(shape) if dim is None else shape[dim]

    class ShapeTracer(fx.Tracer):
        """Lowers every node as it is created (see the module docstring); traces into every
        module (nn.Linear's forward is F.linear of its parameters), parameters and buffers
        becoming get_attr nodes."""

        def __init__(self, lowering: _Lowering) -> None:
            super().__init__()
            self.lowering = lowering
            self.proxy_buffer_attributes = True

        def is_leaf_module(self, m: Any, module_qualified_name: str) -> bool:
            return False

        def proxy(self, node: fx.Node) -> fx.Proxy:
            return ShapedProxy(node, self)

        def create_node(self, *args: Any, **kwargs: Any) -> fx.Node:
            node = super().create_node(*args, **kwargs)
            self.lowering.lower(node)
            return node

    return ShapeTracer


# -- lowerings: one per torch spelling, each with torch's own signature --------------------------

def _is_scalar(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _tensor(v: Any, what: str) -> _Value:
    if isinstance(v, _Mask):
        raise _Refusal(f"{v.target} is a boolean input, which can only be a softmax's mask: "
                       "F.scaled_dot_product_attention(..., attn_mask=mask) or "
                       "x.masked_fill(mask, float('-inf')) (or ~mask)")
    if isinstance(v, _Pair):
        raise _Refusal(f"{v.op}(x, dim) returns (values, indices); take .values (the indices "
                       "are not supported)")
    if not isinstance(v, _Value):
        raise _Refusal(f"{what} must be a traced tensor, got {v!r}; pass it as a parameter")
    return v


def _no_extras(**given: Any) -> None:
    """Refuse arguments the IR cannot honour: each must be at its default (None or False)."""
    for key, value in given.items():
        if value not in (None, False):
            raise _Refusal(f"{key}={value!r} is not supported; drop it")


def _axis(d: Any, rank: int) -> int:
    if not isinstance(d, int) or isinstance(d, bool) or not -max(rank, 1) <= d < max(rank, 1):
        raise _Refusal(f"dim={d!r} is out of range for rank {rank}")
    return d % max(rank, 1)


def _dims(dim: Any, rank: int) -> list[Any]:
    if dim is None:
        return list(range(rank))
    return list(dim) if isinstance(dim, (tuple, list)) else [dim]


def _unary(kind: str) -> Lowering:
    def lower(e: _Emit, input: Any) -> _Value:
        return e.unary(kind, input, name=e.out)
    return lower


def _unary_inplace(kind: str) -> Lowering:
    def lower(e: _Emit, input: Any, inplace: bool = False) -> _Value:
        _no_extras(inplace=inplace)
        return e.unary(kind, input, name=e.out)
    return lower


def _gelu(e: _Emit, input: Any, approximate: str = "none") -> _Value:
    kinds = {"none": "gelu", "tanh": "gelu_tanh"}
    if approximate not in kinds:
        raise _Refusal(f"approximate={approximate!r} is not supported; use 'none' or 'tanh'")
    return e.unary(kinds[approximate], input, name=e.out)


def _leaky_relu(e: _Emit, input: Any, negative_slope: float = 0.01,
                inplace: bool = False) -> _Value:
    _no_extras(inplace=inplace)
    return e.unary("leaky_relu", input, name=e.out, slope=float(negative_slope))


def _softplus(e: _Emit, input: Any, beta: float = 1.0, threshold: float = 20.0) -> _Value:
    if (beta, threshold) != (1, 20):
        raise _Refusal(f"beta={beta}, threshold={threshold} is not supported; the IR's "
                       "softplus is torch's default log(1 + e^x) (beta=1, threshold=20)")
    return e.unary("softplus", input, name=e.out)


def _bound(v: Any, what: str) -> float | None:
    if v is None:
        return None
    if not _is_scalar(v) or not math.isfinite(v):
        raise _Refusal(f"{what}={v!r} is not supported; give a finite Python number or None "
                       "(for tensor bounds use torch.maximum / torch.minimum)")
    return float(v)


def _clamp(e: _Emit, input: Any, min: Any = None, max: Any = None) -> _Value:
    lo, hi = _bound(min, "min"), _bound(max, "max")
    if lo is None and hi is None:
        raise _Refusal("clamp needs min or max")
    return e.unary("clamp", input, name=e.out, lo=lo, hi=hi)


def _hardtanh(e: _Emit, input: Any, min_val: float = -1.0, max_val: float = 1.0,
              inplace: bool = False) -> _Value:
    _no_extras(inplace=inplace)
    return e.unary("clamp", input, name=e.out, lo=_bound(min_val, "min_val"),
                   hi=_bound(max_val, "max_val"))


def _relu6(e: _Emit, input: Any, inplace: bool = False) -> _Value:
    _no_extras(inplace=inplace)
    return e.unary("clamp", input, name=e.out, lo=0.0, hi=6.0)


def _matmul(e: _Emit, input: Any, other: Any, name: str | None = None) -> _Value:
    a, b = e.clean(_tensor(input, "A")), e.clean(_tensor(other, "B"))
    if len(a.shape) < 2 or len(b.shape) < 2:
        raise _Refusal("a matmul with a vector is not supported; unsqueeze it to a matrix")
    if a.shape[-1] != b.shape[-2]:
        raise ShapeError(f"matmul shapes {list(a.shape)} @ {list(b.shape)} do not fit: A's last "
                         "dim must equal B's second-to-last")
    out_shape = (*_broadcast(a.shape[:-2], b.shape[:-2]), a.shape[-2], b.shape[-1])
    if len(b.shape) == 2 and len(a.shape) > 2:
        # X[..., m, k] @ W[k, n]: the leading dims of X merge with m in the IR
        lead = a.shape[:-1]
        merged = (math.prod(lead), a.shape[-1])
        if a.ir_shape != merged and a.source is None:
            raise _Relayout(merge=lead)
        t = e.op("matmul", e.need(a, merged), e.need(b, b.shape), name=name or e.out)
        return _Value(t, out_shape)
    if a.shape[:-2] != b.shape[:-2]:
        raise _Refusal(f"matmul batch dims {list(a.shape[:-2])} and {list(b.shape[:-2])} must be "
                       "equal (no broadcasting of batches)")
    t = e.op("matmul", e.need(a, a.shape), e.need(b, b.shape), name=name or e.out)
    return _Value(t, out_shape)


def _transposed(e: _Emit, v: Any, perm: Sequence[int]) -> _Value:
    """`v.permute(perm)`: free for an input (its layout), refused for a computed tensor."""
    x = _tensor(v, "its input")
    rank = len(x.shape)
    perm = tuple(_axis(p, rank) for p in perm)
    if sorted(perm) != list(range(rank)):
        raise _Refusal(f"{list(perm)} is not a permutation of {rank} dims")
    shape = tuple(x.shape[p] for p in perm)
    moved = [p for p in perm if x.shape[p] > 1]
    if moved == sorted(moved) and not x.perm:      # only size-1 dims move: a reshape
        return e.view(x, shape)
    # the IR holds x as x.permute(x.perm); the result r = x.permute(perm) is held as
    # r.permute(q) with x.permute(x.perm) = r.permute(q), i.e. q = perm⁻¹ ∘ x.perm
    inv = _perm_inverse(perm)
    q = tuple(inv[p] for p in (x.perm or range(rank)))
    if x.source is None:
        raise _Refusal("a transpose of a computed tensor is not supported (only of an input, "
                       "which the kernel reads with permuted strides); transpose an input "
                       "instead")
    if x.ir_shape != (x.shape if not x.perm else tuple(x.shape[p] for p in x.perm)):
        raise _Refusal(f"input {x.source} is transposed and reshaped both; pass it in one "
                       "layout")
    if q == tuple(range(rank)):
        return _Value(x.ir, shape, x.source)
    # the next trace holds the input as x.permute(perm), which this permute then undoes
    raise _Relayout(x.source, perm, shape)


def _transpose(e: _Emit, input: Any, dim0: int, dim1: int) -> _Value:
    x = _tensor(input, "its input")
    perm = list(range(len(x.shape)))
    a, b = _axis(dim0, len(perm)), _axis(dim1, len(perm))
    perm[a], perm[b] = perm[b], perm[a]
    return _transposed(e, x, perm)


def _t(e: _Emit, input: Any) -> _Value:
    x = _tensor(input, "its input")
    return _transposed(e, x, list(reversed(range(len(x.shape)))))


def _permute(e: _Emit, input: Any, *dims: Any) -> _Value:
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        dims = tuple(dims[0])
    return _transposed(e, input, dims)


def _torch_permute(e: _Emit, input: Any, dims: Sequence[int]) -> _Value:
    return _transposed(e, input, dims)


def _reshape(e: _Emit, input: Any, *shape: Any) -> _Value:
    x = _tensor(input, "its input")
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    if not all(isinstance(n, int) and not isinstance(n, bool) for n in shape):
        raise _Refusal(f"shape {shape!r} is not supported; give ints (view(dtype) is not)")
    dims = list(shape)
    if dims.count(-1) == 1:
        rest = math.prod(n for n in dims if n != -1)
        dims[dims.index(-1)] = math.prod(x.shape) // rest if rest else 0
    return e.view(x, tuple(dims))


def _torch_reshape(e: _Emit, input: Any, shape: Sequence[int]) -> _Value:
    return _reshape(e, input, tuple(shape))


def _unsqueeze(e: _Emit, input: Any, dim: int) -> _Value:
    x = _tensor(input, "its input")
    d = _axis(dim, len(x.shape) + 1)
    return e.view(x, (*x.shape[:d], 1, *x.shape[d:]))


def _squeeze(e: _Emit, input: Any, dim: Any = None) -> _Value:
    x = _tensor(input, "its input")
    dims = {_axis(d, len(x.shape)) for d in _dims(dim, len(x.shape))}
    return e.view(x, tuple(n for d, n in enumerate(x.shape) if not (d in dims and n == 1)))


def _flatten(e: _Emit, input: Any, start_dim: int = 0, end_dim: int = -1) -> _Value:
    x = _tensor(input, "its input")
    if not x.shape:
        return e.view(x, (1,))
    a, b = _axis(start_dim, len(x.shape)), _axis(end_dim, len(x.shape))
    return e.view(x, (*x.shape[:a], math.prod(x.shape[a:b + 1]), *x.shape[b + 1:]))


def _to(e: _Emit, input: Any, *args: Any, **kwargs: Any) -> _Value:
    """x.to(dtype), x.float(), x.half(), x.bfloat16() to a floating dtype: the IR's values are
    numbers, not storage, so a cast between floating dtypes is the value itself (the kernel
    computes in the program's dtype with fp32 accumulators, as a norm's upcast asks). A device,
    a non-floating dtype or copy=True is refused."""
    import torch

    given = [*args, *(v for k, v in kwargs.items() if k == "dtype")]
    extra = {k: v for k, v in kwargs.items() if k not in ("dtype", "non_blocking", "copy")}
    if extra or kwargs.get("copy") or any(
            not (isinstance(a, torch.dtype) and a.is_floating_point) for a in given):
        raise _Refusal(f"to({', '.join(map(repr, [*args, *kwargs.values()]))}): only a cast "
                       "to a floating dtype is traced; move devices outside the function")
    return _tensor(input, "its input")


def _contiguous(e: _Emit, input: Any, memory_format: Any = None) -> _Value:
    _no_extras(memory_format=memory_format)
    return _tensor(input, "its input")


def _add(e: _Emit, input: Any, other: Any, *, alpha: Any = 1) -> _Value:
    if _is_scalar(input):
        input, other = other, input
    if _is_scalar(other):           # x + c (c·α)
        return e.scalar("add_scalar", input, float(other) * alpha, name=e.out)
    b = _tensor(other, "the addend")
    if alpha != 1:                  # a + α·b
        b = e.scalar("mul_scalar", b, alpha)
    return e.binary("add", input, b, name=e.out)


def _sub(e: _Emit, input: Any, other: Any, *, alpha: Any = 1) -> _Value:
    if _is_scalar(other):           # x − α·c
        return e.scalar("add_scalar", input, -float(other) * alpha, name=e.out)
    if _is_scalar(input):           # c − α·x = (−α)·x + c
        return e.scalar("add_scalar", e.scalar("mul_scalar", other, -alpha), input, name=e.out)
    b = _tensor(other, "the subtrahend")
    if alpha != 1:
        b = e.scalar("mul_scalar", b, alpha)
    return e.binary("sub", input, b, name=e.out)


def _rsub(e: _Emit, input: Any, other: Any, *, alpha: Any = 1) -> _Value:
    # torch.rsub(x, y, alpha) = y − α·x
    return _sub(e, other, input, alpha=alpha)


def _rsqrt(e: _Emit, input: Any) -> _Value:
    # 1/√x: the reciprocal of the root (one rounding more than torch's fused rsqrt)
    return e.unary("reciprocal", e.unary("sqrt", input), name=e.out)


def _neg(e: _Emit, input: Any) -> _Value:
    return e.unary("neg", input, name=e.out)


def _mul(e: _Emit, input: Any, other: Any) -> _Value:
    if _is_scalar(input):
        input, other = other, input
    if _is_scalar(other):
        return e.scalar("mul_scalar", input, other, name=e.out)
    return e.binary("mul", input, other, name=e.out)


def _div(e: _Emit, input: Any, other: Any, *, rounding_mode: Any = None) -> _Value:
    _no_extras(rounding_mode=rounding_mode)
    if _is_scalar(input):
        # c / x = c · (1/x)
        recip = e.unary("reciprocal", other, name=None if input != 1 else e.out)
        return recip if input == 1 else e.scalar("mul_scalar", recip, float(input), name=e.out)
    if _is_scalar(other):
        if other == 0:
            raise _Refusal("division by the constant 0")
        # x / c = x · (1/c)
        return e.scalar("mul_scalar", input, 1.0 / other, name=e.out)
    return e.binary("div", input, other, name=e.out)


def _pow(e: _Emit, input: Any, exponent: Any) -> _Value:
    if isinstance(exponent, _Value):
        return e.binary("pow", input, exponent, name=e.out)
    if exponent == 2:
        return e.unary("square", input, name=e.out)
    if exponent == 0.5:
        return e.unary("sqrt", input, name=e.out)
    if exponent == 1:
        return e.scalar("mul_scalar", input, 1.0, name=e.out)
    raise _Refusal(f"the scalar exponent {exponent!r} is not supported; use 2 (square), 0.5 "
                   "(sqrt) or a tensor exponent")


def _extremum(kind: str, pair: str) -> Lowering:
    """torch.max / torch.min: of a tensor (all dims), over a dim (values and indices), or of
    two tensors (elementwise)."""
    def lower(e: _Emit, input: Any, dim: Any = None, keepdim: bool = False) -> Any:
        if isinstance(dim, _Value):
            return e.binary("maximum" if kind == "max" else "minimum", input, dim, name=e.out)
        values = e.reduce(kind, input, dim, keepdim, name=e.out)
        return values if dim is None else _Pair(values, pair)
    return lower


def _item(e: _Emit, value: Any, key: Any) -> _Value:
    """getitem and getattr on max(dim)'s (values, indices)."""
    if isinstance(value, _Pair) and key in (0, "values"):
        return value.values
    if isinstance(value, _Pair):
        raise _Refusal(f"the indices of {value.op}(x, dim) are not supported; take .values")
    raise _Refusal("indexing a tensor is not supported; pass the slice as its own parameter")


def _reduce(kind: str) -> Lowering:
    def lower(e: _Emit, input: Any, dim: Any = None, keepdim: bool = False, *,
              dtype: Any = None) -> _Value:
        _no_extras(dtype=dtype)
        return e.reduce(kind, input, dim, keepdim, name=e.out)
    return lower


def _logsumexp(e: _Emit, input: Any, dim: Any, keepdim: bool = False) -> _Value:
    return e.reduce("logsumexp", input, dim, keepdim, name=e.out)


def _two_norm(e: _Emit, x: Any, dim: Any, keepdim: bool) -> _Value:
    # ‖x‖₂ over dims = √(Σ x²)
    summed = e.reduce("sum", e.unary("square", x), dim, keepdim)
    return e.unary("sqrt", summed, name=e.out)


def _norm(e: _Emit, input: Any, p: Any = "fro", dim: Any = None, keepdim: bool = False,
          out: Any = None, dtype: Any = None) -> _Value:
    _no_extras(out=out, dtype=dtype)
    if p not in (2, 2.0, "fro"):
        raise _Refusal(f"p={p!r} is not supported; the 2-norm (p=2) is")
    return _two_norm(e, input, dim, keepdim)


def _vector_norm(e: _Emit, x: Any, ord: Any = 2, dim: Any = None, keepdim: bool = False, *,
                 dtype: Any = None, out: Any = None) -> _Value:
    _no_extras(out=out, dtype=dtype)
    if ord not in (2, 2.0):
        raise _Refusal(f"ord={ord!r} is not supported; the 2-norm (ord=2) is")
    return _two_norm(e, x, dim, keepdim)


def _rms_norm(e: _Emit, input: Any, normalized_shape: Any, weight: Any = None,
              eps: Any = None) -> _Value:
    x = e.last_dim(_tensor(input, "its input"), "rms_norm", normalized_shape)
    # torch's eps=None is the dtype's machine epsilon, added to mean(x²)
    eps = DEFAULT_RMS_EPS if eps is None else float(eps)
    given = {"eps": eps} if eps else {}     # eps 0 is the op's default: one spelling
    if weight is None:
        return e.unary("rms_norm", x, name=e.out, **given)
    return e.binary("mul", e.unary("rms_norm", x, **given), weight, name=e.out)


def _layer_norm(e: _Emit, input: Any, normalized_shape: Any, weight: Any = None,
                bias: Any = None, eps: float = DEFAULT_LAYER_EPS) -> _Value:
    x = e.last_dim(_tensor(input, "its input"), "layer_norm", normalized_shape)
    last = weight is None and bias is None
    y = e.unary("layer_norm", x, name=e.out if last else None, eps=float(eps))
    if weight is not None:
        y = e.binary("mul", y, weight, name=e.out if bias is None else None)
    if bias is not None:
        y = e.binary("add", y, bias, name=e.out)
    return y


def _softmax(e: _Emit, input: Any, dim: Any = None, _stacklevel: int = 3,
             dtype: Any = None) -> _Value:
    _no_extras(dtype=dtype)
    if dim is None:
        raise _Refusal("softmax needs dim (e.g. dim=-1)")
    return _safe_softmax(e, _tensor(input, "its input"), dim, name=e.out)


def _safe_softmax(e: _Emit, x: _Value, dim: Any, name: str | None = None) -> _Value:
    """softmax(x, d) = exp(x − max_d x) / Σ_d exp(x − max_d x), as torch computes it."""
    shifted = e.binary("sub", x, e.reduce("max", x, dim, True))
    ex = e.unary("exp", shifted)
    return e.binary("div", ex, e.reduce("sum", ex, dim, True), name=name)


def _sdpa(e: _Emit, query: Any, key: Any, value: Any, attn_mask: Any = None,
          dropout_p: float = 0.0, is_causal: bool = False, scale: Any = None,
          enable_gqa: bool = False) -> _Value:
    """F.scaled_dot_product_attention as its definition: softmax(Q Kᵀ · scale + mask) V, the
    softmax with the row max subtracted (as torch computes it); scale defaults to 1/√E."""
    if dropout_p:
        raise _Refusal(f"dropout_p={dropout_p!r}: only inference is traced; pass dropout_p=0.0 "
                       "(or trace the module in eval mode)")
    if is_causal and attn_mask is not None:
        raise _Refusal("is_causal=True with an attn_mask as well (torch refuses it too); pass "
                       "one of the two")
    if attn_mask is not None and not isinstance(attn_mask, (_Value, _Mask)):
        raise _Refusal("attn_mask must be a tensor the traced function takes as an input (a "
                       "boolean mask, declared with bool_inputs, or an additive float mask) or "
                       "computes; pass it as an argument")
    q, k, v = (_tensor(x, what) for x, what in ((query, "the query"), (key, "the key"),
                                                (value, "the value")))
    if enable_gqa and q.shape[:-2] != k.shape[:-2]:
        raise _Refusal("enable_gqa with fewer key/value heads than query heads is not traced; "
                       "repeat the key and value heads (repeat_interleave) or fold the heads "
                       "into the rows")
    factor = 1 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    s = _matmul(e, q, _transpose(e, k, -2, -1), name=e.tmp("scores"))
    if factor != 1:
        s = e.scalar("mul_scalar", s, factor)
    if isinstance(attn_mask, _Mask):      # True takes part in attention
        attn_mask = e.lowering.mask(attn_mask, true_keeps=True)
    elif is_causal:                        # key j ≤ query i: a mask the user does not pass
        attn_mask = e.lowering.causal(s.shape)
    if attn_mask is not None:
        s = e.binary("add", s, attn_mask)
    return _matmul(e, _safe_softmax(e, s, -1), v, name=e.out)


def _masked_fill(e: _Emit, input: Any, mask: Any, value: Any) -> _Value:
    """x.masked_fill(mask, -inf) with a boolean input `mask` (True masks): x plus the additive
    mask, whose masked value is the finite MASKED (the same softmax wherever a row keeps a
    key). Any other fill value has no IR form."""
    if not isinstance(mask, _Mask):
        raise _Refusal("masked_fill's mask must be a boolean input (declared with bool_inputs, "
                       "or a bool example tensor); a mask computed inside the function is not "
                       "supported")
    if not (isinstance(value, float) and value == -math.inf):
        raise _Refusal(f"masked_fill with {value!r}: only float('-inf') (a mask for a softmax) "
                       "is supported")
    return e.binary("add", input, e.lowering.mask(mask, true_keeps=False), name=e.out)


def _invert(e: _Emit, input: Any) -> _Mask:
    """~mask of a boolean input: the same input, read the other way round."""
    if not isinstance(input, _Mask):
        raise _Refusal("~ (logical not) applies to a boolean input mask only")
    return replace(input, inverted=not input.inverted)


def _log_softmax(e: _Emit, input: Any, dim: Any = None, _stacklevel: int = 3,
                 dtype: Any = None) -> _Value:
    _no_extras(dtype=dtype)
    if dim is None:
        raise _Refusal("log_softmax needs dim (e.g. dim=-1)")
    # log_softmax(x, d) = x − logsumexp_d x
    x = _tensor(input, "its input")
    return e.binary("sub", x, e.reduce("logsumexp", x, dim, True), name=e.out)


def _linear(e: _Emit, input: Any, weight: Any, bias: Any = None) -> _Value:
    # F.linear(x, W, b) = x @ Wᵀ + b
    w = _tensor(weight, "the weight")
    y = _matmul(e, input, _t(e, w), name=e.tmp("matmul") if bias is not None else e.out)
    return e.binary("add", y, bias, name=e.out) if bias is not None else y


def _addmm(e: _Emit, input: Any, mat1: Any, mat2: Any, *, beta: Any = 1,
           alpha: Any = 1) -> _Value:
    # addmm(b, x, W) = β·b + α·(x @ W)
    y = _matmul(e, mat1, mat2, name=e.tmp("matmul"))
    if alpha != 1:
        y = e.scalar("mul_scalar", y, alpha)
    b = _tensor(input, "the bias")
    if beta != 1:
        b = e.scalar("mul_scalar", b, beta)
    return e.binary("add", b, y, name=e.out)


def _mse_loss(e: _Emit, input: Any, target: Any, size_average: Any = None, reduce: Any = None,
              reduction: str = "mean", weight: Any = None) -> _Value:
    _no_extras(size_average=size_average, reduce=reduce, weight=weight)
    if reduction not in ("mean", "sum", "none"):
        raise _Refusal(f"reduction={reduction!r} is not supported; use 'mean', 'sum' or 'none'")
    sq = e.unary("square", e.binary("sub", input, target),
                 name=e.out if reduction == "none" else None)
    return sq if reduction == "none" else e.reduce(reduction, sq, None, False, name=e.out)


@functools.cache
def _functions() -> dict[Any, Lowering]:
    """call_function targets: torch functions, torch.nn.functional, operators."""
    import operator

    import torch
    import torch.nn.functional as F

    return {
        torch.matmul: _matmul, torch.bmm: _matmul, torch.mm: _matmul, operator.matmul: _matmul,
        F.linear: _linear, torch._C._nn.linear: _linear, torch.addmm: _addmm,
        F.silu: _unary_inplace("silu"),
        torch.relu: _unary("relu"), F.relu: _unary_inplace("relu"),
        F.gelu: _gelu, F.leaky_relu: _leaky_relu, F.softplus: _softplus,
        torch.sigmoid: _unary("sigmoid"), F.sigmoid: _unary("sigmoid"),
        torch.tanh: _unary("tanh"), F.tanh: _unary("tanh"),
        torch.abs: _unary("abs"), operator.abs: _unary("abs"), torch.log: _unary("log"),
        torch.exp: _unary("exp"), torch.sqrt: _unary("sqrt"), torch.square: _unary("square"),
        torch.reciprocal: _unary("reciprocal"), torch.rsqrt: _rsqrt,
        torch.clamp: _clamp, torch.clip: _clamp, F.hardtanh: _hardtanh, F.relu6: _relu6,
        torch.maximum: lambda e, input, other: e.binary("maximum", input, other, name=e.out),
        torch.minimum: lambda e, input, other: e.binary("minimum", input, other, name=e.out),
        torch.pow: _pow, operator.pow: _pow,
        torch.add: _add, operator.add: _add, torch.sub: _sub, operator.sub: _sub,
        torch.subtract: _sub, torch.rsub: _rsub,
        torch.neg: _neg, operator.neg: _neg, torch.negative: _neg,
        torch.mul: _mul, operator.mul: _mul, torch.multiply: _mul,
        torch.div: _div, operator.truediv: _div, torch.divide: _div, torch.true_divide: _div,
        torch.sum: _reduce("sum"), torch.mean: _reduce("mean"),
        torch.amax: _reduce("max"), torch.amin: _reduce("min"),
        torch.max: _extremum("max", "max"), torch.min: _extremum("min", "min"),
        torch.logsumexp: _logsumexp, torch.norm: _norm, torch.linalg.vector_norm: _vector_norm,
        F.rms_norm: _rms_norm, torch.rms_norm: _rms_norm, F.layer_norm: _layer_norm,
        torch.layer_norm: _layer_norm,
        F.softmax: _softmax, torch.softmax: _softmax,
        F.scaled_dot_product_attention: _sdpa, torch.masked_fill: _masked_fill,
        operator.invert: _invert, torch.logical_not: _invert, torch.bitwise_not: _invert,
        F.log_softmax: _log_softmax, torch.log_softmax: _log_softmax, F.mse_loss: _mse_loss,
        torch.transpose: _transpose, torch.t: _t, torch.permute: _torch_permute,
        torch.reshape: _torch_reshape, torch.unsqueeze: _unsqueeze, torch.squeeze: _squeeze,
        torch.flatten: _flatten,
        operator.getitem: _item, getattr: _getattr,
    }


def _getattr(e: _Emit, value: Any, attr: str) -> _Value:
    """Tensor attributes fx records: `.T`, `.mT`; `.values` / `.indices` of max(dim)."""
    if attr == "T":
        return _t(e, value)
    if attr == "mT":
        return _transpose(e, value, -2, -1)
    return _item(e, value, attr)


@functools.cache
def _methods() -> dict[str, Lowering]:
    """call_method targets: Tensor methods (`x.exp()`), the tensor first."""
    def minmax(kind: str) -> Lowering:
        return _extremum(kind, kind)
    return {
        "matmul": _matmul, "bmm": _matmul, "mm": _matmul,
        "relu": _unary("relu"), "exp": _unary("exp"), "sqrt": _unary("sqrt"),
        "square": _unary("square"), "pow": _pow, "sigmoid": _unary("sigmoid"),
        "reciprocal": _unary("reciprocal"), "rsqrt": _rsqrt,
        "tanh": _unary("tanh"), "abs": _unary("abs"), "log": _unary("log"),
        "clamp": _clamp, "clip": _clamp,
        "maximum": lambda e, input, other: e.binary("maximum", input, other, name=e.out),
        "minimum": lambda e, input, other: e.binary("minimum", input, other, name=e.out),
        "add": _add, "sub": _sub, "subtract": _sub, "neg": _neg, "mul": _mul,
        "multiply": _mul, "div": _div, "divide": _div,
        "sum": _reduce("sum"), "mean": _reduce("mean"), "amax": _reduce("max"),
        "amin": _reduce("min"), "max": minmax("max"), "min": minmax("min"),
        "logsumexp": _logsumexp, "norm": _norm,
        "softmax": _softmax, "log_softmax": _log_softmax, "masked_fill": _masked_fill,
        "logical_not": _invert, "bitwise_not": _invert,
        "t": _t, "transpose": _transpose, "permute": _permute, "reshape": _reshape,
        "view": _reshape, "unsqueeze": _unsqueeze, "squeeze": _squeeze, "flatten": _flatten,
        "contiguous": _contiguous, "to": _to, "float": _to, "half": _to, "bfloat16": _to,
    }
