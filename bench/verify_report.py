"""The verifier on the Mirage corpus and on the mutation corpus: what the closing notes cite.

    .venv/bin/python bench/verify_report.py [--mutant-graphs N] [--json FILE]

Part 1, per corpus file: graphs, verdicts, the sizes each proof holds for, the median and
maximum seconds per graph and e-nodes per proof; then each workload's target saturated alone
with the search's limits (the abstract-expression rule's e-graph).
Part 2, the mutation corpus: every one-edit mutant (prism.verify.mutate) of the nine hand-fused
kernels and of the first N graphs of each corpus file, verified. Every refuted mutant is
confirmed different by a second random test (other seeds). A proven mutant must be an edit that
changes nothing (random float64 and modular testing both find it equal); any other is a
soundness bug, listed under `proven_mutants`, and makes the script exit 1.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import statistics
import sys
import time
import warnings
from pathlib import Path

from prism.expr.axioms import AXIOMS
from prism.frontend.mirage import import_mirage
from prism.ir.graph import KernelGraph
from prism.search.abstract import AbstractTarget
from prism.verify.equiv import Limits, verify
from prism.verify.mutate import mutants
from prism.verify.randomized import modular_test, random_test
from prism.workloads import WORKLOADS
from prism.workloads.known_best import known_best
from prism.workloads.mirage_corpus import default_folder, target_of

CORPUS = default_folder() or Path("shared/external/mirage_mugraphs")   # beside the repository
NODES = re.compile(r"(\d+) e-nodes in (\d+) e-classes")


def corpus_report() -> list[dict[str, object]]:
    """Per file: verdicts, proven share, seconds per graph (median, max), proof steps, and the
    e-graph each proof ended with (e-nodes: median, max), against a table of len(AXIOMS)."""
    rows = []
    print(f"axiom table: {len(AXIOMS)} axioms "
          f"({sum(a.origin == 'discovered' for a in AXIOMS)} discovered)", flush=True)
    for path in sorted(CORPUS.glob("*.json")):
        graphs = import_mirage(path)
        target = target_of(path.stem, graphs[0])
        verdicts, seconds, steps, nodes = collections.Counter(), [], [], []
        sizes = collections.Counter()
        for g in graphs:
            v = verify(target, g)
            verdicts[v.verdict] += 1
            sizes[v.sizes or "-"] += 1
            seconds.append(v.seconds)
            steps.append(v.proof_steps)
            found = NODES.search(v.report)
            if found:
                nodes.append(int(found.group(1)))
        rows.append({"file": path.name, "graphs": len(graphs), **dict(verdicts),
                     "proven_share": verdicts["equivalent"] / len(graphs),
                     "sizes": dict(sizes),
                     "median_s": statistics.median(seconds), "max_s": max(seconds),
                     "median_steps": statistics.median(steps),
                     "median_enodes": statistics.median(nodes) if nodes else None,
                     "max_enodes": max(nodes) if nodes else None})
        print(f"{path.name:<24} {len(graphs):>3} graphs  {dict(verdicts)}  {dict(sizes)}  "
              f"median {statistics.median(seconds):.3f} s  max {max(seconds):.3f} s  "
              f"e-nodes median {rows[-1]['median_enodes']} max {rows[-1]['max_enodes']}",
              flush=True)
    return rows


def targets_report() -> list[dict[str, object]]:
    """Each workload's target saturated alone under the table, with the search's limits (the
    abstract-expression rule's e-graph): whether it saturates, its size and time."""
    rows = []
    for name, w in WORKLOADS.items():
        start = time.perf_counter()
        t = AbstractTarget(w.graph)
        rows.append({"workload": name, "stop": t.report.stop_reason,
                     "iterations": t.report.iterations, "enodes": t.report.nodes,
                     "seconds": round(time.perf_counter() - start, 3)})
        print(f"target {name:<18} {t.report}", flush=True)
    return rows


def mutation_report(per_file: int) -> dict[str, object]:
    sources: list[tuple[str, KernelGraph, KernelGraph]] = []
    for name, w in WORKLOADS.items():
        sources.append((f"{name} (hand-fused)", w.graph, known_best(name, w.shapes)))
    for path in sorted(CORPUS.glob("*.json")):
        graphs = import_mirage(path)
        for g in graphs[:per_file]:
            sources.append((g.name, target_of(path.stem, g), g))
    totals: collections.Counter[str] = collections.Counter()
    kinds: collections.Counter[str] = collections.Counter()
    proven: list[str] = []
    equal_edits: list[str] = []
    undecided: list[str] = []
    started = time.perf_counter()
    for label, target, source in sources:
        counts: collections.Counter[str] = collections.Counter()
        for m in mutants(source):
            v = verify(target, m.graph, Limits(seconds=3.0))
            counts[v.verdict] += 1
            kinds[m.kind] += 1
            if v.verdict == "equivalent":
                # An edit that changes nothing is proven, rightly; one that changes the
                # function and is proven would be a soundness bug.
                same = random_test(target, m.graph, seed=11).equal and \
                    modular_test(target, m.graph).equal
                (equal_edits if same else proven).append(f"{label}: {m.description}")
            if v.verdict == "unknown":
                undecided.append(f"{label}: {m.description}")
            if v.verdict == "not_equivalent":
                # a difference seen, not only values neither side defines (nan on both)
                confirmed = random_test(target, m.graph, seed=11).found_difference
                counts["confirmed_by_random_test"] += confirmed
        totals.update(counts)
        print(f"  {label:<34} {dict(counts)}", flush=True)
    summary = {"sources": len(sources), **dict(totals), "by_kind": dict(kinds),
               "proven_mutants": proven, "proven_edits_that_change_nothing": equal_edits,
               "unknown_mutants": undecided,
               "seconds": time.perf_counter() - started}
    print(json.dumps(summary))
    return summary


def main() -> int:
    warnings.simplefilter("ignore")
    parser = argparse.ArgumentParser()
    parser.add_argument("--mutant-graphs", type=int, default=2,
                        help="corpus graphs per file to mutate (default 2)")
    parser.add_argument("--json", help="also write the report here")
    args = parser.parse_args()
    if not CORPUS.is_dir():
        print(f"corpus not found at {CORPUS}", file=sys.stderr)
        return 1
    report = {"axioms": len(AXIOMS), "corpus": corpus_report(), "targets": targets_report(),
              "mutants": mutation_report(args.mutant_graphs)}
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    return 0 if not report["mutants"]["proven_mutants"] else 1  # type: ignore[index]


if __name__ == "__main__":
    sys.exit(main())
