"""`import_mirage` against Mirage's own saved μGraphs, with float64 NumPy references as oracle.

The corpus (shared/external/mirage_mugraphs, see its README) holds μGraphs that Mirage's search
found and verified for six workloads. Each must import, pass `spec.check`, and interpret to the
workload's reference (written here in NumPy, independent of Prism).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prism.errors import MirageFormatError, PrismError
from prism.frontend.mirage import import_mirage
from prism.ir import check, interpret

# -- the workloads' references ------------------------------------------------------------------

Array = np.ndarray


def rms_norm_matmul(X: Array, W: Array) -> Array:
    return X / np.sqrt(np.mean(X * X, axis=-1, keepdims=True)) @ W


def gated_mlp(X: Array, W1: Array, W2: Array) -> Array:
    H = X @ W1
    return H / (1.0 + np.exp(-H)) * (X @ W2)


def lora(X: Array, W: Array, A: Array, B: Array) -> Array:
    return X @ W + (X @ A) @ B


def attention(Q: Array, K: Array, V: Array) -> Array:
    E = np.exp(Q @ K)
    return E / E.sum(axis=-1, keepdims=True) @ V


@dataclass(frozen=True)
class Workload:
    reference: Callable[..., Array]
    shapes: tuple[tuple[int, ...], ...]   # the reference's parameters, in its order
    graphs: int                           # how many graphs the corpus README lists
    scale: float = 1.0                    # input scale (keeps exp in range for attention)


_MLP = ((8, 4096), (4096, 4096), (4096, 4096))
_LORA = ((16, 256), (256, 4096), (256, 16), (16, 4096))
WORKLOADS = {
    "rmsnorm_bs1": Workload(rms_norm_matmul, ((2, 4096), (4096, 6144)), 18),
    "gated_mlp": Workload(gated_mlp, _MLP, 32),
    "single_gated_mlp": Workload(gated_mlp, _MLP, 1),
    "lora": Workload(lora, _LORA, 4),
    "single_lora": Workload(lora, _LORA, 1),
    "gqa_bs1": Workload(attention, ((2, 256, 64), (2, 64, 4096), (2, 4096, 64)), 28, scale=0.1),
}


def parameter_order(workload: Workload, input_shapes: list[tuple[int, ...]]) -> list[int]:
    """For each graph input, the reference parameter it is: matched by shape; inputs of equal
    shape take the parameters in the reference's order. That tie rule is the corpus's own order:
    gated_mlp's graphs list W1 (under silu) before W2 — checked on graph 0, where the swapped
    order gives a relative error near 1 — and the rule is applied to every graph unchanged."""
    free = list(range(len(workload.shapes)))
    order = []
    for shape in input_shapes:
        matches = [p for p in free if workload.shapes[p] == shape]
        assert matches, f"graph input of shape {shape} is no parameter of the workload"
        order.append(matches[0])
        free.remove(matches[0])
    return order


def relative_error(got: Array, want: Array) -> float:
    return float(np.abs(got - want).max() / np.abs(want).max())


def max_relative_error(stem: str, graphs: list[Any], seed: int = 0) -> float:
    """The worst relative error of `interpret` over `graphs` against the file's reference."""
    workload = WORKLOADS[stem]
    rng = np.random.default_rng(seed)
    params = [workload.scale * rng.standard_normal(s) for s in workload.shapes]
    want = workload.reference(*params)
    worst = 0.0
    for g in graphs:
        shapes = [tuple(d.value for d in g.shape(name)) for name in g.inputs]
        (got,) = interpret(g, *[params[p] for p in parameter_order(workload, shapes)])
        worst = max(worst, relative_error(got, want))
    return worst


@cache
def corpus_text(folder: Path, stem: str) -> str:
    return (folder / f"{stem}.json").read_text()


def corpus_doc(folder: Path, stem: str) -> list[Any]:
    """A fresh parsed copy, free to mutate."""
    doc: list[Any] = json.loads(corpus_text(folder, stem))
    return doc


# -- the corpus ----------------------------------------------------------------------------------

def test_corpus_holds_the_known_workloads(corpus_dir: Path) -> None:
    assert {p.stem for p in corpus_dir.glob("*.json")} == set(WORKLOADS)


@pytest.mark.parametrize("stem", sorted(WORKLOADS))
def test_corpus_imports_and_passes_spec(corpus_dir: Path, stem: str) -> None:
    graphs = import_mirage(corpus_dir / f"{stem}.json")
    assert len(graphs) == WORKLOADS[stem].graphs
    for i, g in enumerate(graphs):
        check(g)
        assert g.name == f"{stem}[{i}]"
        assert g.inputs == [f"in{k}" for k in range(len(WORKLOADS[stem].shapes))]
        assert len(g.outputs) == 1


@pytest.mark.parametrize("stem", sorted(WORKLOADS))
def test_corpus_interprets_to_the_workload(corpus_dir: Path, stem: str) -> None:
    # Every graph: all 84 take about 15 s on two cores.
    graphs = import_mirage(corpus_dir / f"{stem}.json")
    assert max_relative_error(stem, graphs) < 1e-9


def test_gated_mlp_weights_are_not_interchangeable(corpus_dir: Path) -> None:
    # The oracle for the W1/W2 order: swapping them must be caught.
    (g,) = import_mirage(corpus_dir / "single_gated_mlp.json")
    rng = np.random.default_rng(1)
    X, W1, W2 = (rng.standard_normal(s) for s in _MLP)
    (got,) = interpret(g, X, W1, W2)
    assert relative_error(got, gated_mlp(X, W1, W2)) < 1e-9
    assert relative_error(got, gated_mlp(X, W2, W1)) > 0.1


def test_worked_example_a_rmsnorm(corpus_dir: Path) -> None:
    # REFERENCE.md §2.9, example A: grid (256,1,1) → (256,), F = 32, tiles 2×128 and 128×24.
    g = import_mirage(corpus_dir / "rmsnorm_bs1.json")[0]
    ((_, bg),) = list(g.iter_blocks())
    assert [d.value for d in bg.grid] == [256] and bg.forloop_range.value == 32
    tiles = [[d.value for d in bg.shape(t)] for t in bg.inputs]
    assert tiles == [[2, 128], [128, 24]]
    assert [op.kind for op in bg.accumulators] == ["red_ld_rms", "nored"]


def test_worked_example_b_split_kv_attention(corpus_dir: Path) -> None:
    # REFERENCE.md §2.9, example B: grids (2,8,16) and (2,16,1) → (2,16); redtox in kernel 2.
    g = import_mirage(corpus_dir / "gqa_bs1.json")[0]
    (_, k1), (_, k2) = list(g.iter_blocks())
    assert [d.value for d in k1.grid] == [2, 8, 16] and k1.forloop_range.value == 4
    assert [[d.value for d in k1.shape(t)] for t in k1.inputs] == \
        [[1, 16, 64], [1, 64, 128], [1, 128, 64]]
    assert [d.value for d in k2.grid] == [2, 16] and k2.forloop_range.value == 1
    assert sorted(op.kind for op in k2.accumulators) == ["red_ld_sum", "redtox_ld_sum"]


def test_sources_path_text_and_list_agree(corpus_dir: Path) -> None:
    text = corpus_text(corpus_dir, "lora")
    by_path = import_mirage(corpus_dir / "lora.json")
    by_str = import_mirage(str(corpus_dir / "lora.json"))
    by_text = import_mirage(text)
    by_list = import_mirage(json.loads(text))
    assert [g.ops for g in by_path] == [g.ops for g in by_str] == [g.ops for g in by_text] == \
        [g.ops for g in by_list]
    assert by_list[2].name == "mirage[2]" and by_path[2].name == "lora[2]"


def test_accumulator_spellings_of_current_mirage_are_accepted(corpus_dir: Path) -> None:
    # Today's Mirage writes tb_forloop_accum_* (and no_red for nored); both must import alike.
    text = corpus_text(corpus_dir, "gqa_bs1")
    renamed = text.replace('"tb_accum_nored_op"', '"tb_forloop_accum_no_red_op"') \
        .replace('"tb_accum_', '"tb_forloop_accum_')
    assert renamed != text
    assert [g.ops for g in import_mirage(renamed)] == [g.ops for g in import_mirage(text)]


# -- small hand-written documents ------------------------------------------------------------------

def tensor(guid: int, *dims: int, data_type: int = 921) -> dict[str, Any]:
    return {"data_type": data_type, "dim": [*dims, *[0] * (4 - len(dims))], "guid": guid,
            "layout": "DmemRowMajor", "num_dims": len(dims)}


def kn(op_type: str, ins: list[Any], outs: list[Any], **fields: Any) -> dict[str, Any]:
    return {"op_type": op_type, "input_tensors": ins, "output_tensors": outs, **fields}


def unshared(doc: list[Any]) -> list[Any]:
    """A copy in which no two records are the same object, as if parsed from a file."""
    copied: list[Any] = json.loads(json.dumps(doc))
    return copied


def matmul_graph() -> list[Any]:
    """in0[2,8] @ in1[8,4]."""
    X, W, Y = tensor(1, 2, 8), tensor(2, 8, 4), tensor(3, 2, 4)
    return unshared([kn("kn_input_op", [], [X]), kn("kn_input_op", [], [W]),
                     kn("kn_matmul_op", [X, W], [Y]), kn("kn_output_op", [Y], [])])


def custom_graph() -> list[Any]:
    """exp(in0[4,64]) summed over the last dim by a custom kernel: grid (4,1,1), F = 2."""
    X, Out = tensor(1, 4, 64), tensor(2, 4, 1)
    tile, e, acc = tensor(21, 1, 32), tensor(22, 1, 32), tensor(23, 1, 1)
    ops = [{"op_type": "tb_input_op", "dtensor": X, "input_map": {"x": 0, "y": -1, "z": -1},
            "forloop_dim": 1, "input_tensors": [], "output_tensors": [tile]},
           kn("tb_exp_op", [tile], [e]),
           kn("tb_accum_red_ld_sum_op", [e], [acc]),
           {"op_type": "tb_output_op", "dtensor": Out, "input_tensors": [acc],
            "output_map": {"x": 0, "y": -1, "z": -1}, "output_tensors": []}]
    bgraph = {"grid_dim": {"x": 4, "y": 1, "z": 1}, "forloop_range": 2, "reduction_dimx": 64,
              "operators": ops}
    return unshared([kn("kn_input_op", [], [X]), kn("kn_customized_op", [X], [Out], bgraph=bgraph),
                     kn("kn_output_op", [Out], [])])


def test_small_documents_import_and_interpret() -> None:
    mm, cu = import_mirage([matmul_graph(), custom_graph()])
    rng = np.random.default_rng(2)
    X, W = rng.standard_normal((2, 8)), rng.standard_normal((8, 4))
    assert relative_error(interpret(mm, X, W)[0], X @ W) < 1e-12
    X = rng.standard_normal((4, 64))
    assert relative_error(interpret(cu, X)[0], np.exp(X).sum(-1, keepdims=True)) < 1e-12


def test_grid_keeps_a_middle_size_one_dim() -> None:
    # Grid (2,1,2): x and z both split data dim 0 (x outermost); y is kept, z is last and > 1.
    doc = custom_graph()
    bgraph = doc[1]["bgraph"]
    bgraph["grid_dim"] = {"x": 2, "y": 1, "z": 2}
    bgraph["operators"][0]["input_map"] = {"x": 0, "y": -1, "z": 0}
    bgraph["operators"][3]["output_map"] = {"x": 0, "y": -1, "z": 0}
    (g,) = import_mirage([doc])
    ((_, bg),) = list(g.iter_blocks())
    assert [d.value for d in bg.grid] == [2, 1, 2]
    X = np.random.default_rng(4).standard_normal((4, 64))
    assert relative_error(interpret(g, X)[0], np.exp(X).sum(-1, keepdims=True)) < 1e-12


def test_reduction_k_sums_dim_k_from_the_outermost() -> None:
    X, Y = tensor(1, 3, 5, 7), tensor(2, 3, 1, 7)
    (g,) = import_mirage([[kn("kn_input_op", [], [X]), kn("kn_reduction_1_op", [X], [Y]),
                           kn("kn_output_op", [Y], [])]])
    x = np.random.default_rng(3).standard_normal((3, 5, 7))
    assert relative_error(interpret(g, x)[0], x.sum(axis=1, keepdims=True)) < 1e-12


def test_mul_scalar_needs_its_constant() -> None:
    X, Y = tensor(1, 2, 3), tensor(2, 2, 3)
    ops = [kn("kn_input_op", [], [X]), kn("kn_mul_scalar_op", [X], [Y]),
           kn("kn_output_op", [Y], [])]
    with pytest.raises(MirageFormatError, match=r"graph 0 op 1: missing field 'scalar'"):
        import_mirage([ops])
    ops[1]["scalar"] = 0.5
    (g,) = import_mirage([ops])
    x = np.ones((2, 3))
    assert np.array_equal(interpret(g, x)[0], 0.5 * x)


# -- errors: one line, saying where and what ------------------------------------------------------

def raises(doc: Any, *words: str) -> str:
    with pytest.raises(MirageFormatError) as info:
        import_mirage(doc)
    message = str(info.value)
    assert "\n" not in message
    for word in words:
        assert word in message, f"{word!r} not in: {message}"
    return message


def test_unknown_op_type() -> None:
    doc = [matmul_graph(), matmul_graph()]
    doc[1][2]["op_type"] = "kn_foo_op"
    raises(doc, "graph 1 op 2", "unknown Mirage op type 'kn_foo_op'", "kn_matmul_op",
           "update the importer or remove that graph")


def test_unknown_block_op_type() -> None:
    doc = [custom_graph()]
    doc[0][1]["bgraph"]["operators"][1]["op_type"] = "tb_reduction_0_max_op"
    raises(doc, "graph 0 op 1 block op 1", "unknown Mirage op type 'tb_reduction_0_max_op'",
           "tb_accum_nored_op")


def test_truncated_json(tmp_path: Path) -> None:
    path = tmp_path / "cut.json"
    text = json.dumps([matmul_graph()], indent=1)
    path.write_text(text[: len(text) // 2])
    raises(path, str(path), "not valid JSON at line", "col", "truncated?")


def test_unreadable_file(tmp_path: Path) -> None:
    raises(tmp_path / "missing.json", "missing.json", "cannot read")


def test_missing_field() -> None:
    doc = [custom_graph()]
    del doc[0][1]["bgraph"]["forloop_range"]
    raises(doc, "graph 0 op 1", "missing field 'forloop_range'")
    doc = [matmul_graph()]
    del doc[0][2]["output_tensors"][0]["num_dims"]
    raises(doc, "graph 0 op 2 output_tensors[0]", "missing field 'num_dims'")


def test_wrong_field_type() -> None:
    doc = [custom_graph()]
    doc[0][1]["bgraph"]["grid_dim"]["x"] = "4"
    raises(doc, "graph 0 op 1 grid_dim", "field 'x'", "expected an int ≥ 1")
    raises({"graphs": []}, "takes a path", "dict")
    raises([{"op_type": "kn_input_op"}], "graph 0", "expected a JSON list")


def test_dangling_guid() -> None:
    doc = [matmul_graph()]
    doc[0][2]["input_tensors"][1]["guid"] = 99
    raises(doc, "graph 0 op 2", "dangling guid 99")
    doc = [custom_graph()]
    doc[0][1]["bgraph"]["operators"][2]["input_tensors"][0]["guid"] = 1   # a kernel guid
    raises(doc, "graph 0 op 1 block op 2", "dangling guid 1", "block-level")


def test_data_type_other_than_fp16() -> None:
    doc = [matmul_graph()]
    doc[0][0]["output_tensors"][0]["data_type"] = 940
    raises(doc, "graph 0 op 0", "data_type 940", "921")


def test_shape_mismatch_with_recorded_dim() -> None:
    doc = [matmul_graph()]
    doc[0][2]["output_tensors"][0]["dim"] = [2, 5, 0, 0]
    raises(doc, "graph 0 op 2", "shape mismatch", "[2, 5]", "[2, 4]")
    doc = [custom_graph()]
    doc[0][1]["bgraph"]["operators"][0]["output_tensors"][0]["dim"] = [1, 64, 0, 0]
    raises(doc, "graph 0 op 1 block op 0", "shape mismatch", "[1, 64]", "[1, 32]")


def test_block_inputs_must_follow_the_custom_op_inputs() -> None:
    doc = [custom_graph()]
    doc[0][1]["bgraph"]["operators"][0]["dtensor"]["guid"] = 2
    raises(doc, "graph 0 op 1 block op 0", "tb_input_op 0 reads guid 2", "guid 1")


def test_builder_errors_are_located() -> None:
    doc = [custom_graph()]
    doc[0][1]["bgraph"]["operators"][0]["forloop_dim"] = 3   # rank-2 input
    raises(doc, "graph 0 op 1 block op 0", "out of range")


# -- fuzzing: a damaged file gives a PrismError, never a crash -----------------------------------

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 5000) | st.floats(allow_nan=False)
    | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                max_size=3),
    max_leaves=8)


def slots(value: Any, found: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    """Every (container, key or index) in `value`, depth first."""
    keys = list(value) if isinstance(value, dict) else \
        range(len(value)) if isinstance(value, list) else []
    for key in keys:
        found.append((value, key))
        slots(value[key], found)
    return found


@st.composite
def damaged_corpus_graphs(draw: st.DrawFn, folder: Path) -> list[Any]:
    stem = draw(st.sampled_from(["rmsnorm_bs1", "gqa_bs1", "gated_mlp", "lora"]))
    doc = corpus_doc(folder, stem)[:1]
    for _ in range(draw(st.integers(1, 3))):
        places = slots(doc, [])
        if not places:
            break
        container, key = draw(st.sampled_from(places))
        action = draw(st.sampled_from(["delete", "replace", "truncate"]))
        if action == "delete":
            del container[key]
        elif action == "truncate" and isinstance(container[key], list):
            del container[key][draw(st.integers(0, len(container[key]))):]
        else:
            container[key] = draw(JSON_VALUES)
    return doc


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_damaged_corpus_graph_raises_only_prism_errors(corpus_dir: Path, data: st.DataObject
                                                       ) -> None:
    doc = data.draw(damaged_corpus_graphs(corpus_dir))
    with contextlib.suppress(PrismError):
        import_mirage(doc)


@settings(max_examples=200, deadline=None)
@given(JSON_VALUES.filter(lambda v: not isinstance(v, str)))
def test_random_json_raises_only_prism_errors(value: Any) -> None:
    with contextlib.suppress(PrismError):
        import_mirage(value)
