"""Notebook 01: its printed interpreter errors against torch, and the fused kernel's output
recomputed with torch directly.
"""

from __future__ import annotations

import re

import pytest

STEM = "01_tensor_programs_and_kernels"


@pytest.mark.slow
def test_01_interprets_the_fused_kernel_to_torch_s_answer(run):
    done = run(STEM)
    errors = dict(re.findall(r"^(.*?)\s*max relative error vs torch ([0-9.e+-]+)$", done.text,
                             re.M))
    fused = [float(v) for k, v in errors.items() if k.startswith("fused (grid")]
    unfused = [float(v) for k, v in errors.items() if k.startswith("unfused")]
    wrong = [float(v) for k, v in errors.items() if "instead of" in k]
    assert len(fused) == len(unfused) == len(wrong) == 1, errors
    assert fused[0] < 1e-9 and unfused[0] < 1e-9
    assert wrong[0] > 1e-2                            # the interpreter catches the wrong kernel
    assert re.search(r"^grid\s+loop\s+max relative error vs torch$", done.text, re.M)
    sweep = re.findall(r"^\s*\d+\s+\d+\s+([0-9.e+-]+)$", done.text, re.M)
    assert len(sweep) == done.oracle["sweep"] and all(float(e) < 1e-9 for e in sweep)
    assert done.oracle["fused_vs_torch"] < 1e-9


@pytest.mark.slow
def test_01_the_cost_table_charges_each_launch_the_generated_code_makes(run):
    done = run(STEM)
    oracle = done.oracle
    rows = re.findall(r"^(unfused|fused)\s+([\w:]+)\s+(\d+|-)\s+(\d+)\s+(\d+)\s+(\d+)\s+"
                      r"([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)$", done.text, re.M)
    unfused = [r for r in rows if r[0] == "unfused"]
    # one row per launch the generated run() makes, counted at torch's dispatcher
    assert len(unfused) == len(oracle["unfused_launches"]) > 2, (unfused, oracle)
    assert [r[1] for r in unfused] == ["rms_norm:norm", "rms_norm:scale", "rms_norm:divide",
                                       "matmul"]
    assert oracle["unfused_launches"][:3] == ["linalg_vector_norm", "mul_", "div"]
    assert re.search(rf"^unfused total: [0-9.]+ µs modeled on \w+ \(roofline [0-9.]+ µs, "
                     rf"{len(unfused)} launch\(es\)\)$", done.text, re.M)
    # what is left over after max(memory, compute) is one launch overhead per row, and the
    # rows add up to the total
    for *_, memory, compute, latency in rows:
        extra = float(latency) - max(float(memory), float(compute))
        assert extra == pytest.approx(oracle["launch_us"], abs=0.01)
    for name in ("unfused", "fused"):
        total = re.search(rf"^{name}\s+total: ([0-9.]+) µs", done.text, re.M)
        assert total and float(total[1]) == pytest.approx(
            sum(float(r[8]) for r in rows if r[0] == name), abs=0.01 * len(rows))
    # the eager baseline (rms_norm one launch) costs less than the generated unfused program
    eager = re.search(r"^eager baseline ([0-9.]+) µs modeled", done.text, re.M)
    unfused_total = re.search(r"^unfused\s+total: ([0-9.]+) µs", done.text, re.M)
    assert eager and unfused_total and float(eager[1]) < float(unfused_total[1])


@pytest.mark.slow
def test_01_the_grid_sweep_marks_the_members_the_hardware_rule_rejects(run):
    done = run(STEM)
    least = re.search(r"^smallest matmul tile the search allows on \w+: (\d+)$", done.text, re.M)
    assert least
    rows = re.findall(r"^\s*(\d+)\s+(\d+)\s+\[(\d+), (\d+)\]\s+([0-9.]+)\s+(fits|rejected: .+)$",
                      done.text, re.M)
    assert len(rows) >= 4, rows
    for _grid, _blocks, _k, width, _latency, mark in rows:
        # the oracle: W's columns are split by the grid, so a member fits only when its W tile
        # is at least the device's smallest matmul tile wide (REFERENCE §1.7)
        assert (mark == "fits") == (int(width) >= int(least[1])), (width, mark)
    assert {r[5] == "fits" for r in rows} == {True, False}    # the sweep shows both


@pytest.mark.slow
def test_01_the_numpy_loop_by_hand_is_the_interpreter_s_kernel(run):
    done = run(STEM)
    oracle = done.oracle
    printed = re.search(r"^numpy by hand vs prism.interpret: max relative error ([0-9.e+-]+)$",
                        done.text, re.M)
    assert printed and float(printed[1]) < 1e-12
    assert oracle["hand_vs_torch"] < 1e-9          # other inputs, against torch
    # the picture's record of who touched what is the block graph's tiling
    assert oracle["touch"] == {"W": True, "X": True, "out": True}


@pytest.mark.slow
def test_01_the_exercise_s_check_passes_the_solution_and_rejects_a_wrong_kernel(run):
    done = run(STEM)
    passed = re.search(r"^exercise passed: split_d, max relative error vs torch ([0-9.e+-]+)$",
                       done.text, re.M)
    assert passed and float(passed[1]) < 1e-9
    assert done.oracle["split_d_vs_torch"] < 1e-9   # the solution, on the oracle's inputs
    assert done.oracle["check_rejects_wrong_split_d"] is True
