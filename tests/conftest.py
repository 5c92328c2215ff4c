"""Fixtures shared by the tests: the Mirage corpus folder, and reduced search settings per
workload (small shapes, the vocabulary the program needs, one grid dim) so that a search runs in
seconds — shared by the search, tuning and pipeline tests through `cases`."""

from __future__ import annotations

import functools
import types
from pathlib import Path

import pytest
from hypothesis import settings

from prism.frontend.workload import Workload
from prism.search import SearchConfig, SearchResult, search
from prism.workloads import get_workload

# Property tests run the same examples on every run: a fixed seed, no example database, no
# deadline (the machine is shared). `pytest --hypothesis-profile=thorough` draws fresh random
# examples, twenty times as many, and prints how to replay a failure.
settings.register_profile("deterministic", derandomize=True, database=None, deadline=None,
                          max_examples=100)
settings.register_profile("thorough", derandomize=False, deadline=None, max_examples=2000,
                          print_blob=True)
settings.load_profile("deterministic")

# The external Mirage μGraph corpus lives in the shared folder beside the repository.
MIRAGE_CORPUS = Path(__file__).resolve().parents[1].parent / "shared/external/mirage_mugraphs"


@pytest.fixture(scope="session")
def corpus_dir() -> Path:
    """The Mirage μGraph corpus folder; skips the test when it is not there."""
    if not MIRAGE_CORPUS.is_dir():
        pytest.skip(f"Mirage μGraph corpus not found at {MIRAGE_CORPUS} "
                    "(shared/external/mirage_mugraphs beside the repository)")
    return MIRAGE_CORPUS

SMALL = {
    "rmsnorm_matmul": dict(X=(8, 64), W=(64, 64)),
    "rmsnorm_mlp": dict(X=(8, 64), Wup=(64, 64), Wgate=(64, 64)),
    "swiglu": dict(X=(8, 64), Wgate=(64, 64), Wup=(64, 64)),
    "gated_mlp": dict(X=(8, 64), W1=(64, 64), W2=(64, 64)),
    "attention": dict(Q=(2, 8, 32), K=(2, 32, 64), V=(2, 64, 32)),
    "qknorm_attention": dict(Q=(2, 8, 32), K=(2, 32, 64), V=(2, 64, 32)),
    "gqa": dict(Q=(2, 8, 32), K=(2, 32, 64), V=(2, 64, 32)),
    "lora": dict(X=(8, 64), W=(64, 64), A=(64, 16), B=(16, 64)),
    "ntrans": dict(H=(8, 64), X=(8, 64), alpha=(8, 64)),
}

REDUCED = {
    "rmsnorm_matmul": dict(max_block_ops=4, block_ops=("matmul", "div", "rms_norm"),
                           accumulators=("nored", "red_ld_rms")),
    "rmsnorm_mlp": dict(max_block_ops=8, block_ops=("matmul", "div", "mul"),
                        accumulators=("nored", "red_ld_rms")),
    "swiglu": dict(max_block_ops=6, block_ops=("matmul", "silu", "mul"), accumulators=("nored",)),
    "gated_mlp": dict(max_block_ops=6, block_ops=("matmul", "silu", "mul"),
                      accumulators=("nored",)),
    "attention": dict(max_block_ops=6, block_ops=("matmul", "exp", "div"),
                      accumulators=("nored", "red_ld_sum")),
    "qknorm_attention": dict(max_block_ops=7, block_ops=("matmul", "exp", "div", "rms_norm"),
                             accumulators=("nored", "red_ld_sum")),
    "gqa": dict(max_block_ops=6, block_ops=("matmul", "exp", "div"),
                accumulators=("nored", "red_ld_sum")),
    "lora": dict(max_block_ops=5, block_ops=("matmul", "add"), accumulators=("nored",),
                 max_block_inputs=4),
    "ntrans": dict(max_block_ops=6, block_ops=("rms_norm", "add", "mul"),
                   accumulators=("nored",)),
}


def small(name: str) -> Workload:
    return get_workload(name).with_shapes(**SMALL[name])


def reduced(name: str, **overrides: object) -> SearchConfig:
    return SearchConfig(**{"grid_dims": (1,), "budget_s": 300.0, **REDUCED[name],
                           **overrides})  # type: ignore[arg-type]


@functools.cache
def searched(name: str) -> SearchResult:
    """The reduced search of a workload, once per test session."""
    return search(small(name).graph, reduced(name), label=name)


@pytest.fixture(scope="session")
def cases() -> types.SimpleNamespace:
    return types.SimpleNamespace(SMALL=SMALL, REDUCED=REDUCED, small=small, reduced=reduced,
                                 searched=searched)
