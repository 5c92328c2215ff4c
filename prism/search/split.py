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

`one_launch` makes any such two-kernel program one launch: kernel 2 takes kernel 1's grid without
`s`, and runs as kernel 1's *tail* (`launch="tail"`): the last block of each group (g…) to finish
its part runs kernel 2's block g (a counter per group; `prism.instantiate.codegen`). It computes
what the two launches compute, so it is verified as they are; it saves a launch and keeps the
parts in flight for one more sync.

`split_loop` builds that program from a verified one-kernel candidate (concrete maps, symbolic
sizes), or says why it does not apply. The search (`SearchConfig.split_loops`) verifies every
program it builds as it verifies its own candidates: an accumulator the split does not preserve (a
sum over something other than the walked dim, an epilogue that is not linear in the parts) gives a
program the verifier refutes, never a claim.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from prism.errors import PrismError
from prism.ir.dims import Dim, const, var
from prism.ir.graph import BlockGraph, KernelGraph, Map, Op
from prism.ir.infer import infer_shapes
from prism.ir.ops import OPS
from prism.ir.spec import TAIL, check

# How the second kernel sums an accumulator's parts, by the accumulator's kind.
SUMS = {"nored": "redtox_ld_sum", "red_ld_sum": "red_ld_sum"}


def split_loop(graph: KernelGraph) -> tuple[KernelGraph | None, str]:
    """The split program of a one-kernel program and "", or None and why it does not apply."""
    op = _one_custom(graph)
    if op is None:
        return None, "not one custom kernel"
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


def one_launch(program: KernelGraph) -> tuple[KernelGraph | None, str]:
    """A split program (two custom kernels, kernel 2's grid kernel 1's without its split dim
    `s`, sizes of its own) as one launch and "", or None and why it does not apply: kernel 2
    takes kernel 1's grid sizes and runs as its tail (`launch="tail"`, checked by
    `prism.ir.spec`)."""
    at = [i for i, o in enumerate(program.ops) if o.kind != "input"][:2]
    if len(at) < 2 or any(program.ops[i].kind != "customized" for i in at) \
            or at[1] != at[0] + 1 or len(program.custom_ops) != 2:
        return None, "not two custom kernels, back to back"
    head, tail = program.ops[at[0]], program.ops[at[1]]
    assert head.block is not None and tail.block is not None
    if "launch" in head.attr or "launch" in tail.attr:
        return None, "already one launch"
    grid = head.block.grid[:-1]
    if len(tail.block.grid) != len(grid):
        return None, "kernel 2's grid is not kernel 1's without its last dim"
    block = replace(tail.block, grid=tuple(grid), tensors=())
    ops = list(program.ops)
    ops[at[1]] = Op.make("customized", tail.inputs, tail.outputs, {**tail.attr, "launch": TAIL},
                         block=block)
    try:
        merged = infer_shapes(replace(program, ops=tuple(ops)))
        check(merged)
    except PrismError as e:
        return None, f"the one-launch program does not check: {e}"
    return merged, ""


def _one_custom(graph: KernelGraph) -> Op | None:
    """The program's custom op when it is one custom kernel and nothing else, else None."""
    customs = graph.custom_ops
    return customs[0] if len(customs) == 1 and graph.num_kernels == 1 else None


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


# -- the log-sum-exp split: a row max over the keys, held whole in one block, split across blocks

_SUM_REDUCE = frozenset({"sum"})


class _Axes:
    """Which tile dims of a block graph are one data axis: union-find over classes, one class per
    input tile dim at the start, joined where an op lines two dims up (an elementwise op's
    operands, a matmul's contracted dims)."""

    def __init__(self) -> None:
        self.parent: dict[int, int] = {}

    def fresh(self) -> int:
        k = len(self.parent)
        self.parent[k] = k
        return k

    def find(self, k: int) -> int:
        while self.parent[k] != k:
            self.parent[k] = self.parent[self.parent[k]]
            k = self.parent[k]
        return k

    def union(self, a: int, b: int) -> None:
        self.parent[self.find(a)] = self.find(b)


Classes = dict[str, list[int | None]]


def _axis_classes(bg: BlockGraph) -> tuple[_Axes, Classes, list[tuple[Op, int, int]]]:
    """Each tile's dims as axis classes (None: a dim of size 1 that carries no axis), and the
    contractions (matmul, contracted class) and reductions (op, reduced class) in op order."""
    axes = _Axes()
    of: dict[str, list[int | None]] = {}
    reduced: list[tuple[Op, int, int]] = []
    one = const(1)
    shapes = bg.shapes
    for o in bg.ops:
        if o.kind == "output":
            continue
        out = o.outputs[0]
        if o.kind == "input":
            of[out] = [axes.fresh() for _ in shapes[out]]
            continue
        xs = [of[t] for t in o.inputs]
        cat = OPS[o.kind].category
        if cat == "matmul":
            a, b = xs
            row: list[int | None] = []
            for i in range(len(a) - 2):
                row.append(_join(axes, a[i], b[i]))
            row += [a[-2], b[-1]]
            if a[-1] is not None and b[-2] is not None:
                axes.union(a[-1], b[-2])
                reduced.append((o, -1, a[-1]))
            of[out] = row
        elif cat == "binary":
            of[out] = [_join(axes, x, y) for x, y in zip(*xs, strict=True)]
        elif cat == "reduce" or (cat == "accum" and o.kind != "nored"):
            d = int(o.attr.get("dim", len(xs[0]) - 1))
            c = xs[0][d]
            if c is not None:
                reduced.append((o, d, c))
            of[out] = [None if i == d else c for i, c in enumerate(xs[0])]
        else:
            c = xs[0][-1] if cat == "norm" else None
            if c is not None:       # a norm reduces over its last dim and keeps it
                reduced.append((o, len(xs[0]) - 1, c))
            of[out] = list(xs[0])
        of[out] = [None if shapes[out][i] == one else c for i, c in enumerate(of[out])]
    return axes, of, reduced


def _join(axes: _Axes, x: int | None, y: int | None) -> int | None:
    if x is None or y is None:
        return y if x is None else x
    axes.union(x, y)
    return x


@dataclass(frozen=True)
class _Softmax:
    """What `split_softmax` and `stream_softmax` read off a one-kernel program: its custom op,
    its block without accumulators (`_without_accumulators`), the row max, the sums over the
    keys it shifts (in op order), the epilogue computed from them, and each input's key dim."""

    op: Op
    flat: BlockGraph
    mx: str
    sums: tuple[str, ...]
    epilogue: tuple[Op, ...]
    keys: dict[str, int]


def _softmax(graph: KernelGraph) -> tuple[_Softmax | None, str]:
    """The program's safe-softmax structure, or None and why it has none.

    Its one block holds a whole row of keys (no loop, so its accumulators close nothing and are
    read as the tiles they hold) and takes one row max over them; the sums it takes over the
    keys (`sum`, a matmul contracting them) are of terms the max shifts, and what it computes
    from those sums (the epilogue) reads nothing else."""
    op = _one_custom(graph)
    if op is None:
        return None, "not one custom kernel"
    bg = op.block
    assert bg is not None
    if not (bg.forloop_range.is_const and bg.forloop_range.value == 1):
        return None, "the block loops: a row max is taken over the whole row in one block"
    if any(a.kind not in ("nored", "red_ld_sum") for a in bg.accumulators):
        return None, "an accumulator that is not a sum"
    flat = _without_accumulators(bg)
    axes, of, reduced = _axis_classes(flat)
    maxes = [(o, c) for o, _, c in reduced if o.kind == "max"]
    if len(maxes) != 1:
        return None, "not one row max over a dim the block holds"
    mx, key = maxes[0][0], axes.find(maxes[0][1])
    sums: list[Op] = []
    for o, _, c in reduced:
        if axes.find(c) != key or o is mx:
            continue
        if o.kind not in _SUM_REDUCE and OPS[o.kind].category != "matmul":
            return None, f"{o.kind} over the keys is not a sum"
        sums.append(o)
    if not sums:
        return None, "no sum over the keys"
    keyed = {t for t, cs in of.items() if any(c is not None and axes.find(c) == key for c in cs)}
    after: set[str] = set()
    for o in sums:
        after |= _depends_on(flat, o.outputs[0]) - {o.outputs[0]}
    if after & keyed:
        return None, ("a sum over the keys is read back over the keys (normalised before the "
                      "last sum): the parts would need weights of their own")
    if any(o.outputs[0] in after and o.outputs[0] not in keyed and o.kind in OPS
           and OPS[o.kind].category == "reduce" for o in flat.ops if o.outputs):
        return None, "the epilogue reduces"
    stored = [o.outputs[0] for o in sums]
    epilogue = [o for o in flat.ops if o.outputs and o.outputs[0] in after]
    if any(t not in after and t not in stored for o in epilogue for t in o.inputs):
        return None, "the epilogue reads a tile other than the sums"
    deps = _depends_on(flat, mx.outputs[0])
    if any(t not in deps for t in stored):
        return None, "a sum the max does not shift"
    keys: dict[str, int] = {}
    for i in flat.input_ops:
        dims = [d for d, c in enumerate(of[i.outputs[0]]) if c is not None and axes.find(c) == key]
        if len(dims) > 1:
            return None, "an input holds the keys along two dims"
        if dims:
            keys[i.outputs[0]] = dims[0]
    if len(flat.output_ops) != 1:
        return None, "more than one output"
    (out,) = flat.output_ops
    if out.inputs[0] not in after and out.inputs[0] not in stored:
        return None, "the output is not computed from the sums"
    return _Softmax(op, flat, mx.outputs[0], tuple(stored), tuple(epilogue), keys), ""


def split_softmax(graph: KernelGraph) -> tuple[KernelGraph | None, str]:
    """The log-sum-exp split of a one-kernel program (of `_softmax`'s form) and "", or None
    and why it does not apply.

    Kernel 1 adds a grid dim `s` that splits the keys: each block takes the max `m` of its part
    and the sums under it, and stores both, `s` concatenated along the last dim. Kernel 2 walks
    the `s` parts in its loop: the true max `M` is the max of the stored maxes, each part's sums
    are rescaled by exp(m − M) and summed, and the epilogue runs on the sums. Whether the
    rescaled sums are the program's is the verifier's to show (a sum the max does not shift is
    refuted, never claimed)."""
    plan, why = _softmax(graph)
    if plan is None:
        return None, why
    bg = plan.op.block
    assert bg is not None
    if len(bg.grid) >= 3:
        return None, "three grid dims already: no dim left for the split"
    flat = plan.flat
    (out,) = flat.output_ops
    omap: Map = out.attr["omap"]
    if not omap.is_concrete or any(row[-1].value for row in omap.rows):
        return None, "the output's last dim is split by the grid"
    shapes = flat.shapes
    out_tile = shapes[out.inputs[0]]
    for name in (plan.mx, *plan.sums):
        tile = shapes[name]
        if len(tile) != len(out_tile):
            return None, "a stored part's rank differs from the output's"
        if any(e.value and tile[d] == const(1) != out_tile[d]
               for row in omap.rows for d, e in enumerate(row)):
            return None, "the grid splits a dim a stored part broadcasts"
    taken = set(graph.free_vars()) | {str(g) for g in bg.grid}
    s = _fresh("s", taken)
    try:
        return _build_softmax(graph, plan.op, flat, s, plan.keys, [plan.mx, *plan.sums],
                              list(plan.epilogue), taken), ""
    except PrismError as e:
        return None, f"the split program does not type: {e}"


def stream_softmax(graph: KernelGraph) -> tuple[KernelGraph | None, str]:
    """The streamed form of a one-kernel program (of `_softmax`'s form) and "", or None and why
    it does not apply: FlashAttention in one kernel. The block keeps its grid and walks the keys
    in a loop of `t` iterations; each iteration takes the row max of its part and the sums under
    it, and each sum is a `nored_rescale` accumulator kept under the running max (the online-
    softmax recurrence); the epilogue runs on the accumulated sums after the loop. One kernel,
    no part ever stored; its proof holds for every loop range."""
    plan, why = _softmax(graph)
    if plan is None:
        return None, why
    flat = plan.flat
    if any(not o.attr["imap"].is_concrete for o in flat.input_ops):
        return None, "an input's imap is symbolic"
    taken = set(graph.free_vars()) | {str(g) for g in flat.grid}
    t_var = _fresh("t", taken)
    names = {t for t, _ in graph.tensors} | {t for t, _ in flat.tensors}
    renamed: dict[str, str] = {}
    ops: list[Op] = []
    late = {o.outputs[0] for o in plan.epilogue}
    for o in flat.ops:
        if o.kind == "input":
            d = plan.keys.get(o.outputs[0], -1)
            fmap = Map.concrete([d], o.attr["imap"].rank)
            ops.append(Op.make("input", (), o.outputs, {"imap": o.attr["imap"], "fmap": fmap}))
        elif o.kind != "output" and o.outputs[0] not in late:
            ops.append(o)
    for name in plan.sums:
        acc = _fresh(f"{name}_acc", names)
        names.add(acc)
        renamed[name] = acc
        ops.append(Op.make("nored_rescale", [name, plan.mx], [acc]))
    for o in (*plan.epilogue, *flat.output_ops):
        ops.append(replace(o, inputs=tuple(renamed.get(t, t) for t in o.inputs)))
    block = BlockGraph(flat.grid, var(t_var), tuple(ops), (), flat.reduction_dimx)
    kernel = [o if o is not plan.op else replace(o, block=block) for o in graph.ops]
    try:
        program = infer_shapes(KernelGraph(tuple(kernel), tuple(
            (t, graph.shape(t)) for t in graph.inputs), graph.name))
        check(program)
    except PrismError as e:
        return None, f"the streamed program does not type: {e}"
    return program, ""


def _without_accumulators(bg: BlockGraph) -> BlockGraph:
    """A loop-free block with its accumulators read as what they are: `nored` as the tile it
    holds (its readers read the tile), `red_ld_sum` as a sum over the last dim."""
    alias: dict[str, str] = {}
    ops: list[Op] = []
    for o in bg.ops:
        o = replace(o, inputs=tuple(alias.get(t, t) for t in o.inputs))
        if o.kind == "nored":
            alias[o.outputs[0]] = o.inputs[0]
        elif o.kind == "red_ld_sum":
            ops.append(Op.make("sum", o.inputs, o.outputs,
                               {"dim": len(bg.shape(o.inputs[0])) - 1}))
        else:
            ops.append(o)
    tensors = tuple((t, sh) for t, sh in bg.tensors if t not in alias)
    return BlockGraph(bg.grid, bg.forloop_range, tuple(ops), tensors, bg.reduction_dimx)


def _depends_on(bg: BlockGraph, name: str) -> set[str]:
    """The tiles computed from `name` (itself included)."""
    found = {name}
    for o in bg.ops:
        if o.outputs and any(t in found for t in o.inputs):
            found.add(o.outputs[0])
    return found


def _build_softmax(graph: KernelGraph, op: Op, flat: BlockGraph, s: str,
                   splits: dict[str, int], stored: list[str], epilogue: list[Op],
                   taken: set[str]) -> KernelGraph:
    """Kernel 1 (the keys split by `s`; the max and the sums stored per part) and kernel 2 (the
    parts walked by its loop, rescaled to the max of the maxes and summed; the epilogue)."""
    names = {t for t, _ in graph.tensors} | \
        {t for _, b in graph.iter_blocks() for t, _ in b.tensors}
    (out,) = flat.output_ops
    omap: Map = out.attr["omap"]
    rank = len(flat.shape(out.inputs[0]))
    last_row = tuple(const(1 if d == rank - 1 else 0) for d in range(rank))
    late = {o.outputs[0] for o in epilogue}
    ops1: list[Op] = []
    for o in flat.ops:
        if o.kind == "input":
            imap, fmap = o.attr["imap"], o.attr["fmap"]
            d = splits.get(o.outputs[0], -1)
            srow = tuple(const(1 if j == d else 0) for j in range(imap.rank))
            ops1.append(Op.make("input", (), o.outputs, {"imap": Map((*imap.rows, srow)),
                                                         "fmap": fmap}))
        elif o.kind != "output" and o.outputs[0] not in late:
            ops1.append(o)
    kept = []
    for name in stored:
        acc = _fresh(f"{name}_part", names)
        names.add(acc)
        kept.append(acc)
        ops1.append(Op.make("nored", [name], [acc]))
    ops1 += [Op.make("output", [name], (), {"omap": Map((*omap.rows, last_row))})
             for name in kept]
    k1 = BlockGraph((*flat.grid, var(s)), flat.forloop_range, tuple(ops1), (),
                    flat.reduction_dimx)
    parts = [_fresh(f"{name}s", names) for name in kept]
    grid2: list[Dim] = []
    for size in flat.grid:
        grid2.append(size if size.is_const else var(_fresh(f"{size}_2", taken)))
        taken = {*taken, str(grid2[-1])}
    rows = omap.rows
    whole, walk = Map.concrete([-1], rank), Map.concrete([rank - 1], rank)
    local = {t for t, _ in flat.tensors} | set(parts)

    def fresh(base: str) -> str:
        name = _fresh(base, local)
        local.add(name)
        return name

    m_all, m_part = fresh("m_all"), fresh("m_part")
    big_m, shift, scale = fresh("m_max"), fresh("m_shift"), fresh("rescale")
    ops2: list[Op] = [
        Op.make("input", (), [m_all], {"imap": Map(rows), "fmap": whole}),
        Op.make("max", [m_all], [big_m], {"dim": rank - 1}),
        Op.make("input", (), [m_part], {"imap": Map(rows), "fmap": walk}),
        Op.make("sub", [m_part, big_m], [shift]),
        Op.make("exp", [shift], [scale]),
    ]
    for name in stored[1:]:
        chunk, scaled = fresh(f"{name}_chunk"), fresh(f"{name}_rescaled")
        ops2 += [Op.make("input", (), [chunk], {"imap": Map(rows), "fmap": walk}),
                 Op.make("mul", [scale, chunk], [scaled]),
                 Op.make("nored", [scaled], [name])]
    ops2 += epilogue
    ops2 += flat.output_ops
    k2 = BlockGraph(tuple(grid2), var(s), tuple(ops2), (), flat.reduction_dimx)
    ops = [o for o in graph.ops if o.kind == "input"]
    ops.append(Op.make("customized", op.inputs, parts, block=k1))
    ops.append(Op.make("customized", [parts[0], parts[0], *parts[1:]], op.outputs, block=k2))
    ops += [o for o in graph.ops if o.kind == "output"]
    shapes = tuple((t, graph.shape(t)) for t in graph.inputs)
    program = infer_shapes(KernelGraph(tuple(ops), shapes, graph.name))
    check(program)
    return program
