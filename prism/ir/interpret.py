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

Runs of many graphs on the same read-only inputs may share a `Values`: each value is named by
what it is computed from, and one an earlier run computed is taken, not computed again (a
search's random tests, whose candidates share most of their ops).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from prism.errors import InputError, PrismError
from prism.ir.dims import evaluate
from prism.ir.graph import BlockGraph, KernelGraph, Map, Op
from prism.ir.ops import OPS, RESCALED
from prism.ir.semantics import FLOAT64, Semantics, SumBlocks
from prism.ir.spec import check


class Values:
    """What runs of many graphs on the same inputs computed, by what each value was computed
    from, so a later run takes a value an earlier one made (a search's random tests: its
    candidates share most of their ops, each tested on the same draw).

    A value is named by its op and the names of its operands, down to the input arrays (a
    tile by its input, maps, grid and loop range as numbers; an accumulator by its operand in
    every iteration), so two runs that name a value alike compute it alike, and the one kept
    is the one the later run would compute. An input is named by the array object and the
    semantics; only a read-only array is named (one the caller could still change is not
    the same input twice), and the memo holds it, so no other array takes its identity. Kept
    by bytes, the least recently used dropped first; the values are read-only, so no run can
    change what a later one takes. Safe to share between threads (a search in the workbench's
    thread beside one in the notebook's)."""

    NAMES = 1 << 20     # names kept before all is dropped (at a run's start, never within)

    def __init__(self, limit_bytes: int = 256 << 20):
        self.limit_bytes = limit_bytes
        self.hits = self.misses = 0
        self._names: dict[tuple[Any, ...], int] = {}
        self._values: OrderedDict[int, np.ndarray] = OrderedDict()
        self._bytes = 0
        self._inputs: dict[int, Any] = {}
        self._lock = threading.Lock()
        self._running = 0           # runs under way (in any thread)
        self._stale = False         # dropping everything waits for them

    def input_name(self, array: Any, semantics: Semantics) -> int | None:
        """The name of an input array, or None where it is writable (see above)."""
        if not isinstance(array, np.ndarray) or array.flags.writeable:
            return None
        with self._lock:
            self._inputs.setdefault(id(array), array)
        return self.name(("input", id(array), semantics.name))

    def start_run(self) -> None:
        """Before a run names anything: drop everything once the names grow past `NAMES` (a
        long session's searches), so they stay bounded as the values are, or where `clear`
        was asked meanwhile; only while no other run is under way, whose names would then
        mean other values."""
        with self._lock:
            if self._running == 0 and (self._stale or len(self._names) > self.NAMES):
                self._drop()
            self._running += 1

    def end_run(self) -> None:
        with self._lock:
            self._running -= 1

    def name(self, key: tuple[Any, ...]) -> int:
        """A small number for `key`, the same for an equal key."""
        with self._lock:
            return self._names.setdefault(key, len(self._names))

    def clear(self) -> None:
        """Drop everything: now, or where a run is under way, when the next one starts with
        none under way."""
        with self._lock:
            if self._running == 0:
                self._drop()
            else:
                self._stale = True

    def _drop(self) -> None:
        self._names.clear()
        self._values.clear()
        self._inputs.clear()
        self._bytes, self._stale = 0, False

    def get(self, name: int) -> np.ndarray | None:
        """The value kept under `name`, if it is."""
        with self._lock:
            found = self._values.get(name)
            if found is not None:
                self._values.move_to_end(name)
                self.hits += 1
            return found

    def value(self, name: int, compute: Callable[[], np.ndarray]) -> np.ndarray:
        """The value kept under `name`, else `compute()`'s, kept."""
        found = self.get(name)
        if found is not None:
            return found
        made = compute()
        with self._lock:
            self.misses += 1
            if made.nbytes <= self.limit_bytes // 4 and name not in self._values:
                made.setflags(write=False)
                self._values[name] = made
                self._bytes += made.nbytes
                while self._bytes > self.limit_bytes:
                    _, dropped = self._values.popitem(last=False)
                    self._bytes -= dropped.nbytes
        return made


def interpret(graph: KernelGraph, *arrays: Any, assignment: Mapping[str, int] | None = None,
              semantics: Semantics | None = None, values: Values | None = None
              ) -> list[np.ndarray]:
    """Run `graph` on `arrays` (inputs in the graph's input order); return its outputs.

    A symbolic graph needs an `assignment` of every variable (grid sizes, loop ranges, map bits).
    `semantics` is the number domain (default `FLOAT64`, the op table's references).
    `values`: what earlier runs on these same arrays and semantics computed (`Values`), to take
    from and add to.

    NumPy's BLAS runs on one thread meanwhile: the interpreter multiplies many small tiles, and
    a threaded BLAS whose second thread waits for a busy core made each product up to 300×
    slower (attention's random tests, with anything else running on a 2-core machine, or a
    second search worker). The caller's setting is restored on return.
    """
    if values is not None:
        values.start_run()
    try:
        with threadpool_limits(1, user_api="blas"):
            return _interpret(graph, arrays, assignment, semantics, values)
    finally:
        if values is not None:
            values.end_run()


def _interpret(graph: KernelGraph, arrays: Sequence[Any], assignment: Mapping[str, int] | None,
               semantics: Semantics | None, memo: Values | None) -> list[np.ndarray]:
    sem = semantics or FLOAT64
    env = dict(assignment or {})
    check(graph, env)
    if len(arrays) != len(graph.inputs):
        raise InputError(f"graph takes {len(graph.inputs)} inputs ({', '.join(graph.inputs)}), "
                         f"got {len(arrays)}; pass one array per input, in that order")
    values: dict[str, np.ndarray] = {}
    names: dict[str, int] = {}      # with `memo`: each tensor's name there
    for name, arr in zip(graph.inputs, arrays, strict=True):
        values[name] = sem.convert(arr, name, _concrete(graph.shape(name), env))
        if memo is not None:
            named = memo.input_name(arr, sem)
            if named is None:       # an input that may change: nothing is taken or kept
                memo = None
            else:
                names[name] = named
    for op in graph.ops:
        if op.kind in ("input", "output"):
            continue
        if op.kind == "customized":
            assert op.block is not None
            results, out_names = _run_block(op.block, [values[t] for t in op.inputs], env, sem,
                                            memo, [names.get(t, -1) for t in op.inputs])
            values.update(zip(op.outputs, results, strict=True))
            if memo is not None:
                names.update(zip(op.outputs, out_names, strict=True))
        else:
            values[op.outputs[0]] = _computed(sem, op, values, 0, memo, names)
    return [values[t] for t in graph.outputs]


def _computed(sem: Semantics, op: Op, vals: Mapping[str, np.ndarray], lead: int,
              memo: Values | None, names: dict[str, int]) -> np.ndarray:
    """`op`'s value; with `memo`, named in `names` and taken from `memo` where made."""
    if memo is None:
        return _apply(sem, op, [vals[t] for t in op.inputs], lead)
    vid = names[op.outputs[0]] = memo.name(_op_key(op, lead, names))
    return memo.value(vid, partial(_apply, sem, op, [vals[t] for t in op.inputs], lead))


def _op_key(op: Op, lead: int, names: Mapping[str, int]) -> tuple[Any, ...]:
    """What an op's value is computed from: the op, its attributes, its operands' names."""
    return (*_op_head(op, lead), tuple(names[t] for t in op.inputs))


def _op_head(op: Op, lead: int) -> tuple[Any, ...]:
    attrs = tuple(sorted((k, v if isinstance(v, int | float | str | None) else repr(v))
                         for k, v in op.attr.items()))
    return (op.kind, attrs, lead)


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
    return _run_block(bg, inputs, env or {}, semantics, None, [])[0]


def _run_block(bg: BlockGraph, inputs: list[np.ndarray], env: Mapping[str, int],
               semantics: Semantics, memo: Values | None, input_names: list[int]
               ) -> tuple[list[np.ndarray], list[int]]:
    """`run_block_graph`; with `memo`, each value named there (from `input_names`, the
    kernel inputs' names) and taken from it where an earlier run made it. Also the outputs'
    names (empty without `memo`)."""
    grid = [evaluate(g, env) for g in bg.grid]
    loops = evaluate(bg.forloop_range, env)
    k = len(grid)
    post = bg.after_accum
    all_tiles = {}
    tile_names: dict[str, int] = {}
    for n, (op, data) in enumerate(zip(bg.input_ops, inputs, strict=True)):
        fm = _map_rows(op.attr["fmap"], env)[0]
        imap = _map_rows(op.attr["imap"], env)
        all_tiles[op.outputs[0]] = load_tiles(data, imap, fm, grid, loops)
        if memo is not None:
            tile_names[op.outputs[0]] = memo.name(("tiles", input_names[n], tuple(imap), fm,
                                                   tuple(grid), loops))
    body = [op for op in bg.ops if op.kind not in ("input", "output")
            and op.outputs[0] not in post]
    accums = [op for op in bg.ops if OPS[op.kind].category == "accum"]
    after = [op for op in bg.ops if op.kind not in ("input", "output") and op not in accums
             and op.outputs[0] in post]
    names: dict[str, int] = {}
    # with `memo`: each accumulator's name, from its operands' names in every iteration; one
    # already made skips its steps
    acc_names = _accum_names(bg, all_tiles, tile_names, body, accums, loops, k, env, memo) \
        if memo is not None and accums else {}
    totals: dict[str, np.ndarray] = {}
    running: dict[str, np.ndarray] = {}       # nored_rescale: the running row max
    vals: dict[str, np.ndarray] = {}
    made = {n: v for n, v in ((n, memo.get(a)) for n, a in acc_names.items())
            if v is not None} if memo is not None else {}
    stepped = [op for op in accums if op.outputs[0] not in made]
    for i in range(loops):
        vals = {}
        for name, tiles in all_tiles.items():
            # tiles: [*grid', F', *tile]; iteration i reads loop part i (or the only part).
            # Basic indexing gives a view; np.take would copy the whole input every iteration.
            part_of = i if tiles.shape[k] > 1 else 0
            vals[name] = tiles[(slice(None),) * k + (part_of,)]
            if memo is not None:
                names[name] = memo.name(("at", tile_names[name], part_of))
        for op in body:
            vals[op.outputs[0]] = _computed(semantics, op, vals, k, memo, names)
        for op in stepped:
            name = op.outputs[0]
            if op.kind in RESCALED:
                _rescale_step(semantics, name, vals[op.inputs[0]], vals[op.inputs[1]], totals,
                              running)
                continue
            acc = semantics.accumulate[op.kind]
            part = acc.step(vals[op.inputs[0]], op.attr)
            # Steps add with `+`; a domain that must reduce its sums (modular) does it in finish.
            totals[name] = part if name not in totals else totals[name] + part
    # after the loop: the accumulated tiles, and the pre-loop tiles as the last iteration left
    # them (an op there reads only those the loop does not walk, the same in every iteration)
    for op in accums:
        if memo is not None:
            names[op.outputs[0]] = acc_names[op.outputs[0]]
            vals[op.outputs[0]] = made[op.outputs[0]] if op.outputs[0] in made else \
                memo.value(acc_names[op.outputs[0]],
                           partial(_finish, semantics, bg, op, totals, loops, env))
        else:
            vals[op.outputs[0]] = _finish(semantics, bg, op, totals, loops, env)
    for op in after:
        vals[op.outputs[0]] = _computed(semantics, op, vals, k, memo, names)
    outputs: list[np.ndarray] = []
    out_names: list[int] = []
    for op in bg.output_ops:
        omap = _map_rows(op.attr["omap"], env)
        if memo is None:
            outputs.append(store_tiles(vals[op.inputs[0]], omap, grid, semantics.sum_blocks))
            continue
        vid = memo.name(("store", names[op.inputs[0]], tuple(omap), tuple(grid)))
        outputs.append(memo.value(vid, partial(store_tiles, vals[op.inputs[0]], omap, grid,
                                               semantics.sum_blocks)))
        out_names.append(vid)
    return outputs, out_names


def _finish(semantics: Semantics, bg: BlockGraph, op: Op, totals: dict[str, np.ndarray],
            loops: int, env: Mapping[str, int]) -> np.ndarray:
    """An accumulator's tile after the loop, from its total."""
    if op.kind in RESCALED:
        return totals[op.outputs[0]]
    acc = semantics.accumulate[op.kind]
    width = evaluate(bg.shape(op.inputs[0])[-1], env) * loops
    return acc.finish(totals[op.outputs[0]], width, op.attr)


def _accum_names(bg: BlockGraph, all_tiles: Mapping[str, np.ndarray],
                 tile_names: Mapping[str, int], body: list[Op], accums: list[Op], loops: int,
                 k: int, env: Mapping[str, int], memo: Values) -> dict[str, int]:
    """Each accumulator's name in `memo`: its op, its width, and its operands' names in
    every iteration (the body's names worked out without computing a value)."""
    per_iteration: dict[str, list[tuple[int, ...]]] = {op.outputs[0]: [] for op in accums}
    for i in range(loops):
        names = {name: memo.name(("at", tile_names[name], i if tiles.shape[k] > 1 else 0))
                 for name, tiles in all_tiles.items()}
        for op in body:
            names[op.outputs[0]] = memo.name(_op_key(op, k, names))
        for op in accums:
            per_iteration[op.outputs[0]].append(tuple(names[t] for t in op.inputs))
    return {op.outputs[0]: memo.name(("accum", *_op_head(op, k),
                                      evaluate(bg.shape(op.inputs[0])[-1], env) * loops,
                                      tuple(per_iteration[op.outputs[0]])))
            for op in accums}


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
