"""What the robustness sweep shares: the `prism` command run in-process (exit code, stdout,
stderr, the JSON document), or as a real process when a signal or a pipe is needed; a user's
small workload that optimizes in seconds; snapshots of earlier results, to show that they are
intact; and folders that cannot be written, for root too."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from prism.cli import main

ROOT = Path(__file__).resolve().parents[2]

USER = textwrap.dedent('''
    import torch
    import prism

    @prism.workload(X=(8, 64), W=(64, 32))
    def relu_proj(X, W):
        """relu(X @ W): a user's own program."""
        return torch.relu(X @ W)
''')
# reduced caps: the whole pipeline in a few seconds
CAPS = ("--max-block-ops", "3", "--grid-dims", "1", "--block-ops", "matmul,relu",
        "--accumulators", "nored", "--max-trials", "2", "--budget", "120")


@dataclass
class Run:
    code: int
    out: str
    err: str

    @property
    def doc(self) -> Any:
        """stdout as the one JSON document `--json` promises (fails the test if it is not)."""
        return json.loads(self.out)

    @property
    def error(self) -> dict[str, str]:
        return self.doc["error"]


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., Run]:
    """`cli(*argv)`: `prism.cli.main(argv)` in this process; a Traceback on either stream (or an
    exception escaping main) fails the test."""
    def run(*argv: str) -> Run:
        code = main([str(a) for a in argv])
        captured = capsys.readouterr()
        assert "Traceback" not in captured.err and "Traceback" not in captured.out
        return Run(code, captured.out, captured.err)
    return run


def _prism_process(*argv: Any, **kw: Any) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "prism", *map(str, argv)], cwd=ROOT, env=env,
                            text=True, **kw)


@pytest.fixture
def prism_process() -> Callable[..., subprocess.Popen[str]]:
    """`prism_process(*argv, **popen_kw)`: `python -m prism ARGV` as a real process (for a real
    signal or pipe), importing this worktree's prism."""
    return _prism_process


@pytest.fixture
def caps() -> tuple[str, ...]:
    """Reduced search caps for `user_workload`: the whole pipeline in a few seconds."""
    return CAPS


@pytest.fixture
def user_workload(tmp_path: Path) -> str:
    (tmp_path / "mine.py").write_text(USER)
    return f"{tmp_path / 'mine.py'}:relu_proj"


def _snapshot(path: Path) -> dict[str, bytes]:
    """Every file under `path` (or the file itself) with its bytes."""
    if path.is_file():
        return {"": path.read_bytes()}
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*"))
            if p.is_file()}


@pytest.fixture
def earlier(tmp_path: Path) -> tuple[Path, dict[str, bytes]]:
    """An output folder holding an earlier run's results, and their snapshot."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "kernel.py").write_text("# the earlier run's kernel\n")
    (out / "result.json").write_text('{"earlier": true}\n')
    (out / "trace.jsonl.gz").write_text("")
    return out, _snapshot(out)


def _siblings(path: Path) -> list[str]:
    """What a run left beside `path` (`out.failed-…`, `out.lock`, …), sorted."""
    return sorted(p.name for p in path.parent.iterdir() if p.name.startswith(f"{path.name}."))


@pytest.fixture
def snapshot() -> Callable[[Path], dict[str, bytes]]:
    """`snapshot(path)`: every file under `path` with its bytes (earlier results, to compare)."""
    return _snapshot


@pytest.fixture
def siblings() -> Callable[[Path], list[str]]:
    """`siblings(path)`: the names a run left beside `path` (`out.failed-…`, `out.lock`)."""
    return _siblings


@pytest.fixture
def locked_folder() -> Callable[[], Any]:
    """`with locked_folder() as ro:` a folder the test process cannot write into: mode 555, and
    for root (who ignores modes) the effective uid dropped to `nobody` inside the block, so that
    writing there fails with EACCES as it does for any user. It sits in a world-readable folder
    of its own so that `nobody` can reach it; what the command imports lazily is imported first
    (as nobody, Python could not read its own library under /root)."""
    import importlib
    for name in ("prism.cli", "prism.outputs", "prism.pipeline", "prism.report", "prism.tune",
                 "prism.search", "prism.search.checkpoint", "prism.targets", "prism.check",
                 "prism.ir.render", "prism.ir.serialize", "prism.frontend.mirage",
                 "prism.workloads.known_best"):
        importlib.import_module(name)
    from prism.targets import resolve
    resolve("rmsnorm_matmul")

    @contextlib.contextmanager
    def make() -> Iterator[Path]:
        base = Path(tempfile.mkdtemp(prefix="prism-ro-"))
        os.chmod(base, 0o777)       # writable by anyone, as /tmp: ro.parent holds what may be
        ro = base / "readonly"
        ro.mkdir()
        os.chmod(ro, 0o555)
        root = os.geteuid() == 0
        try:
            if root:
                os.seteuid(65534)
            try:
                yield ro
            finally:
                if root:
                    os.seteuid(0)
        finally:
            os.chmod(ro, 0o755)
            shutil.rmtree(base)
    return make
