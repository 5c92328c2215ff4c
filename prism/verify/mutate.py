"""Mutants: small wrong edits of a correct graph, for the verifier's soundness tests.

Each mutant is one edit — swapped operands of a non-commutative op (div, pow, matmul where the
shapes allow), a wrong imap / fmap / omap entry, a wrong accumulator kind, a swapped unary op, a
dropped op, an extra op, a custom kernel reading two kernel tensors of one shape in each other's
place — with shapes re-derived (`infer_shapes`); an edit whose shapes no longer
fit is not a mutant (it could never be built), and is skipped. The verifier must never call a
mutant `equivalent` unless random testing agrees that it computes the same function (an edit
that happens to change nothing, such as a split over a size-1 grid dim).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

from prism.errors import PrismError
from prism.ir.graph import BlockGraph, KernelGraph, Map, Op
from prism.ir.infer import infer_shapes
from prism.ir.ops import OPS
from prism.ir.spec import problems

UNARY_SWAPS = {"exp": "silu", "silu": "exp", "relu": "exp", "gelu": "silu", "sqrt": "square",
               "square": "sqrt", "rms_norm": "exp"}
ACCUM_SWAPS = {"nored": "red_ld_sum", "red_ld_sum": "nored", "red_ld_mean": "red_ld_sum",
               "red_ld_rms": "red_ld_mean", "redtox_ld_sum": "nored"}
NON_COMMUTATIVE = ("div", "pow", "matmul")


@dataclass(frozen=True)
class Mutant:
    kind: str
    description: str
    graph: KernelGraph


Edit = Callable[[Op], Op | None]


def mutants(graph: KernelGraph) -> Iterator[Mutant]:
    """Every well-formed one-edit mutant of `graph`, in a deterministic order."""
    for kind, description, edited in _edits(graph):
        try:
            mutant = infer_shapes(edited)
        except (PrismError, KeyError, StopIteration):
            continue
        if not problems(mutant):
            yield Mutant(kind, description, mutant)


def _edits(g: KernelGraph) -> Iterator[tuple[str, str, KernelGraph]]:
    for i, op in enumerate(g.ops):
        def put_kernel(new: Op | None, i: int = i) -> KernelGraph:
            return _set_kernel_op(g, i, new)
        yield from _op_edits(op, put_kernel, f"kernel op {i}")
        yield from _kernel_input_edits(g, op, put_kernel, f"kernel op {i}")
        if op.block is None:
            continue
        bg = op.block
        for j, bop in enumerate(bg.ops):
            def put(new: Op | None, i: int = i, j: int = j, bg: BlockGraph = bg) -> KernelGraph:
                return _set_kernel_op(g, i, replace(g.ops[i], block=_set_block_op(bg, j, new)))
            yield from _op_edits(bop, put, f"block op {j} of custom kernel {i}")
            yield from _map_edits(bop, put, f"block op {j} of custom kernel {i}", bg)


def _op_edits(op: Op, put: Callable[[Op | None], KernelGraph], where: str
              ) -> Iterator[tuple[str, str, KernelGraph]]:
    if op.kind in NON_COMMUTATIVE and op.inputs[0] != op.inputs[1]:
        yield ("swap-operands", f"{where}: {op.kind} operands swapped",
               put(replace(op, inputs=op.inputs[::-1])))
    if op.kind in UNARY_SWAPS:
        new = UNARY_SWAPS[op.kind]
        attrs = {} if OPS[new].category == "unary" else op.attr
        yield ("swap-unary", f"{where}: {op.kind} → {new}",
               put(Op.make(new, op.inputs, op.outputs, attrs)))
    if op.kind in ACCUM_SWAPS:
        new = ACCUM_SWAPS[op.kind]
        attrs = {"dimx": op.attr.get("dimx", 64)} if new == "redtox_ld_sum" else {}
        yield ("wrong-accumulator", f"{where}: accumulator {op.kind} → {new}",
               put(Op.make(new, op.inputs, op.outputs, attrs)))
    if OPS[op.kind].category in ("unary", "norm", "scalar") and op.inputs:
        yield ("drop-op", f"{where}: {op.kind} dropped", _drop(op, put))
    if OPS[op.kind].category not in ("io", "custom"):
        extra = Op.make("exp", op.outputs, (f"{op.outputs[0]}_extra",))
        yield ("extra-op", f"{where}: exp added after {op.kind}", _extra(op, extra, put))


def _kernel_input_edits(g: KernelGraph, op: Op, put: Callable[[Op | None], KernelGraph],
                        where: str) -> Iterator[tuple[str, str, KernelGraph]]:
    """A custom kernel reading two of its kernel tensors in each other's place (two of an
    earlier kernel's partial results of one shape, say): the edit of a program of several
    kernels that no edit inside one kernel makes."""
    if op.kind != "customized":
        return
    for a in range(len(op.inputs)):
        for b in range(a + 1, len(op.inputs)):
            x, y = op.inputs[a], op.inputs[b]
            if x == y or g.shape(x) != g.shape(y):
                continue
            swapped = list(op.inputs)
            swapped[a], swapped[b] = y, x
            yield ("swap-kernel-inputs", f"{where}: kernel inputs {x} and {y} swapped",
                   put(replace(op, inputs=tuple(swapped))))


def _map_edits(op: Op, put: Callable[[Op | None], KernelGraph], where: str, bg: BlockGraph
               ) -> Iterator[tuple[str, str, KernelGraph]]:
    for key in ("imap", "fmap", "omap"):
        sizes = (bg.forloop_range,) if key == "fmap" else bg.grid
        m = op.attr.get(key)
        if not isinstance(m, Map) or not m.is_concrete:
            continue
        try:
            rows = list(m.as_dims())
        except PrismError:
            continue
        for p, current in enumerate(rows):
            if sizes[p].is_const and sizes[p].value == 1:
                continue  # a parallel dim of size 1: every map entry means the same
            for other in range(-1, m.rank):
                if other == current:
                    continue
                changed = [*rows[:p], other, *rows[p + 1:]]
                new_map = Map.concrete(changed, m.rank)
                attrs = {**op.attr, key: new_map}
                yield (f"wrong-{key}", f"{where}: {key} row {p} {current} → {other}",
                       put(Op.make(op.kind, op.inputs, op.outputs, attrs)))


def _replaced(ops: tuple[Op, ...], i: int, new: Op | None) -> tuple[Op, ...]:
    """`ops` with op i replaced by `new`, or removed when `new` is None."""
    return ops[:i] + (() if new is None else (new,)) + ops[i + 1:]


def _set_kernel_op(g: KernelGraph, i: int, new: Op | None) -> KernelGraph:
    return replace(g, ops=_replaced(g.ops, i, new))


def _set_block_op(bg: BlockGraph, j: int, new: Op | None) -> BlockGraph:
    return replace(bg, ops=_replaced(bg.ops, j, new))


def _drop(op: Op, put: Callable[[Op | None], KernelGraph]) -> KernelGraph:
    """Remove `op`; its consumers read its first input instead."""
    dropped, source = op.outputs[0], op.inputs[0]
    edited = put(None)
    return _rename(edited, dropped, source)


def _extra(op: Op, extra: Op, put: Callable[[Op | None], KernelGraph]) -> KernelGraph:
    """Insert `extra` right after `op`; op's consumers read extra's output instead."""
    edited = _rename(put(op), op.outputs[0], extra.outputs[0])
    return _insert_after(edited, op, extra)


def _rename(g: KernelGraph, old: str, new: str) -> KernelGraph:
    def fix(ops: tuple[Op, ...]) -> tuple[Op, ...]:
        out = []
        for o in ops:
            if o.block is not None:
                o = replace(o, block=replace(o.block, ops=fix(o.block.ops)))
            if old in o.inputs:
                o = replace(o, inputs=tuple(new if t == old else t for t in o.inputs))
            out.append(o)
        return tuple(out)
    return replace(g, ops=fix(g.ops))


def _insert_after(g: KernelGraph, op: Op, extra: Op) -> KernelGraph:
    def fix(ops: tuple[Op, ...]) -> tuple[Op, ...]:
        out: list[Op] = []
        for o in ops:
            if o.block is not None:
                o = replace(o, block=replace(o.block, ops=fix(o.block.ops)))
            out.append(o)
            if o.outputs == op.outputs and o.kind == op.kind:
                out.append(extra)
        return tuple(out)
    return replace(g, ops=fix(g.ops))
