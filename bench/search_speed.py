"""Search time at identical results (issue 17): each recorded search case of
`tests/search/recorded.py`, run in a process of its own, with its CPU and wall seconds and
whether its results equal the recorded ones.

    .venv/bin/python bench/search_speed.py [CASE ...] [--json OUT]

Run it on two checkouts (the same machine, the same load) to compare them: the CPU seconds are
the per-core figure, of the search alone (the target is traced, and torch imported, before the
clock starts); the cases are bounded by family counts, never by time. An older checkout needs
this script and `tests/search/recorded.py` copied in (and `split_loops=False` dropped from
`config_for` where the config has no such field).

`--out-of-reach`: the cases as the search runs them now, with the `out_of_reach` rule (and its
sibling bounds) on, which the records predate; it prunes more, so the families differ, and
`same_as_recorded` then compares what must not change: every candidate's verdict, method and
graph, and the best's modeled latency (`test_out_of_reach_keeps_every_recorded_candidate`).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ONE = """
import json, sys, time
sys.path.insert(0, {search!r})
import recorded
from prism.search.driver import search
case = {case!r}
graph, config = recorded.config_for(case)     # the target traced (torch imported) first
if {reach!r}:
    from dataclasses import replace
    config = replace(config, disabled=config.disabled - {{"out_of_reach"}})
wall, cpu = time.perf_counter(), time.process_time()
fresh = recorded.as_recorded(search(graph, config))
cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
want = json.loads(recorded.RECORDED.read_text()).get(case)
if want is None:
    same = None
elif {reach!r}:
    same = (sorted(c[2:] for c in fresh["candidates"]) ==
            sorted(c[2:] for c in want["candidates"]) and
            fresh["best_modeled_us"] == want["best_modeled_us"])
else:
    same = fresh == want
print(json.dumps({{"case": case, "cpu_s": round(cpu, 2), "wall_s": round(wall, 2),
                  "families": fresh["summary"]["families"]["generated"],
                  "candidates": len(fresh["candidates"]), "same_as_recorded": same}}))
"""


def main() -> None:
    sys.path.insert(0, str(ROOT / "tests" / "search"))
    import recorded
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="*", default=list(recorded.CASES))
    parser.add_argument("--json", type=Path)
    parser.add_argument("--out-of-reach", action="store_true",
                        help="with the out_of_reach rule on (the search as it runs now)")
    args = parser.parse_args()
    rows = []
    for case in args.cases:
        out = subprocess.run([sys.executable, "-c", ONE.format(
            search=str(ROOT / "tests" / "search"), case=case, reach=args.out_of_reach)],
            cwd=ROOT, check=True,
            capture_output=True, text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)}).stdout
        row = json.loads(out.strip().splitlines()[-1])
        rows.append(row)
        print(f"{row['case']:28s} cpu {row['cpu_s']:8.2f} s  wall {row['wall_s']:8.2f} s  "
              f"{row['families']:7d} families  {row['candidates']:4d} candidates  "
              f"same as recorded: {row['same_as_recorded']}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
