"""Optimize every program of the test corpus (`tests/corpus/corpus_programs.py`) and print the
table the programs issue asks for: custom kernels and the ops left outside them, the check
against torch, the modeled speed-up over eager, the search's time and whether it was exhaustive
(both searches' when the fusion search proved no program that fits and a partial-fusion search
ran: times and families added, `exhaustive` the fusion search's / the partial search's).

    .venv/bin/python bench/corpus.py [NAME ...] [--budget S] [--json FILE]

Each program runs through `prism.superoptimize` (the user's path: trace, search, instantiate,
tune on the cost model, check the winner in Triton's interpreter against torch). Latencies are
modeled (H100); times are this machine's wall clock.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _corpus() -> Any:
    spec = importlib.util.spec_from_file_location(
        "corpus_programs", ROOT / "tests" / "corpus" / "corpus_programs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def corpus_targets() -> dict[str, Callable[[], Any]]:
    """Each corpus program and module by name: a function that traces it (`prism.workload`,
    or `prism.workload.from_module` on a zero input of its shape and dtype)."""
    import torch

    import prism

    corpus = _corpus()
    targets: dict[str, Callable[[], Any]] = {}
    for name, p in corpus.PROGRAMS.items():
        targets[name] = lambda p=p: prism.workload(p.fn, dtype=p.dtype,
                                                     bool_inputs=p.bool_inputs, **p.shapes)
    for name, m in corpus.MODULES.items():
        targets[name] = lambda m=m: prism.workload.from_module(
            m.make(), torch.zeros(*m.shape, dtype=getattr(torch, m.dtype)))
    return targets


def _row(name: str, target: Any, budget: float) -> dict[str, Any]:
    import prism

    start = time.perf_counter()
    try:
        result = prism.superoptimize(target, budget_s=budget, compile_ptx=False)
    except prism.PrismError as e:
        return {"program": name, "refused": f"{type(e).__name__}: {e}"}
    doc = result.to_json()
    best = doc["best"] or {}
    fusion = doc.get("fusion") or {}
    searches = [s for s in (fusion.get("fusion_search"), fusion.get("partial_search")) if s] \
        or [doc["search"] or {}]
    custom = [op for op in result.best.graph.ops if op.kind == "customized"] \
        if result.best else []
    outside = sorted({op.kind for op in result.best.graph.ops
                      if op.kind not in ("input", "output", "customized")}) if result.best else []
    return {"program": name, "custom_kernels": len(custom), "outside": outside,
            "check": (best.get("check") or {}).get("status"),
            "latency_us": best.get("latency_us"), "latency_kind": best.get("latency_kind"),
            "speedup_vs_eager": doc["baseline"]["modeled_speedup_vs_eager"],
            "search_s": round(sum(float(s.get("seconds", 0.0)) for s in searches), 1),
            "families": sum((s.get("families") or {}).get("generated", 0) for s in searches),
            "exhaustive": " / ".join(str(s.get("exhaustive")) for s in searches),
            "partial_fusion": len(searches) > 1,
            "dtype": str(getattr(target, "dtype", "float16")),
            "seconds": round(time.perf_counter() - start, 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*")
    parser.add_argument("--budget", type=float, default=300.0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    targets = corpus_targets()
    rows = []
    for name in args.names or list(targets):
        row = _row(name, targets[name](), args.budget)
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    print("\n| program | dtype | custom kernels | outside custom kernels | check | "
          "modeled speed-up | search s | families | exhaustive |\n"
          "|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if "refused" in r:
            print(f"| {r['program']} | refused: {r['refused']} ||||||||")
            continue
        print(f"| {r['program']} | {r['dtype']} | {r['custom_kernels']} | "
              f"{', '.join(r['outside']) or '-'} | "
              f"{r['check']} | {r['speedup_vs_eager']} | {r['search_s']} | {r['families']} | "
              f"{r['exhaustive']} |")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
