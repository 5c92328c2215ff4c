"""What a run gives under one of `prism.expr.egraph`'s switches (`SEMINAIVE`,
`COMPILED_MATCHERS`), for the tests that hold the fast algorithm to the plain one."""

from __future__ import annotations

from typing import Any

import prism.expr.egraph as egraph
from prism.search.abstract import AbstractTarget
from prism.verify.equiv import verify
from prism.workloads import get_workload
from prism.workloads.known_best import known_best


def saturated(graph: Any, flag: str, value: bool, monkeypatch: Any) -> tuple[object, ...]:
    """The target's saturated e-graph (its classes) and run report with `flag` set to `value`."""
    monkeypatch.setattr(egraph, flag, value)
    target = AbstractTarget(graph)
    classes = sorted(sorted(cls.nodes.values()) for cls in target.egraph._classes.values())
    report = target.report
    return classes, report.stop_reason, report.iterations, report.nodes, report.classes, \
        report.applied


def proof(name: str, flag: str, value: bool, monkeypatch: Any) -> tuple[str, list[Any]]:
    """The verdict and proof steps of the workload's known best program with `flag` set."""
    workload = get_workload(name)
    shapes = {t: tuple(d.value for d in workload.graph.shape(t)) for t in workload.graph.inputs}
    monkeypatch.setattr(egraph, flag, value)
    verdict = verify(workload.graph, known_best(name, shapes))
    return verdict.verdict, [[(s.rule, str(s.before), str(s.after)) for s in steps]
                             for steps in verdict.steps]
