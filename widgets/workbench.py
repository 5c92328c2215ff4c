"""The workbench: the search explorer, the candidates (sGraph and proof) and the tuning monitor,
over one stream of events.

    bench = Workbench("rmsnorm_matmul").run()  # the whole pipeline live, in a notebook cell
    result = await bench.wait()                # a later cell: the kernel's loop stays free
    Workbench.from_trace("out/trace.jsonl.gz") # a saved run, replayed
    Workbench(...).save_html("page.html")      # a static page that needs no running kernel
    Workbench(..., out="run/")                 # the run's kernel.py, PTX and report land there
    bench.export("winner/")                    # the winner taken away: kernel.py, PTX, report

Its search tab shows the search as a tree (`SearchTree`), the explorer's table one click away.
It is a listener like its parts: every event goes to the `SearchExplorer`, the `TuningMonitor`
and the candidate list (verified and rejected candidates carry their sGraph JSON; the check
stage's summary names the winner; the candidates tab selects it by default and shows its id,
latency and kind, check, proof and Triton source, each op's lines lit on choosing the op, and an
export button). The explorer's run / pause / step / cancel drive the whole
pipeline (`prism.superoptimize`), which runs in a background thread. Pausing stops the run's
budget clock; cancelling keeps what was measured and the best kernel found so far (unchecked, and
labelled so). `join()` blocks the calling thread; in a notebook, `await bench.wait()`.
"""

from __future__ import annotations

import html
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from prism.errors import PrismError
from prism.ir.graph import KernelGraph
from prism.trace import CandidateRejected, CandidateVerified, Event, StageFinished, read_jsonl
from widgets.explorer import SearchExplorer
from widgets.snapshot import Snapshotted, page_body
from widgets.tree import SearchTree
from widgets.tuning import TuningMonitor

WINNER = "winner"      # the candidate list's entry for the pipeline's best kernel


class Workbench(Snapshotted):
    def __init__(self, target: Any = None, *, device: str = "h100", measure: str = "model",
                 budget_s: float = 120.0, search_config: Any = None, max_trials: int = 8,
                 compile_ptx: bool = True, out: str | Path | None = None, advice: Any = None):
        import ipywidgets as w

        self.target = target
        self.out = Path(out) if out is not None else None
        self.explorer = SearchExplorer()
        self.tree = SearchTree.of(self.explorer)
        self.tuning = TuningMonitor()
        self.candidates: dict[str, CandidateVerified | CandidateRejected] = {}
        self.winner: dict[str, Any] | None = None      # the check stage's summary
        self.result: Any = None
        self.events: list[Event] = []                  # everything seen, for save_html
        self._lock = threading.Lock()
        self.choice = w.Dropdown(options=[], description="candidate")
        self.detail = w.VBox([])
        self.export_button = w.Button(description="export the best kernel", icon="download",
                                      layout=w.Layout(width="auto", flex="0 0 auto"),
                                      disabled=True)
        self.exported = w.HTML()
        self.advice = w.HTML()          # what an advisor said and did (`prism.advice`), if any
        self.choice.observe(lambda _: self._show(), names="value")
        self.export_button.on_click(lambda _: self._export_clicked())
        # the search tab: the run's controls, then the tree, or the table one click away
        self.search_view = w.ToggleButtons(options=["tree", "table"], value="tree",
                                           description="view")
        self.search_view.observe(lambda _: self._switch(), names="value")
        # boxes of their own: the explorer's widget, shown elsewhere, keeps its table shown
        self._views = {"tree": w.VBox([self.tree.widget]),
                       "table": w.VBox([self.explorer.table_view])}
        self.widget = w.Tab(children=[w.VBox([self.explorer.header, self.search_view,
                                              *self._views.values()]),
                                      w.VBox([w.HBox([self.choice, self.export_button,
                                                      self.exported]), self.advice,
                                              self.detail]),
                                      self.tuning.widget])
        for k, title in enumerate(("search", "candidates", "tuning")):
            self.widget.set_title(k, title)
        self._switch()
        self.explorer.also_draw.append(self._snapshot_changed)    # its counts, as they grow
        if target is not None:
            options = {"device": device, "measure": measure, "budget_s": budget_s,
                       "search_config": search_config, "max_trials": max_trials,
                       "compile_ptx": compile_ptx, "out": self.out, "advice": advice}
            self._prepare(target, options)

    def _switch(self) -> None:
        for name, box in self._views.items():
            box.layout.display = None if name == self.search_view.value else "none"

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
            elif isinstance(event, StageFinished) and event.stage in ("advice",
                                                                      "advice outcome"):
                self.advice.value = advice_html(event.summary)
            elif isinstance(event, StageFinished) and event.stage == "check" and \
                    event.summary.get("graph"):
                self.winner = dict(event.summary)
                changed = True
        if changed:
            self._options()
        self._snapshot_changed()

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
        if self._snap is not None:
            self._snap.flush()          # the finished run, into the notebook to be saved
        return self.result

    # -- the candidates tab --------------------------------------------------------------

    def _options(self) -> None:
        with self._lock:
            opts = [("best kernel", WINNER)] if self.winner else []
            opts += [(f"{cid} · {'verified' if isinstance(e, CandidateVerified) else 'rejected'}",
                      cid) for cid, e in self.candidates.items()]
        if [v for _, v in opts] != [v for _, v in self.choice.options]:
            keep = self.choice.value
            self.choice.options = opts
            if keep in dict((v, v) for _, v in opts):
                self.choice.value = keep
            elif opts and opts[0][1] == WINNER:
                self.choice.value = WINNER        # the winner, selected by default
        self.export_button.disabled = self.winner is None

    def _show(self) -> None:
        from widgets.proof import ProofView
        from widgets.sgraph import SGraphView
        value = self.choice.value
        children: list[Any] = []
        if value == WINNER and self.winner:
            children += self._winner_views()
        elif value in self.candidates:
            event = self.candidates[value]
            assert event.graph is not None
            children += [SGraphView(KernelGraph.from_json(event.graph)), ProofView(event).widget]
        self.detail.children = children

    def _winner_views(self) -> list[Any]:
        """The winner: what it is and how fast (with the kind), its check, its sGraph, its
        proof (the search's verdict for its candidate), its Triton source by op."""
        import ipywidgets as w

        from widgets.proof import ProofView
        from widgets.sgraph import SGraphView
        from widgets.source import SourceView
        assert self.winner is not None
        win = self.winner
        check = win.get("check") or {}
        why = f": {check['reason']}" if check.get("reason") else ""
        kernels = str(win.get("kernels_text") or f"{win.get('num_kernels', '?')} kernel(s)")
        head = (f"<h4>best kernel <code>{html.escape(str(win['best']))}</code> (candidate "
                f"<code>{html.escape(str(win.get('candidate')))}</code>)</h4><p>"
                f"{win['latency_us']:.4g} µs ({html.escape(str(win['latency_kind']))}) · "
                f"{html.escape(kernels)} · roofline "
                f"{win['roofline_us']:.4g} µs (modeled) · eager {win['eager_us']:.4g} µs "
                f"(modeled) · check: {html.escape(str(check.get('status', '?')) + why)}</p>")
        views: list[Any] = [w.HTML(head), SGraphView(KernelGraph.from_json(win["graph"]))]
        proved = self.candidates.get(str(win.get("candidate")))
        if isinstance(proved, CandidateVerified):
            views.append(ProofView(proved).widget)
        else:
            from prism.pipeline import INPUT_PROGRAM
            views.append(w.HTML("<p>no proof: the input program computes itself (its ops as "
                                "pre-defined kernels)</p>" if win.get("candidate") ==
                                INPUT_PROGRAM else "<p>no proof of this candidate on the "
                                "trace</p>"))
        views.append(SourceView(self.winner_source()).widget)
        return views

    def winner_source(self) -> str:
        """The winner's Triton module: the run's own, or for a replay generated again from the
        winner's graph (the same generator, so the same text)."""
        if self.result is not None and self.result.best is not None:
            return str(self.result.best.triton_source)
        if self.winner is None:
            raise PrismError("no winner yet: run the workbench (or replay a finished run) first")
        from prism.instantiate.codegen import generate
        graph = KernelGraph.from_json(self.winner["graph"])
        return generate(graph, name=str(self.winner["best"]),
                        dtype=self.winner.get("dtype", "float16")).source

    def export(self, folder: str | Path | None = None) -> dict[str, Path]:
        """Write the winner where you can take it: `kernel.py` (its Triton module, `run(...)`
        inside), `kernel.ptx` (when the run compiled it) and `report.html` (the run's page).
        Default folder: the workbench's `out`, else `prism-export/<target>`."""
        from prism.report import page, ptx_text
        if self.winner is None:
            raise PrismError("no winner to export yet: wait for the run (await bench.wait())")
        name = (KernelGraph.from_json(self.winner["graph"]).name or "run").split(".")[0]
        if self.result is not None:
            name = str(self.result.target)
        where = Path(folder) if folder is not None else (
            self.out or Path("prism-export") / name)
        try:
            where.mkdir(parents=True, exist_ok=True)
            files = {"kernel": where / "kernel.py", "report": where / "report.html"}
            files["kernel"].write_text(self.winner_source())
            best = self.result.best if self.result is not None else None
            if best is not None and best.ptx:
                files["ptx"] = where / "kernel.ptx"
                files["ptx"].write_text(ptx_text(best.ptx))
            with self._lock:
                events = list(self.events)
            files["report"].write_text(page(events))
        except OSError as e:
            raise PrismError(f"cannot export to {where}: {e.strerror or e}; choose a folder you "
                             "can write (bench.export('some/folder'))") from e
        return files

    def _export_clicked(self) -> None:
        try:
            files = self.export()
        except PrismError as e:
            self.exported.value = f"<span style='color:#b91c1c'>{html.escape(str(e))}</span>"
            return
        self.exported.value = "wrote " + ", ".join(
            f"<code>{html.escape(str(p))}</code>" for p in files.values())

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self.widget._repr_mimebundle_(**kwargs)

    # -- the snapshot (`widgets.snapshot`) -----------------------------------------------

    def snapshot_summary(self) -> str:
        """The snapshot's line: the best kernel with its latency and kind and its check (once
        the run has one), then where the search is and its counts."""
        with self.explorer._lock:
            progress = self.explorer._progress_html()
        win = self.winner
        if win is None:
            return "workbench · " + progress
        check = (win.get("check") or {}).get("status", "?")
        return (f"workbench · best kernel <code>{html.escape(str(win['best']))}</code>: "
                f"{win['latency_us']:.4g} µs ({html.escape(str(win['latency_kind']))}), "
                f"check {html.escape(str(check))} · {progress}")

    def snapshot_body(self) -> str:
        """The run's static page (`prism.report.page`, as `save_html` writes it) once the run
        has one, then the search tree as drawn now."""
        from prism.report import page
        with self._lock:
            events = list(self.events)
        ran = any(isinstance(e, StageFinished) and e.stage == "check" for e in events)
        report = page_body(page(events)) if ran else ""
        return report + "<h3>search tree</h3>" + self.tree.snapshot_body()

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


def advice_html(logged: dict[str, Any]) -> str:
    """An advisor's advice, what it changed and what came of it (the trace's `advice` and
    `advice outcome` stages), as a short block: advice only reorders or narrows."""
    advice = logged.get("advice", {})
    said = [f"<b>advice</b> ({html.escape(str(advice.get('source', 'user')))})"]
    if advice.get("label"):
        said.append(html.escape(str(advice["label"])))
    for key in ("block_ops", "max_block_ops", "params", "kernels"):
        if key in advice:
            said.append(f"{key}: {html.escape(str(advice[key]))}")
    rows = [" · ".join(said)]
    rows += [f"changed: {html.escape(e)}" for e in logged.get("effects", [])]
    rows += [f"risk: {html.escape(r)}" for r in advice.get("risks", [])]
    if logged.get("outcome"):
        rows.append(f"outcome: {html.escape(logged['outcome'])}")
    rows.append("<i>advice only reorders or narrows: every candidate is still proved and the "
                "winner checked</i>")
    return "<div style='font-size:12px'>" + "<br>".join(rows) + "</div>"
