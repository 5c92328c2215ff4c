"""The workbench: the search explorer, the candidates (sGraph and proof) and the tuning monitor,
over one stream of events.

    Workbench("rmsnorm_matmul").run()          # the whole pipeline live, in a notebook cell
    Workbench.from_trace("out/trace.jsonl")    # a saved run, replayed
    Workbench(...).save_html("page.html")      # a static page that needs no running kernel

It is a listener like its parts: every event goes to the `SearchExplorer`, the `TuningMonitor`
and the candidate list (verified and rejected candidates carry their sGraph JSON; the check
stage's summary names the winner). The explorer's run / pause / step / cancel drive the whole
pipeline (`prism.superoptimize`), which runs in a background thread.
"""

from __future__ import annotations

import html
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from prism.ir.graph import KernelGraph
from prism.trace import CandidateRejected, CandidateVerified, Event, StageFinished, read_jsonl
from widgets.explorer import SearchExplorer
from widgets.proof import CounterexampleState, ProofState, counterexample_html, proof_html
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

    def run(self) -> Workbench:
        """Start (or resume) the pipeline in the background; the views follow it live."""
        self.explorer.run()
        return self

    def join(self, timeout: float | None = None) -> Any:
        """Wait for the run; returns `prism.superoptimize`'s result (None if not ended)."""
        self.explorer.join(timeout)
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
        """Everything the views show, as one HTML page with no kernel behind it (plotly's
        script embedded)."""
        import plotly.graph_objects as go

        from prism.ir.render import to_svg
        parts = ["<h1>Prism Workbench</h1>", _search_html(self.explorer)]
        if self.winner:
            w = self.winner
            parts.append(
                f"<h2>Best kernel: {_e(w['best'])}</h2><p>{w['latency_us']:.2f} µs "
                f"<i>{_e(w['latency_kind'])}</i>; roofline {w['roofline_us']:.2f} µs "
                f"<i>modeled</i>; eager {w['eager_us']:.2f} µs <i>modeled</i>; parameters "
                f"<code>{_e(w['params'])}</code></p>"
                + to_svg(KernelGraph.from_json(w["graph"])))
            proof = self.candidates.get(w.get("candidate", ""))
            if isinstance(proof, CandidateVerified):
                parts.append("<h2>Its proof</h2>" + proof_html(ProofState.from_event(proof)))
        rejected = [e for e in self.candidates.values() if isinstance(e, CandidateRejected)]
        if rejected:
            parts.append(f"<h2>A refuted candidate ({_e(rejected[0].id)})</h2>"
                         + counterexample_html(CounterexampleState.from_event(rejected[0])))
        self.tuning.flush()
        figure = go.Figure(self.tuning.figure)
        parts.append("<h2>Tuning</h2>" + figure.to_html(include_plotlyjs=True, full_html=False))
        page = ("<!doctype html><html><head><meta charset='utf-8'><title>Prism Workbench"
                "</title></head><body style='font-family:system-ui,sans-serif;margin:2em'>"
                + "\n".join(parts) + "</body></html>")
        out = Path(path)
        out.write_text(page)
        return out


def _e(x: object) -> str:
    return html.escape(str(x))


def _search_html(explorer: SearchExplorer) -> str:
    state = explorer.state
    rows = "".join(f"<tr><td>{_e(rule)}</td><td>{n}</td></tr>"
                   for rule, n in state.rule_counts().items())
    statuses = ", ".join(f"{k} {v}" for k, v in state.status_counts().items())
    examples = []
    for rule in state.rule_counts():
        for node in state.filter(rule=rule, status="pruned", page_size=3):
            examples.append(f"<li><b>{_e(rule)}</b> {_e(node.id)}: {_e(node.reason)}</li>")
    return (f"<h2>Search</h2><p>{state.generated} families generated; {_e(statuses)}</p>"
            f"<table border=1 cellpadding=4><tr><th>rule</th><th>pruned</th></tr>{rows}"
            f"</table><ul>{''.join(examples)}</ul>")
