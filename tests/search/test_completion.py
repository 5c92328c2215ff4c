"""`out_of_reach`'s sibling bounds (`prism.search.completion`, issue 17 item 3): the ops a
completion needs, counting the operands its way to the output reads and must build.

Oracles: op applications found by looking each op's whole expression up in a small e-graph,
on every choice of operand classes; heights recomputed level by level from those (the least
height of a term over the leaves and the held classes); the chain bound against every walk
of them; the searches with the bounds on and off (the same complete families, by graph
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
from prism.search.completion import FAR, Completion, ops_patterns
from prism.steps import check_records, export
from prism.trace import Tracer


def _t(head: str, *args: Term) -> Term:
    return Term(head, tuple(args))


X, W, ONE = _t("X"), _t("W"), _t("1")
KINDS = ("add", "mul", "div", "sqrt", "red_ld_rms")


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


def _completion(eg: EGraph, top: int) -> Completion:
    patterns = ops_patterns(KINDS, lambda kind: [{}], [2])
    return Completion(eg, [top], patterns)


def _applications(eg: EGraph) -> list[tuple[int, tuple[int, ...]]]:
    """The oracle's op applications: every op of KINDS on every choice of operand classes,
    its expression built over the operands' own terms and looked up whole in the e-graph
    (where `Completion` matches its pattern node by node)."""
    from itertools import product

    from prism.ir.ops import OPS
    from prism.search.abstract import op_term
    classes = eg.classes()
    out = []
    for kind in KINDS:
        for operands in product(classes, repeat=OPS[kind].arity):
            term = op_term(kind, [eg.extract(c) for c in operands], 2, {})
            found = eg.lookup(term)
            if found is not None:
                out.append((eg.find(found), tuple(eg.find(c) for c in operands)))
    return out


def _levels(eg: EGraph, held: set[int]) -> dict[int, int]:
    """The oracle for heights: the classes with a term of height ≤ k, level by level: the leaf
    classes and the held ones, then each level the results of an op on the level before."""
    apps = _applications(eg)
    reached = {c for c in eg.classes()
               if c in held or any(not n.children for n in eg.nodes(c))}
    level = dict.fromkeys(reached, 0)
    k = 0
    while True:
        k += 1
        grown = {p for p, operands in apps if p not in reached and set(operands) <= reached}
        if not grown:
            return level
        reached |= grown
        level.update(dict.fromkeys(grown, k))


def test_ops_match_where_their_expressions_are_represented():
    eg, top = _small_egraph()
    completion = _completion(eg, top)
    want = {(completion.number_of(p), tuple(completion.number_of(c) for c in operands))
            for p, operands in _applications(eg)}
    got = {(p, operands) for p, nodes in enumerate(completion.nodes) for _, operands in nodes}
    assert got == want
    # red_ld_rms is one op from Y to the sqrt of its mean square; no op makes the mean alone
    y = eg.lookup(_t("add", _t("mul", X, W), X))
    rms = eg.lookup(_t("sqrt", _t("mean", _t("square", _t("add", _t("mul", X, W), X)), ONE)))
    mean = eg.lookup(_t("mean", _t("square", _t("add", _t("mul", X, W), X)), ONE))
    assert (completion.number_of(rms), (completion.number_of(y),)) in got
    assert not any(p == completion.number_of(mean) for p, _ in got)


def test_heights_are_the_least_term_heights_over_what_is_held():
    eg, top = _small_egraph()
    completion = _completion(eg, top)
    classes = eg.classes()
    # nothing held; a parent's set and a child's (the search's order); sets asked from nothing
    for held in ([], classes[2:3], classes[2:4], classes[::3], classes[1::2]):
        want = _levels(eg, set(held))
        got = completion.heights(completion.classes_of(held))
        for c in classes:
            assert got[completion.number_of(c)] == want.get(c, FAR), (held, c)
    # the output over the leaves: mul, add, red_ld_rms, div
    assert completion.output_height(frozenset()) == 4


def _walks(eg: EGraph, top: int, goal: int, h: list[int], completion: Completion,
           limit: int) -> int:
    """The oracle for the chain bound: every walk of op applications down from the output, up
    to `limit` long, by brute force; the least over those reaching `goal` of the largest of
    its ops and, for each op on it and each other operand, the ops from that op up plus the
    operand's height."""
    by_result: dict[int, list[tuple[int, ...]]] = {}
    for p, operands in _applications(eg):
        by_result.setdefault(p, []).append(operands)
    best = FAR

    def down(c: int, siblings: list[list[int]]) -> None:
        nonlocal best
        if c == goal:
            value = len(siblings)
            for i, others in enumerate(siblings):
                for s in others:
                    value = max(value, i + 1 + h[completion.number_of(s)])
            best = min(best, value)
        if len(siblings) >= limit:
            return
        for operands in by_result.get(c, []):
            for i, child in enumerate(operands):
                down(child, [*siblings, [*operands[:i], *operands[i + 1:]]])

    down(eg.find(top), [])
    return best


def test_the_chain_bound_is_the_least_over_every_walk():
    eg, top = _small_egraph()
    completion = _completion(eg, top)
    y = _t("add", _t("mul", X, W), X)
    for held in (set(), {eg.find(eg.lookup(_t("mul", X, W)))},
                 {eg.find(eg.lookup(_t("sqrt", _t("mean", _t("square", y), ONE))))}):
        numbers = completion.classes_of(held)
        h = completion.heights(numbers)
        for c in eg.classes():
            least = _walks(eg, top, c, h, completion, 6)
            for remaining in range(7):
                assert completion.fits(numbers, completion.number_of(c), remaining) == \
                    (least <= remaining), (held, c, remaining, least)
    # X is 2 ops from the output (add, div), but every way down to it passes an op beside an
    # operand to build: under the div, the sqrt of the mean square, 3 high over the leaves
    # (mul, add, red_ld_rms): at least 1 + 3 ops, the 4 of the program itself
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
        lambda: False, quiet=lambda _rule, _prefix: True,
        counted=lambda why, _parent: pruned(None, why)))
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
                   {"tensor": "nothing"},
                   {"expression": "(mul X X)"},
                   {"ranks": []}):
        wrong = copy.deepcopy(r)
        wrong["evidence"].update(change)
        bad.append(wrong)
    for wrong in bad:
        assert not check_records([wrong]).ok, wrong["evidence"]

    def more_ops(record: dict) -> dict:
        wrong = copy.deepcopy(record)
        wrong["evidence"]["cap"] += 20
        wrong["evidence"]["remaining"] += 20
        return wrong

    # with 20 ops more some pruned tensor is within reach (others are below every output:
    # no number of ops reaches it, and the prune holds at any cap)
    assert any(not check_records([more_ops(r)]).ok for r in chains[:20])
