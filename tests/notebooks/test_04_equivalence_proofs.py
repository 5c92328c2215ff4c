"""Notebook 04: its printed e-graph growth, proof and proof check against independent answers.

The oracle cell (`oracles/04_equivalence_proofs.py`) evaluates every term of the proof in float64
(`tensor_terms.evaluate`, at one member's sizes) against torch, decides the same equivalence with
egglog, runs the toy e-graph and the engine's where the toy rewrite must not fire, and gives the
exercise's check wrong rules (one that leaves the terms apart, one that z3 refutes).
"""

from __future__ import annotations

import itertools
import re

import pytest

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
def test_04_the_proof_widget_holds_the_proof(run):
    done = run(STEM)
    state = done.nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    html = [m["state"].get("value", "") for m in state.values()
            if m.get("model_name") == "HTMLModel"]
    assert any("prism-proof" in h and "comb-part" in h and "<mark>" in h for h in html)


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
def test_04_the_exercise_s_rule_closes_a_checked_proof_and_wrong_rules_are_refused(run):
    done = run(STEM)
    assert re.search(r"^exercise passed: 2 steps, times-two-cancels then times-one; the checker "
                     r"replays them and z3 proves times-one$", done.text, re.M), done.text[-1500:]
    oracle = done.oracle["exercise"]
    assert oracle["float64_equal"] is True                # ((a*1)*2)/2 = a, at random a
    assert oracle["rejects"] == {"leaves the terms apart": "the terms did not meet",
                                 "closes the proof but is false": "z3 refutes"}
