"""Shape inference: every tensor's shape recomputed from the inputs, the maps and the op table.

Graphs record their shapes; after an edit (a mutant for the verifier's soundness tests, a search
step) `infer_shapes` derives them again, or raises `ShapeError` naming the op that no longer fits.
"""

from __future__ import annotations

from dataclasses import replace

from prism.errors import ShapeError
from prism.ir.graph import BlockGraph, KernelGraph, Map, Shape, input_tile_shape, output_data_shape
from prism.ir.ops import infer_shape


def infer_shapes(graph: KernelGraph) -> KernelGraph:
    shapes: dict[str, Shape] = {t: graph.shape(t) for t in graph.inputs}
    ops = []
    for op in graph.ops:
        if op.kind in ("input", "output"):
            ops.append(op)
            continue
        if op.kind == "customized":
            if op.block is None:
                raise ShapeError("a custom kernel has no block graph")
            block, outs = _infer_block(op.block, [shapes[t] for t in op.inputs])
            if len(outs) != len(op.outputs):
                raise ShapeError("a custom kernel's block outputs do not match its outputs")
            shapes.update(zip(op.outputs, outs, strict=True))
            ops.append(replace(op, block=block))
            continue
        shapes[op.outputs[0]] = infer_shape(op.kind, [shapes[t] for t in op.inputs], op.attr)
        ops.append(op)
    return replace(graph, ops=tuple(ops), tensors=tuple(shapes.items()))


def _infer_block(bg: BlockGraph, sources: list[Shape]) -> tuple[BlockGraph, list[Shape]]:
    shapes: dict[str, Shape] = {}
    data = iter(sources)
    outputs: list[Shape] = []
    for op in bg.ops:
        if op.kind == "input":
            imap, fmap = op.attr["imap"], op.attr["fmap"]
            source = next(data)
            _fit(imap, len(bg.grid), len(source))
            _fit(fmap, 1, len(source))
            shapes[op.outputs[0]] = input_tile_shape(source, imap, fmap, bg.grid,
                                                     bg.forloop_range)
        elif op.kind == "output":
            omap = op.attr["omap"]
            tile = shapes[op.inputs[0]]
            _fit(omap, len(bg.grid), len(tile))
            outputs.append(output_data_shape(tile, omap, bg.grid))
        else:
            shapes[op.outputs[0]] = infer_shape(op.kind, [shapes[t] for t in op.inputs],
                                                op.attr)
    return replace(bg, tensors=tuple(shapes.items())), outputs


def _fit(m: Map, rows: int, rank: int) -> None:
    if m.num_rows != rows or m.rank != rank:
        raise ShapeError(f"map {m} is {m.num_rows}×{m.rank}, the tensor needs {rows}×{rank}")
