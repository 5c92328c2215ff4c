"""Terms: printing is the inverse of parsing, hash-consing makes equal structure identical, and
paths address subterms (oracle: the tree walked by hand, and parse ∘ str)."""

import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from prism.errors import PrismError, TermSyntaxError
from prism.expr import Term, parse

LEAVES = st.sampled_from(["X", "W", "g0", "1", "0.5", "?a"]).map(Term)
TERMS = st.recursive(
    LEAVES,
    lambda sub: st.tuples(st.sampled_from(["div", "matmul", "rms", "+"]),
                          st.lists(sub, min_size=1, max_size=3))
    .map(lambda pair: Term(pair[0], pair[1])),
    max_leaves=12)


@pytest.mark.parametrize("text", ["X", "(rms X)", "(div (matmul X W) (rms X))",
                                  "(f (g (h 1 2) g0) (k -3.5))"])
def test_print_is_the_inverse_of_parse(text):
    assert str(parse(text)) == text


def test_parse_normalises_whitespace():
    assert str(parse("  ( div\n(matmul X  W)\t(rms X) ) ")) == "(div (matmul X W) (rms X))"


@given(TERMS)
def test_round_trip_and_hash_consing(term):
    assert parse(str(term)) is term
    assert Term(term.head, list(term.args)) is term
    assert pickle.loads(pickle.dumps(term)) is term


def test_hash_consing_shares_structure():
    a = parse("(div (matmul X W) (rms X))")
    b = Term("div", (Term("matmul", (Term("X"), Term("W"))), Term("rms", (Term("X"),))))
    assert a is b and hash(a) == hash(b)
    assert a.at((0, 0)) is a.at((1, 0))  # both X leaves are one object
    assert parse("(f a)") is not parse("(f b)")


def test_terms_are_immutable():
    with pytest.raises(AttributeError):
        parse("X").head = "Y"


@pytest.mark.parametrize("text", ["", "(", ")", "(f a))", "(f a", "()", "(f)", "((f a) b)",
                                  "a b", "(f a) b"])
def test_parse_errors_are_prism_errors(text):
    with pytest.raises(TermSyntaxError) as error:
        parse(text)
    assert isinstance(error.value, PrismError)


def test_heads_must_be_atoms():
    with pytest.raises(TermSyntaxError):
        Term("a b")
    with pytest.raises(TermSyntaxError):
        Term("")
    with pytest.raises(TypeError):
        Term("f", ("x",))  # type: ignore[arg-type]


def test_paths_address_subterms():
    t = parse("(div (matmul X W) (rms X))")
    assert t.at(()) is t
    assert str(t.at((0,))) == "(matmul X W)"
    assert str(t.at((0, 1))) == "W"
    assert t.size() == 6
    assert t.replace_at((0, 1), parse("(t W)")) is parse("(div (matmul X (t W)) (rms X))")
    assert t.replace_at((), parse("Y")) is parse("Y")
    with pytest.raises(IndexError):
        t.at((2,))
    with pytest.raises(IndexError):
        t.replace_at((0, 0, 0), parse("Y"))


def test_subterms_are_listed_parents_first_left_to_right():
    t = parse("(div (matmul X W) (rms X))")
    assert [(p, str(s)) for p, s in t.subterms()] == [
        ((), "(div (matmul X W) (rms X))"), ((0,), "(matmul X W)"), ((0, 0), "X"),
        ((0, 1), "W"), ((1,), "(rms X)"), ((1, 0), "X")]


@given(TERMS, LEAVES)
def test_every_path_reaches_and_replaces_its_subterm(term, new):
    listed = list(term.subterms())
    assert len(listed) == term.size()
    for path, sub in listed:
        assert term.at(path) is sub
        assert term.replace_at(path, sub) is term
        assert term.replace_at(path, new).at(path) is new
