"""Running generated Triton modules against the float64 interpreter, shared by the code generator
tests through the `kit` fixture.

Inputs are fp16 torch tensors; the oracles see exactly those fp16 values (as float64), so the only
error left is the kernel's own fp16/fp32 rounding. Every tensor the launcher allocates (outputs,
partial-sum buffers, intermediates) is poisoned with NaN first: an element a kernel forgets to
write shows up as NaN in the output.

triton is never imported here: `triton_backend.load` decides (before Triton's first import)
whether kernels run in the interpreter (no GPU: CPU tensors) or on the GPU (CUDA tensors).
"""

from __future__ import annotations

import types
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

import numpy as np
import pytest
import torch

from prism.instantiate import triton_backend
from prism.instantiate.codegen import TritonProgram, generate
from prism.ir.graph import KernelGraph
from prism.ir.interpret import interpret

FP16_TOL = 2e-2        # max |err| / max |ref| for fp16 inputs and outputs


def device() -> str:
    return "cpu" if triton_backend.interpreting() else "cuda"


def fp16(arrays: Sequence[np.ndarray]) -> list[torch.Tensor]:
    return [torch.tensor(np.asarray(a), dtype=torch.float16, device=device()) for a in arrays]


def as64(tensors: Sequence[torch.Tensor]) -> list[np.ndarray]:
    """The float64 values of (fp16) tensors: what the oracles are given."""
    return [t.detach().cpu().double().numpy() for t in tensors]


def poisoned(shape: Any, dtype: torch.dtype, device: Any) -> torch.Tensor:
    return torch.full(shape, float("nan"), dtype=dtype, device=device)


def load(program: TritonProgram) -> ModuleType:
    """The generated module, its allocations poisoned with NaN."""
    module = triton_backend.load(program)
    module._alloc = poisoned
    return module


def execute(program: TritonProgram, tensors: Sequence[torch.Tensor]) -> list[np.ndarray]:
    """Load `program`, poison its allocations with NaN, run it; the outputs as float64."""
    result = load(program).run(*tensors)
    outs = result if isinstance(result, tuple) else (result,)
    assert len(outs) == len(program.outputs)
    for out, t in zip(outs, tensors[:1], strict=False):
        assert out.dtype == t.dtype, f"output dtype {out.dtype}, inputs {t.dtype}"
    return as64(outs)


def rel_err(got: np.ndarray, want: np.ndarray) -> float:
    assert got.shape == want.shape, f"shape {got.shape}, expected {want.shape}"
    return float(np.abs(got - want).max() / np.abs(want).max())


def assert_close(got: np.ndarray, want: np.ndarray, tol: float = FP16_TOL,
                 what: str = "") -> None:
    assert not np.isnan(got).any(), f"{what}: NaN in the output (an element never written?)"
    assert np.isfinite(want).all(), f"{what}: the reference itself is not finite"
    assert np.abs(want).max() > 0, f"{what}: an all-zero reference proves nothing"
    err = rel_err(got, want)
    assert err <= tol, f"{what}: relative error {err:.3g} > {tol}"


def check(graph: KernelGraph, arrays: Sequence[np.ndarray], tol: float = FP16_TOL,
          reference: Callable[..., list[np.ndarray]] | None = None) -> TritonProgram:
    """Generate `graph`, run it on `arrays` (rounded to fp16) and compare every output with the
    float64 interpreter of the same graph (and with `reference`, when given, on the same fp16
    values)."""
    program = generate(graph)
    tensors = fp16(arrays)
    got = execute(program, tensors)
    exact = as64(tensors)
    wants = interpret(graph, *exact)
    assert len(got) == len(wants)
    for k, (g, w) in enumerate(zip(got, wants, strict=True)):
        assert_close(g, w, tol, f"{graph.name or 'graph'} output {k} vs interpret")
    if reference is not None:
        for k, (g, w) in enumerate(zip(got, reference(*exact), strict=True)):
            assert_close(g, w, tol, f"{graph.name or 'graph'} output {k} vs torch")
    return program


@pytest.fixture(scope="session")
def kit() -> types.SimpleNamespace:
    """fp16, as64, load, execute, rel_err, assert_close and check (see this module)."""
    return types.SimpleNamespace(FP16_TOL=FP16_TOL, device=device, fp16=fp16, as64=as64,
                                 load=load, execute=execute, rel_err=rel_err,
                                 assert_close=assert_close, check=check)
