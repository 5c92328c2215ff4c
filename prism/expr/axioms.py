"""The axiom table: one source of truth for the verifier (and, later, the search's pruning).

Each axiom is data: a name, the identity as a rewrite over tensor terms (`prism.expr.tensor_terms`
gives their meaning), whether it may be used in both directions, a condition, a one-line
statement, and the kind of its soundness evidence: `smt` (proved by z3 over unbounded tensors —
tensors as functions from integer indices to reals, sizes symbolic, sums as uninterpreted
functions of their summands under the laws of finite sums — for every shape situation the
condition admits, see `prism.smt`) or `random` (a randomized float64 check only, see
`prism.expr.evidence`). Two are `random`, and their statements say what they assume: `exp-rescale`
(a property of exp, which the solver leaves uninterpreted) and `max-of-chunk-maxes` (a row max is
the solver's uninterpreted function of the row). The randomized check runs for every axiom,
for the `smt` ones as a second, independent check. `tests/expr/test_smt.py` and
`tests/expr/test_axioms.py` run the evidence.

Conditions are data (`Condition(word, args)`) and read the tensor analysis (axes and symbolic
shapes) and atoms only, so the e-graph, the proof checker and the egglog oracle decide them
alike. Every axiom shares one guard: each bound tensor and both sides of the identity, as
instantiated, are well-shaped with the same axes and rank.

Prism's own table (REFERENCE.md §1.6) is the checklist; unlike it, this table
- tracks shapes, so the partitioned-matmul rules say which dim they split (rows of A, columns of
  B, the batch) and the broadcast rules say which operand broadcasts;
- never swaps the operands of div or pow across a replicate (Prism's `bc-div-replicate1`);
- keeps the 1/n of rms and mean: `red_ld_rms` is the true RMS, as executed;
- leaves out `bc_pow_distrib_mul` ((a·b)^c = a^c·b^c) and `bc_pow_distrib_add`
  (a^(b+c) = a^b·a^c): both fail over the reals for negative bases.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from prism.expr.rules import Facts, Rule, is_var
from prism.expr.tensor_terms import AtomInfo, Info, TensorInfo, make_info, scalar_value
from prism.expr.terms import Term
from prism.ir.dims import Dim, var
from prism.ir.ops import OPS

# The op table's elementwise ops: one operand (with its scalar atoms: `(clamp ?t ?a0 ?a1)`) or two.
# Each commutes with every data movement, which is what lets a kernel compute them on tiles.
UNARY = tuple(n for n, od in OPS.items() if od.category in ("unary", "scalar"))
ELEMENTWISE = tuple(n for n, od in OPS.items() if od.category == "binary")
# Reductions over a dim commute with moving data along the others.
REDUCTIONS = tuple(n for n, od in OPS.items() if od.category == "reduce")
NORMS = tuple(n for n, od in OPS.items() if od.category == "norm")


def _applied(head: str, operand: str) -> str:
    """`(head operand ?a0 ...)`: the op on `operand` with its atoms as pattern variables (the
    last dim's index is `?d`)."""
    atoms = ["?d" if a == "last" else f"?a{j}" for j, a in enumerate(OPS[head].term_attrs)]
    return f"({' '.join((head, operand, *atoms))})"


@dataclass(frozen=True)
class Axiom:
    name: str
    lhs: str
    rhs: str
    statement: str
    evidence: str                      # "smt" | "random"
    group: str
    bidirectional: bool = False
    condition: Condition | None = None
    origin: str = "hand"               # "hand" | "discovered" (`prism axioms discover`)

    def rule(self) -> Rule:
        return Rule(self.name, self.lhs, self.rhs, _guarded(self), self.bidirectional)


def _guarded(ax: Axiom) -> Callable[[Facts], bool]:
    """The axiom's condition, behind the guard every axiom shares: each bound tensor and both
    sides of the identity, as instantiated, are well-shaped with the same axes and rank (an
    identity between a tensor and a term without a value says nothing)."""
    plain = Rule(ax.name, ax.lhs, ax.rhs, None, ax.bidirectional)
    variables = plain.lhs.vars

    def condition(f: Facts) -> bool:
        if any(f.data(v) is None for v in variables):
            return False
        left, right = _pattern_info(plain.lhs.term, f), _pattern_info(plain.rhs.term, f)
        if not (isinstance(left, TensorInfo) and isinstance(right, TensorInfo)
                and left.axes == right.axes and left.rank == right.rank):
            return False
        return ax.condition is None or bool(ax.condition(f))
    return condition


def _pattern_info(t: Term, f: Facts) -> Info:
    """The analysis info of a pattern side, from the infos bound to its variables."""
    if is_var(t.head):
        data: Info = f.data(t.head)
        return data
    if not t.args:
        return AtomInfo(t.head)
    return make_info(t.head, tuple(_pattern_info(a, f) for a in t.args))


# -- condition vocabulary -------------------------------------------------------------------------
# A condition is data, `Condition(word, args)`: the e-graph and the checker call it on Facts; the
# egglog oracle compiles each word to premises of its own.

def _info(f: Facts, v: str) -> TensorInfo | None:
    data = f.data(v)
    return data if isinstance(data, TensorInfo) else None


def _int(f: Facts, v: str) -> int | None:
    atom = f.atom(v)
    return int(atom) if atom is not None and atom.isdigit() else None


def _is_tensor(f: Facts, *vs: str) -> bool:
    return all(_info(f, v) is not None for v in vs)


def _is_axis(f: Facts, *vs: str) -> bool:
    return all(isinstance(f.data(v), AtomInfo) and not str(f.atom(v)).isdigit() for v in vs)


def _distinct(f: Facts, a: str, b: str) -> bool:
    return f.atom(a) is not None and f.atom(a) != f.atom(b)


def _dim_from_end(f: Facts, d: str, t: str, k: int) -> bool:
    """Data dim `d` of tensor `t` is its k-th from last (1: the last)."""
    info, i = _info(f, t), _int(f, d)
    return info is not None and i is not None and i == info.rank - k


def _batch_dim(f: Facts, d: str, t: str) -> bool:
    info, i = _info(f, t), _int(f, d)
    return info is not None and i is not None and i < info.rank - 2


def _size_one(f: Facts, t: str, d: str) -> bool:
    """Tensor `t` has size 1 along dim `d`: it broadcasts along it."""
    info, i = _info(f, t), _int(f, d)
    return info is not None and i is not None and i < info.rank and info.shape[i] == 1


def _last_size_one(f: Facts, t: str) -> bool:
    info = _info(f, t)
    return info is not None and info.rank >= 1 and info.shape[-1] == 1


def _same_shape(f: Facts, a: str, b: str) -> bool:
    x, y = _info(f, a), _info(f, b)
    return x is not None and y is not None and x.shape == y.shape


def _same_dim(f: Facts, a: str, b: str, d: str) -> bool:
    x, y, i = _info(f, a), _info(f, b), _int(f, d)
    return x is not None and y is not None and i is not None and i < min(x.rank, y.rank) \
        and x.shape[i] == y.shape[i]


def _nonzero_atom(f: Facts, v: str) -> bool:
    """Atom `v` is a scalar other than 0 (an epsilon that is there)."""
    atom = f.atom(v)
    try:
        return atom is not None and scalar_value(atom) not in (None, 0.0)
    except ValueError:
        return False


def _axis_dim(f: Facts, v: str) -> Dim | None:
    """The size of axis atom `v`: the analysis's when it knows it (a concrete graph's), else the
    variable of its name (the size of an opaque axis)."""
    info = f.data(v)
    if not isinstance(info, AtomInfo) or info.text.isdigit():
        return None
    return info.size if info.size is not None else var(info.text)


def _axis_product(f: Facts, g: str, a: str, b: str) -> bool:
    """Axis `g` has as many positions as `a` and `b` together: |g| = |a|·|b| (as dimension
    expressions: always for a concrete graph's axes, for opaque ones only when it is an
    identity of their sizes)."""
    sg, sa, sb = _axis_dim(f, g), _axis_dim(f, a), _axis_dim(f, b)
    return sg is not None and sa is not None and sb is not None and sg == sa * sb


def _same_axis_size(f: Facts, g: str, h: str) -> bool:
    """Axes `g` and `h` have the same number of positions."""
    sg, sh = _axis_dim(f, g), _axis_dim(f, h)
    return sg is not None and sh is not None and sg == sh


def _all_of(f: Facts, *conds: Condition) -> bool:
    return all(c(f) for c in conds)


WORDS: dict[str, Callable[..., bool]] = {
    "is_tensor": _is_tensor, "is_axis": _is_axis, "distinct": _distinct,
    "dim_from_end": _dim_from_end, "batch_dim": _batch_dim, "size_one": _size_one,
    "last_size_one": _last_size_one, "same_shape": _same_shape, "same_dim": _same_dim,
    "all_of": _all_of, "nonzero_atom": _nonzero_atom, "axis_product": _axis_product,
    "same_axis_size": _same_axis_size,
}


@dataclass(frozen=True)
class Condition:
    """A named test of the vocabulary above, with its arguments (pattern variables, ints, or
    other conditions for `all_of`)."""

    word: str
    args: tuple[Any, ...]

    def __call__(self, f: Facts) -> bool:
        return WORDS[self.word](f, *self.args)

    def __str__(self) -> str:
        return f"{self.word}({', '.join(str(a) for a in self.args)})"


def is_tensor(*vs: str) -> Condition:
    return Condition("is_tensor", vs)


def is_axis(*vs: str) -> Condition:
    return Condition("is_axis", vs)


def distinct(a: str, b: str) -> Condition:
    return Condition("distinct", (a, b))


def dim_from_end(d: str, t: str, k: int) -> Condition:
    return Condition("dim_from_end", (d, t, k))


def batch_dim(d: str, t: str) -> Condition:
    return Condition("batch_dim", (d, t))


def size_one(t: str, d: str) -> Condition:
    return Condition("size_one", (t, d))


def last_size_one(t: str) -> Condition:
    return Condition("last_size_one", (t,))


def same_shape(a: str, b: str) -> Condition:
    return Condition("same_shape", (a, b))


def same_dim(a: str, b: str, d: str) -> Condition:
    return Condition("same_dim", (a, b, d))


def nonzero_atom(v: str) -> Condition:
    return Condition("nonzero_atom", (v,))


def axis_product(g: str, a: str, b: str) -> Condition:
    return Condition("axis_product", (g, a, b))


def same_axis_size(g: str, h: str) -> Condition:
    return Condition("same_axis_size", (g, h))


def all_of(*conds: Condition) -> Condition:
    return Condition("all_of", conds)


def _ax(name: str, lhs: str, rhs: str, statement: str, evidence: str, group: str,
        both: bool = False, condition: Condition | None = None) -> Axiom:
    return Axiom(name, lhs, rhs, statement, evidence, group, both, condition)


# -- the table ------------------------------------------------------------------------------------

_ALGEBRA = [
    _ax("add-comm", "(add ?a ?b)", "(add ?b ?a)", "a + b = b + a", "smt", "algebra"),
    _ax("mul-comm", "(mul ?a ?b)", "(mul ?b ?a)", "a · b = b · a", "smt", "algebra"),
    _ax("add-assoc", "(add (add ?a ?b) ?c)", "(add ?a (add ?b ?c))", "(a + b) + c = a + (b + c)",
        "smt", "algebra", both=True),
    _ax("mul-assoc", "(mul (mul ?a ?b) ?c)", "(mul ?a (mul ?b ?c))", "(a · b) · c = a · (b · c)",
        "smt", "algebra", both=True),
    _ax("mul-distrib-add", "(mul (add ?a ?b) ?c)", "(add (mul ?a ?c) (mul ?b ?c))",
        "(a + b) · c = a·c + b·c", "smt", "algebra", both=True),
    _ax("div-distrib-add", "(div (add ?a ?b) ?c)", "(add (div ?a ?c) (div ?b ?c))",
        "(a + b) / c = a/c + b/c", "smt", "algebra", both=True),
    _ax("div-mul-common-denominator", "(mul (div ?a ?c) (div ?b ?c))",
        "(div (mul ?a ?b) (mul ?c ?c))", "(a/c) · (b/c) = (a·b) / (c·c)", "smt", "algebra",
        both=True),
    _ax("square-is-mul", "(square ?a)", "(mul ?a ?a)", "a² = a · a", "smt", "algebra", both=True),
    _ax("matmul-assoc", "(matmul (matmul ?a ?b) ?c)", "(matmul ?a (matmul ?b ?c))",
        "(A B) C = A (B C)", "smt", "algebra", both=True),
    _ax("matmul-distrib-add-left", "(matmul (add ?a ?b) ?c)", "(add (matmul ?a ?c) (matmul ?b ?c))",
        "(A + B) C = A C + B C", "smt", "algebra", both=True),
    _ax("matmul-distrib-add-right", "(matmul ?a (add ?b ?c))",
        "(add (matmul ?a ?b) (matmul ?a ?c))", "A (B + C) = A B + A C", "smt", "algebra",
        both=True),
    _ax("matmul-div-rows", "(matmul (div ?a ?b) ?c)", "(div (matmul ?a ?c) ?b)",
        "(A / b) C = (A C) / b when b is one value per row (last dim 1)", "smt", "algebra",
        both=True, condition=last_size_one("?b")),
    _ax("matmul-mul-rows", "(matmul (mul ?a ?b) ?c)", "(mul (matmul ?a ?c) ?b)",
        "(A · b) C = (A C) · b when b is one value per row (last dim 1)", "smt", "algebra",
        both=True, condition=last_size_one("?b")),
    _ax("sum-mul-rows", "(sum (mul ?a ?b) ?d)", "(mul (sum ?a ?d) ?b)",
        "Σ_d (a · b) = (Σ_d a) · b when b is one value along d", "smt", "algebra", both=True,
        condition=size_one("?b", "?d")),
    # The online-softmax rescaling (FlashAttention's recurrence, flash-decoding's merge): a part's
    # sums taken under its own max m, times e^(m − M), are the sums under M. A property of exp,
    # which the solver does not interpret (any function would do for it): the evidence is random.
    _ax("exp-rescale", "(mul (exp (sub ?x ?a)) (exp (sub ?a ?b)))", "(exp (sub ?x ?b))",
        "e^(x − a) · e^(a − b) = e^(x − b) (a and b of one shape); assumes e^u · e^v = e^(u + v)",
        "random", "algebra", condition=same_shape("?a", "?b")),
    # Without an epsilon (Mirage's rms_norm, eps 0) the definition has no `add_scalar`, so the
    # search's RMS accumulator matches it as it is; with one, the epsilon is added.
    _ax("rms-norm-definition", "(rms_norm ?x ?d 0.0)", "(div ?x (sqrt (mean (square ?x) ?d)))",
        "rms_norm(x) = x / sqrt(mean(x², d))", "smt", "algebra", both=True),
    _ax("rms-norm-eps-definition", "(rms_norm ?x ?d ?e)",
        "(div ?x (sqrt (add_scalar (mean (square ?x) ?d) ?e)))",
        "rms_norm(x, ε) = x / sqrt(mean(x², d) + ε)", "smt", "algebra", both=True,
        condition=nonzero_atom("?e")),
    _ax("layer-norm-definition", "(layer_norm ?x ?d ?e)",
        "(div (sub ?x (mean ?x ?d)) (sqrt (add_scalar (mean (square (sub ?x (mean ?x ?d))) ?d) "
        "?e)))", "layer_norm(x, ε) = (x − mean x) / sqrt(var x + ε), over d", "smt", "algebra",
        both=True),
    _ax("div-is-mul-reciprocal", "(div ?a ?b)", "(mul ?a (reciprocal ?b))", "a / b = a · (1/b)",
        "smt", "algebra", both=True),
    _ax("sub-is-add-neg", "(sub ?a ?b)", "(add ?a (neg ?b))", "a − b = a + (−b)", "smt",
        "algebra", both=True),
    _ax("neg-is-mul-scalar", "(neg ?a)", "(mul_scalar ?a -1.0)", "−a = a · (−1)", "smt",
        "algebra", both=True),
    _ax("mul-scalar-matmul-left", "(matmul (mul_scalar ?a ?c) ?b)",
        "(mul_scalar (matmul ?a ?b) ?c)", "(c·A) B = c·(A B)", "smt", "algebra", both=True),
    _ax("mul-scalar-matmul-right", "(matmul ?a (mul_scalar ?b ?c))",
        "(mul_scalar (matmul ?a ?b) ?c)", "A (c·B) = c·(A B)", "smt", "algebra", both=True),
]


def _movement() -> list[Axiom]:
    out: list[Axiom] = []
    for u in UNARY:
        out += [
            _ax(f"{u}-part", _applied(u, "(part ?t ?d ?g)"), f"(part {_applied(u, '?t')} ?d ?g)",
                f"{u} commutes with splitting a dim", "smt", "unary", both=True),
            _ax(f"{u}-rep", _applied(u, "(rep ?t ?g)"), f"(rep {_applied(u, '?t')} ?g)",
                f"{u} commutes with replication", "smt", "unary", both=True),
        ]
    for op in ELEMENTWISE:
        out += [
            _ax(f"{op}-part-part", f"({op} (part ?a ?d ?g) (part ?b ?d ?g))",
                f"(part ({op} ?a ?b) ?d ?g)",
                f"{op} of two tensors split alike is the split {op} (equal sizes along d)",
                "smt", "elementwise", both=True, condition=same_dim("?a", "?b", "?d")),
            _ax(f"{op}-part-rep", f"({op} (part ?a ?d ?g) (rep ?b ?g))",
                f"(part ({op} ?a ?b) ?d ?g)",
                f"{op} of a split tensor and a replicated one that broadcasts along d",
                "smt", "elementwise", both=True, condition=size_one("?b", "?d")),
            _ax(f"{op}-rep-part", f"({op} (rep ?a ?g) (part ?b ?d ?g))",
                f"(part ({op} ?a ?b) ?d ?g)",
                f"{op} of a replicated tensor that broadcasts along d and a split one",
                "smt", "elementwise", both=True, condition=size_one("?a", "?d")),
            _ax(f"{op}-rep-rep", f"({op} (rep ?a ?g) (rep ?b ?g))", f"(rep ({op} ?a ?b) ?g)",
                f"{op} commutes with replication", "smt", "elementwise", both=True),
        ]
    out += [
        _ax("matmul-rep-rep", "(matmul (rep ?a ?g) (rep ?b ?g))", "(rep (matmul ?a ?b) ?g)",
            "matmul commutes with replication", "smt", "matmul", both=True),
        _ax("matmul-rows", "(matmul (part ?a ?d ?g) (rep ?b ?g))", "(part (matmul ?a ?b) ?d ?g)",
            "splitting A's rows splits the product's rows", "smt", "matmul", both=True,
            condition=dim_from_end("?d", "?a", 2)),
        _ax("matmul-cols", "(matmul (rep ?a ?g) (part ?b ?d ?g))", "(part (matmul ?a ?b) ?d ?g)",
            "splitting B's columns splits the product's columns", "smt", "matmul", both=True,
            condition=dim_from_end("?d", "?b", 1)),
        _ax("matmul-batch", "(matmul (part ?a ?d ?g) (part ?b ?d ?g))",
            "(part (matmul ?a ?b) ?d ?g)", "splitting the batch of both splits the product's",
            "smt", "matmul", both=True, condition=batch_dim("?d", "?a")),
        _ax("matmul-k-partial-sums", "(red (matmul (part ?a ?da ?g) (part ?b ?db ?g)) ?g)",
            "(matmul ?a ?b)", "Σ_i A_i B_i over the K-chunks of A and B is A B", "smt",
            "matmul", condition=all_of(dim_from_end("?da", "?a", 1),
                                       dim_from_end("?db", "?b", 2))),
        _ax("comb-part", "(comb (part ?t ?d ?g) ?d ?g)", "?t",
            "concatenating the chunks of a split gives the tensor back", "smt", "movement"),
        _ax("part-comb", "(part (comb ?t ?d ?g) ?d ?g)", "?t",
            "splitting a concatenation along its axis gives the pieces back", "smt",
            "movement"),
        _ax("part-rep-commute", "(part (rep ?t ?g) ?d ?h)", "(rep (part ?t ?d ?h) ?g)",
            "splitting and replicating along different axes commute", "smt", "movement",
            both=True, condition=distinct("?g", "?h")),
        _ax("comb-rep-commute", "(comb (rep ?t ?g) ?d ?h)", "(rep (comb ?t ?d ?h) ?g)",
            "concatenating and replicating along different axes commute", "smt", "movement",
            both=True, condition=distinct("?g", "?h")),
        _ax("red-rep-commute", "(red (rep ?t ?g) ?h)", "(rep (red ?t ?h) ?g)",
            "summing and replicating along different axes commute", "smt", "movement",
            both=True, condition=distinct("?g", "?h")),
        _ax("part-part-commute", "(part (part ?t ?d ?g) ?e ?h)", "(part (part ?t ?e ?h) ?d ?g)",
            "splits of different dims along different axes commute", "smt", "movement",
            both=True, condition=all_of(distinct("?d", "?e"), distinct("?g", "?h"))),
        _ax("comb-comb-commute", "(comb (comb ?t ?d ?g) ?e ?h)", "(comb (comb ?t ?e ?h) ?d ?g)",
            "concatenations of different dims along different axes commute", "smt",
            "movement", both=True, condition=all_of(distinct("?d", "?e"), distinct("?g", "?h"))),
    ]
    for r in REDUCTIONS:
        out += [
            _ax(f"{r}-rep", f"({r} (rep ?t ?g) ?d)", f"(rep ({r} ?t ?d) ?g)",
                f"{r} over a dim commutes with replication", "smt", "reduction", both=True),
            _ax(f"{r}-part-other", f"({r} (part ?t ?e ?g) ?d)", f"(part ({r} ?t ?d) ?e ?g)",
                f"{r} over one dim commutes with splitting another", "smt", "reduction",
                both=True, condition=distinct("?d", "?e")),
            _ax(f"{r}-comb-other", f"({r} (comb ?t ?e ?g) ?d)", f"(comb ({r} ?t ?d) ?e ?g)",
                f"{r} over one dim commutes with concatenating another", "smt", "reduction",
                both=True, condition=distinct("?d", "?e")),
        ]
    for n in NORMS:
        out += [
            _ax(f"{n.replace('_', '-')}-rep", f"({n} (rep ?t ?g) ?d ?a1)",
                f"(rep ({n} ?t ?d ?a1) ?g)", f"{n} commutes with replication", "smt",
                "reduction", both=True),
            _ax(f"{n.replace('_', '-')}-part-other", f"({n} (part ?t ?e ?g) ?d ?a1)",
                f"(part ({n} ?t ?d ?a1) ?e ?g)",
                f"{n} over one dim commutes with splitting another", "smt", "reduction",
                both=True, condition=distinct("?d", "?e")),
        ]
    out += [
        _ax("sum-of-chunk-sums", "(sum (red (part ?t ?d ?g) ?g) ?d)", "(sum ?t ?d)",
            "summing the chunk sums of a dim is summing the dim", "smt", "reduction"),
        _ax("mean-of-chunk-means", "(mean (mred (part ?t ?d ?g) ?g) ?d)", "(mean ?t ?d)",
            "the mean of equal chunks' means is the mean", "smt", "reduction"),
        _ax("sum-of-comb", "(sum (comb ?t ?d ?g) ?d)", "(red (sum ?t ?d) ?g)",
            "summing a concatenated dim sums the pieces' sums", "smt", "reduction"),
        _ax("mean-of-comb", "(mean (comb ?t ?d ?g) ?d)", "(mred (mean ?t ?d) ?g)",
            "the mean over a concatenation of equal pieces is the mean of their means",
            "smt", "reduction"),
        # A row max is the solver's uninterpreted function of the row (`prism.smt`), which has
        # no law of partitions: the evidence is random.
        _ax("max-of-chunk-maxes", "(max (comb (max (part ?t ?d ?g) ?d) ?d ?g) ?d)", "(max ?t ?d)",
            "the max over the concatenated maxes of a dim's chunks is the max over the dim; "
            "assumes max is associative and commutative (max over a partition is the max of the "
            "parts' maxes)", "random", "reduction"),
        _ax("red-sum-commute", "(red (sum ?t ?d) ?g)", "(sum (red ?t ?g) ?d)",
            "a sum along an axis and a sum over a dim commute", "smt", "reduction",
            both=True),
        _ax("red-part-commute", "(red (part ?t ?d ?h) ?g)", "(part (red ?t ?g) ?d ?h)",
            "summing along one axis commutes with splitting along another", "smt",
            "movement", both=True, condition=distinct("?g", "?h")),
        _ax("red-comb-commute", "(red (comb ?t ?d ?h) ?g)", "(comb (red ?t ?g) ?d ?h)",
            "summing along one axis commutes with concatenating along another", "smt",
            "movement", both=True, condition=distinct("?g", "?h")),
        _ax("mred-rep", "(mred (rep ?t ?g) ?g)", "?t",
            "the mean of equal copies is the copy", "smt", "reduction"),
        _ax("sum-size-one", "(sum ?t ?d)", "?t",
            "summing a dim of size 1 leaves the tensor as it is (the sum keeps its dim)", "smt",
            "reduction", condition=size_one("?t", "?d")),
        _ax("mean-size-one", "(mean ?t ?d)", "?t",
            "the mean over a dim of size 1 leaves the tensor as it is", "smt", "reduction",
            condition=size_one("?t", "?d")),
    ]
    return out


def _regrouping() -> list[Axiom]:
    """Identities between different splits of the same data: a later kernel reading an earlier
    kernel's concatenated partial results in chunks of another count (Mirage's split-key
    attention: kernel 1 writes one partial result per key split, kernel 2 sums them in its own
    grouping). Each condition relates the axes' sizes, so they hold for a concrete graph's axes
    and, over opaque ones, only where the sizes are the same expression."""
    return [
        _ax("red-resplit", "(red (part (comb ?t ?d ?g) ?d ?h) ?h)", "(red ?t ?g)",
            "splitting a concatenation of |g| chunks into |h| = |g| chunks and summing them sums "
            "the chunks", "smt", "regrouping", condition=same_axis_size("?g", "?h")),
        _ax("mred-resplit", "(mred (part (comb ?t ?d ?g) ?d ?h) ?h)", "(mred ?t ?g)",
            "the mean of |h| = |g| chunks of a concatenation of |g| chunks is the mean of the "
            "chunks", "smt", "regrouping", condition=same_axis_size("?g", "?h")),
        _ax("red-regroup", "(red (part (red (part (comb ?t ?d ?g) ?d ?f) ?f) ?d ?k) ?k)",
            "(red ?t ?g)",
            "a concatenation of |g| = |f|·|k| chunks, split into |f| parts that are summed, then "
            "into |k| chunks that are summed, sums the |g| chunks (a loop over partial sums "
            "against a sum over blocks)", "smt", "regrouping",
            condition=axis_product("?g", "?f", "?k")),
    ]


def _discovered() -> list[Axiom]:
    """Axioms `prism axioms discover` proposed and z3 proved, that the table above did not hold
    or derive (`prism axioms discover --ops max,min,add,mul_scalar --templates
    through-head,size-one`, and `--ops sum --templates regrouping` for the mean's regrouping).
    They are checked like every axiom (`tests/expr/test_smt.py`)."""
    def found(name: str, lhs: str, rhs: str, statement: str, group: str, both: bool = False,
              condition: Condition | None = None) -> Axiom:
        return Axiom(name, lhs, rhs, statement, "smt", group, both, condition, "discovered")
    return [
        found("max-size-one", "(max ?t ?d)", "?t", "the max over a dim of size 1 is the tensor",
              "reduction", condition=size_one("?t", "?d")),
        found("min-size-one", "(min ?t ?d)", "?t", "the min over a dim of size 1 is the tensor",
              "reduction", condition=size_one("?t", "?d")),
        found("add-red-red", "(add (red ?a ?g) (red ?b ?g))", "(red (add ?a ?b) ?g)",
              "a sum of two sums along one axis is the sum of the sums", "movement", both=True),
        found("mul-scalar-red", "(mul_scalar (red ?t ?g) ?c)", "(red (mul_scalar ?t ?c) ?g)",
              "a constant factor moves into a sum along an axis", "movement", both=True),
        found("mred-regroup", "(mred (part (mred (part (comb ?t ?d ?g) ?d ?f) ?f) ?d ?k) ?k)",
              "(mred ?t ?g)",
              "a concatenation of |g| = |f|·|k| equal chunks, split into |f| parts averaged, then "
              "into |k| chunks averaged, is the mean of the |g| chunks", "regrouping",
              condition=axis_product("?g", "?f", "?k")),
    ]


AXIOMS: tuple[Axiom, ...] = (*_ALGEBRA, *_movement(), *_regrouping(), *_discovered())
AXIOMS_BY_NAME: dict[str, Axiom] = {a.name: a for a in AXIOMS}
assert len(AXIOMS_BY_NAME) == len(AXIOMS), "axiom names must be unique"


def rules(names: list[str] | None = None) -> list[Rule]:
    """The axioms as e-graph rules (all of them, or those named); compiled once per name set,
    since the search verifies thousands of candidates."""
    return list(_compiled(None if names is None else tuple(names)))


@functools.cache
def _compiled(names: tuple[str, ...] | None) -> tuple[Rule, ...]:
    chosen = AXIOMS if names is None else tuple(AXIOMS_BY_NAME[n] for n in names)
    return tuple(a.rule() for a in chosen)
