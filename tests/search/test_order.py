"""`SearchConfig.order` permutes the children a node tries, nothing else (issue 21, item 4).

The oracle is the canonical search itself: run to exhaustion at small caps, every other order
(analytic, the learned one with an untrained network, and the canonical order reversed, the
most different one) proves the same candidates, by graph digest, with the same verdicts; with
branch and bound on, it finds a best program of the same modeled latency (a family holding the
best is never bounded away: its bound is at most the best's latency ≤ any incumbent's)."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace

import pytest

from prism.ir.serialize import graph_to_json
from prism.pipeline import search_config_for
from prism.search import SearchConfigError, search
from prism.search.order import AnalyticOrder, Extension, child_family
from prism.search.pruning import Context
from prism.search.state import BlockState, KernelState
from prism.workloads import get_workload


class Reversed:
    """The canonical order backwards: the order furthest from it."""

    name = "reversed"

    def scores(self, ctx: Context, kernel: KernelState, block: BlockState | None,
               children: Sequence[Extension]) -> list[float]:
        return [-float(i) for i in range(len(children))]


def _config(workload: str, ops: int, **changes):
    graph = get_workload(workload).graph
    return graph, replace(search_config_for(graph, 3600), split_loops=False,
                          max_block_ops=ops, **changes)


def _proved(result) -> Counter:
    def digest(c):
        doc = graph_to_json(replace(c.graph, name=""))
        return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()
    return Counter((digest(c), c.verdict.verdict) for c in result.candidates)


def _orders():
    torch = pytest.importorskip("torch")
    from prism.learn.model import Evaluator, LearnedOrder
    torch.manual_seed(1)
    return [AnalyticOrder(), LearnedOrder(Evaluator()), Reversed()]


@pytest.mark.parametrize("workload, ops", [("swiglu", 5), ("rmsnorm_matmul", 4)])
def test_every_order_proves_what_the_canonical_search_proves(workload, ops):
    graph, config = _config(workload, ops, disabled=frozenset({"cost_bound"}))
    canonical = search(graph, config)
    assert canonical.complete and canonical.equivalent     # the oracle proved something
    for order in _orders():
        other = search(graph, replace(config, order=order))
        assert other.complete
        assert _proved(other) == _proved(canonical), order.name
        assert other.generated == canonical.generated
        assert other.pruned == canonical.pruned
        assert other.config.to_json()["order"] == order.name


def test_branch_and_bound_finds_a_best_as_good_under_every_order():
    graph, config = _config("rmsnorm_matmul", 5)
    canonical = search(graph, config)
    unbounded = _proved(search(graph, replace(config, disabled=frozenset({"cost_bound"}))))
    verdict_of = {d: v for d, v in unbounded}
    for order in _orders():
        other = search(graph, replace(config, order=order))
        assert other.best is not None and canonical.best is not None
        assert other.best.modeled_us == canonical.best.modeled_us, order.name
        # what it verified, it verified as the search without bounds did
        assert all(verdict_of[d] == v for d, v in _proved(other)), order.name


def test_the_canonical_order_is_the_generators_own():
    graph, config = _config("swiglu", 4)
    default, named = search(graph, config), search(graph, replace(config, order="canonical"))
    assert [(c.id, c.family) for c in default.candidates] == \
        [(c.id, c.family) for c in named.candidates]
    assert "order" not in config.to_json()


def test_the_analytic_order_puts_lower_bounds_first():
    """At the root, the analytic scores are the children's family bounds: computed here from
    the families the generator builds (`child_family`), sorted ascending."""
    from prism.learn.data import context
    from prism.search.generate import Callbacks, Generator
    from prism.search.pruning import family_bound_us
    from prism.search.state import Tensor
    from prism.verify.translate import leaf
    graph, config = _config("swiglu", 4, order="analytic")
    ctx = context(graph, config)
    gen = Generator(ctx, config, Callbacks(lambda f: None, lambda f, w: None,
                                           lambda f, o: None, lambda: False))
    kernel = KernelState(tuple(Tensor(t, graph.shape(t), leaf(n)) for t, n in
                               zip(graph.inputs, ctx.target.inputs, strict=True)),
                         (), len(graph.inputs))
    children = list(gen._kernel_extensions(kernel))
    ranked = gen._ranked(list(children), kernel, None)
    assert sorted(ranked, key=repr) == sorted(children, key=repr)      # a permutation
    bounds = [family_bound_us(child_family(kernel, None, c), ctx) for c in ranked]
    assert bounds == sorted(bounds)


def test_an_unknown_order_names_the_choices():
    with pytest.raises(SearchConfigError, match="canonical, analytic, learned"):
        _config("swiglu", 4, order="fastest")


def test_the_learned_order_by_name_says_how_to_build_it():
    with pytest.raises(SearchConfigError, match=r"learned_order\(\)"):
        _config("swiglu", 4, order="learned")


def test_the_command_line_takes_an_order_and_refuses_an_unknown_one(capsys):
    from prism.cli import main
    docs = {}
    for order in ("canonical", "analytic"):
        assert main(["search", "swiglu", "--max-block-ops", "5", "--block-ops",
                     "matmul,silu,mul,div", "--order", order,
                     "--json"]) == 0
        docs[order] = json.loads(capsys.readouterr().out)
    assert docs["analytic"]["verdicts"] == docs["canonical"]["verdicts"]
    assert docs["analytic"]["config"]["order"] == "analytic"
    assert "order" not in docs["canonical"]["config"]
    assert main(["search", "swiglu", "--order", "fastest", "--json"]) != 0
    assert "canonical, analytic, learned" in capsys.readouterr().out
