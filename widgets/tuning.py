"""The tuning monitor: every configuration's latency as it is measured, labelled by its kind.

    monitor = TuningMonitor.from_events(result.trace)
    monitor = TuningMonitor(); tracer.subscribe(monitor)     # live

`TuningState` consumes `Instantiated` and `Measured` events (and the pipeline's "check"
`StageFinished`, whose summary names the winner, the roofline and the eager baseline): the points
(config id, latency, kind) per kind, each kind's best-so-far curve, the failed configurations
(latency `inf`, with `params["error"]`), and the bounds. Kinds are never mixed: a `modeled`
number, an `interpreted` wall time and a `measured` GPU time mean different things
(`prism.trace.MEASURE_KINDS`). Plain Python, no Jupyter.

`TuningMonitor` is the view: a plotly `FigureWidget` with one scatter trace per kind (its own
marker symbol), each kind's best so far as a line, the roofline and the eager baseline as
horizontal lines, and a table of the failures; it redraws at most every `REDRAW_S` seconds from a
timer thread, in one `batch_update`.
"""

from __future__ import annotations

import html
import math
import threading
from dataclasses import dataclass, field
from typing import Any

from prism.trace import (
    MEASURE_KINDS,
    Event,
    Instantiated,
    Measured,
    StageFinished,
)
from widgets.live import REDRAW_S, LiveView, Throttle
from widgets.snapshot import Snapshotted

SYMBOLS = {"measured": "circle", "interpreted": "diamond", "modeled": "square"}
RANKING = ("measured", "modeled", "interpreted")   # which kind ranks: interpreted times do not
FAILURE_ROWS = 50


@dataclass(frozen=True)
class Point:
    """One `Measured` event."""

    n: int                      # its place among the measurements (the plot's x axis), from 1
    config: str
    candidate: str | None
    latency_us: float           # inf: the configuration failed
    kind: str
    params: dict[str, Any] = field(default_factory=dict)
    device: str | None = None
    seq: int = -1

    @property
    def ok(self) -> bool:
        return math.isfinite(self.latency_us)

    @property
    def error(self) -> str | None:
        err = self.params.get("error")
        return None if err is None else str(err)


class TuningState:
    """The tuning so far, from its events; see the module docstring."""

    def __init__(self) -> None:
        self.events = 0
        self.measurements = 0
        self.measured: list[Measured] = []      # every Measured event, failures too
        self.points: dict[str, list[Point]] = {k: [] for k in MEASURE_KINDS}   # finite only
        self.curves: dict[str, list[float]] = {k: [] for k in MEASURE_KINDS}   # best so far
        self.failures: list[Point] = []
        self.instantiated: dict[str, dict[str, Any]] = {}   # config id → its parameters
        self.roofline_us: float | None = None
        self.eager_us: float | None = None
        self.check: dict[str, Any] | None = None            # the check stage's summary
        self.tuning: dict[str, Any] | None = None           # the tune stage's summary

    def add(self, event: Event) -> None:
        self.events += 1
        if isinstance(event, Instantiated):
            self.instantiated[event.id] = event.params
        elif isinstance(event, Measured):
            self.measurements += 1
            self.measured.append(event)
            p = Point(self.measurements, event.id, event.candidate, event.latency_us,
                      event.kind, event.params, event.device, event.seq)
            if not p.ok:
                self.failures.append(p)
                return
            curve = self.curves.setdefault(p.kind, [])
            curve.append(min(curve[-1], p.latency_us) if curve else p.latency_us)
            self.points.setdefault(p.kind, []).append(p)
        elif isinstance(event, StageFinished) and event.stage == "tune":
            self.tuning = event.summary
        elif isinstance(event, StageFinished) and event.stage == "check":
            self.check = event.summary
            self.set_bounds(roofline_us=_number(event.summary.get("roofline_us")),
                            eager_us=_number(event.summary.get("eager_us")))

    def set_bounds(self, *, roofline_us: float | None = None,
                   eager_us: float | None = None) -> None:
        """The roofline and eager latencies (µs, modeled); None leaves one as it is."""
        if roofline_us is not None:
            self.roofline_us = roofline_us
        if eager_us is not None:
            self.eager_us = eager_us

    @property
    def kinds(self) -> list[str]:
        """The kinds with at least one finite point, in MEASURE_KINDS order."""
        return [k for k in self.points if self.points[k]]

    @property
    def ranking_kind(self) -> str | None:
        """The kind that ranks configurations: measured, else modeled, else interpreted."""
        return next((k for k in RANKING if self.points.get(k)), None)

    def best_so_far(self, kind: str) -> list[float]:
        """After each point of `kind`, the least latency of that kind so far."""
        return list(self.curves.get(kind, ()))

    def best(self, kind: str | None = None) -> Point | None:
        """The fastest point of `kind` (default: the ranking kind); the first on a tie."""
        kind = kind or self.ranking_kind
        points = self.points.get(kind or "", [])
        return min(points, key=lambda p: p.latency_us) if points else None

    @property
    def winner(self) -> str | None:
        """The configuration the pipeline chose (from the check stage), when it said."""
        best = (self.check or {}).get("best")
        return best if isinstance(best, str) else None


# The y axis of each latency kind (plotly's names): modeled on the left, the others on the right
AXES = {"modeled": "y", "measured": "y2", "interpreted": "y3"}


def _layout_key(axis: str) -> str:
    return "yaxis" + axis[1:]


def _axis_layout(kind: str) -> dict[str, Any]:
    """A log axis titled with its kind; the second and third sit on the right of the plot."""
    out: dict[str, Any] = {"title": {"text": f"{kind} latency (µs, log)"}, "type": "log",
                           "visible": kind == "modeled",
                           # one format for every tick ("37.9", "35.9k"; not "35.854k")
                           "tickformat": ".3~s"}
    if AXES[kind] != "y":
        out.update(overlaying="y", side="right", anchor="free",
                   position=0.86 if AXES[kind] == "y2" else 0.96)
    return out


def _number(x: object) -> float | None:
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) else None


class TuningMonitor(Snapshotted, LiveView):
    """The view over a `TuningState`; a listener (`tracer.subscribe(monitor)`)."""

    def __init__(self, state: TuningState | None = None, *, interval: float = REDRAW_S):
        import ipywidgets as w
        import plotly.graph_objects as go

        self.state = state or TuningState()
        self._lock = threading.RLock()
        self._draw_lock = threading.Lock()
        self._throttle = Throttle(self.redraw, interval)
        traces: list[Any] = []
        self.scatter: dict[str, int] = {}       # kind → trace index
        self.lines: dict[str, int] = {}         # kind → its best-so-far line
        # One y axis per latency kind: an interpreted wall time (ms of Python) and a modeled
        # GPU latency (µs) are different quantities and never share a scale. The roofline and
        # eager lines are modeled, on the modeled axis.
        self.axis = {kind: AXES[kind] for kind in MEASURE_KINDS}
        for kind in MEASURE_KINDS:
            self.scatter[kind] = len(traces)
            traces.append(go.Scatter(
                x=[], y=[], mode="markers", name=f"{kind} latency", yaxis=self.axis[kind],
                marker={"symbol": SYMBOLS.get(kind, "circle"), "size": 8},
                hovertemplate="%{text}<br>%{y:.4g} µs (" + kind + ")<extra></extra>"))
        for kind in MEASURE_KINDS:
            self.lines[kind] = len(traces)
            traces.append(go.Scatter(x=[], y=[], mode="lines", name=f"fastest so far ({kind})",
                                     yaxis=self.axis[kind], line={"shape": "hv"},
                                     hoverinfo="skip"))
        self.roofline = len(traces)
        traces.append(go.Scatter(x=[], y=[], mode="lines", name="roofline (modeled bound)",
                                 yaxis=self.axis["modeled"],
                                 line={"dash": "dash", "color": "black"}, hoverinfo="skip"))
        self.eager = len(traces)
        traces.append(go.Scatter(x=[], y=[], mode="lines", name="eager (modeled)",
                                 yaxis=self.axis["modeled"],
                                 line={"dash": "dot", "color": "gray"}, hoverinfo="skip"))
        self.figure = go.FigureWidget(traces, layout=go.Layout(
            title="tuning", xaxis_title="measurement", height=420,
            xaxis={"domain": [0.0, 0.86]},
            **{_layout_key(AXES[kind]): _axis_layout(kind) for kind in MEASURE_KINDS},
            # the legend below the plot: on its right it covered the right axes' titles
            legend={"orientation": "h", "x": 0.0, "y": -0.22, "yanchor": "top"},
            margin={"l": 50, "r": 10, "t": 40, "b": 110}))
        self.header = w.HTML()
        self.failures = w.HTML()
        self.widget = w.VBox([self.header, self.figure, self.failures])
        self.redraw()

    def set_bounds(self, *, roofline_us: float | None = None,
                   eager_us: float | None = None) -> None:
        with self._lock:
            self.state.set_bounds(roofline_us=roofline_us, eager_us=eager_us)
        self._throttle.request()

    def flush(self) -> None:
        """Draw now (rather than at the throttle's next tick)."""
        self._throttle.flush()

    def redraw(self) -> None:
        with self._draw_lock:
            self._redraw()

    def _redraw(self) -> None:
        with self._lock:
            s = self.state
            series = {k: ([p.n for p in s.points[k]], [p.latency_us for p in s.points[k]],
                          [p.config for p in s.points[k]], s.best_so_far(k))
                      for k in MEASURE_KINDS}
            span = [0, max(s.measurements, 1)]
            bounds = {self.roofline: s.roofline_us, self.eager: s.eager_us}
            header = _header_html(s)
            failures = failures_html(s.failures)
        data = self.figure.data
        # the arrays are sent whole; at most once per interval, so thousands of points are fine
        with self.figure.batch_update():
            for kind, (xs, ys, text, curve) in series.items():
                dots, line = data[self.scatter[kind]], data[self.lines[kind]]
                if len(dots.x or ()) != len(xs):
                    dots.x, dots.y, dots.text = xs, ys, text
                    line.x, line.y = xs, curve
                dots.showlegend = line.showlegend = bool(xs)
                if kind != "modeled":      # an axis shows once its kind has points
                    self.figure.layout[_layout_key(self.axis[kind])].visible = bool(xs)
            for index, value in bounds.items():
                trace = data[index]
                trace.x, trace.y = (span, [value, value]) if value is not None else ([], [])
                trace.showlegend = value is not None
        self.header.value = header
        self.failures.value = failures
        self._snapshot_changed()

    def snapshot_summary(self) -> str:
        """The snapshot's line: the best so far of the ranking kind, with its kind."""
        with self._lock:
            s = self.state
            best = s.best()
            failed = f", {len(s.failures)} failed" if s.failures else ""
            if best is None:
                return f"tuning · {s.measurements} measured{failed}"
            return html.escape(f"tuning · best so far {best.config}: {best.latency_us:.4g} µs "
                               f"({best.kind}) · {s.measurements} measured{failed}")

    def snapshot_body(self) -> str:
        """The header, one static plot per latency kind (kinds never share an axis), the
        failures."""
        from prism.report import tuning_svg
        with self._lock:
            s = self.state
            bounds = [(v, label) for v, label in ((s.roofline_us, "roofline bound"),
                                                  (s.eager_us, "eager")) if v is not None]
            plots = [f"<h4>{html.escape(kind)} latencies</h4>" + tuning_svg(
                [e for e in s.measured if e.kind == kind], bounds if kind == "modeled" else [])
                for kind in s.kinds]
            return _header_html(s) + "".join(plots) + failures_html(s.failures)

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self.widget._repr_mimebundle_(**kwargs)


def _header_html(s: TuningState) -> str:
    """One "best" only: the pipeline's (proved, and the fastest that passed its check) once
    the check stage names it; until then the fastest point so far, called that."""
    parts = [f"{s.measurements} measurements, {len(s.failures)} failed"]
    tuning = s.tuning or {}
    if tuning.get("not_measured"):
        parts.append(f"{tuning['not_measured']} not measured "
                     f"({html.escape(str(tuning.get('stopped', '?')))})")
    check = s.check or {}
    fastest = s.best()
    if s.winner is not None:
        latency, kind = _number(check.get("latency_us")), str(check.get("latency_kind", "?"))
        parts.append(f"best <code>{html.escape(s.winner)}</code>"
                     + (f": {latency:.4g} µs ({html.escape(kind)})" if latency else ""))
        quicker = s.best(kind) if kind == "interpreted" else None
        if latency and quicker is not None and quicker.latency_us < latency:
            # the plot's fastest interpreted point is not the best: say why
            parts.append(f"ranked by the model: <code>{html.escape(quicker.config)}</code>'s "
                         f"interpreted time is lower ({quicker.latency_us:.4g} µs), but wall "
                         "times in Triton's interpreter do not rank GPU kernels")
    elif s.check is not None:
        parts.append("no best kernel (none proved and passing its check)")
    elif fastest is not None:
        parts.append(f"fastest so far <code>{html.escape(fastest.config)}</code>: "
                     f"{fastest.latency_us:.4g} µs ({html.escape(fastest.kind)})")
    if s.roofline_us is not None:
        parts.append(f"roofline {s.roofline_us:.4g} µs")
    if s.eager_us is not None:
        parts.append(f"eager {s.eager_us:.4g} µs")
    return " · ".join(parts)


def failures_html(failures: list[Point], limit: int = FAILURE_ROWS) -> str:
    """The failed configurations, newest last, at most `limit` rows (and how many are left)."""
    if not failures:
        return "<p><i>no failed configurations</i></p>"
    shown = failures[-limit:]
    rows = "".join(
        f"<tr><td>{p.n}</td><td><code>{html.escape(p.config)}</code></td>"
        f"<td>{html.escape(p.candidate or '')}</td><td>{html.escape(p.kind)}</td>"
        f"<td>{html.escape(p.error or 'latency inf, no error recorded')}</td></tr>"
        for p in shown)
    more = (f"<p>{len(failures) - len(shown)} earlier failures not shown</p>"
            if len(failures) > len(shown) else "")
    return (f"<p><b>{len(failures)} failed</b></p>{more}<table class='prism-failures'><thead>"
            "<tr><th>#</th><th>config</th><th>candidate</th><th>kind</th><th>error</th></tr>"
            f"</thead><tbody>{rows}</tbody></table>")
