"""Every axiom's soundness evidence runs; a deliberately unsound axiom is caught by it."""

import numpy as np
import pytest

from prism.expr.axioms import AXIOMS, AXIOMS_BY_NAME, Axiom, batch_dim, size_one
from prism.expr.evidence import positive_leaves, random_evidence
from prism.expr.terms import parse


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
    Axiom("rms-without-mean", "(rms_norm ?x ?d 0.0)", "(div ?x (sqrt (sum (square ?x) ?d)))",
          "wrong", "random", "test"),
    # "A batch dim is dim 0": true up to rank 3, false at rank 4 (the IR's largest).
    Axiom("batch-is-dim-0", "(part ?t ?d ?g)", "(part ?t 0 ?g)", "wrong", "random", "test",
          condition=batch_dim("?d", "?t")),
    # √(−t²) is nan for every t ≠ 0, so is twice it: nan on both sides, never agreement.
    Axiom("twice-nan", "(sqrt (mul_scalar (square ?t) -1))",
          "(mul_scalar (sqrt (mul_scalar (square ?t) -1)) 2)", "wrong", "random", "test"),
    # (a·b)^c = a^c·b^c holds for positive bases only (the table leaves it out): the domain
    # draws agree, the standard-normal ones make a defined value nan.
    Axiom("pow-distrib-mul", "(pow (mul ?a ?b) ?c)", "(mul (pow ?a ?c) (pow ?b ?c))", "wrong",
          "random", "test"),
    # √(a²) is |a|, not a: the domain of √ does not make a positive (a² ≥ 0 for every a).
    Axiom("sqrt-of-square", "(sqrt (square ?a))", "?a", "wrong", "random", "test"),
], ids=lambda a: a.name)
def test_unsound_axioms_are_caught(wrong):
    assert random_evidence(wrong).failures


def test_inputs_are_drawn_from_each_ops_domain():
    # √'s operand and a power's base > 0; a divisor ≠ 0, which only relu can break (relu(x) = 0
    # for x ≤ 0); e^x > 0 and x² ≥ 0 for every x
    terms = [parse("(div ?a (sqrt (add (part ?b 0 ga) (exp ?c))))"),
             parse("(div ?d (relu (mul ?e (square ?f))))"), parse("(pow (rep ?g ga) ?h)"),
             parse("(sqrt (square ?i))")]
    assert positive_leaves(terms) == {"?b", "?e", "?g"}


def test_the_evidence_of_sqrt_and_pow_compares_defined_values():
    # The oracle: numpy. Standard-normal draws would make √ nan at about half the values; the
    # evidence, which counts nan on both sides as a failure, has none: its draws are in the
    # domain.
    with np.errstate(invalid="ignore"):
        assert np.isnan(np.sqrt(np.random.default_rng(0).standard_normal(64))).any()
    for name in ("sqrt-part", "sqrt-rep", "pow-part-part", "pow-rep-rep", "rms-norm-definition"):
        ev = random_evidence(AXIOMS_BY_NAME[name])
        assert ev.ok and ev.instances >= 2, ev.failures[:1]
