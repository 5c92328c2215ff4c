"""Graphviz rendering of the hierarchy: the kernel graph, each block graph a nested cluster.

The DOT text is written here (plain strings, no dependency); turning it into SVG needs Graphviz's
`dot` program, reached through the `graphviz` package, imported lazily in `to_svg` only.

A block-graph cluster is labelled with its grid, loop range and block size; each block input shows
its imap and fmap and its tile shape, each output its omap, every tensor its shape — symbolic ones
as dimension expressions.
"""

from __future__ import annotations

import html
from pathlib import Path

from prism.errors import PrismError
from prism.ir.graph import BlockGraph, KernelGraph, Map, Op, Shape
from prism.ir.ops import OPS
from prism.ir.spec import is_tail

_FONT = 'fontname="Helvetica"'
_COLORS = {"input": "#dbeafe", "output": "#dcfce7", "customized": "#fef3c7", "accum": "#fde2e4"}


def _shape(s: Shape) -> str:
    return "[" + ", ".join(str(d) for d in s) + "]"


def _esc(text: str) -> str:
    return html.escape(text, quote=True)


def _node(nid: str, title: str, lines: list[str], fill: str = "#ffffff") -> str:
    rows = "".join(f'<TR><TD ALIGN="LEFT"><FONT POINT-SIZE="10">{_esc(x)}</FONT></TD></TR>'
                   for x in lines)
    label = f'<<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="0"><TR><TD><B>{_esc(title)}</B>' \
            f"</TD></TR>{rows}</TABLE>>"
    return f'  "{nid}" [shape=box, style="rounded,filled", fillcolor="{fill}", label={label}];'


def _map_text(name: str, m: Map) -> str:
    """`imap x→1, y→∅` for a concrete map (∅: replicated / summed); the 0/1 matrix otherwise."""
    axes = ("loop",) if m.num_rows == 1 and name == "fmap" else ("x", "y", "z")
    if m.is_concrete:
        try:
            return f"{name} " + ", ".join(f"{axes[p]}→{d if d >= 0 else '∅'}"
                                          for p, d in enumerate(m.as_dims()))
        except PrismError:
            pass
    rows = "; ".join(f"{axes[p]}: " + " ".join(str(e) for e in row) for p, row in enumerate(m.rows))
    return f"{name} [{rows}]"


def _op_lines(op: Op, shapes: dict[str, Shape]) -> list[str]:
    lines = []
    for k, v in op.attrs:
        if not isinstance(v, Map):
            lines.append(f"{k}={v}")
    for t in op.outputs:
        lines.append(f"{t}: {_shape(shapes[t])}")
    return lines


def _block_cluster(prefix: str, index: int, op: Op, bg: BlockGraph, kshapes: dict[str, Shape],
                   out: list[str]) -> None:
    grid = " × ".join(str(g) for g in bg.grid)
    label = (f"custom kernel {index}: grid ({grid}), forloop range {bg.forloop_range}, "
             f"block {bg.block_threads} threads")
    if is_tail(op):
        label += (f"; the tail of custom kernel {index - 1}, in its launch: the last block of "
                  "each group to finish runs it")
    out.append(f"  subgraph cluster_{prefix} {{")
    out.append(f'  label="{_esc(label)}"; style="rounded,dashed"; color="#b45309"; {_FONT};')
    post = bg.after_accum
    for j, bop in enumerate(bg.ops):
        nid = f"{prefix}_{j}"
        if bop.kind == "input":
            src = op.inputs[len([o for o in bg.ops[:j] if o.kind == "input"])]
            lines = [f"reads {src} {_shape(kshapes[src])}", _map_text("imap", bop.attr["imap"]),
                     _map_text("fmap", bop.attr["fmap"]),
                     f"tile {bop.outputs[0]}: {_shape(bg.shapes[bop.outputs[0]])}"]
            out.append(_node(nid, "block input", lines, _COLORS["input"]))
        elif bop.kind == "output":
            k = len([o for o in bg.ops[:j] if o.kind == "output"])
            dst = op.outputs[k]
            lines = [_map_text("omap", bop.attr["omap"]), f"writes {dst} {_shape(kshapes[dst])}"]
            out.append(_node(nid, "block output", lines, _COLORS["output"]))
        else:
            accum = OPS[bop.kind].category == "accum"
            title = f"accum {bop.kind}" if accum else bop.kind
            where = "after loop" if bop.outputs[0] in post else "loop body"
            out.append(_node(nid, title, [*_op_lines(bop, bg.shapes), where],
                             _COLORS["accum"] if accum else "#ffffff"))
    producer = {t: f"{prefix}_{j}" for j, bop in enumerate(bg.ops) for t in bop.outputs}
    for j, bop in enumerate(bg.ops):
        for t in bop.inputs:
            out.append(f'  "{producer[t]}" -> "{prefix}_{j}";')
    out.append("  }")


def to_dot(g: KernelGraph) -> str:
    """The DOT text of `g`: kernel ops as nodes, each custom kernel a cluster of its block ops."""
    out = [f'digraph "{_esc(g.name or "graph")}" {{', f"  rankdir=TB; node [{_FONT}]; "
           f"edge [{_FONT}, fontsize=9]; graph [{_FONT}];"]
    shapes = g.shapes
    src_node: dict[str, str] = {}
    customs = 0
    for i, op in enumerate(g.ops):
        nid = f"k{i}"
        if op.kind == "customized" and op.block is not None:
            _block_cluster(nid, customs, op, op.block, shapes, out)
            customs += 1
            block_inputs = [j for j, b in enumerate(op.block.ops) if b.kind == "input"]
            block_outputs = [j for j, b in enumerate(op.block.ops) if b.kind == "output"]
            for t, j in zip(op.inputs, block_inputs, strict=False):
                out.append(f'  "{src_node[t]}" -> "{nid}_{j}" [label="{_esc(t)}"];')
            for t, j in zip(op.outputs, block_outputs, strict=False):
                src_node[t] = f"{nid}_{j}"
            continue
        if op.kind == "input":
            out.append(_node(nid, f"input {op.outputs[0]}", [_shape(shapes[op.outputs[0]])],
                             _COLORS["input"]))
        elif op.kind == "output":
            out.append(_node(nid, f"output {op.inputs[0]}", [_shape(shapes[op.inputs[0]])],
                             _COLORS["output"]))
        else:
            out.append(_node(nid, op.kind, _op_lines(op, shapes)))
        for t in op.inputs:
            out.append(f'  "{src_node[t]}" -> "{nid}" [label="{_esc(t)}"];')
        for t in op.outputs:
            src_node[t] = nid
    out.append("}")
    return "\n".join(out)


def to_svg(g: KernelGraph) -> str:
    """Render with Graphviz's `dot`; a clear error if it is not installed."""
    import graphviz

    try:
        svg = graphviz.Source(to_dot(g)).pipe(format="svg", encoding="utf-8")
    except graphviz.ExecutableNotFound:
        raise PrismError("Graphviz's `dot` program is not installed; run `make run` (it installs "
                         "it) or `apt-get install graphviz`") from None
    return str(svg)


def render(g: KernelGraph, path: str | Path) -> Path:
    """Write `g` as SVG (or DOT, if the path ends in .dot) and return the path."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(to_dot(g) if p.suffix == ".dot" else to_svg(g))
    return p
