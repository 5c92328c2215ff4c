"""Axiom discovery: candidates from templates, decided by z3, tried on Mirage's corpus. Oracles:
z3 (`prism.smt`), the verifier on the corpus, and the table itself (what discovery proposes
without the regrouping group is that group, up to renaming)."""

import json

import pytest

from prism.cli import main
from prism.expr.axioms import AXIOMS, AXIOMS_BY_NAME
from prism.expr.discover import TEMPLATES, candidates, canonical, discover
from prism.smt import prove_axiom
from prism.verify.equiv import verify
from prism.workloads.mirage_corpus import pairs


def check(target, graph, table):
    return verify(target, graph, table=table).verdict == "equivalent"


def test_without_the_regrouping_group_discovery_finds_it_and_what_it_proves(corpus_dir):
    """gqa_bs1 0 (proven by the rest of the table), 1 (kernel 2 loops over partial sums), 8
    (kernel 1 writes row sums) and 16 (kernel 2 re-splits 16 partials into 16 chunks)."""
    chosen = {f"gqa_bs1[{i}]" for i in (0, 1, 8, 16)}
    corpus = [p for p in pairs(corpus_dir) if p[0] in chosen]
    left_out = ("regrouping", "sum-size-one", "mean-size-one")
    report = discover(prove_axiom, ("sum",), templates=("regrouping", "size-one"),
                      without=left_out, corpus=corpus, check=check)
    assert report.unproven == ["gqa_bs1[1]", "gqa_bs1[8]", "gqa_bs1[16]"]
    new = {canonical(f.candidate.lhs, f.candidate.rhs): f for f in report.findings
           if f.status == "new"}
    for name, graph in (("red-regroup", "gqa_bs1[1]"), ("red-resplit", "gqa_bs1[16]"),
                        ("sum-size-one", "gqa_bs1[8]")):
        ax = AXIOMS_BY_NAME[name]
        found = new[canonical(ax.lhs, ax.rhs)]   # the hand-written axiom, found again
        assert str(found.condition) == str(ax.condition)
        assert found.makes_provable == [graph]
    assert report.together == report.unproven
    # a wrong regrouping (a sum read as a mean) is refuted, with its counterexample
    wrong = next(f for f in report.findings if f.candidate.name == "red-resplit-as-mred")
    assert wrong.status == "refuted" and "float64" in wrong.detail
    doc = report.to_json()
    assert json.loads(json.dumps(doc)) == doc and doc["without"] == list(left_out)


def test_every_discovered_axiom_of_the_table_is_a_candidate_discovery_proposes():
    proposed = {canonical(c.lhs, c.rhs) for c in candidates(
        ("sum", "max", "min", "add", "mul_scalar"), TEMPLATES)}
    discovered = [a for a in AXIOMS if a.origin == "discovered"]
    assert len(discovered) >= 5
    for ax in discovered:
        assert canonical(ax.lhs, ax.rhs) in proposed or \
            canonical(ax.rhs, ax.lhs) in proposed, ax.name
    assert {a.origin for a in AXIOMS} == {"hand", "discovered"}


def test_known_identities_cost_no_proof_and_wrong_ones_are_refuted():
    report = discover(prove_axiom, ("exp", "neg"), templates=("through-head",))
    status = {f.candidate.name: f for f in report.findings}
    assert status["exp-part"].status == "known" and status["exp-rep"].status == "known"
    # e^(Σ x) is not Σ e^x
    assert status["exp-red"].status == "refuted" and "float64" in status["exp-red"].detail
    assert "at sizes" in status["exp-red"].model       # the values that differ
    # −Σ x = Σ −x: a true identity the table lacked (then: new, or derivable from it)
    assert status["neg-red"].status in ("new", "derivable")
    assert status["exp-comb"].status in ("new", "derivable")


def test_the_command(capsys):
    assert main(["axioms", "discover", "--ops", "neg", "--templates", "through-head",
                 "--no-corpus", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["corpus"] is None and doc["table"] == len(AXIOMS)
    assert {f["name"] for f in doc["findings"]} == {f"neg-{h}" for h in
                                                   ("part", "rep", "comb", "red", "mred")}
    assert sum(doc["counts"].values()) == len(doc["findings"])
    assert main(["axioms", "discover", "--ops", "nope", "--json"]) == 2
    assert "not ops of the table" in json.loads(capsys.readouterr().out)["error"]["message"]


@pytest.mark.parametrize("bad", [["--without", "no-such-group"], ["--templates", "x"]])
def test_bad_arguments_are_usage_errors(capsys, bad):
    assert main(["axioms", "discover", "--no-corpus", "--json", *bad]) == 2
    assert json.loads(capsys.readouterr().out)["error"]["type"] == "UsageError"
