"""Level 2a: map instantiation — concrete imap/fmap/omap for a complete symbolic family.

For each custom kernel, every input gets an imap (each grid dim splits one data dim or none, no
data dim twice) and an fmap (the loop walks one data dim or none), and the output an omap. The
enumeration backtracks input by input and cuts as soon as a recorded dimension equality whose
map bits are all chosen fails (the two dims differ as expressions of the still-symbolic grid
sizes and loop range). Then:

- the stored tile times the omap's splits must be the kernel tensor's shape;
- symmetry: an assignment is kept only if it is lexicographically smallest under every
  permutation of the grid dims;
- collapse: a grid dim no input splits is dropped — with more than one grid dim the family with
  fewer dims has the same program, so it is skipped here; a single unused grid dim becomes a
  grid of size 1; a loop no input walks becomes a loop range of 1;
- the concrete-map graph is rebuilt (`infer_shapes`, which re-checks every shape rule without
  map bits) and de-duplicated.

Each survivor is a kernel graph with concrete maps and symbolic grid sizes and loop range: one
program per size, all proved by one symbolic proof.

A family of the concrete mode (`prism.search.concrete`) has some maps and sizes decided already:
`fixed` names the maps that are kept as they are, and a concrete size must be 1 exactly where its
grid dim (or loop) splits nothing in the member (else the member is another family's program).
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

from prism.errors import PrismError
from prism.ir.dims import Dim, const, mul
from prism.ir.graph import BlockGraph, KernelGraph, Map, Op, output_data_shape
from prism.ir.infer import infer_shapes
from prism.ir.ops import bit_names, infer_shape
from prism.search.state import Equality

MapChoice = tuple[tuple[int, ...], int]     # (imap per grid dim, fmap), -1 for none
_GRID_SIZE = re.compile(r"g[xyz]\d*$")       # a grid size the search names (`state.GRID_NAMES`)


def row_choices(grid_dims: int, rank: int) -> list[tuple[int, ...]]:
    """Per grid dim a data dim or -1, no data dim twice."""
    out = []
    for combo in itertools.product(range(-1, rank), repeat=grid_dims):
        used = [d for d in combo if d >= 0]
        if len(used) == len(set(used)):
            out.append(combo)
    return out


def _bits(m: Map, dims: Sequence[int]) -> dict[str, int]:
    """The values of a symbolic map's bits under a concrete choice (row p splits dims[p])."""
    env = {}
    for p, row in enumerate(m.rows):
        for d, e in enumerate(row):
            if not e.is_const:
                (name,) = bit_names(e)
                env[name] = 1 if dims[p] == d else 0
    return env


def instantiate(family: KernelGraph, equalities: Sequence[Equality],
                limit: int = 512, fixed: frozenset[str] = frozenset()) -> Iterator[KernelGraph]:
    """Concrete-map members of a complete family, at most `limit` (symmetry-broken, collapsed,
    de-duplicated), keeping the maps `fixed` names ("imap", "fmap", "omap") as the family has
    them. Kernels are instantiated one after another."""
    seen: set[str] = set()
    count = 0
    for graph in _kernels(family, 0, list(equalities), fixed):
        key = graph.to_json().__repr__()
        if key in seen:
            continue
        seen.add(key)
        yield graph
        count += 1
        if count >= limit:
            return


def _kernels(graph: KernelGraph, index: int, equalities: list[Equality],
             fixed: frozenset[str] = frozenset()) -> Iterator[KernelGraph]:
    customs = [i for i, op in enumerate(graph.ops) if op.kind == "customized"]
    if index >= len(customs):
        try:
            yield infer_shapes(graph)
        except PrismError:
            return
        return
    pos = customs[index]
    op = graph.ops[pos]
    assert op.block is not None
    target_shapes = [graph.shape(t) for t in op.outputs]
    for block in _block_maps(op.block, [graph.shape(t) for t in op.inputs], target_shapes,
                             equalities, fixed):
        ops = list(graph.ops)
        ops[pos] = replace(op, block=block)
        yield from _kernels(replace(graph, ops=tuple(ops)), index + 1, equalities, fixed)


def _block_maps(bg: BlockGraph, sources: list[tuple[Dim, ...]],
                outputs: list[tuple[Dim, ...]], equalities: list[Equality],
                fixed: frozenset[str] = frozenset()) -> Iterator[BlockGraph]:
    inputs = bg.input_ops
    k = len(bg.grid)
    env: dict[str, int] = {}
    mine = [_Split.of(e) for e in equalities if free_bits(e) & block_bits(bg)]
    choices: list[MapChoice] = []

    # each input's (imap, fmap) choices with their map bits, computed once: the backtracking
    # below meets every input's choices again under each choice of the inputs before it
    options: list[list[tuple[tuple[int, ...], int, dict[str, int]]]] = []
    for i, op in enumerate(inputs):
        rank = len(sources[i])
        imaps = [op.attr["imap"].as_dims()] if "imap" in fixed else row_choices(k, rank)
        fmaps = [op.attr["fmap"].as_dims()[0]] if "fmap" in fixed else range(-1, rank)
        fbits = {fmap: _bits(op.attr["fmap"], (fmap,)) for fmap in fmaps}
        options.append([(imap, fmap, {**ibits, **fbits[fmap]}) for imap in imaps
                        for ibits in (_bits(op.attr["imap"], imap),) for fmap in fmaps])

    # An equality is decided once every bit it reads is set (one whose bits no input sets is
    # decided later, by the output maps). It is a conjunction of pairs of bits (`_Split`), and
    # each pair is checked at the input whose choice sets the later of its two bits. An
    # input's choices that pass its pairs depend only on the bits of earlier inputs its pairs
    # read, so they are filtered once per value of those bits (`passing`), in their order.
    owner = {name: i for i, opts in enumerate(options) for _, _, bits in opts for name in bits}
    pairs: list[list[tuple[str | None, str | None]]] = [[] for _ in inputs]
    for e in mine:
        if e.bits <= owner.keys():
            for a, b in e.pairs:
                pairs[max(owner[x] for x in (a, b) if x is not None)].append((a, b))
    outer = [sorted({x for pair in mine_pairs for x in pair if x is not None and owner[x] < i})
             for i, mine_pairs in enumerate(pairs)]
    passing: list[dict[tuple[int, ...], list[tuple[tuple[int, ...], int, dict[str, int]]]]] = \
        [{} for _ in inputs]

    def allowed(i: int) -> list[tuple[tuple[int, ...], int, dict[str, int]]]:
        key = tuple(env[x] for x in outer[i])
        hit = passing[i].get(key)
        if hit is None:
            hit = passing[i][key] = [
                opt for opt in options[i]
                if all((_bit(a, env, opt[2]) == _bit(b, env, opt[2])) for a, b in pairs[i])]
        return hit

    def assign(i: int) -> Iterator[list[MapChoice]]:
        if i == len(inputs):
            yield list(choices)
            return
        for imap, fmap, bits in allowed(i):
            env.update(bits)
            choices.append((imap, fmap))
            yield from assign(i + 1)
            choices.pop()
            for name in bits:
                del env[name]

    # A kernel that reads partial sums (a source whose shape names an earlier kernel's grid
    # size: a split close's, `KernelState.with_custom`) sums them once, so it has no loop.
    splits = any(_GRID_SIZE.match(n) for shape in sources for d in shape
                 for n in d.free_vars())
    # a grid dim the stored shapes name (a split close's partial sums) stays in place
    pinned = frozenset(p for p, g in enumerate(bg.grid) if g.free_vars() & frozenset().union(
        *(d.free_vars() for shape in outputs for d in shape)))
    for picked in assign(0):
        grid_used = [p for p in range(k) if any(imap[p] >= 0 for imap, _ in picked)]
        if len(grid_used) < k and k > 1:
            continue                  # collapses into the family with fewer grid dims
        if not _canonical([imap for imap, _ in picked], k, pinned):
            continue
        loop_used = any(f >= 0 for _, f in picked)
        if loop_used and splits:
            continue                  # every iteration would add the partial sums again
        if any(g.is_const and (g == const(1)) == (p in grid_used) for p, g in enumerate(bg.grid)) \
                or (bg.forloop_range.is_const and (bg.forloop_range == const(1)) == loop_used):
            continue                  # a concrete size: another family's program (its docstring)
        grid = bg.grid if grid_used else (const(1),)
        loop = bg.forloop_range if loop_used else const(1)
        for omaps in _omaps(bg, picked, sources, outputs, grid, loop, fixed):
            yield _rebuilt(bg, picked, omaps, grid, loop, sources)


def _bit(name: str | None, env: dict[str, int], mine: dict[str, int]) -> int:
    """A pair's bit: set by this input's choice (`mine`) or an earlier one's (`env`); 0 for
    a side no parallel dim splits."""
    if name is None:
        return 0
    return mine[name] if name in mine else env[name]


def kernel_program(graph: KernelGraph, index: int, block: BlockGraph | None = None
                   ) -> KernelGraph:
    """Custom kernel `graph.ops[index]` as a program of its own: its inputs, the kernel (with
    `block` in place of its block graph, when given), its outputs."""
    op = graph.ops[index]
    if block is not None:
        op = replace(op, block=block)
    shapes = graph.shapes
    ops = (*(Op.make("input", (), (t,)) for t in op.inputs), op,
           *(Op.make("output", (t,)) for t in op.outputs))
    tensors = tuple((t, shapes[t]) for t in (*op.inputs, *op.outputs))
    return KernelGraph(ops, tensors, f"{graph.name}.{op.outputs[0]}")


def with_blocks(graph: KernelGraph, blocks: dict[int, BlockGraph]) -> KernelGraph:
    """`graph` with the block graphs of the custom kernels at these op positions replaced,
    shapes re-inferred."""
    ops = tuple(replace(op, block=blocks[i]) if i in blocks else op
                for i, op in enumerate(graph.ops))
    return infer_shapes(replace(graph, ops=ops))


def kernel_members(graph: KernelGraph, index: int, equalities: Sequence[Equality],
                   limit: int = 512) -> Iterator[BlockGraph]:
    """The concrete-map members of one custom kernel of a complete family, on its own (what
    `instantiate` makes of that kernel, each a well-formed program of that kernel alone),
    de-duplicated, at most `limit`."""
    op = graph.ops[index]
    assert op.block is not None
    seen: set[str] = set()
    for block in _block_maps(op.block, [graph.shape(t) for t in op.inputs],
                             [graph.shape(t) for t in op.outputs], list(equalities)):
        try:
            program = infer_shapes(kernel_program(graph, index, block))
        except PrismError:
            continue
        key = repr(program.to_json())
        if key in seen:
            continue
        seen.add(key)
        yield program.ops[len(op.inputs)].block  # type: ignore[misc]
        if len(seen) >= limit:
            return


def unsplit(graph: KernelGraph, index: int) -> BlockGraph | None:
    """A custom kernel's trivial instantiation: no input split by the grid or walked by the
    loop, one block, one iteration. Its program computes the kernel's abstract expression
    (`prism.search.abstract`), whatever maps a member has; None if the kernel cannot be
    written so (no output map stores its tile)."""
    op = graph.ops[index]
    assert op.block is not None
    bg = op.block
    picked: list[MapChoice] = [((-1,), -1) for _ in bg.input_ops]
    sources = [graph.shape(t) for t in op.inputs]
    grid, loop = (const(1),), const(1)
    for omaps in _omaps(bg, picked, sources, [graph.shape(t) for t in op.outputs], grid, loop):
        try:
            block = _rebuilt(bg, picked, omaps, grid, loop, sources)
            infer_shapes(kernel_program(graph, index, block))
        except PrismError:
            return None
        return block
    return None


@dataclass(frozen=True)
class _Split:
    """An equality of two tile dims, as which parallel dims split each side. A tile dim comes
    from one data dim of one input, divided by g_p for each grid dim p whose bit is 1 and by F
    when its loop bit is 1; two such dims (of equal data dims, as the symbolic match found) are
    equal iff the same parallel dims split both."""

    bits: frozenset[str]
    # per parallel dim, the bit on each side (None: that side is never split by it)
    pairs: tuple[tuple[str | None, str | None], ...]

    @staticmethod
    def of(e: Equality) -> _Split:
        left, right = _slots(e.a), _slots(e.b)
        pairs = tuple((left.get(slot), right.get(slot))
                      for slot in sorted(left.keys() | right.keys()))
        return _Split(frozenset(free_bits(e)), pairs)


def _slots(d: Dim) -> dict[str, str]:
    """Parallel dim → the map bit that decides whether it splits `d` (bits are named
    `m_<tile>_d<d>_p<p>` for grid dim p, `f_<tile>_d<d>_p0` for the loop)."""
    out = {}
    for name in bit_names(d):
        slot = "F" if name.startswith("f_") else "g" + name.rsplit("_p", 1)[1]
        out[slot] = name
    return out


def block_bits(bg: BlockGraph) -> set[str]:
    out: set[str] = set()
    for op in bg.ops:
        for key in ("imap", "fmap", "omap"):
            m = op.attr.get(key)
            if isinstance(m, Map):
                for row in m.rows:
                    for e in row:
                        out |= bit_names(e)
    return out


def free_bits(e: Equality) -> set[str]:
    return set(bit_names(e.a) | bit_names(e.b))


def _canonical(imaps: list[tuple[int, ...]], k: int, pinned: frozenset[int] = frozenset()
               ) -> bool:
    """Lexicographically smallest under every permutation of the grid dims that keeps the
    `pinned` ones in place."""
    flat = tuple(imaps)
    for perm in itertools.permutations(range(k)):
        if any(perm[p] != p for p in pinned):
            continue
        permuted = tuple(tuple(imap[p] for p in perm) for imap in imaps)
        if permuted < flat:
            return False
    return True


def _concrete(bg: BlockGraph, picked: list[MapChoice], grid: tuple[Dim, ...], loop: Dim,
              sources: list[tuple[Dim, ...]]) -> tuple[BlockGraph, dict[str, tuple[Dim, ...]]]:
    """The block with concrete input maps and re-inferred tile shapes (outputs not yet)."""
    ops, shapes = [], {}
    inputs = iter(zip(picked, sources, strict=True))
    len(grid)
    for op in bg.ops:
        if op.kind == "input":
            (imap, fmap), src = next(inputs)
            rank = len(src)
            fmap = fmap if loop != const(1) else -1
            im, fm = Map.concrete(imap, rank), Map.concrete((fmap,), rank)
            shapes[op.outputs[0]] = _tile(src, imap, fmap, grid, loop)
            ops.append(replace(op, attrs=tuple(sorted({"imap": im, "fmap": fm}.items()))))
        elif op.kind == "output":
            ops.append(op)
        else:
            shapes[op.outputs[0]] = infer_shape(op.kind, [shapes[t] for t in op.inputs],
                                                op.attr)
            ops.append(op)
    return replace(bg, grid=grid, forloop_range=loop, ops=tuple(ops),
                   tensors=tuple(shapes.items())), shapes


def _tile(src: tuple[Dim, ...], imap: tuple[int, ...], fmap: int, grid: tuple[Dim, ...],
          loop: Dim) -> tuple[Dim, ...]:
    """`input_tile_shape` for concrete maps, without the 0/1 factor arithmetic."""
    out = []
    for d, size in enumerate(src):
        parts = [grid[p] for p, hit in enumerate(imap) if hit == d and p < len(grid)]
        if fmap == d:
            parts.append(loop)
        out.append(size / mul(*parts) if parts else size)
    return tuple(out)


def _omaps(bg: BlockGraph, picked: list[MapChoice], sources: list[tuple[Dim, ...]],
           outputs: list[tuple[Dim, ...]], grid: tuple[Dim, ...], loop: Dim,
           fixed: frozenset[str] = frozenset()) -> Iterator[list[tuple[int, ...]]]:
    try:
        _, shapes = _concrete(bg, picked, grid, loop, sources)
    except PrismError:
        return
    per_output = []
    for op, want in zip(bg.output_ops, outputs, strict=True):
        fits = list(_fitting(tuple(shapes[op.inputs[0]]), tuple(grid), tuple(want)))
        if "omap" in fixed:
            fits = [om for om in fits if om == op.attr["omap"].as_dims()]
        if not fits:
            return
        per_output.append(fits)
    for combo in itertools.product(*per_output):
        yield list(combo)


@functools.lru_cache(maxsize=1 << 14)
def _fitting(tile: tuple[Dim, ...], grid: tuple[Dim, ...], want: tuple[Dim, ...]
             ) -> tuple[tuple[int, ...], ...]:
    """The omaps (in `row_choices`' order) that store `tile` from a grid of `grid` as a tensor
    of shape `want`; once per shapes (families of a search meet the same ones again)."""
    rows = row_choices(len(grid), len(tile)) if grid != (const(1),) else [(-1,)]
    return tuple(om for om in rows
                 if output_data_shape(tile, Map.concrete(om, len(tile)), grid) == want)


def _rebuilt(bg: BlockGraph, picked: list[MapChoice], omaps: list[tuple[int, ...]],
             grid: tuple[Dim, ...], loop: Dim, sources: list[tuple[Dim, ...]]) -> BlockGraph:
    concrete, _ = _concrete(bg, picked, grid, loop, sources)
    outs = iter(omaps)
    ops = []
    for op in concrete.ops:
        if op.kind == "output":
            tile = concrete.shape(op.inputs[0])
            om = Map.concrete(next(outs), len(tile))
            op = replace(op, attrs=(("omap", om),))
        ops.append(op)
    return replace(concrete, ops=tuple(ops))


def map_summary(graph: KernelGraph) -> list[dict[str, object]]:
    """Per custom kernel: grid, loop, and each input's and output's maps (Mirage's -1 form)."""
    out = []
    for _, bg in graph.iter_blocks():
        entry: dict[str, object] = {"grid": [str(g) for g in bg.grid],
                                    "forloop_range": str(bg.forloop_range)}
        for op in bg.ops:
            if op.kind == "input":
                entry[op.outputs[0]] = {"imap": list(op.attr["imap"].as_dims()),
                                        "fmap": op.attr["fmap"].as_dims()[0]}
            elif op.kind == "output":
                entry[f"store {op.inputs[0]}"] = {"omap": list(op.attr["omap"].as_dims())}
        out.append(entry)
    return out
