"""The winner's Triton source, its lines grouped by the block-graph op they compute.

The code generator (`prism.instantiate.codegen`) opens every op's lines inside a `@triton.jit`
function with a comment that names the op's output: `# X_tile: tile ...` (an input's load),
`# matmul4 = matmul(...)` (a compute op), `# store div5 into t2 ...` (an output's store). Those
comments are the grouping: `line_groups` cuts the source at them, and a group runs until the next
such comment, a blank line or the end of the function. `SourceState` holds the groups (plain
Python); `SourceView` draws the source with a chooser of ops: choosing one lights its lines up.
"""

from __future__ import annotations

import functools
import html
import re
from dataclasses import dataclass

from widgets.snapshot import Snapshotted

_JIT = re.compile(r"^def (\w+)\(")
_GROUP = re.compile(r"^\s+# (?:store \w+ into (\w+)|(\w+)(?: = |: ))")
_ASSIGN = re.compile(r"^\s+(\w+) (?:\+|-|\*|/)?= ")


@dataclass(frozen=True)
class Group:
    """Lines `start`..`end` (0-based, end exclusive) computing `op` of kernel function `kernel`;
    `op` is None for lines outside any op (imports, the launcher, the function's own head). A
    store's op is `store <tensor>`."""

    kernel: str | None
    op: str | None
    start: int
    end: int

    @property
    def key(self) -> str | None:
        return f"{self.kernel}/{self.op}" if self.op is not None else None


def line_groups(source: str) -> list[Group]:
    """The source cut into consecutive runs of lines of one op, covering every line once. A line
    belongs to the op whose comment opened its group, except one that updates another op's
    value (`nored2 += ...` in a loop body): that line is the updated op's."""
    lines = source.splitlines()
    owner: list[tuple[str | None, str | None]] = []
    kernel: str | None = None
    op: str | None = None
    known: set[str] = set()
    for i, line in enumerate(lines):
        jit = _JIT.match(line)
        found = _GROUP.match(line) if kernel is not None else None
        if jit:
            # a jitted function is preceded by its decorator; any other def ends the kernels
            kernel = jit.group(1) if i and lines[i - 1].strip() == "@triton.jit" else None
            op, known = None, set()
        elif found:
            op = f"store {found.group(1)}" if found.group(1) else found.group(2)
            known.add(op)
        elif op is not None and not line.strip():
            op = None
        assign = _ASSIGN.match(line) if op is not None else None
        mine = assign.group(1) if assign and assign.group(1) in known else op
        owner.append((kernel if mine is not None else None, mine))
    groups: list[Group] = []
    for i, who in enumerate(owner):
        if groups and (groups[-1].kernel, groups[-1].op) == who:
            groups[-1] = Group(who[0], who[1], groups[-1].start, i + 1)
        else:
            groups.append(Group(who[0], who[1], i, i + 1))
    return groups


class SourceState:
    """A program's source and its op groups; `html(selected)` draws it."""

    def __init__(self, source: str):
        self.source = source
        self.lines = source.splitlines()
        self.groups = line_groups(source)

    @property
    def ops(self) -> list[str]:
        """The op keys (`kernel/op`), each once, in source order."""
        return list(dict.fromkeys(g.key for g in self.groups if g.key is not None))

    def lines_of(self, key: str) -> list[str]:
        return [line for g in self.groups if g.key == key for line in self.lines[g.start:g.end]]

    def html(self, selected: str | None = None) -> str:
        parts = []
        for g in self.groups:
            text = html.escape("\n".join(self.lines[g.start:g.end]))
            if g.key is None:
                parts.append(f"<span>{text}</span>")
                continue
            lit = " style='background:#fef08a'" if g.key == selected else ""
            parts.append(f"<span data-op='{html.escape(g.key, quote=True)}'{lit}>{text}</span>")
        return ("<pre class='prism-source' style='font-size:12px;line-height:1.35'>"
                + "\n".join(parts) + "</pre>")


_ESM = """
function render({ model, el }) {
  const draw = () => { el.innerHTML = model.get("value"); };
  // a click on an op's lines chooses that op (the chooser follows), as choosing it lights them
  el.addEventListener("click", (e) => {
    const group = e.target.closest("[data-op]");
    if (group) { model.set("selected", group.getAttribute("data-op")); model.save_changes(); }
  });
  model.on("change:value", draw);
  draw();
}
export default { render };
"""

_CSS = """
.prism-source [data-op] { cursor: pointer; }
.prism-source [data-op]:hover { outline: 1px dashed #ca8a04; }
"""


@functools.cache
def _code_widget() -> type:
    """The drawn source (`value`, its HTML) whose op groups answer clicks (`selected`): one
    class, made on first use (anywidget is imported only when a view is drawn)."""
    import anywidget
    import traitlets

    class SourceCode(anywidget.AnyWidget):
        _esm = _ESM
        _css = _CSS
        value = traitlets.Unicode("").tag(sync=True)
        selected = traitlets.Unicode("").tag(sync=True)

    return SourceCode


class SourceView(Snapshotted):
    """The source with a chooser of its ops: the chosen op's lines light up, and a click on
    an op's lines chooses that op."""

    def __init__(self, source: str):
        import ipywidgets as w

        self.state = SourceState(source)
        self.op = w.Dropdown(options=[("(choose an op to light its lines)", None),
                                      *((k, k) for k in self.state.ops)], description="op")
        self.code = _code_widget()(value=self.state.html())
        self.op.observe(lambda _: self._draw(), names="value")
        self.code.observe(lambda change: self.select(change["new"] or None), names="selected")
        self.widget = w.VBox([self.op, self.code])

    def select(self, key: str | None) -> None:
        if key is not None and key not in self.state.ops:
            return                      # not one of this source's ops: nothing to light
        self.op.value = key

    def _draw(self) -> None:
        self.code.value = self.state.html(self.op.value)
        self.code.selected = self.op.value or ""
        self._snapshot_changed()

    def snapshot_summary(self) -> str:
        """The snapshot's line: the module's size and the op whose lines are lit."""
        lit = f" · lit: {self.op.value}" if self.op.value else ""
        return html.escape(f"Triton source · {len(self.state.source.splitlines())} lines, "
                           f"{len(self.state.ops)} ops{lit}")

    def _repr_mimebundle_(self, **kwargs: object) -> object:
        return self.widget._repr_mimebundle_(**kwargs)
