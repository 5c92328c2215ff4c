"""One device, everywhere: the device a run names sets the hardware rule's limits, the parameter
candidates, the cost bound and the tuner. The oracle is the datasheet limit (A100: 163 KiB of
shared memory per block, H100: 227 KiB) evaluated on the concrete tiles, without z3."""

from __future__ import annotations

from dataclasses import replace

import pytest

import prism
from prism.cost import get_device
from prism.frontend.builder import Block, Graph
from prism.ir.graph import KernelGraph
from prism.search import SearchConfig, SearchConfigError, check_hardware
from prism.search.audit import within_limits
from prism.search.pruning import RULES, Context, Family

A100, H100 = get_device("a100"), get_device("h100")


def big_tile_kernel() -> KernelGraph:
    """RMSNorm + MatMul with W[1024, 96] replicated into every block: its tiles take 211 KiB of
    shared memory whatever the grid size, between A100's 163 KiB and H100's 227 KiB."""
    g = Graph("big_tile")
    X = g.input("X", (8, 1024))
    W = g.input("W", (1024, 96))
    tb = Block(grid=("g0",), forloop_range=1)
    x = tb.input(X, imap=(-1,), fmap=None)
    w = tb.input(W, imap=(-1,), fmap=None)
    y = tb.div(tb.accum(tb.matmul(x, w), "nored"), tb.accum(x, "red_ld_rms"))
    tb.output(y, omap=(-1,))
    (out,) = g.customized(tb)
    g.output(out)
    return g.build()


def closed_family(graph: KernelGraph) -> Family:
    """The graph as the family the search hands the rules when a block graph is stored."""
    fam = Family("f1", None, "close", "customized", "store", None, None, None)  # type: ignore
    fam.__dict__["graph"] = graph          # the family's graph (a cached property)
    return fam


def test_the_limit_lies_between_the_devices():
    graph = big_tile_kernel()
    env = {"g0": 1}
    assert within_limits(graph, env, H100) and not within_limits(graph, env, A100)


def test_a_family_that_fits_h100_is_pruned_only_on_a100():
    graph = big_tile_kernel()
    fam = closed_family(graph)
    verdicts = {}
    for device in (H100, A100):
        ctx = Context(None, SearchConfig(device=device), frozenset())
        verdicts[device.name] = RULES["hardware"](ctx, fam)
    assert verdicts["h100"] is None
    pruned = verdicts["a100"]
    assert pruned is not None and pruned.evidence["claim"] == "no_feasible"
    core = pruned.evidence["unsat_core"]
    assert any(f"smem ≤ {A100.smem_bytes} B" in c for c in core), core
    assert pruned.evidence["device"]["name"] == "a100"
    assert check_hardware(graph, "h100").feasible is True
    assert check_hardware(graph, "a100").feasible is False


def test_a_config_takes_a_device_by_name_or_spec():
    assert SearchConfig(device="a100").device == A100
    assert SearchConfig().device == H100
    small = replace(H100, smem_bytes=256)
    assert SearchConfig(device=small).device.smem_bytes == 256
    assert SearchConfig(device="A100").to_json()["device"] == "a100"
    with pytest.raises(SearchConfigError, match="known devices"):
        SearchConfig(device="tpu")


def test_the_run_device_reaches_the_search_and_the_parameters(cases):
    workload = cases.small("rmsnorm_matmul")
    config = cases.reduced("rmsnorm_matmul")
    result = prism.superoptimize(workload, device="a100", budget_s=120, search_config=config,
                                 compile_ptx=False, max_trials=2)
    assert result.search is not None and result.search.config.device == A100
    assert result.search.summary()["device"] == "a100"
    assert result.best is not None
    env = dict(result.best.params)
    assert within_limits(result.best.graph, env, A100)
