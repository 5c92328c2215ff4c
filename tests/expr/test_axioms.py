"""Every axiom's soundness evidence runs; a deliberately unsound axiom is caught by it."""

import pytest

from prism.expr.axioms import AXIOMS, Axiom, batch_dim, size_one
from prism.expr.evidence import random_evidence


@pytest.mark.parametrize("axiom", AXIOMS, ids=[a.name for a in AXIOMS])
def test_random_evidence(axiom):
    ev = random_evidence(axiom)
    assert ev.instances >= 2, f"{axiom.name}: no instance could be drawn"
    assert not ev.failures, ev.failures[:3]


def test_table_is_well_formed():
    names = [a.name for a in AXIOMS]
    assert len(names) == len(set(names))
    for a in AXIOMS:
        assert a.statement and a.evidence in ("smt", "random") and a.group
        a.rule()  # parses; every variable of the built side is bound


@pytest.mark.parametrize("wrong", [
    # Prism's bc-div-replicate1: swaps div's operands across a replicate.
    Axiom("div-swap-replicate", "(div (rep ?a ?g) (part ?b ?d ?g))", "(part (div ?b ?a) ?d ?g)",
          "wrong", "random", "test", condition=size_one("?a", "?d")),
    # The sum of |g| copies is not the copy (mred, the mean, is).
    Axiom("red-of-copies", "(red (rep ?t ?g) ?g)", "?t", "wrong", "random", "test"),
    # rms without its 1/n.
    Axiom("rms-without-mean", "(rms_norm ?x ?d)", "(div ?x (sqrt (sum (square ?x) ?d)))",
          "wrong", "random", "test"),
    # "A batch dim is dim 0": true up to rank 3, false at rank 4 (the IR's largest).
    Axiom("batch-is-dim-0", "(part ?t ?d ?g)", "(part ?t 0 ?g)", "wrong", "random", "test",
          condition=batch_dim("?d", "?t")),
], ids=lambda a: a.name)
def test_unsound_axioms_are_caught(wrong):
    assert random_evidence(wrong).failures
