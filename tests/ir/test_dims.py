"""Dimension expressions: normal form, evaluation, substitution, JSON. Oracles: sympy for the
algebra (an expression tree expanded, or a fraction cancelled, by sympy, then built again), and
Python integer arithmetic on the expression tree for values and divisibility."""

import contextlib
import math
import operator

import pytest
import sympy
from hypothesis import assume, given
from hypothesis import strategies as st

from prism.errors import DimExprError
from prism.ir.dims import Dim, bit, const, dim, evaluate, from_json, mul, substitute, to_json, var

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


def test_a_merged_coefficient_cancels_a_quotient():
    """Hypothesis found (1 + m/2)², printed 1 + 2*m/2 + m/2^2, whose JSON round trip gave
    1 + m/2^2 + m: the product merged m/2 + m/2 into 2·(m/2) and did not cancel it."""
    half = m / 2
    square = (1 + half) * (1 + half)
    assert half + half == m and 2 * half == m
    assert square == 1 + 2 * half + half * half == 1 + m + half * half
    assert from_json(to_json(square)) == square
    assert hash(from_json(to_json(square))) == hash(square)
    assert str(square) == "1 + (m/2)^2 + m"


def test_quotients_are_in_lowest_terms_and_keep_their_divisibility():
    minus = const(-1)
    assert (2 * D) / (2 * g) == D / g                      # (k·n) ÷ (k·d) = n ÷ d
    assert (D * F) / (F * g) == D / g
    assert (4 * D) / 6 == (2 * D) / 3
    assert D / (minus * g) == (minus * D) / g == minus * (D / g)
    assert (3 * D) / 2 == 3 * (D / 2) == D + D / 2          # (q·d + r) ÷ d = q + r ÷ d
    assert (2 * D + F) / 2 == D + F / 2
    assert 3 * ((D + 2 * F) / 5) == (3 * D + 6 * F) / 5     # 3 is a unit mod 5
    assert ((D + F) * 2 * g) / ((D + F) * 3) == (2 * g) / 3  # (a·P) ÷ (b·P) = a ÷ b
    assert (m * D) / m == D and (m * D) / (2 * m) == D / 2
    # Different divisibility, different Dims, though the values agree.
    assert D / 2 + F / 2 != (D + F) / 2
    assert 2 * (D / 4) != D / 2
    assert (3 * D) / g != 3 * (D / g)


def test_bits_are_idempotent_and_polynomials_canonical():
    assert m * m == m
    assert (g + 1) * (g + 1) == g * g + 2 * g + 1
    assert (g + F) == (F + g)
    assert hash(g + F) == hash(F + g)
    assert const(3) == 3 and hash(const(3)) == hash(3)
    assert m * (1 - m) == 0 and Dim({(): 0}) == 0


def test_the_first_quotient_in_order_takes_a_shared_factor():
    """The one order dependence the normal form keeps (see the module docstring)."""
    a, b = D / 2, F / 2
    assert (2 * a) * b == D * b and (2 * b) * a == F * a and D * b != F * a
    assert mul(2, a, b) == (2 * a) * b


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


def test_dim_coercion():
    assert dim(4) == const(4) and dim("g0") == g and dim(g) is g


# -- property tests: expression trees and their oracles ------------------------------------------
# A tree is ("c", n), ("v", name), ("b", name) or (op, left, right) with op in + - * /.

OPS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv}
PLAIN, BITS = ("g0", "F", "D"), ("m", "f")
SYMBOLS = {n: sympy.Symbol(n, positive=True, integer=True) for n in PLAIN} | {
    n: sympy.Symbol(n, integer=True) for n in BITS}


def _leaves(lo: int, hi: int) -> st.SearchStrategy:
    return st.one_of(st.integers(lo, hi).map(lambda n: ("c", n)),
                     st.sampled_from(PLAIN).map(lambda n: ("v", n)),
                     st.sampled_from(BITS).map(lambda n: ("b", n)))


def _trees(ops: str, lo: int = 1, hi: int = 9) -> st.SearchStrategy:
    return st.recursive(_leaves(lo, hi), lambda sub: st.tuples(st.sampled_from(ops), sub, sub),
                        max_leaves=8)


polys = _trees("+-*", -3, 9)
exprs = _trees("+-*/")
monomials = st.tuples(st.integers(-6, 6).filter(bool),
                      st.lists(st.sampled_from(PLAIN), max_size=3)).map(
    lambda cv: ("*", ("c", cv[0]), _product([("v", n) for n in cv[1]])))
envs = st.fixed_dictionaries({n: st.integers(1, 6) for n in PLAIN} | {
    n: st.integers(0, 1) for n in BITS})


def _product(trees: list) -> tuple:
    out: tuple = ("c", 1)
    for t in trees:
        out = ("*", out, t)
    return out


def _build(t) -> Dim:
    kind = t[0]
    if kind == "c":
        return const(t[1])
    if kind in ("v", "b"):
        return var(t[1]) if kind == "v" else bit(t[1])
    return OPS[kind](_build(t[1]), _build(t[2]))


def _built(t) -> Dim:
    """The Dim of a tree; the example is skipped when a divisor is the zero Dim."""
    try:
        return _build(t)
    except DimExprError:
        assume(False)
        raise


class _NotExact(Exception):
    pass


def _value(t, env) -> int:
    """The tree's integer value; _NotExact when a quotient does not divide (or divides by 0)."""
    kind = t[0]
    if kind == "c":
        return t[1]
    if kind in ("v", "b"):
        return env[t[1]]
    a, b = _value(t[1], env), _value(t[2], env)
    if kind == "/":
        if b == 0 or a % b:
            raise _NotExact
        return a // b
    return OPS[kind](a, b)


def _sympy(t) -> sympy.Expr:
    kind = t[0]
    if kind == "c":
        return sympy.Integer(t[1])
    if kind in ("v", "b"):
        return SYMBOLS[t[1]]
    return OPS[kind](_sympy(t[1]), _sympy(t[2]))


def _expanded(expr: sympy.Expr) -> dict[tuple[int, ...], int]:
    """A polynomial as {exponents: coefficient}, with b^k = b for the bits."""
    names = (*PLAIN, *BITS)
    out: dict[tuple[int, ...], int] = {}
    for exps, c in sympy.Poly(sympy.expand(expr), *(SYMBOLS[n] for n in names)).terms():
        key = tuple(min(e, 1) if n in BITS else e for n, e in zip(names, exps, strict=True))
        assert c.is_integer
        out[key] = out.get(key, 0) + int(c)
    return {k: c for k, c in out.items() if c}


def _from_expanded(poly: dict[tuple[int, ...], int]) -> Dim:
    """Built again term by term, highest exponents first: another path to the same Dim."""
    names = (*PLAIN, *BITS)
    total = const(0)
    for exps, c in sorted(poly.items(), reverse=True):
        term = const(c)
        for n, e in zip(names, exps, strict=True):
            for _ in range(e):
                term = term * (bit(n) if n in BITS else var(n))
        total = term + total
    return total


@given(exprs)
def test_json_round_trip_is_the_identity(t):
    e = _built(t)
    back = from_json(to_json(e))
    assert back == e and hash(back) == hash(e) and str(back) == str(e)
    assert substitute(e, {}) == e


@given(exprs, envs)
def test_values_agree_with_the_expression_tree(t, env):
    """The rules never add a divisibility condition: where every quotient of the tree divides,
    the Dim evaluates, to the tree's value."""
    e = _built(t)
    with contextlib.suppress(_NotExact):
        expected = _value(t, env)
        assert evaluate(e, env) == expected


@given(polys, polys)
def test_polynomials_are_equal_exactly_when_sympy_says_so(s, t):
    a, b = _built(s), _built(t)
    assert a == _from_expanded(_expanded(_sympy(s))) and hash(a) == hash(
        _from_expanded(_expanded(_sympy(s))))
    assert (a == b) == (_expanded(_sympy(s)) == _expanded(_sympy(t)))


@given(polys, polys, envs)
def test_a_quotient_divides_exactly_when_its_parts_do(s, t, env):
    n, d = _value(s, env), _value(t, env)
    assume(d != 0)
    q = _built(s) / _built(t)
    if n % d:
        with pytest.raises(DimExprError, match="not an integer"):
            evaluate(q, env)
    else:
        assert evaluate(q, env) == n // d


@given(polys, monomials, polys, st.integers(-5, 5).filter(bool), monomials)
def test_a_quotient_by_a_monomial_has_one_form(s, t, p, k, scale):
    n, d, shift, factor = _built(s), _built(t), _built(p), _built(scale)
    q = n / d
    num, den = sympy.cancel(_sympy(s) / _sympy(t)).as_numer_denom()
    assert q == _from_expanded(_expanded(num)) / _from_expanded(_expanded(den))
    assert (factor * n) / (factor * d) == q
    assert (n + shift * d) / d == q + shift
    assert q * d == n
    if d.is_const and d.value > 0:
        assert sum([q] * d.value, const(0)) == n
        if math.gcd(k, d.value) == 1:
            assert k * q == (k * n) / d


@given(exprs, exprs, exprs)
def test_sums_and_products_do_not_depend_on_order(s, t, u):
    a, b, c = _built(s), _built(t), _built(u)
    assert a + b == b + a and hash(a + b) == hash(b + a)
    assert (a + b) + c == a + (b + c)
    assert a * b == b * a


@given(st.recursive(st.one_of(st.integers(), st.text(max_size=4), st.none(), st.booleans()),
                    lambda sub: st.lists(sub, max_size=4), max_leaves=10))
def test_from_json_fuzz_raises_only_dim_errors(j):
    with contextlib.suppress(DimExprError):
        from_json(j)

