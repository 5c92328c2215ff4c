"""Branch and bound on each complete program's best member (issue 17, item 5): what
`SearchConfig.member_bound` prunes and what it costs, per workload, with `superoptimize`'s own
search config (`pipeline.search_config_for`), one process.

    OMP_NUM_THREADS=1 .venv/bin/python bench/member_bound.py [WORKLOAD ...] [--budget S]
                                                             [--json OUT]

One JSON row per workload and setting: CPU seconds of the search, families generated, the
cost_bound prunes, candidates by verdict, the best candidate's modeled latency and its kernels,
and the stop reason. The bound is sound (tests/search/test_member_bound.py audits it); this
measures whether it pays: a member's best assignment is a search of the tuner's sizes.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

from prism.bench import provenance
from prism.pipeline import search_config_for
from prism.search import search
from prism.workloads import get_workload

DEFAULT = ("rmsnorm_matmul", "swiglu", "lora", "rmsnorm_mlp")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workloads", nargs="*", default=list(DEFAULT))
    ap.add_argument("--budget", type=float, default=600.0)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    rows = []
    for name in args.workloads:
        graph = get_workload(name).graph
        for bound in (False, True):
            config = replace(search_config_for(graph, args.budget), member_bound=bound)
            start = time.process_time()
            result = search(graph, config, label=name)
            s = result.summary()
            best = result.best
            row = {"workload": name, "member_bound": bound,
                   "cpu_seconds": round(time.process_time() - start, 1),
                   "families": s["families"]["generated"],
                   "cost_bound": s["families"]["pruned"]["cost_bound"],
                   "verdicts": s["verdicts"], "stop_reason": s["stop_reason"],
                   "best_modeled_us": None if best is None or best.modeled_us is None
                   else round(best.modeled_us, 3),
                   "best_kernels": None if best is None else best.graph.num_kernels}
            rows.append(row)
            print(json.dumps(row), flush=True)
    if args.json:
        args.json.write_text(json.dumps({"provenance": provenance(), "argv": sys.argv[1:],
                                         "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
