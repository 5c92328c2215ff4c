"""Measurement backends (DESIGN.md §3). Each labels its numbers with their kind:

- `model`     → `modeled`: the analytic cost model for the named device (`prism.cost`);
- `interpret` → `interpreted`: the generated module run in Triton's interpreter on CPU tensors,
                checked against the float64 reference interpreter; its wall time says nothing
                about a GPU, so finalists are ranked by the model and only the kind is honest;
- `cuda`      → `measured`: the generated module on the GPU, median of CUDA-event timings
                (`triton.testing.do_bench`), checked against the float64 reference once.

Checks run the kernel on the workload's own inputs where the run has a workload (drawn at its
declared scales, which keep exp in range: `Workload.random_inputs`), else on `random_inputs`,
on copies of the inputs in the program's dtype (`prism.ir.dtypes`) against
the float64 interpreter on the same dtype-rounded values, within that dtype's tolerance. Triton
3.9's interpreter computes a bf16 `tl.dot` wrong (`bench/bf16_interpreter.py` shows it: it
multiplies the raw 16-bit patterns), so under the interpreter a bf16 program's kernel runs on
fp32 tensors holding the bf16-rounded values (`tensors_for_check`): the same generated kernel
with fp32 tiles, checked with bf16's tolerance; its PTX compile (the tuner's) is what shows
the bf16 kernel itself compiles, and on a GPU it runs in bf16.

A backend raises `MeasureError` for a kernel that runs wrong; the tuner scores it `inf`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from prism.cost import DeviceSpec, modeled
from prism.errors import PrismError
from prism.instantiate.codegen import TritonProgram
from prism.ir.dtypes import BFLOAT16, DEFAULT_DTYPE, FLOAT16, DType, get_dtype
from prism.ir.graph import KernelGraph

MEASURES = ("model", "interpret", "cuda")
KIND = {"model": "modeled", "interpret": "interpreted", "cuda": "measured"}
TOLERANCE = FLOAT16.tolerance   # fp16's 2e-2; each dtype's is `DType.tolerance`
BF16_IN_FP32 = "bf16 values in fp32 tiles (Triton 3.9's interpreter computes bf16 tl.dot wrong)"


class MeasureError(PrismError):
    """A kernel that ran but computed the wrong thing, or a backend that cannot run here."""


class Backend(Protocol):
    name: str
    kind: str

    def measure(self, graph: KernelGraph, program: TritonProgram | None) -> float:
        """The latency of the concrete `graph` (whose generated module is `program`) in µs."""
        ...


@dataclass
class ModelBackend:
    device: DeviceSpec
    name: str = "model"
    kind: str = "modeled"

    def measure(self, graph: KernelGraph, program: TritonProgram | None) -> float:
        return modeled(graph, self.device).latency_us


def random_inputs(graph: KernelGraph, seed: int = 0, scale: float = 0.5) -> list[np.ndarray]:
    """Non-zero inputs: uniform in ±[0.1, 1] × scale, so no input lane is 0. For a graph with
    no workload behind it: a workload's inputs (`check_arrays`) are drawn at the scales it
    declares, and these are not (qknorm_attention's normalised Q makes logits of about ±16
    from them, past fp16's exp)."""
    rng = np.random.default_rng(seed)
    out = []
    for shape in graph.user_input_shapes():     # as `run` takes them (the graph's views)
        mag = rng.uniform(0.1, 1.0, shape) * scale
        out.append(np.where(rng.random(shape) < 0.5, -mag, mag))
    return out


def check_arrays(graph: KernelGraph, inputs: tuple[np.ndarray, ...] | None) -> list[np.ndarray]:
    """The arrays a check runs `graph` on: `inputs` (the workload's, in the user's layout) when
    their shapes are the graph's, else `random_inputs(graph)` (a graph at other shapes, or no
    workload)."""
    if inputs is not None and [tuple(a.shape) for a in inputs] == \
            [tuple(s) for s in graph.user_input_shapes()]:
        return list(inputs)
    return random_inputs(graph)


def tensors_for_check(arrays: list[np.ndarray], dtype: DType, device: str) -> list[Any]:
    """`arrays` rounded to `dtype`, as torch tensors on `device` ("cpu": Triton's interpreter):
    of that dtype, except bf16 in the interpreter, which are fp32 tensors holding the
    bf16-rounded values (the module docstring says why)."""
    import torch

    rounded = [torch.tensor(a, dtype=getattr(torch, dtype.name), device=device) for a in arrays]
    return [t.float() for t in rounded] if dtype == BFLOAT16 and device == "cpu" else rounded


def check_where(dtype: DType, device: str) -> str:
    """Where a check runs, in words: "gpu", "triton interpreter", and for bf16 in the
    interpreter how (`BF16_IN_FP32`)."""
    if device != "cpu":
        return "gpu"
    return "triton interpreter" + (f", {BF16_IN_FP32}" if dtype == BFLOAT16 else "")


def check_outputs(graph: KernelGraph, program: TritonProgram, module: Any, device: str,
                  arrays: list[np.ndarray] | None = None,
                  dtype: DType | str = DEFAULT_DTYPE) -> float:
    """Run `module` on copies of `arrays` in `dtype` (`tensors_for_check`) with poisoned
    outputs; return the worst relative error against the float64 interpreter on the same
    (dtype-rounded) values, or raise when it is over the dtype's tolerance."""
    from prism.ir.interpret import interpret

    dt = get_dtype(dtype)
    arrays = arrays if arrays is not None else random_inputs(graph)
    tensors = tensors_for_check(arrays, dt, device)
    # the arrays are in the user's layout (what `run` takes); the interpreter takes the IR's
    want = graph.to_user(interpret(graph, *graph.to_ir([t.double().cpu().numpy()
                                                        for t in tensors])))
    poison(module)
    with np.errstate(all="ignore"):     # padded lanes may be 0/0 in the interpreter's numpy
        got = module.run(*tensors)
    got = list(got) if isinstance(got, tuple) else [got]
    worst = 0.0
    for name, g, w in zip(program.outputs, got, want, strict=True):
        g64 = g.double().cpu().numpy()
        if g64.shape != w.shape:
            raise MeasureError(f"output {name} has shape {g64.shape}, want {w.shape}")
        bad = int((~np.isfinite(g64)).sum())
        if bad:
            raise MeasureError(f"output {name} has {bad} non-finite values of {g64.size}: the "
                               "kernel left lanes unwritten or overflowed (the float64 "
                               f"reference has {int((~np.isfinite(w)).sum())})")
        err = rel_err(g64, w)
        if err > dt.tolerance:
            raise MeasureError(f"output {name} differs from the float64 reference by {err:.2e} "
                               f"(relative; {dt.tolerance_text})")
        worst = max(worst, err)
    return worst


def rel_err(got: np.ndarray, want: np.ndarray) -> float:
    """max |got − want| / max |want|: the relative error the tolerances are stated in."""
    return float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30))


def poison(module: Any) -> None:
    """Make the module allocate every output and intermediate filled with NaN, so a lane the
    kernel forgets to write shows."""
    import torch

    def alloc(shape: Any, dtype: Any, device: Any) -> Any:
        return torch.full(shape, float("nan"), dtype=dtype, device=device)
    module._alloc = alloc


@dataclass
class InterpretBackend:
    dtype: DType = DEFAULT_DTYPE
    name: str = "interpret"
    kind: str = "interpreted"
    inputs: tuple[np.ndarray, ...] | None = None   # the workload's (`check_arrays`)

    def measure(self, graph: KernelGraph, program: TritonProgram | None) -> float:
        from prism.instantiate.triton_backend import interpreting, load
        if program is None:
            raise MeasureError("the interpreter runs generated code; this graph has none")
        if not interpreting():
            raise MeasureError("this process runs Triton compiled (a GPU is present); use "
                               "--measure cuda, or set TRITON_INTERPRET=1 before starting")
        module = load(program)
        started = time.perf_counter()
        check_outputs(graph, program, module, "cpu", check_arrays(graph, self.inputs),
                      dtype=self.dtype)
        return (time.perf_counter() - started) * 1e6


@dataclass
class CudaBackend:
    dtype: DType = DEFAULT_DTYPE
    name: str = "cuda"
    kind: str = "measured"
    inputs: tuple[np.ndarray, ...] | None = None   # the workload's (`check_arrays`)

    def measure(self, graph: KernelGraph, program: TritonProgram | None) -> float:
        import torch

        from prism.instantiate.triton_backend import bench_cuda, interpreting, load
        if program is None:
            raise MeasureError("the cuda backend times generated code; this graph has none")
        if interpreting() or not torch.cuda.is_available():
            raise MeasureError("--measure cuda needs a CUDA GPU and TRITON_INTERPRET unset; "
                               "use --measure model (or interpret) on this machine")
        module = load(program)
        arrays = check_arrays(graph, self.inputs)
        check_outputs(graph, program, module, "cuda", arrays, dtype=self.dtype)
        inputs = tensors_for_check(arrays, self.dtype, "cuda")
        return bench_cuda(lambda: module.run(*inputs))


def check_kernel(graph: KernelGraph, source: str, arrays: list[np.ndarray] | None = None,
                 reference: Callable[..., list[np.ndarray]] | None = None,
                 dtype: DType | str = DEFAULT_DTYPE) -> dict[str, Any]:
    """Run the generated module (in the interpreter on CPU, else on the GPU) on copies of
    `arrays` in `dtype` with poisoned outputs, against the float64 interpreter of `graph` and,
    when given, the torch `reference`, within the dtype's tolerance: a report that names the
    dtype, the tolerance and where it ran, never an exception for a wrong kernel."""
    from prism.instantiate.triton_backend import interpreting, load
    dt = get_dtype(dtype)
    program = TritonProgram(source, (), tuple(graph.inputs), tuple(graph.outputs))
    device = "cpu" if interpreting() else "cuda"
    arrays = arrays if arrays is not None else random_inputs(graph)
    started = time.perf_counter()
    module = load(program)
    said = {"where": check_where(dt, device), "dtype": dt.name, "tolerance": dt.tolerance}
    try:
        err = check_outputs(graph, program, module, device, arrays, dt)
    except MeasureError as e:
        return {"checked": True, "passed": False, "error": str(e), **said}
    out: dict[str, Any] = {"checked": True, "passed": True, **said,
                           "max_rel_err_vs_interpreter": err}
    if reference is not None:
        tensors = tensors_for_check(arrays, dt, device)
        with np.errstate(all="ignore"):
            got = module.run(*tensors)
        got = list(got) if isinstance(got, tuple) else [got]
        want = reference(*[t.double().cpu().numpy() for t in tensors])
        rel = max(rel_err(g.double().cpu().numpy(), w) for g, w in zip(got, want, strict=True))
        out["max_rel_err_vs_torch"] = rel
        out["passed"] = rel <= dt.tolerance
    out["seconds"] = round(time.perf_counter() - started, 3)
    return out


def make_backend(measure: str, device: DeviceSpec,
                 inputs: Sequence[np.ndarray] | None = None) -> Backend:
    """The backend for `measure`; `inputs` (a workload's, in the user's layout) are what its
    checks run on where they fit the graph (`check_arrays`)."""
    held = tuple(inputs) if inputs is not None else None
    if measure == "model":
        return ModelBackend(device)
    if measure == "interpret":
        return InterpretBackend(device.dtype, inputs=held)
    if measure == "cuda":
        import torch
        if not torch.cuda.is_available():
            raise MeasureError("--measure cuda needs a CUDA GPU and torch sees none here; use "
                               "--measure model (the cost model) or interpret (Triton's "
                               "interpreter, for correctness)")
        return CudaBackend(device.dtype, inputs=held)
    raise MeasureError(f"unknown measure backend {measure!r}; use one of {', '.join(MEASURES)}")
