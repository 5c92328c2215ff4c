"""Notebook 04: its printed e-graph growth, proof, axiom evidence and counterexample against
independent answers.

The oracle cell (`oracles/04_equivalence_proofs.py`) evaluates every term of the proof in float64
(`tensor_terms.evaluate`, at one member's sizes) against torch, decides the same equivalence with
egglog, checks the shown axiom with random float64 instances and by hand in numpy, and recomputes
the mutant's counterexample by hand ((X W) / mean(X) per row, against torch's rms_norm).
"""

from __future__ import annotations

import itertools
import re

import pytest

from prism.ir.graph import MAX_RANK

STEM = "04_equivalence_proofs"
ROW = re.compile(r"^\s+(\d+)\s+(\d+)\s+(\d+)\s+(yes|no)\s+(.*)$", re.M)
PROOF = re.compile(r"^\s+(\d+)\. (\S+) ([→←])  ", re.M)


def _growth(text: str) -> list[tuple[int, int, int, bool, set[str]]]:
    rows = []
    for it, nodes, classes, met, fired in ROW.findall(text):
        names = {re.sub(r" ×\d+$", "", f) for f in fired.split(", ")}
        rows.append((int(it), int(nodes), int(classes), met == "yes", names))
    return rows


@pytest.mark.slow
def test_04_the_e_graph_grows_until_the_terms_meet_as_verify_reports(run):
    done = run(STEM)
    rows = _growth(done.text)
    assert rows, done.text
    assert [r[0] for r in rows] == list(range(1, len(rows) + 1))
    assert [r[3] for r in rows] == [False] * (len(rows) - 1) + [True]
    assert all(a[1] <= b[1] for a, b in itertools.pairwise(rows))  # nothing is deleted
    report = re.search(r"^e-graph: goal after (\d+) iteration\(s\): (\d+) e-nodes in (\d+) "
                       r"e-classes", done.text, re.M)
    assert report, done.text
    # one iteration at a time ends where one call of the verifier ends
    assert (len(rows), rows[-1][1], rows[-1][2]) == tuple(int(n) for n in report.groups())
    assert f"the terms met after {len(rows)} iterations" in done.text
    # every axiom the proof uses merged two classes in some iteration
    fired = set().union(*(r[4] for r in rows))
    used = {name for _, name, _ in PROOF.findall(done.text)}
    assert used and used <= fired, used - fired


@pytest.mark.slow
def test_04_every_term_of_the_printed_proof_computes_the_program(run):
    done = run(STEM)
    oracle = done.oracle
    proof = PROOF.findall(done.text)
    assert [int(n) for n, _, _ in proof] == list(range(1, len(proof) + 1))
    assert oracle["terms"] == len(proof) + 1                  # start, then one term per step
    assert oracle["step_err_vs_torch"] < 1e-9                 # float64 at gx, F of CHECK_AT
    assert all(axes == [] for axes in oracle["step_axes"])    # every term is a closed program
    assert oracle["egglog"] is True                           # egglog derives it too
    assert re.search(rf"^equivalent by e-graph: {len(proof)} steps, sizes symbolic$", done.text,
                     re.M)
    assert "same steps as ours: True" in done.text
    assert f"the {len(proof)}-step proof checks" in done.text
    assert len(re.findall(r"^step \d+ (claims .*|dropped): rejected: ", done.text, re.M)) == 2
    assert "accepted (this would be a bug" not in done.text


@pytest.mark.slow
def test_04_the_prose_still_describes_the_proof(run):
    # The markdown reads the proof as a story: the loop of the matmul first, then its grid, the
    # rms and the division, then comb-part last. If the engine finds another proof, say so there.
    rules = [name for _, name, _ in PROOF.findall(run(STEM).text)]
    assert rules[:2] == ["matmul-k-partial-sums", "matmul-cols"]
    assert rules[-1] == "comb-part"
    assert {"mean-of-chunk-means", "div-part-rep", "matmul-div-rows",
            "rms-norm-definition"} <= set(rules)


@pytest.mark.slow
def test_04_the_axiom_is_proved_and_the_wrong_one_refuted_as_float64_agrees(run):
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
def test_04_the_mutant_s_counterexample_is_what_it_computes_by_hand(run):
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
def test_04_the_proof_widgets_hold_the_proof_and_the_counterexample(run):
    done = run(STEM)
    state = done.nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    html = [m["state"].get("value", "") for m in state.values()
            if m.get("model_name") == "HTMLModel"]
    assert any("prism-proof" in h and "comb-part" in h and "<mark>" in h for h in html)
    assert any("prism-counterexample" in h and "not equivalent" in h for h in html)


@pytest.mark.slow
def test_04_the_axiom_s_instances_reach_every_rank_the_ir_allows(run):
    # The markdown says the instances cover every rank the IR allows (a matmul from 2 up).
    ranks = re.search(r"^  ranks of the instances' tensors: \[([0-9, ]+)\]$", run(STEM).text,
                      re.M)
    assert ranks, run(STEM).text
    assert [int(r) for r in ranks[1].split(", ")] == list(range(2, MAX_RANK + 1))


@pytest.mark.slow
def test_04_two_kernels_are_proven_by_regrouping_and_the_gap_names_what_is_missing(run,
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
def test_04_the_toy_e_graph_concludes_what_the_engine_s_e_graph_does(run):
    done = run(STEM)
    assert re.search(r"^before: 4 e-nodes in 4 e-classes; \(a\*2\)/2 and a in one class: False$",
                     done.text, re.M)
    assert re.search(r"^after:  4 e-nodes in 3 e-classes; \(a\*2\)/2 and a in one class: True$",
                     done.text, re.M)
    assert re.search(r"^engine: \(a\*2\)/2 and a in one class: True; the toy agrees: True$",
                     done.text, re.M)
    # where the rewrite does not match, (a*3)/2, neither e-graph merges anything
    assert done.oracle["toy_times_three"] == [0, False]
    assert done.oracle["engine_times_three"] is False


@pytest.mark.slow
def test_04_the_exercise_s_check_passes_z3_s_answer_and_rejects_others(run):
    done = run(STEM)
    assert re.search(r"^exercise passed: y = 0\.0; z3's counterexample has y = 0, and no other y "
                     r"has one$", done.text, re.M)
    assert done.oracle["check_rejects"] == [1.0, 2.0, -1.0]
