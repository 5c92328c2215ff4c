"""Symbolic checkpoints: a search made at one shape, re-instantiated at the workload's other
shapes without searching; every candidate re-proved there (the checked proof is the oracle) and
a fused one interpreted against torch at a new shape."""

import json
import math

import numpy as np
import pytest

from prism.cost import get_device
from prism.ir.interpret import interpret
from prism.ir.spec import substitute_graph
from prism.search.audit import feasible_assignments
from prism.search.checkpoint import CheckpointError, load_checkpoint, reinstantiate, save_checkpoint
from prism.workloads import get_workload

H100 = get_device("h100")


@pytest.fixture(scope="module")
def saved(tmp_path_factory, cases):
    path = tmp_path_factory.mktemp("ck") / "rmsnorm_matmul.json"
    result = cases.searched("rmsnorm_matmul")
    save_checkpoint(result, cases.small("rmsnorm_matmul").graph, path)
    return path, result


@pytest.mark.parametrize("shapes", [dict(X=(16, 64), W=(64, 64)), dict(X=(8, 128), W=(128, 128)),
                                    dict(X=(16, 256), W=(256, 128))])
def test_reinstantiates_at_other_shapes_without_searching(saved, shapes, cases):
    path, original = saved
    workload = get_workload("rmsnorm_matmul").with_shapes(**shapes)
    result = reinstantiate(load_checkpoint(path), workload.graph, cases.reduced("rmsnorm_matmul"))
    assert result.generated == 0 and result.stop_reason == "checkpoint"
    assert len(result.candidates) == len(original.equivalent)
    assert all(c.verdict.verdict == "equivalent" and c.verdict.sizes == "symbolic"
               for c in result.candidates)
    for cand in result.candidates:          # the shapes really are the new ones
        assert [cand.graph.shape(t) for t in cand.graph.inputs] == [
            workload.graph.shape(t) for t in workload.graph.inputs]
    looped = [c for c in result.candidates
              if not c.graph.custom_ops[0].block.forloop_range.is_const]
    cand = looped[0]
    envs = sorted(feasible_assignments(cand.graph, H100), key=lambda e: math.prod(e.values()))
    arrays = workload.random_inputs(1)
    (got,) = interpret(substitute_graph(cand.graph, envs[-1]), *arrays)
    (want,) = workload.reference(*arrays)
    assert np.max(np.abs(got - want)) / np.max(np.abs(want)) < 1e-12


def test_the_workloads_own_shape_table(saved, cases):
    """Prism's shapes for rmsnorm_matmul, from a checkpoint made at a small shape."""
    path, original = saved
    checkpoint = load_checkpoint(path)
    for shapes in get_workload("rmsnorm_matmul").shape_sets:
        graph = get_workload("rmsnorm_matmul").with_shapes(**shapes).graph
        result = reinstantiate(checkpoint, graph, cases.reduced("rmsnorm_matmul"))
        assert len(result.equivalent) == len(original.equivalent)
        assert any(c.modeled_us is not None for c in result.equivalent), shapes


def test_a_checkpoint_for_another_program_is_refused(saved, cases):
    path, _ = saved
    import prism
    g = prism.Graph("plain_matmul")
    g.output(g.matmul(g.input("X", (8, 64)), g.input("W", (64, 64))))
    with pytest.raises(CheckpointError, match="another program"):
        reinstantiate(load_checkpoint(path), g.build())
    with pytest.raises(CheckpointError, match="differ"):
        reinstantiate(load_checkpoint(path), cases.small("attention").graph)


def test_damaged_checkpoints_are_clear_errors(saved, tmp_path):
    path, _ = saved
    bad = tmp_path / "bad.json"
    for text, words in [("{", "JSON"), ('{"format": "x"}', "not a search checkpoint"),
                        ('{"format": "prism.search_checkpoint", "version": 9}', "version"),
                        ('{"format": "prism.search_checkpoint", "version": 1}', "damaged")]:
        bad.write_text(text)
        with pytest.raises(CheckpointError, match=words):
            load_checkpoint(bad)
    with pytest.raises(CheckpointError, match="cannot read"):
        load_checkpoint(tmp_path / "missing.json")
    doc = json.loads(path.read_text())
    assert doc["families"] and all(f["graph"]["format"] == "prism.kernel_graph"
                                   for f in doc["families"])
