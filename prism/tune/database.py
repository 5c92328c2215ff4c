"""The result database: every measurement, keyed by everything that can invalidate it.

A key is the SHA-256 of the concrete kernel graph's JSON, the generated source's hash, the
backend's kind, the device and the dtype the program runs in, and the versions it ran under
(Triton, torch, GPU name, the cost model's and code generator's own source). Records append to a
JSONL file, one per measurement; the last record of a key wins.

The database is a cache, so nothing in it is trusted: each record is checked on load against
its schema (`record_problem`: a SHA-256 key, a configuration name, a known kind, a latency that
is finite and positive — or infinite with the error that made it so — and a `modeled` latency no
lower than the roofline bound stored beside it). A bad record (bad JSON, binary bytes, a cut-off
line, an edited number) is skipped *and reported*: `bad` lists each with its line and reason,
`notes()` says it in words and `summary()` counts it for the report. `get` returns a record only
of the kind the caller measures. An append is one `write` of one complete line, after a newline
when the file's last line was cut off, so a crash leaves one whole line or nothing and never
swallows the next record; a write that fails is counted, never fatal. `check_writable` finds an
unwritable database (or its folder) before a search starts.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import string
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeGuard

from prism.errors import ResultDBError
from prism.trace import MEASURE_KINDS

_FIX = "choose another file with --db (or set PRISM_CACHE_DIR)"


def default_path() -> Path:
    root = Path(os.environ.get("PRISM_CACHE_DIR", Path.home() / ".cache" / "prism"))
    return root / "results.jsonl"


def result_key(**parts: Any) -> str:
    """A stable key: the SHA-256 of the parts as sorted JSON."""
    text = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def source_version(*modules: str) -> str:
    """A short hash of the named modules' source files: a change to the model or the code
    generator invalidates what was measured with the old one."""
    import importlib.util
    h = hashlib.sha256()
    for name in modules:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.origin and os.path.exists(spec.origin):
            h.update(Path(spec.origin).read_bytes())
    return h.hexdigest()[:12]


@dataclass(frozen=True)
class BadRecord:
    """A record skipped on load (or by `get`): where it is and what is wrong with it."""

    line: int
    reason: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.reason}"


def _number(x: Any) -> TypeGuard[float]:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def record_problem(rec: Any) -> str | None:
    """What is wrong with a record, or None when it can be used."""
    if not isinstance(rec, dict):
        return f"not a JSON object but {type(rec).__name__}"
    key = rec.get("key")
    if not (isinstance(key, str) and len(key) == 64 and set(key) <= set(string.hexdigits)):
        return "its key is not a SHA-256 hex digest"
    if not isinstance(rec.get("config"), str):
        return "its config is not a name"
    kind = rec.get("kind")
    if kind not in MEASURE_KINDS:
        return f"kind {kind!r} is not one of {', '.join(MEASURE_KINDS)}"
    error, latency = rec.get("error"), rec.get("latency_us")
    if error is not None and not isinstance(error, str):
        return "its error is not text"
    if not _number(latency):
        return f"latency {latency!r} is not a number"
    if error is not None:
        return None if latency == math.inf else \
            f"a failed measurement ({error}) with a latency of {latency} µs instead of inf"
    if not (math.isfinite(latency) and latency > 0):
        return f"latency {latency} µs is not a finite positive number"
    bound = rec.get("roofline_us")
    if bound is not None and not (_number(bound) and math.isfinite(bound) and bound > 0):
        return f"roofline bound {bound!r} is not a finite positive number"
    if kind == "modeled":
        if bound is None:
            return ("a modeled latency without the roofline bound to check it against "
                    "(written by an older prism; it is modeled again)")
        if latency < bound * (1 - 1e-9):
            return (f"modeled latency {latency:.4g} µs is below its roofline bound "
                    f"{bound:.4g} µs, which no program beats")
    return None


class ResultDB:
    """A JSONL-backed map from result keys to measurement records (thread-safe)."""

    def __init__(self, path: Path | str | None = None):
        self.path = Path(path) if path is not None else default_path()
        self._records: dict[str, dict[str, Any]] = {}
        self._lines: dict[str, int] = {}        # a loaded record's line, for what `get` reports
        self.bad: list[BadRecord] = []
        self.write_failures: list[str] = []
        self._lock = threading.Lock()
        if self.path.exists():
            self._load()

    def _load(self) -> None:
        try:
            raw = self.path.read_bytes()
        except OSError as e:
            raise ResultDBError(f"the result database {self.path} cannot be read "
                                f"({e.strerror or e}); {_FIX}") from None
        # split on b"\n" only, so line numbers match an editor's and bad bytes stay in one line
        for number, chunk in enumerate(raw.split(b"\n"), start=1):
            if not chunk.strip():
                continue
            try:
                rec = json.loads(chunk.decode("utf-8"))
            except UnicodeDecodeError:
                self.bad.append(BadRecord(number, "not UTF-8 text (binary bytes)"))
                continue
            except (ValueError, RecursionError):
                self.bad.append(BadRecord(number, "not valid JSON (a cut-off or edited line)"))
                continue
            why = record_problem(rec)
            if why is not None:
                self.bad.append(BadRecord(number, why))
                continue
            self._records[rec["key"]] = rec
            self._lines[rec["key"]] = number

    @property
    def damaged(self) -> int:
        """How many records were skipped (the report prints it)."""
        return len(self.bad)

    def __len__(self) -> int:
        return len(self._records)

    def check_writable(self) -> None:
        """Raise `ResultDBError` now, not after a search, when the database cannot be appended
        to (its folder cannot be made, a folder is in its place, no permission)."""
        try:
            if self.path.exists() or self.path.is_symlink():
                os.close(os.open(self.path, os.O_WRONLY | os.O_APPEND))
            else:           # made by the first put: probe its folder, leave nothing behind
                self.path.parent.mkdir(parents=True, exist_ok=True)
                fd, probe = tempfile.mkstemp(dir=self.path.parent, prefix=".prism-probe-")
                os.close(fd)
                os.unlink(probe)
        except OSError as e:
            raise ResultDBError(f"the result database {self.path} cannot be written "
                                f"({e.strerror or e}); {_FIX}") from None

    def get(self, key: str, kind: str | None = None) -> dict[str, Any] | None:
        """The record under `key`; with `kind`, only one of that kind (a `measured` record
        under a key the model backend asks for is an edit, reported and not used)."""
        rec = self._records.get(key)
        if rec is not None and kind is not None and rec["kind"] != kind:
            with self._lock:
                self.bad.append(BadRecord(self._lines.get(key, 0), f"a {rec['kind']!r} "
                                          f"record under a key of the {kind!r} backend"))
                del self._records[key]
            return None
        return rec

    def put(self, key: str, record: dict[str, Any]) -> None:
        rec = {"key": key, **record}
        line = (json.dumps(rec, default=str) + "\n").encode()
        with self._lock:
            self._records[key] = rec
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
                try:
                    size = os.fstat(fd).st_size
                    cut = size > 0 and os.pread(fd, 1, size - 1) != b"\n"
                    os.write(fd, b"\n" + line if cut else line)   # one write: a line or nothing
                finally:
                    os.close(fd)
            except OSError as e:   # a cache that cannot be written loses no measurement
                self.write_failures.append(f"{e.strerror or e}")

    def summary(self) -> dict[str, Any]:
        return {"path": str(self.path), "records": len(self._records), "skipped": len(self.bad),
                "problems": [str(b) for b in self.bad[:5]],
                "write_failures": len(self.write_failures)}

    def notes(self) -> list[str]:
        """The run's notes about this database: bad records skipped, writes that failed."""
        out = []
        if self.bad:
            more = f" (and {len(self.bad) - 3} more)" if len(self.bad) > 3 else ""
            out.append(f"the result database {self.path}: {len(self.bad)} bad record(s) "
                       f"skipped and measured again: {'; '.join(map(str, self.bad[:3]))}{more}")
        if self.write_failures:
            out.append(f"the result database {self.path}: {len(self.write_failures)} "
                       f"record(s) could not be written ({self.write_failures[0]}); the run "
                       "kept them in memory")
        return out
