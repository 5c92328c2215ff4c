"""Term translation, checked against the reference interpreter: the value of each output term
(numpy semantics of tensor terms) equals the interpreted graph output, for every workload, every
hand-fused kernel and graphs of every Mirage corpus file."""

from dataclasses import replace

import numpy as np
import pytest

from prism.errors import SpecError
from prism.expr.tensor_terms import TensorAnalysis, TensorInfo, evaluate
from prism.expr.terms import parse
from prism.frontend.builder import Block, Graph
from prism.frontend.mirage import import_mirage
from prism.ir.dims import const
from prism.ir.dims import evaluate as eval_dim
from prism.ir.graph import Map
from prism.ir.interpret import interpret
from prism.ir.spec import problems
from prism.verify.translate import tensor_leaf, translate
from prism.workloads import WORKLOADS
from prism.workloads.known_best import KNOWN_BEST, known_best


def assert_terms_match_interpreter(graph):
    tr = translate(graph)
    rng = np.random.default_rng(1)
    arrays = [0.3 * rng.standard_normal([d.value for d in graph.shape(t)]) for t in graph.inputs]
    sizes = {axis: eval_dim(size) for axis, size in tr.sizes.items()}
    inputs = dict(zip(tr.inputs, arrays, strict=True))
    for term, want in zip(tr.terms, interpret(graph, *arrays), strict=True):
        got = evaluate(term, inputs, sizes)
        assert got.axes == ()
        np.testing.assert_allclose(got.array, want, rtol=1e-12, atol=1e-12 * np.abs(want).max())


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_workload_terms(name):
    assert_terms_match_interpreter(WORKLOADS[name].graph)


@pytest.mark.parametrize("name", list(KNOWN_BEST))
def test_fused_kernel_terms(name):
    assert_terms_match_interpreter(known_best(name, WORKLOADS[name].shapes))


def test_mirage_corpus_terms(corpus_dir):
    for path in sorted(corpus_dir.glob("*.json")):
        graphs = import_mirage(path)
        for graph in graphs[:: max(1, len(graphs) // 3)]:
            assert_terms_match_interpreter(graph)


def test_fused_rmsnorm_term_and_its_shape():
    g = known_best("rmsnorm_matmul", {"X": (8, 256), "W": (256, 128)})  # grid 2, loop 4
    assert translate(g).terms[0] == parse(
        "(comb (div (red (matmul (part (rep X gx) 1 F) (part (part W 1 gx) 0 F)) F)"
        " (sqrt (mean (mred (square (part (rep X gx) 1 F)) F) 1))) 1 gx)")
    tr = translate(g, concrete_sizes=True)
    (term,) = tr.terms
    # concrete sizes: each axis is named by its size
    assert term == parse(
        "(comb (div (red (matmul (part (rep X n2) 1 n4) (part (part W 1 n2) 0 n4)) n4)"
        " (sqrt (mean (mred (square (part (rep X n2) 1 n4)) n4) 1))) 1 n2)")
    assert {k: v.value for k, v in tr.sizes.items()} == {"n2": 2, "n4": 4}
    analysis = TensorAnalysis({"X": (8, 256), "W": (256, 128)}, tr.sizes)

    def info(t):
        return analysis.make(t.head, tuple(info(a) for a in t.args))
    got = info(term)
    assert isinstance(got, TensorInfo) and got.axes == frozenset() and got.shape == (8, 128)


def test_symbolic_sizes_keep_kernel_local_axis_names():
    g = Graph()
    X, W = g.input("X", (8, 256)), g.input("W", (256, 128))
    tb = Block(grid=("g0",), forloop_range="F")
    x, w = tb.input(X, imap=(-1,), fmap=1), tb.input(W, imap=(1,), fmap=0)
    tb.output(tb.accum(tb.matmul(x, w)), omap=(1,))
    (o,) = g.customized(tb)
    g.output(o)
    (term,) = translate(g.build()).terms
    assert term == parse("(comb (red (matmul (part (rep X gx) 1 F) (part (part W 1 gx) 0 F)) F)"
                         " 1 gx)")


def test_reserved_names_are_kept_apart_from_atoms():
    assert tensor_leaf("X") == "X" and tensor_leaf("gx") == "gx_" and tensor_leaf("F1") == "F1_"
    assert tensor_leaf("0") == "0_" and tensor_leaf("k2") == "k2_" and tensor_leaf("n16") == "n16_"
    assert tensor_leaf("n16_1") == "n16_1_" and tensor_leaf("nx") == "nx"


def test_a_map_row_with_two_ones_is_refused():
    # W's tile split by grid dim 0 along both of W's dims: no program (DESIGN.md §1: a parallel
    # dim splits at most one data dim of a tensor), never read as its first 1
    g = known_best("rmsnorm_matmul", {"X": (8, 256), "W": (256, 128)})
    (custom,) = g.custom_ops
    two_ones = Map(((const(1), const(1)),))

    def edit(op):
        if op.outputs != ("W_tile",):
            return op
        return replace(op, attrs=tuple((k, two_ones if k == "imap" else v) for k, v in op.attrs))
    block = replace(custom.block, ops=tuple(edit(op) for op in custom.block.ops))
    bad = replace(g, ops=tuple(replace(op, block=block) if op is custom else op for op in g.ops))
    assert any("splits 2 data dims" in p for p in problems(bad))   # the oracle: spec
    with pytest.raises(SpecError, match=r"W_tile imap: parallel dim 0 splits data dims 0, 1"):
        translate(bad)
