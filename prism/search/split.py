"""The split move: a one-kernel program whose for-loop only sums, with the loop split across blocks.

A custom kernel whose loop walks a long dim (attention's keys) runs one block per output tile, each
walking the whole dim: few blocks, most of the device idle. Every accumulator that sums over the
loop (`nored`, `red_ld_sum`) is a sum over the walked dim, and a sum splits: blocks along a new
grid dim `s` each walk one part and store their partial sums, concatenated along the last dim, and
a second kernel sums the parts (`redtox_ld_sum` in chunks of the stored width, `red_ld_sum` for a
last dim of 1) and runs what the first kernel ran after its loop. This is split-key attention
(flash-decoding; Mirage's saved gqa μGraphs are such two kernels), found here for any program of
that form, not written per workload:

    kernel 1  grid (g…, s)   the loop body and accumulators as before; inputs the loop walks are
                             also split by s along the walked dim; each accumulator is stored with
                             s concatenated along its last dim
    kernel 2  grid (g…)      the partial sums summed, then the post-loop ops, stored as before

`split_loop` builds that program from a verified one-kernel candidate (concrete maps, symbolic
sizes), or says why it does not apply. The search (`SearchConfig.split_loops`) verifies every
program it builds as it verifies its own candidates: an accumulator the split does not preserve (a
sum over something other than the walked dim, an epilogue that is not linear in the parts) gives a
program the verifier refutes, never a claim.
"""

from __future__ import annotations

from prism.errors import PrismError
from prism.ir.dims import Dim, const, var
from prism.ir.graph import BlockGraph, KernelGraph, Map, Op
from prism.ir.infer import infer_shapes
from prism.ir.ops import OPS
from prism.ir.spec import check

# How the second kernel sums an accumulator's parts, by the accumulator's kind.
SUMS = {"nored": "redtox_ld_sum", "red_ld_sum": "red_ld_sum"}


def split_loop(graph: KernelGraph) -> tuple[KernelGraph | None, str]:
    """The split program of a one-kernel program and "", or None and why it does not apply."""
    customs = graph.custom_ops
    if len(customs) != 1 or graph.num_kernels != 1:
        return None, "not one custom kernel"
    (op,) = customs
    bg = op.block
    assert bg is not None
    if len(bg.grid) >= 3:
        return None, "three grid dims already: no dim left for the split"
    if bg.forloop_range.is_const and bg.forloop_range.value == 1:
        return None, "no loop to split"
    inputs = bg.input_ops
    if not any(bg.loop_walks(i.outputs[0]) for i in inputs):
        return None, "the loop walks no input"
    accs = bg.accumulators
    if not accs or any(a.kind not in SUMS for a in accs):
        return None, "an accumulator that is not a sum (only nored and red_ld_sum split)"
    post = bg.after_accum
    acc_out = {a.outputs[0] for a in accs}
    epilogue = [o for o in bg.ops if o.kind in OPS and OPS[o.kind].category not in ("io", "accum")
                and o.outputs[0] in post]
    if any(t not in post for o in epilogue for t in o.inputs):
        return None, "the epilogue reads a pre-loop tile"
    if len(bg.output_ops) != 1:
        return None, "more than one output"
    (out,) = bg.output_ops
    omap: Map = out.attr["omap"]
    if not omap.is_concrete or any(row[-1].value for row in omap.rows):
        return None, "the output's last dim is split by the grid"
    shapes = bg.shapes
    out_tile = shapes[out.inputs[0]]
    # each accumulator is stored through the output's omap, plus a row for s: the last dim
    parts_rows: dict[str, tuple[tuple[Dim, ...], ...]] = {}
    for a in accs:
        tile = shapes[a.outputs[0]]
        if len(tile) != len(out_tile):
            return None, "an accumulator's rank differs from the output's"
        if any(e.value and tile[d] == const(1) != out_tile[d]
               for row in omap.rows for d, e in enumerate(row)):
            return None, "the grid splits a dim an accumulator broadcasts"
        last = tuple(const(1 if d == len(tile) - 1 else 0) for d in range(len(tile)))
        parts_rows[a.outputs[0]] = (*omap.rows, last)
    widths = {shapes[a.outputs[0]][-1] for a in accs if a.kind == "nored"}
    if len(widths) > 1 or any(not w.is_const for w in widths):
        return None, "the summed parts have no one constant width"
    dimx = widths.pop().value if widths else bg.reduction_dimx
    taken = set(graph.free_vars()) | {str(g) for g in bg.grid}
    s = _fresh("s", taken)
    try:
        return _build(graph, op, s, parts_rows, epilogue, acc_out, dimx, taken), ""
    except PrismError as e:
        return None, f"the split program does not type: {e}"


def _fresh(base: str, taken: set[str]) -> str:
    name, k = base, 1
    while name in taken:
        k += 1
        name = f"{base}{k}"
    return name


def _build(graph: KernelGraph, op: Op, s: str, parts_rows: dict[str, tuple[tuple[Dim, ...], ...]],
           epilogue: list[Op], acc_out: set[str], dimx: int, taken: set[str]) -> KernelGraph:
    """Kernel 1 (the loop split by `s`, the accumulators stored as parts) and kernel 2 (the
    parts summed, the epilogue), op by op; shapes are inferred and the program checked
    against the spec (a `PrismError` where it does not type)."""
    bg = op.block
    assert bg is not None
    post = bg.after_accum
    order = [a.outputs[0] for a in bg.accumulators]
    ops1: list[Op] = []
    for o in bg.ops:
        if o.kind == "input":
            imap, fmap = o.attr["imap"], o.attr["fmap"]
            # the new grid dim splits what the loop walks (an input it does not walk gets a
            # row of zeros: every split reads all of it)
            ops1.append(Op.make("input", (), o.outputs,
                                {"imap": Map((*imap.rows, fmap.rows[0])), "fmap": fmap}))
        elif o.kind != "output" and (o.outputs[0] not in post or o.outputs[0] in acc_out):
            ops1.append(o)
    ops1 += [Op.make("output", [name], (), {"omap": Map(parts_rows[name])}) for name in order]
    k1 = BlockGraph((*bg.grid, var(s)), bg.forloop_range, tuple(ops1), (), bg.reduction_dimx)
    names = {t for t, _ in graph.tensors} | \
        {t for _, b in graph.iter_blocks() for t, _ in b.tensors}
    parts = [_fresh(f"{name}_parts", names) for name in order]
    grid2: list[Dim] = []       # kernel 2's grid: the same dims, sizes of their own
    for size in bg.grid:
        grid2.append(size if size.is_const else var(_fresh(f"{size}_2", taken)))
        taken = {*taken, str(grid2[-1])}
    ops2: list[Op] = []
    for acc, part in zip(bg.accumulators, parts, strict=True):
        name = acc.outputs[0]
        rows = parts_rows[name][:-1]
        rank = len(rows[0]) if rows else len(bg.shape(name))
        tile = f"{part}_tile"
        ops2.append(Op.make("input", (), [tile], {"imap": Map(rows),
                                                   "fmap": Map.concrete([-1], rank)}))
        kind = SUMS[acc.kind]
        ops2.append(Op.make(kind, [tile], [name], {"dimx": dimx} if kind == "redtox_ld_sum"
                            else {}))
    ops2 += epilogue
    ops2 += bg.output_ops
    k2 = BlockGraph(tuple(grid2), const(1), tuple(ops2), (), dimx)
    ops = [o for o in graph.ops if o.kind == "input"]
    ops.append(Op.make("customized", op.inputs, parts, block=k1))
    ops.append(Op.make("customized", parts, op.outputs, block=k2))
    ops += [o for o in graph.ops if o.kind == "output"]
    shapes = tuple((t, graph.shape(t)) for t in graph.inputs)
    program = infer_shapes(KernelGraph(tuple(ops), shapes, graph.name))
    check(program)
    return program
