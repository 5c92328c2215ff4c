"""`out_of_reach` (issue 17, item 3): in the last kernel, a tensor waiting for a consumer whose
class in the target's e-graph is further from the output than the ops left under the cap.

Oracles: distances counted by hand on a small e-graph and the inner heads of ops read by hand;
the audit (every completion under each prune, with outputs told by shape, verified: none is
equivalent); the step checker, which recomputes each prune's distance from a fresh saturation
and must reject corrupted evidence; and the recorded searches (`test_recorded.py`: every
recorded candidate again with the rule on).
"""

from __future__ import annotations

import copy

import pytest

from prism.expr.egraph import EGraph
from prism.expr.terms import Term
from prism.search import audit, search
from prism.search.abstract import AbstractTarget, distances, inner_heads
from prism.steps import check_records, export
from prism.trace import FamilyPruned, Tracer


def _leaf(name: str) -> Term:
    return Term(name, ())


def test_inner_heads_are_what_an_op_puts_below_its_top():
    choices = {"red_ld_rms": [{}], "mul": [{}], "rms_norm": [{"eps": 1e-6}], "nored": [{}]}
    assert inner_heads(["mul", "rms_norm", "nored"], lambda k: choices[k]) == frozenset()
    assert inner_heads(["red_ld_rms"], lambda k: choices[k]) == {"mean", "square"}
    # with an epsilon the accumulator adds it under the root: sqrt(add_scalar(mean(...)))
    eps = inner_heads(["red_ld_rms"], lambda k: [{"eps": 1e-5}])
    assert eps == {"mean", "square", "add_scalar"}
    # an op the target gives no attributes for is never tried: it adds nothing
    assert inner_heads(["red_ld_rms"], lambda k: []) == frozenset()


def test_distances_count_only_the_heads_an_op_tops():
    # div(X, sqrt(mean(square X))): counted, div and sqrt; free, mean and square
    x = _leaf("X")
    square = Term("square", (x,))
    mean = Term("mean", (square, _leaf("1")))
    sqrt = Term("sqrt", (mean,))
    root = Term("div", (x, sqrt))
    eg = EGraph()
    top = eg.add(root)
    eg.rebuild()
    d = distances(eg, [top], frozenset({"mean", "square"}))
    by_term = {t: d[eg.find(eg.lookup(t))] for t in (root, sqrt, mean, square, x)}
    # root 0; its children 1 (through div); below sqrt 2; mean and square free: square 2;
    # X is a child of div (1) and of square (2): 1
    assert by_term == {root: 0, sqrt: 1, mean: 2, square: 2, x: 1}
    # every head counted: square 3, X still 1
    d = distances(eg, [top], frozenset())
    assert d[eg.find(eg.lookup(square))] == 3 and d[eg.find(eg.lookup(x))] == 1


def test_the_targets_distances_bound_its_own_program():
    """The target's own program is one way to the output: each of its tensors' classes is at
    most as far as the ops that follow it there."""
    from prism.workloads import get_workload
    target = AbstractTarget(get_workload("ntrans").graph)
    reach = target.reach(("rms_norm", "add", "mul", "nored"))
    # rms_norm(X + alpha * (rms_norm(H) + X)): H is 5 ops from the output, X 4 (then 3 via
    # its later use), alpha 3
    h, x, alpha = (_leaf(n) for n in ("H", "X", "alpha"))
    assert reach[target.lookup(h)] <= 5
    assert reach[target.lookup(x)] <= 4
    assert reach[target.lookup(alpha)] <= 3
    assert reach[target.egraph.find(target.roots[0])] == 0


def _config(cases, **changes):
    return cases.reduced("ntrans", **{"max_block_ops": 6, **changes})


@pytest.mark.slow
def test_an_audit_finds_every_prune_sound(cases):
    """Every completion under each prune (outputs told by shape, as `dead_end_output` would
    not) verified: none is equivalent, while the search finds equivalent programs."""
    graph = cases.small("ntrans").graph
    result = search(graph, _config(cases))
    assert result.summary()["families"]["pruned"]["out_of_reach"] > 0
    assert result.equivalent and result.exhaustive
    report = audit(graph, "out_of_reach", _config(cases), label="ntrans")
    assert report.complete and report.pruned > 0 and report.checked > 0
    assert report.sound, report.wrong[:1]


def test_the_rule_reads_only_the_last_kernel_storing_one_tensor(cases):
    from dataclasses import replace

    from prism.search.pruning import Context, reach_applies
    from prism.steps.states import root
    graph = cases.small("ntrans").graph
    on = search(graph, _config(cases, max_block_ops=5)).summary()["families"]["pruned"]
    assert on["out_of_reach"] > 0
    # two stored tensors: one may be a tensor no output contains
    two = search(graph, _config(cases, max_block_ops=5, max_block_outputs=2))
    assert two.summary()["families"]["pruned"]["out_of_reach"] == 0
    # a kernel op may follow the first kernel (its stored tensor need not be an output), not
    # the second
    target = AbstractTarget(graph)
    ctx = Context(target, _config(cases, kernel_ops=("add",), max_kernel_ops=2), frozenset())
    start = root(graph).kernel
    assert not reach_applies(ctx, start)
    assert reach_applies(ctx, replace(start, kernels=1))


def test_each_prune_rechecks_and_corrupted_evidence_is_reported(cases):
    tracer = Tracer()
    search(cases.small("ntrans").graph, _config(cases, max_block_ops=5, record_graphs=True),
           label="ntrans", tracer=tracer)
    assert any(isinstance(e, FamilyPruned) and e.rule == "out_of_reach" for e in tracer.events)
    records = [r for r in export(tracer.events, "ntrans").records
               if r["kind"] == "prune" and r["evidence"]["rule"] == "out_of_reach"]
    assert records
    report = check_records(records)
    assert report.ok, report.failures[:3]
    records = [r for r in records if "distance" in r["evidence"]]   # one tensor too far alone
    assert records
    bad = []
    for field, change in (("remaining", 3), ("cap", 3)):
        r = copy.deepcopy(records[0])
        r["evidence"][field] += change
        bad.append(r)
    # a cap large enough to reach the output: the recomputed distance no longer exceeds it
    r = copy.deepcopy(records[0])
    r["evidence"]["cap"] += 20
    r["evidence"]["remaining"] += 20
    bad.append(r)
    r = copy.deepcopy(records[0])
    r["evidence"]["tensor"] = "nothing"
    bad.append(r)
    for r in bad:
        assert not check_records([r]).ok, r["evidence"]


# -- the waiting tensors together (`ops_needed`) ------------------------------------------------

def _fewest_ops(distances: tuple[int, ...], arity: int) -> int:
    """The oracle: breadth first over what is left to place, each op reading 1..arity of the
    tensors and results and leaving one result that needs one op fewer above it, to one
    result needing none."""
    from collections import deque
    from itertools import combinations
    start = tuple(sorted(distances))
    seen = {start: 0}
    queue = deque([start])
    while queue:
        state = queue.popleft()
        if state == (0,):
            return seen[state]
        for r in range(1, min(arity, len(state)) + 1):
            for chosen in combinations(range(len(state)), r):
                made = max(max(state[i] for i in chosen) - 1, 0)
                rest = [d for i, d in enumerate(state) if i not in chosen]
                after = tuple(sorted([*rest, made]))
                if after not in seen:
                    seen[after] = seen[state] + 1
                    queue.append(after)
    raise AssertionError("unreachable")


def test_ops_needed_is_the_fewest_ops_on_every_small_case():
    """Never above the fewest ops (the prune would be unsound), and here equal to them."""
    from itertools import combinations_with_replacement

    from prism.search.pruning import ops_needed
    cases = 0
    for arity in (2, 3):
        for n in range(1, 6):
            for spread in combinations_with_replacement(range(5), n):
                assert ops_needed(list(spread), arity) == _fewest_ops(spread, arity), \
                    (spread, arity)
                cases += 1
    assert cases == 2 * 251
    # the two bounds it generalises: every distance 0 (cannot_close), one tensor (the distance)
    assert ops_needed([0] * 5, 2) == 4 and ops_needed([7], 2) == 7 and ops_needed([], 2) == 0


def test_the_waiting_tensors_together_prune_and_recheck(cases, monkeypatch):
    """ntrans at 5 ops: some families have every waiting tensor within reach alone and not
    together; the prune's evidence rechecks from the state, and corrupted evidence does not.
    That the rule keeps every candidate: `test_recorded.py` (the recorded searches with it on)
    and the audit above. The sibling bounds (`test_completion.py`) are off here: they prune
    these families' parents first."""
    from prism.search import pruning
    monkeypatch.setattr(pruning, "_sibling_miss", lambda *args: None)
    graph = cases.small("ntrans").graph
    tracer = Tracer()
    config = _config(cases, max_block_ops=5, record_graphs=True)
    search(graph, config, label="ntrans", tracer=tracer)
    together = [r for r in export(tracer.events, "ntrans").records
                if r["kind"] == "prune" and "waiting" in r["evidence"]]
    assert together
    assert check_records(together[:10]).ok
    r = together[0]
    ev = r["evidence"]
    assert all(d <= ev["remaining"] for _, _, d in ev["waiting"]) and ev["needed"] > \
        ev["remaining"]
    bad = []
    more = ev["needed"] - ev["remaining"]      # as many ops left as they need
    for change in ({"remaining": ev["needed"], "cap": ev["cap"] + more},
                   {"waiting": [[n, e, d + 1] for n, e, d in ev["waiting"]]},
                   {"waiting": ev["waiting"][:1]},
                   {"arity": 1}):
        wrong = copy.deepcopy(r)
        wrong["evidence"].update(change)
        bad.append(wrong)
    for wrong in bad:
        assert not check_records([wrong]).ok, wrong["evidence"]

