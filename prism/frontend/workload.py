"""`@prism.workload`: a torch function with the shapes of its parameters, traced on demand.

    @prism.workload(X=(8, 1024), W=(1024, 1024))
    def rmsnorm_matmul(X, W):
        return torch.nn.functional.rms_norm(X, (X.shape[-1],)) @ W

    rmsnorm_matmul(x, w)          # still the torch function
    rmsnorm_matmul.graph          # its KernelGraph (traced with torch.fx on first access)
    rmsnorm_matmul.reference(*rmsnorm_matmul.random_inputs())   # torch's float64 answer

A workload runs in a dtype, as model code does: `@workload(dtype="bfloat16", X=...)` (float16,
bfloat16 or float32, by torch's names, their aliases or torch dtypes; float16 unless given). The
graph and the float64 reference do not depend on it; what the program is optimized for, and
checked in, does (`prism.superoptimize`).

An `nn.Module` is a workload too: `from_module(module, *example_inputs)` traces its forward
with its parameters and buffers as further inputs of fixed shape, named after their paths
(`fc1.weight` → `fc1_weight`), whose values the workload takes from the module wherever it runs
(`random_inputs` draws the forward's inputs only; `reference` is the module itself, in float64).
Its dtype is its floating tensors' (the example inputs', the parameters' and buffers'), which must
agree: `module.to(torch.bfloat16)` is a bfloat16 workload.

A boolean mask is a parameter too: `@workload(Q=..., K=..., V=..., mask=(L, S),
bool_inputs=("mask",))` says that `mask` is a torch.bool tensor (an `nn.Module`'s bool example
input says so itself); the program holds it as an additive float mask, `random_inputs` draws it
(as that additive mask: every row keeps at least one key) and `reference` hands the torch
function the boolean tensor. `is_causal=True` adds a mask input the user never passes: the
graph's last input, which `random_inputs` makes and `reference` leaves out.

A `Workload` is immutable in what defines it (the function and its shapes); `with_shapes`,
`with_input_scale` and `replace` return new ones. torch is imported only when something is traced
or run, so decorating functions stays cheap.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import cached_property
from typing import Any, overload

import numpy as np

from prism.errors import DtypeError, InputError, PrismError, ShapeError
from prism.ir.dtypes import DEFAULT_DTYPE, DType, get_dtype
from prism.ir.graph import KernelGraph, View, additive_mask, check_shape, made_input, mask_as_bool

ShapeDict = dict[str, tuple[int, ...]]


class Workload:
    """A torch function, callable as before, plus the concrete shape of every parameter.

    Attributes: `name`, `shapes` (parameter → shape, in parameter order), `description` (the first
    docstring line unless given), `program` (a one-line program text for listings), `shape_sets`
    (alternative shapes the workload is studied at; the first is the default), `input_scale`
    (parameter → σ of the normal samples `random_inputs` draws: 1.0 unless set, smaller for the
    operands of `exp` so that it stays in range), `dtype` (the `prism.ir.dtypes.DType` it runs
    in).
    """

    __wrapped__: Callable[..., Any]

    def __init__(self, fn: Callable[..., Any], shapes: Mapping[str, Sequence[int]], *,
                 description: str | None = None, program: str = "",
                 shape_sets: Iterable[Mapping[str, Sequence[int]]] | None = None,
                 input_scale: Mapping[str, float] | None = None,
                 dtype: DType | Any = DEFAULT_DTYPE, bool_inputs: Iterable[str] = ()) -> None:
        if isinstance(fn, Workload):   # re-decorated: wrap the function, not its cached state
            fn = fn.__wrapped__
        functools.update_wrapper(self, fn)
        self.__wrapped__ = fn
        self.name: str = getattr(fn, "__name__", "workload")
        self.params = _parameters(fn, self.name)
        self.shapes: ShapeDict = self._checked(shapes)
        self.description = description if description is not None else _first_doc_line(fn)
        self.program = program
        self.shape_sets: tuple[ShapeDict, ...] = tuple(
            self._checked(s) for s in (shape_sets if shape_sets is not None else [self.shapes]))
        self.input_scale: dict[str, float] = self._scales(input_scale or {})
        self.dtype: DType = get_dtype(dtype)
        self.bool_inputs: tuple[str, ...] = tuple(bool_inputs)
        self._no_extra(dict.fromkeys(self.bool_inputs))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.__wrapped__(*args, **kwargs)

    def __repr__(self) -> str:
        params = ", ".join(f"{p}[{','.join(map(str, s))}]" for p, s in self.shapes.items())
        dtype = f", {self.dtype}" if self.dtype != DEFAULT_DTYPE else ""
        return f"Workload({self.name}: {params}{dtype})"

    @cached_property
    def graph(self) -> KernelGraph:
        """The traced kernel graph, named after the function (traced once, then cached)."""
        from prism.frontend.fx import trace
        return trace(self.__wrapped__, self.shapes, self.name, self.bool_inputs)

    # -- new workloads from this one ----------------------------------------------------------

    def replace(self, **fields: Any) -> Workload:
        """A copy with some of the constructor's keyword fields (or `shapes`) changed."""
        current: dict[str, Any] = {"shapes": self.shapes, "description": self.description,
                   "program": self.program, "shape_sets": self.shape_sets,
                   "input_scale": self.input_scale, "dtype": self.dtype,
                   "bool_inputs": self.bool_inputs}
        unknown = sorted(set(fields) - set(current))
        if unknown:
            raise TypeError(f"Workload.replace got unknown field(s) {', '.join(unknown)}; "
                            f"known: {', '.join(current)}")
        current.update(fields)
        shapes = current.pop("shapes")
        return Workload(self.__wrapped__, shapes, **current)

    def with_shapes(self, **shapes: Sequence[int]) -> Workload:
        """The same function at new shapes; parameters not named keep their shapes."""
        self._no_extra(shapes)
        return self.replace(shapes={**self.shapes, **shapes})

    def with_input_scale(self, **scales: float) -> Workload:
        """The same workload whose `random_inputs` draw parameter `p` with σ = `scales[p]`."""
        self._no_extra(scales)
        return self.replace(input_scale={**self.input_scale, **scales})

    # -- running it -----------------------------------------------------------------------------

    def random_inputs(self, seed: int = 0) -> list[np.ndarray]:
        """One float64 array per parameter: standard normal × `input_scale[p]`, reproducible; a
        boolean mask as the additive mask the program holds (each key kept with probability
        3/4, the first key of every row always), then the masks the program makes itself
        (is_causal's), one per graph input."""
        rng = np.random.default_rng(seed)
        arrays = [rng.standard_normal(shape) * self.input_scale[p]
                  for p, shape in self.shapes.items()]
        views = self._made_views()
        for i, p in enumerate(self.shapes):
            if p in self.bool_inputs:
                keep = rng.random(self.shapes[p]) < 0.75
                keep[..., 0] = True
                arrays[i] = additive_mask(keep)
        arrays += [made_input(v, v.shape) for v in views[len(arrays):] if v is not None]
        return arrays

    def _made_views(self) -> list[View | None]:
        """The view of each graph input (None where it has none), when the program has a mask
        input; [] when it has none (or does not trace: then nothing is made)."""
        try:
            graph = self.graph
        except PrismError:
            return []
        return [graph.input_view(i) for i in range(len(graph.inputs))]

    def reference(self, *arrays: Any) -> list[np.ndarray]:
        """The torch function's outputs in float64 on `arrays` (numpy or torch, parameter order)."""
        import torch

        views = self._made_views()
        if len(arrays) == len(views) > len(self.shapes):   # the graph's inputs: drop the made
            arrays = arrays[:len(self.shapes)]
        if len(arrays) != len(self.shapes):
            raise InputError(f"workload {self.name} takes {len(self.shapes)} inputs "
                             f"({', '.join(self.shapes)}), got {len(arrays)}; pass one array per "
                             "parameter, in order")
        tensors = [_float64_tensor(a, p, shape) if p not in self.bool_inputs else
                   _bool_tensor(a, p, shape, views[i] if i < len(views) else None)
                   for i, (a, (p, shape)) in enumerate(zip(arrays, self.shapes.items(),
                                                           strict=True))]
        with torch.no_grad():
            result = self.__wrapped__(*tensors)
        results = result if isinstance(result, (tuple, list)) else [result]
        return [r.detach().cpu().double().numpy() for r in results]

    def to_json(self) -> dict[str, Any]:
        """What a listing shows (nothing is traced): name, description, program, shapes,
        dtype."""
        return {"name": self.name, "description": self.description, "program": self.program,
                "params": {p: list(s) for p, s in self.shapes.items()},
                "shape_sets": [{p: list(s) for p, s in ss.items()} for ss in self.shape_sets],
                "input_scale": dict(self.input_scale), "dtype": self.dtype.name,
                **({"bool_inputs": list(self.bool_inputs)} if self.bool_inputs else {})}

    # -- checks ---------------------------------------------------------------------------------

    def _checked(self, shapes: Mapping[str, Sequence[int]]) -> ShapeDict:
        """Every parameter has a shape and nothing else does; each shape is concrete, rank 1..4,
        dims ≥ 1. Returned in parameter order."""
        missing = [p for p in self.params if p not in shapes]
        extra = [p for p in shapes if p not in self.params]
        if missing or extra:
            problems = ([f"{_plural(missing, 'parameter')} {_has(missing)} no shape"]
                        if missing else []) + ([f"{_not_params(extra)}"] if extra else [])
            raise ShapeError(f"workload {self.name}: {'; '.join(problems)}; give exactly one shape "
                             f"per parameter ({', '.join(self.params)})")
        return {p: _concrete_shape(shapes[p], f"workload {self.name}: parameter {p}")
                for p in self.params}

    def _scales(self, scales: Mapping[str, float]) -> dict[str, float]:
        self._no_extra(scales)
        return {p: float(scales.get(p, 1.0)) for p in self.params}

    def _no_extra(self, named: Mapping[str, Any]) -> None:
        extra = [p for p in named if p not in self.params]
        if extra:
            raise ShapeError(f"workload {self.name}: {_not_params(extra)}; "
                             f"its parameters are {', '.join(self.params)}")


@overload
def workload(_fn: Callable[..., Any], /, *, dtype: Any = ..., bool_inputs: Iterable[str] = ...,
             **shapes: Sequence[int]) -> Workload: ...


@overload
def workload(_fn: None = None, /, *, dtype: Any = ..., bool_inputs: Iterable[str] = ...,
             **shapes: Sequence[int]) -> Callable[[Callable[..., Any]], Workload]: ...


def workload(_fn: Callable[..., Any] | None = None, /, *, dtype: Any = DEFAULT_DTYPE,
             bool_inputs: Iterable[str] = (),
             **shapes: Sequence[int]) -> Workload | Callable[[Callable[..., Any]], Workload]:
    """Decorate a torch function with the shape of each parameter: `@workload(X=(8, 1024), ...)`,
    the dtype it runs in (`dtype="bfloat16"`; float16 when not given) and the parameters that
    are boolean masks (`bool_inputs=("mask",)`).

    `workload(fn, X=..., ...)` is the same without decorator syntax. Shapes and the dtype are
    checked now: every parameter needs a shape, rank 1..4, every dim a positive int.
    """
    if _fn is not None:
        return Workload(_fn, shapes, dtype=dtype, bool_inputs=bool_inputs)

    def decorate(fn: Callable[..., Any]) -> Workload:
        return Workload(fn, shapes, dtype=dtype, bool_inputs=bool_inputs)

    return decorate


class ModuleWorkload(Workload):
    """An `nn.Module` as a workload (see the module docstring): parameters are the forward's
    inputs, then the module tensors its forward reads (`fixed`), whose values are the module's.
    """

    def __init__(self, module: Any, shapes: Mapping[str, Sequence[int]], *,
                 name: str | None = None, description: str | None = None,
                 input_scale: Mapping[str, float] | None = None,
                 dtype: DType | Any = DEFAULT_DTYPE, bool_inputs: Iterable[str] = ()) -> None:
        import inspect

        from prism.frontend.fx import input_name, module_tensors, trace_module

        self.module = module
        label = name or type(module).__name__
        args = [p for p in inspect.signature(module.forward).parameters]
        missing = [p for p in args if p not in shapes]
        if missing or len(shapes) != len(args):
            raise ShapeError(f"module {label}: forward takes {', '.join(args) or 'nothing'}; "
                             f"give one example input (or shape) for each")
        self.inputs = {p: tuple(int(n) for n in shapes[p]) for p in args}
        traced = trace_module(module, self.inputs, label, bool_inputs)
        tensors = {input_name(path): t for path, t in module_tensors(module)}
        self.fixed = {t: tensors[t] for t in traced.inputs if t in tensors}
        order = [*self.inputs, *self.fixed]

        def forward(*tensors: Any) -> Any:
            from torch.func import functional_call
            paths = {input_name(path): path for path, _ in module_tensors(module)}
            values = dict(zip(order, tensors, strict=True))
            return functional_call(module, {paths[t]: values[t] for t in self.fixed},
                                   tuple(values[p] for p in self.inputs))

        forward.__name__ = label
        forward.__doc__ = type(module).__doc__ if description is None else description
        forward.__signature__ = inspect.Signature(   # type: ignore[attr-defined]
            [inspect.Parameter(p, inspect.Parameter.POSITIONAL_OR_KEYWORD) for p in order])
        all_shapes = {**self.inputs, **{t: tuple(v.shape) for t, v in self.fixed.items()}}
        super().__init__(forward, all_shapes, description=description or "",
                         input_scale=input_scale, dtype=dtype, bool_inputs=bool_inputs)
        self.__dict__["graph"] = traced      # the cached_property's slot: traced once, above

    def replace(self, **fields: Any) -> Workload:
        allowed = {"shapes", "description", "input_scale", "dtype"}
        unknown = sorted(set(fields) - allowed)
        if unknown:
            raise TypeError(f"ModuleWorkload.replace got field(s) {', '.join(unknown)}; it "
                            f"takes {', '.join(sorted(allowed))}")
        shapes = dict(fields.get("shapes", self.shapes))
        for t, v in self.fixed.items():
            if tuple(shapes.get(t, v.shape)) != tuple(v.shape):
                raise ShapeError(f"module {self.name}: {t} is the module's tensor of shape "
                                 f"{tuple(v.shape)}; only the forward's inputs take new shapes")
        return ModuleWorkload(self.module, {p: shapes[p] for p in self.inputs}, name=self.name,
                              description=fields.get("description", self.description),
                              input_scale={p: s for p, s in fields.get(
                                  "input_scale", self.input_scale).items() if p in self.inputs},
                              dtype=fields.get("dtype", self.dtype),
                              bool_inputs=self.bool_inputs)

    def random_inputs(self, seed: int = 0) -> list[np.ndarray]:
        """The forward's inputs drawn as `Workload.random_inputs` does; the module's own tensors
        as they are (float64)."""
        drawn = super().random_inputs(seed)
        fixed = {t: v.detach().cpu().double().numpy() for t, v in self.fixed.items()}
        own = [fixed.get(p, a) for p, a in zip(self.shapes, drawn, strict=False)]
        return own + drawn[len(own):]          # then the masks the program makes


def from_module(module: Any, *example_inputs: Any, name: str | None = None) -> ModuleWorkload:
    """`module` (an `nn.Module`) as a workload, at the shapes of `example_inputs` (tensors, or
    shapes), one per argument of its forward. Its parameters and buffers become inputs of fixed
    shape named after their paths; their values come from the module. Its dtype is the one its
    floating tensors share (float16 when it has none); tensors that disagree, or a dtype Prism
    does not run (float64), are a `DtypeError`."""
    import inspect

    label = name or type(module).__name__
    args = list(inspect.signature(module.forward).parameters)
    if len(example_inputs) != len(args):
        raise ShapeError(f"module {label}: forward takes "
                         f"{len(args)} input(s) ({', '.join(args)}), got {len(example_inputs)} "
                         "example input(s); pass one per argument")
    shapes = {p: tuple(getattr(x, "shape", x)) for p, x in zip(args, example_inputs, strict=True)}
    bools = [p for p, x in zip(args, example_inputs, strict=True)
             if str(getattr(x, "dtype", "")) == "torch.bool"]
    return ModuleWorkload(module, shapes, name=name, bool_inputs=bools,
                          dtype=_module_dtype(module, dict(zip(args, example_inputs, strict=True)),
                                              label))


def _module_dtype(module: Any, examples: Mapping[str, Any], label: str) -> DType:
    """The dtype every floating example input, parameter and buffer of `module` has."""
    from prism.frontend.fx import module_tensors

    tensors = [(f"input {p}", x) for p, x in examples.items()] + module_tensors(module)
    found: dict[str, str] = {}                    # torch dtype → the first tensor that has it
    for where, t in tensors:
        dtype = getattr(t, "dtype", None)
        if dtype is not None and dtype.is_floating_point:
            found.setdefault(str(dtype).removeprefix("torch."), where)
    if len(found) > 1:
        seen = ", ".join(f"{w} is {d}" for d, w in found.items())
        raise DtypeError(f"module {label}: its floating tensors disagree ({seen}); convert the "
                         "module and the example inputs to one dtype, e.g. "
                         "module.to(torch.bfloat16)")
    if not found:
        return DEFAULT_DTYPE
    ((dtype, where),) = found.items()
    try:
        return get_dtype(dtype)
    except DtypeError as e:
        raise DtypeError(f"module {label}: {where} is {dtype}, {e}") from None


workload.from_module = from_module  # type: ignore[attr-defined]  # prism.workload.from_module


def _parameters(fn: Callable[..., Any], name: str) -> tuple[str, ...]:
    import inspect

    params = list(inspect.signature(fn).parameters.values())
    star = [p.name for p in params if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if star:
        raise ShapeError(f"workload {name}: *{star[0]} cannot be given a shape; name each tensor "
                         "parameter")
    return tuple(p.name for p in params)


def _plural(names: Sequence[str], noun: str) -> str:
    return f"{noun}{'s' if len(names) > 1 else ''} {', '.join(names)}"


def _has(names: Sequence[str]) -> str:
    return "have" if len(names) > 1 else "has"


def _not_params(names: Sequence[str]) -> str:
    return f"{', '.join(names)} {'are not parameters' if len(names) > 1 else 'is not a parameter'}"


def _concrete_shape(shape: Any, what: str) -> tuple[int, ...]:
    if not isinstance(shape, Sequence) or isinstance(shape, str) or not all(
            isinstance(d, (int, np.integer)) and not isinstance(d, bool) for d in shape):
        raise ShapeError(f"{what} has shape {shape!r}; give a tuple of positive ints, "
                         "e.g. (8, 1024)")
    return tuple(d.value for d in check_shape([int(d) for d in shape], what))


def _float64_tensor(a: Any, name: str, shape: tuple[int, ...]) -> Any:
    import torch

    if isinstance(a, torch.Tensor):
        t = a.detach().to("cpu", torch.float64, copy=True)
    else:
        t = torch.tensor(np.asarray(a, dtype=np.float64))
    if tuple(t.shape) != shape:
        raise InputError(f"input {name} has shape {tuple(t.shape)}, the workload expects {shape}; "
                         "pass arrays of the workload's shapes in parameter order")
    return t


def _first_doc_line(fn: Callable[..., Any]) -> str:
    doc = (fn.__doc__ or "").strip()
    return doc.splitlines()[0].strip() if doc else ""


def _bool_tensor(a: Any, name: str, shape: tuple[int, ...], view: View | None) -> Any:
    """Boolean mask parameter `name` for the torch function: as given when boolean, else read
    back from the additive mask the program holds (`random_inputs`' form)."""
    import torch

    t = torch.as_tensor(np.asarray(a.detach().cpu() if hasattr(a, "detach") else a))
    if tuple(t.shape) != shape:
        raise ShapeError(f"mask {name} has shape {tuple(t.shape)}, the workload's is {shape}")
    if t.dtype == torch.bool:
        return t
    return torch.from_numpy(mask_as_bool(view or View(shape, made="keep"), t.numpy()))
