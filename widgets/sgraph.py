"""The sGraph view: one kernel graph (symbolic or concrete), its block graphs, and one member of
its family at a time.

`SGraphState` is the plain-Python model (no Jupyter): what the graph says — kernels, block ops,
tensors with symbolic shapes, imap/fmap/omap matrices, size variables with their candidate
values — and, at an assignment, the concrete member: tile shapes, grid, loop, and whether it is
well formed (`prism.ir.spec.problems`) and fits the device (the limits `within_limits` checks,
evaluated here one by one so that the failing one can be named). `SGraphView` is the ipywidgets
view over it.

The abstract expression of a tensor is the search's (`prism.search.abstract`): the term of the
trivial instantiation — no data movement, accumulators as their plain reductions — built op by op
with `op_term` over the kernel inputs' leaves, as `prism.search.state` builds it while it
generates. For a concrete-map graph it equals the verifier's term
(`prism.verify.translate.translate`) of the graph with every size 1.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import ipywidgets

from prism.cost.devices import DeviceSpec, default_device
from prism.errors import DimExprError, PrismError
from prism.expr.terms import Term
from prism.ir.dims import Dim, evaluate
from prism.ir.graph import BlockGraph, KernelGraph, Map
from prism.ir.ops import bit_names, data_dim
from prism.ir.spec import problems
from prism.search.abstract import op_term
from prism.search.hardware import HardwareVerdict, check_hardware, smem_tiles
from prism.verify.translate import leaf, tensor_leaf
from widgets.glossary import abbr
from widgets.snapshot import Snapshotted

Entry = int | str          # a map entry: 0/1, or the name of a 0/1 map variable


# -- what the graph says ------------------------------------------------------------------------

@dataclass(frozen=True)
class KernelOp:
    """One op of the kernel graph (inputs and outputs of the graph included)."""

    index: int
    kind: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    custom: int | None = None      # which custom kernel (render's numbering), if it is one


@dataclass(frozen=True)
class BlockOp:
    index: int
    kind: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    stage: str                     # "load", "loop body", "after loop" or "store"


@dataclass(frozen=True)
class BlockTensor:
    name: str
    shape: tuple[str, ...]         # dimension expressions
    post: bool                     # computed once per block, after the loop


@dataclass(frozen=True)
class MapMatrix:
    """`rows[p][d]` = 1 when parallel dim p (a grid dim, or the loop) splits data dim d."""

    kind: str                      # "imap", "fmap" or "omap"
    tile: str                      # the block tensor loaded or stored
    tensor: str                    # the kernel tensor it reads or writes
    row_labels: tuple[str, ...]    # "x", "y", "z" or "loop"
    rows: tuple[tuple[Entry, ...], ...]


@dataclass(frozen=True)
class CustomKernel:
    index: int                     # among custom kernels, as the SVG labels them
    op_index: int                  # in graph.ops
    grid: tuple[str, ...]
    forloop_range: str
    ops: tuple[BlockOp, ...]
    tensors: tuple[BlockTensor, ...]
    maps: tuple[MapMatrix, ...]

    @property
    def title(self) -> str:
        return (f"custom kernel {self.index}: grid ({' × '.join(self.grid)}), "
                f"forloop range {self.forloop_range}")


@dataclass(frozen=True)
class SizeVariable:
    name: str
    role: str                      # "grid", "loop" or "map" (a 0/1 map bit of a family)
    candidates: tuple[int, ...]


# -- one member of the family -------------------------------------------------------------------

@dataclass(frozen=True)
class Limit:
    """A device limit the member breaks: `value` > `bound` (for `matmul_tile`: < `bound`)."""

    kernel: int
    constraint: str                # "blocks", "smem" or "matmul_tile"
    value: int
    bound: int
    message: str


@dataclass(frozen=True)
class KernelInstance:
    index: int
    grid: tuple[int | None, ...]   # None: the size does not evaluate under the assignment
    forloop_range: int | None
    blocks: int | None
    smem_bytes: int | None
    tiles: dict[str, tuple[int | None, ...]]


@dataclass(frozen=True)
class Instance:
    assignment: dict[str, int]
    kernels: tuple[KernelInstance, ...]
    problems: tuple[str, ...]      # spec violations (divisibility, shapes) under the assignment
    limits: tuple[Limit, ...]      # device limits broken

    @property
    def feasible(self) -> bool:
        return not self.problems and not self.limits

    @property
    def verdict(self) -> str:
        """'feasible', or what fails first: a device limit, else a spec problem."""
        if self.feasible:
            return "feasible"
        return self.limits[0].message if self.limits else self.problems[0]

    def tile(self, name: str, kernel: int = 0) -> tuple[int | None, ...]:
        return self.kernels[kernel].tiles[name]


class SGraphState:
    """The model behind `SGraphView`: a kernel graph read for display, and its members."""

    def __init__(self, graph: KernelGraph, device: DeviceSpec | None = None):
        self.graph = graph
        self.device = device or default_device()
        self.kernels = tuple(_kernel_ops(graph))
        self.custom = tuple(_custom(i, op_index, bg, graph) for i, (op_index, bg) in
                            enumerate(_blocks(graph)))
        self._terms, self._block_terms = _abstract_terms(graph)

    @classmethod
    def from_json(cls, doc: Mapping[str, Any] | str, device: DeviceSpec | None = None
                  ) -> SGraphState:
        return cls(KernelGraph.from_json(json.loads(doc) if isinstance(doc, str) else doc),
                   device)

    def variables(self) -> list[SizeVariable]:
        """Grid sizes, then loop ranges (`prism.instantiate.params`), then any map bits."""
        from prism.instantiate.params import variables

        out = [SizeVariable(v.name, v.role, tuple(v.candidates())) for v in variables(self.graph)]
        bits = sorted(_bits(self.graph))
        return out + [SizeVariable(b, "map", (0, 1)) for b in bits]

    def default_assignment(self) -> dict[str, int]:
        """The first feasible assignment of the sizes, else each variable's first candidate."""
        from prism.instantiate.params import assignments

        first = {v.name: v.candidates[0] for v in self.variables()}
        if _bits(self.graph):
            return first
        found = assignments(self.graph, self.device, limit=1)
        return {**first, **found[0]} if found else first

    def at(self, assignment: Mapping[str, int]) -> Instance:
        env = dict(assignment)
        found = tuple(problems(self.graph, env))
        kernels, limits = [], []
        for k, (_, bg) in enumerate(_blocks(self.graph)):
            inst = _instance(k, bg, env, self.device)
            kernels.append(inst)
            limits += _limits(k, bg, inst, self.device)
        return Instance(env, tuple(kernels), found, tuple(limits))

    def hardware(self) -> HardwareVerdict:
        """Whether ANY assignment fits (the search's z3 rule, with its unsat core if none)."""
        return check_hardware(self.graph, self.device)

    def tensor_names(self) -> list[tuple[int | None, str]]:
        """Every tensor with an abstract expression: (None, name) at kernel level, then
        (custom kernel, name) for block tensors."""
        return [(None, t) for t in self._terms] + [
            (k, t) for k, terms in enumerate(self._block_terms) for t in terms]

    def abstract_term(self, name: str, kernel: int | None = None) -> Term:
        """The abstract expression of a kernel tensor, or of a block tensor (of custom kernel
        `kernel`, or of the first that has it)."""
        if kernel is None and name in self._terms:
            return self._terms[name]
        for k, terms in enumerate(self._block_terms):
            if kernel in (None, k) and name in terms:
                return terms[name]
        raise KeyError(f"no tensor {name!r} in graph {self.graph.name or 'unnamed'}; "
                       f"tensors: {', '.join(t for _, t in self.tensor_names())}")

    def abstract(self, name: str, kernel: int | None = None) -> str:
        return str(self.abstract_term(name, kernel))


def _blocks(graph: KernelGraph) -> list[tuple[int, BlockGraph]]:
    return [(i, op.block) for i, op in enumerate(graph.ops)
            if op.kind == "customized" and op.block is not None]


def _kernel_ops(graph: KernelGraph) -> list[KernelOp]:
    custom = {op_index: k for k, (op_index, _) in enumerate(_blocks(graph))}
    return [KernelOp(i, op.kind, op.inputs, op.outputs, custom.get(i))
            for i, op in enumerate(graph.ops)]


def _bits(graph: KernelGraph) -> set[str]:
    names: set[str] = set()
    for _, bg in graph.iter_blocks():
        for op in bg.ops:
            for m in op.attr.values():
                if isinstance(m, Map):
                    names |= {n for row in m.rows for e in row for n in bit_names(e)}
    return names


def _entry(e: Dim) -> Entry:
    return e.value if e.is_const else str(e)


def _matrix(kind: str, tile: str, tensor: str, m: Map) -> MapMatrix:
    labels = ("loop",) if kind == "fmap" else ("x", "y", "z")[:m.num_rows]
    return MapMatrix(kind, tile, tensor, labels,
                     tuple(tuple(_entry(e) for e in row) for row in m.rows))


def _custom(index: int, op_index: int, bg: BlockGraph, graph: KernelGraph) -> CustomKernel:
    op = graph.ops[op_index]
    post = bg.after_accum
    ops, maps = [], []
    ins, outs = iter(op.inputs), iter(op.outputs)
    for j, bop in enumerate(bg.ops):
        if bop.kind == "input":
            src, tile = next(ins, "?"), bop.outputs[0]
            stage = "load"
            for key in ("imap", "fmap"):
                if isinstance(bop.attr.get(key), Map):
                    maps.append(_matrix(key, tile, src, bop.attr[key]))
        elif bop.kind == "output":
            dst, stage = next(outs, "?"), "store"
            if isinstance(bop.attr.get("omap"), Map):
                maps.append(_matrix("omap", bop.inputs[0], dst, bop.attr["omap"]))
        else:
            stage = "after loop" if bop.outputs and bop.outputs[0] in post else "loop body"
        ops.append(BlockOp(j, bop.kind, bop.inputs, bop.outputs, stage))
    tensors = tuple(BlockTensor(n, tuple(str(d) for d in s), n in post) for n, s in bg.tensors)
    return CustomKernel(index, op_index, tuple(str(g) for g in bg.grid), str(bg.forloop_range),
                        tuple(ops), tensors, tuple(maps))


def _value(d: Dim, env: Mapping[str, int]) -> int | None:
    try:
        return evaluate(d, env)
    except DimExprError:
        return None    # spec.problems says why


def _instance(k: int, bg: BlockGraph, env: Mapping[str, int], dev: DeviceSpec) -> KernelInstance:
    tiles = {n: tuple(_value(d, env) for d in s) for n, s in bg.tensors}
    grid = tuple(_value(g, env) for g in bg.grid)
    blocks = None if None in grid else math.prod(g for g in grid if g is not None)
    # Shared memory as `within_limits` counts it: every tile that is neither unary nor nored.
    held = [_elements(tiles[t]) for t in smem_tiles(bg)]
    smem = None if None in held else dev.dtype_bytes * sum(n for n in held if n is not None)
    return KernelInstance(k, grid, _value(bg.forloop_range, env), blocks, smem, tiles)


def _elements(sizes: tuple[int | None, ...]) -> int | None:
    return None if None in sizes else math.prod(s for s in sizes if s is not None)


def _limits(k: int, bg: BlockGraph, inst: KernelInstance, dev: DeviceSpec) -> list[Limit]:
    """The limits of `prism.search.audit.within_limits`, each one named when it fails."""
    where = f"custom kernel {k}"
    out = []
    if inst.blocks is not None and inst.blocks > dev.max_blocks:
        out.append(Limit(k, "blocks", inst.blocks, dev.max_blocks,
                         f"{where}: {inst.blocks} blocks > {dev.max_blocks} (max blocks)"))
    if inst.smem_bytes is not None and inst.smem_bytes > dev.smem_bytes:
        out.append(Limit(k, "smem", inst.smem_bytes, dev.smem_bytes,
                         f"{where}: shared memory {inst.smem_bytes} B > {dev.smem_bytes} B "
                         "(the device's limit)"))
    for op in bg.ops:
        if op.kind != "matmul":
            continue
        for t in op.inputs:
            shape = bg.shape(t)
            for axis in range(max(0, len(shape) - 2), len(shape)):
                size, whole = inst.tiles[t][axis], data_dim(shape[axis]).value
                # A whole, unsplit dim is padded by the code generator; a split one is not.
                if size is not None and size < dev.min_matmul_tile and size != whole:
                    out.append(Limit(k, "matmul_tile", size, dev.min_matmul_tile,
                                     f"{where}: matmul tile {t} dim {axis} = {size} < "
                                     f"{dev.min_matmul_tile} (a split of {whole})"))
    return out


def _abstract_terms(graph: KernelGraph) -> tuple[dict[str, Term], list[dict[str, Term]]]:
    """Every tensor's abstract expression: kernel tensors, and per custom kernel its tiles."""
    terms: dict[str, Term] = {}
    blocks: list[dict[str, Term]] = []
    for op in graph.ops:
        if op.kind == "input":
            terms[op.outputs[0]] = leaf(tensor_leaf(op.outputs[0]))
        elif op.kind == "output":
            continue
        elif op.kind == "customized":
            if op.block is None:
                continue
            local = _block_terms(op.block, [terms[t] for t in op.inputs])
            blocks.append(local)
            terms.update(zip(op.outputs, (local[t] for t in op.block.outputs), strict=False))
        else:
            terms[op.outputs[0]] = op_term(op.kind, [terms[t] for t in op.inputs],
                                           len(graph.shape(op.inputs[0])), op.attr)
    return terms, blocks


def _block_terms(bg: BlockGraph, sources: list[Term]) -> dict[str, Term]:
    """The trivial instantiation: a loaded tile is its whole tensor, an accumulator its plain
    reduction (`op_term`), every other op its term."""
    out: dict[str, Term] = {}
    loaded = iter(sources)
    for op in bg.ops:
        if op.kind == "input":
            out[op.outputs[0]] = next(loaded)
        elif op.kind != "output":
            out[op.outputs[0]] = op_term(op.kind, [out[t] for t in op.inputs],
                                         len(bg.shape(op.inputs[0])), op.attr)
    return out


# -- the view -------------------------------------------------------------------------------------

_GREEN, _RED = "#15803d", "#b91c1c"
_TABLE = 'style="border-collapse:collapse;font-family:monospace;font-size:12px;margin:4px 0"'
_CELL = 'style="border:1px solid #d4d4d8;padding:2px 6px;text-align:left"'


def _esc(x: object) -> str:
    return html.escape(str(x), quote=True)


class _Markup(str):
    """Cell or caption text that is HTML already (a glossary `abbr`), not escaped again."""


def _cell(x: object) -> str:
    return x if isinstance(x, _Markup) else _esc(x)


def _table(head: list[str], rows: list[list[object]], caption: str = "") -> str:
    cap = f"<caption style='text-align:left'><b>{_cell(caption)}</b></caption>" if caption \
        else ""
    th = "".join(f"<th {_CELL}>{_esc(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td {_CELL}>{_cell(c)}</td>" for c in row) + "</tr>"
                   for row in rows)
    return f"<table {_TABLE}>{cap}<tr>{th}</tr>{body}</table>"


def _shape(sizes: tuple[object, ...]) -> str:
    return "[" + ", ".join("?" if s is None else str(s) for s in sizes) + "]"


def kernel_html(kernel: CustomKernel) -> str:
    """A custom kernel's block ops, tensors (symbolic shapes) and map matrices."""
    ops = _table(["#", "op", "inputs", "outputs", "stage"],
                 [[o.index, _Markup(abbr(o.kind)), ", ".join(o.inputs), ", ".join(o.outputs),
                   o.stage] for o in kernel.ops], "block ops")
    tensors = _table(["tensor", "shape", "where"],
                     [[t.name, _shape(t.shape), "after loop" if t.post else "loop body"]
                      for t in kernel.tensors], "tensors (symbolic shapes)")
    maps = "".join(_table(["", *[f"d{d}" for d in range(len(m.rows[0]) if m.rows else 0)]],
                          [[lbl, *row] for lbl, row in zip(m.row_labels, m.rows, strict=True)],
                          _Markup(f"{abbr(m.kind)} of {_esc(m.tile)} ({_esc(m.tensor)})"))
                   for m in kernel.maps)
    return ops + tensors + maps


def instance_html(state: SGraphState, inst: Instance) -> str:
    """The concrete tile shapes of every block tensor, with the grid, loop, blocks and smem."""
    parts = []
    for kernel, ki in zip(state.custom, inst.kernels, strict=True):
        head = (f"custom kernel {ki.index}: grid {_shape(ki.grid)}, forloop range "
                f"{'?' if ki.forloop_range is None else ki.forloop_range}, "
                f"{'?' if ki.blocks is None else ki.blocks} blocks, shared memory "
                f"{'?' if ki.smem_bytes is None else ki.smem_bytes} B")
        rows: list[list[object]] = [[t.name, _shape(t.shape), _shape(ki.tiles[t.name])]
                                    for t in kernel.tensors]
        parts.append(_table(["tensor", "symbolic", "tile"], rows, head))
    return "".join(parts) or "<i>no custom kernel</i>"


def verdict_html(inst: Instance) -> str:
    if inst.feasible:
        return f"<b style='color:{_GREEN}'>feasible</b>"
    reasons = [lim.message for lim in inst.limits] + list(inst.problems)
    shown = "<br>".join(_esc(r) for r in reasons[:6])
    more = f"<br>… and {len(reasons) - 6} more" if len(reasons) > 6 else ""
    return f"<span style='color:{_RED}'><b>infeasible</b>: {shown}{more}</span>"


def _svg(graph: KernelGraph) -> str:
    from prism.ir.render import to_svg

    try:
        return to_svg(graph)
    except PrismError as e:
        return f"<i>{_esc(e)}</i>"


class SGraphView(Snapshotted, ipywidgets.VBox):
    """The picture, one accordion section per custom kernel, a selector per size variable
    driving the tile table and the feasibility line, and a tensor selector showing its
    abstract expression."""

    def __init__(self, graph: KernelGraph, device: DeviceSpec | None = None, **kwargs: Any):
        w = ipywidgets
        self.state = SGraphState(graph, device)
        self.picture = w.HTML(_svg(graph))
        self.kernels = w.Accordion(children=[w.HTML(kernel_html(k)) for k in self.state.custom],
                                   titles=tuple(k.title for k in self.state.custom))
        start = self.state.default_assignment()
        self.sizes = {v.name: w.Dropdown(options=[(str(c), c) for c in v.candidates],
                                         value=start[v.name], description=f"{v.name} ({v.role})",
                                         style={"description_width": "initial"})
                      for v in self.state.variables()}
        self.tiles = w.HTML()
        self.verdict = w.HTML()
        self.tensor = w.Dropdown(
            options=[(name if k is None else f"kernel {k} · {name}", (k, name))
                     for k, name in self.state.tensor_names()],
            description="tensor")
        self.expression = w.HTML()
        for box in self.sizes.values():
            box.observe(self._on_size, names="value")
        self.tensor.observe(self._on_tensor, names="value")
        self._on_size()
        self._on_tensor()
        super().__init__(children=[
            self.picture, self.kernels, w.HBox(list(self.sizes.values())), self.verdict,
            self.tiles, w.HBox([self.tensor]), self.expression], **kwargs)

    @classmethod
    def from_json(cls, doc: Mapping[str, Any] | str, device: DeviceSpec | None = None
                  ) -> SGraphView:
        """From graph JSON, e.g. a `CandidateVerified.graph` of a trace."""
        return cls(KernelGraph.from_json(json.loads(doc) if isinstance(doc, str) else doc),
                   device)

    @property
    def assignment(self) -> dict[str, int]:
        return {name: box.value for name, box in self.sizes.items()}

    @property
    def instance(self) -> Instance:
        return self.state.at(self.assignment)

    def _on_size(self, change: Any = None) -> None:
        inst = self.instance
        self.tiles.value = instance_html(self.state, inst)
        self.verdict.value = verdict_html(inst)
        self._snapshot_changed()

    def snapshot_summary(self) -> str:
        """The snapshot's line: the graph, its kernels and the sizes chosen."""
        g = self.state.graph
        at = ", ".join(f"{k}={v}" for k, v in self.assignment.items())
        return _esc(f"sGraph · {g.name or 'a graph'}: {len(g.ops)} kernel op(s), "
                    f"{len(self.state.custom)} custom" + (f" · at {at}" if at else ""))

    def _on_tensor(self, change: Any = None) -> None:
        if self.tensor.value is None:
            self.expression.value = ""
            return
        kernel, name = self.tensor.value
        self.expression.value = (f"<b>abstract expression of {_esc(name)}</b>: "
                                 f"<code>{_esc(self.state.abstract(name, kernel))}</code>")
