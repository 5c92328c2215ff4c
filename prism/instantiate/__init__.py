"""From verified sGraphs to runnable kernels: parameter candidates, Triton code generation, and
loading and compiling the generated modules (triton is imported by `triton_backend` only)."""

from prism.instantiate.codegen import CodegenError, Namer, TritonProgram, generate

__all__ = ["CodegenError", "Namer", "TritonProgram", "generate"]
