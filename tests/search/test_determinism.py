"""No pruning decision and no verdict depends on wall-clock time: the search's limits are counts
(e-graph iterations and nodes, z3's resource limit), so the same search prunes the same families
and verifies the same candidates on an idle machine, on a loaded one, and under a clock that runs
ten thousand times too fast (a machine so slow that every time limit would fire at once).

The oracle is the same search on an idle machine with the real clock."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from prism.search import search


def fingerprint(result):
    """What a search decided: families and prunes per rule, and each candidate's verdict on
    its graph."""
    return ({"generated": result.generated, "pruned": dict(result.pruned),
             "set_aside": dict(result.set_aside), "complete": result.complete},
            [(c.id, c.verdict.verdict, c.verdict.proof_steps, repr(c.graph.to_json()),
              c.assignment, c.modeled_us) for c in result.candidates],
            result.best.id if result.best else None)


def run(cases, name):
    return search(cases.small(name).graph, cases.reduced(name, budget_s=1e9), label=name)


@pytest.mark.parametrize("name", ["rmsnorm_matmul", "attention"])
def test_a_fast_clock_changes_no_decision(cases, name, monkeypatch):
    idle = fingerprint(run(cases, name))
    real = time.perf_counter
    start = real()
    # Every second of work reads as 10,000 s: any time limit still in a decision fires.
    monkeypatch.setattr(time, "perf_counter", lambda: start + (real() - start) * 1e4)
    assert fingerprint(run(cases, name)) == idle


def test_what_ran_before_changes_no_decision(cases):
    """A candidate's modeled latency (the incumbent the cost bound prunes with) is its best
    fitting assignment, not whichever model z3 returns after the queries that came before."""
    first = fingerprint(run(cases, "rmsnorm_matmul"))
    run(cases, "attention")
    assert fingerprint(run(cases, "rmsnorm_matmul")) == first


@pytest.mark.slow
def test_a_loaded_machine_changes_no_decision(cases):
    idle = fingerprint(run(cases, "rmsnorm_matmul"))
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(3)]
    try:
        loaded = fingerprint(run(cases, "rmsnorm_matmul"))
    finally:
        for p in burners:
            p.kill()
            p.wait()
    assert loaded == idle
