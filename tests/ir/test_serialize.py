"""Our graph JSON: round trip (structural equality is the oracle) and a fuzz test of the loader
that finds no failure other than a PrismError."""

import contextlib
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prism.errors import GraphFormatError, PrismError
from prism.frontend.builder import Block, Graph
from prism.ir.serialize import graph_from_json, graph_to_json, load, save
from prism.workloads.known_best import known_best

FUSED = known_best("rmsnorm_matmul", {"X": (8, 256), "W": (256, 128)}, grid=2, loop=4)


def symbolic_graph():
    g = Graph("sym")
    X, W = g.input("X", (8, 256)), g.input("W", (256, 128))
    tb = Block(grid=("g0", "g1"), forloop_range="F")
    x, w = tb.input(X, imap="symbolic", fmap="symbolic"), tb.input(W, imap=(1, -1), fmap=0)
    tb.output(tb.accum(tb.matmul(x, w)), omap="symbolic")
    (o,) = g.customized(tb)
    g.output(o)
    return g.build()


@pytest.mark.parametrize("graph", [FUSED, symbolic_graph()], ids=["concrete", "symbolic"])
def test_round_trip(graph, tmp_path):
    assert graph_from_json(json.loads(json.dumps(graph_to_json(graph)))) == graph
    save(graph, tmp_path / "g.json")
    assert load(tmp_path / "g.json") == graph


def test_truncated_file(tmp_path):
    path = tmp_path / "g.json"
    path.write_text(json.dumps(graph_to_json(FUSED))[:-40])
    with pytest.raises(GraphFormatError, match=r"not valid JSON.*truncated"):
        load(path)


def test_wrong_document():
    with pytest.raises(GraphFormatError, match="not a Prism graph"):
        graph_from_json([{"op_type": "kn_input_op"}])
    with pytest.raises(GraphFormatError, match="missing field 'ops'"):
        graph_from_json({"format": "prism.kernel_graph", "version": 1, "tensors": {}})


def _mutations(doc):
    """Paths to every value inside `doc`."""
    stack, paths = [((), doc)], []
    while stack:
        path, node = stack.pop()
        paths.append(path)
        items = node.items() if isinstance(node, dict) else enumerate(node) \
            if isinstance(node, list) else ()
        stack.extend(((*path, k), v) for k, v in items)
    return paths


BASE = graph_to_json(FUSED)
PATHS = _mutations(BASE)
json_values = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(-3, 300),
                                     st.floats(allow_nan=False), st.text(max_size=6)),
                           lambda s: st.lists(s, max_size=3) | st.dictionaries(st.text(max_size=5),
                                                                               s, max_size=3),
                           max_leaves=6)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(PATHS), json_values, st.booleans())
def test_loader_fuzz_raises_only_prism_errors(path, value, delete):
    doc = json.loads(json.dumps(BASE))
    if not path:
        doc = value
    else:
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        if delete and isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent[path[-1]] = value
    with contextlib.suppress(PrismError):
        graph_from_json(doc)
