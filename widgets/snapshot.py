"""Static HTML snapshots: what a view shows, as an output of its own that needs no kernel.

A widget's output holds only a reference to a model in the running kernel. A notebook reopened
later (kernel gone, page reloaded) or exported (nbconvert HTML) shows "Error displaying widget:
model not found" there, whatever else the same output holds: JupyterLab renders the widget's
mime type and nothing else of that bundle. So every view is displayed as two outputs
(`Snapshotted._ipython_display_`): the live widget, then a `text/html` display of what it shows,
folded in a `<details>`. Folded, because under a live view it would say everything twice; its
summary line names what matters (the best kernel with its latency and kind, the search's
counts), so a reopened notebook shows the gist at once and the whole picture one click away.

The snapshot has a display id: a live run rewrites it (`update_display`) at most every
`SNAPSHOT_S` seconds and once more when the view stops changing, so the notebook saved after a
run holds the finished run. JupyterLab keeps a cell's output listener after the cell has run, so
a run going on in the background still reaches it. The HTML is static (inline SVG, no script): the
live widgets' HTML parts as they are now, the controls as the values they hold, each chart as a
table or a static SVG (`static_html`).
"""

from __future__ import annotations

import html
import re
import uuid
from typing import Any

from widgets.live import Throttle

SNAPSHOT_S = 2.0     # a live view's snapshot is rewritten at most this often
_TAG = ("<b>static snapshot</b> <span style='color:#555'>(what the view showed; kept for a "
        "reopened or exported notebook)</span>")


def folded(summary: str, body: str) -> str:
    """A snapshot's HTML: `summary` (HTML) on the one line shown, `body` folded under it."""
    return (f"<details class='prism-snapshot' style='font-size:12px;margin:2px 0'>"
            f"<summary>{_TAG} · <span class='prism-snapshot-summary'>{summary}</span>"
            f"</summary><div class='prism-snapshot-body' style='margin:4px 0 0 1em'>{body}"
            "</div></details>")


class Snapshot:
    """One view's snapshot output: `show()` displays it (with its display id), `changed()`
    asks for a rewrite (throttled), `flush()` rewrites it now. `render` makes the HTML."""

    def __init__(self, render: Any, interval: float = SNAPSHOT_S):
        self.render = render
        self.display_id = f"prism-snapshot-{uuid.uuid4().hex}"
        self.shown = False
        self._throttle = Throttle(self._update, interval)

    def bundle(self) -> dict[str, str]:
        return {"text/html": self.render()}

    def show(self) -> None:
        from IPython.display import display
        self.shown = True
        display(self.bundle(), raw=True, display_id=self.display_id)

    def changed(self) -> None:
        if self.shown:
            self._throttle.request()

    def flush(self) -> None:
        if self.shown:
            self._throttle.flush()

    def _update(self) -> None:
        from IPython.display import update_display
        update_display(self.bundle(), raw=True, display_id=self.display_id)


class Snapshotted:
    """What a view mixes in to leave a snapshot: `snapshot_summary()` (one line of HTML) and,
    unless the widget's own static HTML will do, `snapshot_body()`. Displaying the view shows
    the live widget and then the snapshot; `_snapshot_changed()` after each redraw keeps it
    current."""

    _snap: Snapshot | None = None

    def _live_widget(self) -> Any:
        return getattr(self, "widget", self)

    def snapshot_summary(self) -> str:
        return ""

    def snapshot_body(self) -> str:
        return static_html(self._live_widget())

    def snapshot_html(self) -> str:
        """The snapshot as it would be displayed now."""
        return folded(self.snapshot_summary(), self.snapshot_body())

    @property
    def snapshot(self) -> Snapshot:
        if self._snap is None:
            self._snap = Snapshot(self.snapshot_html)
        return self._snap

    def _snapshot_changed(self) -> None:
        if self._snap is not None:
            self._snap.changed()

    def _ipython_display_(self) -> None:
        from IPython.display import display
        # the widget's own bundle, not display(self): that would come back here
        display(self._live_widget()._repr_mimebundle_(), raw=True)
        self.snapshot.show()


# -- a widget tree as static HTML ----------------------------------------------------------------

def static_html(widget: Any) -> str:
    """What `widget` shows now, as static HTML: HTML parts as they are, a control as the value it
    holds, a box as its visible children, a tab as its pages one after another, a chart as a
    table (`figure_html`), the search tree as its drawn rows. Buttons and hidden parts leave
    nothing."""
    import ipywidgets as w

    from widgets.tree import TreeWidget
    if getattr(getattr(widget, "layout", None), "display", None) == "none":
        return ""
    if isinstance(widget, TreeWidget):
        return tree_rows_html(widget.rows)
    if _is_figure(widget):
        return figure_html(widget)
    if isinstance(widget, w.HTML | w.HTMLMath):
        return str(widget.value)
    if isinstance(widget, w.Label):
        return f"<span>{html.escape(str(widget.value))}</span>"
    if isinstance(widget, w.Button | w.Checkbox):
        return ""
    if isinstance(widget, w.Dropdown | w.ToggleButtons | w.Select | w.RadioButtons):
        if widget.label in (None, ""):
            return ""
        return _control(widget.description, str(widget.label))
    if isinstance(widget, w.Text | w.Textarea):
        return _control(widget.description, widget.value) if widget.value else ""
    if isinstance(widget, w.IntSlider):
        return _control(widget.description, f"{widget.value} (of {widget.min}…{widget.max})")
    if isinstance(widget, w.Tab | w.Accordion):
        return "".join(f"<h4 style='margin:8px 0 2px'>{html.escape(str(title or ''))}</h4>"
                       f"{static_html(child)}"
                       for title, child in zip(widget.titles, widget.children, strict=False))
    if isinstance(widget, w.HBox):
        parts = [p for p in (static_html(c) for c in widget.children) if p]
        return ("<div style='display:flex;flex-wrap:wrap;gap:8px'>"
                + "".join(f"<div style='min-width:0;flex:1 1 auto'>{p}</div>" for p in parts)
                + "</div>") if parts else ""
    if isinstance(widget, w.Box):
        return "".join(f"<div>{p}</div>" for p in (static_html(c) for c in widget.children)
                       if p)
    return ""


def _control(description: str, value: str) -> str:
    label = f"{html.escape(description)}: " if description else ""
    return f"<span class='prism-snapshot-control'>{label}<b>{html.escape(value)}</b></span>"


def _is_figure(widget: Any) -> bool:
    return type(widget).__name__ == "FigureWidget" and hasattr(widget, "data")


def figure_html(figure: Any) -> str:
    """A plotly chart as a table: per trace, its points (x, y); the title as a caption."""
    title = getattr(getattr(figure.layout, "title", None), "text", None) or "chart"
    rows = []
    for trace in figure.data:
        xs, ys = list(trace.x or ()), list(trace.y or ())
        name = html.escape(str(trace.name or ""))
        rows += [f"<tr><td>{name}</td><td>{html.escape(str(x))}</td><td>{html.escape(str(y))}"
                 "</td></tr>" for x, y in zip(xs, ys, strict=False)]
    if not rows:
        return f"<p><i>{html.escape(title)}: nothing yet</i></p>"
    return (f"<table class='prism-snapshot-chart'><caption>{html.escape(title)}</caption>"
            "<tr><th></th><th>x</th><th>y</th></tr>" + "".join(rows) + "</table>")


def tree_rows_html(rows: list[dict[str, Any]]) -> str:
    """The search tree's drawn rows as an indented list: id, status, label, counts, audit mark."""
    lines = []
    for row in rows:
        mark = "" if row.get("open") is None else ("▾ " if row["open"] else "▸ ")
        parts = [mark]
        if row.get("id"):
            parts.append(f"<code>{html.escape(row['id'])}</code> ")
        if row.get("status") and row["status"] != "search" and row.get("kind") == "node":
            parts.append(f"[{html.escape(row['status'])}] ")
        parts.append(html.escape(str(row.get("label", ""))))
        if row.get("counts"):
            parts.append(f" <span style='color:#555'>{html.escape(row['counts'])}</span>")
        if row.get("mark"):
            parts.append(f" <b style='color:#b91c1c'>⚠ {html.escape(row['mark'])}</b>")
        weight = "font-weight:600;" if row.get("selected") else ""
        lines.append(f"<div style='padding-left:{1.3 * int(row.get('depth', 0)):.1f}em;"
                     f"{weight}white-space:nowrap'>{''.join(parts)}</div>")
    return ("<div class='prism-snapshot-tree' style='font:12px/1.5 sans-serif;max-height:420px;"
            "overflow:auto'>" + "".join(lines) + "</div>")


def page_body(page: str) -> str:
    """A `prism.report.page` made fit for a notebook output: its body, its style scoped to the
    snapshot (the page's `body{...}` would restyle the whole notebook)."""
    style = re.search(r"<style>(.*?)</style>", page, re.S)
    body = re.search(r"<body>(.*)</body>", page, re.S)
    rules = []
    for rule in (style.group(1) if style else "").split("}"):
        if "{" not in rule:
            continue
        selectors, declarations = rule.split("{", 1)
        if selectors.strip() == "body":        # the page's margin is the output's
            rules.append(".prism-page{" + declarations.replace("margin:2em", "margin:0") + "}")
            continue
        inside = ", ".join(f".prism-page {s.strip()}" for s in selectors.split(","))
        rules.append(f"{inside}{{{declarations}}}")
    scoped = f"<style>{''.join(rules)}</style>" if rules else ""
    return scoped + f"<div class='prism-page'>{body.group(1) if body else page}</div>"
