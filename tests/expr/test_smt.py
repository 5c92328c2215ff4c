"""z3 proves the axiom table on every generic instance, and refutes deliberately wrong axioms
(oracles: z3, over the semantics of `tensor_terms.evaluate` written in `prism.smt`; the wrong
axioms, wrong by hand-checked counterexamples; and `evaluate` itself, which the encoding's terms,
evaluated at concrete sizes and values, must agree with)."""

import itertools
import math

import numpy as np
import pytest
import z3

from prism import smt
from prism.expr import instances
from prism.expr.axioms import (
    AXIOMS,
    AXIOMS_BY_NAME,
    Axiom,
    axis_product,
    batch_dim,
    distinct,
    size_one,
)
from prism.expr.instances import generic_instances
from prism.expr.tensor_terms import SYMBOLIC_PREFIX, SYMBOLIC_SCALAR, TensorInfo, evaluate
from prism.expr.terms import Term
from prism.ir.dims import evaluate as eval_dim
from prism.ir.dims import var
from prism.ir.graph import MAX_RANK
from prism.ir.ops import OPS
from prism.smt import STATUSES, prove_axiom


def wrong(name, lhs, rhs, condition=None):
    return Axiom(name, lhs, rhs, "wrong", "smt", "test", condition=condition)


@pytest.mark.parametrize("axiom", AXIOMS, ids=[a.name for a in AXIOMS])
def test_the_table(axiom):
    # z3's limit is wall-clock time: generous here, so a loaded machine (the whole suite on two
    # cores) cannot turn a proof of a second into an `unknown`
    result = prove_axiom(axiom, timeout_ms=30_000)
    assert result.status in STATUSES
    if axiom.evidence == "smt":
        assert result.status == "proved", result.detail
        assert result.instances > 0 and result.model is None
    else:  # a random-evidence axiom may be beyond the encoding, never false
        assert result.status != "refuted", (result.detail, result.model)


@pytest.mark.parametrize("axiom", AXIOMS, ids=[a.name for a in AXIOMS])
def test_the_table_doubled_is_refuted(axiom):
    # lhs = 2·rhs is false wherever lhs = rhs ≠ 0: a proof of it would mean that the hypotheses
    # of the queries (sizes, ranges, divisors, laws of sums) contradict each other; a model that
    # interprets Σ or exp freely is confirmed in float64.
    doubled = wrong(f"{axiom.name}-doubled", axiom.lhs, f"(mul_scalar {axiom.rhs} 2)",
                    axiom.condition)
    result = prove_axiom(doubled, timeout_ms=30_000)
    assert result.status == "refuted", result.detail


REFUTED = [
    # Prism's bc-div-replicate1: swaps div's operands across a replicate.
    wrong("div-swap-replicate", "(div (rep ?a ?g) (part ?b ?d ?g))", "(part (div ?b ?a) ?d ?g)",
          size_one("?a", "?d")),
    # div does not commute.
    wrong("div-comm", "(div ?a ?b)", "(div ?b ?a)"),
    # Concatenating along another dim than the split one changes the shape (when |g| > 1).
    wrong("comb-part-other-dim", "(comb (part ?t ?d ?g) ?e ?g)", "?t", distinct("?d", "?e")),
    # Replicating along g then splitting along another axis h adds both axes.
    wrong("part-rep-drop", "(part (rep ?t ?g) ?d ?h)", "?t", distinct("?g", "?h")),
    # Two splits of one dim, by different axes, do not commute: the chunk order differs.
    wrong("part-part-same-dim", "(part (part ?t ?d ?g) ?d ?h)", "(part (part ?t ?d ?h) ?d ?g)",
          distinct("?g", "?h")),
    # The sum of |g| copies is |g| times the copy (mred, the mean, is the copy).
    wrong("red-of-copies", "(red (rep ?t ?g) ?g)", "?t"),
    # Concatenating the copies of a replicate tiles the tensor |g| times.
    wrong("comb-of-rep", "(comb (rep ?t ?g) ?d ?g)", "?t"),
    # Re-splitting a concatenation of |g| = |h|² chunks into |h|: chunks of another width.
    wrong("resplit-other-count", "(red (part (comb ?t ?d ?g) ?d ?h) ?h)", "(red ?t ?g)",
          axis_product("?g", "?h", "?h")),
]

# A concatenation of |g| = |f|·|k| chunks split into |f| parts, each into |k| chunks: chunk
# (p, c) is the concatenation's chunk p·|k| + c (the encoding reads that without z3's integer
# division, `smt._Encoder._digits`). Pairing two such splits matches the chunks of both; pairing
# a split in that order with one in the other order (k first) matches other chunks.
NESTED = "(red (red (mul (part (part (comb ?t ?d ?g) ?d ?f) ?d ?k) {u}) ?f) ?k)"


def test_a_split_of_a_split_reads_the_chunks_in_order():
    paired = wrong("nested-splits-paired",
                   NESTED.format(u="(part (part (comb ?u ?d ?g) ?d ?f) ?d ?k)"),
                   "(red (mul ?t ?u) ?g)", axis_product("?g", "?f", "?k"))
    result = prove_axiom(paired, timeout_ms=30_000)
    assert result.status == "proved", result.detail
    crossed = wrong("nested-splits-crossed",
                    NESTED.format(u="(part (part (comb ?u ?d ?g) ?d ?k) ?d ?f)"),
                    "(red (mul ?t ?u) ?g)", axis_product("?g", "?f", "?k"))
    result = prove_axiom(crossed, timeout_ms=30_000)
    assert result.status == "refuted" and "float64" in result.detail, result.detail


def test_an_axis_tied_to_others_has_their_product_in_every_instance():
    found = list(generic_instances(AXIOMS_BY_NAME["red-regroup"]))
    assert found
    for inst in found:
        g, f, k = (inst.subst[v].head for v in ("?g", "?f", "?k"))
        assert g not in (f, k)   # |g| = |f|·|k| with g one of them is no instance
        assert inst.analysis.axis_sizes == {g: var(f) * var(k)}
    # f and k distinct, and f = k (the axis f is reduced before k is split: |g| = |f|²)
    assert {inst.subst["?f"].head == inst.subst["?k"].head for inst in found} == {True, False}


@pytest.mark.parametrize("axiom", REFUTED, ids=lambda a: a.name)
def test_wrong_axioms_are_refuted(axiom):
    result = prove_axiom(axiom)
    assert result.status == "refuted", result.detail


def test_a_refutation_carries_the_counterexample():
    result = prove_axiom(REFUTED[0])
    assert result.model is not None and "T_a" in result.model and "T_b" in result.model
    assert "(div (rep T_a" in result.detail


def test_an_axiom_that_never_applies_is_refuted():
    # part over an axis the tensor already has is never well-shaped.
    result = prove_axiom(wrong("part-of-rep", "(part (rep ?t ?g) ?d ?g)", "?t"))
    assert result.status == "refuted" and "never apply" in result.detail


@pytest.mark.parametrize("axiom", [
    # rms without its 1/n.
    wrong("rms-without-mean", "(rms_norm ?x ?d 0.0)", "(div ?x (sqrt (sum (square ?x) ?d)))"),
    # The sum of the chunk means is not the sum.
    wrong("sum-of-chunk-means", "(sum (mred (part ?t ?d ?g) ?g) ?d)", "(sum ?t ?d)"),
    # pow does not commute.
    wrong("pow-comm", "(pow ?a ?b)", "(pow ?b ?a)"),
], ids=lambda a: a.name)
def test_wrong_axioms_about_sums_and_functions_are_refuted_in_float64(axiom):
    # z3 interprets Σ and pow freely, so its model is no counterexample; float64 gives one.
    result = prove_axiom(axiom)
    assert result.status == "refuted" and "float64" in result.detail, result.detail


def test_an_identity_true_for_exp_but_not_for_every_function_is_unknown():
    # e^(a+b) = e^a · e^b holds, but not for an uninterpreted function: not proved, not refuted.
    result = prove_axiom(wrong("exp-add", "(exp (add ?a ?b))", "(mul (exp ?a) (exp ?b))"))
    assert result.status == "unknown", result.detail


def test_conditions_select_the_instances():
    # size_one: the replicated operand has size 1 along the split dim in every instance.
    ax = next(a for a in AXIOMS if a.name == "div-rep-part")
    found = list(generic_instances(ax))
    assert found
    for inst in found:
        d = int(inst.subst["?d"].head)
        assert inst.leaves["T_a"].shape[d] == 1
    # every rank the IR allows (1 to 4), and every dim index of each rank
    assert MAX_RANK == 4
    assert {(inst.leaves["T_a"].rank, inst.subst["?d"].head) for inst in found} == {
        (r, str(d)) for r in range(1, MAX_RANK + 1) for d in range(r)}


def test_a_wrong_axiom_that_only_rank_4_shows_is_refuted():
    # "a batch dim is dim 0": true at rank 3 (the one batch dim is 0), false at rank 4, where
    # dim 1 is a batch dim too; the IR's tensors have rank 4
    result = prove_axiom(wrong("batch-is-dim-0", "(part ?t ?d ?g)", "(part ?t 0 ?g)",
                               batch_dim("?d", "?t")))
    assert result.status == "refuted", result.detail
    assert "(part T_t 1 ga)" in result.detail and "N3a" in result.detail   # at rank 4


def canonical(inst, classes, anonymous):
    """An instance up to renaming its symbols and permuting its anonymous positions: per
    position class, the pattern of 1s and equal or distinct symbols over the tensors."""
    def pattern(positions):
        names: dict[str, int] = {}
        return tuple(0 if d == 1 else names.setdefault(str(d), len(names) + 1)
                     for _, info in sorted(inst.leaves.items()) for j in positions
                     for d in (info.shape[j],))
    atoms = tuple(sorted((v, t.head) for v, t in inst.subst.items() if not t.head.startswith("T_")))
    axes = tuple(sorted((n, tuple(sorted(i.axes))) for n, i in inst.leaves.items()))
    named = tuple(pattern(p) for c, p in enumerate(classes) if c not in anonymous)
    return atoms, axes, named, tuple(sorted(pattern(classes[c]) for c in anonymous))


@pytest.mark.parametrize("name", ["add-assoc", "div-part-part", "mul-rep-part", "matmul-batch",
                                  "matmul-div-rows", "sum-part-other", "rms-norm-definition"])
def test_instances_in_one_order_of_anonymous_positions_miss_none(name, monkeypatch):
    # The oracle: every combination of size patterns (no symmetry). Up to a permutation of the
    # positions no dim index names (and not a matmul's last two, nor the last when the condition
    # reads it), the kept instances are exactly those, each once.
    ax = AXIOMS_BY_NAME[name]
    matrices = "matmul" in ax.lhs + ax.rhs
    reads_last = "last_size_one" in str(ax.condition)

    def keys(found):
        out = []
        for inst in found:
            rank = next(iter(inst.leaves.values())).rank
            classes = instances._position_classes(rank, matrices)
            named = {int(t.head) for t in inst.subst.values() if t.head.isdigit()}
            named |= {rank - 1} if reads_last else set()
            anonymous = [c for c, p in enumerate(classes) if len(p) == 1 and p[0] not in named]
            out.append((rank, canonical(inst, classes, anonymous)))
        return out
    kept = keys(generic_instances(ax))
    everything = instances._combinations
    monkeypatch.setattr(instances, "_combinations", lambda per_class, anonymous:
                        everything(per_class, ()))
    full = keys(generic_instances(ax))
    assert len(kept) == len(set(kept)) and set(kept) == set(full)
    if name == "add-assoc":   # three tensors, each position 1 or a size: 8 patterns a position
        assert len(full) == 8 + 8**2 + 8**3 + 8**4 and len(kept) == 8 + 36 + 120 + 330


def test_axes_of_variables_and_equal_or_distinct_axis_names():
    ax = next(a for a in AXIOMS if a.name == "comb-part")
    found = list(generic_instances(ax))
    assert {inst.subst["?g"].head for inst in found} == {"ga"}
    ax = next(a for a in AXIOMS if a.name == "red-rep-commute")
    found = list(generic_instances(ax))
    assert found and all(inst.subst["?g"] != inst.subst["?h"] for inst in found)
    assert all(inst.leaves["T_t"].axes == {inst.subst["?h"].head} for inst in found)


def test_what_is_not_encoded_is_not_stated():
    result = prove_axiom(wrong("two-roles", "(sum ?a ?a)", "?a"))
    assert result.status == "not_stated"
    result = prove_axiom(wrong("unknown-head", "(transpose ?a)", "?a"))
    assert result.status == "not_stated" and "transpose" in result.detail


def test_a_scalar_variable_stands_for_every_value():
    # x·c + x·c = x·(c + c) is not in the table; x·c = x·d is false for c ≠ d
    assert prove_axiom(wrong("scalar", "(add (mul_scalar ?a ?c) (mul_scalar ?a ?c))",
                             "(mul_scalar (add ?a ?a) ?c)")).status == "proved"
    assert prove_axiom(wrong("scalar-twice", "(mul_scalar ?a ?c)",
                             "(mul_scalar (mul_scalar ?a ?c) ?c)")).status == "refuted"
    # clamp's absent bound is a case of its own: min(x, hi) is not max(x, lo)
    assert prove_axiom(wrong("clamp-bounds", "(clamp ?a ?l ?h)",
                             "(clamp (clamp ?a ?l none) none ?h)")).status == "proved"


# -- the encoding is the definition: z3's terms, evaluated, agree with `evaluate` ----------------

def z3_value(e, tensors, functions):
    """The value of a closed z3 term of the encoding (ints, reals, SUMm over lambdas, tensor
    reads, uninterpreted functions given by `functions`)."""
    if z3.is_int_value(e):
        return e.as_long()
    if z3.is_rational_value(e):
        return float(e.as_fraction())
    kids = e.children()
    name, kind = e.decl().name(), e.decl().kind()
    if name.startswith("SUM"):
        *ranges, lam = kids
        total = 0.0
        for point in itertools.product(*[range(z3_value(n, tensors, functions)) for n in ranges]):
            body = z3.substitute_vars(lam.body(), *[z3.IntVal(i) for i in reversed(point)])
            total += z3_value(body, tensors, functions)
        return total
    if name in ROWS:        # MAX, MIN, LOGSUMEXP of a row: (its size, λ its values)
        n, lam = kids
        row = [z3_value(z3.substitute_vars(lam.body(), z3.IntVal(i)), tensors, functions)
               for i in range(z3_value(n, tensors, functions))]
        return ROWS[name](row)
    if name.startswith(SYMBOLIC_PREFIX):    # a generic instance's scalar, as evaluate reads it
        return SYMBOLIC_SCALAR
    if kind == z3.Z3_OP_ITE:
        branch = kids[1] if z3_value(kids[0], tensors, functions) else kids[2]
        return z3_value(branch, tensors, functions)
    values = [z3_value(k, tensors, functions) for k in kids]
    if name in tensors:
        return float(tensors[name][tuple(values)])
    if name in functions:
        return functions[name](*values)
    ops = {z3.Z3_OP_ADD: sum, z3.Z3_OP_MUL: math.prod, z3.Z3_OP_SUB: lambda v: v[0] - v[1],
           z3.Z3_OP_UMINUS: lambda v: -v[0], z3.Z3_OP_DIV: lambda v: v[0] / v[1],
           z3.Z3_OP_IDIV: lambda v: v[0] // v[1], z3.Z3_OP_MOD: lambda v: v[0] % v[1],
           z3.Z3_OP_TO_REAL: lambda v: float(v[0]), z3.Z3_OP_AND: all, z3.Z3_OP_OR: any,
           z3.Z3_OP_LE: lambda v: v[0] <= v[1], z3.Z3_OP_LT: lambda v: v[0] < v[1],
           z3.Z3_OP_GE: lambda v: v[0] >= v[1], z3.Z3_OP_GT: lambda v: v[0] > v[1]}
    return ops[kind](values)


FUNCTIONS = {name: (lambda od: lambda *xs: float(od.reference(
    [np.asarray(x, dtype=np.float64) for x in xs], {}, 0)))(OPS[name])
    for name in smt.UNINTERPRETED}
ROWS = {"MAX": max, "MIN": min,
        "LOGSUMEXP": lambda row: math.log(sum(math.exp(v) for v in row))}


def replace_leaves(term, leaves):
    if not term.args:
        return leaves.get(term.head, term)
    return Term(term.head, [replace_leaves(a, leaves) for a in term.args])


def random_leaves(inst, env, rng):
    """Each leaf as a plain term (a stacked leaf: splits of a plain tensor along dim 0), the
    plain arrays, and each leaf's table indexed by (positions by axis name, data indices)."""
    plain, arrays, tables = {}, {}, {}
    for name, info in inst.leaves.items():
        term = Term(name)
        for a in sorted(info.axes):
            term = Term("part", (term, Term("0"), Term(a)))
        shape = [eval_dim(d, env) for d in info.shape]
        shape[0] *= math.prod(env[a] for a in info.axes)
        plain[name], arrays[name] = term, rng.uniform(0.5, 2.0, shape)
        tables[name] = evaluate(term, {name: arrays[name]}, env).to(sorted(info.axes))
    return plain, arrays, tables


@pytest.mark.parametrize("axiom", AXIOMS, ids=[a.name for a in AXIOMS])
def test_the_encoding_computes_what_evaluate_computes(axiom):
    rng = np.random.default_rng(0)
    last_of_rank = {}  # the last instance of each rank: the most symbolic sizes
    for inst in generic_instances(axiom):
        last_of_rank[next(iter(inst.leaves.values())).rank] = inst
    for inst in last_of_rank.values():
        env = {n: 2 if n.startswith("g") else 4 for info in inst.infos.values()
               if isinstance(info, TensorInfo)
               for n in (*info.axes, *(v for d in info.shape for v in d.free_vars()))}
        # an axis the condition ties to others (|g| = |a|·|b|) has their product
        env |= {a: eval_dim(size, env) for a, size in inst.analysis.axis_sizes.items()}
        plain, arrays, tables = random_leaves(inst, env, rng)
        for side in (inst.lhs, inst.rhs):
            enc = smt._Encoder(inst)
            info = enc.info(side)
            pos = [z3.Int(f"pos_{a}") for a in sorted(info.axes)]
            idx = [z3.Int(f"i{j}") for j in range(info.rank)]
            value = enc.to_z3(enc.poly(side, dict(zip(sorted(info.axes), pos, strict=True)),
                                       tuple(idx)))
            sizes = [(z3.Int(n), z3.IntVal(v)) for n, v in env.items()]
            for num, den, q in enc.quotients:  # inner quotients first
                quotient = (z3_value(z3.substitute(num, *sizes), {}, {}) //
                            z3_value(z3.substitute(den, *sizes), {}, {}))
                sizes.append((q, z3.IntVal(quotient)))
            expected = evaluate(replace_leaves(side, plain), arrays, env).to(sorted(info.axes))
            for point in list(np.ndindex(expected.shape))[::max(1, expected.size // 8)]:
                at = [(c, z3.IntVal(i)) for c, i in zip([*pos, *idx], point, strict=True)]
                got = z3_value(z3.substitute(value, *sizes, *at), tables, FUNCTIONS)
                assert got == pytest.approx(float(expected[point]), rel=1e-9), (str(side), point)
