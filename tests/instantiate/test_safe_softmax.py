"""Safe attention's streamed program and log-sum-exp split as Triton kernels (interpreter on
the CPU, the GPU where there is one): they match torch on ordinary inputs at fp16 tolerance, and
on logits of magnitude 100, where the plain exp(S) / Σ exp(S) overflows (its own kernel gives
NaN: shown beside them).

Oracle: torch's softmax in float64 on the same fp16 values, and the float64 interpreter."""

import numpy as np
import torch

from prism.frontend.builder import Block, Graph
from prism.instantiate.codegen import generate
from prism.ir.spec import substitute_graph
from prism.search.split import split_softmax, stream_softmax

SHAPES = {"Q": (2, 16, 32), "K": (2, 32, 256), "V": (2, 256, 32)}
SCALE = 32 ** -0.5


def _one_kernel(safe: bool):
    g = Graph("safe" if safe else "plain")
    Q, K, V = (g.input(p, SHAPES[p]) for p in ("Q", "K", "V"))
    tb = Block(grid=("b",))
    q, k, v = tb.input(Q, imap=(0,)), tb.input(K, imap=(0,)), tb.input(V, imap=(0,))
    s = tb.mul_scalar(tb.matmul(q, k), SCALE)
    e = tb.exp(tb.apply("sub", s, tb.apply("max", s, dim=2)) if safe else s)
    tb.output(tb.div(tb.accum(tb.matmul(e, v)), tb.accum(tb.sum(e, 2))), omap=(0,))
    (o,) = g.customized(tb)
    g.output(o)
    return g.build()


def _split_member():
    program, why = split_softmax(_one_kernel(safe=True))
    assert why == "", why
    return substitute_graph(program, {"b": 2, "s": 8, "b_2": 2})


def _streamed():
    program, why = stream_softmax(_one_kernel(safe=True))
    assert why == "", why
    return substitute_graph(program, {"b": 2, "t": 4})


def _inputs(kit, logit_scale: float):
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(SHAPES[p]) for p in "QKV"]
    arrays[0] = arrays[0] * logit_scale
    return kit.fp16(arrays)


def _torch_reference(kit, tensors):
    Q, K, V = (torch.tensor(a) for a in kit.as64(tensors))
    return (torch.softmax(Q @ K * SCALE, -1) @ V).numpy()


def test_the_split_and_streamed_kernels_match_torch_on_ordinary_inputs(kit):
    for member, kernels in ((_split_member(), 2), (_streamed(), 1)):
        assert member.num_kernels == kernels
        kit.check(member, kit.as64(_inputs(kit, 1.0)),
                  reference=lambda Q, K, V: [_torch_reference(kit, kit.fp16([Q, K, V]))])


def test_on_logits_of_magnitude_100_both_are_right_where_the_plain_form_is_nan(kit):
    tensors = _inputs(kit, 30.0)
    Q, K, _ = kit.as64(tensors)
    logits = np.abs(Q @ K * SCALE)
    assert logits.max() > 100, logits.max()           # e^100 overflows fp16 and fp32 alike
    want = _torch_reference(kit, tensors)
    (got,) = kit.execute(generate(_split_member()), tensors)
    kit.assert_close(got, want, what="split safe attention, logits ~100")
    (got,) = kit.execute(generate(_streamed()), tensors)
    kit.assert_close(got, want, what="streamed safe attention, logits ~100")
    (plain,) = kit.execute(generate(_one_kernel(safe=False), {"b": 2}), tensors)
    assert not np.isfinite(plain).all()               # inf / inf: the plain form fails here
    (one,) = kit.execute(generate(_one_kernel(safe=True), {"b": 2}), tensors)
    kit.assert_close(one, want, what="one-kernel safe attention, logits ~100")
