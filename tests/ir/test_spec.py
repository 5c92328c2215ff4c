"""spec: each well-formedness rule is violated once, on purpose, and must be reported by name.
The oracle is the rule itself: a valid graph has no problems, each mutant exactly the one made."""

from dataclasses import replace

import pytest

from prism.errors import ShapeError, SpecError
from prism.frontend.builder import Block, Graph
from prism.ir.dims import const
from prism.ir.graph import Map, Op
from prism.ir.spec import check, problems
from prism.workloads.known_best import known_best

GOOD = known_best("rmsnorm_matmul", {"X": (8, 256), "W": (256, 128)}, grid=2, loop=4)
CUSTOM = 2  # index of the custom op in GOOD.ops


def with_block_ops(graph, edit):
    op = graph.ops[CUSTOM]
    block = replace(op.block, ops=tuple(edit(list(op.block.ops))))
    ops = list(graph.ops)
    ops[CUSTOM] = replace(op, block=block)
    return replace(graph, ops=tuple(ops))


def block_op(graph, kind):
    return next(i for i, o in enumerate(graph.ops[CUSTOM].block.ops) if o.kind == kind)


def test_valid_graph_has_no_problems():
    assert problems(GOOD) == []
    check(GOOD)


def test_recorded_shape_must_match_the_shape_rule():
    bad = replace(GOOD, tensors=tuple((n, (const(8), const(64)) if n == "custom" else s)
                                      for n, s in GOOD.tensors))
    assert any("shape" in p and "custom" in p for p in problems(bad))


def test_topological_order():
    ops = list(GOOD.ops)
    ops[CUSTOM], ops[-1] = ops[-1], ops[CUSTOM]
    assert any("before it is produced" in p for p in problems(replace(GOOD, ops=tuple(ops))))


def test_accumulator_on_a_post_loop_tensor():
    def edit(ops):
        i = block_op(GOOD, "div")
        div = ops[i]
        ops.insert(i + 1, Op.make("nored", [div.outputs[0]], ["again"]))
        return ops
    bad = with_block_ops(GOOD, edit)
    block = bad.ops[CUSTOM].block
    bad_block = replace(block, tensors=(*block.tensors, ("again", block.shapes["div"])))
    ops = list(bad.ops)
    ops[CUSTOM] = replace(ops[CUSTOM], block=bad_block)
    assert any("already after the loop" in p for p in problems(replace(bad, ops=tuple(ops))))


def test_op_after_the_loop_reading_a_walked_tile():
    # GOOD's loop walks X and W: after the loop, their product differs from iteration to
    # iteration, so an op there may not read it (an epilogue reads only tiles the loop does not
    # walk: a bias, a residual)
    def edit(ops):
        i = block_op(GOOD, "div")
        ops[i] = replace(ops[i], inputs=("matmul", "red_ld_rms"))
        return ops
    found = problems(with_block_ops(GOOD, edit))
    assert any("reads matmul after the loop, but the loop walks" in p for p in found), found


def test_output_inside_the_loop_body():
    def edit(ops):
        i = block_op(GOOD, "output")
        ops[i] = replace(ops[i], inputs=("matmul",))
        return ops
    assert any("inside the loop body" in p for p in problems(with_block_ops(GOOD, edit)))


def test_map_row_splitting_two_data_dims():
    two = Map(((const(1), const(1)),))
    def edit(ops):
        i = block_op(GOOD, "input")
        ops[i] = Op.make("input", (), ops[i].outputs, {"imap": two, "fmap": ops[i].attr["fmap"]})
        return ops
    assert any("splits 2 data dims" in p for p in problems(with_block_ops(GOOD, edit)))


def test_tile_shape_must_follow_the_maps():
    def edit(ops):
        i = block_op(GOOD, "input")
        ops[i] = Op.make("input", (), ops[i].outputs,
                         {"imap": Map.concrete([0], 2), "fmap": ops[i].attr["fmap"]})
        return ops
    assert any("tile shape" in p for p in problems(with_block_ops(GOOD, edit)))


def test_block_inputs_match_kernel_inputs():
    ops = list(GOOD.ops)
    ops[CUSTOM] = replace(ops[CUSTOM], inputs=("X",))
    assert any("block inputs for 1 kernel inputs" in p for p in problems(replace(GOOD,
                                                                                  ops=tuple(ops))))


def test_divisibility_under_an_assignment():
    g = Graph()
    X = g.input("X", (8, 100))
    tb = Block(grid=("gx",), forloop_range=1)
    tb.output(tb.accum(tb.input(X, imap=(1,))), omap=(1,))
    (o,) = g.customized(tb)
    g.output(o)
    sym = g.build()  # symbolic: fine without an assignment
    assert problems(sym, {"gx": 4}) == []
    with pytest.raises(SpecError, match="not an integer"):
        check(sym, {"gx": 3})
    with pytest.raises(SpecError, match="unbound"):
        check(sym, {})


def test_no_output():
    g = Graph()
    g.input("X", (4, 4))
    with pytest.raises(SpecError, match="no output"):
        g.build()


@pytest.mark.parametrize(("shape", "match"), [((1, 2, 3, 4, 5), "rank 5"), ((4, 0), "dimension 0"),
                                               ((), "rank 0")])
def test_bad_input_shapes(shape, match):
    with pytest.raises(ShapeError, match=match):
        Graph().input("X", shape)


def test_builder_rejects_shape_mismatch():
    g = Graph()
    a, b = g.input("A", (4, 8)), g.input("B", (4, 8))
    with pytest.raises(ShapeError, match="do not fit"):
        g.matmul(a, b)
    with pytest.raises(ShapeError, match="do not broadcast"):
        g.add(a, g.input("C", (4, 3)))
