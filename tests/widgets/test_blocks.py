"""The per-block view: which tile of each input a block reads at an iteration, which tile of each
output it writes.

Oracles, none of them the view's own arithmetic: ranges worked out by hand for the known-best
RMSNorm+MatMul and attention kernels; the interpreter's own data movement
(`prism.ir.interpret.load_tiles` on inputs whose every element holds its own flat index, and
`store_tiles` on per-block tiles that hold one bit per block); and `prism.interpret` end to end,
on inputs that are NaN wherever the view says a block does not read (its output slice stays
finite) or NaN at one element the view says it reads (its output slice turns NaN).
"""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest

import prism
from prism.errors import InputError, SpecError
from prism.frontend.builder import Block, Graph
from prism.ir.graph import KernelGraph
from prism.ir.interpret import load_tiles, store_tiles
from prism.ir.spec import substitute_graph
from prism.workloads.known_best import KNOWN_BEST, known_best
from widgets.blocks import BlockState, BlockView

MATMUL = {"X": (8, 64), "W": (64, 64)}
ATTENTION = {"Q": (2, 8, 32), "K": (2, 32, 64), "V": (2, 64, 32)}
SHAPES = {
    "rmsnorm_matmul": MATMUL,
    "rmsnorm_mlp": {"X": (8, 64), "Wup": (64, 64), "Wgate": (64, 64)},
    "swiglu": {"X": (8, 64), "Wgate": (64, 64), "Wup": (64, 64)},
    "gated_mlp": {"X": (8, 64), "W1": (64, 64), "W2": (64, 64)},
    "attention": ATTENTION, "qknorm_attention": ATTENTION, "gqa": ATTENTION,
    "lora": {"X": (8, 64), "W": (64, 64), "A": (64, 16), "B": (16, 64)},
    "ntrans": {"H": (8, 64), "X": (8, 64), "alpha": (8, 64)},
}


def split_k(grid: tuple[int, int] = (4, 2), loop: int = 2) -> KernelGraph:
    """X[8,64] @ W[64,32] with the reduction dim split across grid dim x (the blocks along x
    add partial tiles) and the columns across y, the loop walking the rest of the reduction."""
    g = Graph("split_k")
    X, W = g.input("X", (8, 64)), g.input("W", (64, 32))
    tb = Block(grid=grid, forloop_range=loop)
    x, w = tb.input(X, imap=(1, -1), fmap=1), tb.input(W, imap=(0, 1), fmap=0)
    tb.output(tb.accum(tb.matmul(x, w), "nored"), omap=(-1, 1))
    (out,) = g.customized(tb)
    g.output(out)
    return g.build()


def nested(loop: int = 2) -> KernelGraph:
    """X[8,64] @ W[64,64] with both grid dims (2 × 2) cutting W's columns: x outermost."""
    g = Graph("nested")
    X, W = g.input("X", (8, 64)), g.input("W", (64, 64))
    tb = Block(grid=(2, 2), forloop_range=loop)
    x, w = tb.input(X, imap=(-1, -1), fmap=1), tb.input(W, imap=(1, 1), fmap=0)
    tb.output(tb.accum(tb.matmul(x, w), "nored"), omap=(1, 1))
    (out,) = g.customized(tb)
    g.output(out)
    return g.build()


def symbolic_rmsnorm_matmul() -> KernelGraph:
    """The known-best RMSNorm+MatMul as an sGraph: grid size gx and loop range F symbolic."""
    g = Graph("rmsnorm_matmul.sgraph")
    X, W = g.input("X", MATMUL["X"]), g.input("W", MATMUL["W"])
    tb = Block(grid=("gx",), forloop_range="F")
    x, w = tb.input(X, imap=(-1,), fmap=1), tb.input(W, imap=(1,), fmap=0)
    tb.output(tb.div(tb.accum(tb.matmul(x, w), "nored"), tb.accum(x, "red_ld_rms")), omap=(1,))
    (out,) = g.customized(tb)
    g.output(out)
    return g.build()


CASES = {
    **{f"{name} grid 2 loop 2": (name, {"grid": 2, "loop": 2}) for name in KNOWN_BEST
       if name not in ("lora", "ntrans")},
    "rmsnorm_matmul grid 4 loop 2": ("rmsnorm_matmul", {"grid": 4, "loop": 2}),
    "attention grid 4 loop 4": ("attention", {"grid": 4, "loop": 4}),
    "lora grid 4": ("lora", {"grid": 4}),
    "ntrans grid 4": ("ntrans", {"grid": 4}),
}


def case_graph(case: str) -> KernelGraph:
    if case in EXTRA:
        return EXTRA[case]()
    name, params = CASES[case]
    return known_best(name, SHAPES[name], **params)


EXTRA = {"split_k": split_k, "nested": nested}
ALL_CASES = [*CASES, *EXTRA]


# -- by hand ------------------------------------------------------------------------------------

def test_rmsnorm_matmul_by_hand():
    # grid 4 over W's 64 columns: 16 a block; loop 2 over d = 64: 32 an iteration; X replicated
    state = BlockState(known_best("rmsnorm_matmul", MATMUL, grid=4, loop=2))
    out = state.outputs[0].tensor
    assert (state.grid, state.forloop_range) == ((4,), 2)
    for b, i in itertools.product(range(4), range(2)):
        assert [str(x) for x in state.reads((b,), i)] == [
            f"X[0:8, {32 * i}:{32 * i + 32}]", f"W[{32 * i}:{32 * i + 32}, {16 * b}:{16 * b + 16}]"]
        assert [str(x) for x in state.writes((b,))] == [f"{out}[0:8, {16 * b}:{16 * b + 16}]"]
    assert state.sentence((2,), 1) == (f"block (2,) iteration 1 reads X[0:8, 32:64] and "
                                       f"W[32:64, 32:48]; writes {out}[0:8, 32:48] after the loop")
    assert [str(x) for x in state.reads_over_loop((3,))] == ["X[0:8, 0:64]", "W[0:64, 48:64]"]


def test_attention_by_hand():
    # grid (batch 2, 4 blocks of the 8 query rows: 2 rows each); loop 4 over the 64 keys: 16 each
    state = BlockState(known_best("attention", ATTENTION, grid=4, loop=4))
    out = state.outputs[0].tensor
    assert (state.grid, state.forloop_range) == ((2, 4), 4)
    assert [str(x) for x in state.reads((1, 3), 2)] == [
        "Q[1:2, 6:8, 0:32]", "K[1:2, 0:32, 32:48]", "V[1:2, 32:48, 0:32]"]
    assert [str(x) for x in state.writes((1, 3))] == [f"{out}[1:2, 6:8, 0:32]"]
    assert [str(x) for x in state.reads((0, 0), 0)] == [
        "Q[0:1, 0:2, 0:32]", "K[0:1, 0:32, 0:16]", "V[0:1, 0:16, 0:32]"]


def test_split_k_by_hand():
    # x splits the reduction dim 64 in 4 (16 each), the loop that in 2 (8); y the 32 columns
    state = BlockState(split_k())
    out = state.outputs[0].tensor
    assert [str(x) for x in state.reads((1, 1), 1)] == ["X[0:8, 24:32]", "W[24:32, 16:32]"]
    assert [str(x) for x in state.writes((3, 0))] == [f"{out}[0:8, 0:16]"]
    assert state.sentence((1, 1), 1) == (
        f"block (1, 1) iteration 1 reads X[0:8, 24:32] and W[24:32, 16:32]; adds its partial "
        f"tile to {out}[0:8, 16:32] after the loop (the blocks along x are summed into {out})")


def test_a_later_kernel_of_two_by_hand():
    """Kernel 1 reads kernel 0's output [8, 32], its grid of 4 cutting the rows (2 each)."""
    g = Graph("two_kernels")
    X, W = g.input("X", (8, 64)), g.input("W", (64, 32))
    tb = Block(grid=(2,), forloop_range=2)
    x, w = tb.input(X, imap=(-1,), fmap=1), tb.input(W, imap=(1,), fmap=0)
    tb.output(tb.accum(tb.matmul(x, w), "nored"), omap=(1,))
    (y,) = g.customized(tb)
    tb = Block(grid=(4,), forloop_range=1)
    tb.output(tb.accum(tb.exp(tb.input(y, imap=(0,)))), omap=(0,))
    (z,) = g.customized(tb)
    g.output(z)
    graph = g.build()
    first, second = BlockState(graph), BlockState(graph, kernel=1)
    assert [str(b) for b in first.reads((1,), 1)] == ["X[0:8, 32:64]", "W[32:64, 16:32]"]
    assert second.sentence((3,), 0) == (f"block (3,) iteration 0 reads {y.name}[6:8, 0:32]; "
                                        f"writes {z.name}[6:8, 0:32] after the loop")
    with pytest.raises(InputError, match="2 custom kernel"):
        BlockState(graph, kernel=2)


def test_two_grid_dims_on_one_data_dim_nest_x_outermost():
    # W's 64 columns in 2 (x) × 2 (y) parts of 16: block (x, y) owns part 2x + y
    state = BlockState(nested())
    out = state.outputs[0].tensor
    assert [str(b) for b in state.reads((1, 0), 1)] == ["X[0:8, 32:64]", "W[32:64, 32:48]"]
    assert [str(b) for b in state.writes((0, 1))] == [f"{out}[0:8, 16:32]"]


# -- the interpreter's data movement ------------------------------------------------------------

@pytest.mark.parametrize("case", ALL_CASES)
def test_reads_are_the_tiles_the_interpreter_loads(case):
    """Every element of each input holds its own flat index; the interpreter's tile for (block,
    iteration) must be exactly the view's slice of it, element for element."""
    graph = case_graph(case)
    state = BlockState(graph)
    (op,) = graph.custom_ops
    assert op.block is not None
    for access, bop in zip(state.inputs, op.block.input_ops, strict=True):
        data = np.arange(np.prod(access.shape), dtype=np.float64).reshape(access.shape)
        tiles = load_tiles(data, list(bop.attr["imap"].as_dims()), bop.attr["fmap"].as_dims()[0],
                           list(state.grid), state.forloop_range)
        k = len(state.grid)
        for block in state.blocks():
            for i in range(state.forloop_range):
                at = tuple(b if tiles.shape[p] > 1 else 0 for p, b in enumerate(block))
                loaded = tiles[(*at, i if tiles.shape[k] > 1 else 0)]
                box = state.reads(block, i)[state.inputs.index(access)]
                np.testing.assert_array_equal(loaded, data[box.slices], err_msg=f"{box}")


@pytest.mark.parametrize("case", ALL_CASES)
def test_writes_are_where_the_interpreter_stores(case):
    """Block number n's tile is all 2**n; after the interpreter's store (concatenating or
    summing), an output element holds the bits of exactly the blocks the view says write it."""
    graph = case_graph(case)
    state = BlockState(graph)
    (op,) = graph.custom_ops
    assert op.block is not None
    blocks = list(state.blocks())
    for access, bop in zip(state.outputs, op.block.output_ops, strict=True):
        tiles = np.zeros((*state.grid, *access.tile_shape))
        for n, block in enumerate(blocks):
            tiles[block] = 2.0 ** n
        stored = store_tiles(tiles, list(bop.attr["omap"].as_dims()), list(state.grid))
        assert stored.shape == access.shape
        expected = np.zeros(access.shape)
        for n, block in enumerate(blocks):
            box = state.writes(block)[state.outputs.index(access)]
            expected[box.slices] += 2.0 ** n
        np.testing.assert_array_equal(stored, expected)


# -- the whole interpreter, end to end ----------------------------------------------------------

def _inputs(state: BlockState, rng: np.random.Generator) -> list[np.ndarray]:
    return [rng.uniform(0.5, 1.0, a.shape) for a in state.inputs]


@pytest.mark.parametrize("case", ["rmsnorm_matmul grid 4 loop 2", "attention grid 4 loop 4",
                                  "swiglu grid 2 loop 2", "lora grid 4", "split_k", "nested"])
def test_a_block_reads_nothing_else_and_all_it_is_said_to(case):
    graph = case_graph(case)
    state = BlockState(graph)
    rng = np.random.default_rng(0)
    for block in state.blocks():
        # NaN wherever the block reads nothing: what it writes stays finite (unless other
        # blocks, which read those NaNs, add into the same slice)
        poisoned = []
        for a, arr, box in zip(state.inputs, _inputs(state, rng), state.reads_over_loop(block),
                               strict=True):
            kept = np.full(a.shape, np.nan)
            kept[box.slices] = arr[box.slices]
            poisoned.append(kept)
        results = prism.interpret(graph, *poisoned)
        for a, out, box in zip(state.outputs, results, state.writes(block), strict=True):
            if not a.summed:
                assert np.isfinite(out[box.slices]).all(), f"block {block} read outside {box}"
        # one NaN inside what it reads at iteration i: its slice turns NaN
        for i in range(state.forloop_range):
            for j, box in enumerate(state.reads(block, i)):
                arrays = _inputs(state, rng)
                corner = tuple(a for a, _ in box.ranges)
                arrays[j][corner] = np.nan
                results = prism.interpret(graph, *arrays)
                assert any(np.isnan(out[w.slices]).any()
                           for out, w in zip(results, state.writes(block), strict=True)), \
                    f"block {block} iteration {i} does not read {box}"


# -- sGraphs and assignments --------------------------------------------------------------------

def test_an_sgraph_at_an_assignment_is_its_concrete_member():
    sgraph = symbolic_rmsnorm_matmul()
    state = BlockState(sgraph, {"gx": 4, "F": 2})
    concrete = BlockState(known_best("rmsnorm_matmul", MATMUL, grid=4, loop=2))
    for block in state.blocks():
        for i in range(2):
            assert [str(b) for b in state.reads(block, i)] == \
                [str(b) for b in concrete.reads(block, i)]
    assert state.assignment == {"gx": 4, "F": 2}
    with pytest.raises(InputError, match="F, gx"):
        BlockState(sgraph)
    with pytest.raises(SpecError, match="is not an integer"):
        BlockState(sgraph, {"gx": 3, "F": 2})


def test_the_searched_winner_at_its_parameters(recorded):
    """The pipeline's best kernel: its verified sGraph at the tuner's parameters reads and
    writes as the concrete kernel it instantiates, and as the interpreter moves the data."""
    best = recorded.result.best
    if best.symbolic is None or not best.graph.custom_ops:
        pytest.skip("the small run's best kernel is not a custom kernel")
    state = BlockState(best.symbolic, best.params)
    concrete = BlockState(substitute_graph(best.symbolic, state.assignment))
    for block in state.blocks():
        assert state.writes(block) == concrete.writes(block)
        for i in range(state.forloop_range):
            assert state.reads(block, i) == concrete.reads(block, i)
    assert set(state.assignment) == set(best.symbolic.free_vars())


def test_step_walks_the_iterations_then_the_blocks():
    state = BlockState(known_best("attention", ATTENTION, grid=2, loop=2))
    seen, at = [], ((0, 0), 0)
    for _ in range(9):
        seen.append(at)
        at = state.step(*at)
    assert seen == [((0, 0), 0), ((0, 0), 1), ((0, 1), 0), ((0, 1), 1), ((1, 0), 0),
                    ((1, 0), 1), ((1, 1), 0), ((1, 1), 1), ((0, 0), 0)]
    with pytest.raises(InputError, match="not in the grid"):
        state.reads((2, 0), 0)
    with pytest.raises(InputError, match="iteration 2"):
        state.reads((0, 0), 2)


# -- the view -----------------------------------------------------------------------------------

def _highlighted(html: str, cls: str) -> list[str]:
    return re.findall(rf'class="{cls}" data-range="([^"]*)"', html)


def test_the_view_follows_its_controls():
    view = BlockView(known_best("rmsnorm_matmul", MATMUL, grid=4, loop=2))
    out = view.state.outputs[0].tensor
    assert "block (0,) iteration 0 reads X[0:8, 0:32] and W[0:32, 0:16]" in view.line.value
    assert _highlighted(view.picture.value, "prism-tile-read") == ["0:8,0:32", "0:32,0:16"]
    view.block_sliders[0].value = 2
    view.iteration.value = 1
    assert (f"block (2,) iteration 1 reads X[0:8, 32:64] and W[32:64, 32:48]; writes "
            f"{out}[0:8, 32:48] after the loop") in view.line.value
    assert _highlighted(view.picture.value, "prism-tile-read") == ["0:8,32:64", "32:64,32:48"]
    assert _highlighted(view.picture.value, "prism-tile-write") == ["0:8,32:48"]
    # the tint: what block 2 reads over its whole loop
    assert _highlighted(view.picture.value, "prism-block-span")[:2] == ["0:8,0:64",
                                                                        "0:64,32:48"]
    view.step_button.click()                     # past the last iteration: the next block
    assert (view.block, view.iteration.value) == ((3,), 0)
    assert "block (3,) iteration 0" in view.line.value
    view.show((1,), 1)
    assert "block (1,) iteration 1 reads X[0:8, 32:64] and W[32:64, 16:32]" in view.line.value


def test_the_view_draws_rank_3_tensors_and_hover_text():
    view = BlockView(known_best("attention", ATTENTION, grid=4, loop=4))
    view.show((1, 3), 2)
    picture = view.picture.value
    assert _highlighted(picture, "prism-tile-read") == ["1:2,6:8,0:32", "1:2,0:32,32:48",
                                                        "1:2,32:48,0:32"]
    assert "Q[1, :, :]" in picture and "K[0, :, :]" in picture      # one panel per batch
    assert [s.description for s in view.block_sliders] == ["block x", "block y"]
    assert '<abbr title="' in view.header.value and ">imap</abbr>" in picture
    with pytest.raises(InputError):
        view.show((2, 0), 0)


def test_a_kernel_without_a_loop_or_a_grid_dim_has_disabled_controls():
    view = BlockView(known_best("lora", SHAPES["lora"], grid=1))
    assert view.iteration.disabled and view.block_sliders[0].disabled
    view.step_button.click()
    assert (view.block, view.iteration.value) == ((0,), 0)
