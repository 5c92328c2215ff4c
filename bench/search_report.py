"""The symbolic search at default caps: what the closing notes cite.

    .venv/bin/python bench/search_report.py [WORKLOAD ...] [--budget S] [--json FILE]

Per workload (default: DESIGN.md §5's five and gated_mlp), at its default shape and Prism's
default caps: search time, whether it finished, families generated / kept / pruned per rule,
candidates by verdict, and whether a fused candidate was found — one custom kernel, its output
the program's output (nothing written to device memory in between), a symbolic loop, proved
with symbolic grid and loop sizes.

Then shape reuse: the search's symbolic checkpoint is re-instantiated at each of the workload's
other shapes (Prism's shape table), and the seconds are set against searching again at that
shape — measured for the first other shape (a full search), the rest estimated as the search
time at the default shape.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from prism.search import SearchConfig, search
from prism.search.checkpoint import load_checkpoint, reinstantiate, save_checkpoint
from prism.workloads import get_workload

DEFAULT = ["rmsnorm_matmul", "rmsnorm_mlp", "swiglu", "attention", "qknorm_attention",
           "gated_mlp"]


def fused(result: Any) -> list[Any]:
    out = []
    for c in result.equivalent:
        g = c.graph
        if (g.num_kernels == 1 and len(g.custom_ops) == 1
                and g.custom_ops[0].outputs[0] == g.outputs[0]
                and not g.custom_ops[0].block.forloop_range.is_const):
            out.append(c)
    return out


def report(name: str, budget: float, folder: Path) -> dict[str, Any]:
    w = get_workload(name)
    config = SearchConfig(budget_s=budget)
    result = search(w.graph, config, label=name)
    ck = folder / f"{name}.json"
    save_checkpoint(result, w.graph, ck)
    row: dict[str, Any] = {**result.summary(), "fused": [c.id for c in fused(result)],
                           "shapes": []}
    checkpoint = load_checkpoint(ck)
    others = [s for s in w.shape_sets if dict(s) != dict(w.shapes)]
    for i, shapes in enumerate(others):
        graph = w.with_shapes(**shapes).graph
        start = time.perf_counter()
        again = reinstantiate(checkpoint, graph, config, label=name)
        entry: dict[str, Any] = {"shapes": {k: list(v) for k, v in shapes.items()},
                                 "reinstantiate_s": round(time.perf_counter() - start, 2),
                                 "equivalent": len(again.equivalent),
                                 "modeled": sum(c.modeled_us is not None
                                                for c in again.equivalent)}
        if i == 0:
            fresh = search(graph, config, label=name)
            entry["search_again_s"] = round(fresh.seconds, 2)
            entry["search_again_complete"] = fresh.complete
        row["shapes"].append(entry)
    return row


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("workloads", nargs="*", default=DEFAULT)
    p.add_argument("--budget", type=float, default=600.0)
    p.add_argument("--json", help="also write the rows to this file")
    args = p.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.workloads:
            row = report(name, args.budget, Path(tmp))
            rows.append(row)
            fam = row["families"]
            pruned = ", ".join(f"{k} {v}" for k, v in fam["pruned"].items())
            print(f"{name}: {row['seconds']:.0f} s, {'complete' if row['complete'] else 'budget'}"
                  f"; {fam['generated']} generated, {fam['kept']} kept ({pruned}); verdicts "
                  f"{row['verdicts']}; fused {len(row['fused'])}", flush=True)
            for s in row["shapes"]:
                again = f", search again {s['search_again_s']} s" if "search_again_s" in s else ""
                print(f"   {s['shapes']}: re-instantiated in {s['reinstantiate_s']} s "
                      f"({s['equivalent']} equivalent, {s['modeled']} fit the device){again}",
                      flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0 if all(r["fused"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
