"""The result database: every measurement, keyed by everything that can invalidate it.

A key is the SHA-256 of the concrete kernel graph's JSON, the generated source's hash, the
backend's kind and device, and the versions it ran under (Triton, torch, GPU name, the cost
model's and code generator's own source). Records append to a JSONL file, one per measurement;
the last record of a key wins. A damaged line is skipped (and counted), never fatal: the
database is a cache.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path
from typing import Any


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


class ResultDB:
    """A JSONL-backed map from result keys to measurement records (thread-safe)."""

    def __init__(self, path: Path | str | None = None):
        self.path = Path(path) if path is not None else default_path()
        self._records: dict[str, dict[str, Any]] = {}
        self.damaged = 0
        self._lock = threading.Lock()
        if self.path.exists():
            for line in self.path.read_text().splitlines():
                try:
                    rec = json.loads(line)
                    self._records[rec["key"]] = rec
                except (ValueError, KeyError, TypeError):
                    self.damaged += 1

    def __len__(self) -> int:
        return len(self._records)

    def get(self, key: str) -> dict[str, Any] | None:
        return self._records.get(key)

    def put(self, key: str, record: dict[str, Any]) -> None:
        rec = {"key": key, **record}
        with self._lock:
            self._records[key] = rec
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a") as f:
                f.write(json.dumps(rec, default=_finite) + "\n")


def _finite(x: Any) -> Any:
    return str(x)
