"""Branch and bound on each complete program's best member (issue 17, item 5): what
`SearchConfig.member_bound` prunes and what it costs, per workload, with `superoptimize`'s own
search config (`pipeline.search_config_for`) with the bound off and on.

    OMP_NUM_THREADS=1 .venv/bin/python bench/member_bound.py [WORKLOAD ...] [--budget S]
                                                             [--rounds N] [--json OUT]

One JSON row per workload and setting: CPU seconds of the search, families generated, the
cost_bound prunes, candidates by verdict, the best candidate's modeled latency and its kernels,
and the stop reason. Each search runs in a fresh process of its own. The bound is sound
(tests/search/test_member_bound.py audits it); this measures whether it pays: a member's best
assignment is a search of the tuner's sizes, and the bound reads the members that the
verifier's checks before a proof (which the search then takes) do not show not equivalent.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

from prism.bench import provenance
from prism.pipeline import search_config_for
from prism.search import search
from prism.workloads import get_workload

DEFAULT = ("rmsnorm_matmul", "swiglu", "lora", "rmsnorm_mlp")


def one(name: str, bound: bool, budget: float) -> dict[str, object]:
    """One search, in this process: its row."""
    graph = get_workload(name).graph
    config = replace(search_config_for(graph, budget), member_bound=bound)
    start = time.process_time()
    result = search(graph, config, label=name)
    s = result.summary()
    best = result.best
    return {"workload": name, "member_bound": bound,
            "cpu_seconds": round(time.process_time() - start, 1),
            "families": s["families"]["generated"],
            "cost_bound": s["families"]["pruned"]["cost_bound"],
            "verdicts": s["verdicts"], "stop_reason": s["stop_reason"],
            "best_modeled_us": None if best is None or best.modeled_us is None
            else round(best.modeled_us, 3),
            "best_kernels": None if best is None else best.graph.num_kernels}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workloads", nargs="*", default=list(DEFAULT))
    ap.add_argument("--budget", type=float, default=600.0)
    ap.add_argument("--rounds", type=int, default=1,
                    help="searches per workload and setting, the settings alternating")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--one", choices=("off", "on"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one:                # a child: one search, its row on stdout
        print(json.dumps(one(args.workloads[0], args.one == "on", args.budget)))
        return 0
    rows = []
    for name in args.workloads:
        for _ in range(args.rounds):
            for setting in ("off", "on"):
                # a fresh process each: a search leaves memos behind (proofs, random-test
                # values, best assignments) that would speed the next one up
                out = subprocess.run([sys.executable, __file__, name, "--one", setting,
                                      "--budget", str(args.budget)],
                                     check=True, capture_output=True, text=True).stdout
                row = json.loads(out.strip().splitlines()[-1])
                rows.append(row)
                print(json.dumps(row), flush=True)
    if args.json:
        args.json.write_text(json.dumps({"provenance": provenance(), "argv": sys.argv[1:],
                                         "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
