"""The concrete mode of the search: the ablation Prism reports (DESIGN.md §6, issue 15).

Prism keeps a block graph's grid sizes, loop range and maps symbolic while it generates, and
instantiates them once a family is complete. Mirage decides them when it opens the block graph.
`SearchConfig.concrete` names the parameters decided that way, one flag each, as Prism's
`sym_grid_dim`, `sym_frange`, `sym_imap`, `sym_fmap` and `sym_omap` (REFERENCE §1.2):

- opening a custom kernel (`open_choices`) makes one family per choice of what is concrete: the
  number of grid dims (fixed here when grid sizes or imaps are concrete, since both have one
  entry per grid dim; else chosen when the block closes, as in the symbolic search), each
  input's imap (`maps.row_choices`, no dim of size 1 split; canonical under permutations of the
  grid dims and every grid dim splitting some input when there are several: map
  instantiation's symmetry breaking and collapse, applied here), each input's fmap, the grid
  sizes and the loop range. Sizes are Prism's tuner's candidates (`params.Variable`) for the gcd
  of the dims each one splits; a grid dim or loop that splits nothing has size 1 and one that
  splits something is larger, so every program belongs to one family. With symbolic maps, a
  size takes the candidates of every input dim (size 1 only in a single grid dim or the loop);
- closing it (`omap_choices`) makes one family per output map that stores the tensor's data
  shape (what map instantiation requires of a member).

Every block op after the open is then generated once per choice. A complete family still goes to
map instantiation, which keeps its concrete parameters and chooses the symbolic ones
(`maps.instantiate(fixed=...)`). A member whose grid sizes and loop range are all concrete is
checked by `mirage_check`: random testing at its own sizes, Mirage's check (REFERENCE §2.4), here
in float64 on one draw from the ops' domains: evidence at those sizes, not a proof, and its
verdict's method says so. A member with symbolic sizes (only maps concrete) is proved by the
e-graph as in the symbolic search.
"""

from __future__ import annotations

import itertools
import json
import math
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

from prism.errors import PrismError, VerifyError
from prism.ir.dims import dim
from prism.ir.graph import BlockGraph, KernelGraph, Map, Shape, output_data_shape
from prism.ir.ops import bit_names, data_dim
from prism.ir.serialize import graph_to_json
from prism.search.config import SearchConfig
from prism.verify.equiv import Verdict, invalid_reason
from prism.verify.randomized import random_test

OPEN_PARAMS = frozenset({"grid", "loop", "imap", "fmap"})   # decided when the block opens
MIRAGE_CHECK = "random-float64 at its own sizes (Mirage's check; not a proof)"
MIRAGE_TRIALS = 1          # Mirage tests each candidate on one random input (its fingerprint)


@dataclass(frozen=True)
class OpenChoice:
    """What a block graph is opened with in the concrete mode; None where it stays symbolic."""

    grid_dims: int | None                       # fixed at the open, else chosen at the close
    imaps: tuple[tuple[int, ...], ...] | None   # per input, per grid dim: the dim split (-1)
    fmaps: tuple[int, ...] | None               # per input: the dim the loop walks (-1)
    grid: tuple[int, ...] | None                # grid sizes
    loop: int | None                            # loop range

    def describe(self, names: Sequence[str]) -> str:
        parts = [f"grid {_sizes(self.grid)}" if self.grid is not None else
                 "symbolic grid sizes" + (f" ({self.grid_dims} dims)" if self.grid_dims else ""),
                 f"loop {self.loop}" if self.loop is not None else "symbolic loop range"]
        if self.imaps is not None:
            parts.append("imap " + ", ".join(f"{n} {_row(m)}"
                                             for n, m in zip(names, self.imaps, strict=True)))
        if self.fmaps is not None:
            parts.append("fmap " + ", ".join(f"{n} {'-' if f < 0 else f}"
                                             for n, f in zip(names, self.fmaps, strict=True)))
        return ", ".join(parts)


def _sizes(v: tuple[int, ...]) -> str:
    return "(" + ", ".join(map(str, v)) + ")"


def _row(m: tuple[int, ...]) -> str:
    return "(" + ", ".join("-" if d < 0 else str(d) for d in m) + ")"


def open_choices(shapes: Sequence[Shape], config: SearchConfig) -> Iterator[OpenChoice]:
    """Every concrete way to open a block graph on inputs of `shapes`, in a fixed order."""
    from prism.search.maps import _canonical
    concrete = config.concrete
    for k in (config.grid_dims if concrete & {"grid", "imap"} else (None,)):
        for imaps in (_imap_choices(shapes, k) if "imap" in concrete and k else (None,)):
            used = None if imaps is None or k is None else \
                [p for p in range(k) if any(m[p] >= 0 for m in imaps)]
            if used is not None and k is not None and k > 1 and (
                    len(used) < k or not _canonical(list(imaps or ()), k)):
                continue       # the family with fewer grid dims, or a permutation of another
            for fmaps in (_fmap_choices(shapes) if "fmap" in concrete else (None,)):
                walked = None if fmaps is None else [f for f in fmaps if f >= 0]
                for grid in _grid_choices(shapes, k, imaps, used, concrete, config):
                    for loop in _loop_choices(shapes, fmaps, walked, concrete):
                        yield OpenChoice(k, imaps, fmaps, grid, loop)


def _imap_choices(shapes: Sequence[Shape], k: int) -> Iterator[tuple[tuple[int, ...], ...]]:
    from prism.search.maps import row_choices
    per = [[row for row in row_choices(k, len(s)) if all(d < 0 or s[d] != dim(1) for d in row)]
           for s in shapes]
    yield from itertools.product(*per)


def _fmap_choices(shapes: Sequence[Shape]) -> Iterator[tuple[int, ...]]:
    per = [[-1, *(d for d, n in enumerate(s) if n != dim(1))] for s in shapes]
    yield from itertools.product(*per)


def _grid_choices(shapes: Sequence[Shape], k: int | None,
                  imaps: tuple[tuple[int, ...], ...] | None, used: list[int] | None,
                  concrete: frozenset[str], config: SearchConfig
                  ) -> Iterator[tuple[int, ...] | None]:
    if imaps is not None and not used:
        yield (1,)                  # nothing split: one block (the symbolic search's collapse)
        return
    if "grid" not in concrete or k is None:
        yield None
        return
    per = []
    for p in range(k):
        if imaps is not None:
            split = [shapes[i][m[p]].value for i, m in enumerate(imaps) if m[p] >= 0]
            per.append(_split_sizes(split, "grid") if split else [1])
        else:
            per.append(_any_sizes(shapes, "grid", with_one=k == 1))
    for combo in itertools.product(*per):
        if math.prod(combo) <= config.device.max_blocks:
            yield combo


def _loop_choices(shapes: Sequence[Shape], fmaps: tuple[int, ...] | None,
                  walked: list[int] | None, concrete: frozenset[str]) -> Iterator[int | None]:
    if fmaps is not None and not walked:
        yield 1                     # nothing walked: one iteration
        return
    if "loop" not in concrete:
        yield None
        return
    if fmaps is not None:
        yield from _split_sizes([shapes[i][f].value for i, f in enumerate(fmaps) if f >= 0],
                                "loop")
    else:
        yield from _any_sizes(shapes, "loop", with_one=True)


def size_candidates(n: int, role: str) -> list[int]:
    """Prism's tuner's candidates for a grid size (`role` "grid") or loop range ("loop") that
    divides dims whose gcd is `n` (REFERENCE §1.7, `prism.instantiate.params`): if n ≤ 64 the
    powers of two dividing n; else n/256 (loop) or n/512 (grid), at least 1, doubled while
    ≤ n/16 (loop) or n/8 (grid), keeping divisors of n; [1] when n ≤ 1."""
    if n <= 1:
        return [1]
    if n <= 64:
        return [1 << k for k in range(n.bit_length()) if n % (1 << k) == 0]
    start, stop = (max(1, n // 256), n // 16) if role == "loop" else (max(1, n // 512), n // 8)
    out, v = [], start
    while v <= stop:
        if n % v == 0:
            out.append(v)
        v *= 2
    return out or [1]


def _split_sizes(split: list[int], role: str) -> list[int]:
    """The tuner's candidates for a size that splits dims `split`, other than 1 (a split into
    one part is the program without it, another family's)."""
    return [v for v in size_candidates(math.gcd(*split), role) if v > 1]


def _any_sizes(shapes: Sequence[Shape], role: str, with_one: bool) -> list[int]:
    """With symbolic maps: the candidates of any dim of any input (1 where it may split
    nothing)."""
    values = {v for s in shapes for n in s if n.is_const and n.value > 1
              for v in size_candidates(n.value, role) if v > 1}
    return sorted(values | ({1} if with_one else set()))


def omap_choices(tile: Shape, grid: Sequence[object], want: Shape) -> list[tuple[int, ...]]:
    """The output maps (per grid dim, the data dim it concatenates along, or -1: summed) that
    store `tile` from a grid `grid` as a tensor of shape `want`. A tile with map bits is
    compared by its data dims (the maps are chosen later, and map instantiation checks it)."""
    from prism.search.maps import row_choices
    rows = row_choices(len(grid), len(tile)) if tuple(grid) != (dim(1),) else [(-1,)]
    symbolic = any(bit_names(d) for d in tile)
    out = []
    for om in rows:
        try:
            stored = output_data_shape(tile, Map.concrete(om, len(tile)), grid)  # type: ignore[arg-type]
        except PrismError:
            continue
        if (tuple(data_dim(d) for d in stored) if symbolic else stored) == tuple(want):
            out.append(om)
    return out


def mirage_check(target: KernelGraph, member: KernelGraph) -> Verdict:
    """Mirage's acceptance of a concrete candidate: the two graphs agree on random inputs at
    the candidate's own sizes (`random_test`: float64, `MIRAGE_TRIALS` draw(s) from the ops'
    domains, plus one unrestricted draw where an input is drawn positive). `equivalent` here
    means accepted by that check, with method `MIRAGE_CHECK` and no proof steps; a difference
    is a real counterexample."""
    start = time.perf_counter()
    why = invalid_reason(target, member)
    if why:
        return Verdict("invalid", "spec", time.perf_counter() - start, reason=why)
    try:
        found = random_test(target, member, assignments=[{}], trials=MIRAGE_TRIALS)
    except VerifyError as e:
        return Verdict("unknown", MIRAGE_CHECK, time.perf_counter() - start,
                       reason=f"random testing could not run: {e}")
    seconds = time.perf_counter() - start
    if found.found_difference:
        cex = found.counterexample.to_json() if found.counterexample else None
        return Verdict("not_equivalent", MIRAGE_CHECK, seconds, counterexample=cex,
                       reason=f"random testing found a difference: {found.reason}")
    if not found.equal:
        return Verdict("unknown", MIRAGE_CHECK, seconds,
                       reason=f"random testing could not compare: {found.reason}")
    draws = MIRAGE_TRIALS + (1 if found.trials and _drew_positive(target, member) else 0)
    return Verdict("equivalent", MIRAGE_CHECK, seconds, sizes="concrete",
                   reason=f"accepted by random testing: {draws} float64 draw(s) at its own sizes "
                          "agreed with the target to 1e-9 (Mirage's check): evidence at these "
                          "sizes, not a proof")


def _drew_positive(target: KernelGraph, member: KernelGraph) -> bool:
    from prism.verify.randomized import positive_inputs
    return bool(positive_inputs(target) | positive_inputs(member))


def canonical_program(graph: KernelGraph) -> str:
    """A concrete program's JSON up to what does not change the program: a grid dim of size 1
    dropped (its one block is no split), a loop of range 1 walking nothing, the grid dims in
    the canonical order (the smallest imaps under their permutations, `maps._canonical`), and
    no name. Two members of the search space are the same program iff these are equal."""
    ops = [replace(op, block=_canonical_block(op.block))
           if op.kind == "customized" and op.block is not None else op for op in graph.ops]
    return json.dumps(graph_to_json(replace(graph, ops=tuple(ops), name="")), sort_keys=True)


def _canonical_block(bg: BlockGraph) -> BlockGraph:
    keep = [p for p, g in enumerate(bg.grid) if g != dim(1)]
    imaps = [op.attr["imap"].as_dims() for op in bg.input_ops]
    order = min(itertools.permutations(keep),
                key=lambda perm: tuple(tuple(m[p] for p in perm) for m in imaps))
    walks = bg.forloop_range != dim(1)

    def rows(m: Map) -> Map:
        dims = m.as_dims()
        return Map.concrete(tuple(dims[p] for p in order) or (-1,), m.rank)

    ops = []
    for op in bg.ops:
        if op.kind == "input":
            fmap = op.attr["fmap"] if walks else Map.concrete((-1,), op.attr["fmap"].rank)
            op = replace(op, attrs=tuple(sorted({"imap": rows(op.attr["imap"]),
                                                 "fmap": fmap}.items())))
        elif op.kind == "output":
            op = replace(op, attrs=(("omap", rows(op.attr["omap"])),))
        ops.append(op)
    return replace(bg, grid=tuple(bg.grid[p] for p in order) or (dim(1),), ops=tuple(ops))
