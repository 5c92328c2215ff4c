"""Tracing a torch function into a `KernelGraph` with torch.fx, at concrete shapes.

    def rmsnorm_matmul(X, W):
        return F.rms_norm(X, (X.shape[-1],)) @ W

    graph = trace(rmsnorm_matmul, {"X": (8, 1024), "W": (1024, 1024)})

Tracing and lowering are one walk: a tracer subclass lowers each fx node to builder ops the moment
fx creates it, so every traced tensor's shape is known while the function still runs. Its proxies
answer `x.shape`, `x.size()`, `x.size(-1)`, `x.dim()` and `x.ndim` with plain ints, which makes
`x.shape[-1]`, `len(x.shape)` and Python `if`s on shapes ordinary Python.

The vocabulary is the op table's: matmul/@ (and bmm, mm), silu, relu, gelu (exact), exp, sqrt,
square, pow, add/sub/mul/div (a Python scalar factor or divisor becomes `mul_scalar`), neg,
sum/mean over one dim with keepdim=True, rms_norm without epsilon, and softmax. Two lowerings are
rewrites that hold exactly in real arithmetic:
    softmax(x, d)  = exp(x) / sum(exp(x), d, keepdim=True)    (no max-subtraction)
    a - b          = a + (-1)·b
Anything else is an `UnsupportedOpError` naming the op and what to write instead.

torch is imported inside the functions here: importing this module stays cheap.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from prism.errors import PrismError, ShapeError, UnsupportedOpError
from prism.frontend.builder import Graph, Tensor
from prism.ir.dims import evaluate
from prism.ir.graph import KernelGraph

SUPPORTED = ("matmul/@, silu, relu, gelu, exp, sum, mean, sqrt, square/pow, add/mul/div, "
             "rms_norm, softmax")

Lowering = Callable[..., Tensor]


class _Refusal(Exception):
    """Raised by a lowering: this call of a supported op cannot be expressed; the text says why."""


def trace(fn: Callable[..., Any], shapes: Mapping[str, Sequence[int]],
          name: str | None = None) -> KernelGraph:
    """The kernel graph of torch function `fn` with parameter `p` of shape `shapes[p]`.

    Inputs are named after the parameters, other tensors after their fx nodes.
    """
    name = name or str(getattr(fn, "__name__", "workload"))
    lowering = _Lowering(name, shapes)
    tracer = _tracer_class()(lowering)
    try:
        tracer.trace(fn)
    except PrismError:
        raise
    except Exception as err:  # fx's own failures: control flow on tensors, unknown Python, ...
        raise UnsupportedOpError(
            f"workload {name}: torch.fx cannot trace it ({type(err).__name__}: "
            f"{_first_line(err)}); write it as straight-line tensor code without branching on "
            "tensor values") from err
    return lowering.g.build()


# -- the lowering: fx nodes to builder ops -------------------------------------------------------

class _Lowering:
    """Lowers fx nodes, in creation order, into a `prism.Graph` under construction."""

    def __init__(self, workload: str, shapes: Mapping[str, Sequence[int]]) -> None:
        self.workload = workload
        self.shapes = shapes
        self.g = Graph(workload)
        self.values: dict[Any, Tensor] = {}   # fx Node -> builder tensor
        self._used: set[str] = set()

    def shape_of(self, node: Any) -> tuple[int, ...]:
        return tuple(evaluate(d) for d in self.values[node].shape)

    def lower(self, node: Any) -> None:
        if node.op == "placeholder":
            if node.target not in self.shapes:
                raise ShapeError(f"workload {self.workload}: parameter {node.target} has no "
                                 "shape; give every parameter a shape")
            self.values[node] = self.g.input(self.fresh(node.target), self.shapes[node.target])
        elif node.op == "output":
            self._outputs(node.args[0])
        elif node.op in ("call_function", "call_method"):
            self.values[node] = self._call(node)
        else:  # get_attr: a tensor made inside the function (torch.ones, a captured tensor)
            raise UnsupportedOpError(
                f"workload {self.workload}: a constant tensor ({node.target}) is not supported; "
                "pass every tensor as a parameter of the function")

    def fresh(self, base: str) -> str:
        """A tensor name not used yet in this graph, spelled like `base` (an identifier)."""
        base = re.sub(r"\W", "_", str(base)) or "t"
        if base[0].isdigit():
            base = f"t_{base}"
        name, n = base, 0
        while name in self._used:
            n += 1
            name = f"{base}_{n}"
        self._used.add(name)
        return name

    def _call(self, node: Any) -> Tensor:
        op = _op_name(node)
        table = _methods() if node.op == "call_method" else _functions()
        lowering = table.get(node.target)
        if lowering is None:
            raise UnsupportedOpError(f"workload {self.workload}: {op} is not supported; "
                                     f"supported: {SUPPORTED}")
        args, kwargs = self._values(node.args), self._values(node.kwargs)
        emit = _Emit(self, node.name)
        try:
            inspect.signature(lowering).bind(emit, *args, **kwargs)
        except TypeError as err:
            raise UnsupportedOpError(f"workload {self.workload}: {op} with these arguments is not "
                                     f"supported ({err}); pass only the arguments torch "
                                     "documents for it") from None
        try:
            return lowering(emit, *args, **kwargs)
        except _Refusal as why:
            raise UnsupportedOpError(f"workload {self.workload}: {op}: {why}") from None
        except ShapeError as err:
            raise ShapeError(f"workload {self.workload}: {op}: {err}") from err

    def _values(self, args: Any) -> Any:
        from torch.fx.node import map_arg
        return map_arg(args, lambda n: self.values[n])  # type: ignore[arg-type, return-value]

    def _outputs(self, result: Any) -> None:
        from torch.fx import Node

        results = result if isinstance(result, (tuple, list)) else [result]
        for r in results:
            if not isinstance(r, Node) or r not in self.values:
                raise UnsupportedOpError(
                    f"workload {self.workload}: it returns {r!r}, not a traced tensor; "
                    "return a tensor or a tuple of tensors computed from the parameters")
            self.g.output(self.values[r])


class _Emit:
    """What a lowering adds ops through: the graph, the fx node's name for the op that computes
    the node's value (`out`), and fresh names for intermediates (`tmp`)."""

    def __init__(self, lowering: _Lowering, node_name: str) -> None:
        self.g = lowering.g
        self.out = lowering.fresh(node_name)
        self._fresh = lowering.fresh

    def tmp(self, kind: str) -> str:
        return self._fresh(f"{self.out}_{kind}")


def _op_name(node: Any) -> str:
    """How the user wrote the op: torch.tanh, torch.nn.functional.silu, operator.sub, Tensor.T."""
    if node.op == "call_method":
        return f"Tensor.{node.target}"
    if node.target is getattr:
        return f"Tensor.{node.args[1]}"
    module = getattr(node.target, "__module__", None) or ""
    module = {"_operator": "operator", "torch._C._nn": "torch.nn.functional",
              "torch._C._VariableFunctions": "torch"}.get(module, module)
    return f"{module}.{getattr(node.target, '__name__', node.target)}".lstrip(".")


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
        """Lowers every node as it is created (see the module docstring)."""

        def __init__(self, lowering: _Lowering) -> None:
            super().__init__()
            self.lowering = lowering

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


def _tensor(v: Any, what: str) -> Tensor:
    if not isinstance(v, Tensor):
        raise _Refusal(f"{what} must be a traced tensor, got {v!r}; pass it as a parameter")
    return v


def _no_extras(**given: Any) -> None:
    """Refuse arguments the IR cannot honour: each must be at its default (None or False)."""
    for key, value in given.items():
        if value not in (None, False):
            raise _Refusal(f"{key}={value!r} is not supported; drop it")


def _unary(kind: str) -> Lowering:
    def lower(e: _Emit, input: Any) -> Tensor:
        return getattr(e.g, kind)(_tensor(input, "its input"), name=e.out)
    return lower


def _unary_inplace(kind: str) -> Lowering:
    def lower(e: _Emit, input: Any, inplace: bool = False) -> Tensor:
        _no_extras(inplace=inplace)
        return getattr(e.g, kind)(_tensor(input, "its input"), name=e.out)
    return lower


def _gelu(e: _Emit, input: Any, approximate: str = "none") -> Tensor:
    if approximate != "none":
        raise _Refusal(f"approximate={approximate!r} is not supported; the IR's gelu is the "
                       "exact (erf) one: use approximate='none'")
    return e.g.gelu(_tensor(input, "its input"), name=e.out)


def _matmul(e: _Emit, input: Any, other: Any) -> Tensor:
    return e.g.matmul(_tensor(input, "A"), _tensor(other, "B"), name=e.out)


def _add(e: _Emit, input: Any, other: Any, *, alpha: Any = 1) -> Tensor:
    if _is_scalar(input) or _is_scalar(other):
        raise _Refusal("adding a Python scalar is not supported (the IR has no add-scalar op); "
                       "pass the constant as an input tensor of the same rank with size-1 dims")
    b = _tensor(other, "the addend")
    if alpha != 1:   # a + α·b
        b = e.g.mul_scalar(b, alpha, name=e.tmp("alpha"))
    return e.g.add(_tensor(input, "the addend"), b, name=e.out)


def _sub(e: _Emit, input: Any, other: Any, *, alpha: Any = 1) -> Tensor:
    if _is_scalar(input) or _is_scalar(other):
        raise _Refusal("subtracting a Python scalar is not supported (the IR has no add-scalar "
                       "op); pass the constant as an input tensor of the same rank")
    # a - α·b = a + (-α)·b
    neg = e.g.mul_scalar(_tensor(other, "the subtrahend"), -alpha, name=e.tmp("neg"))
    return e.g.add(_tensor(input, "the minuend"), neg, name=e.out)


def _neg(e: _Emit, input: Any) -> Tensor:
    return e.g.mul_scalar(_tensor(input, "its input"), -1.0, name=e.out)


def _mul(e: _Emit, input: Any, other: Any) -> Tensor:
    if _is_scalar(input):
        input, other = other, input
    if _is_scalar(other):
        return e.g.mul_scalar(_tensor(input, "the factor"), other, name=e.out)
    return e.g.mul(_tensor(input, "the factor"), _tensor(other, "the factor"), name=e.out)


def _div(e: _Emit, input: Any, other: Any, *, rounding_mode: Any = None) -> Tensor:
    _no_extras(rounding_mode=rounding_mode)
    if _is_scalar(input):
        raise _Refusal("a Python scalar divided by a tensor is not supported; pass the "
                       "numerator as an input tensor")
    if _is_scalar(other):
        if other == 0:
            raise _Refusal("division by the constant 0")
        # x / c = x · (1/c)
        return e.g.mul_scalar(_tensor(input, "the dividend"), 1.0 / other, name=e.out)
    return e.g.div(_tensor(input, "the dividend"), _tensor(other, "the divisor"), name=e.out)


def _pow(e: _Emit, input: Any, exponent: Any) -> Tensor:
    base = _tensor(input, "the base")
    if isinstance(exponent, Tensor):
        return e.g.pow(base, exponent, name=e.out)
    if exponent == 2:
        return e.g.square(base, name=e.out)
    if exponent == 0.5:
        return e.g.sqrt(base, name=e.out)
    raise _Refusal(f"the scalar exponent {exponent!r} is not supported; use 2 (square), 0.5 "
                   "(sqrt) or a tensor exponent")


def _one_dim(dim: Any) -> int:
    if isinstance(dim, (tuple, list)) and len(dim) == 1:
        dim = dim[0]
    if not isinstance(dim, int) or isinstance(dim, bool):
        raise _Refusal(f"dim={dim!r} is not supported; reduce over one dim with keepdim=True, "
                       "e.g. x.sum(-1, keepdim=True)")
    return dim


def _reduce(kind: str) -> Lowering:
    def lower(e: _Emit, input: Any, dim: Any = None, keepdim: bool = False, *,
              dtype: Any = None) -> Tensor:
        _no_extras(dtype=dtype)
        axis = _one_dim(dim)
        if not keepdim:
            raise _Refusal("keepdim=False is not supported (the IR keeps reduced dims with "
                           "size 1); use keepdim=True")
        return getattr(e.g, kind)(_tensor(input, "its input"), axis, name=e.out)
    return lower


def _rms_norm(e: _Emit, input: Any, normalized_shape: Any, weight: Any = None,
              eps: Any = None) -> Tensor:
    x = _tensor(input, "its input")
    last = evaluate(x.shape[-1])
    norm = [normalized_shape] if isinstance(normalized_shape, int) else list(normalized_shape)
    if norm != [last]:
        raise _Refusal(f"normalized_shape={tuple(norm)} is not supported; the IR's rms_norm "
                       f"normalises over the last dim only: pass ({last},)")
    # torch's eps=None adds its dtype's machine epsilon to mean(x²): equal to the IR's up to
    # rounding; an explicit eps is a different function, which the IR cannot express.
    if eps is not None:
        raise _Refusal("the IR's rms_norm has no epsilon (as Mirage's); drop eps")
    if weight is None:
        return e.g.rms_norm(x, name=e.out)
    w = _tensor(weight, "the weight")
    if len(w.shape) != len(x.shape):
        raise _Refusal("a weight of lower rank than the input is not supported (the IR "
                       "broadcasts same-rank operands only); multiply by the weight afterwards, "
                       "with the input's rank")
    return e.g.mul(e.g.rms_norm(x, name=e.tmp("rms_norm")), w, name=e.out)


def _softmax(e: _Emit, input: Any, dim: Any = None, _stacklevel: int = 3,
             dtype: Any = None) -> Tensor:
    _no_extras(dtype=dtype)
    if dim is None:
        raise _Refusal("softmax needs dim (e.g. dim=-1)")
    # softmax(x, d) = exp(x) / Σ_d exp(x), with no max-subtraction: equal in real arithmetic.
    ex = e.g.exp(_tensor(input, "its input"), name=e.tmp("exp"))
    return e.g.div(ex, e.g.sum(ex, _one_dim(dim), name=e.tmp("sum")), name=e.out)


@functools.cache
def _functions() -> dict[Any, Lowering]:
    """call_function targets: torch functions, torch.nn.functional, operators."""
    import operator

    import torch
    import torch.nn.functional as F

    return {
        torch.matmul: _matmul, torch.bmm: _matmul, torch.mm: _matmul, operator.matmul: _matmul,
        F.silu: _unary_inplace("silu"),
        torch.relu: _unary("relu"), F.relu: _unary_inplace("relu"),
        F.gelu: _gelu,
        torch.exp: _unary("exp"), torch.sqrt: _unary("sqrt"), torch.square: _unary("square"),
        torch.pow: _pow, operator.pow: _pow,
        torch.add: _add, operator.add: _add, torch.sub: _sub, operator.sub: _sub,
        torch.neg: _neg, operator.neg: _neg,
        torch.mul: _mul, operator.mul: _mul, torch.div: _div, operator.truediv: _div,
        torch.sum: _reduce("sum"), torch.mean: _reduce("mean"),
        F.rms_norm: _rms_norm, torch.rms_norm: _rms_norm,
        F.softmax: _softmax, torch.softmax: _softmax,
    }


@functools.cache
def _methods() -> dict[str, Lowering]:
    """call_method targets: Tensor methods (`x.exp()`), the tensor first."""
    return {
        "matmul": _matmul, "bmm": _matmul, "mm": _matmul,
        "relu": _unary("relu"), "exp": _unary("exp"), "sqrt": _unary("sqrt"),
        "square": _unary("square"), "pow": _pow,
        "add": _add, "sub": _sub, "neg": _neg, "mul": _mul, "div": _div,
        "sum": _reduce("sum"), "mean": _reduce("mean"), "softmax": _softmax,
    }
