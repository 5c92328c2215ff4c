"""The per-block view: which tile of each input one thread block reads at one loop iteration,
and which tile of each output it writes after the loop.

`BlockState` is the plain-Python model (no Jupyter): one custom kernel of a graph at one
assignment, read for its data movement only. It follows the maps as `prism.interpret` does
(`prism.ir.interpret`, `prism.instantiate.codegen`'s docstring):

- data dim d of a block input is cut, outermost first, by the grid dims whose imap row picks d
  (x, then y, then z), then by the loop when its fmap picks d, then into tiles; the block at
  (b_x, b_y, b_z) reads at iteration i the part numbered ((b_p·g_q + b_q)·F + i) along d, so
  its tile starts at that number × tile_d; a grid dim that picks no dim of the input replicates
  it (every block along it reads the same tile), and an input the loop does not walk is the
  same tile in every iteration;
- a block output is stored once, after the loop, by its omap: the same nesting without the loop;
  a grid dim that picks no dim of the output sums the blocks' tiles (each block adds a partial
  tile).

`BlockView` is the ipywidgets view: a slider per grid dim and one for the iteration, a step
button (iteration first, then the next block), each tensor drawn as SVG tiles with what the
block reads at this iteration filled, what it reads over the whole loop tinted, and the
sentence that says it.
"""

from __future__ import annotations

import html
import itertools
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import ipywidgets

from prism.errors import InputError, SpecError
from prism.ir.dims import evaluate
from prism.ir.graph import KernelGraph
from prism.ir.spec import problems, substitute_graph
from widgets.glossary import definition
from widgets.snapshot import Snapshotted

AXES = ("x", "y", "z")
Block = tuple[int, ...]            # a block's grid coordinates, one per grid dim


@dataclass(frozen=True)
class Box:
    """A rectangular slice of a kernel tensor: `[start, stop)` per data dim."""

    tensor: str
    ranges: tuple[tuple[int, int], ...]

    def __str__(self) -> str:
        return f"{self.tensor}[{', '.join(f'{a}:{b}' for a, b in self.ranges)}]"

    @property
    def slices(self) -> tuple[slice, ...]:
        return tuple(slice(a, b) for a, b in self.ranges)


@dataclass(frozen=True)
class Access:
    """How one block input loads from a kernel tensor, or one block output stores into one."""

    kind: str                      # "read" or "write"
    tensor: str                    # the kernel tensor
    tile: str                      # the block tensor loaded or stored
    shape: tuple[int, ...]         # the kernel tensor's shape
    cuts: tuple[tuple[int, ...], ...]   # per data dim, the grid dims that cut it, in grid order
    loop_dim: int | None           # the data dim the loop walks (inputs); None: no dim
    tile_shape: tuple[int, ...]
    summed: tuple[int, ...] = ()   # outputs: grid dims that pick no data dim (blocks summed)
    imap: tuple[int, ...] = ()     # per grid dim, the data dim it picks, or -1
    fmap: int = -1

    def box(self, block: Block, grid: Sequence[int], loops: int,
            iteration: int | None = None) -> Box:
        """The slice `block` touches at `iteration` (None: over the whole loop)."""
        ranges = []
        for d, (size, tile) in enumerate(zip(self.shape, self.tile_shape, strict=True)):
            part = 0
            for p in self.cuts[d]:              # outermost first: x, then y, then z
                part = part * grid[p] + block[p]
            if self.loop_dim == d:
                if iteration is None:           # the block's parts of every iteration
                    ranges.append((part * loops * tile, (part + 1) * loops * tile))
                    continue
                part = part * loops + iteration
            ranges.append((part * tile, (part + 1) * tile))
            assert ranges[-1][1] <= size
        return Box(self.tensor, tuple(ranges))


class BlockState:
    """The model behind `BlockView`: custom kernel `kernel` (0: the first) of `graph` at
    `assignment` (needed when the graph is an sGraph: grid sizes, loop ranges, map bits).
    Raises `SpecError` when the graph is not well formed at that assignment."""

    def __init__(self, graph: KernelGraph, assignment: Mapping[str, int] | None = None,
                 kernel: int = 0):
        env = dict(assignment or {})
        missing = graph.free_vars() - set(env)
        if missing:
            raise InputError(f"graph {graph.name or 'unnamed'} is symbolic; give "
                             f"{', '.join(sorted(missing))} values in the assignment")
        found = problems(graph, env)
        if found:
            raise SpecError(found)
        custom = [op for op in graph.ops if op.kind == "customized"]
        if not 0 <= kernel < len(custom):
            raise InputError(f"graph {graph.name or 'unnamed'} has {len(custom)} custom "
                             f"kernel(s); kernel {kernel} is not one of them")
        self.graph, self.kernel = graph, kernel
        # the graph's own variables (an assignment may carry more: a tuner's knobs)
        self.assignment = {k: v for k, v in env.items() if k in graph.free_vars()}
        self.kernels = len(custom)
        concrete = substitute_graph(graph, env)
        op = [o for o in concrete.ops if o.kind == "customized"][kernel]
        bg = op.block
        assert bg is not None        # the spec check rejects a custom op without a block graph
        self.grid: tuple[int, ...] = tuple(evaluate(g) for g in bg.grid)
        self.forloop_range: int = evaluate(bg.forloop_range)
        shape = {t: tuple(evaluate(d) for d in concrete.shape(t)) for t, _ in concrete.tensors}
        # Map.as_dims: per row of a concrete map, the data dim it picks, or -1
        self.inputs = tuple(self._read(t, b.outputs[0], shape[t], b.attr["imap"].as_dims(),
                                       b.attr["fmap"].as_dims()[0])
                            for t, b in zip(op.inputs, bg.input_ops, strict=True))
        self.outputs = tuple(self._write(t, b.inputs[0], shape[t], b.attr["omap"].as_dims())
                             for t, b in zip(op.outputs, bg.output_ops, strict=True))

    def _read(self, tensor: str, tile: str, shape: tuple[int, ...], imap: tuple[int, ...],
              fmap: int) -> Access:
        cuts = tuple(tuple(p for p, d in enumerate(imap) if d == dd) for dd in range(len(shape)))
        loop_dim = fmap if fmap >= 0 else None
        tile_shape = tuple(
            size // math.prod(self.grid[p] for p in cuts[d])
            // (self.forloop_range if loop_dim == d else 1) for d, size in enumerate(shape))
        return Access("read", tensor, tile, shape, cuts, loop_dim, tile_shape, imap=imap,
                      fmap=fmap)

    def _write(self, tensor: str, tile: str, shape: tuple[int, ...], omap: tuple[int, ...]
               ) -> Access:
        cuts = tuple(tuple(p for p, d in enumerate(omap) if d == dd) for dd in range(len(shape)))
        tile_shape = tuple(size // math.prod(self.grid[p] for p in cuts[d])
                           for d, size in enumerate(shape))
        summed = tuple(p for p, d in enumerate(omap) if d < 0)
        return Access("write", tensor, tile, shape, cuts, None, tile_shape, summed, imap=omap)

    # -- the blocks and their steps ---------------------------------------------------------------

    def blocks(self) -> Iterator[Block]:
        """Every block of the grid, the last grid dim fastest."""
        return itertools.product(*(range(g) for g in self.grid))

    def check(self, block: Block, iteration: int = 0) -> None:
        if len(block) != len(self.grid) or not all(0 <= b < g for b, g in
                                                   zip(block, self.grid, strict=True)):
            raise InputError(f"block {tuple(block)} is not in the grid {self.grid}")
        if not 0 <= iteration < self.forloop_range:
            raise InputError(f"iteration {iteration} is not in 0..{self.forloop_range - 1}")

    def step(self, block: Block, iteration: int) -> tuple[Block, int]:
        """The next (block, iteration) in execution order: the iterations of one block, then
        the next block; after the last block's last iteration, the first block's first."""
        self.check(block, iteration)
        if iteration + 1 < self.forloop_range:
            return tuple(block), iteration + 1
        order = list(self.blocks())
        return order[(order.index(tuple(block)) + 1) % len(order)], 0

    def reads(self, block: Block, iteration: int) -> tuple[Box, ...]:
        """The tile of each kernel input that `block` loads at `iteration`, in block-input
        order."""
        self.check(block, iteration)
        return tuple(a.box(block, self.grid, self.forloop_range, iteration) for a in self.inputs)

    def reads_over_loop(self, block: Block) -> tuple[Box, ...]:
        """What `block` loads over all its iterations, per block input."""
        self.check(block)
        return tuple(a.box(block, self.grid, self.forloop_range) for a in self.inputs)

    def writes(self, block: Block) -> tuple[Box, ...]:
        """The tile of each kernel output that `block` stores after the loop (for a summed
        output: the slice it adds its partial tile to)."""
        self.check(block)
        return tuple(a.box(block, self.grid, self.forloop_range) for a in self.outputs)

    def sentence(self, block: Block, iteration: int) -> str:
        """What `block` does at `iteration`, in words (plain text)."""
        reads = _and([str(b) for b in self.reads(block, iteration)])
        parts, notes = [], []
        for access, box in zip(self.outputs, self.writes(block), strict=True):
            if access.summed:
                parts.append(f"adds its partial tile to {box}")
                axes = " and ".join(AXES[p] for p in access.summed)
                notes.append(f"the blocks along {axes} are summed into {access.tensor}")
            else:
                parts.append(f"writes {box}")
        return (f"block {tuple(block)} iteration {iteration} reads {reads}; "
                f"{_and(parts)} after the loop" + "".join(f" ({n})" for n in notes))


def _and(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


# -- drawing ------------------------------------------------------------------------------------

_READ, _WRITE, _LINE = "#2563eb", "#ea580c", "#a1a1aa"
PANEL = 200                # px: the longer side of one tensor's picture
MAX_LINES = 64             # tile boundaries drawn per axis at most (beyond, only the tiles)
MAX_PANELS = 8             # leading-dim slices drawn per tensor at most


def _hover(shown: str, term: str) -> str:
    """`shown`, escaped, with the glossary's definition of `term` as hover text if it has one."""
    meaning = definition(term)
    text = html.escape(shown)
    return text if meaning is None else \
        f'<abbr title="{html.escape(meaning, quote=True)}">{text}</abbr>'


def _plane(shape: tuple[int, ...]) -> tuple[int, int]:
    """The (rows, cols) drawn: the last two dims (a vector is one row)."""
    return (1, shape[0]) if len(shape) == 1 else (shape[-2], shape[-1])


def tensor_svg(access: Access, now: Box, over_loop: Box) -> str:
    """One tensor as a grid of tiles: `now` filled, `over_loop` tinted. A tensor of rank 3 or 4
    is drawn one panel per index of its leading dims (those the block touches, when there are
    more than `MAX_PANELS`)."""
    rows, cols = _plane(access.shape)
    tile_rows, tile_cols = _plane(access.tile_shape)
    width = PANEL if cols >= rows else max(24, round(PANEL * cols / rows))
    height = PANEL if rows > cols else max(24, round(PANEL * rows / cols))
    lead = access.shape[:-2]
    panels = list(itertools.product(*(range(n) for n in lead)))
    if len(panels) > MAX_PANELS:
        panels = list(itertools.product(*(range(a, b) for a, b in over_loop.ranges[:-2])))
        panels = panels[:MAX_PANELS]
    label_h = 14 if lead else 0
    color = _READ if access.kind == "read" else _WRITE
    out = []
    for k, index in enumerate(panels):
        x0, y0 = k * (width + 8), label_h
        if lead:
            out.append(f'<text x="{x0}" y="11" font-size="10" font-family="monospace">'
                       f'{html.escape(access.tensor)}[{", ".join(map(str, index))}, :, :]</text>')
        out.append(f'<rect x="{x0}" y="{y0}" width="{width}" height="{height}" fill="#fafafa" '
                   f'stroke="{_LINE}"/>')
        for box, cls, opacity in ((over_loop, "prism-block-span", 0.18),
                                  (now, _now_class(access), 0.75)):
            if not all(a <= i < b for i, (a, b) in zip(index, box.ranges, strict=False)):
                continue
            (r0, r1), (c0, c1) = _plane_ranges(box)
            outline = f' stroke="{color}" stroke-width="1.5"' if box is now else ""
            full = ",".join(f"{a}:{b}" for a, b in box.ranges)
            out.append(
                f'<rect class="{cls}" data-range="{full}" x="{x0 + width * c0 / cols:.2f}" '
                f'y="{y0 + height * r0 / rows:.2f}" width="{width * (c1 - c0) / cols:.2f}" '
                f'height="{height * (r1 - r0) / rows:.2f}" fill="{color}" '
                f'fill-opacity="{opacity}"{outline}><title>{html.escape(str(box))}</title></rect>')
        for c in range(tile_cols, cols, tile_cols) if cols // tile_cols <= MAX_LINES else ():
            x = x0 + width * c / cols
            out.append(f'<line x1="{x:.2f}" y1="{y0}" x2="{x:.2f}" y2="{y0 + height}" '
                       f'stroke="{_LINE}" stroke-width="0.5"/>')
        for r in range(tile_rows, rows, tile_rows) if rows // tile_rows <= MAX_LINES else ():
            y = y0 + height * r / rows
            out.append(f'<line x1="{x0}" y1="{y:.2f}" x2="{x0 + width}" y2="{y:.2f}" '
                       f'stroke="{_LINE}" stroke-width="0.5"/>')
    total_w = max(1, len(panels)) * (width + 8)
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="prism-tensor" '
            f'data-tensor="{html.escape(access.tensor, quote=True)}" width="{total_w}" '
            f'height="{height + label_h + 1}">{"".join(out)}</svg>')


def _now_class(access: Access) -> str:
    return "prism-tile-read" if access.kind == "read" else "prism-tile-write"


def _plane_ranges(box: Box) -> tuple[tuple[int, int], tuple[int, int]]:
    return ((0, 1), box.ranges[0]) if len(box.ranges) == 1 else (box.ranges[-2], box.ranges[-1])


def _map_text(access: Access) -> str:
    picks = ", ".join("-" if d < 0 else str(d) for d in access.imap)
    if access.kind == "write":
        return f"{_hover('omap', 'omap')} ({picks})"
    loop = "-" if access.fmap < 0 else str(access.fmap)
    return f"{_hover('imap', 'imap')} ({picks}), {_hover('fmap', 'fmap')} {loop}"


def _notes(access: Access, loops: int) -> str:
    """What the maps mean for this tensor, in words: replicated along a grid dim, the same tile
    in every iteration, summed over the blocks along a grid dim."""
    spare = [AXES[p] for p, d in enumerate(access.imap) if d < 0]
    notes = []
    if spare and access.kind == "read":
        notes.append(f"{_hover('replicated', 'replicated')} along {' and '.join(spare)}")
    if spare and access.kind == "write":
        notes.append(f"summed over the blocks along {' and '.join(spare)}")
    if access.kind == "read" and access.loop_dim is None and loops > 1:
        notes.append("the same tile in every iteration")
    return "".join(f" · {n}" for n in notes)


def _figure(access: Access, now: Box, over_loop: Box, loops: int) -> str:
    verb = "reads" if access.kind == "read" else "writes"
    caption = (f"<b>{html.escape(access.tensor)}</b> {list(access.shape)} · "
               f"{_hover('tile', 'tile')} {list(access.tile_shape)}<br>{_map_text(access)}"
               f"{_notes(access, loops)}<br>"
               f"<span style='color:#52525b'>{verb} {html.escape(str(now))}</span>")
    return (f"<figure style='margin:0 14px 8px 0;font:12px monospace'>"
            f"<figcaption>{caption}</figcaption>{tensor_svg(access, now, over_loop)}</figure>")


def picture_html(state: BlockState, block: Block, iteration: int) -> str:
    """Every input of the kernel, then every output, each as its tiles."""
    loops = state.forloop_range
    ins = "".join(_figure(a, now, span, loops) for a, now, span in
                  zip(state.inputs, state.reads(block, iteration), state.reads_over_loop(block),
                      strict=True))
    outs = "".join(_figure(a, box, box, loops) for a, box in
                   zip(state.outputs, state.writes(block), strict=True))
    # inputs in one group, the arrow and the outputs in another: a narrow page wraps the
    # outputs below the inputs, arrow first
    row = "display:flex;flex-wrap:wrap;align-items:flex-end"
    return (f"<div class='prism-blocks' style='{row}'><div style='{row}'>{ins}</div>"
            f"<div style='{row}'><div style='font-size:24px;margin:0 16px 40px 0'>→</div>"
            f"{outs}</div></div>")


def header_html(state: BlockState) -> str:
    grid = ", ".join(f"{AXES[p]} = {g}" for p, g in enumerate(state.grid))
    shown = ", ".join(f"{k} = {v}" for k, v in sorted(state.assignment.items()))
    return (f"custom kernel {state.kernel}: {_hover('grid', 'grid')} ({grid}), "
            f"{_hover('for-loop', 'for-loop')} range {state.forloop_range}"
            + (f" · {_hover('assignment', 'assignment')} {html.escape(shown)}" if shown else "")
            + f"<br><span style='color:{_READ}'>■</span> read at this iteration "
            f"<span style='color:{_READ};opacity:.3'>■</span> read over the block's loop "
            f"<span style='color:{_WRITE}'>■</span> written after the loop")


class BlockView(Snapshotted, ipywidgets.VBox):
    """A slider per grid dim and one for the loop iteration, a step button, the tensors as
    tiles and the sentence of what the chosen block reads and writes."""

    def __init__(self, graph: KernelGraph, assignment: Mapping[str, int] | None = None,
                 kernel: int = 0, **kwargs: Any):
        w = ipywidgets
        self.state = BlockState(graph, assignment, kernel)
        wide = {"description_width": "initial"}
        self.block_sliders = [
            w.IntSlider(value=0, min=0, max=g - 1, description=f"block {AXES[p]}", style=wide,
                        disabled=g == 1, continuous_update=False)
            for p, g in enumerate(self.state.grid)]
        loops = self.state.forloop_range
        self.iteration = w.IntSlider(value=0, min=0, max=loops - 1, description="iteration",
                                     style=wide, disabled=loops == 1, continuous_update=False)
        self.step_button = w.Button(description="step", tooltip="the next iteration, then the "
                                    "next block", icon="step-forward")
        self.header = w.HTML(header_html(self.state))
        self.picture = w.HTML()
        self.line = w.HTML()
        self._hold = False             # True while show() moves several sliders at once
        for slider in (*self.block_sliders, self.iteration):
            slider.observe(self._redraw, names="value")
        self.step_button.on_click(self._step)
        self._redraw()
        super().__init__(children=[self.header,
                                   w.HBox([*self.block_sliders, self.iteration,
                                           self.step_button]),
                                   self.line, self.picture], **kwargs)

    @property
    def block(self) -> Block:
        return tuple(s.value for s in self.block_sliders)

    def show(self, block: Block, iteration: int = 0) -> None:
        """Choose a block and an iteration, as the sliders do."""
        self.state.check(block, iteration)
        self._hold = True
        for s, b in zip(self.block_sliders, block, strict=True):
            s.value = b
        self._hold = False
        self.iteration.value = iteration
        self._redraw()

    def _step(self, _button: Any = None) -> None:
        self.show(*self.state.step(self.block, self.iteration.value))

    def _redraw(self, _change: Any = None) -> None:
        if self._hold:
            return
        block, i = self.block, self.iteration.value
        self.line.value = (f"<div class='prism-block-line' style='font:13px monospace;"
                           f"margin:4px 0'>{html.escape(self.state.sentence(block, i))}</div>")
        self.picture.value = picture_html(self.state, block, i)
        self._snapshot_changed()

    def snapshot_summary(self) -> str:
        """The snapshot's line: the block and iteration shown, in the view's own sentence."""
        return html.escape(f"blocks · {self.state.sentence(self.block, self.iteration.value)}")
