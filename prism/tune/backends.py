"""Measurement backends (DESIGN.md §3). Each labels its numbers with their kind:

- `model`     → `modeled`: the analytic cost model for the named device (`prism.cost`);
- `interpret` → `interpreted`: the generated module run in Triton's interpreter on CPU tensors,
                checked against the float64 reference interpreter; its wall time says nothing
                about a GPU, so finalists are ranked by the model and only the kind is honest;
- `cuda`      → `measured`: the generated module on the GPU, median of CUDA-event timings
                (`triton.testing.do_bench`), checked against the float64 reference once.

A backend raises `MeasureError` for a kernel that runs wrong; the tuner scores it `inf`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from prism.cost import DeviceSpec, modeled
from prism.errors import PrismError
from prism.instantiate.codegen import TritonProgram
from prism.ir.graph import KernelGraph

MEASURES = ("model", "interpret", "cuda")
KIND = {"model": "modeled", "interpret": "interpreted", "cuda": "measured"}
TOLERANCE = 2e-2     # max |got − want| / max |want| for fp16 kernels


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
    """Non-zero inputs: uniform in ±[0.1, 1] × scale, so no input lane is 0 and exp stays in
    fp16 range at the workloads' sizes."""
    rng = np.random.default_rng(seed)
    out = []
    for shape in graph.user_input_shapes():     # as `run` takes them (the graph's views)
        mag = rng.uniform(0.1, 1.0, shape) * scale
        out.append(np.where(rng.random(shape) < 0.5, -mag, mag))
    return out


def check_outputs(graph: KernelGraph, program: TritonProgram, module: Any, device: str,
                  arrays: list[np.ndarray] | None = None) -> float:
    """Run `module` on fp16 copies of `arrays` with poisoned outputs; return the worst relative
    error against the float64 interpreter on the same (fp16-rounded) values, or raise."""
    import torch

    from prism.ir.interpret import interpret

    arrays = arrays if arrays is not None else random_inputs(graph)
    tensors = [torch.tensor(a, dtype=torch.float16, device=device) for a in arrays]
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
        if g64.shape != w.shape or not np.isfinite(g64).all():
            raise MeasureError(f"output {name} has shape {g64.shape} (want {w.shape}) or "
                               "non-finite values: the kernel left lanes unwritten or overflowed")
        err = rel_err(g64, w)
        if err > TOLERANCE:
            raise MeasureError(f"output {name} differs from the float64 reference by {err:.2e} "
                               f"(relative; fp16 tolerance {TOLERANCE})")
        worst = max(worst, err)
    return worst


def rel_err(got: np.ndarray, want: np.ndarray) -> float:
    """max |got − want| / max |want|: the relative error the fp16 tolerance is stated in."""
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
    name: str = "interpret"
    kind: str = "interpreted"

    def measure(self, graph: KernelGraph, program: TritonProgram | None) -> float:
        from prism.instantiate.triton_backend import interpreting, load
        if program is None:
            raise MeasureError("the interpreter runs generated code; this graph has none")
        if not interpreting():
            raise MeasureError("this process runs Triton compiled (a GPU is present); use "
                               "--measure cuda, or set TRITON_INTERPRET=1 before starting")
        module = load(program)
        started = time.perf_counter()
        check_outputs(graph, program, module, "cpu")
        return (time.perf_counter() - started) * 1e6


@dataclass
class CudaBackend:
    name: str = "cuda"
    kind: str = "measured"

    def measure(self, graph: KernelGraph, program: TritonProgram | None) -> float:
        import torch

        from prism.instantiate.triton_backend import bench_cuda, interpreting, load
        if program is None:
            raise MeasureError("the cuda backend times generated code; this graph has none")
        if interpreting() or not torch.cuda.is_available():
            raise MeasureError("--measure cuda needs a CUDA GPU and TRITON_INTERPRET unset; "
                               "use --measure model (or interpret) on this machine")
        module = load(program)
        check_outputs(graph, program, module, "cuda")
        inputs = [torch.tensor(a, dtype=torch.float16, device="cuda")
                  for a in random_inputs(graph)]
        return bench_cuda(lambda: module.run(*inputs))


def check_kernel(graph: KernelGraph, source: str, arrays: list[np.ndarray] | None = None,
                 reference: Callable[..., list[np.ndarray]] | None = None) -> dict[str, Any]:
    """Run the generated module (in the interpreter on CPU, else on the GPU) on fp16 copies of
    `arrays` with poisoned outputs, against the float64 interpreter of `graph` and, when given,
    the torch `reference`: a report, never an exception for a wrong kernel."""
    import torch

    from prism.instantiate.triton_backend import interpreting, load
    program = TritonProgram(source, (), tuple(graph.inputs), tuple(graph.outputs))
    device = "cpu" if interpreting() else "cuda"
    arrays = arrays if arrays is not None else random_inputs(graph)
    started = time.perf_counter()
    module = load(program)
    try:
        err = check_outputs(graph, program, module, device, arrays)
    except MeasureError as e:
        return {"checked": True, "passed": False, "error": str(e)}
    out: dict[str, Any] = {"checked": True, "passed": True,
                           "where": "triton interpreter" if device == "cpu" else "gpu",
                           "max_rel_err_vs_interpreter": err}
    if reference is not None:
        tensors = [torch.tensor(a, dtype=torch.float16, device=device) for a in arrays]
        with np.errstate(all="ignore"):
            got = module.run(*tensors)
        got = list(got) if isinstance(got, tuple) else [got]
        want = reference(*[t.double().cpu().numpy() for t in tensors])
        rel = max(rel_err(g.double().cpu().numpy(), w) for g, w in zip(got, want, strict=True))
        out["max_rel_err_vs_torch"] = rel
        out["passed"] = rel <= TOLERANCE
    out["seconds"] = round(time.perf_counter() - started, 3)
    return out


def make_backend(measure: str, device: DeviceSpec) -> Backend:
    if measure == "model":
        return ModelBackend(device)
    if measure == "interpret":
        return InterpretBackend()
    if measure == "cuda":
        import torch
        if not torch.cuda.is_available():
            raise MeasureError("--measure cuda needs a CUDA GPU and torch sees none here; use "
                               "--measure model (the cost model) or interpret (Triton's "
                               "interpreter, for correctness)")
        return CudaBackend()
    raise MeasureError(f"unknown measure backend {measure!r}; use one of {', '.join(MEASURES)}")
