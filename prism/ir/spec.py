"""`spec`: is a graph well-formed? Every rule is checked and every violation reported.

Checked for kernel graphs: ops in topological order, each tensor produced once, known ops at the
right level, arity and attributes, every recorded shape equal to what the op's shape rule gives,
rank 1..4 and dims ≥ 1, at least one output.

Checked for block graphs: 1..3 grid dims; one block input per custom-op input and one block output
per custom-op output; maps of the right size with 0/1 entries and at most one data dim per
parallel dim; tile shapes equal to the map formula; accumulators only on pre-loop tensors; no op
mixing pre- and post-loop operands; outputs only of post-loop tiles; the custom op's output shapes
equal to the omap formula.

Checked for a custom kernel that runs as the *tail* of the one before it (`launch="tail"`, one
launch for both: `TAIL`): the op before it is a custom kernel launched on its own; the tail's grid
is that kernel's grid without its last dim; that kernel sums no blocks into an output (a combine
launch would come between); and every tensor the tail reads from it is read under the grid rows
it was written with (concrete maps). Then block g of the tail reads only what blocks (g, ·) of the
kernel before it wrote, so the last of those to finish can run it (`prism.instantiate.codegen`).

With free variables and no assignment (a symbolic candidate: grid sizes, loop ranges, map bits)
every check above runs that needs no value: op arities and levels, shapes compared as dimension
expressions (the shape rules match dims through map bits, as the search records them), every
concrete map row and the constant 1s of a row with bits, constant dims ≥ 1. Under an
assignment (or when the graph has no free variables) every dimension is also evaluated: each
quotient must divide exactly and every size must be ≥ 1.
"""

from __future__ import annotations

from collections.abc import Mapping

from prism.errors import DimExprError, ShapeError, SpecError
from prism.ir.dims import Dim, const, evaluate, substitute
from prism.ir.graph import (
    MAX_GRID_DIMS,
    MAX_RANK,
    BlockGraph,
    KernelGraph,
    Map,
    Op,
    Shape,
    input_tile_shape,
    output_data_shape,
)
from prism.ir.ops import OPS, infer_shape

TAIL = "tail"   # `launch="tail"`: a custom kernel that runs in the launch of the one before it


def is_tail(op: Op) -> bool:
    """Whether `op` runs as the tail of the kernel before it, in that kernel's launch."""
    return op.attr.get("launch") == TAIL


def check(graph: KernelGraph, assignment: Mapping[str, int] | None = None) -> None:
    """Raise `SpecError` listing every problem, or return None if `graph` is well-formed."""
    found = problems(graph, assignment)
    if found:
        raise SpecError(found)


def problems(graph: KernelGraph, assignment: Mapping[str, int] | None = None) -> list[str]:
    env = dict(assignment) if assignment is not None else (None if graph.free_vars() else {})
    out: list[str] = []
    _check_dag(graph, "kernel graph", "kernel", out, env)
    if not graph.output_ops:
        out.append("kernel graph has no output; mark at least one tensor as output")
    for name, shape in graph.tensors:
        _check_dims(shape, f"tensor {name}", env, out)
    for i, op in enumerate(graph.ops):
        if op.kind == "customized":
            _check_custom(graph, i, env, out)
        if "launch" in op.attr:
            _check_tail(graph, i, out)
    return out


def _check_tail(graph: KernelGraph, index: int, out: list[str]) -> None:
    """The rules of a kernel that runs as the tail of the kernel before it (module doc)."""
    op = graph.ops[index]
    where = f"custom kernel {index}"
    launch = op.attr["launch"]
    if op.kind != "customized" or launch != TAIL:
        out.append(f"op {index} ({op.kind}): launch={launch!r}; the one launch attribute is "
                   f"launch={TAIL!r}, on a custom kernel")
        return
    head = graph.ops[index - 1] if index else None
    if head is None or head.kind != "customized" or "launch" in head.attr:
        out.append(f"{where} runs as a tail (launch={TAIL!r}), but the op before it is not a "
                   "custom kernel launched on its own; put the tail right after the kernel "
                   "whose launch it shares")
        return
    k1, k2 = head.block, op.block
    if not (isinstance(k1, BlockGraph) and isinstance(k2, BlockGraph)):
        return    # reported by _check_custom
    if tuple(k1.grid[:-1]) != tuple(k2.grid) or len(k1.grid) != len(k2.grid) + 1:
        out.append(f"{where} runs as the tail of custom kernel {index - 1}, so its grid must be "
                   f"that kernel's without its last dim, {_fmt(k1.grid[:-1])}, not "
                   f"{_fmt(k2.grid)}")
        return
    written = dict(zip(head.outputs, k1.output_ops, strict=False))
    for src, bop in written.items():
        omap = bop.attr.get("omap")
        if not isinstance(omap, Map) or not omap.is_concrete:
            out.append(f"{where} runs as a tail; custom kernel {index - 1} writes {src} under "
                       "a map that is not concrete (instantiate its omap first)")
            return
        if any(not size.is_const or size.value > 1
               for size, row in zip(k1.grid, omap.rows, strict=False)
               if all(e.value == 0 for e in row)):
            out.append(f"{where} runs as a tail, but custom kernel {index - 1} sums blocks into "
                       f"{src} (a grid dim its omap {omap} maps to no data dim), which a "
                       "combine launch adds between the two; a tail needs no combine")
            return
    for src, bop in zip(op.inputs, k2.input_ops, strict=False):
        if src not in written:
            continue
        imap, omap = bop.attr.get("imap"), written[src].attr["omap"]
        if not isinstance(imap, Map) or tuple(imap.rows) != tuple(omap.rows[:-1]):
            out.append(f"{where} runs as a tail and reads {src} under imap {imap}, but custom "
                       f"kernel {index - 1} writes it under omap {omap}: block g of a tail "
                       "must read what blocks (g, ·) wrote, the same rows but the last")


def _check_dag(g: KernelGraph | BlockGraph, where: str, level: str, out: list[str],
               env: dict[str, int] | None = None) -> None:
    shapes = dict(g.tensors)
    if len(shapes) != len(g.tensors):
        out.append(f"{where}: a tensor name is declared twice")
    defined: set[str] = set()
    for i, op in enumerate(g.ops):
        od = OPS.get(op.kind)
        if od is None:
            out.append(f"{where} op {i}: unknown op {op.kind!r}")
            continue
        if level not in od.levels:
            out.append(f"{where} op {i}: {op.kind} is not a {level}-level op")
        for t in op.inputs:
            if t not in defined:
                out.append(f"{where} op {i} ({op.kind}) reads {t!r} before it is produced; "
                           "ops must be in topological order")
        for t in op.outputs:
            if t in defined:
                out.append(f"{where} op {i} ({op.kind}) produces {t!r}, already produced")
            if t not in shapes:
                out.append(f"{where} op {i} ({op.kind}) produces {t!r}, which has no shape")
            defined.add(t)
        if od.arity >= 0 and len(op.inputs) != od.arity:
            out.append(f"{where} op {i}: {op.kind} takes {od.arity} input(s), has {len(op.inputs)}")
            continue
        expected_outputs = 0 if op.kind == "output" else None if op.kind == "customized" else 1
        if expected_outputs is not None and len(op.outputs) != expected_outputs:
            out.append(f"{where} op {i}: {op.kind} has {len(op.outputs)} outputs, "
                       f"expected {expected_outputs}")
            continue
        if od.shape is not None and all(t in shapes for t in (*op.inputs, *op.outputs)):
            try:
                want = infer_shape(op.kind, [shapes[t] for t in op.inputs], op.attr)
            except ShapeError as e:
                out.append(f"{where} op {i} ({op.kind}): {e}")
                continue
            got = shapes[op.outputs[0]]
            if env is not None and not _concrete_rule_holds(op, shapes, env, where, i, out):
                continue
            if not _same_shape(want, got, env):
                out.append(f"{where} op {i} ({op.kind}): {op.outputs[0]} has shape "
                           f"{_fmt(got)}, the shape rule gives {_fmt(want)}")


def _concrete_rule_holds(op: Op, shapes: dict[str, Shape], env: dict[str, int], where: str,
                         i: int, out: list[str]) -> bool:
    """Re-run the shape rule on evaluated operand shapes: symbolic matching allows dims that may
    be equal; under an assignment they must be."""
    try:
        concrete = [tuple(const(evaluate(d, env)) for d in shapes[t]) for t in op.inputs]
        infer_shape(op.kind, concrete, op.attr)
    except DimExprError:
        return False  # reported by the dims check
    except ShapeError as e:
        out.append(f"{where} op {i} ({op.kind}) under this assignment: {e}")
        return False
    return True


def _check_custom(graph: KernelGraph, index: int, env: dict[str, int] | None,
                  out: list[str]) -> None:
    op = graph.ops[index]
    where = f"custom kernel {index}"
    bg = op.block
    if not isinstance(bg, BlockGraph):
        out.append(f"{where} has no block graph")
        return
    if not 1 <= len(bg.grid) <= MAX_GRID_DIMS:
        out.append(f"{where}: grid has {len(bg.grid)} dims; use 1 to {MAX_GRID_DIMS}")
    _check_dag(bg, where, "block", out, env)
    shapes = graph.shapes
    ins, outs = bg.input_ops, bg.output_ops
    if len(ins) != len(op.inputs):
        out.append(f"{where}: {len(ins)} block inputs for {len(op.inputs)} kernel inputs; "
                   "block input i reads custom-op input i")
    if len(outs) != len(op.outputs):
        out.append(f"{where}: {len(outs)} block outputs for {len(op.outputs)} kernel outputs")
    post = bg.after_accum
    for src, bop in zip(op.inputs, ins, strict=False):
        imap, fmap = bop.attr.get("imap"), bop.attr.get("fmap")
        tile = bop.outputs[0] if bop.outputs else "?"
        if not (isinstance(imap, Map) and isinstance(fmap, Map)):
            out.append(f"{where} input {tile}: needs an imap and an fmap")
            continue
        data = shapes.get(src)
        if data is None:
            continue
        _check_map(imap, len(bg.grid), len(data), f"{where} input {tile} imap", env, out)
        _check_map(fmap, 1, len(data), f"{where} input {tile} fmap", env, out)
        if imap.num_rows == len(bg.grid) and imap.rank == fmap.rank == len(data) and tile in \
                bg.shapes:
            want = input_tile_shape(data, imap, fmap, bg.grid, bg.forloop_range)
            if not _same_shape(want, bg.shapes[tile], env):
                out.append(f"{where} input {tile}: tile shape {_fmt(bg.shapes[tile])} but "
                           f"{src}{_fmt(data)} under imap {imap}, fmap {fmap} gives {_fmt(want)}")
    for i, bop in enumerate(bg.ops):
        if bop.kind in ("input", "output"):
            continue
        status = {t in post for t in bop.inputs}
        od = OPS.get(bop.kind)
        if od is None:
            continue  # reported by _check_dag
        if od.category == "accum":
            if True in status:
                out.append(f"{where} op {i} ({bop.kind}) accumulates {bop.inputs[0]}, which is "
                           "already after the loop; accumulators close the loop body only once")
            if bop.kind == "redtox_ld_sum":
                _check_redtox(bg, i, where, env, out)
        elif len(status) > 1:
            # after the loop, a pre-loop operand is read as it is: it must be the same tile in
            # every iteration (computed from tiles the loop does not walk)
            for t in bop.inputs:
                walked = [] if t in post else [tile for tile in sorted(bg.loads(t))
                                               if bg.loop_walks(tile, env)]
                if walked:
                    out.append(f"{where} op {i} ({bop.kind}) reads {t} after the loop, but "
                               f"the loop walks {walked[0]}; after the loop use only "
                               "accumulated tiles and tiles the loop does not walk (fmap none)")
                    break
    for src, bop in zip(op.outputs, outs, strict=False):
        if not bop.inputs:
            continue
        tile = bop.inputs[0]
        if tile not in post:
            out.append(f"{where}: output of {tile} is inside the loop body; "
                       "store only tiles after an accumulator")
        omap = bop.attr.get("omap")
        if not isinstance(omap, Map):
            out.append(f"{where} output {tile}: needs an omap")
            continue
        _check_map(omap, len(bg.grid), len(bg.shapes.get(tile, ())), f"{where} output {tile} omap",
                   env, out)
        if omap.num_rows == len(bg.grid) and tile in bg.shapes and src in shapes and \
                omap.rank == len(bg.shapes[tile]):
            want = output_data_shape(bg.shapes[tile], omap, bg.grid)
            if not _same_shape(want, shapes[src], env):
                out.append(f"{where} output {src}: shape {_fmt(shapes[src])} but tile "
                           f"{tile}{_fmt(bg.shapes[tile])} under omap {omap} gives {_fmt(want)}")
    for size in (*bg.grid, bg.forloop_range):
        _check_dims((size,), f"{where} grid/loop size", env, out)
    for name, shape in bg.tensors:
        _check_dims(shape, f"{where} tile {name}", env, out)


def _check_redtox(bg: BlockGraph, i: int, where: str, env: dict[str, int] | None,
                  out: list[str]) -> None:
    op = bg.ops[i]
    dimx = op.attr.get("dimx")
    if dimx != bg.reduction_dimx:
        out.append(f"{where} op {i}: redtox_ld_sum dimx {dimx} differs from the block's "
                   f"reduction_dimx {bg.reduction_dimx}")
        return
    last = bg.shapes.get(op.inputs[0], ())[-1:]
    if env is not None and last and isinstance(dimx, int) and dimx > 0:
        try:
            width = evaluate(last[0], env)
        except DimExprError:
            return  # reported with the tile's own dims
        if width % dimx:
            out.append(f"{where} op {i}: redtox_ld_sum folds a last dim of {width} into chunks "
                       f"of {dimx}, which do not divide it; choose a reduction_dimx dividing it")


def _check_map(m: Map, rows: int, rank: int, where: str, env: dict[str, int] | None,
               out: list[str]) -> None:
    if m.num_rows != rows or any(len(r) != rank for r in m.rows):
        out.append(f"{where}: has {m.num_rows} row(s) × {m.rank} col(s), expected {rows} × {rank}")
        return
    for row in m.rows:
        for e in row:
            if not (e in (const(0), const(1)) or _is_bit(e)):
                out.append(f"{where}: entry {e} is neither 0, 1 nor a 0/1 map variable")
                return
    for p, row in enumerate(m.rows):
        if env is None and not all(e.is_const for e in row):
            # A row with bits: whatever they are, its constant 1s split that many data dims.
            ones = len([e for e in row if e == const(1)])
            if ones > 1:
                out.append(f"{where}: parallel dim {p} splits {ones} data dims whatever its map "
                           "bits; a parallel dim splits at most one data dim of a tensor")
            continue
        try:
            values = [e.value if e.is_const else evaluate(e, env) for e in row]
        except DimExprError as err:
            out.append(f"{where}: {err}")
            return
        if any(v not in (0, 1) for v in values):
            out.append(f"{where}: parallel dim {p} has entries {values}; each must be 0 or 1")
        elif sum(values) > 1:
            out.append(f"{where}: parallel dim {p} splits {sum(values)} data dims; "
                       "a parallel dim splits at most one data dim of a tensor")


def _is_bit(e: Dim) -> bool:
    return len(e.terms) == 1 and e.terms[0][1] == 1 and len(e.terms[0][0]) == 1 and \
        e.terms[0][0][0][0].is_bit


def _check_dims(shape: Shape, what: str, env: dict[str, int] | None, out: list[str]) -> None:
    if len(shape) > MAX_RANK or not shape:
        out.append(f"{what} has rank {len(shape)}; tensors have rank 1 to {MAX_RANK}")
    for d in shape:
        if env is None:
            if d.is_const and d.value < 1:
                out.append(f"{what} has dimension {d.value}; every dimension must be ≥ 1")
            continue
        try:
            v = evaluate(d, env)
        except DimExprError as err:
            out.append(f"{what}: {err}")
            continue
        if v < 1:
            out.append(f"{what} has dimension {d} = {v}; every dimension must be ≥ 1")


def _same_shape(a: Shape, b: Shape, env: dict[str, int] | None = None) -> bool:
    if len(a) != len(b):
        return False
    if all(x == y for x, y in zip(a, b, strict=True)):
        return True
    if env is None:
        return False
    try:
        return all(evaluate(x, env) == evaluate(y, env) for x, y in zip(a, b, strict=True))
    except DimExprError:
        return False


def _fmt(shape: Shape) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def substitute_graph(graph: KernelGraph, assignment: Mapping[str, int]) -> KernelGraph:
    """The graph with every variable replaced by its value (a concrete μGraph of the family)."""
    from dataclasses import replace

    def sub_shape(s: Shape) -> Shape:
        return tuple(substitute(d, assignment) for d in s)

    def sub_map(m: Map) -> Map:
        return Map(tuple(sub_shape(r) for r in m.rows))

    ops = []
    for op in graph.ops:
        if op.block is not None:
            bg = op.block
            bops = tuple(replace(b, attrs=tuple((k, sub_map(v) if isinstance(v, Map) else v)
                                                for k, v in b.attrs)) for b in bg.ops)
            op = replace(op, block=replace(
                bg, grid=sub_shape(bg.grid), forloop_range=substitute(bg.forloop_range, assignment),
                ops=bops, tensors=tuple((n, sub_shape(s)) for n, s in bg.tensors)))
        ops.append(op)
    tensors = tuple((n, sub_shape(s)) for n, s in graph.tensors)
    return replace(graph, ops=tuple(ops), tensors=tensors)
