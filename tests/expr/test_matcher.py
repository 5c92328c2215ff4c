"""Compiled matchers (`prism.expr.egraph._matcher`, `COMPILED_MATCHERS`): a pattern with an op at
its root matched by generated nested loops. The oracle is `EGraph._match`, the recursive matcher:
every match, in its order, with its variables in its order, at every class of every workload's
saturated target, with the other side's lookup over its tuple (`_lookup`) `_lookup_instance`'s
over its dict; and the same saturation and proofs, step for step, either way."""

from __future__ import annotations

import pytest

import prism.expr.egraph as egraph
from prism.expr.axioms import rules
from prism.search.abstract import AbstractTarget
from prism.workloads import WORKLOADS, get_workload
from tests.expr.flagged import proof, saturated


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_every_match_is_the_recursive_matchers_in_its_order(name):
    target = AbstractTarget(get_workload(name).graph)
    eg = target.egraph
    checked = looked = 0
    for rule in rules():
        for direction in rule.directions():
            pattern = egraph._compile(rule.sides(direction)[0].term)
            if isinstance(pattern, str):
                continue
            names, match = egraph._matcher(pattern)
            for root in eg._index.get(pattern[0], ()):
                want = eg._match(pattern, root, {})
                got = [dict(zip(names, found, strict=True)) for found in match(eg._classes, root)]
                assert [list(s.items()) for s in got] == [list(s.items()) for s in want]
                checked += len(want)
                # the other side's lookup over the tuple is `_lookup_instance` over the dict
                built = egraph._compile(rule.sides(egraph._REVERSE[direction])[0].term)
                lookup = egraph._lookup(built, names)
                for found, subst in zip(match(eg._classes, root), want, strict=True):
                    assert lookup(found, eg._uf, eg._memo, eg.find) == \
                        eg._lookup_instance(built, subst)
                    looked += eg._lookup_instance(built, subst) is not None
    assert checked > 0 and looked > 0


@pytest.mark.parametrize("name", ["rmsnorm_matmul", "ntrans", "gqa"])
def test_saturation_and_proofs_are_the_recursive_matchers(name, monkeypatch):
    graph = get_workload(name).graph
    assert saturated(graph, "COMPILED_MATCHERS", True, monkeypatch) == \
        saturated(graph, "COMPILED_MATCHERS", False, monkeypatch)
    plain = proof(name, "COMPILED_MATCHERS", False, monkeypatch)
    assert plain[0] == "equivalent" and plain[1] and plain[1][0]
    assert proof(name, "COMPILED_MATCHERS", True, monkeypatch) == plain
