"""Random testing (float64 and Mirage's modular fingerprints) against its oracles.

Oracles: the workloads' traced graphs against their hand-fused kernels; Mirage's own corpus
(every graph there computes its workload); mutants that compute something else; exact integer
NumPy arithmetic mod p and mod q for the modular semantics; `spec.check` for assignments.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from prism.errors import InputError, VerifyError
from prism.frontend.builder import Block, Graph, Tensor
from prism.frontend.mirage import import_mirage
from prism.ir import FLOAT64, KernelGraph, check, interpret
from prism.verify import (
    MODULAR,
    RandomTestResult,
    float_inputs,
    modular_test,
    random_test,
    randomized,
    valid_assignments,
)
from prism.verify.modular import (
    EXP_P,
    INV_P,
    INV_Q,
    PQ,
    SQRT_P,
    SQRT_Q,
    P,
    Q,
    pack,
    residues,
)
from prism.workloads import WORKLOADS
from prism.workloads.known_best import KNOWN_BEST, known_best

# -- small graph builders --------------------------------------------------------------------------


def kernel(name: str, shapes: dict[str, tuple[int, ...]], body) -> KernelGraph:
    """A kernel graph with `shapes` as inputs (in order) and `body(g, *inputs)` as its output."""
    g = Graph(name)
    inputs = [g.input(n, s) for n, s in shapes.items()]
    g.output(body(g, *inputs))
    return g.build()


def fused(name: str, inputs: dict[str, tuple[int, ...]], grid, loop, body) -> KernelGraph:
    """One custom kernel: `body(tb, *kernel inputs)` loads tiles, computes, and stores."""
    g = Graph(name)
    handles = [g.input(n, s) for n, s in inputs.items()]
    tb = Block(grid=grid, forloop_range=loop)
    body(tb, *handles)
    (out,) = g.customized(tb)
    g.output(out)
    return g.build()


def rmsnorm_reference(n: int = 8, d: int = 256, cols: int = 256) -> KernelGraph:
    return kernel("rmsnorm", {"X": (n, d), "W": (d, cols)},
                  lambda g, X, W: g.matmul(g.rms_norm(X), W))


RMS_MUTANTS = ("none", "div_swapped", "imap_swapped", "rms_as_sum", "div_dropped")


def rmsnorm_kernel(mutant: str = "none", n: int = 8, d: int = 256, cols: int = 256,
                   grid=4, loop=4) -> KernelGraph:
    """The fused rms_norm(X) @ W of known_best, or one mutant of it (grid == loop keeps the
    imap-swapped W tile the same shape)."""
    def body(tb: Block, X: Tensor, W: Tensor) -> None:
        x = tb.input(X, imap=(-1,), fmap=1)
        w = tb.input(W, imap=(0,), fmap=1) if mutant == "imap_swapped" else \
            tb.input(W, imap=(1,), fmap=0)
        acc = tb.accum(tb.matmul(x, w), "nored")
        rms = tb.accum(x, "red_ld_sum" if mutant == "rms_as_sum" else "red_ld_rms")
        y = acc if mutant == "div_dropped" else \
            tb.div(rms, acc) if mutant == "div_swapped" else tb.div(acc, rms)
        tb.output(y, omap=(1,))
    return fused(f"rmsnorm.{mutant}", {"X": (n, d), "W": (d, cols)}, (grid,), loop, body)


GATED_MUTANTS = ("none", "exp_for_silu", "accum_red_ld_sum", "silu_dropped", "weights_swapped")
GATED_SHAPES = {"X": (8, 128), "W1": (128, 128), "W2": (128, 128)}


def gated_kernel(mutant: str = "none", activation: bool = True) -> KernelGraph:
    """silu(X @ W1) * (X @ W2) fused (without silu when `activation` is False), or a mutant."""
    def body(tb: Block, X: Tensor, W1: Tensor, W2: Tensor) -> None:
        x = tb.input(X, imap=(-1,), fmap=1)
        w1, w2 = tb.input(W1, imap=(1,), fmap=0), tb.input(W2, imap=(1,), fmap=0)
        if mutant == "weights_swapped":
            w1, w2 = w2, w1
        a = tb.accum(tb.matmul(x, w1), "red_ld_sum" if mutant == "accum_red_ld_sum" else "nored")
        b = tb.accum(tb.matmul(x, w2), "nored")
        if activation and mutant != "silu_dropped":
            a = tb.exp(a) if mutant == "exp_for_silu" else tb.silu(a)
        tb.output(tb.mul(a, b), omap=(1,))
    return fused(f"gated.{mutant}", GATED_SHAPES, (4,), 2, body)


def gated_reference(activation: bool = True) -> KernelGraph:
    def body(g: Graph, X: Tensor, W1: Tensor, W2: Tensor) -> Tensor:
        h = g.matmul(X, W1)
        return g.mul(g.silu(h) if activation else h, g.matmul(X, W2))
    return kernel("gated", GATED_SHAPES, body)


LLM_WORKLOADS = ("rmsnorm_matmul", "rmsnorm_mlp", "swiglu", "gated_mlp")


def small_shapes(name: str) -> dict[str, tuple[int, ...]]:
    """An LLM workload (X and square weights) at X[8, 256] and 256×256 weights."""
    return {p: (8, 256) if p == "X" else (256, 256) for p in WORKLOADS[name].shapes}


# -- float64: equal graphs are equal ---------------------------------------------------------------

@pytest.mark.parametrize("name", list(WORKLOADS))
def test_every_workload_equals_itself(name: str) -> None:
    g = WORKLOADS[name].graph
    result = random_test(g, g, trials=1)
    assert result == RandomTestResult(True, "random-float64", 1, ((),))


@pytest.mark.parametrize("name", list(KNOWN_BEST))
def test_known_best_kernel_equals_its_workload(name: str) -> None:
    w = WORKLOADS[name]
    result = random_test(w.graph, known_best(name, w.shapes), trials=1)
    assert result.equal, result.reason
    if name not in LLM_WORKLOADS:
        return
    small = w.with_shapes(**small_shapes(name))
    result = random_test(small.graph, known_best(name, small.shapes, grid=4, loop=8))
    assert result.equal and result.trials == 3, result.reason


def symbolic_rmsnorm(n: int = 8, d: int = 256, cols: int = 128) -> KernelGraph:
    def body(tb: Block, X: Tensor, W: Tensor) -> None:
        x, w = tb.input(X, imap=(-1,), fmap=1), tb.input(W, imap=(1,), fmap=0)
        tb.output(tb.div(tb.accum(tb.matmul(x, w)), tb.accum(x, "red_ld_rms")), omap=(1,))
    return fused("rmsnorm.symbolic", {"X": (n, d), "W": (d, cols)}, ("gx",), "F", body)


def test_symbolic_kernel_at_found_assignments() -> None:
    result = random_test(rmsnorm_reference(cols=128), symbolic_rmsnorm())
    assert result.equal, result.reason
    envs = [dict(a) for a in result.assignments]
    assert len(envs) == 4 and len(set(result.assignments)) == 4
    assert envs[0] == {"F": 1, "gx": 1}          # the smallest
    assert envs[1] == {"F": 256, "gx": 128}      # the largest: 1×1 tiles of W
    for env in envs:
        check(symbolic_rmsnorm(), env)


def test_explicit_assignments_are_the_ones_run() -> None:
    envs = [{"gx": 2, "F": 8}, {"gx": 32, "F": 2}]
    result = random_test(rmsnorm_reference(cols=128), symbolic_rmsnorm(), assignments=envs,
                         trials=2)
    assert result.equal
    assert result.assignments == ((("F", 8), ("gx", 2)), (("F", 2), ("gx", 32)))


def test_inputs_reaching_sqrt_are_drawn_from_its_domain() -> None:
    # Σ √x over rows of 64 and twice that: wrong wherever it is defined. On standard-normal
    # draws every row has a negative, so both sides are nan everywhere (numpy, float64, is the
    # oracle): a test that counted nan as agreement found them equal.
    target = kernel("sum_sqrt", {"X": (4, 64)}, lambda g, X: g.sum(g.sqrt(X), -1))
    twice = kernel("twice", {"X": (4, 64)}, lambda g, X: g.mul_scalar(g.sum(g.sqrt(X), -1), 2.0))
    with np.errstate(invalid="ignore"):
        assert all(np.isnan(np.sum(np.sqrt(float_inputs([(4, 64)], s)[0]), -1)).all()
                   for s in range(3))
    assert randomized.positive_inputs(target) == {0}
    result = random_test(target, twice)
    assert result.found_difference and not result.equal, result.reason
    cex = result.counterexample
    assert cex is not None and cex.positive == (0,)
    (x,) = float_inputs([(4, 64)], cex.seed, cex.positive)
    want = np.sum(np.sqrt(x), -1)[cex.index[0]]
    assert cex.target == pytest.approx(want, rel=1e-12)
    assert cex.candidate == pytest.approx(2 * want, rel=1e-12)


def test_domains_pass_through_ops_and_block_graphs() -> None:
    # √ of X + e^Y: X drawn > 0, not Y (e^y > 0 for every y); W / relu(V): V drawn > 0 (relu
    # makes a zero of every V ≤ 0); √(Z²): no constraint (z² ≥ 0)
    g = kernel("domains", {"X": (4, 8), "Y": (4, 8), "W": (4, 8), "V": (4, 8), "Z": (4, 8)},
               lambda g, X, Y, W, V, Z: g.add(g.add(g.sqrt(g.add(X, g.exp(Y))),
                                                    g.div(W, g.relu(V))),
                                              g.sqrt(g.square(Z))))
    assert randomized.positive_inputs(g) == {0, 3}
    # through a custom kernel: the block input of X reaches a √ after the loop
    def body(tb: Block, X: Tensor) -> None:
        tb.output(tb.sqrt(tb.accum(tb.input(X, imap=(0,), fmap=1))), omap=(0,))
    assert randomized.positive_inputs(fused("block", {"X": (8, 16)}, (2,), 2, body)) == {0}
    # rms_norm and red_ld_rms are defined for every real row
    assert randomized.positive_inputs(symbolic_rmsnorm()) == set()


def test_nan_on_both_sides_is_never_agreement() -> None:
    # √(−x²) is nan at every x ≠ 0: no draw is in its domain, and twice it cannot be told from
    # it; random testing says neither "equal" nor "differs"
    def sqrt_neg(g: Graph, X: Tensor) -> Tensor:
        return g.sqrt(g.mul_scalar(g.square(X), -1.0))
    target = kernel("nan", {"X": (4, 8)}, sqrt_neg)
    twice = kernel("nan2", {"X": (4, 8)}, lambda g, X: g.mul_scalar(sqrt_neg(g, X), 2.0))
    with np.errstate(invalid="ignore"):
        assert np.isnan(interpret(target, *float_inputs([(4, 8)], 0, (0,)))[0]).all()
    for other in (target, twice):
        result = random_test(target, other)
        assert not result.equal and not result.found_difference
        assert result.counterexample is not None and result.counterexample.both_nan
        assert "nan" in result.reason


# -- float64: Mirage's corpus ----------------------------------------------------------------------

def lora_body(g: Graph, X: Tensor, W: Tensor, A: Tensor, B: Tensor) -> Tensor:
    return g.add(g.matmul(X, W), g.matmul(g.matmul(X, A), B))


def attention_body(g: Graph, Q: Tensor, K: Tensor, V: Tensor) -> Tensor:
    E = g.exp(g.matmul(Q, K))
    return g.matmul(g.div(E, g.sum(E, -1)), V)


# Each corpus file: the reference's body (inputs in the corpus's kn_input_op order, which is
# gated_mlp's X, W1, W2) and the traced workload it is.
CORPUS = {
    "rmsnorm_bs1": (lambda g, X, W: g.matmul(g.rms_norm(X), W), "rmsnorm_matmul"),
    "gated_mlp": (lambda g, X, W1, W2: g.mul(g.silu(g.matmul(X, W1)), g.matmul(X, W2)),
                  "gated_mlp"),
    "single_gated_mlp": (lambda g, X, W1, W2: g.mul(g.silu(g.matmul(X, W1)), g.matmul(X, W2)),
                         "gated_mlp"),
    "lora": (lora_body, "lora"),
    "single_lora": (lora_body, "lora"),
    "gqa_bs1": (attention_body, "gqa"),
}


def corpus_reference(stem: str, graph: KernelGraph) -> KernelGraph:
    """The workload built with the builder, at the corpus graph's input shapes and order."""
    body, workload = CORPUS[stem]
    params = list(WORKLOADS[workload].shapes)
    shapes = {p: tuple(d.value for d in graph.shape(x)) for p, x in zip(params, graph.inputs,
                                                                         strict=True)}
    return kernel(stem, shapes, body)


@pytest.mark.parametrize("stem", list(CORPUS))
def test_corpus_graphs_equal_their_workload(corpus_dir: Path, stem: str) -> None:
    graphs = import_mirage(corpus_dir / f"{stem}.json")
    reference = corpus_reference(stem, graphs[0])
    workload = WORKLOADS[CORPUS[stem][1]]
    traced = workload.with_shapes(**{p: tuple(d.value for d in reference.shape(p))
                                     for p in workload.shapes}).graph
    assert random_test(traced, reference, trials=1).equal
    for i in sorted({0, 1, len(graphs) - 1} & set(range(len(graphs)))):
        result = random_test(reference, graphs[i], trials=1)
        assert result.equal, f"{stem}[{i}]: {result.reason}"


def test_corpus_gated_mlp_weight_order_matters(corpus_dir: Path) -> None:
    (g,) = import_mirage(corpus_dir / "single_gated_mlp.json")
    swapped = kernel("swapped", {"X": (8, 4096), "W1": (4096, 4096), "W2": (4096, 4096)},
                     lambda g, X, W1, W2: g.mul(g.silu(g.matmul(X, W2)), g.matmul(X, W1)))
    result = random_test(swapped, g, trials=1)
    assert not result.equal and result.counterexample is not None


# -- float64 and modular: mutants are caught -------------------------------------------------------

@pytest.mark.parametrize("mutant", RMS_MUTANTS)
def test_rmsnorm_mutants_are_caught(mutant: str) -> None:
    reference, candidate = rmsnorm_reference(), rmsnorm_kernel(mutant)
    for result in (random_test(reference, candidate), modular_test(reference, candidate)):
        assert result.equal == (mutant == "none"), (mutant, result.method)
        assert (result.counterexample is None) == result.equal


@pytest.mark.parametrize("mutant", GATED_MUTANTS)
def test_gated_mlp_mutants_are_caught(mutant: str) -> None:
    reference, candidate = gated_reference(), gated_kernel(mutant)
    for result in (random_test(reference, candidate), modular_test(reference, candidate)):
        assert result.equal == (mutant == "none"), (mutant, result.method)


def test_counterexample_reproduces() -> None:
    reference, candidate = rmsnorm_reference(), rmsnorm_kernel("div_swapped")
    result = random_test(reference, candidate, seed=7)
    cex = result.counterexample
    assert cex is not None and not result.equal
    assert cex.seed == 7 and cex.output == 0 and cex.assignment == ()
    assert cex.mismatches > 0 and cex.max_abs_diff is not None and cex.max_rel_err is not None
    assert cex.max_rel_err > 1e-9
    arrays = float_inputs([(8, 256), (256, 256)], cex.seed)
    (want,), (got,) = interpret(reference, *arrays), interpret(candidate, *arrays)
    assert want[cex.index] == cex.target and got[cex.index] == cex.candidate
    assert not np.isclose(cex.target, cex.candidate)
    doc = json.loads(json.dumps(result.to_json()))
    assert doc["equal"] is False and doc["method"] == "random-float64"
    assert doc["counterexample"]["index"] == list(cex.index)
    assert "output 0 differs" in doc["reason"]


def test_modular_counterexample_has_exact_values() -> None:
    result = modular_test(rmsnorm_reference(), rmsnorm_kernel("rms_as_sum"))
    cex = result.counterexample
    assert cex is not None and cex.max_abs_diff is None
    assert isinstance(cex.target, int) and cex.target != cex.candidate
    assert json.loads(json.dumps(result.to_json()))["method"] == "random-modular"


def test_output_of_another_shape_is_a_difference() -> None:
    rows = kernel("rows", {"X": (4, 4)}, lambda g, X: g.sum(X, -1))
    cols = kernel("cols", {"X": (4, 4)}, lambda g, X: g.sum(X, 0))
    result = random_test(rows, cols)
    assert not result.equal and result.counterexample is None
    assert "output 0 has shape (1, 4) in the candidate, (4, 1) in the target" in result.reason


# -- graphs that cannot be compared ----------------------------------------------------------------

def one_line_error(target: KernelGraph, candidate: KernelGraph, *words: str) -> None:
    with pytest.raises(VerifyError) as info:
        random_test(target, candidate)
    message = str(info.value)
    assert "\n" not in message
    for word in words:
        assert word in message, message


def test_graphs_that_cannot_be_compared() -> None:
    exp = kernel("exp", {"X": (4, 8)}, lambda g, X: g.exp(X))
    add = kernel("add", {"X": (4, 8), "Y": (4, 8)}, lambda g, X, Y: g.add(X, Y))
    wide = kernel("wide", {"X": (4, 16)}, lambda g, X: g.exp(X))
    g = Graph("two")
    X = g.input("X", (4, 8))
    g.output(g.exp(X))
    g.output(g.sqrt(X))
    two = g.build()
    one_line_error(exp, add, "target exp has 1 inputs", "candidate add has 2")
    one_line_error(exp, two, "1 outputs", "has 2")
    one_line_error(exp, wide, "input 0 (X)", "[4, 16]", "[4, 8]")
    one_line_error(symbolic_rmsnorm(), symbolic_rmsnorm(), "target", "free variables", "F, gx")
    with pytest.raises(VerifyError, match="at least one trial"):
        random_test(exp, exp, trials=0)


# -- the modular semantics -------------------------------------------------------------------------

def test_both_semantics_cover_the_op_table() -> None:
    assert FLOAT64.missing() == [] and MODULAR.missing() == []


def test_tables() -> None:
    assert len(set(EXP_P.tolist())) == Q                  # 3 has order exactly 83 mod 167
    for r, inv, sqrt in ((P, INV_P, SQRT_P), (Q, INV_Q, SQRT_Q)):
        b = np.arange(1, r)
        assert np.all(b * inv[b] % r == 1) and inv[0] == 0
        squares = b * b % r
        assert np.all(sqrt[squares] ** 2 % r == squares)  # a true root of every square
    x = np.arange(PQ)
    assert np.array_equal(pack(*residues(x)), x)


def small_ints(shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    return rng.integers(-40, 41, size=shape)


def assert_residues(got: np.ndarray, exact: np.ndarray) -> None:
    """`got` (packed) has the residues of the exact integers `exact`."""
    rp, rq = residues(got)
    assert np.array_equal(rp, exact % P) and np.array_equal(rq, exact % Q)


def test_ring_ops_match_integer_numpy() -> None:
    rng = np.random.default_rng(3)
    A, B, C = small_ints((6, 32), rng), small_ints((32, 16), rng), small_ints((6, 16), rng)
    g = kernel("ring", {"A": (6, 32), "B": (32, 16), "C": (6, 16)},
               lambda g, A, B, C: g.sum(g.add(g.mul(g.matmul(A, B), C), g.square(C)), 0))
    (got,) = interpret(g, A, B, C, semantics=MODULAR)
    exact = ((A @ B) * C + C * C).sum(axis=0, keepdims=True)
    assert_residues(got, exact)
    (real,) = interpret(g, A, B, C)                        # float64 is exact on these integers
    assert np.array_equal(real, exact)


def test_block_matmul_with_summed_blocks_matches_integer_numpy() -> None:
    # Grid (x, y): x splits A's rows, y splits K on both operands and the output sums the y
    # blocks; the loop walks K within each y part.
    def body(tb: Block, A: Tensor, B: Tensor) -> None:
        a, b = tb.input(A, imap=(0, 1), fmap=1), tb.input(B, imap=(-1, 0), fmap=0)
        tb.output(tb.accum(tb.matmul(a, b)), omap=(0, -1))
    g = fused("split_k", {"A": (8, 64), "B": (64, 16)}, (2, 4), 4, body)
    rng = np.random.default_rng(4)
    A, B = small_ints((8, 64), rng), small_ints((64, 16), rng)
    (got,) = interpret(g, A, B, semantics=MODULAR)
    assert_residues(got, A @ B)


def test_division_mean_and_scalars_are_field_operations() -> None:
    rng = np.random.default_rng(5)
    A, B = rng.integers(0, PQ, (4, 8)), rng.integers(0, PQ, (4, 8))
    g = kernel("field", {"A": (4, 8), "B": (4, 8)},
               lambda g, A, B: g.add(g.div(A, B), g.mean(g.mul_scalar(A, 0.5), -1)))
    (got,) = interpret(g, A, B, semantics=MODULAR)
    for r in (P, Q):
        inv = np.array([pow(int(b), r - 2, r) for b in (B % r).flat]).reshape(B.shape)
        half_mean = A.sum(-1, keepdims=True) * pow(2, -1, r) * pow(8, -1, r)
        assert np.array_equal(got % r, (A * inv + half_mean) % r)


def test_exp_turns_sums_into_products() -> None:
    shapes = {"A": (4, 8), "B": (4, 8)}
    of_sum = kernel("exp_sum", shapes, lambda g, A, B: g.exp(g.add(A, B)))
    product = kernel("exp_product", shapes, lambda g, A, B: g.mul(g.exp(A), g.exp(B)))
    summed = kernel("exp_plus", shapes, lambda g, A, B: g.add(g.exp(A), g.exp(B)))
    assert modular_test(of_sum, product, trials=5).equal
    assert random_test(of_sum, product).equal
    assert not modular_test(of_sum, summed).equal


def test_modular_inputs_are_integers() -> None:
    g = kernel("exp", {"X": (2, 2)}, lambda g, X: g.exp(X))
    (got,) = interpret(g, np.array([[-1.0, 0.0], [1.0, 2.0 * Q]]), semantics=MODULAR)
    assert got.tolist() == pack(EXP_P[[[Q - 1, 0], [1, 0]]], 0).tolist()
    with pytest.raises(InputError, match="non-integer values"):
        interpret(g, np.full((2, 2), 0.5), semantics=MODULAR)


def test_pow_has_no_fingerprint() -> None:
    g = kernel("pow", {"A": (2, 2), "B": (2, 2)}, lambda g, A, B: g.pow(A, B))
    with pytest.raises(VerifyError, match="pow has no modular fingerprint"):
        modular_test(g, g)


def test_lax_programs_modular() -> None:
    # gated MLP without silu is LAX: the fused kernel agrees, a mutant does not.
    assert modular_test(gated_reference(False), gated_kernel(activation=False)).equal
    mutant = gated_kernel("accum_red_ld_sum", activation=False)
    assert not modular_test(gated_reference(False), mutant).equal


def with_block_op_kind(graph: KernelGraph, old: str, new: str) -> KernelGraph:
    """`graph` with the first block op of kind `old` turned into `new` (same shapes)."""
    ops = list(graph.ops)
    for i, op in enumerate(ops):
        if op.block is not None and any(b.kind == old for b in op.block.ops):
            j = next(j for j, b in enumerate(op.block.ops) if b.kind == old)
            bops = list(op.block.ops)
            bops[j] = replace(bops[j], kind=new)
            ops[i] = replace(op, block=replace(op.block, ops=tuple(bops)))
            mutant = replace(graph, ops=tuple(ops))
            check(mutant)
            return mutant
    raise AssertionError(f"no block op {old}")


@pytest.mark.parametrize("stem", ["lora", "single_lora"])
def test_corpus_lora_modular(corpus_dir: Path, stem: str) -> None:
    graphs = import_mirage(corpus_dir / f"{stem}.json")
    reference = corpus_reference(stem, graphs[0])
    for g in graphs:
        assert modular_test(reference, g).equal, g.name
    mutant = with_block_op_kind(graphs[0], "add", "mul")
    result = modular_test(reference, mutant)
    assert not result.equal and result.counterexample is not None


@pytest.mark.parametrize("name", ["rmsnorm_matmul", "rmsnorm_mlp"])
def test_modular_agrees_on_fused_rms_norm(name: str) -> None:
    # Beyond LAX, but inverse (b^(r-2)) and sqrt (b^((r+1)/4)) are multiplicative maps, so the
    # fused kernels' rearrangements — (x/r) @ w = (x @ w)/r, 1/r · 1/r = 1/(r·r) — hold exactly.
    w = WORKLOADS[name].with_shapes(**small_shapes(name))
    assert modular_test(w.graph, known_best(name, w.shapes, grid=4, loop=8)).equal


# -- valid_assignments -----------------------------------------------------------------------------

def test_assignments_of_grid_and_loop() -> None:
    g = symbolic_rmsnorm()
    envs = valid_assignments(g, limit=6, seed=1)
    assert len(envs) == 6 and envs == valid_assignments(g, limit=6, seed=1)
    for env in envs:
        assert set(env) == {"gx", "F"}
        check(g, env)
    assert valid_assignments(rmsnorm_reference()) == [{}]


def symbolic_maps() -> KernelGraph:
    """exp(X) through a kernel whose imap and omap are 0/1 map variables."""
    def body(tb: Block, X: Tensor) -> None:
        tb.output(tb.accum(tb.exp(tb.input(X, imap="symbolic", fmap=-1))), omap="symbolic")
    return fused("exp.symbolic", {"X": (8, 64)}, ("g",), 1, body)


def test_assignments_of_map_bits() -> None:
    g = symbolic_maps()
    bits = {n for n in g.free_vars() if n != "g"}
    assert len(bits) == 4
    envs = valid_assignments(g, limit=8, seed=2)
    assert len(envs) == 8 and envs == valid_assignments(g, limit=8, seed=2)
    for env in envs:
        assert {env[b] for b in bits} <= {0, 1}
        check(g, env)
    assert {tuple(env[b] for b in sorted(bits)) for env in envs} != {(0, 0, 0, 0)}


def test_sampled_assignments_are_deterministic(monkeypatch: pytest.MonkeyPatch) -> None:
    # The package attribute `random_test` is the function; the module is in sys.modules.
    monkeypatch.setattr(randomized, "ENUMERATION_BUDGET", 16)
    g = symbolic_maps()
    for seed in (0, 1):
        envs = valid_assignments(g, limit=4, seed=seed)
        assert envs and envs == valid_assignments(g, limit=4, seed=seed)
        for env in envs:
            check(g, env)


def test_a_difference_outside_the_domain_is_still_found() -> None:
    # (A·B)^C and A^C·B^C agree for positive bases, the domain draws; on standard-normal ones
    # the first is defined where A·B > 0 and the second is nan where A < 0 (numpy's oracle)
    shapes = {"A": (4, 8), "B": (4, 8), "C": (4, 8)}
    target = kernel("pow", shapes, lambda g, A, B, C: g.pow(g.mul(A, B), C))
    split = kernel("pow2", shapes, lambda g, A, B, C: g.mul(g.pow(A, C), g.pow(B, C)))
    assert randomized.positive_inputs(target) | randomized.positive_inputs(split) == {0, 1}
    result = random_test(target, split)
    assert result.found_difference, result.reason
    cex = result.counterexample
    assert cex is not None and cex.positive == () and cex.seed == result.trials
    a, b, c = float_inputs(list(shapes.values()), cex.seed)
    with np.errstate(invalid="ignore"):
        want, got = np.power(a * b, c)[cex.index], (np.power(a, c) * np.power(b, c))[cex.index]
    assert np.isnan(got) != np.isnan(want)
    assert np.isnan(cex.candidate) == np.isnan(got)
