"""Mirage's own μGraphs (programs nobody here wrote) through the code generator, run in Triton's
interpreter on fp16 inputs and compared with the float64 interpreter of the same graph.

A sample of each corpus file: up to three graphs spread evenly over the file. The graphs keep
their real shapes (up to 4096 × 6144), so a full launch costs ~10 ms a block per loop iteration in
Triton's interpreter: 3 072 block-iterations (rmsnorm_bs1[6]) took 27 s, the one graph of
single_gated_mlp has 8 192 (~100 s) and gqa_bs1's graphs 544 to 2 048 (7 to 25 s). The launches
are cut instead, the generated launcher running unchanged with its kernels' launch grids cut:

- a graph with one custom kernel launches only the first two blocks along each grid dim that an
  output concatenates (every block along a summed dim), and only the output elements those blocks
  write are compared; the others must still hold the NaN poison (a block writing outside its
  tiles is caught);
- a graph with several custom kernels (gqa_bs1: the second reads all of the first's output) is cut
  along the batch: when every kernel splits data dim 0 of all its tensors by the same grid dim,
  of the same size, only the first block along it is launched (the kernels then read and write the
  first batch slice only); otherwise it runs in full. Of those, at most two graphs of at most
  `MULTI_KERNEL_LIMIT` block-iterations (after the cut) are sampled.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from prism.frontend.mirage import import_mirage
from prism.instantiate.codegen import TritonProgram, generate
from prism.ir.graph import BlockGraph, KernelGraph, Map
from prism.ir.interpret import interpret, store_tiles
from prism.ir.ops import OPS

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning:triton.runtime.interpreter")

FILES = ["gated_mlp", "gqa_bs1", "lora", "rmsnorm_bs1", "single_gated_mlp", "single_lora"]
SCALE = {"gqa_bs1": 0.25}          # exp(Q @ K): σ 0.25 keeps the fp16 partial sums far from 65504
KEEP = 2                           # blocks launched along each concatenated grid dim
MULTI_KERNEL_LIMIT = 400           # block-iterations of a cut multi-kernel graph


def rows(m: Map) -> list[int]:
    return [next((d for d, e in enumerate(row) if e.value == 1), -1) for row in m.rows]


def cost(graph: KernelGraph) -> int:
    """Block-iterations of the launch `run_cut` makes: Σ over custom kernels of Π launched grid ×
    loop range."""
    return sum(math.prod(limits) * bg.forloop_range.value
               for (_, bg), limits in zip(graph.iter_blocks(), launch_limits(graph), strict=True))


def spread(indices: list[int], k: int = 3) -> list[int]:
    if len(indices) <= k:
        return indices
    return [indices[round(j * (len(indices) - 1) / (k - 1))] for j in range(k)]


def sample(graphs: list[KernelGraph]) -> list[int]:
    """Up to three graphs spread evenly; of graphs with several kernels, up to two of those the
    cut launch keeps under `MULTI_KERNEL_LIMIT` block-iterations (~4 s each)."""
    single = [i for i, g in enumerate(graphs) if len(g.custom_ops) == 1]
    multi = [i for i, g in enumerate(graphs)
             if len(g.custom_ops) > 1 and cost(g) <= MULTI_KERNEL_LIMIT]
    return sorted(spread(single) + spread(multi, 2))


def batch_dim(bg: BlockGraph) -> int | None:
    """The grid dim that splits data dim 0 of every input and output of `bg`, if one does."""
    for p in range(len(bg.grid)):
        maps = [op.attr["imap"] for op in bg.input_ops] + [op.attr["omap"] for op in bg.output_ops]
        if all(rows(m)[p] == 0 for m in maps):
            return p
    return None


def launch_limits(graph: KernelGraph) -> list[tuple[int, ...]]:
    """Per custom kernel, how many blocks to launch along each grid dim (see the module doc)."""
    blocks = [bg for _, bg in graph.iter_blocks()]
    grids = [tuple(d.value for d in bg.grid) for bg in blocks]
    if len(blocks) == 1:
        (bg,) = blocks
        summed = {p for op in bg.output_ops for p, d in enumerate(rows(op.attr["omap"])) if d < 0}
        return [tuple(g if p in summed else min(KEEP, g) for p, g in enumerate(grids[0]))]
    dims = [batch_dim(bg) for bg in blocks]
    sizes = {g[p] for g, p in zip(grids, dims, strict=True) if p is not None}
    if None in dims or len(sizes) != 1 or any(op.kind not in ("input", "output", "customized")
                                              for op in graph.ops):
        return grids
    return [tuple(1 if q == p else g for q, g in enumerate(grid))
            for grid, p in zip(grids, dims, strict=True)]


def written(graph: KernelGraph, limits: list[tuple[int, ...]]) -> list[np.ndarray]:
    """Which elements of each graph output the cut launch writes."""
    blocks = list(graph.iter_blocks())
    if len(blocks) > 1:
        out = []
        for t in graph.outputs:
            mask = np.zeros([d.value for d in graph.shape(t)], bool)
            cut = [g for (_, bg), lim in zip(blocks, limits, strict=True)
                   for g, n in zip([d.value for d in bg.grid], lim, strict=True) if n < g]
            mask[: mask.shape[0] // cut[0] if cut else None] = True
            out.append(mask)
        return out
    ((op, bg),) = blocks
    grid = [d.value for d in bg.grid]
    masks: dict[str, np.ndarray] = {}
    for t, bop in zip(op.outputs, bg.output_ops, strict=True):
        tile = [d.value for d in bg.shape(bop.inputs[0])]
        launched = np.zeros((*grid, *tile))
        launched[tuple(slice(0, n) for n in limits[0])] = 1.0
        masks[t] = store_tiles(launched, rows(bop.attr["omap"]), grid) > 0
    for kop in graph.ops:
        if kop.kind in ("input", "output", "customized"):
            continue
        assert OPS[kop.kind].category in ("unary", "binary", "scalar"), \
            f"{graph.name}: {kop.kind} after the custom kernel is not supported by the cut launch"
        inputs = [masks.get(t, np.ones([d.value for d in graph.shape(t)], bool))
                  for t in kop.inputs]
        masks[kop.outputs[0]] = np.logical_and.reduce(np.broadcast_arrays(*inputs))
    return [masks[t] for t in graph.outputs]


class FirstBlocks:
    """Stands in for a generated module's `@triton.jit` kernel: `kernel[grid](...)` launches the
    grid cut to `limits`."""

    def __init__(self, kernel: Any, limits: tuple[int, ...]):
        self.kernel, self.limits = kernel, limits

    def __getitem__(self, grid: tuple[int, ...]) -> Any:
        assert len(grid) == len(self.limits)
        return self.kernel[tuple(min(g, n) for g, n in zip(grid, self.limits, strict=True))]


def run_cut(kit: Any, graph: KernelGraph, program: TritonProgram, tensors: list[Any]
            ) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The outputs of the cut launch, and which of their elements it writes."""
    module = kit.load(program)
    limits = launch_limits(graph)
    for ks, lim in zip(program.kernels, limits, strict=True):
        setattr(module, ks.name, FirstBlocks(getattr(module, ks.name), lim))
    result = module.run(*tensors)
    return kit.as64(result if isinstance(result, tuple) else (result,)), written(graph, limits)


def test_corpus_files_are_the_expected_ones(corpus_dir: Path) -> None:
    assert sorted(p.stem for p in corpus_dir.glob("*.json")) == FILES


def test_every_corpus_graph_generates_a_module_that_parses(corpus_dir: Path) -> None:
    """All 84 graphs, not a sample: a CodegenError names its graph."""
    count = 0
    for stem in FILES:
        for graph in import_mirage(corpus_dir / f"{stem}.json"):
            program = generate(graph)
            compile(program.source, graph.name, "exec")
            assert len(program.kernels) == len(graph.custom_ops)
            assert program.inputs == tuple(graph.inputs)
            count += 1
    assert count == 84


@pytest.mark.parametrize("stem", FILES)
def test_corpus_graphs_generate_and_match_the_interpreter(kit: Any, corpus_dir: Path,
                                                          stem: str) -> None:
    graphs = import_mirage(corpus_dir / f"{stem}.json")
    chosen = sample(graphs)
    assert chosen, f"{stem}: no graph sampled"
    rng = np.random.default_rng(11)
    scale = SCALE.get(stem, 0.5)
    shapes = [[d.value for d in graphs[0].shape(t)] for t in graphs[0].inputs]
    tensors = kit.fp16([scale * rng.standard_normal(s) for s in shapes])
    exact = kit.as64(tensors)
    failures = []
    for i in chosen:
        graph = graphs[i]
        assert [[d.value for d in graph.shape(t)] for t in graph.inputs] == shapes
        program = generate(graph)            # a CodegenError here is a finding: it fails
        got, masks = run_cut(kit, graph, program, tensors)
        wants = interpret(graph, *exact)
        for k, (g, w, m) in enumerate(zip(got, wants, masks, strict=True)):
            assert m.any()
            assert np.isnan(g[~m]).all(), f"{graph.name}: an element outside the launched " \
                                          "blocks' tiles was written"
            try:
                kit.assert_close(g[m], w[m], what=f"{graph.name} output {k}")
            except AssertionError as e:
                failures.append(str(e).splitlines()[0])
    assert not failures, "; ".join(failures)
