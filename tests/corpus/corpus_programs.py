"""The programs users bring: small blocks written the way model code is written, at small shapes.

Each entry is (function, shapes, kind): `kind` says what the optimizer must make of it —
`epilogue` (a matmul and an elementwise epilogue: bias, scalars, residual; one fused kernel,
modeled faster than eager), `partial` (an op no block can hold at these shapes: it stays a
pre-defined kernel and the rest is fused, modeled faster than eager), or `any` (a correct
kernel, fused or partly fused). The functions
use torch's own spellings (F.linear, addmm, .T, keepdim=False, tuples of dims, scalars on either
side); the shapes are small so that the search and the interpreter stay quick. `MODULES` are
`nn.Module` blocks, traced with `prism.workload.from_module` in their own dtype (float32 as
`nn.Module` makes them, or bf16 after `.to(torch.bfloat16)`); programs run in fp16 unless their
entry names bf16 or fp32, as model code chooses.

`tests/corpus/test_corpus.py` traces every program and checks it against torch in float64, and
optimizes a sample end to end; `bench/corpus.py` optimizes all of them and prints the table the
programs issue asks for.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

M, K, N = 8, 64, 32
VOCAB = 32768          # a vocabulary's logits: 8 rows of them are 512 KiB in fp16
X = {"X": (M, K)}
XW = {"X": (M, K), "W": (K, N)}


class Program(NamedTuple):
    fn: Callable[..., Any]
    shapes: dict[str, tuple[int, ...]]
    kind: str = "any"
    dtype: str = "float16"       # what the program runs in (`prism.workload(dtype=...)`)
    bool_inputs: tuple[str, ...] = ()   # parameters that are torch.bool masks


class Module(NamedTuple):
    make: Callable[[], nn.Module]
    shape: tuple[int, ...]       # the example input's
    dtype: str = "float32"       # the module's and its input's (nn.Module's default)


def _program(fn: Callable[..., Any], shapes: dict[str, tuple[int, ...]],
             kind: str = "any", dtype: str = "float16",
             bool_inputs: tuple[str, ...] = ()) -> Program:
    return Program(fn, shapes, kind, dtype, bool_inputs)


# -- Linear layers with biases and activations ---------------------------------------------------

def linear_bias_relu(X, W, B):
    return torch.relu(X @ W + B)


def linear_bias_gelu(X, W, B):
    return F.gelu(F.linear(X, W, B))


def linear_bias_silu_2d_bias(X, W, B):
    return F.silu(X @ W + B)


def addmm_tanh(B, X, W):
    return torch.tanh(torch.addmm(B, X, W))


def linear_sigmoid(X, W):
    return torch.sigmoid(X @ W)


def linear_leaky_relu(X, W, B):
    return F.leaky_relu(X @ W + B, negative_slope=0.1)


def linear_gelu_tanh(X, W):
    return F.gelu(X @ W, approximate="tanh")


def linear_relu6(X, W, B):
    return F.relu6(X @ W + B)


def linear_softplus(X, W):
    return F.softplus(X @ W)


def linear_transposed_weight(X, W):
    return F.relu(X @ W.T)


# -- scaling and residual epilogues --------------------------------------------------------------

def scaled_relu(X, W, B):
    return torch.relu((X @ W + B) * 1.5)


def silu_times_two(X, W):
    return F.silu(X @ W) * 2.0


def gelu_over_four(X, W):
    return F.gelu(X @ W / 4)


def half_plus_residual(X, W, R):
    return (X @ W) * 0.5 + R


def residual_minus(X, W, R):
    return R - X @ W


def scalar_shift(X, W):
    return 1.0 - torch.sigmoid(X @ W)


def clamp_epilogue(X, W):
    return torch.clamp(X @ W, min=-1.0, max=1.0)


def abs_epilogue(X, W):
    return torch.abs(X @ W) + 0.1


def maximum_with_residual(X, W, R):
    return torch.maximum(X @ W, R)


# -- gated MLPs ------------------------------------------------------------------------------------

def swiglu(X, Wg, Wu):
    return F.silu(X @ Wg) * (X @ Wu)


def geglu_with_biases(X, Wg, Wu, Bg, Bu):
    return F.gelu(X @ Wg + Bg) * (X @ Wu + Bu)


# -- norms before a projection ---------------------------------------------------------------------

def rmsnorm_eps_weight_proj(X, G, W):
    return F.rms_norm(X, (X.shape[-1],), G, eps=1e-6) @ W


def rmsnorm_by_hand(X, W):
    return (X * torch.rsqrt(X.pow(2).mean(-1, keepdim=True) + 1e-6)) @ W


def residual_rmsnorm_proj(X, R, W):
    h = X + R
    return F.rms_norm(h, (h.shape[-1],), eps=1e-5) @ W


def layernorm_proj(X, G, Bn, W):
    return F.layer_norm(X, (X.shape[-1],), G, Bn, eps=1e-5) @ W


def layernorm_no_affine(X):
    return F.layer_norm(X, (X.shape[-1],))


# -- softmax, log-softmax and normalisation --------------------------------------------------------

def safe_softmax(X):
    return torch.softmax(X, dim=-1)


def log_softmax(X):
    return F.log_softmax(X, dim=-1)


def softmax_of_logits(X, W):
    return F.softmax(X @ W, dim=-1)


def l2_normalise(X):
    return X / torch.linalg.vector_norm(X, dim=-1, keepdim=True)


def l2_normalise_norm(X):
    return X / torch.norm(X, dim=-1, keepdim=True)


def row_mean_centre(X):
    return X - X.mean(-1, keepdim=True)


def logsumexp_rows(X):
    return torch.logsumexp(X, dim=-1)


def row_max(X):
    return X.amax(dim=-1, keepdim=True)


# -- losses ----------------------------------------------------------------------------------------

def mse(P, T):
    return ((P - T) ** 2).mean()


def mse_loss(P, T):
    return F.mse_loss(P, T)


def hinge(P, T):
    return torch.clamp(1.0 - P * T, min=0.0).mean()


def smooth_l1_like(P, T):
    d = torch.abs(P - T)
    return torch.minimum(d, d * d).sum(dim=(0, 1))


def cross_entropy_over_logits(X, Y):
    # Y one-hot: −Σ y · log_softmax(x), averaged over rows
    return -(Y * F.log_softmax(X, dim=-1)).sum(-1).mean()


# -- attention -------------------------------------------------------------------------------------

def attention_scaled(Q, Kt, V):
    d = Q.shape[-1]
    return torch.softmax(Q @ Kt / math.sqrt(d), dim=-1) @ V


def attention_transposed_keys(Q, Kk, V):
    return torch.softmax((Q @ Kk.T) * (Q.shape[-1] ** -0.5), dim=-1) @ V


def attention_sdpa_long_context(Q, K, V):
    # decoding 4 query rows against 8,192 cached keys: a row of K is 256 KiB in fp16, more than
    # a block holds, so only the streamed or split programs of issue 19 fit
    return F.scaled_dot_product_attention(Q, K, V)


def attention_max_subtracted_by_hand(Q, K, V):
    S = Q @ K.transpose(-2, -1) * Q.shape[-1] ** -0.5
    P = (S - S.amax(dim=-1, keepdim=True)).exp()
    return (P / P.sum(dim=-1, keepdim=True)) @ V


def attention_causal(Q, K, V):
    # a decoder's prefill: each query attends to the keys up to its own position
    return F.scaled_dot_product_attention(Q, K, V, is_causal=True)


def attention_padding_mask(Q, K, V, keep):
    # a batch of padded sequences: `keep` (torch.bool) is False at the padding keys
    return F.scaled_dot_product_attention(Q, K, V, attn_mask=keep)


def attention_masked_fill_by_hand(Q, K, V, pad):
    # the same, written as older model code does: `pad` (torch.bool) is True at the padding
    S = Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1))
    return torch.softmax(S.masked_fill(pad, float("-inf")), dim=-1) @ V


def attention_additive_mask(Q, K, V, bias):
    # an additive float mask (ALiBi-like biases, or 0 / -inf)
    return F.scaled_dot_product_attention(Q, K, V, attn_mask=bias)


# -- reductions over rows and columns after a projection ------------------------------------------

def pooled_relu_projection(X, W, B):
    # a bias row meets a sum over the rows: the padded rows of the tile must not count
    return torch.relu(X @ W + B).sum(dim=0)


def mean_pool_then_project(X, W):
    return X.mean(0, keepdim=True) @ W


def logits_minus_row_max(X, W, B):
    y = X @ W + B
    return y - y.amax(dim=-1, keepdim=True)


def column_softmax(X, W):
    return torch.softmax(X @ W, dim=0)


def vocab_logsumexp(X, W, B):
    # a row of 32,768 logits is more than a block's shared memory holds: the logsumexp stays a
    # pre-defined kernel, the projection, bias and relu are fused
    return torch.logsumexp(torch.relu(X @ W + B), dim=-1)


def vocab_max_logit(X, W):
    return torch.amax(F.gelu(X @ W), dim=-1)


# -- batched activations times a shared weight -----------------------------------------------------

def batched_linear_gelu(X, W):
    return F.gelu(X @ W)


PROGRAMS: dict[str, Program] = {
    "linear_bias_relu": _program(linear_bias_relu, {**XW, "B": (N,)}, "epilogue"),
    "linear_bias_gelu": _program(linear_bias_gelu, {"X": (M, K), "W": (N, K), "B": (N,)},
                                 "epilogue"),
    "linear_bias_silu_2d_bias": _program(linear_bias_silu_2d_bias, {**XW, "B": (1, N)},
                                         "epilogue"),
    "addmm_tanh": _program(addmm_tanh, {"B": (N,), **XW}, "epilogue"),
    "linear_sigmoid": _program(linear_sigmoid, XW, "epilogue"),
    "linear_leaky_relu": _program(linear_leaky_relu, {**XW, "B": (N,)}, "epilogue"),
    "linear_gelu_tanh": _program(linear_gelu_tanh, XW, "epilogue"),
    "linear_relu6": _program(linear_relu6, {**XW, "B": (N,)}, "epilogue"),
    "linear_softplus": _program(linear_softplus, XW, "epilogue"),
    "linear_transposed_weight": _program(linear_transposed_weight, {"X": (M, K), "W": (N, K)},
                                         "epilogue"),
    "scaled_relu": _program(scaled_relu, {**XW, "B": (1, N)}, "epilogue"),
    "silu_times_two": _program(silu_times_two, XW, "epilogue"),
    "gelu_over_four": _program(gelu_over_four, XW, "epilogue"),
    "half_plus_residual": _program(half_plus_residual, {**XW, "R": (M, N)}, "epilogue"),
    "residual_minus": _program(residual_minus, {**XW, "R": (M, N)}, "epilogue"),
    "scalar_shift": _program(scalar_shift, XW, "epilogue"),
    "clamp_epilogue": _program(clamp_epilogue, XW, "epilogue"),
    "abs_epilogue": _program(abs_epilogue, XW, "epilogue"),
    "maximum_with_residual": _program(maximum_with_residual, {**XW, "R": (M, N)}, "epilogue"),
    "swiglu": _program(swiglu, {"X": (M, K), "Wg": (K, N), "Wu": (K, N)}),
    "geglu_with_biases": _program(geglu_with_biases, {"X": (M, K), "Wg": (K, N), "Wu": (K, N),
                                                      "Bg": (N,), "Bu": (N,)}),
    "rmsnorm_eps_weight_proj": _program(rmsnorm_eps_weight_proj, {"X": (M, K), "G": (K,),
                                                                  "W": (K, N)}),
    "rmsnorm_by_hand": _program(rmsnorm_by_hand, XW),
    "residual_rmsnorm_proj": _program(residual_rmsnorm_proj, {"X": (M, K), "R": (M, K),
                                                              "W": (K, N)}),
    "layernorm_proj": _program(layernorm_proj, {"X": (M, K), "G": (K,), "Bn": (K,),
                                                "W": (K, N)}),
    "layernorm_no_affine": _program(layernorm_no_affine, X),
    "safe_softmax": _program(safe_softmax, X),
    "log_softmax": _program(log_softmax, X),
    "softmax_of_logits": _program(softmax_of_logits, XW),
    "l2_normalise": _program(l2_normalise, X),
    "l2_normalise_norm": _program(l2_normalise_norm, X),
    "row_mean_centre": _program(row_mean_centre, X),
    "logsumexp_rows": _program(logsumexp_rows, X),
    "row_max": _program(row_max, X),
    "mse": _program(mse, {"P": (M, N), "T": (M, N)}),
    "mse_loss": _program(mse_loss, {"P": (M, N), "T": (M, N)}),
    "hinge": _program(hinge, {"P": (M, N), "T": (M, N)}),
    "smooth_l1_like": _program(smooth_l1_like, {"P": (M, N), "T": (M, N)}),
    "cross_entropy_over_logits": _program(cross_entropy_over_logits, {"X": (M, N), "Y": (M, N)}),
    "attention_scaled": _program(attention_scaled, {"Q": (16, 32), "Kt": (32, 16),
                                                    "V": (16, 32)}),
    "attention_transposed_keys": _program(attention_transposed_keys, {"Q": (16, 32),
                                                                      "Kk": (16, 32),
                                                                      "V": (16, 32)}),
    "attention_sdpa_long_context": _program(attention_sdpa_long_context,
                                            {"Q": (1, 4, 16), "K": (1, 8192, 16),
                                             "V": (1, 8192, 16)}),
    "attention_max_subtracted_by_hand": _program(attention_max_subtracted_by_hand,
                                                 {"Q": (2, 8, 16), "K": (2, 256, 16),
                                                  "V": (2, 256, 16)}),
    "attention_causal": _program(attention_causal, {"Q": (2, 16, 16), "K": (2, 16, 16),
                                                    "V": (2, 16, 16)}),
    "attention_padding_mask": _program(attention_padding_mask,
                                       {"Q": (2, 8, 16), "K": (2, 64, 16), "V": (2, 64, 16),
                                        "keep": (8, 64)}, bool_inputs=("keep",)),
    "attention_masked_fill_by_hand": _program(attention_masked_fill_by_hand,
                                              {"Q": (2, 8, 16), "K": (2, 64, 16),
                                               "V": (2, 64, 16), "pad": (8, 64)},
                                              bool_inputs=("pad",)),
    "attention_additive_mask": _program(attention_additive_mask,
                                        {"Q": (2, 8, 16), "K": (2, 64, 16), "V": (2, 64, 16),
                                         "bias": (8, 64)}),
    "batched_linear_gelu": _program(batched_linear_gelu, {"X": (2, 4, K), "W": (K, N)},
                                    "epilogue"),
    "pooled_relu_projection": _program(pooled_relu_projection, {**XW, "B": (N,)}),
    "mean_pool_then_project": _program(mean_pool_then_project, XW),
    "logits_minus_row_max": _program(logits_minus_row_max, {**XW, "B": (N,)}),
    "column_softmax": _program(column_softmax, XW),
    "vocab_logsumexp": _program(vocab_logsumexp, {"X": (M, K), "W": (K, VOCAB),
                                                  "B": (VOCAB,)}, "partial"),
    "vocab_max_logit": _program(vocab_max_logit, {"X": (M, K), "W": (K, VOCAB)}, "partial"),
    # the same programs in the dtypes model code runs in
    "linear_bias_relu_bf16": _program(linear_bias_relu, {**XW, "B": (N,)}, "epilogue",
                                      "bfloat16"),
    "linear_bias_gelu_fp32": _program(linear_bias_gelu, {"X": (M, K), "W": (N, K), "B": (N,)},
                                      "epilogue", "float32"),
    "swiglu_bf16": _program(swiglu, {"X": (M, K), "Wg": (K, N), "Wu": (K, N)},
                            dtype="bfloat16"),
    "rmsnorm_eps_weight_proj_bf16": _program(rmsnorm_eps_weight_proj,
                                             {"X": (M, K), "G": (K,), "W": (K, N)},
                                             dtype="bfloat16"),
    "softmax_of_logits_fp32": _program(softmax_of_logits, XW, dtype="float32"),
}


class GatedMLP(nn.Module):
    """An RMSNorm, then down(silu(gate(h)) · up(h)) and a residual: a Llama MLP block."""

    def __init__(self, d: int = 16, h: int = 32) -> None:
        super().__init__()
        self.norm = nn.RMSNorm(d, eps=1e-6)
        self.gate = nn.Linear(d, h, bias=False)
        self.up = nn.Linear(d, h, bias=False)
        self.down = nn.Linear(h, d, bias=False)

    def forward(self, x):
        h = self.norm(x)
        return self.down(F.silu(self.gate(h)) * self.up(h)) + x


class LinearGelu(nn.Module):
    """nn.Linear with a bias, then nn.GELU."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(K, N)
        self.act = nn.GELU()

    def forward(self, x):
        return self.act(self.fc(x))


MODULES: dict[str, Module] = {
    "module_linear_gelu": Module(LinearGelu, (M, K)),
    "module_gated_mlp": Module(GatedMLP, (M, 16)),
    "module_sequential": Module(lambda: nn.Sequential(nn.Linear(K, N), nn.SiLU()), (M, K)),
    "module_layernorm": Module(lambda: nn.LayerNorm(K), (M, K)),
    "module_linear_gelu_bf16": Module(lambda: LinearGelu().to(torch.bfloat16), (M, K),
                                      "bfloat16"),
    "module_gated_mlp_bf16": Module(lambda: GatedMLP().to(torch.bfloat16), (M, 16), "bfloat16"),
}
