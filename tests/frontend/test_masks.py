"""Masked attention as people write it (issue 19, item 1): F.scaled_dot_product_attention with a
boolean mask, with an additive mask and with is_causal=True, and a masked_fill written by hand
all trace to one program — the scores plus an additive mask input (`View.made` says how the
user's mask becomes it) — that computes what torch computes.

Oracles: torch in float64 (the traced graph in the float64 interpreter), torch in float16 (the
generated kernel in Triton's interpreter, its mask made or converted by run()), and numpy for a
split program whose key parts are wholly masked."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import prism
from prism.errors import UnsupportedOpError
from prism.frontend.builder import Block, Graph
from prism.frontend.fx import trace
from prism.ir.graph import MASKED, causal_keep
from prism.ir.interpret import interpret
from prism.ir.spec import problems
from prism.search.split import split_softmax

QKV = {"Q": (2, 4, 8), "K": (2, 6, 8), "V": (2, 6, 8)}
MASK = {**QKV, "m": (4, 6)}


def sdpa_causal(Q, K, V):
    return F.scaled_dot_product_attention(Q, K, V, is_causal=True)


def sdpa_bool(Q, K, V, m):
    return F.scaled_dot_product_attention(Q, K, V, attn_mask=m)


def sdpa_additive(Q, K, V, m):
    return F.scaled_dot_product_attention(Q, K, V, attn_mask=m)


def fill_not_keep(Q, K, V, m):      # m keeps (True: attend), written ~m
    S = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    return torch.softmax(S.masked_fill(~m, float("-inf")), dim=-1) @ V


def fill_drop(Q, K, V, m):          # m drops (True: padding)
    S = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    return torch.softmax(S.masked_fill(m, float("-inf")), dim=-1) @ V


SPELLINGS = {   # name: (function, shapes, boolean inputs, made kind of the mask input)
    "sdpa_causal": (sdpa_causal, QKV, (), "causal"),
    "sdpa_bool": (sdpa_bool, MASK, ("m",), "keep"),
    "sdpa_additive": (sdpa_additive, MASK, (), ""),
    "fill_not_keep": (fill_not_keep, MASK, ("m",), "keep"),
    "fill_drop": (fill_drop, MASK, ("m",), "drop"),
}


def _user_mask(kind, rng):
    """The mask the user passes for `kind`, and the keep-mask it means (every row keeps its
    first key)."""
    keep = rng.random((4, 6)) < 0.6
    keep[:, 0] = True
    if kind == "keep":
        return keep, keep
    if kind == "drop":
        return ~keep, keep
    return np.where(keep, 0.0, -np.inf), keep       # additive, as torch users write it


def test_every_spelling_traces_to_one_program():
    graphs = {n: trace(fn, shapes, n, b) for n, (fn, shapes, b, _) in SPELLINGS.items()}
    kinds = {n: [op.kind for op in g.ops] for n, g in graphs.items()}
    shapes = {n: [g.shape(t) for t in g.inputs] for n, g in graphs.items()}
    first = next(iter(graphs))
    assert all(k == kinds[first] for k in kinds.values()), kinds
    assert all(s == shapes[first] for s in shapes.values()), shapes
    assert "add" in kinds[first] and "max" in kinds[first]     # additive mask, safe softmax
    for n, (_, _, _, made) in SPELLINGS.items():
        view = graphs[n].input_view(3)
        assert (view.made if view else "") == made, n


@pytest.mark.parametrize("name", sorted(SPELLINGS))
def test_each_spelling_computes_what_torch_does(name):
    fn, shapes, bools, made = SPELLINGS[name]
    graph = trace(fn, shapes, name, bools)
    rng = np.random.default_rng(1)
    arrays = [rng.standard_normal(shapes[p]) for p in QKV]
    mask = [] if made == "causal" else [_user_mask(made or "additive", rng)[0]]
    got = graph.to_user(interpret(graph, *graph.to_ir(arrays + mask)))[0]
    want = fn(*[torch.from_numpy(np.asarray(a)) for a in arrays + mask]).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_is_causal_keeps_the_top_left_triangle_as_torch_does_for_more_keys_than_queries():
    q, k, v = (np.random.default_rng(2).standard_normal(s) for s in QKV.values())
    graph = trace(sdpa_causal, QKV)
    got = graph.to_user(interpret(graph, *graph.to_ir([q, k, v])))[0]
    want = sdpa_causal(*map(torch.from_numpy, (q, k, v))).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    assert causal_keep((4, 6)).sum() == 1 + 2 + 3 + 4   # row i keeps keys 0..i


def test_masks_that_cannot_be_traced_are_refused_with_the_fix():
    with pytest.raises(UnsupportedOpError, match="can only be a softmax's mask"):
        trace(lambda Q, m: Q * m, {"Q": (4, 6), "m": (4, 6)}, "times", ("m",))
    with pytest.raises(UnsupportedOpError, match="not used as a mask"):
        trace(lambda Q, m: Q.exp(), {"Q": (4, 6), "m": (4, 6)}, "unused", ("m",))
    with pytest.raises(UnsupportedOpError, match="only float\\('-inf'\\)"):
        trace(lambda Q, m: Q.masked_fill(m, 0.0), {"Q": (4, 6), "m": (4, 6)}, "zero", ("m",))
    with pytest.raises(UnsupportedOpError, match="is_causal=True with an attn_mask"):
        trace(lambda Q, K, V, m: F.scaled_dot_product_attention(Q, K, V, attn_mask=m,
                                                                is_causal=True), MASK)
    with pytest.raises(UnsupportedOpError, match="both as a keep-mask and as a drop-mask"):
        trace(lambda Q, K, V, m: fill_drop(Q, K, V, m) + sdpa_bool(Q, K, V, m), MASK, "both",
              ("m",))


def test_a_workload_draws_its_masks_and_hands_torch_the_boolean_one():
    w = prism.workload(fill_drop, bool_inputs=("m",), **MASK)
    arrays = w.random_inputs(0)
    assert set(np.unique(arrays[3])) <= {0.0, MASKED} and (arrays[3][:, 0] == 0).all()
    got = w.graph.to_user(interpret(w.graph, *w.graph.to_ir(arrays)))[0]
    np.testing.assert_allclose(got, w.reference(*arrays)[0], rtol=1e-12, atol=1e-12)
    causal = prism.workload(sdpa_causal, **QKV)
    arrays = causal.random_inputs(0)
    assert len(arrays) == 4 and (arrays[3] == np.where(causal_keep((4, 6)), 0.0, MASKED)).all()
    got = causal.graph.to_user(interpret(causal.graph, *causal.graph.to_ir(arrays)))[0]
    np.testing.assert_allclose(got, causal.reference(*arrays)[0], rtol=1e-12, atol=1e-12)


def test_a_module_with_a_boolean_example_input_is_a_masked_workload():
    class Padded(torch.nn.Module):
        def forward(self, q, k, v, keep):
            return F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
    q, k, v = (torch.zeros(s) for s in QKV.values())
    w = prism.workload.from_module(Padded(), q, k, v, torch.ones(4, 6, dtype=torch.bool))
    assert w.bool_inputs == ("keep",) and w.dtype.name == "float32"
    arrays = w.random_inputs(0)
    got = w.graph.to_user(interpret(w.graph, *w.graph.to_ir(arrays)))[0]
    np.testing.assert_allclose(got, w.reference(*arrays)[0], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", ["sdpa_causal", "fill_drop"])
def test_the_kernel_makes_or_converts_the_mask_and_matches_torch_in_float16(name, monkeypatch):
    """The generated run(): is_causal's mask made when not passed, a boolean mask converted."""
    from prism.instantiate.codegen import generate
    from prism.instantiate.triton_backend import interpreting, load
    if not interpreting():
        pytest.skip("runs the kernel in Triton's interpreter (TRITON_INTERPRET=1)")
    fn, shapes, bools, made = SPELLINGS[name]
    graph = trace(fn, shapes, name, bools)
    module = load(generate(graph, dtype="float16"))
    rng = np.random.default_rng(3)
    q, k, v = (torch.from_numpy(rng.standard_normal(shapes[p])).half() for p in QKV)
    mask = [] if made == "causal" else [torch.from_numpy(_user_mask(made, rng)[0])]
    got = module.run(q, k, v, *mask).double()
    want = fn(q.double(), k.double(), v.double(), *mask)
    assert torch.isfinite(got).all()
    assert (got - want).abs().max() / want.abs().max() < 2e-2


def one_kernel_masked(shapes):
    """Safe attention plus an additive mask [1, L, S], in one kernel over batch and rows."""
    g = Graph("masked")
    Q, K, V, M = (g.input(p, shapes[p]) for p in ("Q", "K", "V", "M"))
    tb = Block(grid=("b", "r"), forloop_range=1)
    q, k = tb.input(Q, imap=(0, 1)), tb.input(K, imap=(0, -1))
    v, m = tb.input(V, imap=(0, -1)), tb.input(M, imap=(-1, 1))
    s = tb.add(tb.mul_scalar(tb.matmul(q, k), 0.25), m)
    e = tb.exp(tb.apply("sub", s, tb.apply("max", s, dim=2)))
    tb.output(tb.div(tb.accum(tb.matmul(e, v)), tb.accum(tb.sum(e, 2))), omap=(0, 1))
    (o,) = g.customized(tb)
    g.output(o)
    return g.build()


def test_a_split_over_wholly_masked_key_parts_stays_finite_because_the_mask_is_finite():
    """A causal mask leaves whole parts of a split without a key: their max is finite only
    because MASKED is (with −∞ it is −∞, and e^(−∞ − (−∞)) is NaN)."""
    shapes = {"Q": (2, 4, 8), "K": (2, 8, 64), "V": (2, 64, 8), "M": (1, 4, 64)}
    program, why = split_softmax(one_kernel_masked(shapes))
    assert program is not None, why
    env = {"b": 2, "r": 2, "s": 4, "b_2": 1, "r_2": 4}
    assert not problems(program, env)
    rng = np.random.default_rng(4)
    q, k, v = (rng.standard_normal(shapes[p]) for p in "QKV")
    keep = causal_keep((1, 4, 64))                 # keys 16..63 (parts 1..3) masked everywhere
    s = q @ k * 0.25 + np.where(keep, 0.0, -np.inf)
    e = np.exp(s - s.max(-1, keepdims=True))
    want = (e / e.sum(-1, keepdims=True)) @ v
    (got,) = interpret(program, q, k, v, np.where(keep, 0.0, MASKED), assignment=env)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    with np.errstate(invalid="ignore"):
        (nan,) = interpret(program, q, k, v, np.where(keep, 0.0, -np.inf), assignment=env)
    assert np.isnan(nan).any()
