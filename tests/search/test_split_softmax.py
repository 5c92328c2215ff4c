"""Safe attention's two moves (`prism.search.split`): a proved one-kernel program that takes a
row max over keys it holds whole, streamed over the keys in one kernel with the sums kept under
the running max (`stream_softmax`, FlashAttention's online softmax: `nored_rescale`), and split
across blocks with a second kernel that rescales each part's sums to the max of the maxes
(`split_softmax`, flash-decoding).

Oracles: the float64 interpreter against numpy at several loop and split counts (and on logits
of magnitude 100), the verifier's proofs (and its refutation of a wrong rescale), and the
search."""

import itertools
from dataclasses import replace

import numpy as np
import pytest
import torch

import prism
from prism.frontend.builder import Block, Graph
from prism.ir.graph import KernelGraph, Op
from prism.ir.interpret import interpret
from prism.ir.spec import problems, substitute_graph
from prism.search import SearchConfig, search
from prism.search.split import split_softmax, stream_softmax
from prism.verify.equiv import verify

SHAPES = {"Q": (2, 4, 8), "K": (2, 8, 64), "V": (2, 64, 8)}
SCALE = 0.25


def one_kernel_safe(shapes=SHAPES, normalise_first=False, loop=1):
    """Safe attention in one kernel: grid over batch and query rows, every key in the block."""
    g = Graph("one")
    Q, K, V = (g.input(p, shapes[p]) for p in ("Q", "K", "V"))
    tb = Block(grid=("b", "r"), forloop_range=loop)
    q = tb.input(Q, imap=(0, 1), fmap=2 if loop != 1 else None)   # a loop walks the head dim
    k = tb.input(K, imap=(0, -1), fmap=1 if loop != 1 else None)
    v = tb.input(V, imap=(0, -1))
    s = tb.mul_scalar(tb.matmul(q, k) if loop == 1 else tb.accum(tb.matmul(q, k)), SCALE)
    if loop != 1:
        v = tb.accum(v)
    e = tb.exp(tb.apply("sub", s, tb.apply("max", s, dim=2)))
    if normalise_first:
        out = tb.accum(tb.matmul(tb.div(e, tb.sum(e, 2)), v))
    elif loop == 1:
        out = tb.div(tb.accum(tb.matmul(e, v)), tb.accum(tb.sum(e, 2)))
    else:
        out = tb.div(tb.matmul(e, v), tb.sum(e, 2))
    tb.output(out, omap=(0, 1))
    (o,) = g.customized(tb)
    g.output(o)
    return g.build()


def reference(Q, K, V):
    S = Q @ K * SCALE
    e = np.exp(S - S.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)) @ V


@prism.workload(Q=(2, 4, 8), K=(2, 8, 64), V=(2, 64, 8))
def safe_attention(Q, K, V):
    S = Q @ K * SCALE
    E = (S - S.amax(-1, keepdim=True)).exp()
    return (E / E.sum(-1, keepdim=True)) @ V


def _arrays(scale=1.0, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(SHAPES[p]) * (scale if p == "Q" else 1.0) for p in "QKV"]


def test_the_split_program_computes_safe_attention_at_every_split_count():
    program, why = split_softmax(one_kernel_safe())
    assert why == "" and program is not None and program.num_kernels == 2
    names = sorted(program.free_vars())
    counts = set()
    for scale in (1.0, 400.0):        # 400: logits of magnitude about 100
        arrays = _arrays(scale)
        assert np.abs(arrays[0] @ arrays[1] * SCALE).max() > 100 or scale == 1.0
        for combo in itertools.product((1, 2, 4, 8), repeat=len(names)):
            env = dict(zip(names, combo, strict=True))
            if problems(program, env):
                continue
            counts.add(env["s"])
            (out,) = interpret(program, *arrays, assignment=env)
            np.testing.assert_allclose(out, reference(*arrays), rtol=1e-10, atol=1e-12)
    assert counts == {1, 2, 4, 8}


def test_the_streamed_program_computes_safe_attention_at_every_loop_range():
    program, why = stream_softmax(one_kernel_safe())
    assert why == "" and program is not None and program.num_kernels == 1
    (block,) = [b for _, b in program.iter_blocks()]
    assert [a.kind for a in block.accumulators] == ["nored_rescale", "nored_rescale"]
    ranges = set()
    for scale in (1.0, 400.0):
        arrays = _arrays(scale)
        for t in (1, 2, 4, 8, 16):
            env = {"b": 2, "r": 2, "t": t}
            assert not problems(program, env)
            ranges.add(t)
            (out,) = interpret(program, *arrays, assignment=env)
            np.testing.assert_allclose(out, reference(*arrays), rtol=1e-10, atol=1e-12)
    assert ranges == {1, 2, 4, 8, 16}


def test_the_streamed_program_is_proved_for_every_size():
    program, _ = stream_softmax(one_kernel_safe())
    verdict = verify(safe_attention.graph, program)
    assert verdict.verdict == "equivalent" and verdict.sizes == "symbolic"
    assert {"exp-rescale", "max-of-chunk-maxes"} <= _proof_axioms(verdict)


def test_a_stream_without_the_rescale_is_refuted():
    program, _ = stream_softmax(one_kernel_safe())
    op = program.custom_ops[0]
    ops = tuple(Op.make("nored", o.inputs[:1], o.outputs) if o.kind == "nored_rescale" else o
                for o in op.block.ops)                # plain sums of parts under different maxes
    wrong = KernelGraph(tuple(replace(o, block=replace(o.block, ops=ops)) if o is op else o
                              for o in program.ops), program.tensors, program.name)
    assert verify(safe_attention.graph, substitute_graph(wrong, {"b": 2, "r": 2, "t": 4})
                  ).verdict == "not_equivalent"


def _proof_axioms(verdict):
    return {s.rule for steps in verdict.steps for s in steps}


def test_a_member_is_proved_with_the_rescaling_and_the_max_of_maxes():
    program, _ = split_softmax(one_kernel_safe())
    member = substitute_graph(program, {"b": 2, "r": 2, "s": 4, "b_2": 1, "r_2": 4})
    verdict = verify(safe_attention.graph, member)
    assert verdict.verdict == "equivalent" and verdict.sizes == "concrete"
    used = _proof_axioms(verdict)
    assert {"exp-rescale", "max-of-chunk-maxes"} <= used


def test_a_wrong_rescale_is_refuted_never_claimed():
    program, _ = split_softmax(one_kernel_safe())
    member = substitute_graph(program, {"b": 2, "r": 2, "s": 4, "b_2": 1, "r_2": 4})
    k2 = member.custom_ops[1]
    ops = tuple(replace(o, inputs=o.inputs[::-1]) if o.kind == "sub" else o
                for o in k2.block.ops)                     # e^(M − m) instead of e^(m − M)
    wrong = KernelGraph(tuple(replace(o, block=replace(o.block, ops=ops)) if o is k2 else o
                              for o in member.ops), member.tensors, member.name)
    (out,) = interpret(wrong, *_arrays())
    assert not np.allclose(out, reference(*_arrays()))
    assert verify(safe_attention.graph, wrong).verdict == "not_equivalent"


@pytest.mark.parametrize("graph,why", [
    (lambda: one_kernel_safe(normalise_first=True), "normalised before the last sum"),
    (lambda: one_kernel_safe(loop=2), "the block loops"),
])
def test_what_does_not_split_says_why(graph, why):
    program, reason = split_softmax(graph())
    assert program is None and why in reason


def _plain():
    g = Graph("plain")
    Q, K, V = (g.input(p, SHAPES[p]) for p in ("Q", "K", "V"))
    tb = Block(grid=("b",))
    q, k, v = tb.input(Q, imap=(0,)), tb.input(K, imap=(0,)), tb.input(V, imap=(0,))
    e = tb.exp(tb.matmul(q, k))
    tb.output(tb.div(tb.accum(tb.matmul(e, v)), tb.accum(tb.sum(e, 2))), omap=(0,))
    (o,) = g.customized(tb)
    g.output(o)
    return g.build()


def test_without_a_max_there_is_nothing_to_split():
    assert split_softmax(_plain()) == (None, "not one row max over a dim the block holds")


@prism.workload(Q=(1, 8, 16), K=(1, 16, 512), V=(1, 512, 16))
def small_safe(Q, K, V):
    S = Q @ K
    E = (S - S.amax(-1, keepdim=True)).exp()
    return (E / E.sum(-1, keepdim=True)) @ V


def test_the_search_finds_and_proves_the_split_from_the_target():
    config = SearchConfig(block_ops=("matmul", "max", "sub", "exp", "sum", "div"),
                          max_block_ops=10, accumulators=("nored",), grid_dims=(1,),
                          split_loops=True, budget_s=900)
    result = search(small_safe.graph, config)
    assert result.exhaustive
    split = [c for c in result.candidates if c.num_kernels == 2]
    proved = [c for c in split if c.verdict.verdict == "equivalent"]
    assert proved, "no split program was proved"
    for c in proved:      # each a member with its sizes (the proof holds for those sizes)
        assert not c.graph.free_vars() and c.verdict.sizes == "concrete"
    streamed = [c for c in result.candidates if c.verdict.verdict == "equivalent" and any(
        a.kind == "nored_rescale" for _, b in c.graph.iter_blocks() for a in b.accumulators)]
    assert streamed and all(c.verdict.sizes == "symbolic" and c.num_kernels == 1
                            for c in streamed)
    rng = np.random.default_rng(1)
    arrays = [rng.standard_normal(s) for s in ((1, 8, 16), (1, 16, 512), (1, 512, 16))]
    arrays[0] *= 30                                   # logits far above e^x's fp32 range
    S = torch.tensor(arrays[0] @ arrays[1])
    assert S.max() > 100
    want = (torch.softmax(S, -1) @ torch.tensor(arrays[2])).numpy()
    for best in (min(group, key=lambda c: c.modeled_us or float("inf"))
                 for group in (proved, streamed)):
        (out,) = interpret(best.graph, *arrays, assignment=best.assignment)
        np.testing.assert_allclose(out, want, rtol=1e-9, atol=1e-12)
