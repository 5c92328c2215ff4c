"""The tuning monitor against a real trace: best so far is the running minimum of each kind,
the best is the pipeline's winner, failures are listed with their errors, and the figure holds
one point per finite measurement, by kind."""

from __future__ import annotations

import dataclasses
import math
import re

from prism.trace import MEASURE_KINDS, Measured, StageFinished, Tracer
from widgets.tuning import SYMBOLS, TuningMonitor, TuningState, failures_html


def state_of(events) -> TuningState:
    state = TuningState()
    for e in events:
        state.add(e)
    return state


def measured(events) -> list[Measured]:
    found = [e for e in events if isinstance(e, Measured)]
    assert found
    return found


def with_failures(events) -> list:
    """The trace with two failed kernels added after its measurements (inf, with an error)."""
    last = measured(events)[-1]
    failed = [dataclasses.replace(last, id=f"bad{i}", latency_us=math.inf, kind=kind,
                                  params={"gx": 4, "error": f"CompileError: broken {i}"})
              for i, kind in enumerate(("modeled", "interpreted"))]
    i = events.index(last) + 1
    return [*events[:i], *failed, *events[i:]]


def test_best_so_far_is_the_running_minimum_per_kind(recorded):
    state = state_of(recorded.events)
    for kind in MEASURE_KINDS:
        latencies = [e.latency_us for e in measured(recorded.events)
                     if e.kind == kind and math.isfinite(e.latency_us)]
        assert [p.latency_us for p in state.points[kind]] == latencies
        assert state.best_so_far(kind) == [min(latencies[: i + 1])
                                           for i in range(len(latencies))]
    assert state.kinds == ["modeled"]            # measure="model": nothing else


def test_the_best_is_the_pipelines_winner(recorded):
    state = state_of(recorded.events)
    assert state.best().latency_us == recorded.result.best.latency_us
    assert state.ranking_kind == recorded.result.best.latency_kind == "modeled"
    assert state.winner == recorded.result.best.config
    assert state.roofline_us == recorded.result.roofline_us
    assert state.eager_us == recorded.result.eager_us
    state.set_bounds(roofline_us=1.5)
    assert (state.roofline_us, state.eager_us) == (1.5, recorded.result.eager_us)


def test_failures_are_reported_with_their_errors(recorded):
    events = with_failures(recorded.events)
    state = state_of(events)
    assert [(p.config, p.kind, p.error) for p in state.failures] == [
        ("bad0", "modeled", "CompileError: broken 0"),
        ("bad1", "interpreted", "CompileError: broken 1")]
    # a failure never enters a curve or the best
    assert state.best().latency_us == recorded.result.best.latency_us
    assert not state.points["interpreted"]
    text = failures_html(state.failures)
    assert text.count("<tr><td>") == 2 and "CompileError: broken 1" in text
    assert "1 earlier failures not shown" in failures_html(state.failures, limit=1)


def test_the_figure_has_a_point_per_finite_measurement(recorded):
    events = with_failures(recorded.events)
    view = TuningMonitor.from_events(events)
    data = view.figure.data
    finite = [e for e in measured(events) if math.isfinite(e.latency_us)]
    for kind in MEASURE_KINDS:
        dots = data[view.scatter[kind]]
        assert kind in dots.name and dots.marker.symbol == SYMBOLS[kind]
        want = [e.latency_us for e in finite if e.kind == kind]
        assert list(dots.y or ()) == want
        assert list(data[view.lines[kind]].y or ()) == view.state.best_so_far(kind)
    assert sum(len(data[i].x or ()) for i in view.scatter.values()) == len(finite)
    assert len({d.marker.symbol for d in (data[i] for i in view.scatter.values())}) == 3
    roofline = data[view.roofline]
    assert list(roofline.y) == [recorded.result.roofline_us] * 2 and "roofline" in roofline.name
    assert list(data[view.eager].y) == [recorded.result.eager_us] * 2
    assert len(re.findall(r"<tr><td>", view.failures.value)) == 2
    assert "2 failed" in view.header.value


def test_the_monitor_updates_live_and_throttled(recorded, until):
    view = TuningMonitor(interval=0.1)
    tracer = Tracer()
    view.attach(tracer)
    events = [e for e in recorded.events if not isinstance(e, StageFinished)]
    for _ in range(20):                                    # a burst: 20 × the trace
        for e in events:
            tracer.emit(e, stamp=False)
    n = 20 * len(measured(events))
    until(lambda: len(view.figure.data[view.scatter["modeled"]].x or ()) == n, timeout=20)
    assert view._throttle.draws < 50 and not view._throttle.errors
    assert view.figure.data[view.roofline].x in (None, ())    # no check stage: no bounds yet
    view.set_bounds(roofline_us=2.0, eager_us=9.0)
    view.flush()
    assert list(view.figure.data[view.roofline].y) == [2.0, 2.0]
    assert not tracer.listener_errors


def test_each_latency_kind_has_its_own_log_axis(recorded):
    """Interpreted wall times and modeled latencies never share a scale: each kind's points and
    fastest-so-far line sit on the kind's own log axis, titled with it, shown once it has points;
    the roofline and eager lines are modeled, on the modeled axis."""
    events = recorded.events
    kinds = {e.kind for e in measured(events)}
    view = TuningMonitor.from_events(events)
    layout, data = view.figure.layout, view.figure.data
    axes = {kind: view.axis[kind] for kind in MEASURE_KINDS}
    assert len(set(axes.values())) == len(MEASURE_KINDS)
    for kind, axis in axes.items():
        spec = layout["yaxis" + axis[1:]]
        assert spec.type == "log" and kind in spec.title.text
        assert data[view.scatter[kind]].yaxis == data[view.lines[kind]].yaxis == axis
        has_points = bool(data[view.scatter[kind]].y)
        assert has_points == (kind in kinds) or kind == "modeled"
        assert spec.visible in (None, True) if has_points or kind == "modeled" else \
            spec.visible is False
    assert data[view.roofline].yaxis == data[view.eager].yaxis == axes["modeled"]


def test_the_header_says_why_the_best_is_not_the_fastest_interpreted_point():
    """With the interpreter backend the best is ranked by the model; when a faster interpreted
    point is plotted, the header says so (the oracle: the points fed in)."""
    from prism.trace import Measured, StageFinished
    from widgets.tuning import TuningState, _header_html

    state = TuningState()
    for config, us in [("c1[gx=1]", 900.0), ("c2[gx=2]", 700.0)]:
        state.add(Measured(config, config.split("[")[0], {}, us, "interpreted", "h100"))
    state.add(StageFinished("check", 1.0, {"best": "c1[gx=1]", "latency_us": 900.0,
                                           "latency_kind": "interpreted"}))
    text = _header_html(state)
    assert "best <code>c1[gx=1]</code>: 900 µs (interpreted)" in text
    assert "<code>c2[gx=2]</code>'s interpreted time is lower (700 µs)" in text
    state.add(StageFinished("check", 1.0, {"best": "c2[gx=2]", "latency_us": 700.0,
                                           "latency_kind": "interpreted"}))
    assert "is lower" not in _header_html(state)     # the best is the fastest: nothing to say
