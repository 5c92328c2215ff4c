"""The launcher's helpers that the op table's lowerings call.

Each op's Triton expression (inside a custom kernel) and torch form (a pre-defined kernel op in
the launcher) are entries of the op table (`prism.ir.ops.OpDef.triton`, `.torch`); the ops that
reduce over a dim need the tile's true sizes and a mask, so the code generator lowers them
itself (`OpDef.structural`, `prism.instantiate.codegen`). Here are the helper functions those
lowerings name, which the generated module includes when it uses them.

Pre-defined kernel ops run as one torch call, one kernel launch, each, on the operands as they
are (fp16): torch computes fp16 elementwise ops, matmuls and reductions in fp32 and rounds once,
as the Triton kernels do. rms_norm has no one-kernel torch form whose launches are the same on
every device and build (F.rms_norm is seven aten ops on a CPU build of torch 2.13), so it is the
launcher's `_rms_norm` (RMS_NORM_HELPER): three launches without epsilon, six with one, which the
cost model charges.
"""

from __future__ import annotations

# x / sqrt(mean(x², last dim) + eps) for the launcher: three launches, six with an epsilon.
RMS_NORM_HELPER = '''\
def _rms_norm(x, eps):
    """x / sqrt(mean(x², last dim) + eps): the rows' norms (read in x's dtype, summed in fp32),
    their scaling to the root mean square (with eps: squared, scaled, eps added, square-rooted,
    in place on the norms), and the division (in fp32, written in x's dtype)."""
    rms = torch.linalg.vector_norm(x, dim=-1, keepdim=True, dtype=torch.float32)
    if eps:
        rms.square_().mul_(1.0 / x.shape[-1]).add_(eps).sqrt_()
    else:
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
