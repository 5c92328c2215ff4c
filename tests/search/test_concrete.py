"""The concrete mode of the search (the ablation, `prism.search.concrete`) against the symbolic
search it ablates: on a small shape, the programs the concrete search accepts are exactly the
members of the symbolic search's proved candidates at every size the tuner would try (the oracle
is the symbolic search, its proofs and `params.assignments`, compared program by program in
`canonical_program`'s form); its checks are random tests labelled as such; the hardware rule
reads a concrete tile's data dim from its inputs."""

from __future__ import annotations

from dataclasses import replace

import pytest

from prism.cost import get_device
from prism.frontend.builder import Block, Graph
from prism.instantiate.params import assignments
from prism.ir.dims import dim
from prism.ir.spec import problems, substitute_graph
from prism.pipeline import search_config_for
from prism.search import SearchConfig, SearchConfigError, check_hardware, search
from prism.search.audit import within_limits
from prism.search.concrete import MIRAGE_CHECK, canonical_program, mirage_check, open_choices
from prism.search.config import CONCRETE_PARAMS
from prism.workloads import get_workload

ALL = frozenset(CONCRETE_PARAMS)
H100 = get_device("h100")


def small(grid_dims: tuple[int, ...]):
    """rmsnorm_matmul at X[8, 32], W[32, 32], 4 block ops, cost_bound off: both searches run to
    the end, and neither prunes by an incumbent (the two incumbents differ: a candidate's best
    assignment against one concrete program), so both reach every program of the space."""
    graph = get_workload("rmsnorm_matmul").with_shapes(X=(8, 32), W=(32, 32)).graph
    config = replace(search_config_for(graph, 300.0, "h100"), max_block_ops=4,
                     grid_dims=grid_dims, disabled=frozenset({"cost_bound"}))
    return graph, config


def members(result, device=H100):
    """Every program of the result's accepted candidates at each assignment the tuner takes."""
    return {canonical_program(substitute_graph(c.graph, env)) for c in result.equivalent
            for env in assignments(c.graph, device, limit=10**6)}


def test_the_concrete_search_accepts_exactly_the_symbolic_members():
    graph, config = small((1,))
    symbolic = search(graph, config)
    concrete = search(graph, replace(config, concrete=ALL))
    assert symbolic.exhaustive and concrete.exhaustive
    assert concrete.generated > 100 * symbolic.generated     # one subtree per choice
    found = {canonical_program(c.graph) for c in concrete.equivalent}
    assert found == members(symbolic) and len(found) == 20
    assert len(found) == len(concrete.equivalent)            # one family per program
    for c in concrete.candidates:
        assert not c.graph.free_vars()
        if c.verdict.verdict != "invalid":
            assert c.verdict.method == MIRAGE_CHECK and c.verdict.proof_steps == 0
    for c in concrete.equivalent:
        assert c.verdict.sizes == "concrete" and "not a proof" in c.verdict.reason
    # the best: the same program, modeled the same
    assert concrete.best.modeled_us == pytest.approx(symbolic.best.modeled_us)


@pytest.mark.parametrize("flags", [("imap",), ("fmap",), ("omap",), ("grid", "loop"),
                                   ("imap", "fmap", "omap")])
def test_each_flag_accepts_the_same_programs(flags):
    """Prism's per-flag ablation: with any one group of parameters concrete (two grid dims, so
    the imap's symmetry breaking and collapse at the open are exercised), the same programs.
    Maps alone concrete keep the sizes symbolic, so the e-graph still proves them."""
    graph, config = small((1, 2))
    symbolic = search(graph, config)
    flagged = search(graph, replace(config, concrete=frozenset(flags)))
    assert flagged.exhaustive and flagged.generated > symbolic.generated
    assert members(flagged) == members(symbolic)
    methods = {c.verdict.method for c in flagged.equivalent}
    assert methods == ({MIRAGE_CHECK} if "grid" in flags else {"e-graph"})


def test_the_default_is_the_symbolic_search():
    assert SearchConfig().concrete == frozenset()
    assert "concrete" not in SearchConfig().to_json()
    assert SearchConfig(concrete=ALL).to_json()["concrete"] == sorted(ALL)
    with pytest.raises(SearchConfigError, match="unknown concrete parameter"):
        SearchConfig(concrete=frozenset({"grid", "block"}))


def test_open_choices_are_distinct_and_split_what_they_size():
    shapes = [(dim(8), dim(64)), (dim(64), dim(64))]
    config = SearchConfig(concrete=ALL)
    choices = list(open_choices(shapes, config))
    assert len(set(choices)) == len(choices)
    for c in choices:
        assert c.grid is not None and c.loop is not None and c.imaps is not None
        for p, size in enumerate(c.grid):
            split = [shapes[i][m[p]].value for i, m in enumerate(c.imaps) if m[p] >= 0]
            assert (size == 1) == (not split)        # size 1 exactly where nothing is split
            assert all(n % size == 0 for n in split)
        walked = [shapes[i][f].value for i, f in enumerate(c.fmaps or ()) if f >= 0]
        assert (c.loop == 1) == (not walked) and all(n % c.loop == 0 for n in walked)
        assert c.grid_dims == len(c.imaps[0])
    assert {c.grid_dims for c in choices} == {1, 2, 3}


def fused(rows: int):
    """The fused RMSNorm+MatMul on X[rows, 64] with W's columns on 4 blocks and the loop on 4
    iterations: a concrete program."""
    g = Graph("fused")
    X, W = g.input("X", (rows, 64)), g.input("W", (64, 64))
    tb = Block(grid=(4,), forloop_range=4)
    x, w = tb.input(X, imap=(-1,), fmap=1), tb.input(W, imap=(1,), fmap=0)
    tb.output(tb.div(tb.accum(tb.matmul(x, w), "nored"), tb.accum(x, "red_ld_rms")), omap=(1,))
    (out,) = g.customized(tb)
    g.output(out)
    return g.build()


def test_mirage_check_accepts_with_evidence_and_refutes_with_a_counterexample():
    target = get_workload("rmsnorm_matmul").with_shapes(X=(16, 64), W=(64, 64)).graph
    good = mirage_check(target, fused(16))
    assert good.verdict == "equivalent" and good.method == MIRAGE_CHECK
    assert good.proof_steps == 0 and not good.steps and "not a proof" in good.reason
    wrong = fused(16)
    ops = list(wrong.ops)
    block = ops[2].block
    ops[2] = replace(ops[2], block=replace(block, ops=tuple(
        replace(op, attrs=(("omap", op.attr["omap"].__class__.concrete((-1,), 2)),))
        if op.kind == "output" else op for op in block.ops)))
    summed = replace(wrong, ops=tuple(ops))
    bad = mirage_check(target, summed)
    assert bad.verdict in ("not_equivalent", "invalid")
    assert bad.verdict == "invalid" or bad.counterexample is not None


def test_the_hardware_rule_reads_a_concrete_tiles_data_dim():
    """X[16, 64] split on its rows into 2 × 8 would pass as 'a whole dim of 8' if the rule read
    the tile's number alone; the oracle is `within_limits` on the symbolic graph at that
    assignment, where the data dim is in the expression."""
    g = Graph("split_rows")
    X, W = g.input("X", (16, 64)), g.input("W", (64, 64))
    tb = Block(grid=("g0", "g1"), forloop_range=1)
    x, w = tb.input(X, imap=(-1, 0), fmap=-1), tb.input(W, imap=(1, -1), fmap=-1)
    tb.output(tb.accum(tb.matmul(x, w), "nored"), omap=(1, 0))
    (out,) = g.customized(tb)
    g.output(out)
    symbolic = g.build()
    for env, fits in (({"g0": 4, "g1": 2}, False), ({"g0": 4, "g1": 1}, True)):
        concrete = substitute_graph(symbolic, env)
        assert not problems(concrete) and not concrete.free_vars()
        assert within_limits(symbolic, env, H100) is fits
        assert within_limits(concrete, {}, H100) is fits
        verdict = check_hardware(concrete, H100)
        assert verdict.feasible is fits
        if not fits:
            assert any("matmul tile" in name for name in verdict.core)
