"""Search and tuning orders on workloads the evaluator never saw (issue 21, item 4): canonical
against analytic against learned, as a markdown table.

    .venv/bin/python bench/order.py [--weights prism/learn/evaluator.pt] [--json OUT]

Search, for each held-out case of `prism.learn.train.HELD_OUT` (its caps, branch and bound on):
families and seconds until the best program was verified (the first candidate at the best
modeled latency), families generated in all, cost-bound prunes, total seconds. Every search
keeps its trace (for the verification times), which costs each order alike. Tuning: the
configurations of the canonical search's proven candidates (every feasible assignment), tried
through `prism.tune.tune` with the model backend in three trial orders (the order they are
listed in; the model's, which is today's tuner; the evaluator's) and the best modeled latency
found after 1, 4, 8, 16 and 64 trials. With modeled labels the model's own order finds the best at
the first trial by construction: the learned order is measured against that ceiling.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from prism.learn import WEIGHTS, learned_order, tuning_scores  # noqa: E402
from prism.learn.data import configurations  # noqa: E402
from prism.learn.train import HELD_OUT, Case  # noqa: E402
from prism.search.driver import search  # noqa: E402
from prism.trace import CandidateVerified, Tracer  # noqa: E402
from prism.tune import Config, make_backend, tune  # noqa: E402

TRIALS = (1, 4, 8, 16, 64)


def search_row(case: Case, order: Any) -> tuple[dict[str, Any], Any]:
    tracer = Tracer(keep=True)
    start = time.perf_counter()
    result = search(case.target(), case.config(order=order), tracer=tracer, label=case.label)
    total = time.perf_counter() - start
    best = result.best
    row: dict[str, Any] = {"case": case.label, "order": result.config.order_name,
                           "families": result.generated,
                           "cost_bound": result.pruned.get("cost_bound", 0),
                           "seconds": round(total, 2), "best_us": None,
                           "families_to_best": None, "seconds_to_best": None}
    if best is not None and best.modeled_us is not None:
        first = next(c for c in result.equivalent if c.modeled_us == best.modeled_us)
        at = next(e for e in tracer.events
                  if isinstance(e, CandidateVerified) and e.id == first.id)
        row.update(best_us=round(best.modeled_us, 4),
                   families_to_best=int(first.family.lstrip("f")),
                   seconds_to_best=round(at.time - tracer.events[0].time, 2))
    return row, result


def tuning_row(case: Case, result: Any, order: str, weights: Path) -> dict[str, Any]:
    device = result.config.device
    graphs = configurations(result)
    configs = [Config(f"k{i}", g, ()) for i, g in enumerate(graphs)]
    row: dict[str, Any] = {"case": case.label, "order": order, "configs": len(configs)}
    if order == "canonical":
        rank = None if not configs else (lambda cs: [float(c.candidate[1:]) for c in cs])
    elif order == "learned":
        def rank(cs: Any) -> list[float]:
            return tuning_scores([c.graph for c in cs], device, weights)
    for k in TRIALS:
        if not configs:
            row[f"best_at_{k}"] = None
            continue
        res = tune(configs, make_backend("model", device), device, max_trials=k,
                   compile_ptx=False, order=None if order == "analytic" else rank)
        row[f"best_at_{k}"] = round(res.best.latency_us, 4) if res.best else None
    row["best_of_all"] = round(min(t.modeled_us for t in res.screened), 4) if configs else None
    return row


def table(rows: list[dict[str, Any]], keys: list[str]) -> str:
    out = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    for r in rows:
        out.append("| " + " | ".join("–" if r.get(k) is None else str(r[k]) for k in keys)
                   + " |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--weights", type=Path, default=WEIGHTS)
    ap.add_argument("--json", type=Path, help="also write the rows here")
    ap.add_argument("cases", nargs="*", help="held-out case labels (default: all)")
    args = ap.parse_args(argv)
    learned = learned_order(args.weights)
    searches, tunings = [], []
    for case in HELD_OUT:
        if args.cases and case.label not in args.cases:
            continue
        canonical_result = None
        for order in ("canonical", "analytic", learned):
            row, result = search_row(case, order)
            searches.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
            if order == "canonical":
                canonical_result = result
        for order in ("canonical", "analytic", "learned"):
            tunings.append(tuning_row(case, canonical_result, order, args.weights))
            print(json.dumps(tunings[-1]), file=sys.stderr, flush=True)
    print("search (branch and bound on; seconds on this machine, with the trace kept)\n")
    print(table(searches, ["case", "order", "families_to_best", "seconds_to_best", "best_us",
                           "families", "cost_bound", "seconds"]))
    print("\ntuning (model backend: best modeled µs after k trials)\n")
    print(table(tunings, ["case", "order", "configs", *[f"best_at_{k}" for k in TRIALS],
                          "best_of_all"]))
    if args.json:
        args.json.write_text(json.dumps({"search": searches, "tuning": tunings}, indent=1))
    return 0 if all(math.isfinite(r["seconds"]) for r in searches) else 1


if __name__ == "__main__":
    sys.exit(main())
