"""Output paths that a failed or interrupted run never half-writes and that two runs never share.

A run that writes a folder (`--out DIR`) writes it as `DIR.partial-<pid>` beside DIR and renames
it into place when it finishes: the previous DIR is moved aside and removed only once the new one
is in place. A run that fails leaves DIR as it was and its own partial results in
`DIR.failed-<time>`; one that is interrupted, in `DIR.interrupted-<time>` (nothing, when it had
written nothing yet). A file written whole (a trace, a checkpoint) follows the same rule through
`OutputFile`.

`DIR.lock` beside DIR holds the pid and host of the run writing it. A second run into DIR is
refused while that process lives; a lock whose process is gone (a run killed with `kill -9`) is
taken over, and the run says so in a note.

Every path is checked before any work (`check_folder`, `check_file`): a file where a folder is
needed or the reverse, a folder that is not writable, a parent that cannot be made (a missing
parent is made, as `mkdir -p` would).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import tempfile
import time
from pathlib import Path
from typing import Literal

from prism.errors import OutputLockedError, OutputPathError

Outcome = Literal["done", "failed", "interrupted"]


def check_folder(path: Path, option: str) -> None:
    """`path` can be written as a folder: it is one (or nothing is there yet) and its parent is a
    writable folder, made if missing."""
    if path.exists() and not path.is_dir():
        raise OutputPathError(f"{option} {path}: a file is there, not a folder; give a folder "
                              f"(it is made if missing) or remove the file")
    _writable_parent(path, option)
    if path.is_dir():       # replaced at the end: a rename that needs the folder writable too
        _probe(path, path, option)


def check_file(path: Path, option: str) -> None:
    """`path` can be written as a file: no folder is in its place, and its parent is a writable
    folder, made if missing."""
    if path.is_dir():
        raise OutputPathError(f"{option} {path}: a folder is there, not a file; give a file "
                              "path")
    _writable_parent(path, option)


def _writable_parent(path: Path, option: str) -> None:
    parent = path.absolute().parent
    above = next(p for p in (parent, *parent.parents) if p.exists())
    if not above.is_dir():
        raise OutputPathError(f"{option} {path}: {above} is a file, so no folder can be made "
                              "under it; choose another path")
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise OutputPathError(f"{option} {path}: its folder {parent} cannot be made "
                              f"({e.strerror or e}); choose a path under a folder you can "
                              "write to") from None
    _probe(parent, path, option)


def _probe(folder: Path, path: Path, option: str) -> None:
    try:        # the one test that also holds for root and for read-only mounts: write there
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".prism-probe-")
    except OSError as e:
        raise OutputPathError(f"{option} {path}: the folder {folder} is not writable "
                              f"({e.strerror or e}); choose a folder you can write to") from None
    os.close(fd)
    os.unlink(probe)


def sibling(path: Path, outcome: Outcome) -> Path:
    """Where a run's results go: `path` itself when it is done, else `<path>.failed-<time>` or
    `<path>.interrupted-<time>` beside it (a name no earlier run took)."""
    if outcome == "done":
        return path
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = path.with_name(f"{path.name}.{outcome}-{stamp}")
    if out.exists():
        out = path.with_name(f"{path.name}.{outcome}-{stamp}-{os.getpid()}")
    return out


class OutputFolder:
    """A folder written as a whole: checked and locked on construction, written into `staging`,
    renamed into place (or beside it) by `finish`. `notes` says when a stale lock was taken over.

        folder = OutputFolder(Path("out"), "--out")
        try:
            ... write into folder.staging; name files with folder.final(...) ...
        except BaseException as e:
            folder.abandon(interrupted=isinstance(e, KeyboardInterrupt))
            raise
        folder.finish()
    """

    def __init__(self, path: Path | str, option: str = "--out"):
        self.path = Path(path)
        self.option = option
        self.notes: list[str] = []
        check_folder(self.path, option)
        self.lock = self.path.with_name(f"{self.path.name}.lock")
        self._take_lock()
        self.outcome: Outcome = "done"
        self.destination = self.path
        self.staging = self.path.with_name(f"{self.path.name}.partial-{os.getpid()}")
        try:
            if self.staging.exists():     # left by an earlier process that had this pid
                shutil.rmtree(self.staging)
            self.staging.mkdir()
        except OSError as e:
            self._release()
            raise OutputPathError(f"{option} {self.path}: cannot make {self.staging} "
                                  f"({e.strerror or e}); choose another {option}") from None

    def mark(self, outcome: Outcome) -> Path:
        """Decide where the results go (before they name their own paths) and return it."""
        if outcome != self.outcome:
            self.outcome = outcome
            self.destination = sibling(self.path, outcome)
        return self.destination

    def final(self, path: Path) -> Path:
        """The path a file written into `staging` will have once the folder is in place."""
        return self.destination / Path(path).relative_to(self.staging)

    def finish(self) -> Path:
        """Move the staging folder to its destination (replacing the previous results only
        when the run is done) and release the lock; returns where the results are."""
        try:
            if self.outcome != "done" and not any(self.staging.iterdir()):
                self.staging.rmdir()          # nothing was written: no folder to keep
                return self.destination
            if self.outcome == "done" and self.path.exists():
                aside = self.path.with_name(f"{self.path.name}.replaced-{os.getpid()}")
                os.rename(self.path, aside)
                try:
                    os.rename(self.staging, self.path)
                except OSError:
                    os.rename(aside, self.path)     # put the previous results back
                    raise
                shutil.rmtree(aside, ignore_errors=True)
            else:
                os.rename(self.staging, self.destination)
        except OSError as e:
            raise OutputPathError(f"{self.option} {self.path}: the results in {self.staging} "
                                  f"could not be moved to {self.destination} "
                                  f"({e.strerror or e}); they are still in {self.staging}") \
                from None
        finally:
            self._release()
        return self.destination

    def abandon(self, *, interrupted: bool) -> Path:
        """The run stopped with an exception: keep what it wrote beside the previous results."""
        if self.outcome == "done":
            self.mark("interrupted" if interrupted else "failed")
        return self.finish()

    def _take_lock(self) -> None:
        mine = f"{os.getpid()}\n{socket.gethostname()}\n"
        for _ in range(5):
            try:        # link: the lock appears whole (pid and host) or not at all
                fd, tmp = tempfile.mkstemp(dir=self.lock.parent, prefix=f".{self.lock.name}-")
                with os.fdopen(fd, "w") as f:
                    f.write(mine)
                try:
                    os.link(tmp, self.lock)
                    return
                finally:
                    os.unlink(tmp)
            except FileExistsError:
                pass
            except OSError as e:
                raise OutputPathError(f"{self.option} {self.path}: cannot make the lock "
                                      f"{self.lock} ({e.strerror or e}); choose another "
                                      f"{self.option}") from None
            pid, host = _holder(self.lock)
            if pid is not None and (host != socket.gethostname() or _alive(pid)):
                where = "" if host == socket.gethostname() else f" on {host}"
                raise OutputLockedError(
                    f"{self.option} {self.path}: another prism run (pid {pid}{where}) is "
                    f"writing into it (lock {self.lock}); wait for it to finish or choose "
                    f"another {self.option}")
            stale = self.lock.with_name(f"{self.lock.name}.stale-{os.getpid()}")
            try:        # rename: of two runs taking over one stale lock, one wins
                os.rename(self.lock, stale)
            except FileNotFoundError:
                continue
            stale.unlink()
            who = f"pid {pid}" if pid is not None else "a process that left it unreadable"
            left = self.path.with_name(f"{self.path.name}.partial-{pid}")
            kept = f"; its partial results are in {left}" if pid and left.exists() else ""
            self.notes.append(f"took over the lock {self.lock} of {who}, which is no longer "
                              f"running (an earlier run into {self.path} was killed){kept}")
        raise OutputLockedError(f"{self.option} {self.path}: the lock {self.lock} keeps "
                                "changing hands; wait for the other runs to finish")

    def _release(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.lock.unlink()


def _holder(lock: Path) -> tuple[int | None, str]:
    try:
        pid_text, host, *_ = [*lock.read_text().split("\n"), "", ""]
        return int(pid_text), host
    except (OSError, ValueError):
        return None, socket.gethostname()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:     # someone else's process: alive
        return True
    return True


class OutputFile:
    """A file written whole: written at `staging` beside `path`, renamed into place (or beside
    it, as `<path>.failed-<time>` or `<path>.interrupted-<time>`) by `finish`."""

    def __init__(self, path: Path | str, option: str):
        self.path = Path(path)
        check_file(self.path, option)
        self.staging = self.path.with_name(f"{self.path.name}.partial-{os.getpid()}")

    def finish(self, outcome: Outcome = "done") -> Path | None:
        """Move the staged file to where `outcome` puts it; None when nothing was written."""
        if not self.staging.exists():
            return None
        out = sibling(self.path, outcome)
        os.replace(self.staging, out)
        return out
