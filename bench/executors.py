"""The search on each executor (issue 17): wall time at 1 and 2 workers, and whether the result is
the local one. Each run is `prism search TARGET --json` in a process of its own, on this machine.

    .venv/bin/python bench/executors.py [TARGET ...] [--runs local:1 processes:2 ray:2]
                                        [--budget S] [--prism-vocabulary | --pipeline]
                                        [--json OUT]

A target is a workload name; `--prism-vocabulary` searches with Prism's default block
vocabulary (not the program's own ops); `--pipeline` with `superoptimize`'s own config
(`pipeline.search_config_for`: the full vocabulary, a block reading every input, the split move
and the member bound), given to `prism search` as its flags. The result compared is the JSON
less its timings (`seconds`, proof seconds and e-graph reports) and the `executor` entry.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _stable(doc: Any) -> Any:
    """The result less what the clock decides."""
    if isinstance(doc, dict):
        return {k: _stable(v) for k, v in doc.items()
                if k not in ("seconds", "executor", "report", "egraph")}
    if isinstance(doc, list):
        return [_stable(v) for v in doc]
    return doc


def differences(a: Any, b: Any, path: str = "") -> Counter[str]:
    """Where two results differ, counted by path (list indices as [*])."""
    out: Counter[str] = Counter()
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b), key=str):
            out += differences(a.get(k), b.get(k), f"{path}.{k}")
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for x, y in zip(a, b, strict=True):
            out += differences(x, y, f"{path}[*]")
    elif a != b:
        out[path or "."] += 1
    return out


def pipeline_flags(target: str) -> list[str]:
    """`prism search`'s flags for `superoptimize`'s search config of a workload."""
    from prism.pipeline import search_config_for
    from prism.search import SearchConfig
    from prism.workloads import get_workload
    config = search_config_for(get_workload(target).graph, 600.0)   # (the budget is a flag)
    assert (config.max_custom_kernels, config.max_block_outputs) == \
        (SearchConfig.max_custom_kernels, SearchConfig.max_block_outputs), "flags to add here"
    return ["--block-ops", ",".join(config.block_ops),
            "--max-block-inputs", str(config.max_block_inputs),
            "--device", config.device.name,
            "--split-loops" if config.split_loops else "--no-split-loops",
            "--member-bound" if config.member_bound else "--no-member-bound"]


def run(target: str, executor: str, workers: int, budget: float, flags: list[str]
        ) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "prism", "search", target, "--json", "--budget", str(budget),
           "--executor", executor, "--workers", str(workers), *flags]
    start = time.perf_counter()
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    wall = time.perf_counter() - start
    doc = json.loads(out.stdout.strip().splitlines()[-1])
    if "error" in doc:
        raise SystemExit(f"{target} on {executor}: {doc['error']['message']}")
    return {"target": target, "executor": executor, "workers": workers,
            "process_seconds": round(wall, 2), "search_seconds": doc["seconds"],
            "tasks": doc.get("executor", {}).get("tasks"),
            "families": doc["families"]["generated"], "exhaustive": doc["exhaustive"],
            "best": doc["best"], "_stable": _stable(doc)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("targets", nargs="*", default=["rmsnorm_matmul", "swiglu"])
    parser.add_argument("--runs", nargs="*", default=["local:1", "processes:1", "processes:2",
                                                      "ray:2"])
    parser.add_argument("--budget", type=float, default=600.0)
    how = parser.add_mutually_exclusive_group()
    how.add_argument("--prism-vocabulary", action="store_true")
    how.add_argument("--pipeline", action="store_true",
                     help="superoptimize's search config (pipeline.search_config_for)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows = []
    for target in args.targets:
        flags = pipeline_flags(target) if args.pipeline else \
            ["--block-ops", "matmul,exp,square,sqrt,silu,gelu,relu,add,mul,div,pow,rms_norm"] \
            if args.prism_vocabulary else []
        base = None
        for spec in args.runs:
            executor, workers = spec.split(":")
            row = run(target, executor, int(workers), args.budget, flags)
            stable = row.pop("_stable")
            base = base if base is not None else stable
            row["same_as_first"] = stable == base
            if stable != base:     # what differs, by field, and how many times
                row["differs"] = dict(differences(base, stable))
            rows.append(row)
            print(f"{target:16s} {executor:9s} ×{workers}  search {row['search_seconds']:7.2f} s"
                  f"  process {row['process_seconds']:7.2f} s  {row['families']:7d} families  "
                  f"{row['tasks']} tasks  same result: {row['same_as_first']}"
                  + (f"  differs: {row['differs']}" if "differs" in row else ""), flush=True)
    if args.json:
        args.json.write_text(json.dumps({"command": " ".join(sys.argv), "rows": rows},
                                        indent=1) + "\n")


if __name__ == "__main__":
    main()
