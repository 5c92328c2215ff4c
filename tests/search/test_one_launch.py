"""A split program in one launch (`prism.search.split.one_launch`): kernel 2 runs as kernel 1's
tail, in the last block of each group to finish.

Oracles: the verifier's proof, `prism.ir.spec`'s rules (and their refusals of tails that would
read what other groups write), and the cost model's own terms (its launch, sync and L2 rules,
and its lower bound). The Triton kernel itself is run in tests/instantiate/test_tail.py."""

from dataclasses import replace

import pytest

from prism.cost import get_device, lower_bound_us, modeled, roofline_us
from prism.ir.graph import Map, Op
from prism.ir.spec import TAIL, problems, substitute_graph
from prism.search.audit import best_assignment, descended
from prism.search.driver import SPLIT_WHAT, split_moves
from prism.search.split import one_launch, split_loop
from prism.verify.equiv import verify
from prism.workloads import WORKLOADS
from tests.search.test_split_loop import SMALL, _one_kernel

H100 = get_device("h100")
# issue 17's targets, modeled H100: attention and qknorm_attention 1.8x their roofline, gqa 2.0x
TARGET = {"attention": 1.8, "qknorm_attention": 1.8, "gqa": 2.0}


def _pair():
    two, why = split_loop(_one_kernel(SMALL))
    assert two is not None, why
    one, why = one_launch(two)
    assert one is not None, why
    return two, one


def _with_op(graph, index, op):
    return replace(graph, ops=tuple(op if i == index else o for i, o in enumerate(graph.ops)))


def test_the_one_launch_form_shares_kernel_1s_grid_and_is_a_move_of_its_own():
    two, one = _pair()
    (k1, k2), (m1, m2) = two.custom_ops, one.custom_ops
    assert m2.attr["launch"] == TAIL and "launch" not in m1.attr
    assert m2.block.grid == m1.block.grid[:-1] == k1.block.grid[:-1] != k2.block.grid
    assert sorted(two.free_vars()) == ["F", "b", "b_2", "r", "r_2", "s"]
    assert sorted(one.free_vars()) == ["F", "b", "r", "s"]
    assert problems(one) == []
    assert [m for m, _ in split_moves(_one_kernel(SMALL))] == ["split_loop", "split_loop_tail"]
    assert "one launch" in SPLIT_WHAT["split_loop_tail"]
    assert one_launch(one) == (None, "already one launch")
    assert one_launch(_one_kernel(SMALL))[0] is None


def test_spec_refuses_a_tail_that_could_read_what_another_group_writes():
    two, one = _pair()
    i = next(k for k, o in enumerate(two.ops) if o is two.custom_ops[1])
    # kernel 2 with sizes of its own: block g would not be group g
    own = _with_op(two, i, Op.make("customized", two.ops[i].inputs, two.ops[i].outputs,
                                   {"launch": TAIL}, block=two.ops[i].block))
    assert any("grid must be that kernel's without its last dim" in p for p in problems(own))
    # a tail that reads the parts under other rows (its grid's x reads the query dim)
    tail = one.ops[i]
    bop = tail.block.input_ops[0]
    swapped = Map(tuple(reversed(bop.attr["imap"].rows)))
    ops = tuple(Op.make("input", (), bop.outputs, {**bop.attr, "imap": swapped})
                if o is bop else o for o in tail.block.ops)
    moved = _with_op(one, i, replace(tail, block=replace(tail.block, ops=ops)))
    assert any("block g of a tail must read what blocks (g, ·) wrote" in p
               for p in problems(moved))
    # a tail with no kernel before it to share a launch with, and a launch spelled otherwise
    head = one.ops[i - 1]
    first = _with_op(one, i - 1, replace(head, attrs=(("launch", TAIL),)))
    assert any("runs as a tail" in p and "not a custom kernel launched on its own" in p
               for p in problems(first))
    other = _with_op(one, i, replace(tail, attrs=(("launch", "later"),)))
    assert any("the one launch attribute is launch='tail'" in p for p in problems(other))


def test_the_model_charges_a_tail_a_sync_not_a_launch_and_its_parts_through_l2():
    two, one = _pair()
    env = {"F": 2, "b": 2, "r": 2, "s": 4}
    two_cost = modeled(substitute_graph(two, env | {"b_2": 2, "r_2": 2}), H100)
    one_cost = modeled(substitute_graph(one, env), H100)
    assert two_cost.launches == 2 and one_cost.launches == 1
    head, tail = one_cost.kernels
    assert tail.kind == "tail" and tail.blocks == 4
    assert tail.latency_us == pytest.approx(max(tail.memory_us, tail.compute_us) + H100.sync_us)
    # the tail reads the parts back from L2; only the output goes to HBM
    out = 2 * 4 * 8 * H100.dtype_bytes
    assert tail.hbm_bytes == out and tail.l2_bytes == two_cost.kernels[1].hbm_bytes - out
    assert head.flops == two_cost.kernels[0].flops
    assert one_cost.latency_us < two_cost.latency_us
    assert lower_bound_us(substitute_graph(one, env), H100) <= one_cost.latency_us
    assert roofline_us(one, H100) <= one_cost.latency_us


@pytest.mark.parametrize("name,qk_norm", [("attention", False), ("qknorm_attention", True),
                                          ("gqa", False)])
def test_split_key_attention_in_one_launch_is_proved_and_models_within_the_target(name,
                                                                                  qk_norm):
    w = WORKLOADS[name]
    two, _ = split_loop(_one_kernel(w.shapes, qk_norm))
    one, why = one_launch(two)
    assert one is not None, why
    verdict = verify(w.graph, one)
    assert verdict.verdict == "equivalent" and verdict.sizes == "symbolic"
    us, env = descended(one, H100, best_assignment(one, H100))
    assert modeled(substitute_graph(one, env), H100).latency_us == pytest.approx(us)
    assert us / roofline_us(w.graph, H100) <= TARGET[name]
