"""The search tree alone: how many families the generator makes for a workload at a block-op
cap, with Prism's full block vocabulary and the program's ops (`superoptimize`'s config
otherwise), on one core, with no verification.

    OMP_NUM_THREADS=1 .venv/bin/python bench/tree_size.py WORKLOAD CAP [CAP ...]
                                                         [--no-siblings] [--corpus]

One JSON line per cap: seconds (the generator's, the target's saturation apart), families
generated, complete families and a digest of their graphs (equal digests: the same complete
families), and the prunes per rule (`out_of_reach/siblings`: those by the sibling bounds of
`prism.search.completion`). `--no-siblings` switches those bounds off, to measure what they
save: the complete families must not change.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

from prism.ir.serialize import graph_to_json
from prism.pipeline import search_config_for
from prism.search import pruning
from prism.search.abstract import AbstractTarget
from prism.search.config import BLOCK_OPS, BLOCK_VOCABULARY
from prism.search.generate import Callbacks, Generator
from prism.search.pruning import Context, Pruned, leaves
from prism.search.state import Tensor
from prism.verify.translate import leaf
from prism.workloads import get_workload


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workload")
    parser.add_argument("caps", nargs="+", type=int)
    parser.add_argument("--no-siblings", action="store_true")
    parser.add_argument("--corpus", action="store_true",
                        help="a program of the test corpus instead of a workload")
    args = parser.parse_args()
    if args.corpus:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from corpus import corpus_targets
        graph = corpus_targets()[args.workload]().graph
    else:
        graph = get_workload(args.workload).graph
    if args.no_siblings:
        pruning._sibling_miss = lambda *_: None     # type: ignore[assignment]
    used = {op.kind for op in graph.ops}
    ops = tuple(o for o in BLOCK_VOCABULARY if o in set(BLOCK_OPS) | used)
    base = replace(search_config_for(graph, 3600), block_ops=ops)
    target = AbstractTarget(graph, base.abstract_limits)
    needed = set().union(*(leaves(t) for t in target.terms)) & set(target.inputs)
    inputs = [Tensor(t, graph.shape(t), leaf(n))
              for t, n in zip(graph.inputs, target.inputs, strict=True)]
    for cap in args.caps:
        config = replace(base, max_block_ops=cap)
        ctx = Context(target, config, frozenset(needed))
        pruned: collections.Counter[str] = collections.Counter()
        complete: list[str] = []

        def count(why: Pruned, pruned: collections.Counter[str] = pruned) -> None:
            pruned[why.rule + ("/siblings" if why.evidence.get("siblings") else "")] += 1

        def done(fam, outputs, complete=complete) -> None:      # type: ignore[no-untyped-def]
            complete.append(json.dumps(graph_to_json(fam.kernel.graph(outputs, name="x")),
                                       sort_keys=True))

        generator = Generator(ctx, config, Callbacks(
            lambda _fam: None, lambda _fam, why: count(why), done, lambda: False,
            quiet=lambda _rule, _prefix: True, counted=lambda why, _parent: count(why)))
        start = time.perf_counter()
        generator.run(inputs)
        seconds = time.perf_counter() - start
        digest = hashlib.sha256("".join(sorted(complete)).encode()).hexdigest()[:12]
        print(json.dumps({"workload": args.workload, "cap": cap, "siblings": not args.no_siblings,
                          "seconds": round(seconds, 1), "generated": generator.count,
                          "complete": len(complete), "digest": digest,
                          "pruned": dict(pruned)}), flush=True)


if __name__ == "__main__":
    main()
