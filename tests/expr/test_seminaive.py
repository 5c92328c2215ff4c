"""Semi-naive matching (`prism.expr.egraph.SEMINAIVE`): after a run's first pass, rules are
matched only where the e-graph changed. The oracle is the plain algorithm, every class matched
every pass: the same classes, the same report (iterations, e-nodes, unions per rule) on every
workload's target saturated under the axioms, and the same proofs, step for step."""

from __future__ import annotations

import pytest

from prism.workloads import WORKLOADS, get_workload
from tests.expr.flagged import proof, saturated


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_a_targets_saturation_is_the_plain_algorithms(name, monkeypatch):
    graph = get_workload(name).graph
    plain = saturated(graph, "SEMINAIVE", False, monkeypatch)
    assert plain[1] == "saturated"
    assert saturated(graph, "SEMINAIVE", True, monkeypatch) == plain


@pytest.mark.parametrize("name", ["rmsnorm_matmul", "swiglu", "lora"])
def test_proofs_are_the_plain_algorithms_step_for_step(name, monkeypatch):
    plain = proof(name, "SEMINAIVE", False, monkeypatch)
    assert plain[0] == "equivalent" and plain[1] and plain[1][0]
    assert proof(name, "SEMINAIVE", True, monkeypatch) == plain
