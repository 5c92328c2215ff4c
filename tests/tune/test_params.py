"""Parameter instantiation: Prism's candidate rules, and every assignment it proposes is a
well-formed, in-limits kernel that computes the program (float64 interpreter against torch)."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from prism.cost import get_device
from prism.instantiate.params import Variable, assignments, spaced, variables
from prism.ir.dims import evaluate
from prism.ir.interpret import interpret
from prism.ir.spec import problems
from prism.search.audit import within_limits
from prism.search.checkpoint import rebind

H100 = get_device("h100")


@pytest.mark.parametrize(("role", "n", "want"), [
    ("loop", 1024, [4, 8, 16, 32, 64]),          # n/256 doubled while ≤ n/16
    ("grid", 1024, [2, 4, 8, 16, 32, 64, 128]),  # n/512 doubled while ≤ n/8
    ("grid", 4096, [8, 16, 32, 64, 128, 256, 512]),
    ("loop", 64, [1, 2, 4, 8, 16, 32, 64]),      # n ≤ 64: the powers of two dividing n
    ("grid", 48, [1, 2, 4, 8, 16]),
    ("loop", 96, [1, 2, 4]),                     # max(1, 96/256) doubled while ≤ 96/16 = 6
    ("grid", 80, [1, 2, 4, 8]),                  # max(1, 80/512) doubled while ≤ 10; 8 | 80
    ("grid", 0, [1]),                            # divides no dim
])
def test_candidate_values_follow_prisms_rules(role, n, want):
    got = Variable("v", role, n).candidates()
    assert got == want
    assert all(n % v == 0 for v in got) or n == 0


def test_spaced_keeps_the_ends_and_the_limit():
    items = [{"k": i} for i in range(100)]
    got = spaced(items, 20)
    assert len(got) == 20 and got[0] == items[0] and got[-1] == items[-1]
    assert spaced(items[:5], 20) == items[:5]


@pytest.mark.parametrize("name", ["rmsnorm_matmul", "swiglu", "attention"])
def test_every_assignment_is_feasible_and_computes_the_program(cases, name):
    w = cases.small(name)
    arrays = w.random_inputs(1)
    want = w.reference(*arrays)[0]
    device = H100
    tried = 0
    for cand in cases.searched(name).equivalent[:6]:
        vs = variables(cand.graph)
        assert [v.role for v in vs] == sorted((v.role for v in vs), key=lambda r: r != "grid")
        for env in assignments(cand.graph, device):
            assert set(env) == cand.graph.free_vars()
            assert problems(cand.graph, env) == []
            assert within_limits(cand.graph, env, device)
            for _, bg in cand.graph.iter_blocks():
                assert math.prod(evaluate(g, env) for g in bg.grid) <= device.max_blocks
            got = interpret(cand.graph, *arrays, assignment=env)[0]
            np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)
            tried += 1
    assert tried >= 3


def test_assignments_follow_the_shapes(cases):
    """One symbolic candidate, two shapes: the candidates are divisors of each shape's dims."""
    w = cases.small("rmsnorm_matmul")
    cand = next(c for c in cases.searched("rmsnorm_matmul").equivalent
                if c.graph.free_vars() and len(c.graph.custom_ops) == 1)
    wide = w.with_shapes(X=(8, 256), W=(256, 512))
    member = rebind(cand.graph, wide.graph)
    small_envs, wide_envs = assignments(cand.graph, limit=1000), assignments(member, limit=1000)
    assert small_envs and wide_envs and small_envs != wide_envs
    for env in wide_envs:
        assert problems(member, env) == []
        got = interpret(member, *wide.random_inputs(0), assignment=env)[0]
        np.testing.assert_allclose(got, wide.reference(*wide.random_inputs(0))[0], rtol=1e-9,
                                   atol=1e-9)


def test_a_device_with_little_shared_memory_leaves_fewer_assignments(cases):
    cand = max(cases.searched("rmsnorm_matmul").equivalent,
               key=lambda c: len(assignments(c.graph, limit=1000)))
    roomy = assignments(cand.graph, H100, limit=1000)
    tight = assignments(cand.graph, replace(H100, smem_bytes=2048), limit=1000)
    assert set(map(str, tight)) < set(map(str, roomy))
    for env in tight:
        assert within_limits(cand.graph, env, replace(H100, smem_bytes=2048))


def test_a_graph_without_size_variables_is_held_to_the_device_too():
    """An unsplit member (one block, one iteration: no size variable) is offered only when it
    fits: its empty assignment passes `within_limits`, the same oracle as every member's. Before,
    it passed unchecked, and a program whose tiles exceed shared memory could be tuned."""
    from prism.frontend.builder import Block, Graph
    g = Graph("unsplit")
    x, w = g.input("X", (8, 64)), g.input("W", (64, 512))
    tb = Block(grid=(1,), forloop_range=1)
    tb.output(tb.matmul(tb.accum(tb.input(x, imap=(-1,))), tb.accum(tb.input(w, imap=(-1,)))),
              omap=(-1,))
    (y,) = g.customized(tb)
    g.output(y)
    graph = g.build()
    assert not variables(graph)
    assert assignments(graph, H100) == [{}] and within_limits(graph, {}, H100)
    tight = replace(H100, smem_bytes=4096)          # W's tile alone is 64 KiB
    assert not within_limits(graph, {}, tight) and assignments(graph, tight) == []
