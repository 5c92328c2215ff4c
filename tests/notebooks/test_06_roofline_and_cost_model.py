"""Notebook 06: its roofline table against the bytes of torch's own tensors and the engine's
`roofline_us`, eager against two library kernels written out by hand, its intensity against the
FLOPs counted by hand, and its breakdown against the model's documented formula.
"""

from __future__ import annotations

import re

import pytest

STEM = "06_roofline_and_cost_model"
KINDS = ("modeled", "interpreted", "measured")


def rows(text: str, pattern: str) -> list[tuple[str, ...]]:
    return re.findall(pattern, text, re.M)


@pytest.mark.slow
def test_06_every_latency_line_names_its_kind(run):
    done = run(STEM)
    assert not done.errors, "\n\n".join(done.errors)
    unlabelled = [line for line in done.text.splitlines()
                  if "µs" in line and not any(k in line for k in KINDS)]
    assert not unlabelled, unlabelled


@pytest.mark.slow
def test_06_the_roofline_is_bytes_over_bandwidth_plus_a_launch(run):
    done = run(STEM)
    oracle = done.oracle
    total = re.search(r"^minimum traffic ([0-9.]+) MB, ([0-9.]+) MFLOP at full size: ([0-9.]+) "
                      r"FLOP per byte$", done.text, re.M)
    assert total and float(total[1]) == pytest.approx(oracle["bytes"] / 1e6, abs=1e-3)
    # the FLOPs are the matmul's and a few for the RMS: within 1% of the matmul's alone
    assert float(total[2]) * 1e6 == pytest.approx(oracle["matmul_flops"], rel=1e-2)
    intensity = oracle["matmul_flops"] / oracle["bytes"]
    assert float(total[3]) == pytest.approx(intensity, rel=1e-2)
    table = rows(done.text, r"^(\w+)\s+\d+\s+\d+\s+(\d+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)"
                            r"\s+([0-9.]+)\s+([0-9.]+)$")
    assert [r[0] for r in table] == list(oracle["devices"])
    for name, ridge, memory, compute, launch, roofline, eager in table:
        want = oracle["devices"][name]
        assert int(ridge) == round(want["ridge"])
        assert float(memory) == pytest.approx(want["memory_us"], abs=1e-3)
        assert float(roofline) == pytest.approx(want["roofline_us"], abs=1e-3)
        assert float(roofline) == pytest.approx(
            max(float(memory), float(compute)) + float(launch), abs=2e-3)
        assert float(eager) == pytest.approx(want["eager_us"], abs=1e-3)
        assert float(roofline) < float(eager)
        assert float(compute) < float(memory)    # memory bound on every GPU, as the prose says
    # the prose's "single-digit FLOPs per byte" against the figure the notebook printed
    assert re.fullmatch(r"[1-9]\.\d\d", total[3]), total[3]
    lowest = min(oracle["devices"], key=lambda k: oracle["devices"][k]["ridge"])
    ridge = oracle["devices"][lowest]["ridge"]
    assert re.search(rf"^intensity {intensity:.2f} FLOP/B; the lowest ridge {ridge:.0f} FLOP/B "
                     rf"\({lowest}\): {ridge / intensity:.0f}× higher$", done.text, re.M)
    prose = " ".join(" ".join(c.source.split()) for c in done.nb.cells
                     if c.cell_type == "markdown")
    assert "single-digit FLOPs per byte" in prose


@pytest.mark.slow
def test_06_the_breakdown_follows_the_documented_formula(run):
    done = run(STEM)
    oracle = done.oracle
    printed = rows(done.text, r"^\s*(\d+)\s+([\d,]+)\s+(\d+)\s+\d+%\s+\d+\s+([0-9.]+)\s+"
                              r"([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)$")
    assert [r[0] for r in printed] == list(oracle["breakdown"])
    for gx, _, blocks, _, l2, memory, compute, _, latency in printed:
        want = oracle["breakdown"][gx]
        assert int(blocks) == int(gx)
        assert float(l2) == pytest.approx(want["l2_mb"], abs=0.01)
        assert float(memory) == pytest.approx(want["memory_us"], abs=2e-3)
        assert float(latency) == pytest.approx(want["latency_us"], abs=2e-3)
        assert float(compute) < 0.1 * float(memory)          # memory bound, as the prose says
    best = oracle["best_gx"]
    want = oracle["breakdown"][str(best)]["latency_us"]
    found = re.search(rf"^best grid size: gx = {best}, ([0-9.]+) µs modeled, ([0-9.]+)× the "
                      r"roofline bound$", done.text, re.M)
    assert found and float(found[1]) == pytest.approx(want, abs=2e-3)
    h100 = oracle["devices"]["h100"]["roofline_us"]
    assert float(found[2]) == pytest.approx(want / h100, abs=5e-3)


@pytest.mark.slow
def test_06_the_loop_range_changes_nothing_the_model_charges(run):
    done = run(STEM)
    oracle = done.oracle
    best = oracle["best_gx"]
    members = rows(done.text, rf"^\{{'gx': {best}, 'F': (\d+)\}}\s+([0-9.]+)\s+[0-9.]+$")
    assert [int(f) for f, _ in members] == oracle["loops_at_best"]
    want = oracle["breakdown"][str(best)]["latency_us"]
    assert all(float(us) == pytest.approx(want, abs=2e-3) for _, us in members)
    assert re.search(rf"^{len(members)} members at gx = {best}, 1 distinct latency$", done.text,
                     re.M)


@pytest.mark.slow
def test_06_the_exercise_s_check_passes_the_solution_and_rejects_wrong_answers(run):
    # the check cell's oracle: the engine's `roofline_us`
    done = run(STEM)
    line = (r"^exercise passed: ([0-9.]+) µs by hand, \1 µs by roofline_us"
            r" \(modeled\)$")
    assert re.search(line, done.text, re.M), done.text[-2000:]
    rejects = done.oracle["exercise_rejects"]
    assert rejects and all(rejects), rejects
