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
    assert re.search(r"^\s+µs\s+kind$", done.text, re.M)          # the table's header
    best = re.search(r"^best: (\S+) \(1 kernel\(s\)\)\s+([0-9.]+)  modeled$", done.text, re.M)
    assert best, done.text
    assert float(best[2]) == pytest.approx(oracle["modeled_us"], abs=5e-3)
    roofline = number(r"^roofline bound of the program\s+([0-9.]+)  modeled$", done.text)
    eager = number(r"^eager \(one kernel per operator\)\s+([0-9.]+)  modeled$", done.text)
    assert roofline == pytest.approx(oracle["roofline_us"], abs=5e-3)
    assert eager == pytest.approx(oracle["eager_us"], abs=5e-3)
    assert roofline <= float(best[2]) < eager
    speedup = number(r"^speed-up over eager: ([0-9.]+)x modeled$", done.text)
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
    assert re.search(r"^file\s+name\s+bytes$", done.text, re.M)
    sizes = dict(re.findall(r"^(\w+)\s+\w+(?:\.\w+)+\s+(\d+)$", done.text, re.M))
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
    # the check cell's oracle: the engine's narrow vocabulary (`program_block_ops`)
    done = run(STEM)
    line = (r"^exercise passed: block_ops \('matmul', 'gelu', 'add'\); the"
            r" engine's narrow vocabulary \['add', 'div', 'gelu', 'matmul', 'mul'\]$")
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
    assert re.search(r"^program\s+ops\s+max relative error vs torch   \(float64\)$", done.text,
                     re.M)
    printed = re.findall(r"^(sdpa|by_hand)\s+\[.*\]\s+([0-9.e+-]+)$", done.text, re.M)
    assert [n for n, _ in printed] == ["sdpa", "by_hand"]
    assert all(float(e) < 1e-12 for _, e in printed)
    assert "one program: True" in done.text


@pytest.mark.slow
def test_08_attention_over_many_keys_splits_in_two_and_only_the_safe_form_survives_fp16(run):
    """Section 9: each form's best program has two kernels in one launch (the launches its
    generated code makes: the second kernel runs as the first one's tail), computes attention (the float64 interpreter against torch) and beats the best single
    kernel (both re-costed over the instantiator's members); the plain form's kernel overflows in
    fp16 on the check's inputs and the safe form's does not (each run as a Triton kernel against
    torch in float64); the breakdown's blocks are the kernels' grids; the largest score and
    fp16's limit recomputed with torch and numpy."""
    done = run(STEM)
    assert not done.errors, "\n\n".join(done.errors)
    oracle, text = done.oracle["section9"], done.text
    best = re.findall(r"^  the search's best: c\d+, (\d+) kernels, ([0-9.]+) µs modeled, proved "
                      r"for (symbolic|concrete) sizes$", text, re.M)
    one = re.findall(r"^  the best one-kernel program: c\d+, ([0-9.]+) µs modeled$", text, re.M)
    assert len(best) == len(one) == 2
    for name, (kernels, us, sizes), one_us in zip(("plain_decode", "safe_decode"), best, one,
                                                  strict=True):
        o = oracle[name]
        assert int(kernels) == 2 and o["launches"] == 1
        assert (sizes == "symbolic") == o["symbolic"]
        assert o["interpreter_err"] < 1e-9                  # the program is attention
        assert float(us) == pytest.approx(o["best_us"], abs=5e-3) and o["fits"]
        assert float(one_us) == pytest.approx(o["one_kernel_us"], abs=5e-3)
        assert o["best_us"] < o["one_kernel_us"]            # "it beats the best single kernel"
    assert [b[2] for b in best] == ["symbolic", "concrete"]
    # the plain form: no kernel passed, its own and the input program's check found non-finite
    # values, and its kernel is not finite on those inputs when the oracle runs it
    failed = text.split("plain_decode: ops", 1)[1].split("safe_decode: ops", 1)[0]
    assert "no kernel passed its check:" in failed
    assert failed.count("non-finite values") == 2 and "input[] failed its check" in failed
    assert not oracle["plain_decode"]["fp16_finite"] and oracle["plain_decode"]["winner_launches"] \
        is None
    # the safe form: the winner, 2 kernels, passed; finite, and close to torch when rerun
    winner = re.search(r"^  winner: \S+, (\d+) kernels; check: passed in the triton interpreter "
                       r"on the winning kernel itself: max relative error ([0-9.e+-]+) against "
                       r"torch", text, re.M)
    assert winner and int(winner[1]) == 2 and oracle["safe_decode"]["winner_launches"] == 1
    assert oracle["safe_decode"]["fp16_finite"] and oracle["safe_decode"]["fp16_err"] < 2e-2
    assert float(winner[2]) == pytest.approx(oracle["safe_decode"]["fp16_err"], rel=0.05)
    # the breakdown: blocks per kernel, the share of SMs, and why the split wins
    rows = re.findall(r"^(one kernel|split)\s+\S+\s+(\d+)\s+(\d+)%\s+([0-9.]+)\s+[0-9.]+\s+"
                      r"([0-9.]+)$", text, re.M)
    blocks = {what: [int(r[1]) for r in rows if r[0] == what] for what in ("one kernel", "split")}
    assert blocks == oracle["blocks"]
    for _, b, share, _, _ in rows:
        assert int(share) == round(100 * min(1, int(b) / oracle["sm_count"]))
    memory = {what: [float(r[3]) for r in rows if r[0] == what] for what in blocks}
    latency = {what: sum(float(r[4]) for r in rows if r[0] == what) for what in blocks}
    assert blocks["one kernel"][0] < blocks["split"][0]
    assert memory["one kernel"][0] > memory["split"][0] and latency["split"] < latency["one kernel"]
    # the overflow: the largest score against fp16's limit
    shown = re.search(r"^largest score on the check's inputs: ([0-9.]+); fp16's exp overflows "
                      r"above ([0-9.]+)$", text, re.M)
    assert shown and float(shown[1]) == pytest.approx(oracle["largest_score"], abs=5e-3)
    assert float(shown[2]) == pytest.approx(oracle["fp16_exp_limit"], abs=5e-3)
    assert oracle["largest_score"] > oracle["fp16_exp_limit"] and oracle["exp_overflows_fp16"]
    assert re.search(r"^exp\([0-9.]+\) in fp16: inf$", text, re.M)
    # "attention_safe keeps the scale": its ops are this program's with a mul_scalar
    assert [k for k in oracle["attention_safe_ops"] if k != "mul_scalar"] == \
        oracle["safe_decode_ops"] and "mul_scalar" in oracle["attention_safe_ops"]
