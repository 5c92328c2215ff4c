"""The op table: every op has every entry, and every reference semantics agrees with torch."""

import math
import string

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from prism.ir.dims import const
from prism.ir.ops import OPS, POLY, REDUCE, RESCALED, infer_shape, with_defaults

REQUIRED = ("name", "category", "levels", "arity", "doc")
COMPUTE = sorted(n for n, od in OPS.items() if od.compute)


def test_every_op_has_every_entry():
    for name, od in OPS.items():
        assert od.name == name
        for field in REQUIRED:
            assert getattr(od, field) not in (None, "", frozenset()), (name, field)
        if od.category in ("io", "custom"):
            continue
        assert od.shape is not None, name
        if od.category == "accum":
            # a one-operand fold, or the online-softmax accumulator (a tile and its row max),
            # which the interpreter, verifier and code generator handle by name
            assert (od.accumulation is not None) == (name not in RESCALED), name
            assert od.arity == (2 if name in RESCALED else 1) and "block" in od.levels, name
            assert od.structural, name
            continue
        assert od.reference is not None, name
        # code: a Triton lowering of its own or the generator's, and a torch form
        assert (od.triton is None) == od.structural, name
        assert od.torch, name
        # the solver: polynomial, a reduction, a piecewise term, or uninterpreted (None)
        assert od.smt in (POLY, REDUCE, None) or callable(od.smt), name
        # every attribute reaches the verifier's term, which has the op's atoms
        atoms = {a for a in od.term_attrs if a != "last"}
        assert atoms == set(od.attrs) | set(od.optional), name
        assert od.flops >= 1, name


def test_every_template_names_only_its_operands_and_attributes():
    for name in COMPUTE:
        od = OPS[name]
        for template in (od.triton, od.torch):
            if not isinstance(template, str):
                continue
            fields = {f for _, f, _, _ in string.Formatter().parse(template) if f}
            allowed = {str(i) for i in range(od.arity)} | set(od.attrs) | set(od.optional)
            assert {f.split("!")[0].split(".")[0] for f in fields} <= allowed, (name, template)


rng = np.random.default_rng(7)
A = rng.standard_normal((3, 4, 5)) * 3
B = rng.standard_normal((3, 5, 6))
P = rng.uniform(0.5, 2.0, (3, 4, 5))
T = torch.from_numpy

TORCH = {
    "exp": (lambda a: torch.exp(a), [A], {}),
    "silu": (lambda a: F.silu(a), [A], {}),
    "relu": (lambda a: F.relu(a), [A], {}),
    "gelu": (lambda a: F.gelu(a), [A], {}),
    "gelu_tanh": (lambda a: F.gelu(a, approximate="tanh"), [A], {}),
    "sqrt": (lambda a: torch.sqrt(a), [P], {}),
    "square": (lambda a: torch.square(a), [A], {}),
    "neg": (lambda a: -a, [A], {}),
    "reciprocal": (lambda a: torch.reciprocal(a), [P], {}),
    "sigmoid": (lambda a: torch.sigmoid(a), [A], {}),
    "tanh": (lambda a: torch.tanh(a), [A], {}),
    "abs": (lambda a: torch.abs(a), [A], {}),
    "log": (lambda a: torch.log(a), [P], {}),
    "softplus": (lambda a: F.softplus(a), [np.concatenate([A, A * 10], -1)], {}),
    "leaky_relu": (lambda a: F.leaky_relu(a, 0.1), [A], {"slope": 0.1}),
    "clamp": (lambda a: torch.clamp(a, -1.0, 2.0), [A], {"lo": -1.0, "hi": 2.0}),
    "add": (lambda a, b: a + b, [A, A[:, :1, :]], {}),
    "sub": (lambda a, b: a - b, [A, A[:, :, :1]], {}),
    "mul": (lambda a, b: a * b, [A, A[:, :, :1]], {}),
    "div": (lambda a, b: a / b, [A, P], {}),
    "pow": (lambda a, b: torch.pow(a, b), [P, A], {}),
    "maximum": (lambda a, b: torch.maximum(a, b), [A, A[:, :1, :]], {}),
    "minimum": (lambda a, b: torch.minimum(a, b), [A, A[:, :1, :]], {}),
    "matmul": (lambda a, b: a @ b, [A, B], {}),
    "mul_scalar": (lambda a: a * 0.25, [A], {"scalar": 0.25}),
    "add_scalar": (lambda a: a - 1.5, [A], {"scalar": -1.5}),
    "rms_norm": (lambda a: F.rms_norm(a, (a.shape[-1],), eps=0.0), [A], {}),
    "layer_norm": (lambda a: F.layer_norm(a, (a.shape[-1],), eps=1e-5), [A], {"eps": 1e-5}),
}


def test_every_compute_op_is_checked_against_torch():
    reductions = {n for n in COMPUTE if OPS[n].category == "reduce"}
    assert set(COMPUTE) - reductions == set(TORCH)


@pytest.mark.parametrize("name", sorted(TORCH))
def test_reference_matches_torch(name):
    fn, args, attrs = TORCH[name]
    want = fn(*[T(a) for a in args]).numpy()
    got = OPS[name].reference(args, attrs, 0)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
    shape = infer_shape(name, [tuple(const(s) for s in a.shape) for a in args], attrs)
    assert tuple(d.value for d in shape) == want.shape


REDUCTIONS = {"sum": lambda t, d: torch.sum(t, d, keepdim=True),
              "mean": lambda t, d: torch.mean(t, d, keepdim=True),
              "max": lambda t, d: torch.amax(t, d, keepdim=True),
              "min": lambda t, d: torch.amin(t, d, keepdim=True),
              "logsumexp": lambda t, d: torch.logsumexp(t, d, keepdim=True)}


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
@pytest.mark.parametrize("axis", [0, 1, 2])
def test_reductions_keep_the_dim(name, axis):
    want = REDUCTIONS[name](T(A * 40), axis).numpy()     # large values: logsumexp stays finite
    np.testing.assert_allclose(OPS[name].reference([A * 40], {"dim": axis}, 0), want,
                               rtol=1e-12)


def test_rms_norm_epsilon_makes_a_zero_row_zero():
    x = np.zeros((2, 8))
    x[1] = rng.standard_normal(8)
    eps = float(torch.finfo(torch.float32).eps)
    want = F.rms_norm(T(x), (8,), eps=eps).numpy()
    got = OPS["rms_norm"].reference([x], {"eps": eps}, 0)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert np.isfinite(got).all() and (got[0] == 0).all()
    assert np.isnan(OPS["rms_norm"].reference([x], {}, 0)[0]).all()   # Mirage's, eps 0
    assert with_defaults("rms_norm", {}) == {"eps": 0.0}


def test_attribute_checks():
    shape = [(const(2), const(3))]
    for kind, bad in (("clamp", {"lo": math.nan, "hi": None}), ("leaky_relu", {"slope": "x"}),
                      ("rms_norm", {"eps": -1.0}), ("add_scalar", {"scalar": math.inf})):
        with pytest.raises(Exception, match="attribute"):
            infer_shape(kind, shape, bad)
    assert infer_shape("clamp", shape, {"lo": None, "hi": 1.0}) == shape[0]


def test_reductions_skip_leading_block_axes():
    stacked = rng.standard_normal((2, 3, 4, 5))  # one leading grid axis
    got = OPS["sum"].reference([stacked], {"dim": 1}, 1)
    np.testing.assert_allclose(got, stacked.sum(axis=2, keepdims=True))
