"""The sGraph view over a real symbolic candidate of a small search.

Oracles: `substitute_graph` for concrete tile shapes, `prism.instantiate.params.assignments` and
`prism.search.audit.within_limits` for feasibility, `spec.problems` for divisibility, the graph's
own `Map` rows for the matrices, and the verifier's `translate` (and the search's saturated
target) for abstract expressions.
"""

from __future__ import annotations

import itertools
import json
import re
import types
from dataclasses import replace

import pytest

import prism
from prism.cost import get_device
from prism.ir.dims import evaluate
from prism.ir.graph import KernelGraph, Map
from prism.ir.spec import problems, substitute_graph
from prism.search import SearchConfig, search
from prism.search.abstract import AbstractTarget
from prism.search.audit import within_limits
from prism.trace import CandidateVerified, Tracer
from prism.verify.translate import translate
from widgets.sgraph import SGraphState, SGraphView

H100 = get_device("h100")

WORKLOADS = ("rmsnorm_matmul", "rmsnorm_mlp", "swiglu", "attention", "qknorm_attention",
             "gated_mlp", "lora", "gqa", "ntrans")


@pytest.fixture(scope="module")
def run() -> types.SimpleNamespace:
    """A small rmsnorm_matmul search; `graph` is its equivalent candidate with both a symbolic
    grid size and a symbolic loop range (the known-best structure)."""
    w = prism.get_workload("rmsnorm_matmul").with_shapes(X=(8, 64), W=(64, 64))
    cfg = SearchConfig(grid_dims=(1,), max_block_ops=4, block_ops=("matmul", "div", "rms_norm"),
                       accumulators=("nored", "red_ld_rms"), budget_s=120)
    tracer = Tracer()
    result = search(w.graph, cfg, tracer=tracer)
    symbolic = [c.graph for c in result.equivalent if len(c.graph.free_vars()) == 2]
    assert symbolic, "the search found no candidate with a symbolic grid and loop"
    verified = [e for e in tracer.events if isinstance(e, CandidateVerified) and e.graph]
    return types.SimpleNamespace(target=w.graph, result=result, graph=symbolic[0],
                                 state=SGraphState(symbolic[0]), verified=verified)


def _trivial(g: KernelGraph) -> dict[str, int]:
    return dict.fromkeys(g.free_vars(), 1)


def _text(html_value: str) -> str:
    """The cells' text between bars; inline hover markup (`<abbr>`) is part of its cell."""
    return re.sub(r"<[^>]+>", "|", re.sub(r"</?abbr[^>]*>", "", html_value))


# -- the state --------------------------------------------------------------------------------

def test_kernels_tensors_and_symbolic_shapes(run):
    s, g = run.state, run.graph
    assert [k.kind for k in s.kernels] == [op.kind for op in g.ops]
    assert len(s.custom) == 1
    (_, bg), kernel = next(g.iter_blocks()), s.custom[0]
    assert kernel.grid == ("gx",) and kernel.forloop_range == "F"
    assert [(o.kind, o.inputs, o.outputs) for o in kernel.ops] == \
        [(o.kind, o.inputs, o.outputs) for o in bg.ops]
    assert {t.name: t.shape for t in kernel.tensors} == \
        {n: tuple(str(d) for d in shape) for n, shape in bg.tensors}
    stages = {o.kind: o.stage for o in kernel.ops}
    assert stages["input"] == "load" and stages["output"] == "store"
    assert stages["div"] == "after loop" and stages["matmul"] == "loop body"


def test_map_matrices_are_the_map_rows(run):
    (op, bg), kernel = next(run.graph.iter_blocks()), run.state.custom[0]
    want = []
    for bop in bg.ops:
        for key in ("imap", "fmap", "omap"):
            if key in bop.attr:
                want.append((key, tuple(tuple(e.value for e in row)
                                        for row in bop.attr[key].rows)))
    assert [(m.kind, m.rows) for m in kernel.maps] == want
    assert [m.tensor for m in kernel.maps if m.kind != "omap"][::2] == list(op.inputs)
    assert {m.row_labels for m in kernel.maps} == {("x",), ("loop",)}


def test_variables_have_roles_and_candidates(run):
    from prism.instantiate.params import variables

    got = run.state.variables()
    assert [(v.name, v.role) for v in got] == [("gx", "grid"), ("F", "loop")]
    assert [v.candidates for v in got] == [tuple(v.candidates()) for v in variables(run.graph)]


def test_tile_shapes_equal_the_substituted_graph_and_assignments_are_feasible(run):
    from prism.instantiate.params import assignments

    envs = assignments(run.graph)
    assert len(envs) > 1
    for env in envs:
        inst = run.state.at(env)
        assert inst.feasible and inst.verdict == "feasible", (env, inst)
        (_, bg) = next(substitute_graph(run.graph, env).iter_blocks())
        ki = inst.kernels[0]
        assert ki.tiles == {n: tuple(d.value for d in s) for n, s in bg.tensors}
        assert ki.grid == tuple(g.value for g in bg.grid)
        assert ki.forloop_range == bg.forloop_range.value


def test_a_grid_size_that_does_not_divide_is_infeasible(run):
    env = {"gx": 3, "F": 4}
    inst = run.state.at(env)
    assert not inst.feasible
    assert inst.problems == tuple(problems(run.graph, env))
    assert any("64/3" in p and "not an integer" in p for p in inst.problems)
    assert None in inst.tile("W_tile")


def test_shared_memory_over_a_tiny_device_names_the_bytes(run):
    env = {"gx": 4, "F": 4}
    tiny = replace(H100, smem_bytes=256)
    inst = SGraphState(run.graph, tiny).at(env)
    assert not inst.feasible and not inst.problems
    (limit,) = inst.limits
    assert limit.constraint == "smem" and limit.bound == 256
    assert "shared memory" in inst.verdict and f"{limit.value} B" in inst.verdict
    assert within_limits(run.graph, env, tiny) is False
    # The byte count is exactly where within_limits flips.
    assert within_limits(run.graph, env, replace(H100, smem_bytes=limit.value))
    assert not within_limits(run.graph, env, replace(H100, smem_bytes=limit.value - 1))


@pytest.mark.parametrize("device", [H100, replace(H100, smem_bytes=2048),
                                    replace(H100, max_blocks=4)],
                         ids=["default", "small_smem", "few_blocks"])
def test_limits_agree_with_within_limits_on_every_candidate_pair(run, device):
    s = SGraphState(run.graph, device)
    names = [v.name for v in s.variables()]
    kinds = set()
    for combo in itertools.product(*[v.candidates for v in s.variables()]):
        env = dict(zip(names, combo, strict=True))
        inst = s.at(env)
        if not inst.problems:
            assert (not inst.limits) == within_limits(run.graph, env, device), env
        kinds |= {lim.constraint for lim in inst.limits}
    assert "matmul_tile" in kinds      # a loop of 64 leaves X tiles 1 wide
    assert ("blocks" in kinds) == (device.max_blocks == 4)


def test_abstract_expressions_are_the_verifiers_terms_of_the_trivial_instance(run):
    for c in run.result.equivalent:
        s = SGraphState(c.graph)
        (_, bg) = next(c.graph.iter_blocks())
        want = str(translate(substitute_graph(c.graph, _trivial(c.graph))).terms[0])
        assert s.abstract(bg.outputs[0]) == want
        assert s.abstract(c.graph.outputs[0]) == want
    # A candidate that normalises and then multiplies says exactly what the target says.
    target = str(translate(run.target).terms[0])
    assert any(SGraphState(c.graph).abstract(c.graph.outputs[0]) == target
               for c in run.result.equivalent)
    assert run.state.abstract("X_tile") == "X"


def test_the_block_output_is_the_target_output_under_the_axioms(run):
    (_, bg) = next(run.graph.iter_blocks())
    assert AbstractTarget(run.target).output_index(run.state.abstract_term(bg.outputs[0])) == 0
    with pytest.raises(KeyError, match="no tensor"):
        run.state.abstract("nope")


def test_the_family_fits_by_z3(run):
    verdict = run.state.hardware()
    assert verdict.feasible and verdict.assignment is not None
    assert run.state.at(verdict.assignment).feasible


def test_a_symbolic_family_offers_its_map_bits(run):
    family = next(f.graph for f in run.result.families
                  if any(v.startswith("m_") for v in f.graph.free_vars()))
    s = SGraphState(family)
    roles = {v.name: v.role for v in s.variables()}
    sizes = {n for n, r in roles.items() if r != "map"}
    (op, bg) = next(family.iter_blocks())
    # Omap bits name no tile dim (the graph's free_vars lack them) but choose the store.
    bits = {str(e) for b in bg.ops for m in b.attr.values() if isinstance(m, Map)
            for row in m.rows for e in row if not e.is_const}
    assert sizes and {n for n, r in roles.items() if r == "map"} == bits
    assert bits >= family.free_vars() - sizes
    # Every bit 0 and every size 1: each tile is its whole tensor.
    inst = s.at(_trivial(family) | dict.fromkeys(bits, 0))
    assert inst.feasible
    for src, tile in zip(op.inputs, bg.inputs, strict=True):
        assert inst.tile(tile) == tuple(d.value for d in family.shape(src))
    SGraphView(family)


# -- the view ---------------------------------------------------------------------------------

def test_view_shows_the_picture_and_the_kernel_sections(run):
    v = SGraphView(run.graph)
    assert "<svg" in v.picture.value
    assert "custom kernel 0: grid (gx), forloop range F" in v.picture.value
    assert len(v.kernels.children) == 1
    assert v.kernels.titles[0] == "custom kernel 0: grid (gx), forloop range F"
    section = _text(v.kernels.children[0].value)
    assert "imap of W_tile (W)" in section and "fmap of X_tile (X)" in section
    assert "|W_tile||[64/F, 64/gx]|" in section


def test_changing_a_size_updates_the_tile_table(run):
    v = SGraphView(run.graph)
    assert v.assignment == run.state.default_assignment()
    v.sizes["gx"].value, v.sizes["F"].value = 4, 2
    (_, bg) = next(substitute_graph(run.graph, {"gx": 4, "F": 2}).iter_blocks())
    shown = _text(v.tiles.value)
    for name, shape in bg.tensors:
        tile = "[" + ", ".join(str(d.value) for d in shape) + "]"
        assert f"|{name}||" in shown and f"|{tile}|" in shown
    assert "|W_tile||[64/F, 64/gx]||[32, 16]|" in shown
    assert "feasible" in v.verdict.value and "#15803d" in v.verdict.value
    v.sizes["F"].value = 64
    assert "[8, 1]" in _text(v.tiles.value)
    assert "matmul tile X_tile dim 1 = 1 &lt; 16" in v.verdict.value
    assert "#b91c1c" in v.verdict.value


def test_the_feasibility_line_names_shared_memory(run):
    v = SGraphView(run.graph, replace(H100, smem_bytes=256))
    inst = v.instance
    assert "shared memory" in v.verdict.value and f"{inst.limits[0].value} B" in v.verdict.value
    assert "infeasible" in v.verdict.value


def test_selecting_a_tensor_shows_its_abstract_expression(run):
    v = SGraphView(run.graph)
    (_, bg) = next(run.graph.iter_blocks())
    v.tensor.value = (0, bg.outputs[0])
    want = str(translate(substitute_graph(run.graph, _trivial(run.graph))).terms[0])
    assert want in v.expression.value and bg.outputs[0] in v.expression.value
    v.tensor.value = (None, "W")
    assert "<code>W</code>" in v.expression.value


def test_view_from_the_json_of_a_verified_candidate_event(run):
    event = next(e for e in run.verified if KernelGraph.from_json(e.graph).free_vars())
    v = SGraphView.from_json(event.graph)
    assert v.state.graph == KernelGraph.from_json(event.graph)
    assert SGraphState.from_json(json.dumps(event.graph)).graph == v.state.graph


@pytest.mark.parametrize("name", WORKLOADS)
def test_known_best_graphs_build_a_view(name):
    from prism.workloads.known_best import known_best

    w = prism.get_workload(name)
    g = known_best(name, w.shapes)
    v = SGraphView(g)
    assert v.sizes == {} and v.state.variables() == []
    inst = v.instance
    (_, bg) = next(g.iter_blocks())
    assert inst.tile(bg.inputs[0]) == tuple(evaluate(d) for d in bg.shape(bg.inputs[0]))
    assert inst.feasible == (within_limits(g, {}, H100) and not problems(g))
    assert "custom kernel 0" in v.picture.value
    assert len(v.tensor.options) == len(v.state.tensor_names())
