"""Semi-naive matching (`prism.expr.egraph.SEMINAIVE`): after a run's first pass, rules are
matched only where the e-graph changed. The oracle is the plain algorithm, every class matched
every pass: the same classes, the same report (iterations, e-nodes, unions per rule) on every
workload's target saturated under the axioms, and the same proofs, step for step."""

from __future__ import annotations

import pytest

import prism.expr.egraph as egraph
from prism.search.abstract import AbstractTarget
from prism.verify.equiv import verify
from prism.workloads import WORKLOADS, get_workload
from prism.workloads.known_best import known_best


def _saturated(graph, seminaive: bool, monkeypatch) -> tuple[object, ...]:
    monkeypatch.setattr(egraph, "SEMINAIVE", seminaive)
    target = AbstractTarget(graph)
    classes = sorted(sorted(cls.nodes.values()) for cls in target.egraph._classes.values())
    report = target.report
    return classes, report.stop_reason, report.iterations, report.nodes, report.classes, \
        report.applied


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_a_targets_saturation_is_the_plain_algorithms(name, monkeypatch):
    graph = get_workload(name).graph
    plain = _saturated(graph, False, monkeypatch)
    assert plain[1] == "saturated"
    assert _saturated(graph, True, monkeypatch) == plain


@pytest.mark.parametrize("name", ["rmsnorm_matmul", "swiglu", "lora"])
def test_proofs_are_the_plain_algorithms_step_for_step(name, monkeypatch):
    workload = get_workload(name)
    shapes = {t: tuple(d.value for d in workload.graph.shape(t)) for t in workload.graph.inputs}
    candidate = known_best(name, shapes)

    def proof(seminaive: bool):
        monkeypatch.setattr(egraph, "SEMINAIVE", seminaive)
        verdict = verify(workload.graph, candidate)
        return verdict.verdict, [[(s.rule, str(s.before), str(s.after)) for s in steps]
                                 for steps in verdict.steps]

    plain = proof(False)
    assert plain[0] == "equivalent" and plain[1] and plain[1][0]
    assert proof(True) == plain
