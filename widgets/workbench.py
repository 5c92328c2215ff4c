"""The workbench: the search explorer, the candidates (sGraph and proof) and the tuning monitor,
over one stream of events.

    bench = Workbench("rmsnorm_matmul").run()  # the whole pipeline live, in a notebook cell
    result = await bench.wait()                # a later cell: the kernel's loop stays free
    Workbench.from_trace("out/trace.jsonl")    # a saved run, replayed
    Workbench(...).save_html("page.html")      # a static page that needs no running kernel

It is a listener like its parts: every event goes to the `SearchExplorer`, the `TuningMonitor`
and the candidate list (verified and rejected candidates carry their sGraph JSON; the check
stage's summary names the winner). The explorer's run / pause / step / cancel drive the whole
pipeline (`prism.superoptimize`), which runs in a background thread. Pausing stops the run's
budget clock; cancelling keeps what was measured and the best kernel found so far (unchecked, and
labelled so). `join()` blocks the calling thread; in a notebook, `await bench.wait()`.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from prism.ir.graph import KernelGraph
from prism.trace import CandidateRejected, CandidateVerified, Event, StageFinished, read_jsonl
from widgets.explorer import SearchExplorer
from widgets.tuning import TuningMonitor

WINNER = "winner"      # the candidate list's entry for the pipeline's best kernel


class Workbench:
    def __init__(self, target: Any = None, *, device: str = "h100", measure: str = "model",
                 budget_s: float = 120.0, search_config: Any = None, max_trials: int = 8,
                 compile_ptx: bool = True):
        import ipywidgets as w

        self.target = target
        self.explorer = SearchExplorer()
        self.tuning = TuningMonitor()
        self.candidates: dict[str, CandidateVerified | CandidateRejected] = {}
        self.winner: dict[str, Any] | None = None      # the check stage's summary
        self.result: Any = None
        self.events: list[Event] = []                  # everything seen, for save_html
        self._lock = threading.Lock()
        self.choice = w.Dropdown(options=[], description="candidate")
        self.detail = w.VBox([])
        self.choice.observe(lambda _: self._show(), names="value")
        self.widget = w.Tab(children=[self.explorer.widget,
                                      w.VBox([self.choice, self.detail]),
                                      self.tuning.widget])
        for k, title in enumerate(("search", "candidates", "tuning")):
            self.widget.set_title(k, title)
        if target is not None:
            options = {"device": device, "measure": measure, "budget_s": budget_s,
                       "search_config": search_config, "max_trials": max_trials,
                       "compile_ptx": compile_ptx}
            self._prepare(target, options)

    # -- feeding -------------------------------------------------------------------------

    def add(self, event: Event) -> None:
        """Take one event (the explorer and the tuning monitor take theirs themselves when the
        workbench runs; `from_trace` feeds all three through here)."""
        self._note(event)
        self.explorer.add(event)
        self.tuning.add(event)

    __call__ = add

    def _note(self, event: Event) -> None:
        changed = False
        with self._lock:
            self.events.append(event)
            if isinstance(event, CandidateVerified | CandidateRejected) and event.graph:
                self.candidates[event.id] = event
                changed = True
            elif isinstance(event, StageFinished) and event.stage == "check" and \
                    event.summary.get("graph"):
                self.winner = dict(event.summary)
                changed = True
        if changed:
            self._options()

    @classmethod
    def from_trace(cls, events: Iterable[Event] | str | Path) -> Workbench:
        """A workbench over a recorded run: a JSONL trace path or the events themselves."""
        bench = cls()
        if isinstance(events, str | Path):
            events = read_jsonl(events)
        for event in events:
            bench.add(event)
        bench.explorer.redraw()
        bench.tuning.flush()
        return bench

    # -- running -------------------------------------------------------------------------

    def _prepare(self, target: Any, options: dict[str, Any]) -> None:
        def job(tracer: Any, cancel: threading.Event) -> Any:
            from prism.pipeline import superoptimize
            self.result = superoptimize(target, tracer=tracer, cancel=cancel, **options)
            return self.result.search
        self.explorer.prepare_job(job, listeners=[self._note, self.tuning.add])

    def run(self, paused: bool = False) -> Workbench:
        """Start (or resume) the pipeline in the background; the views follow it live.
        `paused=True` starts it held at its first event, its budget clock stopped."""
        self.explorer.run(paused)
        return self

    @property
    def done(self) -> bool:
        """Whether the run has ended (False before it starts)."""
        return self.explorer.done

    def join(self, timeout: float | None = None) -> Any:
        """Wait for the run, blocking this thread; returns `prism.superoptimize`'s result (None
        if not ended). In a notebook cell, `await bench.wait()` instead."""
        self.explorer.join(timeout)
        return self._finished()

    async def wait(self, timeout: float | None = None) -> Any:
        """Wait for the run without blocking the kernel's event loop: `result = await
        bench.wait()`. Returns what `join()` returns."""
        await self.explorer.wait(timeout)
        return self._finished()

    def _finished(self) -> Any:
        self.tuning.flush()
        self._options()
        return self.result

    # -- the candidates tab --------------------------------------------------------------

    def _options(self) -> None:
        with self._lock:
            opts = [("best kernel (the winner)", WINNER)] if self.winner else []
            opts += [(f"{cid} · {'verified' if isinstance(e, CandidateVerified) else 'rejected'}",
                      cid) for cid, e in self.candidates.items()]
        if [v for _, v in opts] != [v for _, v in self.choice.options]:
            keep = self.choice.value
            self.choice.options = opts
            if keep in dict((v, v) for _, v in opts):
                self.choice.value = keep

    def _show(self) -> None:
        from widgets.proof import ProofView
        from widgets.sgraph import SGraphView
        value = self.choice.value
        children: list[Any] = []
        if value == WINNER and self.winner:
            children.append(SGraphView(KernelGraph.from_json(self.winner["graph"])))
        elif value in self.candidates:
            event = self.candidates[value]
            assert event.graph is not None
            children += [SGraphView(KernelGraph.from_json(event.graph)), ProofView(event).widget]
        self.detail.children = children

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self.widget._repr_mimebundle_(**kwargs)

    # -- a static page -------------------------------------------------------------------

    def save_html(self, path: str | Path) -> Path:
        """The run as one static page with no kernel behind it (inline SVG, no script): the
        same page `prism optimize` writes as its report (`prism.report.page`), made from the
        events this workbench has seen."""
        from prism.report import page
        with self._lock:
            events = list(self.events)
        out = Path(path)
        out.write_text(page(events))
        return out
