"""Two claims the old bundled structural rule made were false, so those checks are gone: here are
the programs that showed it. Each target's only fused programs were pruned as redundant, so the
search found nothing; now it finds them. The oracle is the float64 interpreter against numpy."""

from __future__ import annotations

import numpy as np

from prism.frontend.builder import Graph
from prism.ir.interpret import interpret
from prism.ir.spec import substitute_graph
from prism.search import SearchConfig, search


def found(target, block_ops, accumulators):
    result = search(target, SearchConfig(block_ops=block_ops, accumulators=accumulators,
                                         max_block_ops=4, grid_dims=(1,), budget_s=120))
    assert result.complete
    return result.equivalent


def test_add_x_x_is_kept_when_no_op_can_write_2x():
    """`add(x, x)` is 2·x, but with no mul_scalar and no constants in the vocabulary no
    simpler program computes it: pruning it as 'not better' lost every program."""
    g = Graph("double")
    X = g.input("X", (8, 64))
    g.output(g.add(X, X))
    target = g.build()
    programs = found(target, ("add",), ("nored",))
    assert programs
    assert_computes(programs[0], lambda x: 2 * x)


def test_one_tensor_under_two_accumulators_is_kept():
    """nored(x) and red_ld_rms(x) both reduce x, yet no one accumulator and a post-loop op
    compute both: pruning the 'double reduction' lost RMSNorm's fused kernel."""
    g = Graph("norm")
    X = g.input("X", (8, 64))
    g.output(g.rms_norm(X))
    target = g.build()
    programs = found(target, ("div",), ("nored", "red_ld_rms"))
    assert programs
    kinds = {op.kind for op in programs[0].graph.custom_ops[0].block.ops}
    assert {"nored", "red_ld_rms", "div"} <= kinds
    assert_computes(programs[0], lambda x: x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True)))


def assert_computes(candidate, reference):
    """The candidate at the assignment the search modeled it at, in float64, against numpy."""
    assert candidate.assignment is not None
    x = np.random.default_rng(0).standard_normal((8, 64))
    (got,) = interpret(substitute_graph(candidate.graph, candidate.assignment), x)
    np.testing.assert_allclose(got, reference(x), rtol=1e-9)
