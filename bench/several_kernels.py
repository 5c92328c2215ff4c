"""Searches of several custom kernels (issue 17, item 4): kernel-by-kernel verification against
verifying each member whole, and branch and bound with and without the one-kernel seed.

    .venv/bin/python bench/several_kernels.py [--budget S] [--json OUT]

Cases (each a search in this process, one after another, CPU seconds of this process):
- `mlp2`: relu(X W1) W2 at X[4, 16], blocks of at most two inputs (so two kernels), matmul and
  relu, at most 3 block ops, one grid dim; `whole` verifies every member as one program, as the
  search did before; the sets of equivalent programs must be the same;
- `mlp3`: relu(relu(X W1) W2) W3 at X[4, 16], blocks of up to four inputs, matmul and relu,
  two custom kernels allowed; `unseeded` starts branch and bound without the seed;
- `mlp3_512`: the same at X[8, 512], W[512, 512] (and W3[512, 128]), matmul, relu, div, mul,
  within the budget.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any
from unittest import mock

import torch

import prism
from prism.bench import provenance
from prism.ir.serialize import graph_to_json
from prism.search import SearchConfig, driver, search


@prism.workload(X=(4, 16), W1=(16, 32), W2=(32, 8))
def mlp2(X, W1, W2):
    return torch.relu(X @ W1) @ W2


@prism.workload(X=(4, 16), W1=(16, 32), W2=(32, 32), W3=(32, 8))
def mlp3(X, W1, W2, W3):
    return torch.relu(torch.relu(X @ W1) @ W2) @ W3


@prism.workload(X=(8, 512), W1=(512, 512), W2=(512, 512), W3=(512, 128))
def mlp3_512(X, W1, W2, W3):
    return torch.relu(torch.relu(X @ W1) @ W2) @ W3


def _keys(result: Any) -> set[str]:
    return {json.dumps(graph_to_json(replace(c.graph, name="")), sort_keys=True)
            for c in result.equivalent}


def _row(case: str, how: str, result: Any, cpu: float) -> dict[str, Any]:
    s = result.summary()
    best = result.best
    return {"case": case, "how": how, "cpu_seconds": round(cpu, 2),
            "exhaustive": s["exhaustive"], "families": s["families"]["generated"],
            "pruned_cost_bound": s["families"]["pruned"]["cost_bound"],
            "candidates": len(result.candidates), "equivalent": len(result.equivalent),
            "best_modeled_us": None if best is None or best.modeled_us is None
            else round(best.modeled_us, 4),
            "best_kernels": None if best is None else len(best.graph.custom_ops),
            "by_kernel": s.get("by_kernel"), "seed": s.get("seed")}


def _timed(graph: Any, config: SearchConfig, **patches: Any) -> tuple[Any, float]:
    start = time.process_time()
    with mock.patch.multiple(driver, **patches) if patches else contextlib.nullcontext():
        result = search(graph, config)
    return result, time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=600.0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows = []
    two = SearchConfig(max_custom_kernels=2, max_block_inputs=2, block_ops=("matmul", "relu"),
                       max_block_ops=3, grid_dims=(1,), budget_s=args.budget)
    by, cpu = _timed(mlp2.graph, two)
    rows.append(_row("mlp2", "kernel by kernel", by, cpu))
    with mock.patch.object(driver._Run, "_by_kernel", lambda self, *a: None):
        whole, cpu = _timed(mlp2.graph, two)
    rows.append(_row("mlp2", "whole", whole, cpu))
    rows[-1]["same_equivalent_programs"] = _keys(by) == _keys(whole)
    three = SearchConfig(max_custom_kernels=2, max_block_inputs=4, block_ops=("matmul", "relu"),
                         budget_s=args.budget)
    seeded, cpu = _timed(mlp3.graph, three)
    rows.append(_row("mlp3", "seeded", seeded, cpu))
    unseeded, cpu = _timed(mlp3.graph, three, _seed=lambda *a: None)
    rows.append(_row("mlp3", "unseeded", unseeded, cpu))
    big = replace(three, block_ops=("matmul", "relu", "div", "mul"))
    result, cpu = _timed(mlp3_512.graph, big)
    rows.append(_row("mlp3_512", "seeded", result, cpu))
    for row in rows:
        print(json.dumps(row), flush=True)
    if args.json:
        args.json.write_text(json.dumps({"provenance": provenance(), "argv": sys.argv[1:],
                                         "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
