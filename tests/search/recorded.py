"""Searches recorded as they came out, to hold a faster search to the same results (issue 17).

`record(case)` runs one case's search and returns what must not change whatever the search's
speed or executor: the family counts (generated, kept, pruned per rule), the stop reason, and
each candidate (its id, family, verdict, method and a digest of its graph), with the best one
and its modeled latency. `python tests/search/recorded.py` rewrites `recorded_searches.json`
from the code as it is; the test (`test_recorded.py`) compares a fresh run with that file.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from prism.ir.serialize import graph_to_json
from prism.pipeline import program_block_ops, search_config_for
from prism.search.config import SearchConfig
from prism.search.driver import search
from prism.workloads import get_workload

HERE = Path(__file__).resolve().parent
RECORDED = HERE / "recorded_searches.json"

# (case, workload, how its config is made, caps): bounded by counts, never by time, so a
# recorded result is the same on any machine
CASES: dict[str, tuple[str, str, dict[str, Any]]] = {
    "rmsnorm_matmul-prism-60k": ("rmsnorm_matmul", "prism", {"max_families": 60000}),
    "swiglu-program-5ops": ("swiglu", "program", {"max_block_ops": 5}),
    "attention-program-5ops": ("attention", "program", {"max_block_ops": 5}),
    "gated_mlp-program-5ops": ("gated_mlp", "program", {"max_block_ops": 5}),
    "lora-program-5ops": ("lora", "program", {"max_block_ops": 5}),
    "ntrans-program-5ops": ("ntrans", "program", {"max_block_ops": 5}),
    "rmsnorm_matmul-program": ("rmsnorm_matmul", "program", {}),
    # recorded on 8e6359b (the search before issue 17) with this file's config_for as it had
    # it: the three workloads the cases above leave out
    "rmsnorm_mlp-prism-60k": ("rmsnorm_mlp", "prism", {"max_families": 60000}),
    "qknorm_attention-program-6ops": ("qknorm_attention", "program", {"max_block_ops": 6}),
    "gqa-program-6ops": ("gqa", "program", {"max_block_ops": 6}),
}


def config_for(case: str) -> tuple[Any, SearchConfig]:
    workload, kind, caps = CASES[case]
    graph = get_workload(workload).graph
    # the split move (on in the pipeline's config) runs after the depth-first search and
    # only adds candidates; the records hold the depth-first search itself, and without the
    # member bound (on in the pipeline's config since: it prunes complete programs).
    # "program": the program's own ops (the pipeline's vocabulary when these were recorded)
    base = SearchConfig(budget_s=3600) if kind == "prism" else \
        replace(search_config_for(graph, 3600), split_loops=False, member_bound=False,
                block_ops=program_block_ops(graph))
    # `out_of_reach` came after the records and prunes more (the same candidates: the test
    # with it on, `test_out_of_reach_keeps_every_recorded_candidate`)
    return graph, replace(base, disabled=base.disabled | {"out_of_reach"}, **caps)


def digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:16]


def record(case: str, **where: Any) -> dict[str, Any]:
    """`where`: the executor to search on (`search`'s keyword)."""
    graph, config = config_for(case)
    return as_recorded(search(graph, config, **where))


def as_recorded(result: Any) -> dict[str, Any]:
    """What `record` keeps of a search's result."""
    summary = result.summary()
    summary.pop("seconds")
    if summary["families"]["pruned"].get("out_of_reach") == 0:
        del summary["families"]["pruned"]["out_of_reach"]     # a rule the records predate
    summary.pop("executor", None)       # where it ran, not what it found
    best = result.best
    return {"summary": summary,
            "candidates": [[c.id, c.family, c.verdict.verdict, c.verdict.method,
                            digest(graph_to_json(c.graph))] for c in result.candidates],
            "best_modeled_us": None if best is None or best.modeled_us is None
            else round(best.modeled_us, 6)}


def main(names: list[str]) -> None:
    doc = json.loads(RECORDED.read_text()) if RECORDED.exists() else {}
    for case in names or list(CASES):
        start = time.perf_counter()
        doc[case] = record(case)
        print(f"{case}: {doc[case]['summary']['families']['generated']} families, "
              f"{len(doc[case]['candidates'])} candidates, "
              f"{time.perf_counter() - start:.1f} s", flush=True)
    RECORDED.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
