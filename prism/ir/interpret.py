"""The reference interpreter: what any concrete kernel graph computes. The project's oracle.

Kernel ops run their semantics' entry (in float64, the op-table reference). A custom kernel runs
its block graph with the exact semantics of DESIGN.md §1, for every thread block of the grid at
once (the blocks are stacked on leading axes, one per grid dim) and for each loop iteration in
turn:

1. each block input loads, at iteration i, the tile its imap and fmap select: data dim d is cut
   into parts, outermost first by the grid dims that map to d (x, then y, then z), then by the
   loop, and the block at grid index (b_x, b_y, b_z) reads part (b_x, b_y, b_z, i) of that
   nesting; a grid dim that maps to no data dim of the input sees the whole dim (replicated);
2. the loop body runs on the tiles; each accumulator adds its iteration's contribution
   (`nored_rescale` runs the online-softmax recurrence, as a kernel does);
3. after the loop, the accumulators finish (mean and rms divide by the row width × loop range) and
   the post-loop ops run once per block;
4. each block output is stored by its omap: a grid dim that maps to data dim d concatenates the
   blocks' tiles along d (same nesting as the inputs); a grid dim that maps to none sums them.

The arithmetic is a `Semantics` (`prism.ir.semantics`): float64 by default, the op table's
references; data movement is the same in every domain.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from prism.errors import InputError, PrismError
from prism.ir.dims import evaluate
from prism.ir.graph import BlockGraph, KernelGraph, Map, Op
from prism.ir.ops import OPS, RESCALED
from prism.ir.semantics import FLOAT64, Semantics, SumBlocks
from prism.ir.spec import check


def interpret(graph: KernelGraph, *arrays: Any, assignment: Mapping[str, int] | None = None,
              semantics: Semantics | None = None, memo: TileMemo | None = None
              ) -> list[np.ndarray]:
    """Run `graph` on `arrays` (inputs in the graph's input order); return its outputs.

    A symbolic graph needs an `assignment` of every variable (grid sizes, loop ranges, map bits).
    `semantics` is the number domain (default `FLOAT64`, the op table's references). `memo`: a
    caller that runs many graphs on the same read-only arrays (the search's quick trials: its
    candidates share their first ops) keeps one `TileMemo` across the calls, and a value
    computed before from the same arrays the same way is looked up instead of computed again;
    the outputs are then read-only.

    NumPy's BLAS runs on one thread meanwhile: the interpreter multiplies many small tiles, and
    a threaded BLAS whose second thread waits for a busy core made each product up to 300×
    slower (attention's random tests, with anything else running on a 2-core machine, or a
    second search worker). The caller's setting is restored on return.
    """
    with threadpool_limits(1, user_api="blas"):
        return _interpret(graph, arrays, assignment, semantics, memo)


class TileMemo:
    """Values interpretations computed, by what each is a function of: the semantics, the
    read-only input arrays it was computed from (held here, so that no other array can take
    their identity), the maps, grid and loop range that tiled them, the ops (kinds and
    attributes) and the iteration. The least recently used go first past `max_bytes`; a value
    kept is made read-only, so no caller can change what a later run reads."""

    def __init__(self, max_bytes: int = 256 << 20) -> None:
        self.max_bytes = max_bytes
        self._values: OrderedDict[Hashable, np.ndarray] = OrderedDict()
        self._bytes = 0
        self._inputs: dict[int, np.ndarray] = {}
        self.hits = self.misses = 0

    def input_key(self, array: Any) -> Hashable | None:
        """The key of an input array, or None where it may change (writeable, or not NumPy's):
        what is computed from it is then not kept."""
        if not isinstance(array, np.ndarray) or array.flags.writeable:
            return None
        if id(array) not in self._inputs and len(self._inputs) >= _MEMO_INPUTS:
            self.clear()                          # the caller moved on to other arrays
        self._inputs[id(array)] = array
        return ("input", id(array))

    def get(self, key: Hashable) -> np.ndarray | None:
        value = self._values.get(key)
        if value is None:
            self.misses += 1
            return None
        self.hits += 1
        self._values.move_to_end(key)
        return value

    def put(self, key: Hashable, value: np.ndarray) -> None:
        if value.nbytes > self.max_bytes or key in self._values:
            return
        value.flags.writeable = False
        self._values[key] = value
        self._bytes += value.nbytes
        while self._bytes > self.max_bytes:
            _, dropped = self._values.popitem(last=False)
            self._bytes -= dropped.nbytes

    def clear(self) -> None:
        self._values.clear()
        self._inputs.clear()
        self._bytes = 0


_MEMO_INPUTS = 64


def _interpret(graph: KernelGraph, arrays: Sequence[Any], assignment: Mapping[str, int] | None,
               semantics: Semantics | None, memo: TileMemo | None) -> list[np.ndarray]:
    sem = semantics or FLOAT64
    env = dict(assignment or {})
    check(graph, env)
    if len(arrays) != len(graph.inputs):
        raise InputError(f"graph takes {len(graph.inputs)} inputs ({', '.join(graph.inputs)}), "
                         f"got {len(arrays)}; pass one array per input, in that order")
    values: dict[str, np.ndarray] = {}
    keys: dict[str, Hashable | None] = {}
    for name, arr in zip(graph.inputs, arrays, strict=True):
        values[name] = sem.convert(arr, name, _concrete(graph.shape(name), env))
        keys[name] = None if memo is None else memo.input_key(arr)
    for op in graph.ops:
        if op.kind in ("input", "output"):
            continue
        if op.kind == "customized":
            assert op.block is not None
            results, out_keys = _Kernel(op.block, env, sem, memo).run(
                [values[t] for t in op.inputs], [keys[t] for t in op.inputs])
            values.update(zip(op.outputs, results, strict=True))
            keys.update(zip(op.outputs, out_keys, strict=True))
            continue
        parts = [keys[t] for t in op.inputs]
        key = None if memo is None or None in parts else (sem, op.kind, op.attrs, tuple(parts))
        value = None if key is None or memo is None else memo.get(key)
        if value is None:
            value = _apply(sem, op, [values[t] for t in op.inputs], 0)
            if key is not None and memo is not None:
                memo.put(key, value)
        values[op.outputs[0]], keys[op.outputs[0]] = value, key
    return [values[t] for t in graph.outputs]


def _concrete(shape: Sequence[Any], env: Mapping[str, int]) -> tuple[int, ...]:
    return tuple(evaluate(d, env) for d in shape)


def _apply(sem: Semantics, op: Op, xs: list[np.ndarray], lead: int) -> np.ndarray:
    return sem.compute[op.kind](xs, op.attr, lead)


def _map_rows(m: Map, env: Mapping[str, int]) -> list[int]:
    """Per row, the data dim it splits, or -1."""
    out = []
    for row in m.rows:
        hits = [d for d, e in enumerate(row) if evaluate(e, env) == 1]
        out.append(hits[0] if hits else -1)
    return out


def load_tiles(data: np.ndarray, imap: list[int], fmap: int, grid: list[int],
               forloop_range: int) -> np.ndarray:
    """All tiles of `data`, shape [*grid', F', *tile]: grid' is g_p where the input is split by
    grid dim p and 1 where replicated; F' is F if fmap walks a dim, else 1."""
    rank = data.ndim
    # Split each data dim d into (parts of each grid dim mapped to d, in grid order; the loop
    # part if fmap is d; the tile) and remember which axis holds which part.
    new_shape: list[int] = []
    grid_axis: dict[int, int] = {}
    loop_axis = -1
    tile_axes: list[int] = []
    for d in range(rank):
        parts = [p for p, dd in enumerate(imap) if dd == d]
        size = data.shape[d]
        for p in parts:
            grid_axis[p] = len(new_shape)
            new_shape.append(grid[p])
            size //= grid[p]
        if fmap == d:
            loop_axis = len(new_shape)
            new_shape.append(forloop_range)
            size //= forloop_range
        tile_axes.append(len(new_shape))
        new_shape.append(size)
    split = data.reshape(new_shape)
    # Bring grid parts to the front (size-1 axes where replicated), then the loop, then the tile.
    for p in range(len(grid)):
        if p not in grid_axis:
            split = np.expand_dims(split, axis=split.ndim)
            grid_axis[p] = split.ndim - 1
    if loop_axis < 0:
        split = np.expand_dims(split, axis=split.ndim)
        loop_axis = split.ndim - 1
    order = [grid_axis[p] for p in range(len(grid))] + [loop_axis] + tile_axes
    return split.transpose(order)


def store_tiles(tiles: np.ndarray, omap: list[int], grid: list[int],
                sum_blocks: SumBlocks = FLOAT64.sum_blocks) -> np.ndarray:
    """Combine per-block tiles [*grid, *tile] into the output: concatenate along the omap'd data
    dims (grid order = nesting order, outermost first), sum over grid dims mapped to none (with
    `sum_blocks`, the semantics' sum)."""
    k = len(grid)
    tiles = np.broadcast_to(tiles, (*grid, *tiles.shape[k:]))
    rank = tiles.ndim - k
    summed = tuple(p for p in range(k) if omap[p] < 0)
    kept = [p for p in range(k) if omap[p] >= 0]
    if summed:
        tiles = sum_blocks(tiles, summed)
    # Axes now: kept grid dims (in order), then the tile dims.
    axis_of = {p: i for i, p in enumerate(kept)}
    order: list[int] = []
    out_shape: list[int] = []
    for d in range(rank):
        parts = [p for p in kept if omap[p] == d]
        order += [axis_of[p] for p in parts] + [len(kept) + d]
        size = tiles.shape[len(kept) + d]
        for p in parts:
            size *= grid[p]
        out_shape.append(size)
    return np.ascontiguousarray(tiles.transpose(order)).reshape(out_shape)


def run_block_graph(bg: BlockGraph, inputs: list[np.ndarray],
                    env: Mapping[str, int] | None = None,
                    semantics: Semantics = FLOAT64) -> list[np.ndarray]:
    """Execute one custom kernel: every block of the grid, every loop iteration."""
    return _Kernel(bg, env or {}, semantics, None).run(inputs, [None] * len(inputs))[0]


class _Kernel:
    """One custom kernel's run. Each value is computed when something reads it, once (per
    iteration in the loop body), and, where the caller keeps a `TileMemo` and the value's
    inputs are known to it, looked up there first by what it is a function of: its tensor's
    structural key (`_keys`), the semantics and the iteration (or after the loop)."""

    def __init__(self, bg: BlockGraph, env: Mapping[str, int], semantics: Semantics,
                 memo: TileMemo | None) -> None:
        self.bg, self.env, self.sem, self.memo = bg, env, semantics, memo
        self.grid = [evaluate(g, env) for g in bg.grid]
        self.loops = evaluate(bg.forloop_range, env)
        self.k = len(self.grid)
        self.post = bg.after_accum
        self.producer = {op.outputs[0]: op for op in bg.ops
                         if op.kind not in ("input", "output")}
        self.tiles: dict[str, np.ndarray] = {}
        self.keys: dict[str, Hashable | None] = {}
        self.finals: dict[str, np.ndarray] = {}

    def run(self, inputs: list[np.ndarray], keys: list[Hashable | None]
            ) -> tuple[list[np.ndarray], list[Hashable | None]]:
        """The kernel's outputs, and their keys (None where a value is not memoized)."""
        bg, env = self.bg, self.env
        for op, data, key in zip(bg.input_ops, inputs, keys, strict=True):
            imap = _map_rows(op.attr["imap"], env)
            fm = _map_rows(op.attr["fmap"], env)[0]
            self.tiles[op.outputs[0]] = load_tiles(data, imap, fm, self.grid, self.loops)
            self.keys[op.outputs[0]] = None if key is None else \
                ("load", key, tuple(imap), fm, tuple(self.grid), self.loops)
        for op in bg.ops:
            if op.kind not in ("input", "output"):
                parts = [self.keys[t] for t in op.inputs]
                self.keys[op.outputs[0]] = None if None in parts else \
                    (op.kind, op.attrs, tuple(parts), self.loops)
        last = self._accumulate()
        outs, out_keys = [], []
        for op in bg.output_ops:
            src = op.inputs[0]
            omap = _map_rows(op.attr["omap"], env)
            key = self._key(src, ("store", tuple(omap), tuple(self.grid)))
            stored = self._memo_get(key)
            if stored is None:
                tile = self._after(src, last)
                stored = store_tiles(tile, omap, self.grid, self.sem.sum_blocks)
                self._memo_put(key, stored)
            outs.append(stored)
            out_keys.append(key)
        return outs, out_keys

    def _accumulate(self) -> dict[str, np.ndarray]:
        """Run the loop for the accumulators the memo does not hold (each adds its iterations'
        steps in order); the last iteration's values, which an op after the loop may read."""
        accums = [op for op in self.bg.ops if OPS[op.kind].category == "accum"]
        missing = []
        for op in accums:
            found = self._memo_get(self._key(op.outputs[0], "after"))
            if found is None:
                missing.append(op)
            else:
                self.finals[op.outputs[0]] = found
        totals: dict[str, np.ndarray] = {}
        running: dict[str, np.ndarray] = {}       # nored_rescale: the running row max
        last: dict[str, np.ndarray] = {}
        for i in range(self.loops if missing else 0):
            last = {}
            for op in missing:
                name = op.outputs[0]
                x = self._body(op.inputs[0], i, last)
                if op.kind in RESCALED:
                    _rescale_step(self.sem, name, x, self._body(op.inputs[1], i, last), totals,
                                  running)
                    continue
                part = self.sem.accumulate[op.kind].step(x, op.attr)
                # Steps add with `+`; a domain that must reduce its sums (modular) does it in
                # finish.
                totals[name] = part if name not in totals else totals[name] + part
        for op in missing:
            name = op.outputs[0]
            if op.kind in RESCALED:
                final = totals[name]
            else:
                width = evaluate(self.bg.shape(op.inputs[0])[-1], self.env) * self.loops
                final = self.sem.accumulate[op.kind].finish(totals[name], width, op.attr)
            self.finals[name] = final
            self._memo_put(self._key(name, "after"), final)
        return last

    def _body(self, name: str, i: int, values: dict[str, np.ndarray]) -> np.ndarray:
        """A loop-body value at iteration i (`values`: that iteration's, so far)."""
        if name in values:
            return values[name]
        tiles = self.tiles.get(name)
        if tiles is not None:
            # tiles: [*grid', F', *tile]; iteration i reads loop part i (or the only part).
            # Basic indexing gives a view; np.take would copy the whole input every iteration.
            values[name] = tiles[(slice(None),) * self.k + (i if tiles.shape[self.k] > 1 else 0,)]
            return values[name]
        key = self._key(name, i)
        value = self._memo_get(key)
        if value is None:
            op = self.producer[name]
            value = _apply(self.sem, op, [self._body(t, i, values) for t in op.inputs], self.k)
            self._memo_put(key, value)
        values[name] = value
        return value

    def _after(self, name: str, last: dict[str, np.ndarray]) -> np.ndarray:
        """A value after the loop: an accumulator's, one computed from them, or a pre-loop tile
        as the last iteration left it (an op there reads only tiles the loop does not walk,
        the same in every iteration)."""
        if name in self.finals:
            return self.finals[name]
        if name not in self.post:
            return self._body(name, self.loops - 1, last)
        key = self._key(name, "after")
        value = self._memo_get(key)
        if value is None:
            op = self.producer[name]
            value = _apply(self.sem, op, [self._after(t, last) for t in op.inputs], self.k)
            self._memo_put(key, value)
        self.finals[name] = value
        return value

    def _key(self, name: str, where: object) -> Hashable | None:
        key = self.keys.get(name)
        return None if self.memo is None or key is None else (self.sem, key, where)

    def _memo_get(self, key: Hashable | None) -> np.ndarray | None:
        return None if key is None or self.memo is None else self.memo.get(key)

    def _memo_put(self, key: Hashable | None, value: np.ndarray) -> None:
        if key is not None and self.memo is not None:
            self.memo.put(key, value)


def _rescale_step(semantics: Semantics, name: str, x: np.ndarray, m: np.ndarray,
                  totals: dict[str, np.ndarray], running: dict[str, np.ndarray]) -> None:
    """One iteration of `nored_rescale`: the recurrence a kernel runs (FlashAttention's),
    M' = max(M, m), total' = total · e^(M − M') + x · e^(m − M')."""
    if semantics is not FLOAT64:
        raise PrismError(f"nored_rescale has no {semantics.name} semantics (it takes e^x of its "
                         "operands); interpret it in float64")
    if name not in totals:
        totals[name], running[name] = np.array(x, dtype=np.float64), m
        return
    new = np.maximum(running[name], m)
    totals[name] = totals[name] * np.exp(running[name] - new) + x * np.exp(m - new)
    running[name] = new
