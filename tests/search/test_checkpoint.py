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


def test_a_gz_path_is_written_compressed_and_read_back_the_same(saved, tmp_path, cases):
    """A checkpoint carried to a GPU machine (`bench/gpu_check.py --checkpoints`) is gzip'd:
    it loads to the same candidates as the plain file; a cut-off one is a clear error."""
    import gzip
    path, result = saved
    gz = tmp_path / "rmsnorm_matmul.ck.json.gz"
    save_checkpoint(result, cases.small("rmsnorm_matmul").graph, gz)
    assert gz.read_bytes()[:2] == b"\x1f\x8b"
    assert json.loads(gzip.decompress(gz.read_bytes())) == json.loads(path.read_text())
    plain, packed = load_checkpoint(path), load_checkpoint(gz)
    assert [(c, f) for c, f, _ in packed.candidates] == [(c, f) for c, f, _ in plain.candidates]
    assert packed.target_graph == plain.target_graph
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(gz.read_bytes()[:200])
    with pytest.raises(CheckpointError, match="damaged gzip"):
        load_checkpoint(cut)


def test_a_split_program_is_modeled_as_the_search_modeled_it(saved, tmp_path):
    """A split program has more sizes than `best_assignment` enumerates whole, so the search
    models it by descending from that start (`audit.descended`); re-instantiated from a
    checkpoint it is modeled the same way, so an optimize run that loads the checkpoint tunes
    the same best assignment as the run that searched (attention's split-key program: 11.36 µs
    on H100, where the start is 13.45). Oracle: the cost model's own descent."""
    import copy

    from prism.search.audit import best_assignment, descended
    from prism.search.checkpoint import Checkpoint
    from prism.search.split import split_loop
    from prism.workloads import WORKLOADS

    from .test_split_loop import _one_kernel
    w = WORKLOADS["attention"]
    program, _ = split_loop(_one_kernel(w.shapes))
    start = best_assignment(program, H100)
    want = descended(program, H100, start)
    assert want[0] < start[0]
    for descend, latency in ((frozenset({"c7"}), want[0]), (frozenset(), start[0])):
        ck = Checkpoint("attention", w.graph, 1.0, (("c7", "f3", program),), (), descend)
        (got,) = reinstantiate(ck, w.graph).candidates
        assert got.verdict.verdict == "equivalent"
        assert got.modeled_us == pytest.approx(latency) and got.descend == bool(descend)
    # the mark survives the file
    path, result = saved
    marked = copy.copy(result)
    marked.candidates = [copy.copy(c) for c in result.candidates]
    first = next(c for c in marked.candidates if c.verdict.verdict == "equivalent")
    first.descend = True
    save_checkpoint(marked, load_checkpoint(path).target_graph, tmp_path / "marked.json.gz")
    assert load_checkpoint(tmp_path / "marked.json.gz").descend == {first.id}
    assert load_checkpoint(path).descend == frozenset()


def test_a_reinstantiated_candidate_keeps_the_searchs_name(saved, cases):
    """The trace and report of the run that searched name the same programs as a run that
    loads its checkpoint."""
    path, result = saved
    again = reinstantiate(load_checkpoint(path), cases.small("rmsnorm_matmul").graph)
    assert [c.id for c in again.candidates] == [c.id for c in result.equivalent]
    assert [c.family for c in again.candidates] == [c.family for c in result.equivalent]
