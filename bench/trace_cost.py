"""What the trace's family events cost a search: the pipeline's search config (`superoptimize`'s,
the full vocabulary) at a block-op cap, with and without a listener on its tracer (without one,
no event is built), on an executor.

    OMP_NUM_THREADS=1 .venv/bin/python bench/trace_cost.py WORKLOAD CAP [--executor processes]
                                                           [--workers 2]

One JSON line per mode: wall and CPU seconds (the CPU of this process: the coordinator's, or the
whole search on `local`), families generated and events heard. The results must agree: the
same families either way.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace

from prism.pipeline import search_config_for
from prism.search import search
from prism.search.executors import Executor
from prism.trace import Tracer
from prism.workloads import get_workload


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workload")
    parser.add_argument("cap", type=int)
    parser.add_argument("--executor", default="local")
    parser.add_argument("--workers", type=int, default=None)
    args = parser.parse_args()
    graph = get_workload(args.workload).graph
    config = replace(search_config_for(graph, 3600), max_block_ops=args.cap)
    for mode in ("no listener", "a listener"):
        tracer = Tracer(keep=False)
        heard = [0]
        if mode == "a listener":
            tracer.subscribe(lambda _event, heard=heard: heard.__setitem__(0, heard[0] + 1))
        wall, cpu = time.perf_counter(), time.process_time()
        result = search(graph, config, tracer=tracer,
                        executor=Executor(args.executor, args.workers))
        print(json.dumps({"workload": args.workload, "cap": args.cap, "mode": mode,
                          "executor": args.executor, "workers": args.workers,
                          "wall_s": round(time.perf_counter() - wall, 1),
                          "cpu_s": round(time.process_time() - cpu, 1),
                          "families": result.generated, "events": heard[0]}), flush=True)


if __name__ == "__main__":
    main()
