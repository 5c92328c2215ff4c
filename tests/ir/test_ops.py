"""The op table: every op has every entry, and every reference semantics agrees with torch."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from prism.ir.dims import const
from prism.ir.ops import OPS, infer_shape

REQUIRED = ("name", "category", "levels", "arity", "doc")


def test_every_op_has_every_entry():
    for name, od in OPS.items():
        assert od.name == name
        for field in REQUIRED:
            assert getattr(od, field) not in (None, "", frozenset()), (name, field)
        if od.category in ("io", "custom"):
            continue
        assert od.shape is not None, name
        if od.category == "accum":
            assert od.accumulation is not None and "block" in od.levels, name
        else:
            assert od.reference is not None, name
        assert od.mirage or name == "mean", name  # Mirage has no kernel mean op


rng = np.random.default_rng(7)
A = rng.standard_normal((3, 4, 5))
B = rng.standard_normal((3, 5, 6))
P = rng.uniform(0.5, 2.0, (3, 4, 5))
T = torch.from_numpy

TORCH = {
    "exp": (lambda a: torch.exp(a), [A]),
    "silu": (lambda a: F.silu(a), [A]),
    "relu": (lambda a: F.relu(a), [A]),
    "gelu": (lambda a: F.gelu(a), [A]),
    "sqrt": (lambda a: torch.sqrt(a), [P]),
    "square": (lambda a: torch.square(a), [A]),
    "add": (lambda a, b: a + b, [A, A[:, :1, :]]),
    "mul": (lambda a, b: a * b, [A, A[:, :, :1]]),
    "div": (lambda a, b: a / b, [A, P]),
    "pow": (lambda a, b: torch.pow(a, b), [P, A]),
    "matmul": (lambda a, b: a @ b, [A, B]),
    "rms_norm": (lambda a: F.rms_norm(a, (a.shape[-1],), eps=0.0), [A]),
}


@pytest.mark.parametrize("name", sorted(TORCH))
def test_reference_matches_torch(name):
    fn, args = TORCH[name]
    want = fn(*[T(a) for a in args]).numpy()
    got = OPS[name].reference(args, {}, 0)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
    shape = infer_shape(name, [tuple(const(s) for s in a.shape) for a in args], {})
    assert tuple(d.value for d in shape) == want.shape


@pytest.mark.parametrize("name", ["sum", "mean"])
@pytest.mark.parametrize("axis", [0, 1, 2])
def test_reductions_keep_the_dim(name, axis):
    want = getattr(torch, name)(T(A), dim=axis, keepdim=True).numpy()
    np.testing.assert_allclose(OPS[name].reference([A], {"dim": axis}, 0), want, rtol=1e-12)


def test_mul_scalar():
    np.testing.assert_allclose(OPS["mul_scalar"].reference([A], {"scalar": 0.25}, 0), A * 0.25)


def test_reductions_skip_leading_block_axes():
    stacked = rng.standard_normal((2, 3, 4, 5))  # one leading grid axis
    got = OPS["sum"].reference([stacked], {"dim": 1}, 1)
    np.testing.assert_allclose(got, stacked.sum(axis=2, keepdims=True))
