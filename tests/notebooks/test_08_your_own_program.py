"""Notebook 08: a user's own `@prism.workload` end to end. Its printed table against eager and
the roofline written out by hand from the device table and the winner re-costed; the command
line it shows, run in a fresh process, against the notebook's winner; the exported kernel.py
imported in that fresh TRITON_INTERPRET=1 process, against the notebook's own output and torch;
the PTX against the module's Triton kernels; and the errors it shows, by type and content.
"""

from __future__ import annotations

import re

import pytest

STEM = "08_your_own_program"


def number(pattern: str, text: str) -> float:
    found = re.search(pattern, text, re.M)
    assert found, pattern
    return float(found[1])


@pytest.mark.slow
def test_08_the_result_table_agrees_with_the_device_table_by_hand(run):
    done = run(STEM)
    assert not done.errors, "\n\n".join(done.errors)
    oracle = done.oracle
    assert "kernels as traced: 3" in done.text
    assert number(r"^traced graph vs your torch function \(float64\): max relative error "
                  r"([0-9.e+-]+)$", done.text) < 1e-12
    best = re.search(r"^best: (\S+) \(1 kernel\(s\)\)\s+([0-9.]+) µs  modeled$", done.text, re.M)
    assert best, done.text
    assert float(best[2]) == pytest.approx(oracle["modeled_us"], abs=5e-3)
    roofline = number(r"^roofline bound of the program\s+([0-9.]+) µs  modeled$", done.text)
    eager = number(r"^eager \(one kernel per operator\)\s+([0-9.]+) µs  modeled$", done.text)
    assert roofline == pytest.approx(oracle["roofline_us"], abs=5e-3)
    assert eager == pytest.approx(oracle["eager_us"], abs=5e-3)
    assert roofline <= float(best[2]) < eager
    speedup = number(r"^speed-up over eager\s+([0-9.]+)x  modeled$", done.text)
    assert speedup == pytest.approx(oracle["eager_us"] / oracle["modeled_us"], abs=0.01)
    assert re.search(r"^check: passed in the triton interpreter", done.text, re.M)


@pytest.mark.slow
def test_08_the_command_line_it_shows_gives_the_same_kernel(run):
    done = run(STEM)
    oracle = done.oracle
    assert oracle["cli_code"] == 0, oracle["cli_error"]
    best = re.search(r"^best: (\S+) \(", done.text, re.M)
    assert best and oracle["cli_best"] == best[1]
    assert oracle["cli_latency_us"] == pytest.approx(oracle["modeled_us"], abs=1e-3)
    assert re.search(rf"^result\.json: best {re.escape(best[1])} at [0-9.]+ µs modeled, "
                     r"verdict equivalent$", done.text, re.M)


@pytest.mark.slow
def test_08_the_exported_kernel_runs_in_a_fresh_process_as_in_the_notebook(run):
    done = run(STEM)
    oracle = done.oracle
    assert oracle["fresh_equals_notebook"]             # the same module, the same output
    assert oracle["fresh_vs_torch"] < 2e-2
    printed = number(r"^exported kernel vs your torch function: max relative error "
                     r"([0-9.e+-]+)$", done.text)
    assert printed == pytest.approx(oracle["fresh_vs_torch"], rel=0.05)
    assert re.search(r"^kernel\.run on (cpu \(Triton interpreter\)|cuda \(GPU\)): "
                     r"torch\.float16, shape \(8, 64\)$", done.text, re.M)
    assert re.search(r"^ValueError: X has shape \(16, 64\); this kernel was generated for "
                     r"\(8, 64\)", done.text, re.M)


@pytest.mark.slow
def test_08_the_written_files_and_the_ptx_match_the_module(run):
    done = run(STEM)
    oracle = done.oracle
    sizes = dict(re.findall(r"^(\w+)\s+\S+\s+(\d+) bytes$", done.text, re.M))
    assert {k: int(v) for k, v in sizes.items()} == oracle["sizes"]
    assert set(oracle["sizes"]) == {"kernel", "ptx", "trace", "report", "result"}
    assert oracle["jit_kernels"] and oracle["jit_kernels"] == oracle["ptx_entries"]
    assert oracle["ptx_target"] and all(t.startswith("sm_90") for t in oracle["ptx_target"])
    assert re.search(r"^kernel\.ptx: \.target sm_90", done.text, re.M)


@pytest.mark.slow
def test_08_bad_programs_are_named_errors_not_tracebacks(run):
    done = run(STEM)
    text = done.text
    assert "no error" not in text
    assert re.search(r"^an operator outside the vocabulary:\n  UnsupportedOpError: workload "
                     r"with_cumsum: torch\.cumsum at .*:\d+ is not supported; the nearest "
                     r"supported spelling is torch\.sum", text, re.M)
    assert re.search(r"^shapes that do not fit:\n  ShapeError: .*matmul shapes \[8, 32\] @ "
                     r"\[64, 64\] do not fit", text, re.M)
    assert re.search(r"^a parameter without a shape:\n  ShapeError: .*parameter H has no shape",
                     text, re.M)
    assert "Traceback" not in text


def test_08_the_table_of_what_you_can_write_is_the_op_table(run):
    from prism.ir.ops import OPS
    done = run(STEM)
    rows = dict(re.findall(r"^(\w+)\s+kernel or block\s+\S+\s+(.+)$", done.text, re.M))
    assert set(rows) == {n for n, od in OPS.items() if od.compute}
    assert all(rows[n] == OPS[n].doc for n in rows)


@pytest.mark.slow
def test_08_the_exercise_s_check_passes_the_solution_and_rejects_wrong_answers(run):
    # the check cell's oracle: the engine's own vocabulary (`search_config_for`)
    done = run(STEM)
    line = (r"^exercise passed: block_ops \('matmul', 'gelu', 'add'\); the"
            r" engine's own vocabulary \['add', 'div', 'gelu', 'matmul', 'mul'\]$")
    assert re.search(line, done.text, re.M), done.text[-2000:]
    rejects = done.oracle["exercise_rejects"]
    assert rejects and all(rejects), rejects


@pytest.mark.slow
def test_08_programs_as_people_write_them_trace_to_what_torch_computes(run):
    """Section 8: a Linear with its bias and a constant, and attention written two ways with a
    boolean mask, each against torch itself in float64 (the oracle cell), and the two
    attention spellings one program (ops and attributes)."""
    done = run(STEM)
    oracle = done.oracle
    assert oracle["section8_projection_err"] < 1e-12
    assert all(err < 1e-12 for err in oracle["section8_attention_err"].values())
    assert oracle["section8_same_program"]
    assert re.search(r"^Linear \+ bias \+ scale: inputs \['x', 'proj_weight', 'proj_bias'\], "
                     rf"ops {re.escape(str(oracle['section8_projection_ops']))}$", done.text, re.M)
    printed = re.findall(r"^(sdpa|by_hand) +ops .*max relative error ([0-9.e+-]+)$", done.text,
                         re.M)
    assert [n for n, _ in printed] == ["sdpa", "by_hand"]
    assert all(float(e) < 1e-12 for _, e in printed)
    assert "one program: True" in done.text
