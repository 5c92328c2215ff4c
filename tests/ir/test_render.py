"""Rendering: the SVG (drawn by Graphviz's dot) shows each block-graph cluster with its grid, loop
range, maps and tile shapes, symbolic ones as expressions."""

import shutil

import pytest

from prism.frontend.builder import Block, Graph
from prism.ir.render import render, to_dot, to_svg
from prism.workloads.known_best import known_best

needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz dot not installed")


@needs_dot
def test_svg_shows_grid_loop_and_maps(tmp_path):
    g = known_best("rmsnorm_matmul", {"X": (8, 256), "W": (256, 128)}, grid=2, loop=4)
    svg = render(g, tmp_path / "fused.svg").read_text()
    assert svg.startswith("<?xml") and "<svg" in svg
    assert "grid (2), forloop range 4" in svg
    assert "imap x→∅" in svg and "imap x→1" in svg        # X replicated, W split on columns
    assert "fmap loop→1" in svg and "fmap loop→0" in svg  # both walked on d
    assert "omap x→1" in svg
    assert "tile X_tile: [8, 64]" in svg and "tile W_tile: [64, 64]" in svg
    assert "accum red_ld_rms" in svg and "accum nored" in svg


@needs_dot
def test_symbolic_sizes_and_maps_render_as_expressions():
    g = Graph("sym")
    X = g.input("X", (8, 256))
    tb = Block(grid=("g0",), forloop_range="F")
    tb.output(tb.accum(tb.input(X, imap="symbolic", fmap=1), "red_ld_sum"), omap=(-1,))
    (o,) = g.customized(tb)
    g.output(o)
    svg = to_svg(g.build())
    assert "grid (g0), forloop range F" in svg
    assert "imap [x: X_tile_im_d0_p0 X_tile_im_d1_p0]" in svg
    # The tile dim, with its map bits still symbolic, is an expression over them, g0 and F.
    assert "256/(&#45;X_tile_im_d1_p0*F + X_tile_im_d1_p0*F*g0 + F)" in svg


def test_dot_is_plain_text_without_graphviz():
    g = known_best("rmsnorm_matmul", {"X": (8, 256), "W": (256, 128)})
    dot = to_dot(g)
    assert dot.startswith('digraph "rmsnorm_matmul.known_best"') and "subgraph cluster_k2" in dot
