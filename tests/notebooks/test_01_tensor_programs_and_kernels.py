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
    sweep = re.findall(r"^\s+\d+\s+\d+\s+([0-9.e+-]+)$", done.text, re.M)
    assert len(sweep) == done.oracle["sweep"] and all(float(e) < 1e-9 for e in sweep)
    assert done.oracle["fused_vs_torch"] < 1e-9
