"""Mirage's fingerprint arithmetic over Z_p × Z_q (p = 167, q = 83), as an interpreter semantics.

Mirage's probabilistic verifier (REFERENCE.md §2.4) runs both programs on the same random inputs
over a finite ring and compares the outputs exactly; `MODULAR` is that ring for
`prism.ir.interpret`, in NumPy int64 on the CPU.

**Representation.** A value is a pair of residues (x mod p, x mod q), stored CRT-packed as one
int64 in [0, pq) with pq = 13861, exactly as Mirage stores it; `residues` and `pack` convert.
Since Z_pq ≅ Z_p × Z_q as rings, addition and multiplication mod pq *are* the residue-wise ones.

**Operators.**
- add, mul, square, sum, matmul, the accumulators' sums, the sum over blocks: exact, mod pq.
- div: a · b⁻¹ per residue, with b⁻¹ = b^(r−2) mod r. That maps 0 to 0, where Mirage's table
  maps 0 to 1. We choose 0 ↦ 0 because x ↦ x^(r−2) is multiplicative on all of Z_r, so
  1/(ab) = (1/a)(1/b) and (x/r)·w = (x·w)/r hold even when a residue vanishes; with 0 ↦ 1 they
  fail there, and two equivalent programs could differ on a (1/83-likely) zero residue.
- mul_scalar: the float constant is read as the exact fraction n/d it is and maps to n · d⁻¹.
- exp: the q-residue e of x gives 3^e mod p in the p-component (3 has order 83 mod 167), the
  q-component is 0. So exp(a + b) = exp(a) · exp(b): exp is a homomorphism (Z_q, +) → (Z_p*, ·).
- silu ≈ x·e^x and gelu ≈ x·e^(2x), as Mirage fingerprints them: (e · 3^e mod p, 0) and
  (e · 3^(2e) mod p, 0) with e the q-residue.
- relu: max(r // 2, x mod r) per residue; abs, leaky_relu and logsumexp thresholds of their own;
  sigmoid, tanh, gelu_tanh, softplus and log exp-times-residue surrogates of other scales; clamp,
  maximum, minimum, max and min the min / max of residues. Consistent surrogates, not the real
  functions: every identity of the axiom table about them (they commute with moving data) holds
  for the surrogates too.
- neg, sub, add_scalar: exact; layer_norm by its definition; an epsilon is the fraction it is.
- sqrt: b^((r+1)/4) mod r per residue (167 ≡ 83 ≡ 3 mod 4): a true square root of quadratic
  residues only, but a multiplicative map everywhere, so √(ab) = √a·√b.
- mean divides the sum by n (n⁻¹ mod r, 0 if r | n); rms_norm is x / √(mean(x²)); red_ld_rms is
  √(Σx² / (width · F)); red_ld_mean is Σx / (width · F).
- pow has no fingerprint (exponents do not live in Z_pq); it raises `VerifyError`.

**What this is exact for.** Two programs built from +, ·, sums and matmuls, divisions, constants
and exponentials of such expressions ("LAX": linear algebra plus single-level exponentiation)
that are equal as real functions by those laws — ring identities, a/b = a·b⁻¹, exp(a+b) =
exp(a)·exp(b) — get equal fingerprints on every input; unequal LAX programs get unequal ones
except with small probability over the random inputs (Schwartz–Zippel; the bound of Mirage's ITCS
paper), which repeated trials shrink. Elsewhere it is a heuristic: nested exp degenerates (its
argument's q-component is 0, so exp(exp(x)) = 3^0 = 1); silu, gelu and relu are surrogates, so
identities of the real functions (silu(x) = x·sigmoid(x), relu(x) = max(x, 0)) do not hold;
sqrt is a real square root only of quadratic residues, so √(x²) need not be x; and identities
needing x/x = 1 fail where x has a zero residue.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np

from prism.errors import InputError, VerifyError
from prism.ir.ops import Accumulation, Attrs, Reference
from prism.ir.semantics import Semantics, check_input_shape

P, Q = 167, 83
PQ = P * Q
TO_P = 13695   # ≡ 1 mod p, ≡ 0 mod q: the CRT idempotent of the p-component
TO_Q = 167     # ≡ 0 mod p, ≡ 1 mod q: the CRT idempotent of the q-component
EXP_BASE = 3   # order exactly q mod p

_FLOAT_EXACT = 2**53   # float64 holds every integer below this exactly


def _power_table(modulus: int, exponent: int) -> np.ndarray:
    return np.array([pow(b, exponent, modulus) for b in range(modulus)], dtype=np.int64)


INV_P, INV_Q = _power_table(P, P - 2), _power_table(Q, Q - 2)                # b⁻¹, 0 ↦ 0
SQRT_P, SQRT_Q = _power_table(P, (P + 1) // 4), _power_table(Q, (Q + 1) // 4)
EXP_P = np.array([pow(EXP_BASE, e, P) for e in range(Q)], dtype=np.int64)    # 3^e mod p

assert pow(EXP_BASE, Q, P) == 1 and all(pow(EXP_BASE, e, P) != 1 for e in range(1, Q))
assert TO_P % P == 1 and TO_P % Q == 0 and TO_Q % P == 0 and TO_Q % Q == 1


# -- the representation ----------------------------------------------------------------------------

def pack(rp: Any, rq: Any) -> np.ndarray:
    """The element of Z_pq with residues (rp mod p, rq mod q)."""
    return (np.asarray(rp, dtype=np.int64) % P * TO_P
            + np.asarray(rq, dtype=np.int64) % Q * TO_Q) % PQ


def residues(x: Any) -> tuple[np.ndarray, np.ndarray]:
    """(x mod p, x mod q)."""
    a = np.asarray(x, dtype=np.int64)
    return a % P, a % Q


def random_inputs(shapes: list[tuple[int, ...]], seed: int = 0) -> list[np.ndarray]:
    """One array per shape, uniform over Z_pq (so each residue pair is uniform), reproducible."""
    rng = np.random.default_rng(seed)
    return [rng.integers(0, PQ, size=shape, dtype=np.int64) for shape in shapes]


def field_inverse(x: Any) -> np.ndarray:
    """x⁻¹ per residue, 0 ↦ 0."""
    rp, rq = residues(x)
    return pack(INV_P[rp], INV_Q[rq])


def field_constant(c: float | int) -> int:
    """The rational c = n/d as n · d⁻¹ in Z_pq (a float is the exact fraction it holds)."""
    f = Fraction(c)
    return int((f.numerator % PQ) * field_inverse(f.denominator % PQ)) % PQ


def _convert(arr: Any, name: str, shape: tuple[int, ...]) -> np.ndarray:
    if hasattr(arr, "detach"):  # a torch tensor, without importing torch here
        arr = arr.detach().cpu().numpy()
    a = np.asarray(arr)
    check_input_shape(a, name, shape)
    if a.dtype.kind in "iub":
        return a.astype(np.int64) % PQ
    if a.dtype.kind == "f" and np.all(np.isfinite(a)) and np.all(a == np.round(a)):
        return a.astype(np.int64) % PQ
    raise InputError(f"input {name} holds non-integer values; the modular semantics takes "
                     "integers (residues mod 13861), e.g. from prism.verify.modular.random_inputs")


# -- the operators ---------------------------------------------------------------------------------

def mod_add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a + b) % PQ


def mod_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a * b % PQ   # both < pq: the product fits int64 easily


def mod_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return mod_mul(a, field_inverse(b))


def mod_exp(x: np.ndarray) -> np.ndarray:
    return pack(EXP_P[x % Q], 0)


def mod_sqrt(x: np.ndarray) -> np.ndarray:
    rp, rq = residues(x)
    return pack(SQRT_P[rp], SQRT_Q[rq])


def _exp_times_residue(x: np.ndarray, scale: int) -> np.ndarray:
    """(e · 3^(scale·e) mod p, 0) for e = x mod q: Mirage's silu (scale 1) and gelu (2)."""
    e = x % Q
    return pack(e * EXP_P[scale * e % Q] % P, 0)


def mod_relu(x: np.ndarray) -> np.ndarray:
    rp, rq = residues(x)
    return pack(np.maximum(P // 2, rp), np.maximum(Q // 2, rq))


def mod_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Exact A @ B mod pq: in float64 (BLAS) while every partial sum stays below 2^53."""
    if a.shape[-1] * (PQ - 1) ** 2 < _FLOAT_EXACT:
        out = np.matmul(a.astype(np.float64), b.astype(np.float64))
        return out.astype(np.int64) % PQ
    return np.matmul(a, b) % PQ


def mod_sum(x: np.ndarray, axis: int) -> np.ndarray:
    return x.sum(axis=axis, keepdims=True) % PQ


def mod_mean(x: np.ndarray, axis: int) -> np.ndarray:
    return mod_mul(mod_sum(x, axis), field_inverse(x.shape[axis]))


def mod_rms(x: np.ndarray, eps: float = 0.0) -> np.ndarray:
    """√(mean(x², last dim) + eps)."""
    return mod_sqrt(mod_add(mod_mean(mod_mul(x, x), -1), np.asarray(field_constant(eps))))


def _layer_norm(x: np.ndarray, eps: float) -> np.ndarray:
    centred = mod_add(x, mod_mul(mod_mean(x, -1), np.asarray(field_constant(-1))))
    return mod_div(centred, mod_rms(centred, eps))


def _threshold(x: np.ndarray, k: int) -> np.ndarray:
    """max(r // k, x mod r) per residue: relu's surrogate with another threshold."""
    rp, rq = residues(x)
    return pack(np.maximum(P // k, rp), np.maximum(Q // k, rq))


def _clamp(x: np.ndarray, attrs: Attrs) -> np.ndarray:
    """min(max(x, lo), hi) per residue, the bounds as residues (a consistent surrogate)."""
    rs = list(residues(x))
    for bound, pick in ((attrs["lo"], np.maximum), (attrs["hi"], np.minimum)):
        if bound is not None:
            bp, bq = residues(np.asarray(field_constant(bound)))
            rs = [pick(rs[0], bp), pick(rs[1], bq)]
    return pack(*rs)


def _row(fn: Callable[..., np.ndarray], x: np.ndarray, axis: int) -> np.ndarray:
    """A reduction's surrogate: `fn` of each residue along the axis."""
    return pack(*[fn(r, axis=axis, keepdims=True) for r in residues(x)])


def _pow(xs: list[np.ndarray], attrs: Attrs, lead: int) -> np.ndarray:
    raise VerifyError("pow has no modular fingerprint (exponents do not live in Z_pq); "
                      "check this graph with random_test (float64) instead")


def _unary(fn: Callable[[np.ndarray], np.ndarray]) -> Reference:
    return lambda xs, attrs, lead: fn(xs[0])


def _binary(fn: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Reference:
    return lambda xs, attrs, lead: fn(xs[0], xs[1])


COMPUTE: dict[str, Reference] = {
    "exp": _unary(mod_exp),
    "silu": _unary(lambda x: _exp_times_residue(x, 1)),
    "gelu": _unary(lambda x: _exp_times_residue(x, 2)),
    "relu": _unary(mod_relu),
    "sqrt": _unary(mod_sqrt),
    "square": _unary(lambda x: mod_mul(x, x)),
    "add": _binary(mod_add),
    "mul": _binary(mod_mul),
    "div": _binary(mod_div),
    "pow": _pow,
    "mul_scalar": lambda xs, attrs, lead: mod_mul(xs[0], np.asarray(field_constant(
        attrs["scalar"]))),
    "sum": lambda xs, attrs, lead: mod_sum(xs[0], lead + attrs["dim"]),
    "mean": lambda xs, attrs, lead: mod_mean(xs[0], lead + attrs["dim"]),
    "rms_norm": lambda xs, attrs, lead: mod_div(xs[0], mod_rms(xs[0], attrs.get("eps", 0.0))),
    "matmul": _binary(mod_matmul),
    # exact: −x, a − b, x + c, and layer_norm by its definition
    "neg": _unary(lambda x: mod_mul(x, np.asarray(field_constant(-1)))),
    "reciprocal": _unary(field_inverse),
    "sub": _binary(lambda a, b: mod_add(a, mod_mul(b, np.asarray(field_constant(-1))))),
    "add_scalar": lambda xs, attrs, lead: mod_add(xs[0], np.asarray(field_constant(
        attrs["scalar"]))),
    "layer_norm": lambda xs, attrs, lead: _layer_norm(xs[0], attrs.get("eps", 0.0)),
    # consistent surrogates, as Mirage's silu and gelu are
    "sigmoid": _unary(lambda x: _exp_times_residue(x, 3)),
    "tanh": _unary(lambda x: _exp_times_residue(x, 4)),
    "gelu_tanh": _unary(lambda x: _exp_times_residue(x, 5)),
    "softplus": _unary(lambda x: _exp_times_residue(x, 6)),
    "log": _unary(lambda x: _exp_times_residue(x, 7)),
    "abs": _unary(lambda x: _threshold(x, 3)),
    "leaky_relu": lambda xs, attrs, lead: _threshold(mod_mul(xs[0], np.asarray(
        field_constant(attrs["slope"]))), 5),
    "clamp": lambda xs, attrs, lead: _clamp(xs[0], attrs),
    "maximum": _binary(lambda a, b: pack(*[np.maximum(x, y) for x, y in
                                             zip(residues(a), residues(b), strict=True)])),
    "minimum": _binary(lambda a, b: pack(*[np.minimum(x, y) for x, y in
                                             zip(residues(a), residues(b), strict=True)])),
    "max": lambda xs, attrs, lead: _row(np.max, xs[0], lead + attrs["dim"]),
    "min": lambda xs, attrs, lead: _row(np.min, xs[0], lead + attrs["dim"]),
    "logsumexp": lambda xs, attrs, lead: _threshold(mod_sum(mod_exp(xs[0]),
                                                            lead + attrs["dim"]), 7),
}


def _redtox_step(x: np.ndarray, attrs: Attrs) -> np.ndarray:
    rdx = int(attrs["dimx"])
    return x.reshape(*x.shape[:-1], x.shape[-1] // rdx, rdx).sum(axis=-2) % PQ


def _last_sum(x: np.ndarray, attrs: Attrs) -> np.ndarray:
    return mod_sum(x, -1)


def _reduce(total: np.ndarray, width: int, attrs: Attrs) -> np.ndarray:
    return total % PQ


# Each step is reduced mod pq, so the interpreter's plain sum over F iterations stays far below
# the int64 limit; finish reduces that sum.
ACCUMULATE: dict[str, Accumulation] = {
    "nored": Accumulation(lambda x, a: x, _reduce),
    "red_ld_sum": Accumulation(_last_sum, _reduce),
    "red_ld_mean": Accumulation(_last_sum, lambda t, w, a: mod_mul(t % PQ, field_inverse(w))),
    "red_ld_rms": Accumulation(lambda x, a: mod_sum(mod_mul(x, x), -1),
                               lambda t, w, a: mod_sqrt(mod_add(
                                   mod_mul(t % PQ, field_inverse(w)),
                                   np.asarray(field_constant(a.get("eps", 0.0)))))),
    "redtox_ld_sum": Accumulation(_redtox_step, _reduce),
}

MODULAR = Semantics(
    name="modular",
    convert=_convert,
    compute=COMPUTE,
    accumulate=ACCUMULATE,
    sum_blocks=lambda tiles, axes: tiles.sum(axis=axes) % PQ,
)
