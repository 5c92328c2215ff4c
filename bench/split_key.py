"""Split-key attention in the search (issue 17, item 4): what the search finds with split closes,
and where a split-key program of gqa stands against its roofline bound.

    .venv/bin/python bench/split_key.py [--budget S] [--json OUT]

Cases (each in this process, one after another; latencies are modeled, H100):
- `tiny_attention`: softmax(Q K) V at Q[1, 16, 16], K[1, 16, 256], V[1, 256, 16], the split-close
  search of `tests/search/test_split_closes.py` (two custom kernels, two outputs a block,
  matmul / exp / div, nored / red_ld_sum / redtox_ld_sum, five block ops, two grid dims), stopped
  at 2,500 families: its split candidates by verdict and the best modeled one;
- `gqa_written`: gqa's split-key program written with the builder in the form a split close
  makes (kernel 1 grid (b, s, r) stores exp(QK)V and the row sums concatenated over s; kernel 2
  grid (b, r2) sums them with redtox_ld_sum and red_ld_sum and divides): the verdict, the best
  modeled latency over the tuner's power-of-two sizes, and its ratio to the roofline bound;
- `gqa_search`: gqa searched with the same kind of config for `--budget` seconds: the best
  modeled program and whether any split-key program was reached.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

import prism
from prism.bench import provenance
from prism.cost import get_device, modeled, roofline_us
from prism.frontend.builder import Block, Graph
from prism.ir.spec import substitute_graph
from prism.search import SearchConfig, driver
from prism.search.audit import best_assignment
from prism.verify.equiv import verify
from prism.workloads import WORKLOADS

H100 = get_device("h100")
SPLIT = SearchConfig(max_custom_kernels=2, max_block_outputs=2, max_block_ops=5,
                     max_accumulators=2, grid_dims=(2,), block_ops=("matmul", "exp", "div"),
                     accumulators=("nored", "red_ld_sum", "redtox_ld_sum"), budget_s=600)


@prism.workload(Q=(1, 16, 16), K=(1, 16, 256), V=(1, 256, 16))
def tiny_attention(Q, K, V):
    e = torch.exp(Q @ K)
    return (e / e.sum(-1, keepdim=True)) @ V


def gqa_split_key(b: int = 2, n: int = 256, d: int = 64, keys: int = 4096) -> Any:
    g = Graph()
    Q, K, V = g.input("Q", (b, n, d)), g.input("K", (b, d, keys)), g.input("V", (b, keys, d))
    k1 = Block(grid=(b, "s", "r"), forloop_range=1)
    q = k1.input(Q, imap=(0, -1, 1), fmap=-1)
    k = k1.input(K, imap=(0, 2, -1), fmap=2)
    v = k1.input(V, imap=(0, 1, -1), fmap=1)
    e = k1.apply("exp", k1.apply("matmul", q, k))
    num, den = k1.accum(k1.apply("matmul", e, v)), k1.accum(e, "red_ld_sum")
    k1.output(num, omap=(0, 2, 1))
    k1.output(den, omap=(0, 2, 1))
    parts, sums = g.customized(k1)
    k2 = Block(grid=(b, "r2"), reduction_dimx=d)
    pn, pd = k2.input(parts, imap=(0, 1), fmap=-1), k2.input(sums, imap=(0, 1), fmap=-1)
    k2.output(k2.apply("div", k2.accum(pn, "redtox_ld_sum"), k2.accum(pd, "red_ld_sum")),
              omap=(0, 1))
    (o,) = g.customized(k2)
    g.output(o)
    return g.build()


def _split(graph: Any) -> bool:
    """A kernel tensor whose shape names a grid size: partial sums of a split close."""
    return any(d.free_vars() for name, shape in graph.tensors if name.startswith("t")
               for d in shape)


def _searched(case: str, target: Any, config: SearchConfig) -> dict[str, Any]:
    start = time.process_time()
    result = driver.search(target, config)
    cpu = time.process_time() - start
    split = [c for c in result.candidates if _split(c.graph)]
    best = result.best
    best_split = min((c for c in split if c.modeled_us is not None
                      and c.verdict.verdict == "equivalent"),
                     key=lambda c: c.modeled_us or 0.0, default=None)
    s = result.summary()
    roof = roofline_us(target, H100)
    return {"case": case, "cpu_seconds": round(cpu, 1), "stop_reason": s["stop_reason"],
            "families": s["families"]["generated"], "candidates": len(result.candidates),
            "split_candidates": dict(Counter(c.verdict.verdict for c in split)),
            "best_modeled_us": round(best.modeled_us, 3) if best and best.modeled_us else None,
            "best_kernels": best.num_kernels if best else None,
            "best_split_modeled_us": round(best_split.modeled_us, 3) if best_split
            and best_split.modeled_us else None,
            "roofline_us": round(roof, 3), "latency_kind": "modeled"}


def _written() -> dict[str, Any]:
    target, program = WORKLOADS["gqa"].graph, gqa_split_key()
    verdict = verify(target, program)
    best = best_assignment(program, H100)
    roof = roofline_us(target, H100)
    row: dict[str, Any] = {"case": "gqa_written", "verdict": verdict.verdict,
                           "sizes": verdict.sizes, "roofline_us": round(roof, 3),
                           "latency_kind": "modeled"}
    if best is not None:
        cost = modeled(substitute_graph(program, best[1]), H100)
        row.update(modeled_us=round(best[0], 3), ratio=round(best[0] / roof, 3),
                   assignment=best[1],
                   kernels=[{"name": k.name, "latency_us": round(k.latency_us, 3),
                             "hbm_bytes": k.hbm_bytes} for k in cost.kernels])
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=float, default=300.0, help="gqa_search seconds")
    ap.add_argument("--json", type=Path, help="write the rows here")
    args = ap.parse_args(argv)
    rows = [_searched("tiny_attention", tiny_attention.graph,
                      replace(SPLIT, max_families=2500)),
            _written(),
            _searched("gqa_search", WORKLOADS["gqa"].graph,
                      replace(SPLIT, budget_s=args.budget))]
    for row in rows:
        print(json.dumps(row))
    if args.json:
        args.json.write_text(json.dumps({"provenance": provenance(), "argv": sys.argv[1:],
                                         "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
