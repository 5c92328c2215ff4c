"""Notebook 05: its printed kernel errors, NaN counts, source diff and PTX facts against
independent answers.

The oracle cell (`oracles/05_triton_instantiation.py`) runs torch's own `rms_norm(X) @ W` on the
fp16 inputs the kernels were given and compares it with every generated kernel's output tensor,
counts the elements a launch one block short leaves unwritten from the grid alone, compares the
two members' sources token by token with Python's tokenizer, and reads the PTX text itself.
"""

from __future__ import annotations

import ast
import re

import pytest

from prism.tune.backends import TOLERANCE

STEM = "05_triton_instantiation"


@pytest.mark.slow
def test_05_the_kernel_run_in_the_interpreter_matches_torch(run):
    done = run(STEM)
    oracle = done.oracle
    mode = re.search(r"^interpreting: (True|False);", done.text, re.M)
    assert mode, done.text
    on = "cpu" if mode[1] == "True" else "cuda:0"      # the interpreter without a GPU, as in CI
    assert oracle["nan"] == 0 and 0 < oracle["err_vs_torch"] <= TOLERANCE
    assert re.search(rf"^output torch\.float16 \[8, 64\] on {on}, NaN elements 0$", done.text,
                     re.M)
    shown = re.search(r"^relative error vs torch\s+([0-9.e+-]+)", done.text, re.M)
    assert shown and float(shown[1]) == pytest.approx(oracle["err_vs_torch"], rel=0.06)
    interp = re.search(r"^relative error vs float64 interpreter ([0-9.e+-]+)$", done.text, re.M)
    assert interp and float(interp[1]) <= TOLERANCE


@pytest.mark.slow
def test_05_poisoned_outputs_show_the_columns_a_short_launch_never_writes(run):
    done = run(STEM)
    oracle = done.oracle
    shown = re.search(r"^launched \(\d+,\) instead of \(\d+,\): (\d+) NaN elements, columns "
                      r"(\d+)-(\d+) never written$", done.text, re.M)
    assert shown, done.text
    assert int(shown[1]) == oracle["unwritten"] > 0
    assert [int(shown[2]), int(shown[3])] == oracle["unwritten_columns"]


@pytest.mark.slow
def test_05_every_member_passes_and_each_time_has_its_kind(run):
    done = run(STEM)
    oracle = done.oracle
    rows = re.findall(r"^(\{'gx'.*?\})\s+([0-9.e+-]+)\s+(\d+)\s+(True|False)\s+([0-9.]+)\s+"
                      r"(\d+)  (\w+)$", done.text, re.M)
    assert [r[0] for r in rows] == oracle["members"]
    interpreted = "interpreting: True;" in done.text
    for env, err, nans, passed, _, _, kind in rows:
        assert float(err) <= TOLERANCE and nans == "0" and passed == "True", env
        assert kind == ("interpreted" if interpreted else "measured")
        assert oracle["member_nan"][env] == 0
        assert oracle["member_err_vs_torch"][env] <= TOLERANCE       # torch on the kernel output
    modeled = re.findall(r"^\{'gx'.*\}\s+\d+\s+\[.*\]\s+\[.*\]\s+[0-9.]+\s+modeled$", done.text,
                         re.M)
    assert len(modeled) == len(oracle["members"])                    # the members table


@pytest.mark.slow
def test_05_two_members_differ_only_in_their_constants(run):
    done = run(STEM)
    oracle = done.oracle
    assert oracle["same_tokens"] is True
    assert "differs only in constants: True" in done.text
    count = re.search(r"^(\{.*\}) → (\{.*\}): (\d+) changed lines$", done.text, re.M)
    assert count and ast.literal_eval(count[1]) != ast.literal_eval(count[2])
    assert int(count[3]) == 2 * oracle["changed_lines"] > 0      # each changed line: − and +


@pytest.mark.slow
def test_05_the_ptx_is_for_hopper_with_our_kernel_and_tensor_cores(run):
    done = run(STEM)
    oracle = done.oracle
    assert oracle["hopper"] and re.fullmatch(r"sm_90a?", oracle["target"])
    assert oracle["entry"] == oracle["kernel"]
    assert oracle["reqntid"] == oracle["threads"] == 128
    headers = re.findall(r"^\{.*\}: \.version [0-9.]+ \| \.target (\S+) \| \.address_size 64$",
                         done.text, re.M)
    assert headers == [oracle["target"]] * 2
    entries = re.findall(r"^  entry (\w+), (\d+) threads, shared memory \d+ bytes$", done.text,
                         re.M)
    assert entries == [(oracle["kernel"], "128")] * 2
    sizes = [int(n) for n in re.findall(r"^  (\d+) bytes of PTX, ", done.text, re.M)]
    assert sizes == oracle["ptx_bytes"]
    mma = [int(n) for n in re.findall(r"^  tensor-core instructions: mma\.\S+ \(×(\d+)\)$",
                                      done.text, re.M)]
    assert mma == oracle["mma"] and all(n > 0 for n in mma)


@pytest.mark.slow
def test_05_the_exercise_s_check_passes_the_solution_and_rejects_wrong_answers(run):
    # the check cell's oracle: the float64 interpreter and torch
    done = run(STEM)
    line = (r"^exercise passed: the repaired kernel's relative error ([0-9.e+-]+) "
            r"vs the float64 interpreter, ([0-9.e+-]+) vs torch$")
    passed = re.search(line, done.text, re.M)
    assert passed, done.text[-2000:]
    assert max(float(passed[1]), float(passed[2])) <= TOLERANCE
    rejects = done.oracle["exercise_rejects"]
    assert rejects and all(rejects), rejects
