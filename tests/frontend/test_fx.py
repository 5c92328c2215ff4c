"""Tracing torch functions with torch.fx: every supported spelling, checked against torch itself
(float64) through the reference interpreter; every unsupported one refused in one line."""

import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from prism.errors import GraphFormatError, ShapeError, UnsupportedOpError
from prism.frontend.fx import trace
from prism.ir import KernelGraph, interpret
from prism.ir.graph import Interface, View

N, D = 4, 6
X2 = {"x": (N, D)}
SDPA = {"q": (2, 4, 8), "k": (2, 6, 8), "v": (2, 6, 8)}     # [batch, rows, d], [batch, keys, d]
XY = {"x": (N, D), "y": (N, D)}
POSITIVE = {"sqrt", "sqrt_method", "pow_half", "pow_tensor", "torch_pow_tensor",
            "pow_method_tensor", "log", "log_method"}   # cases whose inputs must be > 0
# torch's default rms_norm eps is its dtype's (2.2e-16 in float64); the IR's is float32's
DEFAULT_EPS = {"rms_norm", "torch_rms_norm", "rms_norm_size", "rms_norm_weight"}

B3 = {"x": (2, 3, D), "w": (D, 5)}
LIN = {"x": (N, D), "w": (5, D), "b": (5,)}

# The spellings of model code: name -> (function, shapes).
SPELLINGS = {
    # reciprocals
    "scalar_over_tensor": (lambda x: 2.0 / (x * x + 1.0), {"x": (N, D)}),
    "one_over_tensor": (lambda x: 1 / torch.exp(x), {"x": (N, D)}),
    "rsqrt": (lambda x: torch.rsqrt(x * x + 0.5), {"x": (N, D)}),
    "tensor_rsqrt": (lambda x: (x * x + 0.5).rsqrt(), {"x": (N, D)}),
    # linear layers
    "linear": (lambda x, w, b: F.linear(x, w, b), LIN),
    "linear_no_bias": (lambda x, w: F.linear(x, w), {"x": (N, D), "w": (5, D)}),
    "linear_batched": (lambda x, w, b: F.silu(F.linear(x, w, b)),
                       {"x": (2, 3, D), "w": (5, D), "b": (5,)}),
    "addmm": (lambda b, x, w: torch.addmm(b, x, w), {"b": (5,), "x": (N, D), "w": (D, 5)}),
    "addmm_beta_alpha": (lambda b, x, w: torch.addmm(b, x, w, beta=0.5, alpha=2.0),
                         {"b": (1, 5), "x": (N, D), "w": (D, 5)}),
    # transposed inputs, read with strides
    "T": (lambda x, w: x @ w.T, {"x": (N, D), "w": (5, D)}),
    "t_method": (lambda x, w: x @ w.t(), {"x": (N, D), "w": (5, D)}),
    "torch_t": (lambda x, w: torch.matmul(x, torch.t(w)), {"x": (N, D), "w": (5, D)}),
    "transpose": (lambda x, w: x @ w.transpose(0, 1), {"x": (N, D), "w": (5, D)}),
    "transpose_negative": (lambda x, w: x @ w.transpose(-1, -2), {"x": (N, D), "w": (5, D)}),
    "permute": (lambda x, w: x @ w.permute(1, 0), {"x": (N, D), "w": (5, D)}),
    "torch_permute": (lambda q, k: torch.bmm(q, torch.permute(k, (0, 2, 1))),
                      {"q": (2, N, D), "k": (2, 5, D)}),
    "mT": (lambda q, k: q @ k.mT, {"q": (2, N, D), "k": (2, 5, D)}),
    "transpose_then_add": (lambda x, y: x.T + y, {"x": (D, N), "y": (N, D)}),
    # size-1 dims, merged leading dims, keepdim=False, several dims
    "unsqueeze_row_scale": (lambda x, s: x * s.unsqueeze(-1), {"x": (N, D), "s": (N,)}),
    "torch_unsqueeze": (lambda x, s: x * torch.unsqueeze(s, 0), {"x": (N, D), "s": (D,)}),
    "reshape_merge": (lambda x, w: (x.reshape(-1, D) @ w).reshape(2, 3, 5), B3),
    "view_merge": (lambda x, w: x.view(6, D) @ w, B3),
    "torch_reshape": (lambda x, w: torch.reshape(x, (6, D)) @ w, B3),
    "flatten": (lambda x, w: x.flatten(0, 1) @ w, B3),
    "squeeze": (lambda x: x.sum(-1, keepdim=True).squeeze(-1), X2),
    "torch_squeeze": (lambda x: torch.squeeze(x.mean(0, keepdim=True), 0), X2),
    "keepdim_false": (lambda x: x.sum(-1), X2),
    "torch_mean_no_keepdim": (lambda x: torch.mean(x, 0), X2),
    "dim_none": (lambda x: x.sum(), X2),
    "tuple_dims": (lambda x: x.sum((0, 1)), {"x": (2, N, D)}),
    "tuple_dims_keepdim": (lambda x: x.mean(dim=(1, 2), keepdim=True), {"x": (2, N, D)}),
    "reduce_after_keepdim_false": (lambda x: x.sum(-1).mean(0), X2),
    "norm": (lambda x: torch.norm(x, dim=-1, keepdim=True), X2),
    "norm_all": (lambda x: torch.norm(x), X2),
    "vector_norm": (lambda x: torch.linalg.vector_norm(x, dim=-1), X2),
    "l2_normalize": (lambda x: x / torch.linalg.vector_norm(x, dim=-1, keepdim=True), X2),
    # arithmetic spellings and Python scalars on either side
    "multiply": (lambda x, y: torch.multiply(x, y), XY),
    "sub_alpha": (lambda x, y: torch.sub(x, y, alpha=0.5), XY),
    "rsub": (lambda x, y: torch.rsub(x, y), XY),
    "rsub_scalar": (lambda x: torch.rsub(x, 2.0), X2),
    "add_scalar": (lambda x: x + 1.5, X2),
    "radd_scalar": (lambda x: 1.5 + x, X2),
    "torch_add_scalar_alpha": (lambda x: torch.add(x, 2, alpha=3), X2),
    "sub_scalar": (lambda x: x - 2, X2),
    "rsub_python": (lambda x: 2 - x, X2),
    "rdiv_scalar_of_sum": (lambda x: (x * 3) / 4 + 1, X2),
    # batched activations times a shared weight, broadcasting as torch does
    "batched_shared_weight": (lambda x, w: x @ w, B3),
    "batched_rms_norm_matmul": (lambda x, w: F.rms_norm(x, (D,), eps=1e-6) @ w, B3),
    "batched_residual": (lambda x, w, r: x @ w + r, {**B3, "r": (2, 3, 5)}),
    "bias_rank1": (lambda x, w, b: torch.relu(x @ w + b),
                   {"x": (N, D), "w": (D, 5), "b": (5,)}),
    "bias_row": (lambda x, w, b: (x @ w + b) * 1.5, {"x": (N, D), "w": (D, 5), "b": (1, 5)}),
    "row_scale": (lambda x, w, s: (x @ w) * s, {"x": (N, D), "w": (D, 5), "s": (N, 1)}),
    "bias_first": (lambda x, w, b: b + x @ w, {"x": (N, D), "w": (D, 5), "b": (5,)}),
    # the new ops
    "sigmoid": (lambda x: torch.sigmoid(x), X2),
    "F_sigmoid": (lambda x: F.sigmoid(x), X2),
    "sigmoid_method": (lambda x: x.sigmoid(), X2),
    "tanh": (lambda x: torch.tanh(x), X2),
    "F_tanh": (lambda x: F.tanh(x), X2),
    "tanh_method": (lambda x: x.tanh(), X2),
    "abs": (lambda x: torch.abs(x), X2),
    "abs_builtin": (lambda x: abs(x), X2),
    "abs_method": (lambda x: x.abs(), X2),
    "log": (lambda x: torch.log(x), X2),
    "log_method": (lambda x: x.log(), X2),
    "softplus": (lambda x: F.softplus(x * 30.0), X2),
    "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"), X2),
    "leaky_relu": (lambda x: F.leaky_relu(x, 0.2), X2),
    "leaky_relu_default": (lambda x: F.leaky_relu(x), X2),
    "clamp": (lambda x: torch.clamp(x, -0.5, 0.5), X2),
    "clamp_min": (lambda x: torch.clamp(x, min=0.0), X2),
    "clamp_method_max": (lambda x: x.clamp(max=0.3), X2),
    "clip": (lambda x: torch.clip(x, -1, 1), X2),
    "hardtanh": (lambda x: F.hardtanh(x), X2),
    "hardtanh_bounds": (lambda x: F.hardtanh(x, -2.0, 2.0), X2),
    "relu6": (lambda x: F.relu6(x * 4), X2),
    "maximum": (lambda x, y: torch.maximum(x, y), XY),
    "minimum": (lambda x, y: torch.minimum(x, y), XY),
    "max_of_two": (lambda x, y: torch.max(x, y), XY),
    "amax": (lambda x: torch.amax(x, -1), X2),
    "amin_keepdim": (lambda x: torch.amin(x, 0, keepdim=True), X2),
    "max_dim_values": (lambda x: x.max(dim=-1).values, X2),
    "max_dim_item": (lambda x: torch.max(x, 1)[0], X2),
    "min_dim_keepdim": (lambda x: torch.min(x, 0, keepdim=True).values, X2),
    "max_all": (lambda x: x.max(), X2),
    "logsumexp": (lambda x: torch.logsumexp(x, -1), X2),
    "logsumexp_method": (lambda x: x.logsumexp(dim=0, keepdim=True), X2),
    "rms_norm_eps_weight": (lambda x, w: F.rms_norm(x, (D,), w, 1e-5), {"x": (N, D), "w": (D,)}),
    "layer_norm": (lambda x: F.layer_norm(x, (D,)), X2),
    "layer_norm_affine": (lambda x, w, b: F.layer_norm(x, (D,), w, b, eps=1e-6),
                          {"x": (N, D), "w": (D,), "b": (D,)}),
    "layer_norm_weight": (lambda x, w: F.layer_norm(x, (D,), w), {"x": (2, N, D), "w": (D,)}),
    "log_softmax": (lambda x: F.log_softmax(x, -1), X2),
    "torch_log_softmax": (lambda x: torch.log_softmax(x, dim=0), X2),
    "softmax_large": (lambda x: F.softmax(x * 100.0, dim=-1), X2),
    "mse_by_hand": (lambda x, y: ((x - y) ** 2).mean(), XY),
    "mse_product": (lambda x, y: torch.mean((x - y) * (x - y)), XY),
    "mse_loss": (lambda x, y: F.mse_loss(x, y), XY),
    "mse_loss_sum": (lambda x, y: F.mse_loss(x, y, reduction="sum"), XY),
}

# name: (function, shapes). Each is traced, interpreted in float64 and compared with torch.
CASES = {
    # matmul
    "torch_matmul": (lambda x, w: torch.matmul(x, w), {"x": (N, D), "w": (D, 5)}),
    "at": (lambda x, w: x @ w, {"x": (N, D), "w": (D, 5)}),
    "matmul_method": (lambda x, w: x.matmul(w), {"x": (N, D), "w": (D, 5)}),
    "bmm": (lambda x, w: torch.bmm(x, w), {"x": (2, N, D), "w": (2, D, 5)}),
    "batched_at": (lambda x, w: x @ w, {"x": (2, 3, N, D), "w": (2, 3, D, 5)}),
    "mm": (lambda x, w: torch.mm(x, w), {"x": (N, D), "w": (D, 5)}),
    # unary
    "silu": (lambda x: F.silu(x), X2),
    "torch_relu": (lambda x: torch.relu(x), X2),
    "F_relu": (lambda x: F.relu(x), X2),
    "relu_method": (lambda x: x.relu(), X2),
    "gelu": (lambda x: F.gelu(x), X2),
    "gelu_none": (lambda x: F.gelu(x, approximate="none"), X2),
    "exp": (lambda x: torch.exp(x), X2),
    "exp_method": (lambda x: x.exp(), X2),
    "sqrt": (lambda x: torch.sqrt(x), X2),
    "sqrt_method": (lambda x: x.sqrt(), X2),
    "pow_half": (lambda x: x ** 0.5, X2),
    "square": (lambda x: torch.square(x), X2),
    "square_method": (lambda x: x.square(), X2),
    "pow_two": (lambda x: x ** 2, X2),
    "torch_pow_two": (lambda x: torch.pow(x, 2), X2),
    "pow_method_two": (lambda x: x.pow(2.0), X2),
    # binary
    "pow_tensor": (lambda x, y: x ** y, XY),
    "torch_pow_tensor": (lambda x, y: torch.pow(x, y), XY),
    "pow_method_tensor": (lambda x, y: x.pow(y), XY),
    "add": (lambda x, y: x + y, XY),
    "add_broadcast": (lambda x, y: x + y, {"x": (N, D), "y": (N, 1)}),
    "torch_add": (lambda x, y: torch.add(x, y), XY),
    "add_method": (lambda x, y: x.add(y), XY),
    "add_alpha": (lambda x, y: torch.add(x, y, alpha=2.5), XY),
    "sub": (lambda x, y: x - y, XY),
    "neg": (lambda x: -x, X2),
    "mul": (lambda x, y: x * y, XY),
    "mul_broadcast": (lambda x, y: x * y, {"x": (1, D), "y": (N, 1)}),
    "torch_mul": (lambda x, y: torch.mul(x, y), XY),
    "mul_method": (lambda x, y: x.mul(y), XY),
    "mul_scalar": (lambda x: x * 2.5, X2),
    "rmul_scalar": (lambda x: 3 * x, X2),
    "torch_mul_scalar": (lambda x: torch.mul(x, -0.5), X2),
    "div": (lambda x, y: x / y, XY),
    "torch_div": (lambda x, y: torch.div(x, y), XY),
    "div_method": (lambda x, y: x.div(y), XY),
    "div_scalar": (lambda x: x / 3.0, X2),
    "div_by_dim": (lambda x: x / x.shape[-1], X2),
    # reductions, keeping the dim
    "torch_sum": (lambda x: torch.sum(x, -1, keepdim=True), X2),
    "sum_method": (lambda x: x.sum(0, keepdim=True), X2),
    "sum_tuple_dim": (lambda x: x.sum(dim=(1,), keepdim=True), X2),
    "sum_rank3": (lambda x: x.sum(1, keepdim=True), {"x": (2, N, D)}),
    "torch_mean": (lambda x: torch.mean(x, -1, keepdim=True), X2),
    "mean_method": (lambda x: x.mean(dim=0, keepdim=True), X2),
    # normalisation and softmax
    "rms_norm": (lambda x: F.rms_norm(x, (x.shape[-1],)), X2),
    "torch_rms_norm": (lambda x: torch.rms_norm(x, [x.size(-1)]), X2),
    "rms_norm_size": (lambda x: F.rms_norm(x, x.size()[-1:]), {"x": (2, N, D)}),
    "rms_norm_weight": (lambda x, w: F.rms_norm(x, (D,), weight=w), {"x": (D,), "w": (D,)}),
    "rms_by_hand": (lambda x: x / torch.sqrt(torch.mean(x * x, -1, keepdim=True)), X2),
    "softmax": (lambda x: F.softmax(x, dim=-1), X2),
    "torch_softmax": (lambda x: torch.softmax(x, 0), X2),
    "softmax_method": (lambda x: x.softmax(dim=1), {"x": (2, N, D)}),
    "sdpa": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v), SDPA),
    "sdpa_mask_scale": (lambda q, k, v, m: F.scaled_dot_product_attention(
        q, k, v, attn_mask=m, scale=0.3), {**SDPA, "m": (4, 6)}),
    **SPELLINGS,
}


def inputs(name, shapes, seed=0):
    rng = np.random.default_rng(seed)
    if name in POSITIVE:
        return [rng.uniform(0.5, 2.0, s) for s in shapes.values()]
    return [rng.standard_normal(s) for s in shapes.values()]


def assert_matches_torch(fn, shapes, arrays, rtol=1e-12):
    """Trace `fn`, interpret the graph in float64 on `arrays` (in the user's layout, through the
    graph's views) and compare with torch on the same arrays."""
    graph = trace(fn, shapes)
    got = graph.to_user(interpret(graph, *graph.to_ir(arrays)))
    want = fn(*[torch.from_numpy(a) for a in arrays])
    want = want if isinstance(want, tuple) else (want,)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w.numpy(), rtol=rtol, atol=rtol * np.abs(w.numpy()).max())
    return graph


@pytest.mark.parametrize("name", sorted(CASES))
def test_op_matches_torch(name):
    fn, shapes = CASES[name]
    rtol = 1e-9 if "gelu" in name else 1e-6 if name in DEFAULT_EPS else 1e-12
    assert_matches_torch(fn, shapes, inputs(name, shapes), rtol=rtol)


def test_shape_queries_are_python_ints():
    def f(x, w):
        n, d = x.shape
        assert (len(x.shape), x.dim(), x.ndim, x.size(), x.size(1)) == (2, 2, 2, (n, d), d)
        y = x @ w if w.shape[0] == d else x
        return y * (1.0 / d) if x.size(-1) > 1 else y

    shapes = {"x": (N, D), "w": (D, 5)}
    graph = assert_matches_torch(f, shapes, inputs("f", shapes))
    assert [op.kind for op in graph.ops if op.kind not in ("input", "output")] == ["matmul",
                                                                                   "mul_scalar"]


def test_tuple_output_and_names():
    def block(X, W):
        h = F.rms_norm(X, (X.shape[-1],), eps=1e-6) @ W
        return h, F.softmax(h, dim=-1)

    shapes = {"X": (N, D), "W": (D, D)}
    graph = assert_matches_torch(block, shapes, inputs("block", shapes))
    assert graph.name == "block"
    assert graph.inputs == ["X", "W"]
    assert graph.outputs == ["matmul", "softmax"]
    assert all(name.isidentifier() for name, _ in graph.tensors)


def test_parameter_named_like_a_builtin_keeps_its_name():
    graph = trace(lambda input: input.exp(), {"input": (3,)})
    assert graph.inputs == ["input"]


# -- refusals: one line, naming the op and the fix ------------------------------------------------

UNSUPPORTED = {
    "unknown_op": (lambda x: torch.tan(x), "torch.tan at test_fx.py:"),
    "transpose_of_computed": (lambda x: (x * 2.0).T, "transpose of a computed tensor"),
    "input_in_two_layouts": (lambda x: x @ x.T + x.T, "transposed and as it is"),
    "max_indices": (lambda x: torch.max(x, 1).indices, "indices of max(x, dim)"),
    "max_indices_item": (lambda x: torch.max(x, 1)[1], "indices of max(x, dim)"),
    "rms_norm_not_last": (lambda x: F.rms_norm(x, (N, D)), "last dim"),
    "indexing": (lambda x: x[0], "indexing a tensor"),
    "softplus_beta": (lambda x: F.softplus(x, beta=2.0), "beta=2.0, threshold=20"),
    "gelu_unknown": (lambda x: F.gelu(x, approximate="erf"), "use 'none' or 'tanh'"),
    "clamp_tensor": (lambda x: torch.clamp(x, min=x), "torch.maximum"),
    "pow_three": (lambda x: x ** 3, "exponent 3"),
    "matmul_vector": (lambda x: x @ x.sum(0), "a vector"),
    "constant_tensor": (lambda x: x * torch.ones(N, D), "constant tensor"),
    "inplace": (lambda x: F.relu(x, inplace=True), "inplace=True"),
    "out_kwarg": (lambda x: torch.exp(x, out=x), "with these arguments"),
    "softmax_dtype": (lambda x: F.softmax(x, -1, dtype=torch.float32), "dtype="),
    "data_dependent_branch": (lambda x: x if x.exp().sum(0, keepdim=True).sum(1, keepdim=True)
                              else -x, "control flow"),
    "returns_a_number": (lambda x: 3, "not a traced tensor"),
    "sdpa_dropout": (lambda x: F.scaled_dot_product_attention(x, x, x, dropout_p=0.1),
                     "dropout_p=0.1: only inference"),
    "masked_fill_computed_mask": (lambda x: x.masked_fill(x, float("-inf")),
                                  "masked_fill's mask must be a boolean input"),
}


def _program(graph: KernelGraph) -> list[tuple[object, ...]]:
    """The graph's ops with tensors named by first appearance: two tracings of one program
    give the same list whatever their tensor names."""
    names: dict[str, str] = {}
    out = []
    for op in graph.ops:
        for t in (*op.inputs, *op.outputs):
            names.setdefault(t, f"t{len(names)}")
        out.append((op.kind, tuple(names[t] for t in op.inputs),
                    tuple(names[t] for t in op.outputs),
                    json.dumps(op.attr, sort_keys=True, default=str)))
    return out


def test_safe_softmax_spellings_trace_to_one_program():
    """F.scaled_dot_product_attention, torch.softmax of the scaled scores, and the
    max-subtracted softmax written by hand are one program, and it is torch's in float64."""
    import math
    spellings = {
        "sdpa": lambda q, k, v: F.scaled_dot_product_attention(q, k, v),
        "softmax": lambda q, k, v: torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(8),
                                                 dim=-1) @ v,
        "by_hand": lambda q, k, v: _by_hand(q @ k.mT * (1 / math.sqrt(8))) @ v,
    }
    programs = {}
    for name, fn in spellings.items():
        graph = assert_matches_torch(fn, SDPA, inputs(name, SDPA), rtol=1e-12)
        programs[name] = _program(graph)
    assert programs["sdpa"] == programs["softmax"] == programs["by_hand"]
    kinds = [op[0] for op in programs["sdpa"] if op[0] not in ("input", "output")]
    assert kinds == ["matmul", "mul_scalar", "max", "sub", "exp", "sum", "div", "matmul"]


def _by_hand(s):
    s = s - s.amax(-1, keepdim=True)
    e = s.exp()
    return e / e.sum(-1, keepdim=True)


def test_safe_softmax_stays_finite_where_the_plain_form_overflows():
    """Logits of magnitude 1000: the traced sdpa (max subtracted) matches torch, finite; the
    plain exp / sum form gives nan, in float64 as in the interpreter."""
    arrays = [a * 1000 if i < 2 else a for i, a in enumerate(inputs("sdpa", SDPA))]
    graph = assert_matches_torch(lambda q, k, v: F.scaled_dot_product_attention(q, k, v), SDPA,
                                 arrays, rtol=1e-9)
    got = graph.to_user(interpret(graph, *graph.to_ir(arrays)))[0]
    assert np.isfinite(got).all()
    q, k, v = (torch.from_numpy(a) for a in arrays)
    e = (q @ k.mT / 8 ** 0.5).exp()
    assert torch.isnan((e / e.sum(-1, keepdim=True)) @ v).any()


@pytest.mark.parametrize("name", sorted(UNSUPPORTED))
def test_unsupported_is_refused_in_one_line(name):
    fn, fragment = UNSUPPORTED[name]
    with pytest.raises(UnsupportedOpError) as info:
        trace(fn, X2, name="wl")
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("workload wl: ")
    assert fragment in message


def test_unknown_op_names_its_line_and_the_nearest_spelling():
    def f(x):
        y = x * 2.0
        return torch.tan(y)       # the line the message must name

    line = f.__code__.co_firstlineno + 2
    with pytest.raises(UnsupportedOpError) as info:
        trace(f, X2, name="wl")
    assert str(info.value).startswith(f"workload wl: torch.tan at test_fx.py:{line} is not "
                                      "supported; the nearest supported spelling is torch.tanh")


def test_unknown_method_suggests_the_method():
    with pytest.raises(UnsupportedOpError, match=r"Tensor\.cumsum .*nearest supported spelling "
                                                 r"is Tensor\.sum"):
        trace(lambda x: x.cumsum(0), X2)


def test_shape_mismatch_is_a_shape_error_naming_the_workload():
    with pytest.raises(ShapeError, match=r"^workload bad: operator\.matmul at test_fx\.py:\d+: "
                                         r"matmul shapes") as info:
        trace(lambda x, w: x @ w, {"x": (N, D), "w": (N, D)}, name="bad")
    assert "\n" not in str(info.value)


def test_shapes_that_do_not_broadcast_are_a_shape_error():
    with pytest.raises(ShapeError, match=r"shapes \[4, 6\] and \[4\] do not broadcast"):
        trace(lambda x, y: x + y, {"x": (N, D), "y": (N,)})


def test_missing_shape_is_a_shape_error():
    with pytest.raises(ShapeError, match="parameter y has no shape"):
        trace(lambda x, y: x + y, X2)


# -- layouts: what the IR holds for the torch tensors -------------------------------------------

def kinds(graph):
    return [op.kind for op in graph.ops if op.kind not in ("input", "output")]


def test_linear_reads_its_weight_transposed_and_its_bias_as_a_row():
    graph = trace(lambda x, w, b: F.linear(x, w, b), LIN)
    assert graph.inputs == ["x", "w", "b"]
    assert kinds(graph) == ["matmul", "add"]              # no copy of W, no reshape op
    assert [d.value for d in graph.shape("w")] == [D, 5]  # the IR's input is W.T ...
    assert graph.interface.inputs == (None, View((5, D), (1, 0)), View((5,)))   # ... of W
    assert [d.value for d in graph.shape("b")] == [1, 5]
    assert graph.interface.outputs == ()


def test_batched_activations_merge_their_leading_dims():
    graph = trace(lambda x, w, r: x @ w + r, {**B3, "r": (2, 3, 5)})
    assert {t: [d.value for d in graph.shape(t)] for t in graph.inputs} == \
        {"x": [6, D], "w": [D, 5], "r": [6, 5]}
    assert graph.interface.outputs == (View((2, 3, 5)),)


def test_keepdim_false_is_an_output_view():
    graph = trace(lambda x: x.sum(-1), X2)
    assert [d.value for d in graph.shape(graph.outputs[0])] == [N, 1]
    assert graph.interface.outputs == (View((N,)),)


def test_softmax_subtracts_the_row_max_and_log_softmax_the_logsumexp():
    assert kinds(trace(lambda x: F.softmax(x, -1), X2)) == ["max", "sub", "exp", "sum", "div"]
    assert kinds(trace(lambda x: F.log_softmax(x, -1), X2)) == ["logsumexp", "sub"]


def test_rms_norm_without_eps_takes_torchs_default_for_the_reference():
    # the reference runs in float64, where torch adds float64's machine epsilon
    (op,) = [op for op in trace(lambda x: F.rms_norm(x, (D,)), X2).ops if op.kind == "rms_norm"]
    assert op.attr["eps"] == torch.finfo(torch.float64).eps
    x = torch.zeros(3, D, dtype=torch.float64)
    assert torch.equal(F.rms_norm(x, (D,)), x)            # torch: an all-zero row stays zero


def test_a_sum_over_a_tuple_of_dims_chains_one_dim_reductions():
    graph = trace(lambda x: x.sum((0, 2)), {"x": (2, N, D)})
    assert [(op.kind, op.attr["dim"]) for op in graph.ops if op.kind == "sum"] == [("sum", 0),
                                                                                  ("sum", 2)]


def test_the_interface_survives_json_and_old_documents_load():
    graph = trace(lambda x, w, b: F.linear(x, w, b).sum(-1), LIN)
    doc = graph.to_json()
    assert doc["interface"]["inputs"][1] == {"shape": [5, D], "perm": [1, 0]}
    assert KernelGraph.from_json(json.loads(json.dumps(doc))) == graph
    old = {k: v for k, v in doc.items() if k != "interface"}
    assert KernelGraph.from_json(old).interface == Interface()


def test_a_view_that_does_not_fit_is_refused_on_load():
    doc = trace(lambda x, w: x @ w.T, {"x": (N, D), "w": (5, D)}).to_json()
    doc["interface"]["inputs"][1] = {"shape": [5, D + 1], "perm": [1, 0]}
    with pytest.raises(GraphFormatError, match="does not have the elements"):
        KernelGraph.from_json(doc)
