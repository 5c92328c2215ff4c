"""What `prism.report.write_outputs` writes beside the kernel: `kernel.ptx` says what it holds,
and never that a fused kernel is missing when only its PTX compile was skipped; the page claims no
more than the trace shows (a check that did not run, a winner whose proof is not on it)."""

from __future__ import annotations

from prism.pipeline import INPUT_PROGRAM, superoptimize
from prism.report import page
from prism.trace import StageFinished


def test_kernel_ptx_says_the_compile_was_skipped_not_that_there_is_no_kernel(cases, tmp_path):
    result = superoptimize(cases.small("rmsnorm_matmul"),
                           search_config=cases.reduced("rmsnorm_matmul"), max_trials=1,
                           compile_ptx=False, out=tmp_path)
    assert result.best is not None and result.best.graph.custom_ops and not result.best.ptx
    assert "@triton.jit" in (tmp_path / "kernel.py").read_text()
    ptx = (tmp_path / "kernel.ptx").read_text()
    assert ptx.startswith("// not compiled: this run skipped PTX (compile_ptx=False)")
    assert "no Triton kernel" not in ptx


def winner(candidate, check):
    """A check stage's summary (`pipeline.best_summary`) for a winner without a graph picture."""
    return StageFinished("check", 0.1, {
        "best": f"{candidate}[gx=8]", "candidate": candidate, "params": {"gx": 8},
        "latency_us": 5.0, "latency_kind": "modeled", "modeled_us": 5.0, "num_kernels": 1,
        "roofline_us": 4.0, "eager_us": 9.0, "check": check, "graph": {}})


def test_the_page_says_what_was_checked_and_never_passed_by_default():
    for check in ({"checked": False, "reason": "no GPU here"},         # an older trace
                  {"status": "not run", "checked": False, "passed": False,
                   "reason": "no GPU here"}):
        html = page([winner("c7", check)])
        line = html.split("<p>Check: ", 1)[1].split("</p>", 1)[0]
        assert line == "not run (no GPU here)"
    html = page([winner("c7", {})])       # a summary that does not say: not run, not passed
    line = html.split("<p>Check: ", 1)[1].split("</p>", 1)[0]
    assert line.startswith("not run (") and "passed" not in line


def test_a_winner_without_its_proof_on_the_trace_is_not_called_the_input_program():
    html = page([winner("c7", {"status": "passed", "where": "gpu",
                               "max_rel_err_vs_torch": 1e-3})])
    assert "identity" not in html and "input program itself" not in html
    assert "no proof of c7 is on this trace" in html
    html = page([winner(INPUT_PROGRAM, {"status": "passed", "where": "gpu"})])
    assert "input program itself (equivalent by identity)" in html
