"""Term translation: a kernel graph (block graphs included) as tensor terms, one per output.

Data movement becomes explicit (`prism.expr.tensor_terms` gives the meaning of every head):

- a block input reading kernel tensor T: for each grid dim p (x, y, z), `(part T d g_p)` when the
  imap sends p to data dim d, else `(rep T g_p)`; then the loop: `(part · d F)` for fmap d, else
  `(rep · F)`;
- accumulators close the loop axis F: `nored` → `(red t F)`; `nored_rescale(x, m)` →
  `(red (mul x (exp (sub m (rep (max (comb m last F) last) F)))) F)` (see `rescaled_term`);
  `red_ld_sum` → `(sum (red t F) last)`;
  `red_ld_mean` → `(mean (mred t F) last)`; `red_ld_rms` → `(sqrt (mean (mred (square t) F) last))`
  (the true mean, as executed; with an epsilon e, `(sqrt (add_scalar (mean ...) e))`);
  `redtox_ld_sum` → `(red (part (red t F) last k) k)` over a chunk axis k;
- a block output: for each grid dim p, innermost first, `(comb t d g_p)` when the omap sends p to
  d, else `(red t g_p)`.

Grid and loop sizes stay opaque axis names, so one proof covers every size; an axis of constant
size 1 is left out (a split into one part, a copy onto one block and a sum over one block are
identities), a redtox chunk axis of one chunk too. Axis names are distinct per custom kernel
(`gx`, `F`; `gx1`, `F1`; ...).

Maps must be concrete (else `VerifyError`: instantiate them first), and each row may split one
data dim at most: a row with two 1s is no program (`SpecError`), never read as its first 1.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from prism.errors import PrismError, SpecError, VerifyError
from prism.expr.terms import Term
from prism.ir.dims import Dim, evaluate
from prism.ir.graph import BlockGraph, KernelGraph, Map, Op
from prism.ir.ops import OPS, RESCALED, with_defaults

GRID_AXES = ("gx", "gy", "gz")


def leaf(text: str | int) -> Term:
    return Term(str(text), ())


_RESERVED = re.compile(r"^(\d.*|(gx|gy|gz|F|k|n)\d*(_\d+)?)$")


def tensor_leaf(name: str) -> str:
    """A kernel input's leaf name, kept apart from atoms (dim indices, axis names)."""
    return f"{name}_" if _RESERVED.match(name) else name


@dataclass(frozen=True)
class Translation:
    """The terms of a graph's outputs, its input leaves in order, and every axis's size."""

    terms: tuple[Term, ...]
    inputs: tuple[str, ...]
    sizes: dict[str, Dim] = field(default_factory=dict)


def translate(graph: KernelGraph, input_names: Sequence[str] | None = None,
              concrete_sizes: bool = False, loop_first: bool = False) -> Translation:
    """One term per graph output, over the graph's inputs: leaves named by `tensor_leaf`, or by
    `input_names` in input order (to read a candidate over the target's inputs).

    Axes are opaque symbols (one proof for every size) unless `concrete_sizes` and a custom
    kernel's sizes are all constants: then they are named by their sizes (see `_AxisNames`),
    the grid's first, or the loop's first with `loop_first` (a kernel whose loop walks what
    the kernel before it concatenated along a grid axis of the same size as one of its own)."""
    names = list(input_names) if input_names is not None else \
        [tensor_leaf(t) for t in graph.inputs]
    leaves = dict(zip(graph.inputs, names, strict=True))
    env: dict[str, Term] = {}
    sizes: dict[str, Dim] = {}
    kernels = 0
    for op in graph.ops:
        if op.kind == "input":
            env[op.outputs[0]] = leaf(leaves[op.outputs[0]])
        elif op.kind == "output":
            continue
        elif op.kind == "customized":
            if op.block is None:
                raise PrismError("a custom kernel without a block graph cannot be translated")
            suffix = str(kernels) if kernels else ""
            kernels += 1
            outs = _block(op.block, [env[t] for t in op.inputs], suffix, sizes, concrete_sizes,
                          loop_first)
            env.update(zip(op.outputs, outs, strict=True))
        else:
            env[op.outputs[0]] = _compute(op, [env[t] for t in op.inputs],
                                          len(graph.shape(op.inputs[0])) if op.inputs else 0)
    return Translation(tuple(env[t] for t in graph.outputs), tuple(names), sizes)


def _compute(op: Op, args: list[Term], rank: int) -> Term:
    return compute_term(op.kind, args, rank, op.attr)


def compute_term(kind: str, args: Sequence[Term], rank: int, attrs: Mapping[str, Any]) -> Term:
    """A compute op on operands of rank `rank`; the op's `term_attrs` become atom arguments
    after the operands (a dim index, the last dim's, a scalar, `none` for an absent bound)."""
    full = with_defaults(kind, attrs)
    atoms = [leaf(rank - 1) if a == "last" else leaf(int(full[a])) if a == "dim"
             else scalar_leaf(full[a]) for a in OPS[kind].term_attrs]
    return Term(kind, (*args, *atoms))


def scalar_leaf(value: Any) -> Term:
    """A constant as an atom: its float's repr (so 2 and 2.0 are one atom), `none` for None."""
    return leaf("none" if value is None else repr(float(value)))


def _is_one(size: Dim) -> bool:
    return size.is_const and size.value == 1


def _map_dims(m: Map, where: str) -> list[int]:
    """Per row, the data dim it splits (-1: none). The map must be concrete, and no row may
    split two data dims (a parallel dim splits at most one data dim of a tensor)."""
    out = []
    for p, row in enumerate(m.rows):
        try:
            hits = [d for d, e in enumerate(row) if evaluate(e) == 1]
        except PrismError:
            raise VerifyError(f"{where} is symbolic: a block graph with symbolic maps cannot be "
                              "translated; instantiate its maps first") from None
        if len(hits) > 1:
            raise SpecError([f"{where}: parallel dim {p} splits data dims "
                             f"{', '.join(map(str, hits))}; a parallel dim splits at most one "
                             "data dim of a tensor"])
        out.append(hits[0] if hits else -1)
    return out


class _AxisNames:
    """Axis names of one custom kernel. Symbolic sizes get kernel-local names (`gx`, `F`;
    `gx1`, `F1`, ...). In concrete mode, when every size is a constant, an axis is named by its
    size (`n16`,
    `n16_1` for a second axis of 16 in the kernel): each kernel's terms close all their axes,
    so reusing a name across kernels is sound, and equal names let a split in one kernel meet
    the concatenation of the kernel before it (`part-comb`)."""

    def __init__(self, bg: BlockGraph, suffix: str, sizes: dict[str, Dim], concrete: bool):
        self.concrete = concrete and all(s.is_const for s in (*bg.grid, bg.forloop_range))
        self.suffix, self.sizes = suffix, sizes
        self.used: set[str] = set()

    def name(self, symbolic: str, size: Dim) -> str:
        if self.concrete and size.is_const:
            base = name = f"n{size.value}"
            count = 0
            while name in self.used:
                count += 1
                name = f"{base}_{count}"
        else:
            name = f"{symbolic}{self.suffix}"
        self.used.add(name)
        self.sizes[name] = size
        return name


def _block(bg: BlockGraph, sources: list[Term], suffix: str, sizes: dict[str, Dim],
           concrete: bool, loop_first: bool = False) -> list[Term]:
    names = _AxisNames(bg, suffix, sizes, concrete)
    loop = None
    if loop_first and not _is_one(bg.forloop_range):
        loop = names.name("F", bg.forloop_range)
    axes = [(p, names.name(GRID_AXES[p], size)) for p, size in enumerate(bg.grid)
            if not _is_one(size)]
    if not loop_first and not _is_one(bg.forloop_range):
        loop = names.name("F", bg.forloop_range)
    env: dict[str, Term] = {}
    # A pre-loop tensor that is the same in every iteration (read from tiles the loop does not
    # walk) has a term without the loop axis too, for the ops after the loop that read it.
    still: dict[str, Term] = {}
    post = bg.after_accum
    inputs = iter(sources)
    chunks = 0
    for op in bg.ops:
        if op.kind == "input":
            t = next(inputs)
            tile = op.outputs[0]
            imap = _map_dims(op.attr["imap"], f"block input {tile} imap")
            fmap = _map_dims(op.attr["fmap"], f"block input {tile} fmap")[0]
            for p, name in axes:
                t = _split(t, imap[p], name)
            if loop is None or fmap < 0:
                still[tile] = t
            if loop is not None:
                t = _split(t, fmap, loop)
            env[op.outputs[0]] = t
        elif op.kind == "output":
            continue
        elif op.kind in RESCALED:
            x, m = env[op.inputs[0]], env[op.inputs[1]]
            last = leaf(len(bg.shape(op.inputs[1])) - 1)
            env[op.outputs[0]] = rescaled_term(x, m, loop, last)
        elif op.kind in ACCUMULATOR_KINDS:
            x = env[op.inputs[0]]
            last = leaf(len(bg.shape(op.inputs[0])) - 1)
            chunk, kind = "", op.kind
            if op.kind == "redtox_ld_sum":
                size = bg.shape(op.inputs[0])[-1] / op.attr["dimx"]
                if _is_one(size):   # one chunk: its sum is the chunk, as a grid axis of 1
                    kind = "nored"
                else:
                    chunk = names.name(f"k{chunks}", size)
                    chunks += 1
            env[op.outputs[0]] = accumulator_term(kind, x, loop, last, chunk, op.attr)
        elif op.outputs[0] in post:
            args = []
            for name in op.inputs:
                if name not in post and name not in still:
                    raise VerifyError(f"block op {op.outputs[0]} reads {name} after the loop, "
                                      "but the loop walks a tile it is computed from")
                args.append(env[name] if name in post else still[name])
            env[op.outputs[0]] = _compute(op, args, len(bg.shape(op.inputs[0])))
        else:
            rank = len(bg.shape(op.inputs[0]))
            env[op.outputs[0]] = _compute(op, [env[t] for t in op.inputs], rank)
            if all(t in still for t in op.inputs):
                still[op.outputs[0]] = _compute(op, [still[t] for t in op.inputs], rank)
    results = []
    for op in bg.output_ops:
        t = env[op.inputs[0]]
        omap = _map_dims(op.attr["omap"], f"block output {op.inputs[0]} omap")
        for p, name in reversed(axes):
            t = Term("comb", (t, leaf(omap[p]), leaf(name))) if omap[p] >= 0 else \
                Term("red", (t, leaf(name)))
        results.append(t)
    return results


def _split(t: Term, d: int, axis: str) -> Term:
    return Term("part", (t, leaf(d), leaf(axis))) if d >= 0 else Term("rep", (t, leaf(axis)))


def _over_loop(head: str, x: Term, loop: str | None) -> Term:
    return x if loop is None else Term(head, (x, leaf(loop)))


ACCUMULATOR_KINDS = frozenset({"nored", "red_ld_sum", "red_ld_mean", "red_ld_rms",
                               "redtox_ld_sum"})


def rescaled_term(x: Term, m: Term, loop: str | None, last: Term) -> Term:
    """`nored_rescale(x, m)` over loop axis `loop`: the value its recurrence leaves,
    Σ_F x · e^(m − M) with M the max of m over the loop (m's per-iteration maxes concatenated
    along the last dim, their max): `(red (mul x (exp (sub m (rep M F)))) F)`. One iteration
    (no loop) leaves x. That the recurrence (M' = max(M, m), total · e^(M − M') + x · e^(m − M'))
    leaves this sum rests on e^u · e^v = e^(u + v), as `exp-rescale` does; the randomized check
    runs the recurrence itself (`prism.ir.interpret`)."""
    if loop is None:
        return x
    big = Term("max", (Term("comb", (m, last, leaf(loop))), last))
    shift = Term("sub", (m, Term("rep", (big, leaf(loop)))))
    return Term("red", (Term("mul", (x, Term("exp", (shift,)))), leaf(loop)))


def accumulator_term(kind: str, x: Term, loop: str | None, last: Term, chunk: str = "",
                     attrs: Mapping[str, Any] | None = None) -> Term:
    """The term of accumulator `kind` folding tile `x` over loop axis `loop` (None: no loop)."""
    if kind == "nored":
        return _over_loop("red", x, loop)
    if kind == "red_ld_sum":
        return Term("sum", (_over_loop("red", x, loop), last))
    if kind == "red_ld_mean":
        return Term("mean", (_over_loop("mred", x, loop), last))
    if kind == "red_ld_rms":
        mean = Term("mean", (_over_loop("mred", Term("square", (x,)), loop), last))
        eps = with_defaults(kind, attrs or {})["eps"]
        return Term("sqrt", (Term("add_scalar", (mean, scalar_leaf(eps))) if eps else mean,))
    if kind == "redtox_ld_sum":
        return Term("red", (Term("part", (_over_loop("red", x, loop), last, leaf(chunk))),
                            leaf(chunk)))
    raise VerifyError(f"{kind} is not an accumulator")
