"""The tuner's trial order (`tune(order=...)`): the finalists are the first distinct
configurations by the given scores, every configuration is still screened, and without an
order the model ranks them as before. Oracle: the model's own latencies, sorted here."""

from __future__ import annotations

from dataclasses import replace
from itertools import pairwise

from prism.learn.data import configurations
from prism.pipeline import search_config_for
from prism.search import search
from prism.tune import Config, make_backend, tune
from prism.workloads import get_workload


def _configs():
    graph = get_workload("rmsnorm_matmul").graph
    config = replace(search_config_for(graph, 3600), split_loops=False, max_block_ops=4)
    result = search(graph, config)
    return [Config(f"k{i}", g, ()) for i, g in enumerate(configurations(result))], \
        result.config.device


def test_the_trial_order_picks_the_finalists_and_screens_everything():
    configs, device = _configs()
    assert len(configs) > 4
    backend = make_backend("model", device)
    by_model = tune(configs, backend, device, max_trials=3, compile_ptx=False)
    screened = {t.config.id: t.modeled_us for t in by_model.screened}
    want = sorted(screened, key=lambda k: (screened[k], k))[:3]
    assert [t.config.id for t in by_model.finalists] == want       # as before: the model's
    backwards = tune(configs, backend, device, max_trials=3, compile_ptx=False,
                     order=lambda cs: [-float(c.candidate[1:]) for c in cs])
    assert {t.config.id for t in backwards.screened} == set(screened)
    picked = [t.config.candidate for t in backwards.finalists]
    assert all(int(a[1:]) > int(b[1:]) for a, b in pairwise(picked))
    assert int(picked[0][1:]) == len(configs) - 1


class _WorstFirst:
    """A user's order: the search's children as they come, the tuner's trials slowest first
    (by the cost model, computed here apart from the tuner)."""

    name = "worst-first"

    def scores(self, ctx, kernel, block, children):
        return [0.0] * len(children)

    def trial_scores(self, configs, device):
        from prism.cost import modeled
        return [-modeled(c.concrete(), device).latency_us for c in configs]


def test_superoptimize_orders_the_tuners_trials_by_an_order_that_ranks_them():
    import prism
    w = get_workload("rmsnorm_matmul").with_shapes(X=(8, 64), W=(64, 64))
    config = replace(search_config_for(w.graph, 60), max_block_ops=4, order=_WorstFirst())
    result = prism.superoptimize(w, measure="model", budget_s=60, search_config=config,
                                 max_trials=2, compile_ptx=False)
    screened = sorted(((t.modeled_us, t.config.id) for t in result.tuning.screened
                       if t.modeled_us < float("inf")), reverse=True)
    finalists = [t.modeled_us for t in result.tuning.finalists]
    # the two slowest distinct programs, not the model's two fastest
    assert finalists[0] == screened[0][0] and finalists[0] > min(s for s, _ in screened)
    assert finalists == sorted(finalists, reverse=True)
