"""Abstract expressions: the rule keeps every tensor of every hand-fused kernel (each is a
subexpression of its target under the axioms), and prunes what is not."""

import pytest

from prism.expr.terms import parse
from prism.search import search
from prism.search.abstract import AbstractLimits, AbstractTarget, op_term
from prism.trace import Tracer
from prism.verify.translate import leaf
from prism.workloads import WORKLOADS, get_workload
from prism.workloads.known_best import known_best


def block_terms(graph, target):
    """The abstract expression of every block tensor of the graph's custom kernel."""
    (op,) = graph.custom_ops
    env = {t: leaf(target.leaves[src]) for t, src in zip(
        op.block.inputs, op.inputs, strict=True)}
    for bop in op.block.ops:
        if bop.kind in ("input", "output"):
            continue
        rank = len(op.block.shape(bop.inputs[0]))
        env[bop.outputs[0]] = op_term(bop.kind, [env[t] for t in bop.inputs], rank, bop.attr)
    return env, env[op.block.outputs[0]]


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_every_tensor_of_the_known_best_kernel_is_kept(name):
    w = get_workload(name)
    target = AbstractTarget(w.graph)
    env, out = block_terms(known_best(name, w.shapes), target)
    for tensor, term in env.items():
        assert target.lookup(term) is not None, f"{tensor} = {term} would be pruned"
    assert target.output_index(out) == 0


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_every_workloads_target_saturates(name):
    """Every workload, ntrans (the largest e-graph) included: its prunes are then proofs."""
    target = AbstractTarget(get_workload(name).graph)
    assert target.saturated, target.report


def test_an_unsaturated_target_claims_no_prune(cases):
    """With limits ntrans's e-graph cannot saturate under, the rules that read it set families
    aside as `unproven`, counted apart from the prunes, and the search is not exhaustive; with
    the default limits the same search saturates and is exhaustive."""
    small = AbstractLimits(iterations=8, nodes=5000)
    assert not AbstractTarget(get_workload("ntrans").graph, small).saturated
    tracer = Tracer()
    result = search(cases.small("ntrans").graph,
                    cases.reduced("ntrans", max_block_ops=4, abstract_limits=small),
                    tracer=tracer, label="ntrans")
    egraph_rules = {"abstract_expression", "dead_end_output", "out_of_reach"}
    prunes = [e for e in tracer.events if e.type == "FamilyPruned"]
    assert prunes and all(e.evidence["claim"] == "unproven" for e in prunes
                          if e.rule in egraph_rules)
    assert all(e.evidence["claim"] != "unproven" for e in prunes if e.rule not in egraph_rules)
    assert result.set_aside and not set(result.set_aside) - egraph_rules
    assert result.complete and not result.exhaustive
    assert sum(result.set_aside.values()) == sum(1 for e in prunes
                                                 if e.evidence["claim"] == "unproven")
    assert all(result.pruned[r] == 0 for r in egraph_rules)
    summary = result.summary()
    assert summary["exhaustive"] is False and summary["families"]["set_aside"]
    assert any("not exhaustive" in n for n in summary["notes"])
    full = search(cases.small("ntrans").graph, cases.reduced("ntrans", max_block_ops=4),
                  label="ntrans")
    assert full.exhaustive and not full.set_aside


def test_what_the_target_does_not_compute_is_not_kept():
    target = AbstractTarget(get_workload("rmsnorm_matmul").graph)
    assert target.lookup(parse("(matmul X W)")) is not None
    assert target.lookup(parse("(sqrt (mean (square X) 1))")) is not None
    assert target.lookup(parse("(exp X)")) is None
    assert target.lookup(parse("(matmul W X)")) is None
    assert target.lookup(parse("(sqrt (mean (square W) 1))")) is None
    assert target.output_index(parse("(div (matmul X W) (sqrt (mean (square X) 1)))")) == 0
    assert target.output_index(parse("(matmul X W)")) is None


def test_every_corpus_graph_as_a_target_saturates(corpus_dir):
    """Mirage's own μGraphs (84 programs written by someone else, up to three kernels) as the
    targets of a search: the e-graph of each saturates, so its prunes would be proofs too."""
    from prism.frontend.mirage import import_mirage
    graphs = [g for path in sorted(corpus_dir.glob("*.json")) for g in import_mirage(path)]
    assert len(graphs) == 84
    for graph in graphs:
        target = AbstractTarget(graph)
        assert target.saturated, (graph.name, target.report)
