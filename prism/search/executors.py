"""Where a search's tasks run: in this process, on a pool of processes, or on a Ray cluster.

The search (`prism.search.driver.search`) first generates the part of the tree above the cut (a
custom kernel's block graphs with `SearchConfig.split_depth` block ops), then hands each subtree
below a cut to the executor as a `Task` and merges the outcomes in the tree's order, numbering
families and candidates as one depth-first search would. A task carries only what it needs: the
kernel and block state at the cut, the incumbent before it, the family budget left and the
deadline. What every task shares — the target, the config and the target's e-graph — is sent once
per worker (`Job`) and built there once. So the result is the same whatever the executor and the
number of workers; only the wall time changes.

- `local` runs each task in place when the merge reaches it (no extra process; the default).
- `processes` runs them on a pool of this machine's processes (spawned: no state is inherited).
- `ray` runs them as Ray tasks (`address`, or `PRISM_RAY_ADDRESS`, names a running cluster;
  without one a local cluster is started). Ray is imported here only, and only when chosen.

The split move (`SearchConfig.split_loops`), after the depth-first search, fans out too: each
worker verifies, models and descends the split programs of a chunk of consecutive proved
programs (`split_task`, a function of the programs), and the pass takes that work in order.

Budgets and cancel reach every worker: each task has the deadline (as wall-clock time: the
workers' clocks are this machine's, or a cluster's synchronized ones) and polls a shared stop
flag. A worker that dies takes only its running task with it: the task is queued again (up to
`RETRIES` times) and the result's notes say so.
"""

from __future__ import annotations

import os
import pickle
import signal
import socket
import time
import uuid
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any

from prism.errors import PrismError
from prism.ir.graph import KernelGraph
from prism.search.abstract import AbstractTarget
from prism.search.config import SearchConfig
from prism.search.driver import Numbering, Task, TaskOutcome, _Flag, _Run
from prism.trace import FamilySampler, Tracer

EXECUTORS = ("local", "processes", "ray")
RETRIES = 3                 # times a task is queued again after its worker was lost
POLL_S = 0.05               # how often a worker looks at the stop flag, at most


class ExecutorError(PrismError):
    """An executor that cannot run this search: unknown, unreachable, or given what it cannot
    send to another process."""


@dataclass(frozen=True)
class Executor:
    """Where a search's tasks run: `name` (local, processes, ray), how many workers (default:
    every CPU of the machine or cluster) and, for ray, the cluster's address."""

    name: str = "local"
    workers: int | None = None
    address: str | None = None

    def __post_init__(self) -> None:
        if self.name not in EXECUTORS:
            raise ExecutorError(f"unknown executor {self.name!r}; choose from "
                                f"{', '.join(EXECUTORS)}")
        if self.workers is not None and (isinstance(self.workers, bool) or
                                         not isinstance(self.workers, int) or self.workers < 1):
            raise ExecutorError(f"workers is {self.workers!r}; give a whole number ≥ 1")
        if self.address is not None and self.name != "ray":
            raise ExecutorError(f"a cluster address is for the ray executor, not {self.name!r}; "
                                "drop --ray-address or choose --executor ray")


@dataclass(frozen=True)
class Job:
    """What every task of one search shares, sent once to each worker."""

    key: str
    target: KernelGraph
    label: str
    config: SearchConfig
    want_events: bool
    family_cap: int | None = None   # keep each task's events so (`FamilySampler`), not all


def _worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


class _Throttled:
    """A stop flag looked at no more often than every `POLL_S` (the search asks per family)."""

    def __init__(self, check: Callable[[], bool]):
        self.check, self.next, self.value = check, 0.0, False

    def is_set(self) -> bool:
        now = time.perf_counter()
        if not self.value and now >= self.next:
            self.value, self.next = self.check(), now + POLL_S
        return self.value


# -- the worker side ------------------------------------------------------------------------------

_WORKER: dict[str, _Run] = {}       # job key → the run its tasks reuse (one job at a time)


def _worker_run(job: Job) -> _Run:
    run = _WORKER.get(job.key)
    if run is None:
        _WORKER.clear()
        run = _Run(job.target, job.label, job.config, Tracer(keep=False), None)
        _WORKER[job.key] = run
    return run


def run_task(job: Job, task: Task, deadline_wall: float, limit: int | None,
             stop: _Flag | None) -> TaskOutcome:
    """A task in a worker: provisional ids, the deadline as wall-clock time."""
    run = _worker_run(job)
    sampler = None
    if job.want_events and job.family_cap is not None:
        tracer = Tracer(keep=False)
        sampler = FamilySampler([], job.family_cap)
        tracer.subscribe(sampler)
    else:
        tracer = Tracer(keep=job.want_events)
    deadline = tracer.budget.now() + (deadline_wall - time.time())
    out = run.run_task(task, tracer, Numbering(), deadline, limit, stop)
    out.worker = _worker_name()
    out.events = sampler.events if sampler is not None else \
        tracer.events if job.want_events else None
    out.events_dropped = sampler.dropped if sampler is not None else 0
    return out


def split_task(job: Job, graphs: list[KernelGraph], deadline_wall: float,
               stop: _Flag | None) -> list[dict[str, Any]]:
    """The split pass's work for a chunk of proved programs in a worker (`_Run.split_work`),
    one dict per program, up to the deadline (the pass computes the rest itself)."""
    run = _worker_run(job)
    run.tracer = Tracer(keep=False)
    run.deadline = run.tracer.budget.now() + (deadline_wall - time.time())
    run.cancel, run.stop_reason = stop, None
    run.family_limit = run.candidate_limit = None
    out = []
    for graph in graphs:
        if run.should_stop():
            break
        out.append(run.split_work(graph))
    return out


_POOL_JOB: list[Any] = []     # in a pool worker: (job, stop event), set by the initializer


def _pool_init(job: Job, stop: Any) -> None:
    # A terminal's Ctrl-C reaches the whole process group: the coordinator handles it (the
    # search stops as at its budget and keeps its work) and tells the workers by the flag.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _POOL_JOB[:] = [job, _Throttled(stop.is_set)]
    try:                      # build the target's e-graph while the coordinator cuts the tree
        _worker_run(job)
    except Exception:         # raised again by the first task, with its traceback
        _WORKER.clear()


def _pool_task(task: Task, deadline_wall: float, limit: int | None) -> TaskOutcome:
    job, stop = _POOL_JOB
    return run_task(job, task, deadline_wall, limit, stop)


def _pool_split(graphs: list[KernelGraph], deadline_wall: float) -> list[dict[str, Any]]:
    job, stop = _POOL_JOB
    return split_task(job, graphs, deadline_wall, stop)


# -- the coordinator side -------------------------------------------------------------------------

SPLIT_CHUNK = 16            # proved programs per split task, at most


class Ahead:
    """The split pass's work, computed on the workers in chunks of consecutive programs;
    `get` waits for a program's chunk. A chunk whose worker was lost, or that stopped at its
    deadline, gives nothing for what it did not do (the pass computes that itself)."""

    def __init__(self, chunks: list[tuple[int, int, Any]],
                 wait: Callable[[Any, float], tuple[bool, Any]], on_stop: Callable[[], None],
                 notes: list[str], name: str):
        self.chunks, self.wait, self.on_stop, self.notes, self.name = \
            chunks, wait, on_stop, notes, name
        self.done: dict[int, list[dict[str, Any]]] = {}

    def get(self, index: int, stop: Callable[[], bool]) -> dict[str, Any] | None:
        """The work for program `index`; None when `stop()` says the pass must stop."""
        k = next(k for k, (a, b, _) in enumerate(self.chunks) if a <= index < b)
        a, _, handle = self.chunks[k]
        while k not in self.done:
            if stop():
                self.on_stop()
                return None
            finished, value = self.wait(handle, 0.1)
            if not finished:
                continue
            if isinstance(value, BaseException):
                if not isinstance(value, (BrokenProcessPool, ExecutorError)) and \
                        type(value).__module__.split(".")[0] != "ray":
                    raise value
                note = (f"a {self.name} worker was lost during the split move "
                        f"({type(value).__name__}); the programs it had not done were checked "
                        "by the coordinator")
                if note not in self.notes:
                    self.notes.append(note)
                value = []
            self.done[k] = value
        part = self.done[k]
        return part[index - a] if index - a < len(part) else {}


def _chunks(count: int, workers: int) -> list[tuple[int, int]]:
    size = max(1, min(SPLIT_CHUNK, -(-count // (8 * max(workers, 1)))))
    return [(a, min(a + size, count)) for a in range(0, count, size)]


class Session:
    """One search on an executor: submit the tasks, then take their outcomes in order."""

    name = "local"
    in_place = True             # tasks run when the walk reaches them, from its incumbent

    def __init__(self, job: Job, abstract: AbstractTarget, cancel: _Flag | None, workers: int):
        self.job, self.abstract, self.cancel, self.workers = job, abstract, cancel, workers
        self.notes: list[str] = []
        self.tracer: Tracer | None = None
        self._here: _Run | None = None
        self.deadline = 0.0
        # the walk's quick-trial refutations (`_Run.trials`), which a task run in place shares
        self.walked: dict[Any, Any] | None = None

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "workers": self.workers}

    def start(self, tracer: Tracer, deadline: float) -> None:
        self.tracer, self.deadline = tracer, deadline

    def submit(self, tasks: list[Task]) -> None:
        pass

    def run_here(self, task: Task, numbering: Numbering, limit: int | None) -> TaskOutcome:
        """Run `task` in this process, emitting its events to the search's tracer at once."""
        if self._here is None:
            job = self.job
            self._here = _Run(job.target, job.label, job.config, Tracer(keep=False), None,
                              abstract=self.abstract)
        if self.walked is not None:
            self._here.trials = self.walked
        assert self.tracer is not None
        return self._here.run_task(task, self.tracer, numbering, self.deadline, limit,
                                   self.cancel)

    def outcome(self, task: Task, numbering: Numbering, limit: int | None) -> TaskOutcome | None:
        return self.run_here(task, numbering, limit)

    def close(self) -> None:
        pass

    def split_ahead(self, graphs: list[KernelGraph], deadline_wall: float) -> Ahead | None:
        """The split pass's work for these proved programs, started on the workers; None for
        an executor that runs in this process (the pass computes it in place)."""
        return None

    def _wall_deadline(self) -> float:
        """The deadline as wall-clock time for a worker: the budget left now, on the search's
        clock (a task already sent keeps the deadline it was sent with, paused or not)."""
        assert self.tracer is not None
        return time.time() + (self.deadline - self.tracer.budget.now())

    def _lost(self, index: int, tries: dict[int, int], why: str, hint: str = "") -> None:
        tries[index] = tries.get(index, 0) + 1
        if tries[index] > RETRIES:
            raise ExecutorError(f"task {index} lost its worker {tries[index]} times ({why}); "
                                f"the {self.name} executor is failing: "
                                f"{hint or 'check its workers'}, or run with --executor local")
        self.notes.append(f"a {self.name} worker was lost running task {index} ({why}); "
                          "the task was queued again")


class ProcessSession(Session):
    name = "processes"
    in_place = False

    def __init__(self, job: Job, abstract: AbstractTarget, cancel: _Flag | None, workers: int):
        super().__init__(job, abstract, cancel, workers)
        import multiprocessing
        self._mp = multiprocessing.get_context("spawn")
        self._stop = self._mp.Event()
        self._pool = self._new_pool()
        self._futures: dict[int, Future[TaskOutcome]] = {}
        self._tasks: dict[int, Task] = {}
        self._tries: dict[int, int] = {}

    def _new_pool(self) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(self.workers, mp_context=self._mp, initializer=_pool_init,
                                   initargs=(self.job, self._stop))

    def submit(self, tasks: list[Task]) -> None:
        for task in tasks:
            self._tasks[task.index] = task
            self._submit(task.index)

    def _submit(self, index: int) -> None:
        task = self._tasks[index]
        self._futures[index] = self._pool.submit(_pool_task, task, self._wall_deadline(),
                                                 task.limit)

    def outcome(self, task: Task, numbering: Numbering, limit: int | None) -> TaskOutcome | None:
        while True:
            fut = self._futures[task.index]
            done, _ = wait([fut], timeout=0.1, return_when=FIRST_COMPLETED)
            if self.cancel is not None and self.cancel.is_set():
                self._stop.set()
            if not done:
                continue
            try:
                return fut.result()
            except BrokenProcessPool as e:
                self._replace_pool(task.index, str(e) or "its process died")

    def split_ahead(self, graphs: list[KernelGraph], deadline_wall: float) -> Ahead | None:
        chunks = [(a, b, self._pool.submit(_pool_split, graphs[a:b], deadline_wall))
                  for a, b in _chunks(len(graphs), self.workers)]

        def wait_for(fut: Future[Any], timeout: float) -> tuple[bool, Any]:
            if self.cancel is not None and self.cancel.is_set():
                self._stop.set()
            done, _ = wait([fut], timeout=timeout)
            if not done:
                return False, None
            error = fut.exception()
            return True, error if error is not None else fut.result()
        return Ahead(chunks, wait_for, self._stop.set, self.notes, self.name)

    def _replace_pool(self, index: int, why: str) -> None:
        """A worker died: every task not finished is queued again on a new pool."""
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._pool = self._new_pool()
        started = any(_succeeded(f) for f in self._futures.values())
        self._lost(index, self._tries, why, "" if started else
                   "no worker finished a task; a script that searches on processes must do so "
                   "under `if __name__ == '__main__':`, since each spawned worker imports the "
                   "main module")
        for i, fut in list(self._futures.items()):
            if not _succeeded(fut):
                self._submit(i)

    def close(self) -> None:
        self._stop.set()
        self._pool.shutdown(wait=True, cancel_futures=True)


def _succeeded(fut: Future[Any]) -> bool:
    return fut.done() and not fut.cancelled() and fut.exception() is None


class _RayFlag:
    """A stop flag every Ray task of a search can read (a tiny actor)."""

    def __init__(self) -> None:
        self.value = False

    def set(self) -> None:
        self.value = True

    def is_set(self) -> bool:
        return self.value


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ExecutorError("the ray executor needs Ray: pip install 'ray[default]' (or "
                            "`pip install -e '.[ray]'`), or choose --executor processes") from None
    return ray


_RAY_REMOTE: dict[str, Any] = {}


def _ray_task(job: Job, task: Task, deadline_wall: float, limit: int | None,
              flag: Any) -> TaskOutcome:
    ray = _ray()
    stop = _Throttled(lambda: bool(ray.get(flag.is_set.remote())))
    return run_task(job, task, deadline_wall, limit, stop)


def _ray_split(job: Job, graphs: list[KernelGraph], deadline_wall: float,
               flag: Any) -> list[dict[str, Any]]:
    ray = _ray()
    stop = _Throttled(lambda: bool(ray.get(flag.is_set.remote())))
    return split_task(job, graphs, deadline_wall, stop)


class RaySession(Session):
    name = "ray"
    in_place = False

    def __init__(self, job: Job, abstract: AbstractTarget, cancel: _Flag | None, workers: int,
                 address: str | None):
        ray = self.ray = _ray()
        if not ray.is_initialized():
            try:
                if address:
                    ray.init(address=address, log_to_driver=False)
                else:
                    ray.init(num_cpus=workers or None, include_dashboard=False,
                             log_to_driver=False)
            except Exception as e:  # Ray raises many kinds; all mean the same
                raise ExecutorError(f"cannot start or reach the Ray cluster "
                                    f"{address or '(local)'}: {type(e).__name__}: {e}; start it "
                                    "with `ray start --head` and pass --ray-address, or choose "
                                    "--executor processes") from None
        cpus = int(ray.cluster_resources().get("CPU", 1))
        super().__init__(job, abstract, cancel, workers or cpus)
        if "task" not in _RAY_REMOTE:
            _RAY_REMOTE["task"] = ray.remote(max_retries=0)(_ray_task)
            _RAY_REMOTE["flag"] = ray.remote(num_cpus=0)(_RayFlag)
            _RAY_REMOTE["split"] = ray.remote(max_retries=0)(_ray_split)
        self._flag = _RAY_REMOTE["flag"].remote()
        self._job_ref = ray.put(job)
        self._refs: dict[int, Any] = {}
        self._tasks: dict[int, Task] = {}
        self._tries: dict[int, int] = {}

    def describe(self) -> dict[str, Any]:
        nodes = [n for n in self.ray.nodes() if n.get("Alive")]
        return {"name": self.name, "workers": self.workers, "nodes": len(nodes)}

    def submit(self, tasks: list[Task]) -> None:
        for task in tasks:
            self._tasks[task.index] = task
            self._submit(task.index)

    def _submit(self, index: int) -> None:
        task = self._tasks[index]
        self._refs[index] = _RAY_REMOTE["task"].remote(
            self._job_ref, task, self._wall_deadline(), task.limit, self._flag)

    def outcome(self, task: Task, numbering: Numbering, limit: int | None) -> TaskOutcome | None:
        ray = self.ray
        while True:
            ref = self._refs[task.index]
            done, _ = ray.wait([ref], timeout=0.1)
            if self.cancel is not None and self.cancel.is_set():
                self._flag.set.remote()
            if not done:
                continue
            try:
                return ray.get(ref)
            except ray.exceptions.RayTaskError as e:   # raised by the task: not a lost worker
                raise e.as_instanceof_cause() from None
            except ray.exceptions.RayError as e:
                self._lost(task.index, self._tries, type(e).__name__)
                self._submit(task.index)

    def split_ahead(self, graphs: list[KernelGraph], deadline_wall: float) -> Ahead | None:
        ray = self.ray
        chunks = [(a, b, _RAY_REMOTE["split"].remote(self._job_ref, graphs[a:b], deadline_wall,
                                                     self._flag))
                  for a, b in _chunks(len(graphs), self.workers)]
        self._refs.update({-1 - k: ref for k, (_, _, ref) in enumerate(chunks)})

        def wait_for(ref: Any, timeout: float) -> tuple[bool, Any]:
            if self.cancel is not None and self.cancel.is_set():
                self._flag.set.remote()
            done, _ = ray.wait([ref], timeout=timeout)
            if not done:
                return False, None
            try:
                return True, ray.get(ref)
            except ray.exceptions.RayTaskError as e:   # raised by the work: not a lost worker
                return True, e.as_instanceof_cause()
            except ray.exceptions.RayError as e:
                return True, e
        return Ahead(chunks, wait_for, lambda: self._flag.set.remote(), self.notes, self.name)

    def close(self) -> None:
        try:
            self._flag.set.remote()
            for ref in self._refs.values():
                self.ray.cancel(ref)
        except Exception:  # a cluster going away needs no more stopping
            pass


def open_session(where: Executor,
                 job_parts: tuple[KernelGraph, str, SearchConfig, bool, int | None],
                 abstract: AbstractTarget, cancel: _Flag | None) -> Session:
    """The session of executor `where` for one search."""
    job = Job(uuid.uuid4().hex, *job_parts)
    if where.name == "local":
        return Session(job, abstract, cancel, 1)
    try:
        pickle.dumps(job)
    except Exception as e:  # pickle raises several kinds
        raise ExecutorError(f"the {where.name} executor sends the search to other processes, "
                            f"and this search cannot be sent ({type(e).__name__}: {e}); a user "
                            "rule must be a module-level function, or run with --executor "
                            "local") from None
    if where.name == "processes":
        return ProcessSession(job, abstract, cancel, where.workers or os.cpu_count() or 1)
    return RaySession(job, abstract, cancel, where.workers or 0,
                      where.address or os.environ.get("PRISM_RAY_ADDRESS") or None)
