"""`prism optimize` on the nine workloads: what the closing note of the pipeline issue cites.

    .venv/bin/python bench/optimize_report.py [WORKLOAD ...] [--budget S] [--out DIR]
    .venv/bin/python bench/optimize_report.py --collect DIR      # only tabulate earlier runs

Each workload runs as `prism optimize W --budget S --out DIR/W --json` in its own process (the
cost model for an H100, measure `model`), its JSON saved as DIR/W.json. The table has the best
kernel's modeled latency, the program's roofline bound and modeled eager latency, their ratios,
the search and total seconds, and the interpreter check against torch. Written to DIR/optimize.md
and printed. Beside it, Mirage's own best μGraph for the same program and shapes where the
corpus has one (gqa), modeled the same way.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

NINE = ["rmsnorm_matmul", "rmsnorm_mlp", "swiglu", "attention", "qknorm_attention", "gated_mlp",
        "lora", "gqa", "ntrans"]


def run(name: str, budget: float, out: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "prism", "optimize", name, "--budget",
                           str(budget), "--out", str(out / name), "--json",
                           "--db", str(out / "db.jsonl")], capture_output=True, text=True)
    (out / f"{name}.json").write_text(done.stdout)


def row(name: str, doc: dict[str, Any]) -> str:
    best = doc.get("best")
    if not best:
        return f"| {name} | no kernel: {doc.get('error', doc.get('notes'))} | | | | | | |"
    check = best["check"]
    if check.get("passed"):
        where = " (smallest sGraph member)" if "instance" in check else ""
        checked = f"{check.get('max_rel_err_vs_torch', 0):.1e}{where}"
    else:
        checked = check.get("reason") or check.get("error") or "failed"
    roof, eager = best["roofline_us"], doc["baseline"]["eager_latency_us"]
    search = doc.get("search") or {}
    return (f"| {name} | {best['latency_us']:.2f} ({best['latency_kind']}) | {roof:.2f} | "
            f"{best['latency_us'] / roof:.2f}× | {eager:.2f} | {eager / best['latency_us']:.2f}× "
            f"| {best['num_kernels']} | {best['params']} | {search.get('seconds', 0):.0f} / "
            f"{doc['seconds']:.0f} | {checked} |")


def mirage_gqa() -> str | None:
    corpus = Path(__file__).resolve().parents[2] / "shared/external/mirage_mugraphs/gqa_bs1.json"
    if not corpus.exists():
        return None
    from prism.cost import get_device, modeled, roofline_us
    from prism.frontend.mirage import import_mirage
    h100 = get_device("h100")
    graphs = import_mirage(corpus)
    best = min(graphs, key=lambda g: modeled(g, h100).latency_us)
    lat, roof = modeled(best, h100).latency_us, roofline_us(best, h100)
    return (f"Mirage's best gqa μGraph (corpus gqa_bs1.json, same shapes, {best.num_kernels} "
            f"kernels): {lat:.2f} µs modeled, {lat / roof:.2f}× its roofline {roof:.2f} µs.")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("workloads", nargs="*", default=NINE)
    ap.add_argument("--budget", type=float, default=900.0)
    ap.add_argument("--out", default="bench/results/optimize")
    ap.add_argument("--collect", metavar="DIR", help="tabulate DIR/W.json from earlier runs")
    args = ap.parse_args()
    out = Path(args.collect or args.out)
    out.mkdir(parents=True, exist_ok=True)
    if not args.collect:
        for name in args.workloads:
            run(name, args.budget, out)
    lines = ["| workload | best µs | roofline µs | best/roofline | eager µs (modeled) | "
             "speed-up vs eager | kernels | params | search / total s | check vs torch |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for name in args.workloads:
        path = out / f"{name}.json"
        if path.exists() and path.read_text().strip():
            lines.append(row(name, json.loads(path.read_text())))
    note = mirage_gqa()
    text = "\n".join(lines) + ("\n\n" + note if note else "") + "\n"
    (out / "optimize.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
