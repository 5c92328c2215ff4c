"""`@workload` and the nine named workloads: each traced graph, run by the float64 interpreter,
agrees with the torch function it came from (the oracle)."""

import json
import subprocess
import sys

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from prism.errors import InputError, ShapeError, UnknownWorkloadError, UnsupportedOpError
from prism.frontend.workload import Workload, workload
from prism.ir import interpret
from prism.workloads import (
    DEFAULT_WORKLOAD,
    VARIANTS,
    WORKLOADS,
    get_workload,
    workloads_json,
)

NAMES = ["rmsnorm_matmul", "rmsnorm_mlp", "swiglu", "attention", "qknorm_attention",
         "gated_mlp", "lora", "gqa", "ntrans"]


def max_rel_err(got, want):
    return max(np.abs(g - w).max() / np.abs(w).max() for g, w in zip(got, want, strict=True))


@workload(X=(4, 8), W=(8, 3))
def norm_matmul(X, W):
    """RMSNorm, then a matmul."""
    return F.rms_norm(X, (X.shape[-1],)) @ W


# -- the decorator --------------------------------------------------------------------------------

def test_workload_stays_the_torch_function():
    x, w = torch.randn(4, 8, dtype=torch.float64), torch.randn(8, 3, dtype=torch.float64)
    torch.testing.assert_close(norm_matmul(x, w), F.rms_norm(x, (8,)) @ w)
    torch.testing.assert_close(norm_matmul(X=x, W=w), norm_matmul.__wrapped__(x, w))
    assert isinstance(norm_matmul, Workload)
    assert norm_matmul.__name__ == norm_matmul.name == "norm_matmul"
    assert norm_matmul.__doc__ == "RMSNorm, then a matmul."
    assert norm_matmul.description == "RMSNorm, then a matmul."
    assert repr(norm_matmul) == "Workload(norm_matmul: X[4,8], W[8,3])"


def test_shapes_are_in_parameter_order():
    @workload(C=(1, 2), A=[3, 2], B=(2, 2))
    def f(A, B, C):
        return A @ B * C

    assert list(f.shapes) == ["A", "B", "C"]
    assert f.shapes == {"A": (3, 2), "B": (2, 2), "C": (1, 2)}
    assert f.graph.inputs == ["A", "B", "C"]


def test_graph_is_traced_once_and_named_after_the_function():
    g = norm_matmul.graph
    assert g is norm_matmul.graph
    assert g.name == "norm_matmul"
    assert [op.kind for op in g.ops] == ["input", "input", "rms_norm", "matmul", "output"]
    assert max_rel_err(interpret(g, *norm_matmul.random_inputs()),
                       norm_matmul.reference(*norm_matmul.random_inputs())) < 1e-12


def test_with_shapes_retraces_at_the_new_shapes():
    bigger = norm_matmul.with_shapes(X=(16, 32), W=(32, 5))
    assert bigger.shapes == {"X": (16, 32), "W": (32, 5)}
    assert norm_matmul.shapes == {"X": (4, 8), "W": (8, 3)}
    assert bigger.__wrapped__ is norm_matmul.__wrapped__
    assert [d.value for d in bigger.graph.shape(bigger.graph.outputs[0])] == [16, 5]
    partial = norm_matmul.with_shapes(W=(8, 7))
    assert partial.shapes == {"X": (4, 8), "W": (8, 7)}
    with pytest.raises(ShapeError, match="Y is not a parameter"):
        norm_matmul.with_shapes(Y=(1,))


def test_functional_form_and_redecoration():
    def f(x):
        return x.exp()

    w = workload(f, x=(3,))
    assert w.shapes == {"x": (3,)} and w.__wrapped__ is f
    again = workload(x=(5,))(w)
    assert again.__wrapped__ is f and again.shapes == {"x": (5,)}


def test_random_inputs_are_reproducible_float64_and_scaled():
    a, b = norm_matmul.random_inputs(seed=3), norm_matmul.random_inputs(seed=3)
    assert [x.shape for x in a] == [(4, 8), (8, 3)]
    assert all(x.dtype == np.float64 for x in a)
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    small = norm_matmul.with_input_scale(W=0.1)
    assert small.input_scale == {"X": 1.0, "W": 0.1}
    np.testing.assert_allclose(small.random_inputs(seed=3)[1], a[1] * 0.1)


def test_reference_runs_torch_in_float64_on_numpy_or_torch():
    xs = norm_matmul.random_inputs()
    (from_numpy,) = norm_matmul.reference(*xs)
    (from_torch,) = norm_matmul.reference(*[torch.from_numpy(x).float() for x in xs])
    assert from_numpy.dtype == np.float64 and from_numpy.shape == (4, 3)
    want = (xs[0] / np.sqrt((xs[0] ** 2).mean(-1, keepdims=True))) @ xs[1]
    np.testing.assert_allclose(from_numpy, want, rtol=1e-12)
    np.testing.assert_allclose(from_torch, want, rtol=1e-5)
    with pytest.raises(InputError, match="takes 2 inputs"):
        norm_matmul.reference(xs[0])
    with pytest.raises(InputError, match=r"input W has shape \(3, 8\)"):
        norm_matmul.reference(xs[0], xs[1].T)


def test_reference_of_a_tuple_returning_function():
    @workload(x=(2, 3))
    def two(x):
        return x.exp(), x * 2.0

    outs = two.reference(np.ones((2, 3)))
    assert len(outs) == 2
    np.testing.assert_allclose(outs[1], 2.0)


@pytest.mark.parametrize("shapes, fragment", [
    ({"X": (1, 2, 3, 4, 5), "W": (5, 3)}, "parameter X has rank 5"),
    ({"X": (4, 0), "W": (8, 3)}, "parameter X has dimension 0"),
    ({"X": (4, -1), "W": (8, 3)}, "parameter X has dimension -1"),
    ({"X": (4, 8)}, "parameter W has no shape"),
    ({"X": (4, 8), "W": (8, 3), "Z": (1,)}, "Z is not a parameter"),
    ({"X": "4x8", "W": (8, 3)}, "give a tuple of positive ints"),
    ({"X": (4, "n"), "W": (8, 3)}, "give a tuple of positive ints"),
])
def test_bad_shapes_are_refused_at_decoration(shapes, fragment):
    with pytest.raises(ShapeError, match=fragment) as info:
        workload(**shapes)(norm_matmul.__wrapped__)
    assert "\n" not in str(info.value)
    assert str(info.value).startswith("workload norm_matmul: ")


def test_missing_and_extra_are_named_together():
    with pytest.raises(ShapeError, match="parameter W has no shape; Z is not a parameter"):
        workload(X=(4, 8), Z=(1,))(norm_matmul.__wrapped__)


def test_star_args_are_refused():
    with pytest.raises(ShapeError, match=r"\*xs cannot be given a shape"):
        workload(x=(2,))(lambda x, *xs: x)


def test_tracing_errors_surface_from_graph():
    @workload(x=(2, 3))
    def tan(x):
        return torch.tan(x)

    with pytest.raises(UnsupportedOpError,
                       match=r"workload tan: torch\.tan at test_workloads\.py:\d+ is not "
                             r"supported"):
        _ = tan.graph


# -- the nine -------------------------------------------------------------------------------------

def test_registry_order_and_default():
    assert list(WORKLOADS) == NAMES
    assert DEFAULT_WORKLOAD in WORKLOADS
    assert all(get_workload(n) is WORKLOADS[n] for n in NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_traced_graph_matches_torch(name):
    w = get_workload(name)
    arrays = w.random_inputs(seed=1)
    got = interpret(w.graph, *arrays)
    want = w.reference(*arrays)
    assert all(np.isfinite(x).all() for x in want)
    assert max_rel_err(got, want) < 1e-9
    assert w.graph.name == name and w.graph.inputs == list(w.shapes)


@pytest.mark.parametrize("name", NAMES)
def test_catalogue_entry(name):
    w = get_workload(name)
    assert w.name == name and w.description and w.program
    assert "\n" not in w.description + w.program
    assert w.shape_sets[0] == w.shapes
    assert all(list(s) == list(w.shapes) for s in w.shape_sets)
    assert set(w.input_scale) == set(w.shapes)


@pytest.mark.parametrize("name", NAMES)
def test_every_shape_set_traces(name):
    w = get_workload(name)
    for shapes in w.shape_sets:
        graph = w.with_shapes(**shapes).graph
        assert {t: tuple(d.value for d in graph.shape(t)) for t in graph.inputs} == shapes


def test_shape_sets_follow_design_tables():
    assert len(get_workload("rmsnorm_matmul").shape_sets) == 5
    assert get_workload("swiglu").shape_sets[-1] == {"X": (16, 4096), "Wgate": (4096, 4096),
                                                     "Wup": (4096, 4096)}
    # (b, h, q, kv, d) = (2, 8, 128, 1024, 128): Q[b, h·q, d], K[b, d, h·kv], V[b, h·kv, d]
    assert get_workload("attention").shape_sets[1] == {"Q": (2, 1024, 128), "K": (2, 128, 8192),
                                                       "V": (2, 8192, 128)}
    assert len(get_workload("qknorm_attention").shape_sets) == 4
    assert len(get_workload("lora").shape_sets) == 1


def test_attention_inputs_are_scaled_for_exp():
    for name in ("attention", "qknorm_attention", "gqa"):
        assert get_workload(name).input_scale == {"Q": 0.1, "K": 0.1, "V": 1.0}


def test_unknown_workload_lists_the_known_names():
    with pytest.raises(UnknownWorkloadError) as info:
        get_workload("rmsnorm_matmull")
    message = str(info.value)
    assert "did you mean rmsnorm_matmul?" in message
    assert all(n in message for n in NAMES) and "\n" not in message
    with pytest.raises(UnknownWorkloadError, match="known workloads: rmsnorm_matmul, "):
        get_workload("transformer")


# -- the safe variants ---------------------------------------------------------------------------

def _sdpa_oracle(name, q, k, v):
    """torch's own F.scaled_dot_product_attention in float64 (rms_norm on Q for qknorm), with
    the plain workloads' K layout [b, d, keys] given as [b, keys, d]."""
    q, k, v = (torch.from_numpy(np.asarray(a)) for a in (q, k, v))
    if name.startswith("qknorm"):
        q = F.rms_norm(q, (q.shape[-1],), eps=0.0)
    return F.scaled_dot_product_attention(q, k, v).numpy()


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_safe_variant_is_torch_s_attention_and_the_plain_program_plus_the_shift(name):
    w = get_workload(name)
    assert name not in WORKLOADS and w.name == name
    arrays = w.random_inputs(seed=1)
    got = w.graph.to_user(interpret(w.graph, *w.graph.to_ir(arrays)))[0]
    want = _sdpa_oracle(name, *arrays)
    assert np.abs(got - want).max() <= 1e-12 * np.abs(want).max()
    plain = WORKLOADS[name.removesuffix("_safe")].graph
    kinds = [op.kind for op in w.graph.ops if op.kind not in ("input", "output")]
    plain_kinds = [op.kind for op in plain.ops if op.kind not in ("input", "output")]
    # the plain program with the scale and the max subtracted; the same IR inputs
    assert [k for k in kinds if k not in ("mul_scalar", "max", "sub")] == plain_kinds
    assert [plain.shape(t) for t in plain.inputs] == [w.graph.shape(t) for t in w.graph.inputs]


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_safe_variant_stays_finite_where_the_plain_form_overflows(name):
    """Logits in the thousands (K scaled up, and Q where no norm undoes it): the safe program
    is finite and torch's; the plain workload's program overflows exp, and inf / inf is nan."""
    w = get_workload(name)
    q, k, v = w.random_inputs(seed=2)
    q, k = q * (1 if name.startswith("qknorm") else 10), k * 1000
    got = w.graph.to_user(interpret(w.graph, *w.graph.to_ir([q, k, v])))[0]
    assert np.isfinite(got).all()
    want = _sdpa_oracle(name, q, k, v)
    assert np.abs(got - want).max() <= 1e-9 * np.abs(want).max()
    plain = WORKLOADS[name.removesuffix("_safe")].graph
    with np.errstate(all="ignore"):
        out = interpret(plain, q, np.swapaxes(k, -1, -2), v)[0]
    assert np.isnan(out).any()


def test_workloads_json_is_a_json_listing():
    rows = json.loads(json.dumps(workloads_json()))
    assert [r["name"] for r in rows] == NAMES
    row = rows[0]
    assert row["params"] == {"X": [8, 1024], "W": [1024, 1024]}
    assert row["program"] == "rms_norm(X[n,d]) @ W[d,d]"
    assert row["shape_sets"][2] == {"X": [8, 4096], "W": [4096, 4096]}


def test_importing_and_listing_workloads_does_not_import_torch():
    code = ("import sys, prism.workloads as w; w.workloads_json(); w.get_workload('gqa'); "
            "assert 'torch' not in sys.modules, 'torch was imported'")
    subprocess.run([sys.executable, "-c", code], check=True)
