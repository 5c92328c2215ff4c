"""How each op of the op table becomes code: a Triton expression inside a custom kernel and a torch
expression for a pre-defined kernel op in the launcher.

Both tables are keyed by the op table's names; `tests/instantiate/test_codegen.py` checks that
every compute op has both entries. Operands (`{0}`, `{1}`) are fp32 values in a kernel and
tensors in the inputs' dtype in the launcher; attributes are formatted in by name (`{dim}`,
`{scalar}`). Reductions and norms need the tile's true (unpadded) sizes and a mask, so the code
generator lowers them itself (`prism.instantiate.codegen`); here they name the helper that does
it.
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

# Pre-defined kernel ops in the launcher: one torch call, one kernel launch, each, on the operands
# as they are (fp16). torch computes fp16 elementwise ops, matmuls and reductions in fp32 and
# rounds once, as the Triton kernels do. rms_norm has no one-kernel torch form whose launches are
# the same on every device and build (F.rms_norm is seven aten ops on a CPU build of torch 2.13),
# so it is the launcher's `_rms_norm` (RMS_NORM_HELPER): three launches, which the cost model
# charges.
TORCH_KERNEL: dict[str, str] = {
    "matmul": "torch.matmul({0}, {1})",
    "exp": "torch.exp({0})",
    "silu": "torch.nn.functional.silu({0})",
    "relu": "torch.relu({0})",
    "gelu": "torch.nn.functional.gelu({0})",
    "sqrt": "torch.sqrt({0})",
    "square": "torch.square({0})",
    "add": "torch.add({0}, {1})",
    "mul": "torch.mul({0}, {1})",
    "div": "torch.div({0}, {1})",
    "pow": "torch.pow({0}, {1})",
    "mul_scalar": "torch.mul({0}, {scalar!r})",
    "sum": "torch.sum({0}, dim={dim}, keepdim=True)",
    "mean": "torch.mean({0}, dim={dim}, keepdim=True)",
    "rms_norm": "_rms_norm({0})",
}

# x / sqrt(mean(x², last dim)) for the launcher, in three launches.
RMS_NORM_HELPER = '''\
def _rms_norm(x):
    """x / sqrt(mean(x², last dim)) in three launches: the rows' norms (read in x's dtype,
    summed in fp32), their scaling to the root mean square, and the division (in fp32, written
    in x's dtype)."""
    rms = torch.linalg.vector_norm(x, dim=-1, keepdim=True, dtype=torch.float32)
    rms.mul_(x.shape[-1] ** -0.5)
    return torch.div(x, rms, out=_alloc(x.shape, x.dtype, x.device))
'''

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
