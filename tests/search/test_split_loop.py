"""The split move (`prism.search.split`, `SearchConfig.split_loops`): a proved one-kernel program
whose loop only sums, with the loop split across blocks and a second kernel summing the parts.

Oracles: the float64 interpreter against numpy at several split counts, the verifier's proof
(and its refutation of a split that does not hold), and the cost model's own enumeration."""

import itertools
from dataclasses import replace

import numpy as np
import pytest
import torch

import prism
from prism.cost import get_device, modeled, roofline_us
from prism.frontend.builder import Block, Graph
from prism.ir.dims import const
from prism.ir.interpret import interpret
from prism.ir.spec import problems, substitute_graph
from prism.search import SearchConfig, search
from prism.search.audit import best_assignment, descended
from prism.search.split import split_loop
from prism.trace import CandidateVerified, FamilyGenerated, Tracer
from prism.verify.equiv import verify
from prism.workloads import WORKLOADS
from prism.workloads.known_best import KNOWN_BEST

H100 = get_device("h100")


def _one_kernel(shapes, qk_norm=False):
    """Attention in one kernel, flash-style without the max: grid over batch and query rows,
    loop over the keys, sizes symbolic."""
    g = Graph("one")
    Q, K, V = (g.input(p, shapes[p]) for p in ("Q", "K", "V"))
    tb = Block(grid=("b", "r"), forloop_range="F")
    q = tb.input(Q, imap=(0, 1))
    k = tb.input(K, imap=(0, -1), fmap=2)
    v = tb.input(V, imap=(0, -1), fmap=1)
    e = tb.exp(tb.matmul(tb.rms_norm(q) if qk_norm else q, k))
    tb.output(tb.div(tb.accum(tb.matmul(e, v)), tb.accum(e, "red_ld_sum")), omap=(0, 1))
    (out,) = g.customized(tb)
    g.output(out)
    return g.build()


SMALL = {"Q": (2, 4, 8), "K": (2, 8, 64), "V": (2, 64, 8)}


def _reference(Q, K, V):
    e = np.exp(Q @ K)
    return (e / e.sum(-1, keepdims=True)) @ V


def test_the_split_program_has_two_kernels_and_computes_attention_at_every_split_count():
    program, why = split_loop(_one_kernel(SMALL))
    assert why == "" and program is not None and program.num_kernels == 2
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(SMALL[p]) * 0.3 for p in ("Q", "K", "V")]
    names = sorted(program.free_vars())
    counts = set()
    for combo in itertools.product((1, 2, 4, 8), repeat=len(names)):
        env = dict(zip(names, combo, strict=True))
        if problems(program, env) or env["s"] in counts:
            continue
        counts.add(env["s"])
        (out,) = interpret(program, *arrays, assignment=env)
        np.testing.assert_allclose(out, _reference(*arrays), rtol=1e-10, atol=1e-12)
    assert counts == {1, 2, 4, 8}


@pytest.mark.parametrize("name,qk_norm", [("attention", False), ("qknorm_attention", True),
                                          ("gqa", False)])
def test_the_split_program_is_proved_and_models_faster_at_the_workloads_shapes(name, qk_norm):
    w = WORKLOADS[name]
    one = _one_kernel(w.shapes, qk_norm)
    program, _ = split_loop(one)
    verdict = verify(w.graph, program)
    assert verdict.verdict == "equivalent" and verdict.sizes == "symbolic"
    best_one = best_assignment(KNOWN_BEST[name](w.shapes), H100)   # the one-kernel program
    start = best_assignment(program, H100)
    split = descended(program, H100, start)
    assert split[0] <= start[0]
    # the descent's latency is the model's at the assignment it returns
    assert modeled(substitute_graph(program, split[1]), H100).latency_us == \
        pytest.approx(split[0])
    # the keys spread over blocks: far better than one block per query tile walking them all
    assert split[0] < 0.5 * best_one[0]
    assert split[0] / roofline_us(w.graph, H100) < (1.8 if name != "gqa" else 2.3)


def test_what_does_not_split_says_why():
    g = Graph("rms")
    X, W = g.input("X", (8, 64)), g.input("W", (64, 64))
    tb = Block(grid=("gx",), forloop_range="F")
    x = tb.input(X, imap=(-1,), fmap=1)
    w = tb.input(W, imap=(1,), fmap=0)
    tb.output(tb.div(tb.accum(tb.matmul(x, w)), tb.accum(x, "red_ld_rms")), omap=(1,))
    (out,) = g.customized(tb)
    g.output(out)
    program, why = split_loop(g.build())
    assert program is None and "not a sum" in why
    no_loop = _one_kernel(SMALL)
    op = no_loop.custom_ops[0]
    flat = replace(no_loop, ops=tuple(
        replace(o, block=replace(o.block, forloop_range=const(1))) if o is op else o
        for o in no_loop.ops))
    assert split_loop(flat) == (None, "no loop to split")


@prism.workload(Q=(1, 8, 16), K=(1, 16, 512), V=(1, 512, 16))
def small_attention(Q, K, V):
    e = torch.exp(Q @ K)
    return (e / e.sum(-1, keepdim=True)) @ V


def test_the_search_finds_split_key_attention_from_the_target_and_traces_it():
    config = SearchConfig(block_ops=("matmul", "exp", "div"), max_block_ops=6,
                          accumulators=("nored", "red_ld_sum"), split_loops=True, budget_s=600)
    tracer = Tracer()
    result = search(small_attention.graph, config, tracer=tracer)
    assert result.exhaustive
    split = [c for c in result.candidates if c.num_kernels == 2]
    proved = [c for c in split if c.verdict.verdict == "equivalent"]
    assert proved, "no split program was proved"
    # each is a family of its own, under the one-kernel candidate's family, and verified
    fams = {e.id: e for e in tracer.events if isinstance(e, FamilyGenerated)}
    verified = {e.id for e in tracer.events if isinstance(e, CandidateVerified)}
    one_kernel = {c.family for c in result.candidates if c.num_kernels == 1}
    for c in proved:
        assert c.id in verified and fams[c.family].parent in one_kernel
    # without the move, the same search finds the same one-kernel candidates and no split
    plain = search(small_attention.graph, replace(config, split_loops=False))
    assert [c.id for c in plain.candidates] == \
        [c.id for c in result.candidates if c.num_kernels == 1]
    # the split program runs: the float64 interpreter against numpy at its best assignment
    best = min(proved, key=lambda c: c.modeled_us or float("inf"))
    rng = np.random.default_rng(1)
    arrays = [rng.standard_normal(s) * 0.3 for s in ((1, 8, 16), (1, 16, 512), (1, 512, 16))]
    (out,) = interpret(best.graph, *arrays, assignment=best.assignment)
    np.testing.assert_allclose(out, _reference(*arrays), rtol=1e-9)
