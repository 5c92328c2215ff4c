"""What `prism.report.write_outputs` writes beside the kernel: `kernel.ptx` says what it holds,
and never that a fused kernel is missing when only its PTX compile was skipped."""

from __future__ import annotations

from prism.pipeline import superoptimize


def test_kernel_ptx_says_the_compile_was_skipped_not_that_there_is_no_kernel(cases, tmp_path):
    result = superoptimize(cases.small("rmsnorm_matmul"),
                           search_config=cases.reduced("rmsnorm_matmul"), max_trials=1,
                           compile_ptx=False, out=tmp_path)
    assert result.best is not None and result.best.graph.custom_ops and not result.best.ptx
    assert "@triton.jit" in (tmp_path / "kernel.py").read_text()
    ptx = (tmp_path / "kernel.ptx").read_text()
    assert ptx.startswith("// not compiled: this run skipped PTX (compile_ptx=False)")
    assert "no Triton kernel" not in ptx
