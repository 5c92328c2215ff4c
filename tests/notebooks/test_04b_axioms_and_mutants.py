"""Notebook 04b: its axiom evidence, mutants, counterexample and two-kernel proof against
independent answers.

The oracle cell (`oracles/04b_axioms_and_mutants.py`) checks the shown axiom with random float64
instances and by hand in numpy, refutes the wrong one in float64, and recomputes the mutant's
counterexample by hand ((X W) / mean(X) per row, against torch's rms_norm).
"""

from __future__ import annotations

import re

import pytest

from prism.ir.graph import MAX_RANK

STEM = "04b_axioms_and_mutants"


@pytest.mark.slow
def test_04b_the_axiom_is_proved_and_the_wrong_one_refuted_as_float64_agrees(run):
    done = run(STEM)
    oracle = done.oracle
    proved = re.search(r"^z3: proved, (\d+) of (\d+) instances", done.text, re.M)
    assert proved and proved[1] == proved[2] and int(proved[1]) > 0
    assert oracle["random_instances"] > 0 and oracle["random_failures"] == 0
    assert oracle["k_split_err"] < 1e-12          # Σ_i A_i B_i = A B, in numpy by hand
    assert re.search(r"^z3: refuted: ", done.text, re.M)
    assert oracle["wrong_random_failures"] > 0    # float64 refutes the wrong axiom too
    model = re.search(r"^counterexample: at sizes \{.*'ga': (\d+)\}.*lhs ([-0-9.e]+), rhs "
                      r"([-0-9.e]+)$", done.text, re.M)
    assert model, done.text
    # a sum of g chunk means is g times the mean
    assert float(model[2]) == pytest.approx(int(model[1]) * float(model[3]), rel=1e-9)


@pytest.mark.slow
def test_04b_the_mutant_s_counterexample_is_what_it_computes_by_hand(run):
    done = run(STEM)
    oracle = done.oracle
    assert re.search(r"^block op \d+\s+accumulator red_ld_rms → red_ld_mean\s+not_equivalent",
                     done.text, re.M)
    shown = re.search(r"^output 0 at \[.*\]: target ([-0-9.]+) \(torch ([-0-9.]+)\), mutant "
                      r"([-0-9.]+)$", done.text, re.M)
    assert shown, done.text
    assert float(shown[1]) == pytest.approx(oracle["cex_target"], abs=1e-6)
    assert float(shown[2]) == pytest.approx(oracle["cex_target"], abs=1e-6)
    assert float(shown[3]) == pytest.approx(oracle["cex_mutant"], abs=1e-6)
    assert abs(oracle["cex_mutant"] - oracle["cex_target"]) > 1e-3
    mismatches = re.search(r"^  mismatches\s+(\d+)$", done.text, re.M)
    assert mismatches and int(mismatches[1]) == oracle["cex_mismatches"]
    assert re.search(r"^random testing at \{.*\}: equal False, [1-9]\d* elements differ$",
                     done.text, re.M)


@pytest.mark.slow
def test_04b_the_axiom_s_instances_reach_every_rank_the_ir_allows(run):
    # The markdown says the instances cover every rank the IR allows (a matmul from 2 up).
    ranks = re.search(r"^  ranks of the instances' tensors: \[([0-9, ]+)\]$", run(STEM).text,
                      re.M)
    assert ranks, run(STEM).text
    assert [int(r) for r in ranks[1].split(", ")] == list(range(2, MAX_RANK + 1))


@pytest.mark.slow
def test_04b_two_kernels_are_proven_by_regrouping_and_the_gap_names_what_is_missing(run,
                                                                                   corpus_dir):
    # corpus_dir: the section needs Mirage's corpus beside the repository (skips without it)
    text = run(STEM).text
    assert re.search(r"^gqa_bs1\[1\]: equivalent, \d+ steps, sizes concrete$", text, re.M), text
    assert re.search(r"^  red-regroup: \(red \(part \(red \(part ", text, re.M)
    assert "discovered axioms in the table: max-size-one" in text
    assert "without red-regroup: unknown" in text
    side = re.search(r"^  candidate side: (.*)$", text, re.M)
    assert side and side.group(1).startswith("(red (red (part (part (comb ")
    assert re.search(r"^  target side:    \(matmul \(exp \(matmul Q K\)\) V\)$", text, re.M)
    # discovery, without the group, finds red-regroup again and the graph it proves
    assert re.search(r"^  new  red-of-red-regroup-as-red: \(red \(part \(red \(part \(comb \?t "
                     r"\?d \?g\) \?d \?f\) \?f\) \?d \?k\) \?k\) = \(red \?t \?g\) if "
                     r"axis_product\(\?g, \?f, \?k\); makes provable: gqa_bs1\[1\]$", text, re.M)


@pytest.mark.slow
def test_04b_the_exercise_s_check_passes_z3_s_answer_and_rejects_others(run):
    done = run(STEM)
    assert re.search(r"^exercise passed: y = 0\.0; z3's counterexample has y = 0, and no other y "
                     r"has one$", done.text, re.M)
    assert done.oracle["check_rejects"] == [1.0, 2.0, -1.0]


@pytest.mark.slow
def test_04b_the_counterexample_widget_shows_the_refuted_kernel(run):
    done = run(STEM)
    state = done.nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    html = [m["state"].get("value", "") for m in state.values()
            if m.get("model_name") == "HTMLModel"]
    assert any("prism-counterexample" in h and "not equivalent" in h for h in html)
