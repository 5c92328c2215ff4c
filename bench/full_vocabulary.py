"""Every workload searched with Prism's full default block vocabulary plus the program's own ops
(issue 17, item 3: no narrowing), on an executor, within a budget: exhaustive or not, and how far.

    .venv/bin/python bench/full_vocabulary.py BUDGET_S [WORKLOAD ...] [--executor processes]
                                              [--workers 2] [--pipeline] [--corpus]
                                              [--max-block-ops N]

One JSON line per workload: wall seconds, the number of block ops, families generated and kept,
the stop reason, whether the search was exhaustive, the verdict counts and the best candidate
(`best_us`: its latency modeled by the cost model on the default device, the H100).
The block vocabulary is the op table's block ops that are in Prism's default or in the program
(in the op table's order); a block may read every input of the program, as `superoptimize`
allows. With `--pipeline` the rest of the config is `superoptimize`'s own
(`pipeline.search_config_for`: the split move on) and only the vocabulary is widened. With
`--corpus` the names are the programs and modules of the test corpus
(`tests/corpus/corpus_programs.py`, traced as `bench/corpus.py` traces them; all of them when
none is named) instead of the workloads.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import prism
from prism.ir.graph import KernelGraph
from prism.pipeline import search_config_for
from prism.search import SearchConfig, search
from prism.search.executors import Executor
from prism.workloads import VARIANTS, WORKLOADS, get_workload


def _corpus_graphs() -> dict[str, Callable[[], KernelGraph]]:
    """The corpus's programs and modules, traced as `bench/corpus.py` traces them."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from corpus import corpus_targets

    return {name: (lambda trace=trace: trace().graph)
            for name, trace in corpus_targets().items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("budget", type=float)
    parser.add_argument("workloads", nargs="*")
    parser.add_argument("--executor", default="processes")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--pipeline", action="store_true",
                        help="superoptimize's config (the split move on), full vocabulary")
    parser.add_argument("--corpus", action="store_true",
                        help="the test corpus's programs instead of the workloads")
    parser.add_argument("--max-block-ops", type=int, default=None,
                        help="another block-op cap (Prism's: 11), to measure a tree too big "
                             "to finish at the full cap")
    args = parser.parse_args()
    where = Executor(args.executor, args.workers)
    graphs = _corpus_graphs() if args.corpus else \
        {n: (lambda n=n: get_workload(n).graph) for n in [*WORKLOADS, *VARIANTS]}
    for name in args.workloads or list(graphs):
        try:
            graph = graphs[name]()
        except prism.PrismError as e:   # a program the tracer refuses: say so, go on
            print(json.dumps({"workload": name, "refused": f"{type(e).__name__}: {e}"}),
                  flush=True)
            continue
        # the pipeline's own vocabulary since 12-06 (Prism's plus the program's other ops)
        ops = search_config_for(graph, args.budget).block_ops
        config = SearchConfig(budget_s=args.budget, max_block_inputs=max(3, len(graph.inputs)),
                              block_ops=ops)
        if args.pipeline:
            config = search_config_for(graph, args.budget)
        if args.max_block_ops is not None:
            config = replace(config, max_block_ops=args.max_block_ops)
        start = time.perf_counter()
        result = search(graph, config, label=name, executor=where)
        s = result.summary()
        print(json.dumps({"workload": name, "wall": round(time.perf_counter() - start, 1),
                          "ops": len(ops), "gen": s["families"]["generated"],
                          "kept": s["families"]["kept"], "stop": s["stop_reason"],
                          "exh": s["exhaustive"], "verdicts": s["verdicts"],
                          "best": s["best"], "pruned": s["families"]["pruned"],
                          "best_us": None if result.best is None else result.best.modeled_us,
                          "tasks": (result.executor or {}).get("tasks"),
                          "cut_at": (result.executor or {}).get("cut_at_block_ops")}),
              flush=True)


if __name__ == "__main__":
    main()
