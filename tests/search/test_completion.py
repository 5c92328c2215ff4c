"""`out_of_reach`'s sibling bounds (`prism.search.completion`, issue 17 item 3): the ops a
completion needs, counting the operands its way to the output reads and must build.

Oracles: heights recomputed level by level straight from the e-graph (the least height of a
term over the leaves and the held classes); the chain bound against every walk of a small
e-graph; the searches with the bounds on and off (the same complete families, by graph
digest, with fewer generated); the step checker, which recomputes each prune from a fresh
saturation and rejects corrupted evidence.
"""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import replace

import pytest

from prism.expr.egraph import EGraph
from prism.expr.terms import Term
from prism.search import pruning
from prism.search.completion import FAR, Completion
from prism.steps import check_records, export
from prism.trace import Tracer


def _t(head: str, *args: Term) -> Term:
    return Term(head, tuple(args))


X, W, ONE = _t("X"), _t("W"), _t("1")
FREE = frozenset({"mean", "square"})


def _levels(eg: EGraph, held: set[int], free: frozenset[str]) -> dict[int, int]:
    """The oracle for heights: the classes with a term of height ≤ k, for k = 0, 1, ...: at
    level 0 the leaf classes and the held ones, closed under free heads; each next level adds
    the classes with a counted e-node over the previous level, closed again."""
    classes = eg.classes()
    level: dict[int, int] = {}
    reached = {c for c in classes if c in held or any(not n.children for n in eg.nodes(c))}
    k = 0
    while True:
        grown = True
        while grown:        # close under free heads at this level
            grown = False
            for c in classes:
                if c not in reached and any(
                        n.children and n.head in free and
                        all(eg.find(x) in reached for x in n.children) for n in eg.nodes(c)):
                    reached.add(c)
                    grown = True
        for c in reached:
            level.setdefault(c, k)
        if len(reached) == len(classes) or k > len(classes):
            return level
        reached |= {c for c in classes if any(
            n.children and n.head not in free and all(eg.find(x) in reached
                                                      for x in n.children)
            for n in eg.nodes(c))}
        k += 1


def _small_egraph() -> tuple[EGraph, int]:
    """div(Y, sqrt(mean(square Y))) with Y = add(mul(X, W), X), and a second way to Y."""
    y = _t("add", _t("mul", X, W), X)
    root = _t("div", y, _t("sqrt", _t("mean", _t("square", y), ONE)))
    eg = EGraph()
    top = eg.add(root)
    other = eg.add(_t("mul", X, _t("add", W, ONE)))       # X * (W + 1), the same as Y here
    eg.union(eg.lookup(y), other, "by hand")
    eg.rebuild()
    return eg, top


def test_heights_are_the_least_term_heights_over_what_is_held():
    from prism.search.abstract import AbstractTarget
    from prism.workloads import get_workload
    target = AbstractTarget(get_workload("rmsnorm_matmul").graph)
    eg = target.egraph
    completion = Completion(eg, target.roots, FREE)
    classes = eg.classes()
    # no held class, then growing sets of held classes (each a parent's set plus one, as the
    # search asks, and one asked from nothing)
    sets = [set(), {classes[3]}, {classes[3], classes[len(classes) // 2]},
            set(classes[::7])]
    for held in sets:
        want = _levels(eg, held, FREE)
        got = completion.heights(completion.classes_of(held))
        for c in classes:
            assert got[completion.number_of(c)] == want.get(c, FAR), (held, c)
    # held classes are height 0; the output, over leaves, is its program's height
    assert completion.output_height(frozenset()) >= 2


def _walks(eg: EGraph, top: int, goal: int, free: frozenset[str], h: list[int],
           completion: Completion, limit: int) -> int:
    """The oracle for the chain bound: every walk down from the output, up to `limit` e-nodes
    long, by brute force; the least over those reaching `goal` of the largest of its counted
    nodes and, for each e-node on it and each other child, the counted nodes from that e-node
    up plus the child's height."""
    best = FAR

    def down(c: int, steps: list[tuple[int, list[int]]]) -> None:
        nonlocal best
        if c == goal:
            counted = [w for w, _ in steps]
            value = sum(counted)
            for i, (_, siblings) in enumerate(steps):
                above = sum(counted[:i + 1])
                for s in siblings:
                    value = max(value, above + h[completion.number_of(s)])
            best = min(best, value)
        if len(steps) >= limit:
            return
        for node in eg.nodes(c):
            children = [eg.find(x) for x in node.children]
            for i, child in enumerate(children):
                down(child, [*steps, (int(node.head not in free),
                                      children[:i] + children[i + 1:])])

    down(eg.find(top), [])
    return best


def test_the_chain_bound_is_the_least_over_every_walk():
    eg, top = _small_egraph()
    completion = Completion(eg, [top], FREE)
    for held in (set(), {eg.find(eg.lookup(_t("mul", X, W)))},
                 {eg.find(eg.lookup(_t("sqrt", _t("mean", _t("square", _t(
                     "add", _t("mul", X, W), X)), ONE))))}):
        numbers = completion.classes_of(held)
        h = completion.heights(numbers)
        for c in eg.classes():
            least = _walks(eg, top, c, FREE, h, completion, 7)
            for remaining in range(7):
                assert completion.fits(numbers, completion.number_of(c), remaining) == \
                    (least <= remaining), (held, c, remaining, least)
    # X is 2 ops from the output (add, div), but every way down to it passes an e-node
    # beside a sibling to build: under the div, the sqrt of the mean square, 3 high over the
    # leaves (mul, add, sqrt): at least 1 + 3 ops, the 4 of the program itself
    x = completion.number_of(eg.lookup(X))
    assert not completion.fits(frozenset(), x, 3) and completion.fits(frozenset(), x, 4)


def _digest(complete: list[tuple[object, tuple[int, ...]]]) -> str:
    from prism.ir.serialize import graph_to_json
    graphs = sorted(json.dumps(graph_to_json(f.kernel.graph(o, name="x")), sort_keys=True)
                    for f, o in complete)
    return hashlib.sha256("".join(graphs).encode()).hexdigest()


def _walk(graph, config) -> tuple[int, str, int]:
    """The generator alone (no verifier): families generated, the complete families' digest,
    and the prunes by the sibling bounds."""
    from prism.search.abstract import AbstractTarget
    from prism.search.generate import Callbacks, Generator
    from prism.search.pruning import Context, leaves
    from prism.search.state import Tensor
    from prism.verify.translate import leaf
    target = AbstractTarget(graph, config.abstract_limits)
    needed = set().union(*(leaves(t) for t in target.terms)) & set(target.inputs)
    ctx = Context(target, config, frozenset(needed))
    complete: list[tuple[object, tuple[int, ...]]] = []
    siblings = 0

    def pruned(_fam: object, why: pruning.Pruned) -> None:
        nonlocal siblings
        siblings += bool(why.evidence.get("siblings"))

    generator = Generator(ctx, config, Callbacks(
        lambda _fam: None, pruned, lambda fam, outs: complete.append((fam, outs)),
        lambda: False, quiet=lambda: True, counted=lambda why, _parent: pruned(None, why)))
    generator.run([Tensor(t, graph.shape(t), leaf(n))
                   for t, n in zip(graph.inputs, target.inputs, strict=True)])
    assert complete
    return generator.count, _digest(complete), siblings


@pytest.mark.slow
@pytest.mark.parametrize("name, cap", [("ntrans", 7), ("qknorm_attention", 7), ("rmsnorm_mlp", 8)])
def test_the_sibling_bounds_keep_every_complete_family(name, cap, monkeypatch):
    """Prism's vocabulary and the program's ops: the same complete families with the bounds
    on and off, and fewer generated with them on (ntrans at 7 ops: 39,925 against 397,338)."""
    from prism.pipeline import search_config_for
    from prism.search.config import BLOCK_OPS, BLOCK_VOCABULARY
    from prism.workloads import get_workload
    graph = get_workload(name).graph
    used = {op.kind for op in graph.ops}
    config = replace(search_config_for(graph, 600), max_block_ops=cap, block_ops=tuple(
        o for o in BLOCK_VOCABULARY if o in set(BLOCK_OPS) | used))
    on, on_digest, siblings = _walk(graph, config)
    monkeypatch.setattr(pruning, "_sibling_miss", lambda *args: None)
    off, off_digest, none = _walk(graph, config)
    assert siblings > 0 and none == 0
    assert on_digest == off_digest
    assert on < off


def test_a_sibling_prune_rechecks_and_corrupted_evidence_is_reported(cases):
    """ntrans at 6 ops, its families recorded (so each is built and decided in full): the
    sibling prunes' evidence rechecks from the state; changed, it does not."""
    config = cases.reduced("ntrans", max_block_ops=6, record_graphs=True)
    tracer = Tracer()
    from prism.search import search
    search(cases.small("ntrans").graph, config, label="ntrans", tracer=tracer)
    records = [r for r in export(tracer.events, "ntrans").records
               if r["kind"] == "prune" and r["evidence"].get("siblings")]
    chains = [r for r in records if r["evidence"]["tensor"] is not None]
    assert chains
    report = check_records(records[:40])
    assert report.ok, report.failures[:3]
    r = chains[0]
    bad = []
    for change in ({"remaining": r["evidence"]["remaining"] + 1},
                   {"cap": r["evidence"]["cap"] + 20, "remaining":
                    r["evidence"]["remaining"] + 20},
                   {"tensor": "nothing"},
                   {"expression": "(mul X X)"}):
        wrong = copy.deepcopy(r)
        wrong["evidence"].update(change)
        bad.append(wrong)
    for wrong in bad:
        assert not check_records([wrong]).ok, wrong["evidence"]
