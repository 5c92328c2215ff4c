"""Graph text: round trip on every graph we have (structural equality is the oracle, and the text
of the read graph is the text read), errors that name the line, and its size against our JSON."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import math
import operator
from functools import cache
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import prism
from prism.errors import DimExprError, GraphFormatError
from prism.frontend.builder import Block, Graph
from prism.frontend.mirage import import_mirage
from prism.ir.dims import Dim, bit, const, var
from prism.ir.graph import BlockGraph, Interface, KernelGraph, Map, Op, View
from prism.ir.serialize import graph_to_json
from prism.ir.spec import substitute_graph
from prism.ir.text import from_text, to_text
from prism.workloads import VARIANTS, WORKLOADS, mirage_corpus
from prism.workloads.known_best import known_best


def round_trips(g: KernelGraph) -> None:
    text = to_text(g)
    back = from_text(text)
    assert back == g, text
    assert to_text(back) == text


def _programs() -> dict:
    """tests/corpus/corpus_programs.py, loaded by path (the tests are imported by path too)."""
    path = Path(__file__).parents[1] / "corpus/corpus_programs.py"
    spec = importlib.util.spec_from_file_location("corpus_programs", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.PROGRAMS


@pytest.mark.parametrize("name", [*WORKLOADS, *VARIANTS])
def test_workloads_round_trip(name):
    w = {**WORKLOADS, **VARIANTS}[name]
    round_trips(w.graph)
    if name in WORKLOADS:
        round_trips(known_best(name, w.shapes))


@pytest.mark.parametrize("stem", sorted(mirage_corpus.FILES))
def test_mirage_corpus_round_trips(corpus_dir, stem):
    for g in import_mirage(corpus_dir / f"{stem}.json"):
        round_trips(g)


def test_corpus_programs_round_trip():
    """Every traced program of the corpus, with its interface (views, masks) and attributes
    that our JSON cannot hold (a clamp's `hi=None`)."""
    for entry in _programs().values():
        round_trips(prism.workload(entry.fn, dtype=entry.dtype, bool_inputs=entry.bool_inputs,
                                   **entry.shapes).graph)


@pytest.mark.parametrize("name", ["rmsnorm_matmul", "attention"])
def test_search_candidates_round_trip(cases, name):
    """Every candidate (concrete maps, symbolic grid and loop), every complete family (the
    sGraph: symbolic maps too), and members of both with their variables substituted."""
    result = cases.searched(name)
    assert result.candidates and result.families
    for c in result.candidates:
        round_trips(c.graph)
        env = c.assignment or dict.fromkeys(c.graph.free_vars(), 1)
        round_trips(substitute_graph(c.graph, env))
    for f in result.families:
        round_trips(f.graph)
        round_trips(substitute_graph(f.graph, dict.fromkeys(f.graph.free_vars(), 1)))


def test_the_text_reads_as_documented():
    g = known_best("rmsnorm_matmul", {"X": (8, 256), "W": (256, 128)}, grid=2, loop=4)
    assert to_text(g) == """\
graph rmsnorm_matmul.known_best
input X [8, 256]
input W [256, 128]
custom [8, 128] = customized(X, W) grid=[2] loop=4
  input X_tile [8, 64] fmap=[01] imap=[00]
  input W_tile [64, 64] fmap=[10] imap=[01]
  matmul [8, 64] = matmul(X_tile, W_tile)
  nored [8, 64] = nored(matmul)
  red_ld_rms [8, 1] = red_ld_rms(X_tile)
  div [8, 64] = div(nored, red_ld_rms)
  output div omap=[01]
output custom
"""


def symbolic_graph() -> KernelGraph:
    g = Graph("sym")
    X, W = g.input("X", (8, 256)), g.input("W", (256, 128))
    tb = Block(grid=("g0", "g1"), forloop_range="F")
    x, w = tb.input(X, imap="symbolic", fmap="symbolic"), tb.input(W, imap=(1, -1), fmap=0)
    tb.output(tb.accum(tb.matmul(x, w)), omap="symbolic")
    (o,) = g.customized(tb)
    g.output(o)
    return g.build()


def test_symbolic_maps_and_sizes_are_inline():
    """An sGraph: symbolic grid, loop and map rows inline; its long tile size, repeated, is
    named by one `let` line and written `$1` where it recurs."""
    text = to_text(symbolic_graph())
    assert "grid=[g0, g1] loop=F" in text
    assert "imap=[(?X_tile_im_d0_p0, ?X_tile_im_d1_p0) (?X_tile_im_d0_p1, ?X_tile_im_d1_p1)]" \
        in text
    assert "input W_tile [256/F, 128/g0] fmap=[10] imap=[01 00]" in text
    assert text.splitlines()[1].startswith("let $1 = 8/(1 - ?X_tile_fm_d0_p0 + ")
    assert "  matmul [$1, 128/g0] = matmul(X_tile, W_tile)" in text
    round_trips(symbolic_graph())


def test_every_attribute_value_and_block_field_round_trips():
    """Floats exactly (repr), None, booleans, strings with quotes and newlines, nested tuples,
    maps with symbolic and rank-0 rows; a block's dimx and thread count; names that are not
    identifiers; a tensor no op outputs; a table in another order; trailing empty views."""
    floats = (0.1 + 0.2, 1e-300, -0.0, 5e-324, 1.7976931348623157e308, math.inf, -math.inf)
    block = Op("customized", ("x y",), ("o",), (("grid", 3),), block=None)
    imap = Map(((bit("m"), const(1)), (const(0), var("g") - 1)))
    inner = BlockGraph((var("g"), const(2)), var("F") * 2 + 1,
                       (Op("input", (), ("t",), (("imap", imap),)),
                        Op("output", ("t",), (), (("omap", Map(())), ("rank0", Map(((),)))))),
                       (("t", (var("D") / var("g"), const(4))),), reduction_dimx=32,
                       block_threads=256)
    g = KernelGraph(
        (Op("input", (), ("x y",)),
         Op("mul_scalar", ("x y",), ("s",), (("scalar", floats[0]),)),
         Op("weird", ("s",), ("a", "b"), (
             *((f"f{i}", f) for i, f in enumerate(floats)), ("none", None), ("yes", True),
             ("str", 'a "b"\nc é'), ("loop", -7), ("tup", (1, (2.5,), (), "z")))),
         Op(block.kind, block.inputs, block.outputs, block.attrs, inner),
         Op("output", ("b",), ()), Op("output", ("a",), ())),
        (("s", (const(8), const(4))), ("x y", (const(8), const(4))), ("loose", (const(1),)),
         ("a", (const(8),)), ("b", (const(8), const(4))), ("o", (var("D"), const(4)))),
        "odd graph", Interface((None,), (View((32,)), None)))
    text = to_text(g)
    assert '"grid"=3' in text and '"loop"=-7' in text and "threads=256" in text
    round_trips(g)


# Dims: random expressions with quotients, negative terms, powers and bits
_leaf = st.one_of(st.integers(-3, 9).map(const), st.sampled_from(["D", "F", "g0"]).map(var),
                  st.sampled_from(["m", "f"]).map(bit))
_OPS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv}


def _build(t):
    if isinstance(t, Dim):
        return t
    op, a, b = t
    return _OPS[op](_build(a), _build(b))


@given(st.recursive(_leaf, lambda sub: st.tuples(st.sampled_from("+-*/"), sub, sub),
                    max_leaves=8))
def test_any_dim_round_trips(tree):
    try:
        d = _build(tree)
    except DimExprError:         # division by zero
        return
    g = KernelGraph((Op("input", (), ("X",)), Op("output", ("X",), ())), (("X", (d, d * d)),))
    round_trips(g)


# -- errors ---------------------------------------------------------------------------------------

HEAD = "graph g\ninput X [8, 64]\n"


@pytest.mark.parametrize(("text", "line", "what"), [
    ("input X [8]\n", 1, "starts with a line 'graph NAME'"),
    ("", 0, "starts with a line 'graph NAME'"),
    (HEAD + "Y [8, 64 = exp(X)\n", 3, "expected ','"),
    (HEAD + "Y [8, 64] = exp(X) dim=two\n", 3, "expected a value"),
    (HEAD + "Y [8, 64/0] = exp(X)\n", 3, "by zero"),
    (HEAD + "Y [8, 64] = exp(X\n", 3, "expected ','"),
    (HEAD + "  Y [8, 64] = exp(X)\n", 3, "indented more"),
    (HEAD + "X [8, 64] = exp(X)\n", 3, "given a shape twice"),
    (HEAD + "Y [8, $] = exp(X)\n", 3, "unexpected character '$'"),
    (HEAD + "Y [8, 64] = customized(X) grid=[2] loop=1\n  input t [8, 32] imap=[10 1]\n", 4,
     "map rows have different lengths"),
    (HEAD + "Y [8, 64] = customized(X) grid=[2]\n  input t [8, 32] as [256]\n", 4,
     "a view ('as') in a block"),
    (HEAD + "output X as [3, 3]\n", 3, "does not have the elements"),
    (HEAD + "Y [8, 64] = exp(X) k=1 k=2\n", 3, "given twice"),
    (HEAD + "Y [8, x^100] = exp(X)\n", 3, "a power should be an int from 1 to 64"),
    (HEAD + "Y [8, a/b/c] = exp(X)\n", 3, "quotient of a quotient"),
    (HEAD + "order X Z\n", 3, "the order line"),
    ("graph g\nlet $1 = D/F\ninput X [8, $2]\n", 3, "$2 is not defined by a let line"),
    ("graph g\nlet $1 = D/F\nlet $1 = 2\n", 3, "$1 is defined twice"),
    ("graph g\nlet $1 = D/0\n", 2, "by zero"),
    (HEAD + "let $1 = D/F\n", 3, "let lines come right after the graph line"),
    (HEAD + "\tY [8] = exp(X)\n", 3, "tab"),
    (HEAD + "Y [" + "(" * 5000 + "1" + ")" * 5000 + "] = exp(X)\n", 0, "nest too deeply"),
])
def test_bad_text_names_the_line(text, line, what):
    with pytest.raises(GraphFormatError) as e:
        from_text(text)
    assert what in str(e.value)
    if line:
        assert str(e.value).startswith(f"line {line}")


FUZZ_BASE = to_text(known_best("attention", {"Q": (2, 8, 16), "K": (2, 16, 32),
                                             "V": (2, 32, 16)}))


@given(st.integers(0, len(FUZZ_BASE)), st.integers(0, 6),
       st.text(alphabet="[](),=+-*/^?#\"' \nabx019.", max_size=3))
def test_mangled_text_fails_only_with_graph_format_error(at, cut, insert):
    text = FUZZ_BASE[:at] + insert + FUZZ_BASE[at + cut:]
    with contextlib.suppress(GraphFormatError):
        from_text(text)


# -- size -----------------------------------------------------------------------------------------

@cache
def _json_bytes(g: KernelGraph) -> int:
    return len(json.dumps(graph_to_json(g), separators=(",", ":")).encode())


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_text_is_smaller_than_compact_json(name):
    g = known_best(name, WORKLOADS[name].shapes)
    assert len(to_text(g).encode()) < _json_bytes(g)
