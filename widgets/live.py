"""What live views share: a redraw throttle and a pause/step gate for a running search.

`Throttle` calls a redraw at most every REDRAW_S seconds from a timer thread (always once more
after the last change), so a view stays responsive under 100,000 events. `Gate` lets a search's
tracer listener block while paused and lets `step(n)` events through, counted, never lost.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from prism.trace import Event, Tracer, read_jsonl

V = TypeVar("V", bound="LiveView")

REDRAW_S = 0.2          # a view redraws at most this often


class Throttle:
    """Calls `draw` at most once every `interval` seconds, from a timer thread, and always once
    after the last request (its trailing edge), so the final state is drawn; `flush()` draws now,
    in the caller's thread. The thread that requests never waits on a draw."""

    def __init__(self, draw: Callable[[], None], interval: float = REDRAW_S):
        self.interval = interval
        self.draws = 0
        self.errors: list[Exception] = []     # a failed draw is kept, never raised in a timer
        self._draw = draw
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None
        self._last = -math.inf

    def request(self) -> None:
        with self._lock:
            if self._timer is not None:
                return
            delay = max(0.0, self._last + self.interval - time.monotonic())
            self._timer = threading.Timer(delay, self._fire)
            self._timer.daemon = True
            self._timer.start()

    def _fire(self) -> None:
        with self._lock:
            self._timer = None
            self._last = time.monotonic()
        try:
            self._run()
        except Exception as err:  # a timer thread has nobody to raise to
            self.errors.append(err)

    def flush(self) -> None:
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            self._last = time.monotonic()
        self._run()

    def _run(self) -> None:
        self.draws += 1
        self._draw()


class Gate:
    """Paces the events of a live search: open, events pass; paused, the emitting thread waits
    in `wait()`, except that each `step()` lets exactly one more event through. A condition
    variable rather than a bare `threading.Event`, so that steps are counted, never lost."""

    def __init__(self, paused: bool = False):
        self._cond = threading.Condition()
        self._paused = paused
        self._steps = 0

    @property
    def paused(self) -> bool:
        return self._paused

    def wait(self, on_hold: Callable[[], None] | None = None) -> None:
        """Return at once when open or a step is left; else block until one is. `on_hold` is
        called each time the caller is about to block (a pause has taken effect)."""
        with self._cond:
            while self._paused and self._steps == 0:
                if on_hold is not None:
                    on_hold()
                self._cond.wait()
            if self._paused:
                self._steps -= 1

    def pause(self) -> None:
        with self._cond:
            self._paused, self._steps = True, 0

    def step(self, n: int = 1) -> None:
        with self._cond:
            self._steps += n
            self._cond.notify_all()

    def resume(self) -> None:
        with self._cond:
            self._paused, self._steps = False, 0
            self._cond.notify_all()


class LiveView:
    """What every view over a stream of events shares: it takes an event into its `state` under
    `_lock` and asks its `_throttle` for a redraw; it listens to a tracer; it replays a trace.
    A subclass sets `state`, `_lock` and `_throttle` and defines `redraw()`."""

    state: Any
    _lock: Any
    _throttle: Throttle

    def add(self, event: Event) -> None:
        """Take one event; the view redraws later (at most every REDRAW_S seconds)."""
        with self._lock:
            self.state.add(event)
        self._throttle.request()

    def __call__(self, event: Event) -> None:
        self.add(event)

    def attach(self, tracer: Tracer) -> Callable[[], None]:
        """Listen to `tracer`; returns the function that stops listening."""
        return tracer.subscribe(self.add)

    def redraw(self) -> None:
        raise NotImplementedError

    @classmethod
    def from_events(cls: type[V], events: Iterable[Event] | str | Path, **kwargs: Any) -> V:
        """A view of a recorded run: its events, or a JSONL trace file's path."""
        view = cls(**kwargs)
        if isinstance(events, str | Path):
            events = read_jsonl(events)
        with view._lock:
            for event in events:
                view.state.add(event)
        view.redraw()
        return view
