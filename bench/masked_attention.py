"""Masked attention as model code writes it, optimized end to end (issue 19, item 1).

Two programs a user brings: a decoder's causal prefill (`is_causal=True`) and a batch of padded
sequences decoding against 8,192 cached keys with a boolean padding mask. Each is optimized with
the default pipeline (cost model: H100, the budget below) and its winner checked against torch in
Triton's interpreter. Prints one line a program: the winner, its kernels, its modeled latency,
the check and the modeled eager baseline.

    TRITON_INTERPRET=1 .venv/bin/python bench/masked_attention.py [--budget 600]
"""

from __future__ import annotations

import argparse
import json
import time

import torch.nn.functional as F

import prism


@prism.workload(Q=(4, 256, 64), K=(4, 256, 64), V=(4, 256, 64))
def causal_prefill(Q, K, V):
    return F.scaled_dot_product_attention(Q, K, V, is_causal=True)


@prism.workload(Q=(2, 8, 128), K=(2, 8192, 128), V=(2, 8192, 128), keep=(8, 8192),
                bool_inputs=("keep",))
def padded_decode(Q, K, V, keep):
    return F.scaled_dot_product_attention(Q, K, V, attn_mask=keep)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=600.0)
    args = parser.parse_args()
    for w in (causal_prefill, padded_decode):
        started = time.time()
        result = prism.superoptimize(w, budget_s=args.budget, compile_ptx=False)
        doc = result.to_json()
        best = doc["best"]
        print(w.name, f"{time.time() - started:.0f} s",
              json.dumps({k: best.get(k) for k in ("candidate", "num_kernels", "latency_us",
                                                   "latency_kind", "verdict")}),
              "check", best["check"]["status"], best["check"].get("max_rel_err_vs_torch"),
              "baseline", json.dumps(doc["baseline"]), flush=True)


if __name__ == "__main__":
    main()
