"""Step records from the searches of the nine workloads (issue 21, item 2): each searched at the
tests' small shapes and reduced caps (`tests/conftest.py`) with its graphs on the trace, its
steps exported (default filtering) and replayed by the checker, as a markdown table of the
records kept per kind, the families generated, the decisions skipped and the failures.

    .venv/bin/python bench/steps.py [--families N] [--balance R] [WORKLOAD ...]
    .venv/bin/python bench/steps.py --optimize [--trials T] [--families N] [WORKLOAD ...]

`--families` caps each search (default 3000: ntrans's reduced search is 118,000 families and
a trace of 1.2 GB with graphs). `--optimize` runs the whole pipeline instead (`superoptimize`,
model backend, `--trials` finalists), so its trace also holds the tuner's `instantiate` and
`measure` steps. Exits 1 when any record fails its check.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from conftest import reduced, small  # noqa: E402  (the tests' reduced configs, one source)

from prism.pipeline import superoptimize  # noqa: E402
from prism.search.driver import search  # noqa: E402
from prism.steps import check_steps, export_steps  # noqa: E402
from prism.trace import JsonlWriter, Tracer  # noqa: E402
from prism.workloads import WORKLOADS  # noqa: E402

KINDS = ("open_kernel", "add_op", "add_kernel_op", "close_block", "prune", "set_maps", "prove",
         "instantiate", "measure")


def run(name: str, families: int, balance: float, folder: Path, trials: int | None = None
        ) -> dict[str, object]:
    trace, steps = folder / f"{name}.jsonl.gz", folder / f"{name}.steps.jsonl"
    tracer = Tracer(keep=False)
    writer = JsonlWriter(trace)
    tracer.subscribe(writer, required=True)
    start = time.perf_counter()
    config = reduced(name, record_graphs=True, max_families=families)
    if trials is None:
        generated = search(small(name).graph, config, label=name, tracer=tracer).generated
    else:
        done = superoptimize(small(name), device="h100", measure="model", budget_s=300,
                             search_config=config, tracer=tracer, max_trials=trials)
        generated = done.search.generated if done.search else 0
    writer.close()
    searched = time.perf_counter() - start
    summary = export_steps(trace, steps, balance=balance)
    exported = time.perf_counter() - start - searched
    report = check_steps(steps)
    checked = time.perf_counter() - start - searched - exported
    return {"name": name, "families": generated, "summary": summary, "report": report,
            "seconds": (searched, exported, checked)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("workloads", nargs="*", default=list(WORKLOADS))
    p.add_argument("--families", type=int, default=3000)
    p.add_argument("--balance", type=float, default=4.0)
    p.add_argument("--optimize", action="store_true", help="the whole pipeline's trace")
    p.add_argument("--trials", type=int, default=2, help="with --optimize: finalists")
    args = p.parse_args(argv)
    print(f"| workload | families | exported | kept | {' | '.join(KINDS)} | prunes by rule | "
          "skipped | failed | s (search, export, check) |")
    print("|" + "---|" * (8 + len(KINDS)))
    totals: Counter[str] = Counter()
    failures = []
    unchecked: Counter[str] = Counter()
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.workloads:
            row = run(name, args.families, args.balance, Path(tmp),
                      args.trials if args.optimize else None)
            s, report = row["summary"], row["report"]
            assert isinstance(s, dict)
            kinds = s["by_kind"]
            rules = ", ".join(f"{g.split(':')[1]} {c['kept']}" for g, c in s["groups"].items()
                              if g.startswith("prune:"))
            skipped = sum(s["skipped"].values())
            failed = len(report.failures)     # type: ignore[attr-defined]
            failures += report.failures       # type: ignore[attr-defined]
            unchecked.update(report.not_rechecked)  # type: ignore[attr-defined]
            totals.update({k: kinds.get(k, 0) for k in KINDS})
            totals.update({"exported": s["exported"], "kept": s["kept"], "failed": failed,
                           "skipped": skipped})
            secs = ", ".join(f"{x:.1f}" for x in row["seconds"])   # type: ignore[attr-defined]
            print(f"| {name} | {row['families']} | {s['exported']} | {s['kept']} | "
                  + " | ".join(str(kinds.get(k, 0)) for k in KINDS)
                  + f" | {rules} | {skipped} | {failed} | {secs} |", flush=True)
    print(f"| total | | {totals['exported']} | {totals['kept']} | "
          + " | ".join(str(totals[k]) for k in KINDS)
          + f" | | {totals['skipped']} | {totals['failed']} | |")
    if unchecked:
        print("not re-checked: " + ", ".join(f"{why} ({n})" for why, n in unchecked.items()))
    for f in failures[:20]:
        print(f"FAIL {f['id']} ({f['kind']}, {f['source']}): {f['problem']}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
