"""Checking that we understand a program: trace it, interpret it against torch, prove, draw it.

`run_check` is today's main job (`make run`): the workload table, then for one workload its traced
graph and its hand-built fused kernel, each interpreted in float64 on random inputs against the
torch reference and rendered to SVG, the fused kernel also proven equivalent to the traced graph;
a printed table and a JSON report. Every stage is an event on the trace (`trace.jsonl` beside the
report).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from prism.frontend.workload import Workload
from prism.ir.graph import KernelGraph
from prism.ir.interpret import interpret
from prism.trace import JsonlWriter, Tracer


def max_rel_err(got: list[np.ndarray], want: list[np.ndarray]) -> float:
    """max |got − want| / max |want|, over all outputs (the worst output counts)."""
    return max(float(np.abs(g - w).max() / max(np.abs(w).max(), 1e-300))
               for g, w in zip(got, want, strict=True))


def check_graph(label: str, graph: KernelGraph, workload: Workload | None, seed: int = 0
                ) -> dict[str, Any]:
    """Interpret `graph` on random inputs; compare with the workload's torch reference if any."""
    if workload is not None:
        arrays = workload.random_inputs(seed)
    else:
        rng = np.random.default_rng(seed)
        arrays = [rng.standard_normal(shape) for shape in graph.user_input_shapes()]
    started = time.perf_counter()
    outputs = graph.to_user(interpret(graph, *graph.to_ir(arrays)))   # the user's layout
    seconds = time.perf_counter() - started
    want = workload.reference(*arrays) if workload is not None else None
    # A NaN is reported as such, never folded into an error figure: where it is, and whether
    # torch's reference has it too.
    nan = [{"output": i, "elements": int(np.isnan(o).sum()),
            "in_torch": bool(want is not None and np.isnan(want[i]).any())}
           for i, o in enumerate(outputs) if np.isnan(o).any()]
    err = None if want is None or nan else max_rel_err(outputs, want)
    return {"label": label, "num_kernels": graph.num_kernels,
            "num_custom_kernels": len(graph.custom_ops),
            "output_shapes": [list(o.shape) for o in outputs],
            "max_rel_err": err, "nan_outputs": nan, "seconds": seconds}


def run_check(name: str | None, out: Path, seed: int = 0, echo: bool = True,
              shown: Path | None = None) -> dict[str, Any]:
    """Write the SVGs, trace and report into `out`; the paths the report gives are under
    `shown` (where the CLI moves `out` once the run is done), `out` itself by default."""
    from prism.ir.render import render
    from prism.verify.equiv import verify
    from prism.workloads import DEFAULT_WORKLOAD, get_workload, workloads_json
    from prism.workloads.known_best import KNOWN_BEST, known_best

    out.mkdir(parents=True, exist_ok=True)
    shown = shown or out
    tracer = Tracer()
    rows: list[dict[str, Any]] = []
    with JsonlWriter(out / "trace.jsonl") as writer:
        tracer.subscribe(writer)
        with tracer.stage("workloads") as summary:
            table = workloads_json()
            summary["count"] = len(table)
        w = get_workload(name or DEFAULT_WORKLOAD)
        with tracer.stage("trace") as summary:
            graph = w.graph
            summary["ops"] = len(graph.ops)
        candidates = [(f"{w.name} (traced)", w.name, graph)]
        if w.name in KNOWN_BEST:
            candidates.append((f"{w.name} (hand-fused)", f"{w.name}.fused",
                               known_best(w.name, w.shapes)))
        for label, stem, g in candidates:
            with tracer.stage("interpret") as summary:
                row = check_graph(label, g, w, seed)
                summary.update(label=label, max_rel_err=row["max_rel_err"])
            if g is not graph:
                with tracer.stage("verify") as summary:
                    verdict = verify(graph, g)
                    row["proof"] = f"{verdict.verdict}, {verdict.proof_steps} steps"
                    summary.update(verdict=verdict.verdict, steps=verdict.proof_steps)
            svg = out / f"{stem}.svg"
            with tracer.stage("render") as summary:
                row["svg"] = str(shown / render(g, svg).name)
                summary["file"] = row["svg"]
            rows.append(row)
    report = {"workload": w.name, "shapes": {k: list(v) for k, v in w.shapes.items()},
              "workloads": table, "graphs": rows, "trace": str(shown / "trace.jsonl")}
    (out / "report.json").write_text(json.dumps(report, indent=1))
    if echo:
        _print_table(table, w, rows, shown)
    return report


def _print_table(table: list[dict[str, Any]], w: Workload, rows: list[dict[str, Any]],
                 out: Path) -> None:
    print(f"Workloads ({len(table)}):")
    width = max(len(r["name"]) for r in table)
    for r in table:
        marker = "*" if r["name"] == w.name else " "
        print(f" {marker} {r['name']:<{width}}  {r['program']}")
    shapes = ", ".join(f"{k}{list(v)}" for k, v in w.shapes.items())
    print(f"\n{w.name}: {shapes}")
    header = f"  {'graph':<28} {'kernels':>7} {'custom':>6} {'max rel err vs torch':>21} " \
             f"{'interp s':>9}  {'proof vs traced':<22} svg"
    print(header)
    for r in rows:
        print(f"  {r['label']:<28} {r['num_kernels']:>7} {r['num_custom_kernels']:>6} "
              f"{r['max_rel_err']:>21.2e} {r['seconds']:>9.3f}  {r.get('proof', '—'):<22} "
              f"{r['svg']}")
    print(f"\n(float64 reference interpreter against torch float64, random inputs; "
          f"report: {out / 'report.json'})")
