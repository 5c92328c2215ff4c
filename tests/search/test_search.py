"""The search end to end at reduced caps: for each workload the candidates include one custom
kernel that computes the whole program on chip, proved equivalent with symbolic grid and loop
sizes, and — an oracle independent of the proof — interpreted in float64 against torch."""

import itertools
import math
import threading

import numpy as np
import pytest

from prism.cost import get_device
from prism.ir.interpret import interpret
from prism.ir.spec import substitute_graph
from prism.search import RULE_NAMES, SearchConfig, search
from prism.search.audit import feasible_assignments
from prism.search.maps import map_summary
from prism.trace import Tracer

H100 = get_device("h100")

WORKLOADS = [
    "attention",
    "gated_mlp",
    "qknorm_attention",
    "rmsnorm_matmul",
    "rmsnorm_mlp",
    "swiglu",
]  # DESIGN.md §5's five and gated_mlp


def fused(result):
    """Equivalent candidates that are one custom kernel whose output is the graph's output
    (no intermediate tensor in device memory) and that keep a symbolic loop."""
    out = []
    for c in result.equivalent:
        g = c.graph
        if g.num_kernels != 1 or len(g.custom_ops) != 1:
            continue
        if g.custom_ops[0].outputs[0] != g.outputs[0]:
            continue
        if not g.custom_ops[0].block.forloop_range.is_const:
            out.append(c)
    return out


def max_rel_err(graph, workload, env):
    concrete = substitute_graph(graph, env)
    arrays = workload.random_inputs(0)
    (got,) = interpret(concrete, *arrays)
    (want,) = workload.reference(*arrays)
    return float(np.max(np.abs(got - want)) / np.max(np.abs(want)))


@pytest.mark.parametrize("name", WORKLOADS)
def test_finds_a_fused_kernel_proved_for_every_size(name, cases):
    result = cases.searched(name)
    assert result.complete and result.generated > 0
    found = fused(result)
    assert found, f"no fused single-kernel candidate among {len(result.equivalent)}"
    workload = cases.small(name)
    split = 0
    for cand in found:
        assert cand.verdict.method == "e-graph" and cand.verdict.sizes == "symbolic"
        assert cand.verdict.proof_steps > 0
        # Independent oracle: float64 interpretation at concrete sizes the device admits,
        # the least and the most split.
        envs = sorted(feasible_assignments(cand.graph, H100),
                      key=lambda e: math.prod(e.values()))
        assert envs, "the fused kernel fits the device at no assignment"
        for env in (envs[0], envs[-1]):
            assert max_rel_err(cand.graph, workload, env) < 1e-12, env
        split += all(v >= 2 for v in envs[-1].values())
    assert split, "no fused kernel was checked with its grid and loop actually split"


def test_rmsnorm_matmul_finds_the_design_structure(cases):
    """DESIGN.md §5: grid over W's columns (W split on dim 1, X replicated), loop over d (X and W
    walked on d), X@W accumulated with nored and rms(X) with red_ld_rms, divided after the loop,
    stored with omap on the columns."""
    wanted = {"X_tile": {"imap": [-1], "fmap": 1}, "W_tile": {"imap": [1], "fmap": 0}}
    hits = []
    for cand in fused(cases.searched("rmsnorm_matmul")):
        (summary,) = map_summary(cand.graph)
        bg = cand.graph.custom_ops[0].block
        kinds = {op.kind: op for op in bg.ops}
        if all(summary[k] == v for k, v in wanted.items()) and set(kinds) >= {
            "matmul",
            "nored",
            "red_ld_rms",
            "div",
        }:
            stores = [v for k, v in summary.items() if k.startswith("store")]
            div = kinds["div"]
            post = bg.after_accum
            if (
                stores == [{"omap": [1]}]
                and div.outputs[0] in post
                and all(t in post for t in div.inputs)
            ):
                hits.append(cand)
    assert hits, "the known-best RMSNorm+MatMul structure was not found"


def test_every_decision_is_an_event_with_rule_and_evidence(cases):
    tracer = Tracer()
    result = search(
        cases.small("rmsnorm_matmul").graph,
        cases.reduced("rmsnorm_matmul"),
        tracer=tracer,
        label="rmsnorm_matmul",
    )
    generated = [e for e in tracer.events if e.type == "FamilyGenerated"]
    pruned = [e for e in tracer.events if e.type == "FamilyPruned"]
    assert len(generated) == result.generated
    ids = {e.id for e in generated}
    for e in pruned:
        assert e.id in ids and e.rule in RULE_NAMES and e.reason
        assert e.evidence.get("claim") in ("no_equivalent", "no_feasible", "not_better")
    counts = {r: sum(1 for e in pruned if e.rule == r) for r in RULE_NAMES}
    assert counts == dict(result.pruned) | {r: 0 for r in RULE_NAMES if r not in result.pruned}
    assert counts["cannot_close"] > 0 and counts["abstract_expression"] > 0
    abstract = next(e for e in pruned if e.rule == "abstract_expression")
    assert abstract.evidence["expression"] in abstract.reason and abstract.evidence["target"]
    verified = [e for e in tracer.events if e.type == "CandidateVerified"]
    rejected = [e for e in tracer.events if e.type == "CandidateRejected"]
    assert len(verified) == len(result.equivalent) and verified[0].proof["proof"]
    assert len(verified) + len(rejected) == len(result.candidates)
    assert tracer.events[-1].type == "SearchFinished"
    assert tracer.events[-1].summary["families"]["pruned"] == counts


def test_same_seed_same_order_other_seed_same_families(cases):
    def run(seed):
        tracer = Tracer()
        search(cases.small("swiglu").graph, cases.reduced("swiglu", seed=seed), tracer=tracer)
        return [e.description for e in tracer.events if e.type == "FamilyGenerated"]

    first, again, shuffled = run(0), run(0), run(7)
    assert first == again
    assert first != shuffled and sorted(first) == sorted(shuffled)


def test_family_budget_stops_and_keeps_partial_results(cases):
    result = search(
        cases.small("rmsnorm_matmul").graph, cases.reduced("rmsnorm_matmul", max_families=40)
    )
    assert not result.complete and result.stop_reason == "family budget"
    assert result.generated == 40 and sum(result.pruned.values()) > 0


def test_cancel_from_another_thread_keeps_what_was_found(cases):
    cancel = threading.Event()
    tracer = Tracer()
    tracer.subscribe(lambda e: cancel.set() if e.type == "CandidateVerified" else None)
    result = search(
        cases.small("rmsnorm_matmul").graph,
        cases.reduced("rmsnorm_matmul"),
        tracer=tracer,
        cancel=cancel,
    )
    assert not result.complete and result.stop_reason == "cancelled"
    assert (
        len(result.equivalent) == 1
        and result.generated < cases.searched("rmsnorm_matmul").generated
    )


def test_switching_a_rule_off_explores_more(cases):
    """In the one kernel of this search, `out_of_reach`'s count of the waiting tensors together
    is at least `cannot_close`'s, so switching that one off alone prunes the same families by
    other rules; switching both off explores more, and finds every program found with them."""
    on = cases.searched("rmsnorm_matmul")
    graph = cases.small("rmsnorm_matmul").graph
    alone = search(graph, cases.reduced("rmsnorm_matmul", disabled=frozenset({"cannot_close"})))
    assert alone.pruned["cannot_close"] == 0 and alone.generated == on.generated
    assert alone.pruned["out_of_reach"] > on.pruned["out_of_reach"]
    off = search(graph, cases.reduced("rmsnorm_matmul",
                                      disabled=frozenset({"cannot_close", "out_of_reach"})))
    assert off.pruned["cannot_close"] == 0 and off.generated > on.generated
    assert {c.graph.to_json().__repr__() for c in on.equivalent} <= {
        c.graph.to_json().__repr__() for c in off.equivalent
    }


def test_map_instantiation_is_symmetry_broken_and_collapsed(cases):
    result = search(
        cases.small("rmsnorm_matmul").graph, cases.reduced("rmsnorm_matmul", grid_dims=(2,))
    )
    assert result.equivalent
    seen = set()
    for cand in result.candidates:
        bg = cand.graph.custom_ops[0].block
        imaps = [op.attr["imap"].as_dims() for op in bg.input_ops]
        k = len(bg.grid)
        if bg.grid[0].is_const:  # the all-replicated family: one block
            assert k == 1 and all(m == (-1,) for m in imaps)
            continue
        assert k == 2
        for p in range(k):  # every grid dim splits some input (else: collapsed)
            assert any(m[p] >= 0 for m in imaps)
        for perm in itertools.permutations(range(k)):  # lexicographically smallest
            assert tuple(tuple(m[p] for p in perm) for m in imaps) >= tuple(imaps)
        key = cand.graph.to_json().__repr__()
        assert key not in seen
        seen.add(key)


def test_cost_bound_prunes_multi_kernel_families_after_a_fused_candidate(cases):
    tracer = Tracer()
    config = cases.reduced("rmsnorm_matmul", kernel_ops=("matmul", "rms_norm"), max_kernel_ops=2)
    result = search(cases.small("rmsnorm_matmul").graph, config, tracer=tracer)
    bound = [e for e in tracer.events if e.type == "FamilyPruned" and e.rule == "cost_bound"]
    assert bound, "no family was pruned by its cost bound"
    best = min(c.modeled_us for c in result.equivalent if c.modeled_us is not None)
    for e in bound:
        assert e.evidence["lower_bound_us"] > e.evidence["incumbent_us"] >= best


def test_config_problems_are_clear_errors():
    from prism.search import SearchConfigError

    for kw, words in [
        ({"budget_s": 0}, "budget"),
        ({"budget_s": -5}, "budget"),
        ({"block_ops": ("transpose",)}, "unknown block op"),
        ({"disabled": frozenset({"nope"})}, "unknown pruning rule"),
        ({"grid_dims": (4,)}, "grid_dims"),
        ({"max_block_ops": 0}, "caps"),
    ]:
        with pytest.raises(SearchConfigError, match=words):
            SearchConfig(**kw)


def test_targets_outside_the_vocabulary_are_refused():
    import prism
    from prism.search import UnsupportedTargetError

    g = prism.Graph("scaled")
    X = g.input("X", (8, 64))
    g.output(g.mul_scalar(X, 0.5))
    with pytest.raises(UnsupportedTargetError, match="mul_scalar"):
        search(g.build())
    g = prism.Graph("colsum")
    X = g.input("X", (8, 64))
    g.output(g.sum(X, dim=0))
    with pytest.raises(UnsupportedTargetError, match="sum"):
        search(g.build())


def test_caps_too_small_give_an_empty_result_that_says_so(cases):
    result = search(cases.small("swiglu").graph, cases.reduced("swiglu", max_block_ops=3))
    assert result.complete and not result.equivalent
    assert "no candidate" in result.to_json()["message"]


def test_a_map_instantiation_limit_is_said_aloud(cases, monkeypatch):
    from prism.search import driver
    monkeypatch.setattr(driver, "MAP_LIMIT", 1)
    result = search(cases.small("rmsnorm_matmul").graph, cases.reduced("rmsnorm_matmul"))
    notes = result.summary()["notes"]
    assert notes and all("stopped at 1 members" in n for n in notes)
    assert len(result.candidates) == len(result.families)
