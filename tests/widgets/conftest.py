"""One real trace for every widget test: the whole pipeline on a small RMSNorm+MatMul (≈10 s),
recorded once per session; the live-search tests reuse its target and search settings."""

from __future__ import annotations

import time
import types
from collections.abc import Callable

import pytest

import prism
import prism.search

SHAPES = {"X": (8, 64), "W": (64, 64)}


def search_config() -> prism.search.SearchConfig:
    return prism.search.SearchConfig(grid_dims=(1,), max_block_ops=4,
                                     block_ops=("matmul", "div", "rms_norm"),
                                     accumulators=("nored", "red_ld_rms"), budget_s=120)


@pytest.fixture(scope="session")
def small() -> types.SimpleNamespace:
    """The small target and the search settings the trace was recorded with."""
    workload = prism.get_workload("rmsnorm_matmul").with_shapes(**SHAPES)
    return types.SimpleNamespace(workload=workload, graph=workload.graph,
                                 config=search_config())


@pytest.fixture(scope="session")
def recorded(small: types.SimpleNamespace) -> types.SimpleNamespace:
    """`events`: the trace of `prism.superoptimize` on the small target; `result`: its result."""
    result = prism.superoptimize(small.workload, search_config=small.config, max_trials=3,
                                 compile_ptx=False)
    return types.SimpleNamespace(events=list(result.trace), result=result)


def wait_until(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    """Poll `condition` until it holds; fail the test after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"waited {timeout} s for a condition that never held")
        time.sleep(0.01)


@pytest.fixture
def until() -> Callable[..., None]:
    return wait_until
