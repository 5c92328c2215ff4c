"""Dimension expressions: normal form, evaluation, substitution, JSON. Oracle: integer arithmetic
done by hand and by Python on random assignments."""

import contextlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prism.errors import DimExprError
from prism.ir.dims import bit, const, dim, evaluate, from_json, substitute, to_json, var

g, F, D = var("g0"), var("F"), var("D")
m, f = bit("m"), bit("f")
TILE = D / ((1 - m + m * g) * (1 - f + f * F))


@pytest.mark.parametrize(("bits", "expected"), [
    ({"m": 1, "f": 1}, D / (g * F)), ({"m": 1, "f": 0}, D / g),
    ({"m": 0, "f": 1}, D / F), ({"m": 0, "f": 0}, D)])
def test_tile_formula_collapses_with_concrete_bits(bits, expected):
    assert substitute(TILE, bits) == expected


def test_quotient_cancels_against_its_denominator():
    assert (D / g) * g == D
    assert (6 * D) / 3 == 2 * D
    assert const(1) == D / D
    assert D / 1 == D
    assert const(12) / 4 == const(3)
    assert str(D / (g * F)) in ("D/(F*g0)", "D/(g0*F)")


def test_bits_are_idempotent_and_polynomials_canonical():
    assert m * m == m
    assert (g + 1) * (g + 1) == g * g + 2 * g + 1
    assert (g + F) == (F + g)
    assert hash(g + F) == hash(F + g)
    assert const(3) == 3 and hash(const(3)) == hash(3)


def test_evaluate_requires_exact_division_and_bound_variables():
    assert evaluate(TILE, {"D": 4096, "m": 1, "f": 1, "g0": 8, "F": 4}) == 128
    with pytest.raises(DimExprError, match="not an integer"):
        evaluate(D / g, {"D": 10, "g0": 3})
    with pytest.raises(DimExprError, match="unbound"):
        evaluate(D / g, {"D": 10})
    with pytest.raises(DimExprError, match="zero"):
        const(4) / 0


def test_free_vars():
    assert TILE.free_vars() == {"D", "g0", "F", "m", "f"}
    assert const(7).free_vars() == frozenset()


exprs = st.recursive(
    st.one_of(st.integers(1, 9).map(const), st.sampled_from([g, F, D]), st.sampled_from([m, f])),
    lambda sub: st.one_of(st.tuples(sub, sub).map(lambda ab: ab[0] + ab[1]),
                          st.tuples(sub, sub).map(lambda ab: ab[0] * ab[1]),
                          st.tuples(sub, sub).map(lambda ab: ab[0] / ab[1])),
    max_leaves=8)
envs = st.fixed_dictionaries({"g0": st.integers(1, 5), "F": st.integers(1, 5),
                              "D": st.integers(1, 50), "m": st.integers(0, 1),
                              "f": st.integers(0, 1)})


def _reference(e, env):
    """Evaluate by substituting every variable and folding: Python ints as the oracle."""
    return substitute(e, env).value


@settings(max_examples=300, deadline=None)
@given(exprs, envs)
def test_json_round_trip_and_evaluation_agree(e, env):
    assert from_json(to_json(e)) == e
    try:
        value = evaluate(e, env)
    except DimExprError:
        return  # a quotient that does not divide (or divides by zero) under env
    assert value == _reference(e, env)


@settings(max_examples=200, deadline=None)
@given(st.recursive(st.one_of(st.integers(), st.text(max_size=4), st.none(), st.booleans()),
                    lambda sub: st.lists(sub, max_size=4), max_leaves=10))
def test_from_json_fuzz_raises_only_dim_errors(j):
    with contextlib.suppress(DimExprError):
        from_json(j)


def test_dim_coercion():
    assert dim(4) == const(4) and dim("g0") == g and dim(g) is g
