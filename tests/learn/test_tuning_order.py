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
