"""The evaluator's encoding of a family reads the same from the generator's state and from the
state a trace records, and a child's chain is its parent's plus one decision (issue 21, item 3).
Oracles: the generator's own states during a search, and `prism.steps.states.rebuild` of each
child's recorded graph (the text-form states `prism export-steps` writes)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from prism.learn import features
from prism.learn.data import best_below, context, family_examples, labelled_search
from prism.pipeline import search_config_for
from prism.search import search
from prism.search.order import Extension, child_family
from prism.search.pruning import Context
from prism.search.state import BlockState, KernelState
from prism.steps.states import rebuild
from prism.trace import FamilyGenerated
from prism.workloads import get_workload


class Checking:
    """An order that keeps the canonical order and checks every child it is shown."""

    name = "checking"

    def __init__(self) -> None:
        self.checked = 0

    def scores(self, ctx: Context, kernel: KernelState, block: BlockState | None,
               children: Sequence[Extension]) -> list[float]:
        parent = features.tokens(ctx, kernel, block)
        for ext in children:
            fam = child_family(kernel, block, ext)
            if fam is None:
                continue
            mine = features.tokens(ctx, fam.kernel, fam.block)
            assert mine[:-1] == parent
            # the same family read back from its graph, as a trace records it
            again = rebuild(replace(fam.graph, name=""))
            assert features.tokens(ctx, again.kernel, again.block) == mine
            assert features.node(ctx, again.kernel, again.block) == \
                features.node(ctx, fam.kernel, fam.block)
            self.checked += 1
        return [0.0] * len(children)


def _case(workload: str = "swiglu", ops: int = 4):
    graph = get_workload(workload).graph
    return graph, replace(search_config_for(graph, 3600), split_loops=False, max_block_ops=ops)


def test_a_childs_chain_is_its_parents_plus_one_decision_and_reads_back_from_its_graph():
    graph, config = _case()
    order = Checking()
    search(graph, replace(config, order=order))
    assert order.checked > 100


def test_labels_are_the_best_proven_latency_below_each_family():
    """Checked against the tree itself: a family's label is the best of its own candidates
    and its children's labels; the root's children hold the search's best."""
    graph, config = _case("rmsnorm_matmul", 4)
    result, events = labelled_search(graph, config, "t")
    best = best_below(events, result)
    fams = [e for e in events if isinstance(e, FamilyGenerated)]
    children: dict[str | None, list[str]] = {}
    for e in fams:
        children.setdefault(e.parent, []).append(e.id)
    own: dict[str, float] = {}
    for c in result.equivalent:
        if c.modeled_us is not None:
            own[c.family] = min(own.get(c.family, math.inf), c.modeled_us)
    for e in fams:
        want = min([own.get(e.id, math.inf)] + [best.get(k, math.inf)
                                                 for k in children.get(e.id, [])])
        assert best.get(e.id, math.inf) == want
    assert result.best is not None
    assert min(best[k] for k in children[None] if k in best) == result.best.modeled_us


def test_examples_encode_every_family_of_a_finished_search():
    graph, config = _case("rmsnorm_matmul", 4)
    examples, result = family_examples(graph, config, "t")
    assert result.complete and examples.censored == 0
    assert len(examples.families) + sum(examples.skipped.values()) == result.generated
    reach = [e for e in examples.families if e.reach]
    assert reach and all(math.isfinite(e.log_ratio) for e in reach)
    ctx = context(graph, result.config)
    assert all(len(e.program) == features.PROGRAM_NUMBERS and
               len(e.node) == features.NODE_NUMBERS for e in examples.families)
    assert ctx.config.record_graphs
