"""How each op of the op table becomes code: a Triton expression inside a custom kernel and a torch
expression for a pre-defined kernel op in the launcher.

Both tables are keyed by the op table's names; `tests/instantiate/test_codegen.py` checks that
every compute op has both entries. Operands are fp32 values (`{0}`, `{1}`); attributes are
formatted in by name (`{dim}`, `{scalar}`). Reductions and norms need the tile's true (unpadded)
sizes and a mask, so the code generator lowers them itself (`prism.instantiate.codegen`); here
they name the helper that does it.
"""

from __future__ import annotations

# Elementwise ops inside a kernel body: exact lowerings (silu is x·sigmoid(x), not sigmoid).
TRITON_ELEMENTWISE: dict[str, str] = {
    "exp": "tl.exp({0})",
    "silu": "{0} * tl.sigmoid({0})",
    "relu": "tl.maximum({0}, 0.0)",
    "gelu": "0.5 * {0} * (1.0 + tl.erf({0} * 0.7071067811865476))",  # x·Φ(x), exact
    "sqrt": "tl.sqrt({0})",
    "square": "{0} * {0}",
    "add": "{0} + {1}",
    "mul": "{0} * {1}",
    "div": "{0} / {1}",
    "pow": "_pow({0}, {1})",
    "mul_scalar": "{0} * {scalar!r}",
}

# Ops whose padded lanes stay 0 when their operands' do (f(0) = 0, and 0 ∘ 0 = 0).
KEEPS_ZERO = frozenset({"silu", "relu", "gelu", "sqrt", "square", "add", "mul", "mul_scalar",
                        "matmul", "sum", "nored", "red_ld_sum", "redtox_ld_sum"})

# Ops the generator lowers itself (they reduce over a dim, so they need sizes and masks).
TRITON_STRUCTURAL = frozenset({"matmul", "sum", "mean", "rms_norm", "nored", "red_ld_sum",
                               "red_ld_mean", "red_ld_rms", "redtox_ld_sum"})

# Pre-defined kernel ops in the launcher, on fp32 torch tensors.
TORCH_KERNEL: dict[str, str] = {
    "matmul": "torch.matmul({0}, {1})",
    "exp": "torch.exp({0})",
    "silu": "{0} * torch.sigmoid({0})",
    "relu": "torch.relu({0})",
    "gelu": "torch.nn.functional.gelu({0})",
    "sqrt": "torch.sqrt({0})",
    "square": "{0} * {0}",
    "add": "{0} + {1}",
    "mul": "{0} * {1}",
    "div": "{0} / {1}",
    "pow": "torch.pow({0}, {1})",
    "mul_scalar": "{0} * {scalar!r}",
    "sum": "{0}.sum(dim={dim}, keepdim=True)",
    "mean": "{0}.mean(dim={dim}, keepdim=True)",
    "rms_norm": "{0} / torch.sqrt(({0} * {0}).mean(dim=-1, keepdim=True))",
}

# x^y for real x, y as numpy defines it: negative bases only with integer exponents, 0^0 = 1.
# (libdevice's pow has no interpreter implementation, so it is spelled out.)
POW_HELPER = '''\
@triton.jit
def _pow(a, b):
    """a ** b: |a|^b, negated for a negative base and an odd exponent, nan for a negative base
    and a fractional exponent, 1 for b = 0."""
    r = tl.exp2(b * tl.log2(tl.abs(a)))
    whole = tl.floor(b) == b
    odd = whole & (tl.floor(b * 0.5) * 2.0 != b)
    r = tl.where(a < 0, tl.where(whole, tl.where(odd, -r, r), float("nan")), r)
    return tl.where(b == 0, 1.0, r)
'''
