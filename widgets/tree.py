"""The search as a tree: families under their parents, counted per subtree, their children
grouped by rule and reason; a jump to any id; the newest family followed during a live run; the
selected row's decision beside its partial sGraph; two candidates side by side.

    tree = SearchTree.from_events(result.trace)    # a recorded run (or a JSONL path)
    tree = SearchTree.of(explorer)                 # beside an explorer: its state, its redraws
    tree.jump_to("f123"); tree.show_audit(report)  # what the text box and an audit do

A thin view over `SearchState` (`widgets.explorer`), which keeps every count and group as the
events arrive: drawing costs the rows drawn, never the trace. The rows are a flat list of
plain dicts (`rows()`, what the tests read); a small ES module (`_ESM`, below) draws them as a
collapsible tree and sends back which row was clicked. Each open group draws at most `ROWS`
rows and a "show more" row.
"""

from __future__ import annotations

import difflib
import functools
import html
import json
import threading
from collections.abc import Callable
from typing import Any

import anywidget
import traitlets

from prism.errors import PrismError
from widgets.explorer import (
    _STATUS_COLORS,
    NO_GRAPH,
    Node,
    SearchExplorer,
    SearchState,
    Subtree,
    detail_html,
    group_of,
)
from widgets.live import REDRAW_S, LiveView, Throttle
from widgets.proof import (
    CounterexampleState,
    ProofState,
    counterexample_html,
    fitted,
    proof_html,
)
from widgets.snapshot import Snapshotted

ROWS = 20          # rows drawn per open group before its "show more" row
TOP_REASONS = 3    # reasons named on a group's own row


def _key(*parts: str | None) -> str:
    """A row's key: its kind and place, as JSON (reasons may hold any character)."""
    return json.dumps(parts)


def node_key(node_id: str | None) -> str:
    return _key("node", node_id)


def group_key(parent: str | None, head: str) -> str:
    return _key("group", parent, head)


def reason_key(parent: str | None, head: str, reason: str) -> str:
    return _key("reason", parent, head, reason)


class SearchTree(Snapshotted, LiveView):
    """The tree view; see the module docstring. Its controls: the tree (a click on a row's
    triangle opens or closes it, on a family or candidate selects it, on "show more" draws
    more), the jump box (an id, then enter), "follow the newest", and the comparison's two
    candidate boxes."""

    def __init__(self, state: SearchState | None = None, *, lock: Any = None,
                 interval: float = REDRAW_S):
        import ipywidgets as w

        self.state = state or SearchState()
        self._lock = lock or threading.RLock()
        self._throttle = Throttle(self.redraw, interval)
        self._draw_lock = threading.RLock()
        self._live: Callable[[], bool] = lambda: False
        # the rows shown open: at first the search and its kept top-level families
        self.open: set[str] = {node_key(None), group_key(None, "kept")}
        self.shown: dict[str, int] = {}             # rows drawn per open group, past ROWS
        self.selected: str | None = None
        self._drawn_detail: tuple[str | None, str] = (None, "")
        self.tree = TreeWidget()
        self.tree.on_msg(self._on_msg)
        self.jump = w.Text(placeholder="f123 or c45, then enter", description="jump to",
                           continuous_update=False)
        self.jump_note = w.HTML()
        self.follow = w.Checkbox(value=False, description="follow the newest family",
                                 indent=False, layout=w.Layout(display="none"))
        self.detail = w.HTML(layout=w.Layout(width="50%"))
        self.picture = w.HTML(layout=w.Layout(width="50%", overflow="auto"))
        self.as_first = w.Button(description="compare as A", disabled=True)
        self.as_second = w.Button(description="compare as B", disabled=True)
        self.compare = CandidateCompare(self.state, self._lock)
        self.jump.observe(lambda change: self.jump_to(change["new"]), names="value")
        self.follow.observe(lambda _: self.redraw(), names="value")
        self.as_first.on_click(lambda _: self._compare_selected(self.compare.first))
        self.as_second.on_click(lambda _: self._compare_selected(self.compare.second))
        self.widget = w.VBox([
            w.HBox([self.jump, self.jump_note, self.follow]), self.tree,
            w.HBox([self.as_first, self.as_second]), w.HBox([self.detail, self.picture]),
            self.compare.widget])
        self.redraw()

    @classmethod
    def of(cls, explorer: SearchExplorer) -> SearchTree:
        """A tree over `explorer`'s state, redrawn whenever the explorer redraws; "follow the
        newest" shows while the explorer has a run of its own."""
        tree = cls(explorer.state, lock=explorer._lock)
        tree._live = lambda: explorer._start is not None
        explorer.also_draw.append(tree.redraw)
        return tree

    # -- the controls ----------------------------------------------------------------------

    def _on_msg(self, _widget: Any, content: Any, _buffers: Any) -> None:
        """What the tree's script sends: `{"toggle": key}`, `{"more": key}`, `{"select": id}`."""
        if not isinstance(content, dict):
            return
        if "toggle" in content:
            self.toggle(str(content["toggle"]))
        elif "more" in content:
            self.more(str(content["more"]))
        elif "select" in content:
            self.select(str(content["select"]))

    def toggle(self, key: str) -> None:
        """Open a closed row, close an open one."""
        self.open.symmetric_difference_update({key})
        self.redraw()

    def more(self, key: str) -> None:
        """Draw `ROWS` more rows of the group `key`."""
        self.shown[key] = self.shown.get(key, ROWS) + ROWS
        self.redraw()

    def select(self, node_id: str | None) -> None:
        """Select a row: its decision (and graph) in the detail pane."""
        self.selected = node_id
        self.redraw()

    def jump_to(self, text: str) -> str | None:
        """Open the tree down to the row `text` names and select it; None when there is none
        (the box says so)."""
        if not text.strip():
            return None
        with self._lock:
            found = self.state.find(text)
            if found is not None:
                self.reveal(found)
        self.jump_note.value = ("" if found is not None else
                                f"<span style='color:#b91c1c'>no row {html.escape(text)}"
                                "</span>")
        if found is not None:
            self.select(found)
        return found

    def reveal(self, node_id: str) -> None:
        """Open every row on the way to `node_id`: its ancestors, and the group (and reason)
        it sits in under each. A row past a group's drawn rows is drawn after them."""
        parent: str | None = None
        for fid in self.state.path(node_id):
            self.open.add(node_key(parent))
            node = self.state.row(fid)
            head, reason = group_of(node)
            self.open.add(group_key(parent, head))
            self.open.add(reason_key(parent, head, reason))
            parent = fid

    def show_audit(self, report: Any) -> int:
        """Mark an audit's findings (`SearchState.add_audit`) in the tree."""
        with self._lock:
            n = self.state.add_audit(report)
        self.redraw()
        return n

    def _compare_selected(self, box: Any) -> None:
        if self.selected is not None:
            box.value = self.selected

    # -- drawing ---------------------------------------------------------------------------

    def redraw(self) -> None:
        with self._draw_lock:
            with self._lock:
                if self.follow.value and self.state.newest is not None:
                    self.reveal(self.state.newest)
                    self.selected = self.state.newest
                rows = self.rows()
                chosen = self.selected if self.selected in self.state else None
                detail = detail_html(self.state, chosen) if chosen else ""
                graph = self.state.row(chosen).graph if chosen else None
                kind = self.state.row(chosen).kind if chosen else None
            if rows != self.tree.rows:
                self.tree.rows = rows
            self.tree.selected = chosen or ""
            self.follow.layout.display = None if self._live() else "none"
            self.as_first.disabled = self.as_second.disabled = kind != "candidate"
            if (chosen, detail) != self._drawn_detail:
                self._drawn_detail = (chosen, detail)
                self.detail.value = detail
                self.picture.value = ("" if chosen is None else
                                      fitted(graph_svg(json.dumps(graph)),
                                             f"{chosen}'s partial sGraph")
                                      if graph is not None else
                                      "" if kind == "candidate" else
                                      f"<p class='prism-no-graph' style='color:#555'>"
                                      f"{NO_GRAPH}</p>")
        self._snapshot_changed()

    def snapshot_summary(self) -> str:
        """The snapshot's line: the whole search's counts (the root row's)."""
        with self._lock:
            return html.escape(f"search tree · {counts_text(self.state.subtree(None))}")

    def rows(self) -> list[dict[str, Any]]:
        """The rows drawn now, top to bottom: the search, then whatever is open under it."""
        out: list[dict[str, Any]] = []
        self._node(None, 0, out)
        return out

    def _node(self, node_id: str | None, depth: int, out: list[dict[str, Any]]) -> None:
        key = node_key(node_id)
        opens = self.state.has_children(node_id)
        is_open = opens and key in self.open
        sub = self.state.subtree(node_id)
        if node_id is None:
            row = {"id": "", "status": "search", "label": "the search", "mark": ""}   # the root
        else:
            n = self.state.row(node_id)
            findings = self.state.audit.get(node_id, [])
            row = {"id": n.id, "status": n.status, "label": _label(n),
                   "mark": (f"audit: wrongly pruned ({findings[0]['finding']})"
                            if findings else "")}
        out.append({"key": key, "kind": "node", "depth": depth,
                    "open": is_open if opens else None,
                    "counts": counts_text(sub) if opens or node_id is None else "",
                    "selected": node_id is not None and node_id == self.selected, **row})
        if is_open:
            for group in self.state.groups(node_id):
                self._group(node_id, group, depth + 1, out)

    def _group(self, parent: str | None, group: Any, depth: int,
               out: list[dict[str, Any]]) -> None:
        key = group_key(parent, group.head)
        is_open = key in self.open
        single = len(group.reasons) == 1
        out.append({"key": key, "kind": "group", "depth": depth, "open": is_open,
                    "head": group.head, "count": group.count,
                    "label": group_text(group), "id": "", "status": "", "counts": "",
                    "mark": "", "selected": False})
        if not is_open:
            return
        if single:
            self._rows(parent, group.head, group.reasons[0][0], group.count, key, depth + 1,
                       out)
            return
        limit = self.shown.get(key, ROWS)
        for reason, n in group.reasons[:limit]:
            rkey = reason_key(parent, group.head, reason)
            r_open = rkey in self.open
            out.append({"key": rkey, "kind": "reason", "depth": depth + 1, "open": r_open,
                        "head": group.head, "count": n, "label": f"{reason or '—'} ({n})",
                        "id": "", "status": "", "counts": "", "mark": "", "selected": False})
            if r_open:
                self._rows(parent, group.head, reason, n, rkey, depth + 2, out)
        if len(group.reasons) > limit:
            out.append(_more(key, depth + 1, len(group.reasons) - limit, "reasons"))

    def _rows(self, parent: str | None, head: str, reason: str, total: int, key: str,
              depth: int, out: list[dict[str, Any]]) -> None:
        limit = self.shown.get(key, ROWS)
        drawn = self.state.group_rows(parent, head, reason, 0, limit)
        for n in drawn:
            self._node(n.id, depth, out)
        chosen = self.selected
        if chosen is not None and chosen in self.state and total > limit and \
                all(n.id != chosen for n in drawn):
            pinned = self.state.row(chosen)      # a jump to a row past the drawn ones
            if pinned.parent == parent and group_of(pinned) == (head, reason):
                self._node(chosen, depth, out)
        if total > limit:
            out.append(_more(key, depth, total - limit, "rows"))

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self.widget._repr_mimebundle_(**kwargs)


def _more(key: str, depth: int, left: int, what: str) -> dict[str, Any]:
    return {"key": key, "kind": "more", "depth": depth, "open": None,
            "label": f"show {min(ROWS, left)} more ({left} {what} not drawn)", "id": "",
            "status": "", "counts": "", "mark": "", "selected": False}


def _label(n: Node) -> str:
    if n.kind == "candidate":
        return f"candidate, {n.status}{' (' + n.method + ')' if n.method else ''}" + \
            (f": {n.reason}" if n.reason else "")
    if n.status == "pruned":
        return f"{n.description + ' — ' if n.description else ''}pruned by {n.rule}"
    return n.description


def counts_text(sub: Subtree) -> str:
    """A subtree's counts in one line: families, kept, pruned per rule, candidates."""
    parts = [f"{sub.families} families", f"{sub.kept} kept"]
    if sub.pruned:
        rules = ", ".join(f"{r} {n}" for r, n in sorted(sub.pruned.items(),
                                                         key=lambda rn: -rn[1]))
        parts.append(f"{sum(sub.pruned.values())} pruned ({rules})")
    parts.append(f"candidates: {sub.verified} verified, {sub.rejected} rejected" +
                 (f", {sub.undecided} undecided" if sub.undecided else ""))
    if sub.findings:
        parts.append(f"{sub.findings} audit finding{'s' * (sub.findings != 1)}")
    return " · ".join(parts)


def group_text(group: Any) -> str:
    """`abstract_expression: 212 children — reason X (180), reason Y (32), 4 more reasons`."""
    text = f"{group.head}: {group.count} {'child' if group.count == 1 else 'children'}"
    named = [(r, n) for r, n in group.reasons if r]
    if named:
        shown = ", ".join(f"{_clip(r)} ({n})" for r, n in named[:TOP_REASONS])
        left = len(named) - TOP_REASONS
        text += f" — {shown}{f', {left} more reasons' if left > 0 else ''}"
    return text


def _clip(text: str, n: int = 70) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


@functools.lru_cache(maxsize=64)
def graph_svg(doc: str) -> str:
    """A graph JSON (a family's partial sGraph, or a candidate's) drawn as inline SVG; a note
    when it cannot be read or drawn."""
    from prism.ir.render import to_svg
    from prism.ir.serialize import graph_from_json
    try:
        return to_svg(graph_from_json(json.loads(doc), validate=False))
    except PrismError as e:
        return f"<p><i>no drawing: {html.escape(str(e))}</i></p>"


@functools.lru_cache(maxsize=64)
def graph_text(doc: str) -> str:
    """A graph JSON in the text form of `prism.ir.text` (one line per op)."""
    from prism.ir.serialize import graph_from_json
    from prism.ir.text import to_text
    return to_text(graph_from_json(json.loads(doc), validate=False))


# -- two candidates side by side ------------------------------------------------------------------

class CandidateCompare:
    """Two candidates, chosen by id: each one's graph, proof (or counterexample) and Triton
    source (of its best configuration, once tuning has instantiated it) side by side, and a
    line diff of their text forms (`prism.ir.text.to_text`)."""

    def __init__(self, state: SearchState, lock: Any = None):
        import ipywidgets as w

        self.state = state
        self._lock = lock or threading.RLock()
        self.first = w.Text(placeholder="c1", description="A", continuous_update=False)
        self.second = w.Text(placeholder="c2", description="B", continuous_update=False)
        self.body = w.HTML()
        for box in (self.first, self.second):
            box.observe(lambda _: self.draw(), names="value")
        self.widget = w.VBox([w.HTML("<b>compare two candidates</b> (ids, then enter)"),
                              w.HBox([self.first, self.second]), self.body])

    def draw(self) -> None:
        with self._lock:
            self.body.value = compare_html(self.state, self.first.value.strip(),
                                           self.second.value.strip())


def compare_html(state: SearchState, a: str, b: str) -> str:
    """Candidates `a` and `b` side by side, then the diff of their graphs' text forms."""
    if not a and not b:
        return ""
    found = {x: state.find(x) for x in (a, b) if x}
    missing = [x for x, f in found.items() if f is None or state.row(f).kind != "candidate"]
    if missing:
        return f"<p>no candidate {html.escape(', '.join(missing))}</p>"
    ids = [found[x] for x in (a, b) if x]
    columns = "".join(f"<td style='vertical-align:top;width:50%'>{_candidate_html(state, c)}"
                      "</td>" for c in ids if c is not None)
    out = (f"<table class='prism-compare' style='width:100%;table-layout:fixed'><tr>{columns}"
           "</tr></table>")
    if len(ids) == 2 and ids[0] is not None and ids[1] is not None:
        out += diff_html(state, ids[0], ids[1])
    return out


def _candidate_html(state: SearchState, cid: str) -> str:
    n = state.row(cid)
    head = (f"<h4><code>{html.escape(cid)}</code> — {html.escape(n.status)} "
            f"({html.escape(n.method or '?')}), family <code>{html.escape(str(n.parent))}"
            "</code></h4>")
    picture = (fitted(graph_svg(json.dumps(n.graph)), f"{cid}'s sGraph") if n.graph
               else "<p><i>no graph on the trace</i></p>")
    if n.status == "verified" and n.payload is not None:
        why = proof_html(ProofState.from_json(n.payload, candidate=cid))
    elif n.status == "rejected" and isinstance(n.payload, dict):
        why = counterexample_html(CounterexampleState(cid, n.parent, n.payload, n.method))
    else:
        why = f"<p>{html.escape(n.reason)}</p>"
    return head + picture + why + source_html(state, cid)


_RANKING = ("measured", "modeled", "interpreted")     # which kind ranks, as in tuning


def chosen_config(state: SearchState, cid: str) -> tuple[str, dict[str, Any]] | None:
    """The configuration of candidate `cid` whose source the comparison shows: its fastest
    measurement of the kind that ranks (measured, else modeled, else interpreted), else the
    first one instantiated; None when tuning never instantiated it."""
    configs = state.configs.get(cid)
    if not configs:
        return None
    timed = [(state.latency[k], k) for k in configs if k in state.latency]
    for kind in _RANKING:
        mine = [(us, k) for (us, of), k in timed if of == kind and us != float("inf")]
        if mine:
            best = min(mine)[1]
            return best, configs[best]
    first = next(iter(configs))
    return first, configs[first]


def source_html(state: SearchState, cid: str) -> str:
    """Candidate `cid`'s Triton source at its chosen configuration (`chosen_config`), folded;
    or why there is none: a rejected candidate is never instantiated, and a verified one only
    once tuning reaches it."""
    n = state.row(cid)
    chosen = chosen_config(state, cid)
    if chosen is None or n.graph is None:
        why = ("rejected candidates are never instantiated" if n.status == "rejected" else
               "its graph is not on the trace" if n.graph is None else
               "tuning has not instantiated it (yet)")
        return f"<p class='prism-no-source'><i>no Triton source: {html.escape(why)}</i></p>"
    config, params = chosen
    timed = state.latency.get(config)
    how = (f", {timed[0]:.4g} µs ({timed[1]})" if timed and timed[0] != float("inf") else
           ", failed" if timed else ", not measured")
    try:
        text = triton_source(json.dumps(n.graph), json.dumps(params, sort_keys=True), config,
                             state.dtype)
    except PrismError as e:
        return f"<p><i>no Triton source for {html.escape(config)}: {html.escape(str(e))}</i></p>"
    from widgets.source import SourceState
    return (f"<details class='prism-compare-source'><summary>Triton source of "
            f"<code>{html.escape(config)}</code>{html.escape(how)} · "
            f"{len(text.splitlines())} lines</summary>{SourceState(text).html()}</details>")


@functools.lru_cache(maxsize=32)
def triton_source(graph: str, params: str, name: str, dtype: str) -> str:
    """The Triton module of a candidate's graph (JSON) at `params` (JSON): the generator
    tuning used, so the same text."""
    from prism.instantiate.codegen import generate
    from prism.ir.serialize import graph_from_json
    g = graph_from_json(json.loads(graph), validate=False)
    free = g.free_vars()
    env = {k: v for k, v in json.loads(params).items() if k in free}
    return generate(g, env, name=name, dtype=dtype).source


def diff_html(state: SearchState, a: str, b: str) -> str:
    """The line diff of two candidates' graphs in text form: `-` only in `a`, `+` only in
    `b`; the same text says "the same graph"."""
    ga, gb = state.row(a).graph, state.row(b).graph
    if ga is None or gb is None:
        return "<p><i>no diff: a graph is not on the trace</i></p>"
    # each graph is named after its candidate: the first line differs by that name alone
    ta, tb = (graph_text(json.dumps(g)).splitlines()[1:] for g in (ga, gb))
    lines = list(difflib.unified_diff(ta, tb, a, b, lineterm="", n=2))
    if not lines:
        return f"<p class='prism-diff'>{html.escape(a)} and {html.escape(b)}: the same graph</p>"
    body = "".join(f"<div style='background:{_diff_color(line)}'>{html.escape(line) or ' '}"
                   "</div>" for line in lines)
    return (f"<div><b>structural diff</b> (text forms, <code>prism.ir.text</code>)"
            f"<pre class='prism-diff' style='font-size:11px'>{body}</pre></div>")


def _diff_color(line: str) -> str:
    if line[:3] in ("---", "+++"):      # the two names
        return "#fff"
    return {"+": "#dcfce7", "-": "#fee2e2", "@": "#e5e7eb"}.get(line[:1], "#fff")


# -- the tree's script ----------------------------------------------------------------------------

_COLORS = {**_STATUS_COLORS, "search": "#e5e7eb"}

_ESM = """
function render({ model, el }) {
  const box = document.createElement("div");
  box.className = "prism-tree";
  el.appendChild(box);
  let scrolledTo = null;
  const colors = model.get("colors");
  function draw() {
    box.replaceChildren();
    for (const row of model.get("rows")) {
      const line = document.createElement("div");
      line.className = `prism-tree-row prism-tree-${row.kind}` + (row.selected ? " selected" : "");
      line.dataset.key = row.key;
      if (row.id) line.dataset.id = row.id;
      line.style.paddingLeft = `${row.depth * 1.3}em`;
      const toggle = document.createElement("span");
      toggle.className = "prism-tree-toggle";
      const mark = row.open === null ? "\\u00a0\\u00a0" : (row.open ? "\\u25be" : "\\u25b8");
      toggle.textContent = mark + " ";
      line.appendChild(toggle);
      if (row.kind === "node") {
        if (row.id) {
          const id = document.createElement("code");
          id.textContent = row.id;
          line.appendChild(id);
        }
        if (row.status && row.status !== "search") {
          const chip = document.createElement("span");
          chip.className = "prism-tree-status";
          chip.textContent = row.status;
          chip.style.background = colors[row.status] || "#fff";
          line.appendChild(chip);
        }
      }
      const label = document.createElement("span");
      label.className = "prism-tree-label";
      label.textContent = row.label;
      line.appendChild(label);
      if (row.counts) {
        const counts = document.createElement("span");
        counts.className = "prism-tree-counts";
        counts.textContent = row.counts;
        line.appendChild(counts);
      }
      if (row.mark) {
        const found = document.createElement("span");
        found.className = "prism-tree-mark";
        found.textContent = "\\u26a0 " + row.mark;
        line.appendChild(found);
      }
      toggle.addEventListener("click", (e) => {
        e.stopPropagation();
        if (row.open !== null) model.send({ toggle: row.key });
      });
      line.addEventListener("click", () => {
        if (row.kind === "node" && row.id) model.send({ select: row.id });
        else if (row.kind === "more") model.send({ more: row.key });
        else if (row.open !== null) model.send({ toggle: row.key });
      });
      box.appendChild(line);
    }
    const chosen = model.get("selected");
    if (chosen && chosen !== scrolledTo) {
      const line = box.querySelector(`.prism-tree-node.selected`);
      if (line) { line.scrollIntoView({ block: "nearest" }); scrolledTo = chosen; }
    }
  }
  model.on("change:rows", draw);
  model.on("change:selected", draw);
  draw();
}
export default { render };
"""

_CSS = """
.prism-tree { font: 12px/1.6 var(--jp-ui-font-family, sans-serif); max-height: 420px;
  overflow: auto; border: 1px solid #e5e7eb; padding: 4px; }
.prism-tree-row { cursor: pointer; white-space: nowrap; }
.prism-tree-row:hover { background: #f3f4f6; }
.prism-tree-row.selected { background: #dbeafe; outline: 1px solid #2563eb; }
.prism-tree-status { margin: 0 .5em; padding: 0 .3em; border-radius: 3px; }
.prism-tree-group .prism-tree-label { font-weight: 600; }
.prism-tree-counts { margin-left: 1em; color: #555; }
.prism-tree-more { color: #2563eb; }
.prism-tree-mark { margin-left: 1em; color: #b91c1c; font-weight: 600; }
"""


class TreeWidget(anywidget.AnyWidget):
    """The drawn tree: `rows` from Python, clicks back as messages (see `SearchTree`)."""

    _esm = _ESM
    _css = _CSS
    rows = traitlets.List(traitlets.Dict()).tag(sync=True)
    selected = traitlets.Unicode("").tag(sync=True)
    colors = traitlets.Dict(_COLORS).tag(sync=True)         # a status chip's background

