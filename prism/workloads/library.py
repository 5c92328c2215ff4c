"""The nine named workloads of DESIGN.md §5, as torch functions with their default shapes, and
the numerically safe variants of the three attention workloads (`*_safe`).

The first five are Prism's evaluation (fp16 there; float64 here, for the oracle), the last four
Mirage's benchmarks. Each carries its program text for listings and the shape sets it is studied
at (the first is the default). Attention-like workloads draw Q and K with σ = 0.1 so that exp of
Q @ K stays far from overflow even in fp16.

torch is imported inside the function bodies only: importing this module stays cheap, and
torch.fx traces the bodies all the same.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from prism.frontend.workload import Workload, workload

if TYPE_CHECKING:
    from torch import Tensor

ShapeSet = Mapping[str, Sequence[int]]

# Prism's shapes: (n, d) for the LLM blocks, (b, h, q, kv, d) for attention.
LLM_SHAPES = [(8, 1024), (8, 2048), (8, 4096), (16, 1024), (16, 4096)]
ATTENTION_SHAPES = [(2, 8, 1, 1024, 128), (2, 8, 128, 1024, 128), (2, 32, 1, 1024, 128),
                    (4, 8, 1, 1024, 128)]


def _llm_sets(*weights: str) -> list[ShapeSet]:
    """X[n, d] and each weight [d, d], for every (n, d) of Prism's table."""
    return [{"X": (n, d), **{w: (d, d) for w in weights}} for n, d in LLM_SHAPES]


def _attention_sets() -> list[ShapeSet]:
    """Q[b, h·q, d], K[b, d, h·kv], V[b, h·kv, d], for every (b, h, q, kv, d) of Prism's table."""
    return [{"Q": (b, h * q, d), "K": (b, d, h * kv), "V": (b, h * kv, d)}
            for b, h, q, kv, d in ATTENTION_SHAPES]


def _entry(program: str, shape_sets: list[ShapeSet] | None = None,
           **input_scale: float) -> Callable[[Workload], Workload]:
    """Catalogue a workload: its program text, shape sets and input scales."""
    def annotate(w: Workload) -> Workload:
        return w.replace(program=program, shape_sets=shape_sets or [w.shapes],
                         input_scale=input_scale)
    return annotate


def _rms_norm(x: Tensor) -> Tensor:
    """RMSNorm over the last dim without weight, and with epsilon 0: Prism's and Mirage's
    rms_norm, which their kernels compute (torch's default would add its dtype's epsilon)."""
    from torch.nn import functional as F
    return F.rms_norm(x, (x.shape[-1],), eps=0.0)


def _silu(x: Tensor) -> Tensor:
    from torch.nn import functional as F
    return F.silu(x)


# -- Prism's five ---------------------------------------------------------------------------------

@_entry("rms_norm(X[n,d]) @ W[d,d]", _llm_sets("W"))
@workload(X=(8, 1024), W=(1024, 1024))
def rmsnorm_matmul(X: Tensor, W: Tensor) -> Tensor:
    """RMSNorm, then a matmul: Prism's running example."""
    return _rms_norm(X) @ W


@_entry("(rms_norm(X) @ Wup) * (rms_norm(X) @ Wgate)", _llm_sets("Wup", "Wgate"))
@workload(X=(8, 1024), Wup=(1024, 1024), Wgate=(1024, 1024))
def rmsnorm_mlp(X: Tensor, Wup: Tensor, Wgate: Tensor) -> Tensor:
    """RMSNorm feeding a gated MLP's two projections, multiplied."""
    return (_rms_norm(X) @ Wup) * (_rms_norm(X) @ Wgate)


@_entry("silu(X @ Wgate) * (X @ Wup)", _llm_sets("Wgate", "Wup"))
@workload(X=(8, 1024), Wgate=(1024, 1024), Wup=(1024, 1024))
def swiglu(X: Tensor, Wgate: Tensor, Wup: Tensor) -> Tensor:
    """SwiGLU: a SiLU-gated pair of projections."""
    return _silu(X @ Wgate) * (X @ Wup)


@_entry("E = exp(Q @ K); (E / sum(E, -1)) @ V", _attention_sets(), Q=0.1, K=0.1)
@workload(Q=(2, 8, 128), K=(2, 128, 8192), V=(2, 8192, 128))
def attention(Q: Tensor, K: Tensor, V: Tensor) -> Tensor:
    """Attention as exp, row-sum, div and matmul: softmax(Q K) V without max-subtraction."""
    E = (Q @ K).exp()
    return (E / E.sum(-1, keepdim=True)) @ V


@_entry("E = exp(rms_norm(Q) @ K); (E / sum(E, -1)) @ V", _attention_sets(), Q=0.1, K=0.1)
@workload(Q=(2, 8, 128), K=(2, 128, 8192), V=(2, 8192, 128))
def qknorm_attention(Q: Tensor, K: Tensor, V: Tensor) -> Tensor:
    """Attention with RMSNorm over d on Q first, as Prism's own example does."""
    E = (_rms_norm(Q) @ K).exp()
    return (E / E.sum(-1, keepdim=True)) @ V


# -- Mirage's four --------------------------------------------------------------------------------

@_entry("silu(X @ W1) * (X @ W2)")
@workload(X=(8, 4096), W1=(4096, 4096), W2=(4096, 4096))
def gated_mlp(X: Tensor, W1: Tensor, W2: Tensor) -> Tensor:
    """Mirage's gated MLP: a SiLU-gated pair of projections."""
    return _silu(X @ W1) * (X @ W2)


@_entry("X @ W + (X @ A) @ B")
@workload(X=(16, 256), W=(256, 4096), A=(256, 16), B=(16, 4096))
def lora(X: Tensor, W: Tensor, A: Tensor, B: Tensor) -> Tensor:
    """Mirage's LoRA: a projection plus its rank-16 update."""
    return X @ W + (X @ A) @ B


@_entry("E = exp(Q @ K); (E / sum(E, -1)) @ V", Q=0.1, K=0.1)
@workload(Q=(2, 256, 64), K=(2, 64, 4096), V=(2, 4096, 64))
def gqa(Q: Tensor, K: Tensor, V: Tensor) -> Tensor:
    """Mirage's group-query attention: exp, row-sum, div and matmul."""
    E = (Q @ K).exp()
    return (E / E.sum(-1, keepdim=True)) @ V


@_entry("rms_norm(X + alpha * (rms_norm(H) + X))")
@workload(H=(8, 4096), X=(8, 4096), alpha=(8, 4096))
def ntrans(H: Tensor, X: Tensor, alpha: Tensor) -> Tensor:
    """Mirage's nTrans block: a normalised residual update."""
    return _rms_norm(X + alpha * (_rms_norm(H) + X))


# -- the safe variants: attention as practitioners write it ---------------------------------------
# softmax with the row max subtracted and the 1/√d scale, as torch computes it: one logit above
# about 11 overflows fp16's exp in the plain form, none does here. K is [b, keys, d], as
# F.scaled_dot_product_attention takes it (the IR reads it transposed, as the plain forms' K).

@_entry("softmax(Q Kᵀ / √d) V  (F.scaled_dot_product_attention)", Q=0.1, K=0.1)
@workload(Q=(2, 8, 128), K=(2, 8192, 128), V=(2, 8192, 128))
def attention_safe(Q: Tensor, K: Tensor, V: Tensor) -> Tensor:
    """`attention` with the max-subtracted softmax and the 1/√d scale:
    F.scaled_dot_product_attention."""
    import torch.nn.functional as F
    return F.scaled_dot_product_attention(Q, K, V)


@_entry("softmax(rms_norm(Q) Kᵀ / √d) V", Q=0.1, K=0.1)
@workload(Q=(2, 8, 128), K=(2, 8192, 128), V=(2, 8192, 128))
def qknorm_attention_safe(Q: Tensor, K: Tensor, V: Tensor) -> Tensor:
    """`qknorm_attention` with the max-subtracted softmax and the 1/√d scale (d = 128), spelled
    with torch.softmax."""
    import torch
    return torch.softmax(_rms_norm(Q) @ K.transpose(-2, -1) / 128 ** 0.5, dim=-1) @ V


@_entry("S = Q Kᵀ / √d; E = exp(S − max(S, -1)); (E / sum(E, -1)) V", Q=0.1, K=0.1)
@workload(Q=(2, 256, 64), K=(2, 4096, 64), V=(2, 4096, 64))
def gqa_safe(Q: Tensor, K: Tensor, V: Tensor) -> Tensor:
    """`gqa` with the max-subtracted softmax written by hand and the 1/√d scale (d = 64)."""
    S = Q @ K.transpose(-2, -1) / 64 ** 0.5
    E = (S - S.amax(-1, keepdim=True)).exp()
    return (E / E.sum(-1, keepdim=True)) @ V
