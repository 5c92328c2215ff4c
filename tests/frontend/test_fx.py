"""Tracing torch functions with torch.fx: every supported spelling, checked against torch itself
(float64) through the reference interpreter; every unsupported one refused in one line."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from prism.errors import ShapeError, UnsupportedOpError
from prism.frontend.fx import trace
from prism.ir import interpret

N, D = 4, 6
X2 = {"x": (N, D)}
XY = {"x": (N, D), "y": (N, D)}
POSITIVE = {"sqrt", "sqrt_method", "pow_half", "pow_tensor", "torch_pow_tensor",
            "pow_method_tensor"}   # cases whose inputs must be > 0

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
}


def inputs(name, shapes, seed=0):
    rng = np.random.default_rng(seed)
    if name in POSITIVE:
        return [rng.uniform(0.5, 2.0, s) for s in shapes.values()]
    return [rng.standard_normal(s) for s in shapes.values()]


def assert_matches_torch(fn, shapes, arrays, rtol=1e-12):
    graph = trace(fn, shapes)
    got = interpret(graph, *arrays)
    want = fn(*[torch.from_numpy(a) for a in arrays])
    want = want if isinstance(want, tuple) else (want,)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w.numpy(), rtol=rtol, atol=rtol * np.abs(w.numpy()).max())
    return graph


@pytest.mark.parametrize("name", sorted(CASES))
def test_op_matches_torch(name):
    fn, shapes = CASES[name]
    assert_matches_torch(fn, shapes, inputs(name, shapes), rtol=1e-9 if "gelu" in name else 1e-12)


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
        h = F.rms_norm(X, (X.shape[-1],)) @ W
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
    "tanh": (lambda x: torch.tanh(x), "torch.tanh is not supported"),
    "transpose": (lambda x: x.T, "Tensor.T is not supported"),
    "keepdim_false": (lambda x: x.sum(-1), "use keepdim=True"),
    "torch_mean_no_keepdim": (lambda x: torch.mean(x, -1), "use keepdim=True"),
    "full_reduction": (lambda x: x.sum(), "reduce over one dim"),
    "two_dims": (lambda x: x.sum((0, 1), keepdim=True), "reduce over one dim"),
    "rms_norm_eps": (lambda x: F.rms_norm(x, (D,), eps=1e-6), "drop eps"),
    "rms_norm_not_last": (lambda x: F.rms_norm(x, (N, D)), "last dim"),
    "indexing": (lambda x: x[0], "operator.getitem is not supported"),
    "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"), "approximate='none'"),
    "add_scalar": (lambda x: x + 1.0, "adding a Python scalar"),
    "radd_scalar": (lambda x: 1.0 + x, "adding a Python scalar"),
    "pow_three": (lambda x: x ** 3, "exponent 3"),
    "scalar_over_tensor": (lambda x: 1.0 / x, "scalar divided by a tensor"),
    "constant_tensor": (lambda x: x * torch.ones(N, D), "constant tensor"),
    "inplace": (lambda x: F.relu(x, inplace=True), "inplace=True"),
    "out_kwarg": (lambda x: torch.exp(x, out=x), "with these arguments"),
    "softmax_dtype": (lambda x: F.softmax(x, -1, dtype=torch.float32), "dtype="),
    "data_dependent_branch": (lambda x: x if x.exp().sum(0, keepdim=True).sum(1, keepdim=True)
                              else -x, "control flow"),
    "returns_a_number": (lambda x: 3, "not a traced tensor"),
}


@pytest.mark.parametrize("name", sorted(UNSUPPORTED))
def test_unsupported_is_refused_in_one_line(name):
    fn, fragment = UNSUPPORTED[name]
    with pytest.raises(UnsupportedOpError) as info:
        trace(fn, X2, name="wl")
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("workload wl: ")
    assert fragment in message


def test_rms_norm_weight_of_lower_rank_is_refused():
    with pytest.raises(UnsupportedOpError, match="multiply by the weight afterwards"):
        trace(lambda x, w: F.rms_norm(x, (D,), weight=w), {"x": (N, D), "w": (D,)})


def test_unknown_op_lists_what_is_supported():
    with pytest.raises(UnsupportedOpError, match=r"torch\.tanh .*supported: matmul/@, silu"):
        trace(lambda x: torch.tanh(x), X2)


def test_shape_mismatch_is_a_shape_error_naming_the_workload():
    with pytest.raises(ShapeError, match=r"^workload bad: operator\.matmul: matmul shapes") as info:
        trace(lambda x, w: x @ w, {"x": (N, D), "w": (N, D)}, name="bad")
    assert "\n" not in str(info.value)


def test_rank_mismatch_is_a_shape_error():
    with pytest.raises(ShapeError, match="keepdim=True"):
        trace(lambda x, y: x + y, {"x": (N, D), "y": (D,)})


def test_missing_shape_is_a_shape_error():
    with pytest.raises(ShapeError, match="parameter y has no shape"):
        trace(lambda x, y: x + y, X2)
