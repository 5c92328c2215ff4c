"""The tracer stamps events and hands them to listeners; JSONL files store and replay them.

The engine emits; widgets, the CLI, trace files and tests listen. A listener that raises is
recorded in `Tracer.listener_errors` and never stops the other listeners. A listener subscribed
with `required=True` (the run's trace file) is one the run cannot do without: when it raises, the
other listeners still get that event, the failed listener is unsubscribed, and `emit` raises a
`ListenerError` naming it and its exception, which stops the engine (a trace file that cannot be
written is an error, not an incomplete record). The search runs in a background thread while
widgets listen, so `emit` holds a lock: seq numbers are unique and contiguous, and every listener
sees the events in seq order.

A trace file is JSON Lines: one `event_to_json` object per line, flushed as it is written, so a
live file can be tailed. A line leaves out its `seq` when it is the previous line's plus one (a
tracer's stream is contiguous, so that is every line but the first); readers put it back. A
counter on every line is the one field gzip cannot shrink: it was a quarter of `make run`'s
compressed trace. A path ending in `.gz` is written gzip-compressed (a search's trace is
thousands of near-identical family events: 36.8 MB for `make run`'s, 1.5 MB compressed), flushed
at most every `GZIP_FLUSH_S` seconds and at the end (a flush per event would double its size);
an output folder's trace is compressed (`TRACE_FILE`). Readers tell a compressed file by its
first bytes, whatever its name, and read a stream that is still being written (no gzip trailer
yet) up to its last whole line. Times are stamped to a tenth of a millisecond (`TIME_DIGITS`):
no view reads finer, and the digits below it were noise that cost a third of the compressed
bytes.
Never pickle.
"""

from __future__ import annotations

import copy
import gzip
import io
import json
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Protocol, TypeVar

from prism.errors import ListenerError, PrismError, TraceFormatError, TraceWriteError
from prism.trace.events import (
    Event,
    FamilyGenerated,
    FamilyPruned,
    StageFinished,
    StageStarted,
    event_from_json,
    event_to_json,
)

E = TypeVar("E", bound=Event)

_FIX = "re-run the search to write a new trace"
_GZIP_MAGIC = b"\x1f\x8b"
TIME_DIGITS = 4         # an event's `time` to a tenth of a millisecond
GZIP_FLUSH_S = 0.25     # a compressed trace is flushed at most this often (and at the end)
# The trace's name in an output folder (`prism optimize --out`, `superoptimize(out=)`): gzip, so
# `make run`'s stays under 2 MB (plain, 37 MB); `zcat` or `read_jsonl` reads it.
TRACE_FILE = "trace.jsonl.gz"


class Listener(Protocol):
    """Anything called with each event: a function, a widget, a `JsonlWriter`."""

    def __call__(self, event: Event, /) -> None: ...


class BudgetClock:
    """The clock a run's budgets are measured on: wall time, less the time a person held the
    run paused (`pause()` … `resume()`), so that pausing a live search spends none of its
    budget. Thread-safe: a view pauses it from one thread while the engine reads it in another.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held = 0.0                       # seconds paused, finished pauses only
        self._since: float | None = None       # when the current pause began

    def now(self) -> float:
        """Seconds on the budget's clock (only differences mean anything, as with perf_counter)."""
        with self._lock:
            wall = time.perf_counter()
            held = self._held + (wall - self._since if self._since is not None else 0.0)
            return wall - held

    @property
    def held_s(self) -> float:
        """Seconds the clock has stood still so far."""
        with self._lock:
            now = time.perf_counter()
            return self._held + (now - self._since if self._since is not None else 0.0)

    def pause(self) -> None:
        with self._lock:
            if self._since is None:
                self._since = time.perf_counter()

    def resume(self) -> None:
        with self._lock:
            if self._since is not None:
                self._held += time.perf_counter() - self._since
                self._since = None


class FamilySampler:
    """A listener that keeps events in `events`: all of them, but past `cap` family events
    (generated or pruned) only the first of each kind (a pruned family per rule, a family per
    search, told by its id's prefix `pf` for the partial-fusion search), so memory stays
    bounded whatever the search's size. It tells the search, before a pruned family is built,
    whether it would keep either of its events (`wants_family`): when it would not, and no
    other listener wants it, the family is counted, never built. `families` counts the family
    events it was sent or declined (two per declined family); `dropped` those it did not keep."""

    def __init__(self, events: list[Event], cap: int):
        self.events, self.cap = events, cap
        self.families = self.dropped = 0
        self._seen: set[tuple[str, str, bool]] = set()

    def __call__(self, event: Event) -> None:
        if isinstance(event, FamilyGenerated | FamilyPruned):
            self.families += 1
            key = (event.type, event.rule if isinstance(event, FamilyPruned) else "",
                   event.id.startswith("pf"))
            if self.families > self.cap and key in self._seen:
                self.dropped += 1
                return
            self._seen.add(key)
        self.events.append(event)

    def wants_family(self, rule: str, family_prefix: str) -> bool:
        partial = family_prefix.startswith("pf")
        if self.families + 1 <= self.cap or \
                (FamilyGenerated.type, "", partial) not in self._seen or \
                (FamilyPruned.type, rule, partial) not in self._seen:
            return True
        self.families += 2
        self.dropped += 2
        return False


class Tracer:
    """Stamps `seq` and `time` on each event, keeps it (unless `keep=False`), tells listeners.

    `budget` is the run's `BudgetClock`: the engine measures its time budgets on it, and a live
    view pauses it while a person holds the run paused."""

    def __init__(self, *, keep: bool = True, clock: Callable[[], float] = time.perf_counter,
                 budget: BudgetClock | None = None):
        self.keep = keep
        self.budget = budget or BudgetClock()
        self.events: list[Event] = []
        self.listener_errors: list[Exception] = []
        self._clock = clock
        self._start = clock()
        self._next_seq = 0
        self._listeners: tuple[Listener, ...] = ()  # replaced, never mutated: safe to iterate
        self._required: tuple[Listener, ...] = ()   # those whose failure stops the run
        # Reentrant so a listener that emits does not deadlock (its event is delivered first).
        self._lock = threading.RLock()

    @property
    def wants_events(self) -> bool:
        """Whether an event emitted here is kept or heard (else building one is wasted)."""
        return self.keep or bool(self._listeners)

    def wants_family(self, rule: str, family_prefix: str) -> bool:
        """Whether a family pruned by `rule` (its id starting `family_prefix`) is kept or heard:
        a listener that samples families (`FamilySampler`) says whether it would keep one of
        its two events, every other listener wants it. When none wants it, the search counts
        it without building it."""
        samplers = self._samplers()
        if samplers is None:
            return self.keep or bool(self._listeners)
        return any(one.wants_family(rule, family_prefix) for one in samplers)

    @property
    def family_cap(self) -> int | None:
        """The most family events a listener here keeps in full before it samples (the least
        cap of its `FamilySampler`s), when every listener samples; else None."""
        samplers = self._samplers()
        return None if samplers is None else min(one.cap for one in samplers)

    def _samplers(self) -> list[FamilySampler] | None:
        """The listeners when there are some and every one samples, and the tracer keeps no
        events itself; else None."""
        samplers = [one for one in self._listeners if isinstance(one, FamilySampler)]
        if self.keep or not samplers or len(samplers) < len(self._listeners):
            return None
        return samplers

    def subscribe(self, listener: Listener, *, required: bool = False) -> Callable[[], None]:
        """Call `listener` with every later event; returns a function that unsubscribes it.

        `required=True`: the run cannot do without it (a trace file), so its first failure makes
        `emit` raise instead of being only recorded in `listener_errors`."""
        with self._lock:
            self._listeners = (*self._listeners, listener)
            if required:
                self._required = (*self._required, listener)

        def unsubscribe() -> None:
            with self._lock:
                self._drop(listener)

        return unsubscribe

    def _drop(self, listener: Listener) -> None:
        for name in ("_listeners", "_required"):
            held: tuple[Listener, ...] = getattr(self, name)
            if listener in held:
                i = held.index(listener)
                setattr(self, name, held[:i] + held[i + 1 :])

    def emit(self, event: E, *, stamp: bool = True) -> E:
        """Stamp `event` with the next seq and the time, record it, call listeners; return it.

        `stamp=False` keeps the event's own seq and time (replaying a stored trace).
        """
        with self._lock:
            if stamp:
                # A fresh event (never emitted: seq -1) is stamped as it is, one already
                # emitted is copied first; `replace` would validate the payload a second time.
                if event.seq != -1:
                    event = copy.copy(event)
                object.__setattr__(event, "seq", self._next_seq)
                object.__setattr__(event, "time",
                                   round(self._clock() - self._start, TIME_DIGITS))
            self._next_seq = max(self._next_seq, event.seq + 1)
            if self.keep:
                self.events.append(event)
            failed: list[tuple[Listener, Exception]] = []
            for listener in self._listeners:
                try:
                    listener(event)
                except Exception as err:  # a broken view must not stop the others
                    err.add_note(f"raised by listener {listener!r} on {event.type} #{event.seq}")
                    self.listener_errors.append(err)
                    if listener in self._required:
                        failed.append((listener, err))
            if failed:  # every listener has seen this event; the run stops here
                for listener, _ in failed:
                    self._drop(listener)
                culprit, first = failed[0]
                if isinstance(first, PrismError):  # its message already names what and the fix
                    raise first
                raise ListenerError(f"the listener {culprit!r} failed on {event.type} "
                                    f"#{event.seq}: {type(first).__name__}: {first}") from first
        return event

    @contextmanager
    def stage(self, name: str) -> Iterator[dict[str, Any]]:
        """Bracket a stage with StageStarted/StageFinished; fill the yielded dict as its summary.

            with tracer.stage("search") as summary:
                summary["families"] = len(families)
        """
        summary: dict[str, Any] = {}
        self.emit(StageStarted(name))
        start = self._clock()
        try:
            yield summary
        except BaseException as err:
            seconds = self._clock() - start
            self.emit(StageFinished(name, seconds, summary, error=f"{type(err).__name__}: {err}"))
            raise
        self.emit(StageFinished(name, self._clock() - start, summary))


class JsonlWriter:
    """A listener that appends each event to a JSONL file as one line, flushed at once (a
    `.gz` path, or `shown`: compressed, flushed at most every `GZIP_FLUSH_S` seconds and at the
    end).

    A file that cannot be opened or written (a full disk, no permission) raises
    `TraceWriteError` naming the file (as `shown`, when it is written elsewhere first and moved
    there at the end), the operating system's reason and `fix`."""

    def __init__(self, path: str | Path, *, fix: str = "free space there or write it elsewhere",
                 shown: str | Path | None = None):
        self.path = Path(path)
        self.shown = Path(shown) if shown is not None else self.path
        self.fix = fix
        self._failed = False
        self._gzip = _compressed(self.shown)     # the staged file is named after it
        self._flushed = time.monotonic()
        self._seq = -1                  # the last line's seq (-1: none yet, or unstamped)
        try:
            self._file: IO[str] | None = _open_for_writing(self.path, self._gzip)
        except OSError as err:
            raise self._error(err) from err
        self._lock = threading.Lock()

    def __call__(self, event: Event, /) -> None:
        with self._lock:
            if self._file is None:
                raise ValueError(f"JsonlWriter for {self.path} is closed; open a new one")
            line = _dumps(event, self._seq)
            self._seq = event.seq
            try:
                self._file.write(line)
                if not self._gzip or time.monotonic() - self._flushed >= GZIP_FLUSH_S:
                    self._file.flush()
                    self._flushed = time.monotonic()
            except OSError as err:
                self._failed = True
                raise self._error(err) from err

    def close(self) -> None:
        """Close the file; a failure to write what is left raises `TraceWriteError`, unless a
        write has already failed (and said so)."""
        with self._lock:
            if self._file is None:
                return
            file, self._file = self._file, None
            try:
                file.close()
            except OSError as err:
                if not self._failed:
                    raise self._error(err) from err

    def _error(self, err: OSError) -> TraceWriteError:
        return TraceWriteError(f"the trace file {self.shown} could not be written: "
                               f"{err.strerror or err}; {self.fix}")

    def __enter__(self) -> JsonlWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"JsonlWriter({str(self.path)!r})"


def write_jsonl(events: Iterable[Event], path: str | Path) -> None:
    """Write `events` to `path` as JSON Lines, replacing the file (compressed: a `.gz` path)."""
    with _open_for_writing(Path(path), _compressed(Path(path))) as f:
        seq = -1
        for event in events:
            f.write(_dumps(event, seq))
            seq = event.seq


def read_jsonl(path: str | Path) -> list[Event]:
    """The events stored in `path`, in file order; blank lines are skipped.

    A line that is not an event raises `TraceFormatError` naming the file and the line.
    """
    return list(_iter_jsonl(path))


def replay(path: str | Path, target: Tracer | Listener) -> list[Event]:
    """Feed the events stored in `path`, in order and with their own seq and time, to `target`.

    The whole file is read first, so a bad line raises before anything is delivered. A `Tracer`
    re-emits them (keeping, and telling its listeners); a listener is called with each directly.
    """
    events = read_jsonl(path)
    for event in events:
        if isinstance(target, Tracer):
            target.emit(event, stamp=False)
        else:
            target(event)
    return events


def _dumps(event: Event, previous: int) -> str:
    """The event's line; its seq left out when it follows `previous` (the last line's)."""
    data = event_to_json(event)
    if previous >= 0 and event.seq == previous + 1:
        del data["seq"]
    # allow_nan=False: the JSON stays strict (JavaScript's JSON.parse rejects NaN and Infinity).
    return json.dumps(data, allow_nan=False) + "\n"


def _compressed(path: Path) -> bool:
    return path.suffix == ".gz"


def _open_for_writing(path: Path, compressed: bool) -> IO[str]:
    if compressed:
        return gzip.open(path, "wt", encoding="utf-8", compresslevel=6)
    return path.open("w", encoding="utf-8")


def _raw_lines(path: str | Path) -> Iterator[bytes]:
    """The file's lines as bytes, split on b"\n" only; a gzip stream (told by its first bytes)
    decompressed, up to its last whole line when it has no trailer yet (a trace still being
    written: its compressor may have emitted part of a line; a plain file's cut line fails to
    parse instead)."""
    with Path(path).open("rb") as f:
        if f.read(2) != _GZIP_MAGIC:
            f.seek(0)
            yield from f
            return
        f.seek(0)
        data, text = f.read(), bytearray()
    ended = True
    try:
        while data:             # members one after another: gzip allows several
            member = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
            text += member.decompress(data)
            ended = member.eof
            data = member.unused_data if member.eof else b""
    except zlib.error as err:
        raise TraceFormatError(f"{path}: a damaged gzip stream ({err}); {_FIX}") from None
    if not ended:               # still being written: its last line may not be whole yet
        del text[text.rfind(b"\n") + 1:]
    yield from io.BytesIO(text)


def _iter_jsonl(path: str | Path) -> Iterator[Event]:
    # Binary, split on b"\n" only: line numbers match what an editor shows, and bad UTF-8 is a
    # format error rather than a UnicodeDecodeError.
    seq = -1
    for number, raw in enumerate(_raw_lines(path), start=1):
        where = f"{path} line {number}"
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise TraceFormatError(f"{where}: not UTF-8 text; {_FIX}") from None
        if not line.strip(" \t\r\n"):  # JSON's whitespace
            continue
        try:
            data = json.loads(line)
        except (ValueError, RecursionError):  # JSONDecodeError is a ValueError
            raise TraceFormatError(f"{where}: not valid JSON (truncated?); {_FIX}") from None
        if isinstance(data, dict) and "seq" not in data and seq >= 0:
            data["seq"] = seq + 1           # left out: the line after `seq`
        try:
            event = event_from_json(data)
        except TraceFormatError as err:
            raise TraceFormatError(f"{where}: {err}") from None
        seq = event.seq
        yield event
