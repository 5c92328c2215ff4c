"""`SearchConfig.member_bound` (issue 17, item 5): `cost_bound` on each complete one-kernel
program's best modeled member, before it is verified.

Oracles: the same search without the bound (its best, its candidates and verdicts), the audit
(every equivalent program under a prune, completed, verified and modeled at its best assignment:
none is faster than the incumbent), and one depth-first walk against the processes executor.
"""

from __future__ import annotations

from dataclasses import replace

from prism.cost import get_device, memory_floor_us, modeled
from prism.ir.spec import substitute_graph
from prism.search import audit, search
from prism.search.audit import feasible_assignments
from prism.search.executors import Executor
from prism.search.split import split_loop

from .test_executors import outcome

H100 = get_device("h100")


def _config(cases, **changes):
    # two grid dims and the split move: members that differ in their grids, some of which the
    # split move takes (their bound is their memory floor), some of which it does not
    return cases.reduced("attention", grid_dims=(1, 2), split_loops=True, **changes)


def _verdicts(result):
    return {c.graph.to_json().__repr__(): c.verdict.verdict for c in result.candidates}


def test_the_member_bound_prunes_and_keeps_the_best(cases):
    graph = cases.small("attention").graph
    plain = search(graph, _config(cases))
    bound = search(graph, _config(cases, member_bound=True))
    pruned = bound.summary()["families"]["pruned"]
    assert plain.summary()["families"]["pruned"]["cost_bound"] == 0
    assert pruned["cost_bound"] > 0
    assert bound.exhaustive and plain.exhaustive
    assert bound.best is not None and plain.best is not None
    assert bound.best.modeled_us == plain.best.modeled_us
    # fewer programs verified, each with the verdict the search without the bound gave it
    mine, theirs = _verdicts(bound), _verdicts(plain)
    assert len(mine) < len(theirs)
    assert all(theirs.get(key) == verdict for key, verdict in mine.items() if key in theirs)


def test_the_member_bound_prunes_no_faster_program(cases):
    report = audit(cases.small("attention").graph, "cost_bound",
                   _config(cases, member_bound=True), label="attention")
    assert report.complete and report.pruned > 0 and report.checked > 0
    assert report.sound, report.wrong


def test_the_member_bound_is_the_same_on_processes(cases):
    graph = cases.small("attention").graph
    config = _config(cases, member_bound=True)
    walk = outcome(search(graph, replace(config, split_depth=99)))
    assert walk["summary"]["families"]["pruned"]["cost_bound"] > 0
    assert outcome(search(graph, config, executor=Executor("processes", 2))) == walk


def test_the_memory_floor_is_below_every_split_program(cases):
    """A split member's bound is its memory floor: below the modeled latency of the program the
    split move makes of it, at every assignment that fits."""
    result = search(cases.small("attention").graph, _config(cases))
    splittable = [c.graph for c in result.candidates if c.graph.num_kernels == 1
                  and split_loop(c.graph)[0] is not None]
    assert splittable
    for member in splittable[:5]:
        floor = memory_floor_us(member, H100)
        program = split_loop(member)[0]
        envs = feasible_assignments(program, H100)
        assert envs
        for env in envs:
            assert floor <= modeled(substitute_graph(program, env), H100).latency_us
