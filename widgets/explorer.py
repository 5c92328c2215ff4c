"""The search explorer: the tree of sGraph families, why each was pruned, and the candidates.

    explorer = SearchExplorer.live(graph, config)      # a search in a background thread
    explorer = SearchExplorer.from_events(result.trace)  # or a trace file's path

`SearchState` consumes search events one at a time (`state.add(event)`) and answers queries: the
family tree (`FamilyGenerated.id` / `parent`), each family's status — `kept` (generated, not
pruned) or `pruned` (rule, reason, evidence) — the candidates under their family (`verified`,
`rejected`, `undecided`), counts per rule and per status, pages of rows under a filter, and for
the tree view (`widgets.tree`) each subtree's counts, each node's children grouped by rule and
reason, and an audit's findings (`add_audit`). It is plain Python: no Jupyter, and every query
costs what it returns, not the trace (the tree's counts and groups are kept as events arrive, in
O(depth) an event), so 100,000 families cost nothing to look at.

`SearchExplorer` is the view: a rule and a status filter, one page of rows as an HTML table, the
selected row's details, a bar chart of prunes per rule, and run / pause / step / cancel for a live
search (a replayed or listening view has no run of its own, so it shows no controls); views
over the same state (`also_draw`, e.g. `SearchTree.of(explorer)`) redraw with it. Pausing
stops the run's budget clock (`BudgetClock`) as well as its events, so a paused search spends
none of its time budget; the progress line says when a pause or a cancel took effect. It redraws
at most every `REDRAW_S` seconds, from a timer thread (`Throttle`), so neither the search nor the
kernel waits on drawing. `await explorer.wait()` waits for a live search without blocking the
kernel's event loop (`join()` blocks it).
"""

from __future__ import annotations

import asyncio
import html
import itertools
import json
import math
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from prism.ir.graph import KernelGraph
from prism.trace import (
    BudgetClock,
    CandidateRejected,
    CandidateUndecided,
    CandidateVerified,
    Event,
    FamilyGenerated,
    FamilyPruned,
    Instantiated,
    Measured,
    SearchFinished,
    StageFinished,
    StageStarted,
    Tracer,
)
from widgets.glossary import abbr, definition
from widgets.live import REDRAW_S, Gate, LiveView, Throttle
from widgets.proof import CounterexampleState, ProofState, counterexample_html, proof_html
from widgets.snapshot import Snapshotted

FAMILY_STATUSES = ("kept", "pruned")
CANDIDATE_STATUSES = ("verified", "rejected", "undecided")
STATUSES = FAMILY_STATUSES + CANDIDATE_STATUSES
PAGE_SIZE = 50
ANY = ""                # the filter dropdowns' "any" (ipywidgets treats a None value as unset)
MAX_LISTED = 20         # ids listed in a detail pane; the rest are counted
NO_GRAPH = ("its partial sGraph was not kept: a search records each family's sGraph only when "
            "asked, with <code>SearchConfig(record_graphs=True)</code> or <code>--trace-graphs"
            "</code> (a search's trace is "
            "about 10 KB a family with them)")


@dataclass(slots=True)
class Node:
    """One row: a family or a candidate. The state mutates a family once, when it is pruned."""

    id: str
    kind: str                         # "family" | "candidate"
    parent: str | None                # a family: its parent family; a candidate: its family
    status: str                       # one of STATUSES
    seq: int                          # the event that made it
    description: str = ""             # a family: the op it added; a candidate: its verdict
    rule: str | None = None           # pruned: the rule
    reason: str = ""                  # pruned / undecided: why
    evidence: dict[str, Any] = field(default_factory=dict)   # pruned: what the rule saw
    payload: dict[str, Any] | list[Any] | None = None        # the proof or counterexample
    method: str | None = None
    graph: dict[str, Any] | None = None                      # sGraph JSON, when recorded


class SearchState:
    """The search so far, from its events; see the module docstring."""

    def __init__(self) -> None:
        self.events = 0                               # events seen, of every type
        self.stage: str | None = None                 # the stage running now, if any
        self.summary: dict[str, Any] | None = None    # SearchFinished's (or the search stage's)
        self.finished = False                         # SearchFinished seen
        self._nodes: dict[str, Node] = {}             # every row, in arrival order
        self._status: dict[str, dict[str, None]] = {s: {} for s in STATUSES}  # ordered sets
        self._rule: dict[str, dict[str, None]] = {}
        self._kids: dict[str | None, list[str]] = {}
        self._rules: dict[str, None] = {}             # rule names: seen, or named by a summary
        # the tree's indexes, kept as events arrive so that a query costs what it returns:
        # the counts of each node's descendants (a node's own counts are `_own(node)`), and
        # each node's children by group (`group_of`) and reason, in arrival order
        self._below: dict[str | None, dict[str, int]] = {}
        self._groups: dict[str | None, dict[str, dict[str, dict[str, None]]]] = {}
        self.newest: str | None = None                # the family generated or pruned last
        self.audit: dict[str, list[dict[str, Any]]] = {}   # family → an audit's findings on it
        # what tuning made of each candidate: its configurations (id → parameters) and their
        # latencies (config id → (µs, kind)); the run's dtype once the check stage names it
        self.configs: dict[str, dict[str, dict[str, Any]]] = {}
        self.latency: dict[str, tuple[float, str]] = {}
        self.dtype = "float16"

    # -- consuming -------------------------------------------------------------------------

    def add(self, event: Event) -> None:
        """Take one event; events that are not about the search are counted and skipped."""
        self.events += 1
        if isinstance(event, FamilyGenerated):
            self._family(event.id, event.parent, event.seq, event.description, event.graph)
        elif isinstance(event, FamilyPruned):
            self._prune(event)
        elif isinstance(event, CandidateVerified):
            self._candidate(event.id, event.family, "verified", event.seq, event.method,
                            payload=event.proof, graph=event.graph)
        elif isinstance(event, CandidateRejected):
            self._candidate(event.id, event.family, "rejected", event.seq, event.method,
                            payload=event.counterexample, graph=event.graph)
        elif isinstance(event, CandidateUndecided):
            self._candidate(event.id, event.family, "undecided", event.seq, event.method,
                            reason=event.reason)
        elif isinstance(event, StageStarted):
            self.stage = event.stage
        elif isinstance(event, StageFinished):
            self.stage = None
            if event.stage == "search" and self.summary is None:
                self._summarize(event.summary)
        elif isinstance(event, SearchFinished):
            self.finished = True
            self._summarize(event.summary)
        elif isinstance(event, Instantiated) and event.candidate is not None:
            self.configs.setdefault(event.candidate, {})[event.id] = event.params
        elif isinstance(event, Measured):
            self.latency[event.id] = (event.latency_us, event.kind)
        if isinstance(event, StageFinished) and isinstance(event.summary.get("dtype"), str):
            self.dtype = event.summary["dtype"]

    def _family(self, fid: str, parent: str | None, seq: int, description: str,
                graph: dict[str, Any] | None) -> Node:
        node = Node(fid, "family", parent, "kept", seq, description, graph=graph)
        self._insert(node)
        return node

    def _prune(self, e: FamilyPruned) -> None:
        # the engine generates a family before pruning it; a trace cut short may not have
        node = self._nodes.get(e.id) or self._family(e.id, e.parent, e.seq, "", None)
        del self._status[node.status][node.id]
        before = self._own(node)
        self._ungroup(node)
        node.status, node.rule, node.reason, node.evidence = "pruned", e.rule, e.reason, \
            e.evidence
        self._group(node)
        self._spread(node.parent, _minus(self._own(node), before))
        self.newest = node.id
        self._status["pruned"][node.id] = None
        self._rule.setdefault(e.rule, {})[node.id] = None
        self._rules.setdefault(e.rule, None)

    def _candidate(self, cid: str, family: str | None, status: str, seq: int,
                   method: str | None, *, payload: dict[str, Any] | list[Any] | None = None,
                   graph: dict[str, Any] | None = None, reason: str = "") -> None:
        self._insert(Node(cid, "candidate", family, status, seq, status, reason=reason,
                          payload=payload, method=method, graph=graph))

    def _insert(self, node: Node) -> None:
        old = self._nodes.get(node.id)
        if old is not None:   # the same id again (a replayed trace fed twice): latest wins
            self._status[old.status].pop(old.id, None)
            if old.rule is not None:
                self._rule[old.rule].pop(old.id, None)
            siblings = self._kids.get(old.parent, [])
            if old.id in siblings:
                siblings.remove(old.id)
            self._ungroup(old)
            self._spread(old.parent, _minus({}, self._subtree(old)))
            del self._nodes[old.id]
        self._nodes[node.id] = node
        self._status[node.status][node.id] = None
        self._kids.setdefault(node.parent, []).append(node.id)
        self._group(node)
        # its own counts and those of descendants that arrived before it (out of order)
        self._spread(node.parent, self._subtree(node))
        if node.kind == "family":
            self.newest = node.id

    # -- the tree's indexes ------------------------------------------------------------------

    def _own(self, node: Node) -> dict[str, int]:
        """What one row adds to the counts of every subtree it is in."""
        own = {node.status: 1}
        if node.kind == "family":
            own["families"] = 1
            if node.rule is not None:
                own["pruned " + node.rule] = 1
            if node.id in self.audit:
                own["findings"] = len(self.audit[node.id])
        return own

    def _subtree(self, node: Node) -> dict[str, int]:
        return _plus(self._own(node), self._below.get(node.id, {}))

    def _spread(self, parent: str | None, delta: Mapping[str, int]) -> None:
        """Add `delta` to the descendant counts of `parent` and every node above it, up to the
        search's root (None) or a parent not yet seen (its counts wait for it): O(depth)."""
        at, steps = parent, 0
        while True:
            below = self._below.setdefault(at, {})
            for key, n in delta.items():
                below[key] = below.get(key, 0) + n
            if at is None:
                return
            node = self._nodes.get(at)
            steps += 1
            if node is None or steps > len(self._nodes):    # not seen yet, or a cycle
                return
            at = node.parent

    def _group(self, node: Node) -> None:
        head, reason = group_of(node)
        self._groups.setdefault(node.parent, {}).setdefault(head, {}) \
            .setdefault(reason, {})[node.id] = None

    def _ungroup(self, node: Node) -> None:
        head, reason = group_of(node)
        heads = self._groups.get(node.parent, {})
        reasons = heads.get(head, {})
        reasons.get(reason, {}).pop(node.id, None)
        if not reasons.get(reason, True):
            del reasons[reason]
        if not reasons and head in heads:
            del heads[head]

    def _summarize(self, summary: dict[str, Any]) -> None:
        self.summary = summary
        pruned = summary.get("families", {}).get("pruned", {})
        for rule in pruned if isinstance(pruned, dict) else ():
            self._rules.setdefault(rule, None)

    # -- queries ---------------------------------------------------------------------------

    @property
    def rules(self) -> list[str]:
        """Every rule seen or named by the search's summary, in the order first met."""
        return list(self._rules)

    def rule_counts(self) -> dict[str, int]:
        """Families pruned per rule (0 for a rule the summary names and nothing hit)."""
        return {r: len(self._rule.get(r, ())) for r in self._rules}

    def status_counts(self) -> dict[str, int]:
        return {s: len(ids) for s, ids in self._status.items()}

    @property
    def generated(self) -> int:
        return len(self._status["kept"]) + len(self._status["pruned"])

    def count(self, rule: str | None = None, status: str | None = None) -> int:
        """How many rows `filter(rule, status)` pages through."""
        return len(self._rows(rule, status))

    def filter(self, rule: str | None = None, status: str | None = None, page: int = 0,
               page_size: int = PAGE_SIZE) -> list[Node]:
        """Rows (families and candidates, in the order they arrived) pruned by `rule` and/or
        with `status`, page `page` of `page_size` rows. A rule implies `status="pruned"`."""
        if page < 0 or page_size < 1:
            raise ValueError(f"page {page} of size {page_size}: give page ≥ 0, size ≥ 1")
        rows = self._rows(rule, status)
        start = page * page_size
        return [self._nodes[i] for i in itertools.islice(rows, start, start + page_size)]

    def pages(self, rule: str | None = None, status: str | None = None,
              page_size: int = PAGE_SIZE) -> int:
        return max(1, math.ceil(self.count(rule, status) / page_size))

    def _rows(self, rule: str | None, status: str | None) -> Mapping[str, object]:
        if status is not None and status not in STATUSES:
            raise ValueError(f"unknown status {status!r}; choose from {', '.join(STATUSES)}")
        if rule is not None:
            return self._rule.get(rule, {}) if status in (None, "pruned") else {}
        return self._status[status] if status is not None else self._nodes

    def __contains__(self, node_id: str) -> bool:
        return node_id in self._nodes

    def children(self, node_id: str | None) -> list[str]:
        """The families generated under `node_id` and the candidates of that family, in order;
        `children(None)` are the top-level families."""
        return list(self._kids.get(node_id, ()))

    def ancestors(self, node_id: str) -> list[str]:
        """The families above `node_id`, the top-level one first."""
        out: list[str] = []
        node = self._nodes.get(node_id)
        while node is not None and node.parent is not None and len(out) < len(self._nodes):
            out.append(node.parent)
            node = self._nodes.get(node.parent)
        return out[::-1]

    def node(self, node_id: str) -> dict[str, Any]:
        """Everything known about one row, as plain values (a `KeyError` for an unknown id)."""
        n = self._nodes[node_id]
        out: dict[str, Any] = {"id": n.id, "kind": n.kind, "status": n.status, "seq": n.seq}
        if n.kind == "family":
            kids = self.children(n.id)
            out.update(parent=n.parent, description=n.description,
                       children=[k for k in kids if self._nodes[k].kind == "family"],
                       candidates=[k for k in kids if self._nodes[k].kind == "candidate"])
            if n.status == "pruned":
                out.update(rule=n.rule, reason=n.reason, evidence=n.evidence)
        else:
            out.update(family=n.parent, method=n.method)
            key = {"verified": "proof", "rejected": "counterexample"}.get(n.status)
            if key is not None:
                out[key] = n.payload
            if n.reason:
                out["reason"] = n.reason
        if n.graph is not None:
            out["graph"] = n.graph
        return out

    # -- the tree ----------------------------------------------------------------------------

    def subtree(self, node_id: str | None = None) -> Subtree:
        """The counts of the subtree under `node_id`, the node itself included; `None`: the
        whole search. Kept as events arrive, so this costs nothing however big the subtree."""
        if node_id is None:
            counts = dict(self._below.get(None, {}))
        else:
            counts = self._subtree(self._nodes[node_id])
        return Subtree.of(counts)

    def groups(self, node_id: str | None) -> list[Group]:
        """The children of `node_id` in groups: families by status (`kept`) or by the rule that
        pruned them, candidates by verdict; each group's reasons with their counts, most
        first. Costs the number of groups and reasons, not of children."""
        out = []
        for head, reasons in self._groups.get(node_id, {}).items():
            tally = sorted(((r, len(ids)) for r, ids in reasons.items() if ids),
                           key=lambda rc: -rc[1])
            if tally:
                out.append(Group(head, sum(n for _, n in tally), tally))
        return sorted(out, key=lambda g: (_HEAD_ORDER.get(g.head, 1), -g.count))

    def group_rows(self, node_id: str | None, head: str, reason: str | None = None,
                   start: int = 0, count: int = PAGE_SIZE) -> list[Node]:
        """Rows `start` to `start + count` of one group of `node_id`'s children (of one of its
        reasons, or of all of them in turn), in arrival order."""
        reasons = self._groups.get(node_id, {}).get(head, {})
        ids = (reasons.get(reason, {}) if reason is not None
               else itertools.chain.from_iterable(reasons.values()))
        return [self._nodes[i] for i in itertools.islice(ids, start, start + count)]

    def row(self, node_id: str) -> Node:
        """One row itself (a `KeyError` for an unknown id); `node()` gives it as plain values."""
        return self._nodes[node_id]

    def has_children(self, node_id: str | None) -> bool:
        return bool(self._groups.get(node_id))

    def path(self, node_id: str) -> list[str]:
        """The ancestors of `node_id`, then the node: the rows a jump to it opens."""
        return [*self.ancestors(node_id), node_id]

    def find(self, text: str) -> str | None:
        """The row a person means by `text`: an id (`f123`, `c45`), any case, a bare number
        taken as a family's; None when there is no such row."""
        key = text.strip()
        for guess in (key, key.lower(), "f" + key if key.isdigit() else ""):
            if guess in self._nodes:
                return guess
        return None

    def add_audit(self, report: Any) -> int:
        """Mark the families an audit found wrongly pruned (`prism.search.audit`'s
        `AuditReport`, or its JSON as `prism search --audit-rule R --json` prints it). The
        audit numbers families as the plain search does, so its findings land on this trace's
        families. Returns how many findings it marked (a family not on the trace waits)."""
        found = report.get("wrongly_pruned", []) if isinstance(report, dict) else report.wrong
        for finding in found:
            fid = str(finding["family"])
            node = self._nodes.get(fid)
            before = self._own(node) if node is not None else {}
            self.audit.setdefault(fid, []).append(dict(finding))
            if node is not None:
                self._spread(node.parent, _minus(self._own(node), before))
        return len(found)


_HEAD_ORDER = {"verified": 0, "rejected": 0, "undecided": 0, "kept": 0}   # before the prunes


def group_of(node: Node) -> tuple[str, str]:
    """A row's group among its siblings and its reason there: a pruned family's rule and
    reason, a candidate's verdict and (undecided) why, a kept family's status."""
    if node.status == "pruned" and node.rule is not None:
        return node.rule, node.reason
    return node.status, node.reason


@dataclass(frozen=True, slots=True)
class Group:
    """One group of a node's children: `head` is a rule or a status; `reasons` each with how
    many children it covers, most first."""

    head: str
    count: int
    reasons: list[tuple[str, int]]


@dataclass(frozen=True, slots=True)
class Subtree:
    """The counts of a subtree: its families (kept, pruned per rule), its candidates by
    verdict, and the audit's findings on its families."""

    families: int = 0
    kept: int = 0
    pruned: dict[str, int] = field(default_factory=dict)
    verified: int = 0
    rejected: int = 0
    undecided: int = 0
    findings: int = 0

    @classmethod
    def of(cls, counts: Mapping[str, int]) -> Subtree:
        pruned = {k.split(" ", 1)[1]: n for k, n in counts.items()
                  if k.startswith("pruned ") and n}
        return cls(counts.get("families", 0), counts.get("kept", 0), pruned,
                   counts.get("verified", 0), counts.get("rejected", 0),
                   counts.get("undecided", 0), counts.get("findings", 0))


def _plus(a: Mapping[str, int], b: Mapping[str, int]) -> dict[str, int]:
    out = dict(a)
    for key, n in b.items():
        out[key] = out.get(key, 0) + n
    return out


def _minus(a: Mapping[str, int], b: Mapping[str, int]) -> dict[str, int]:
    return _plus(a, {key: -n for key, n in b.items()})


# -- the view ------------------------------------------------------------------------------------

class SearchExplorer(Snapshotted, LiveView):
    """The view over a `SearchState`; display it in a notebook cell (`explorer` or
    `display(explorer.widget)`). A listener: `tracer.subscribe(explorer)` feeds it."""

    def __init__(self, state: SearchState | None = None, *, page_size: int = PAGE_SIZE,
                 interval: float = REDRAW_S):
        import ipywidgets as w
        import plotly.graph_objects as go

        self.state = state or SearchState()
        self.page_size = page_size
        self.page = 0
        self.result: Any = None                   # a live search's SearchResult, when done
        self.error: BaseException | None = None   # what a live search raised, if it did
        self._lock = threading.RLock()            # the state, between the search and the draws
        self._thread: threading.Thread | None = None
        self._start: Callable[[], None] | None = None
        self._gate = Gate()
        self._cancel = threading.Event()
        self.budget = BudgetClock()               # a live run's budgets: still while paused
        self._took_effect: dict[str, str] = {}    # "pause" / "cancel" → when it took effect
        self._cancel_asked: tuple[float, int] | None = None    # (monotonic time, families)
        self._budget_start = 0.0
        self._drawing: int | None = None          # the thread setting the widgets, if any
        self._draw_lock = threading.RLock()       # one redraw at a time (timer or kernel)
        self._throttle = Throttle(self.redraw, interval)
        self.also_draw: list[Callable[[], None]] = []    # views over this state (the tree)

        self.rule = w.Dropdown(options=[("any rule", ANY)], value=ANY, description="rule")
        self.status = w.Dropdown(options=[("any status", ANY), *((s, s) for s in STATUSES)],
                                 value=ANY, description="status")
        self.prev = w.Button(description="◀", layout=w.Layout(width="3em"))
        self.next = w.Button(description="▶", layout=w.Layout(width="3em"))
        self.page_label = w.Label()
        self.table = w.HTML()
        self.select = w.Dropdown(options=[], description="row")
        self.detail = w.HTML()
        self.chart = go.FigureWidget(
            [go.Bar(x=[], y=[], name="pruned")],
            layout=go.Layout(title="families pruned per rule (log count)", height=260,
                             yaxis={"type": "log", "title": {"text": "families (log)"}},
                             margin={"l": 50, "r": 10, "t": 40, "b": 40}))
        fixed = {"width": "auto", "flex": "0 0 auto"}      # never shrunk to "pa…" by the text
        self.run_button = w.Button(description="run", icon="play", layout=w.Layout(**fixed))
        self.pause_button = w.Button(description="pause", icon="pause", layout=w.Layout(**fixed))
        self.step_button = w.Button(description="step", icon="step-forward",
                                    layout=w.Layout(**fixed))
        self.cancel_button = w.Button(description="cancel", icon="stop", layout=w.Layout(**fixed))
        self.progress = w.HTML()
        # a live run's controls; hidden until a run is prepared (a replay has none)
        self.controls = w.HBox([self.run_button, self.pause_button, self.step_button,
                                self.cancel_button],
                               layout=w.Layout(display="none", flex="0 0 auto"))
        filters = w.HBox([self.rule, self.status, self.prev, self.page_label, self.next])
        self.header = w.HBox([self.controls, self.progress])
        self.table_view = w.VBox([self.chart, filters, self.table, self.select, self.detail])
        self.widget = w.VBox([self.header, self.table_view])

        self.rule.observe(self._on_filter, names="value")
        self.status.observe(self._on_filter, names="value")
        self.select.observe(self._on_select, names="value")
        self.prev.on_click(lambda _: self.turn(-1))
        self.next.on_click(lambda _: self.turn(+1))
        self.run_button.on_click(lambda _: self.run())
        self.pause_button.on_click(lambda _: self.pause())
        self.step_button.on_click(lambda _: self.step())
        self.cancel_button.on_click(lambda _: self.cancel())
        self.chart.data[0].on_click(self._on_bar_click)
        self.redraw()

    # -- feeding ---------------------------------------------------------------------------

    # -- a live search ---------------------------------------------------------------------

    @classmethod
    def live(cls, target: Any, config: Any = None, *, paused: bool = False,
             **kwargs: Any) -> SearchExplorer:
        """Run `prism.search.search(target, config)` in a background thread, feeding this view;
        `paused=True` holds it at its first event until `run()` or `step()`. `target` is a
        `KernelGraph`, a `Workload` or a builder `Graph`."""
        view = cls(**kwargs)
        view.prepare(target, config)
        if paused:
            view.pause()
        view._launch()
        return view

    def prepare(self, target: Any, config: Any = None) -> None:
        """Set the search that `run()` starts (the run button starts it)."""
        graph = _kernel_graph(target)

        def job(tracer: Tracer, cancel: threading.Event) -> Any:
            from prism.search import search  # the engine, only when a search is run
            return search(graph, config, tracer=tracer, cancel=cancel)

        self.prepare_job(job)

    def prepare_job(self, job: Callable[[Tracer, threading.Event], Any],
                    listeners: Iterable[Callable[[Event], None]] = ()) -> None:
        """Set what `run()` starts: `job(tracer, cancel)` in a background thread, its events
        through this view's pause/step gate to this view and to `listeners` (other views)."""
        def start() -> None:
            # the states keep what the views need; the budget is this view's clock
            tracer = Tracer(keep=False, budget=self.budget)
            tracer.subscribe(self._listen)
            for listener in listeners:
                tracer.subscribe(listener)
            try:
                self.result = job(tracer, self._cancel)
            except BaseException as err:  # shown in the view and kept for the caller
                self.error = err
            finally:
                if self._cancel_asked is not None:
                    asked, families = self._cancel_asked
                    self._took_effect["cancel"] = (
                        f"took effect {time.monotonic() - asked:.1f} s after the click, "
                        f"{self.state.generated - families} families later")
                self._throttle.request()

        self._start = start
        self.controls.layout.display = None
        self.redraw()

    def _launch(self) -> None:
        if self._start is None:
            raise RuntimeError("no search to run: use SearchExplorer.live(graph, config) or "
                               "prepare(graph, config) first")
        self._budget_start = self.budget.now()
        self._thread = threading.Thread(target=self._start, name="prism-search", daemon=True)
        self._thread.start()
        self._throttle.request()

    def _listen(self, event: Event) -> None:
        self._gate.wait(self._held)       # blocks the search thread while paused
        self.add(event)

    def _held(self) -> None:
        """The search thread stops at the gate: this is when the pause took effect."""
        if "pause" not in self._took_effect:
            self._took_effect["pause"] = (
                f"took effect after {self.state.generated} families, "
                f"{self.budget.now() - self._budget_start:.1f} s of the budget spent")
            self._throttle.request()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def paused(self) -> bool:
        return self._gate.paused

    def run(self, paused: bool = False) -> None:
        """Start the prepared search, or resume a paused one; `paused=True` starts it held
        at its first event (the run button, or `run()`, lets it go)."""
        if paused:
            self.pause()
        else:
            self._took_effect.pop("pause", None)
            self._gate.resume()
            self.budget.resume()
        if self._thread is None and self._start is not None:
            self._launch()
        self._throttle.request()

    def pause(self) -> None:
        """Hold the search at its next event; its budget clock stops now."""
        if not self._gate.paused:
            self._took_effect.pop("pause", None)
        self._gate.pause()
        self.budget.pause()
        self._throttle.request()

    def step(self, n: int = 1) -> None:
        """Pause (if running) and let `n` more events through (the budget clock stays
        stopped: stepping is looking, not searching against the clock)."""
        if not self._gate.paused:
            self.pause()
        self._took_effect.pop("pause", None)    # the next hold says where the steps left it
        self._gate.step(n)
        self._throttle.request()

    def cancel(self) -> None:
        """Stop the search at its next check; it returns what it found (`complete=False`)."""
        if not self._cancel.is_set():
            self._cancel_asked = (time.monotonic(), self.state.generated)
        self._cancel.set()
        self._gate.resume()               # a paused search must run on to see the flag
        self.budget.resume()
        self._throttle.request()

    @property
    def done(self) -> bool:
        """Whether the live run has ended (False before it starts)."""
        return self._thread is not None and not self._thread.is_alive()

    def join(self, timeout: float | None = None) -> Any:
        """Wait for the live search; returns its `SearchResult` (None if it has not ended).
        Blocks the calling thread: in a notebook cell, `await explorer.wait()` instead."""
        if self._thread is not None:
            self._thread.join(timeout)
        self._throttle.flush()
        return self.result

    async def wait(self, timeout: float | None = None, poll_s: float = 0.1) -> Any:
        """Wait for the live search without blocking the event loop (`await explorer.wait()`
        in a notebook cell); returns what `join()` returns."""
        end = None if timeout is None else time.monotonic() + timeout
        while self._thread is not None and self._thread.is_alive():
            if end is not None and time.monotonic() >= end:
                break
            await asyncio.sleep(poll_s)
        return self.join(0)

    # -- drawing ---------------------------------------------------------------------------

    def turn(self, pages: int) -> None:
        with self._lock:
            last = self.state.pages(*self._filters(), page_size=self.page_size) - 1
            self.page = min(max(0, self.page + pages), last)
        self.redraw()

    def _on_filter(self, _: object) -> None:
        if self._drawing != threading.get_ident():    # a person, not redraw() itself
            self.page = 0
            self.redraw()

    def _on_select(self, _: object) -> None:
        if self._drawing != threading.get_ident():    # redraw() draws the detail itself
            self.redraw()                              # the table outlines the selected row

    def _on_bar_click(self, trace: Any, points: Any, _selector: Any) -> None:
        """Clicking a rule's bar filters the rows to that rule."""
        if points.point_inds:
            self.rule.value = trace.x[points.point_inds[0]]

    def _filters(self) -> tuple[str | None, str | None]:
        return (self.rule.value or None, self.status.value or None)

    def redraw(self) -> None:
        """Draw the state now: chart, filters, the current page, the detail, the progress."""
        with self._draw_lock:
            self._redraw()

    def _redraw(self) -> None:
        with self._lock:
            rule, status = self._filters()
            pages = self.state.pages(rule, status, self.page_size)
            self.page = min(self.page, pages - 1)
            rows = self.state.filter(rule, status, self.page, self.page_size)
            counts = self.state.rule_counts()
            rules = self.state.rules
            progress = self._progress_html()
            selected = self.select.value
            table = rows_html(rows, selected)
        self._drawing = threading.get_ident()
        try:
            if [v for _, v in self.rule.options[1:]] != rules:
                self.rule.options = [("any rule", ANY), *((r, r) for r in rules)]
                self.rule.value = rule if rule in rules else ANY
            bar = self.chart.data[0]
            if list(bar.x or ()) != list(counts) or list(bar.y or ()) != list(counts.values()):
                with self.chart.batch_update():
                    bar.x, bar.y = list(counts), list(counts.values())
            self.page_label.value = f"page {self.page + 1} / {pages}"
            options = [(f"{n.id} · {n.status}", n.id) for n in rows]
            if list(self.select.options) != options:
                self.select.options = options
                self.select.value = selected if selected in {n.id for n in rows} else None
            self.table.value = table
            self.progress.value = progress
        finally:
            self._drawing = None
        self._draw_detail()
        for draw in self.also_draw:
            draw()
        self._snapshot_changed()

    def snapshot_summary(self) -> str:
        """The snapshot's line: where the search is and its counts (as the header says)."""
        with self._lock:
            return self._progress_html()

    def _draw_detail(self) -> None:
        selected = self.select.value
        with self._lock:
            text = detail_html(self.state, selected) if selected else ""
        self.detail.value = text

    def _progress_html(self) -> str:
        s = self.state
        counts = s.status_counts()
        when = ""
        if self.error is not None:
            where = f"failed: {type(self.error).__name__}: {self.error}"
        elif self._thread is not None and self._thread.is_alive():
            where = "paused" if self._gate.paused else "running"
            if self._cancel.is_set():
                where = "cancelling (asked; waiting for the search's next check)"
            elif self._gate.paused:
                when = self._took_effect.get("pause", "asked; waiting for the search's next "
                                             "event") + "; the budget clock is stopped"
        elif s.finished and s.summary is not None:
            where = ("finished" if s.summary.get("complete", True)
                     else f"stopped ({s.summary.get('stop_reason', '?')})")
            if self._cancel_asked is not None:      # what the search did, then the cancel
                where = ("cancelled after the search finished" if where == "finished"
                         else f"cancelled: the search {where}")
            when = self._took_effect.get("cancel", "")
        else:
            where = "ready to run" if self._start is not None else "listening"
        if self._took_effect.get("cancel") and not when and self.done:
            when = self._took_effect["cancel"]
        parts = ", ".join(f"{n} {k}" for k, n in counts.items())
        held = self.budget.held_s
        paused = f" · {held:.1f} s paused, not counted" if held >= 0.05 else ""
        return (f"<b>{_esc(where)}</b>{' (' + _esc(when) + ')' if when else ''} · "
                f"{s.events} events · {s.generated} families ({parts}){paused}")

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self.widget._repr_mimebundle_(**kwargs)


def _kernel_graph(target: Any) -> KernelGraph:
    if isinstance(target, KernelGraph):
        return target
    if hasattr(target, "build"):           # the builder's Graph
        return target.build()
    if isinstance(getattr(target, "graph", None), KernelGraph):   # a Workload
        return target.graph
    raise TypeError(f"cannot search a {type(target).__name__}: give a KernelGraph, a Workload "
                    "or a prism.Graph")


# -- HTML (pure functions of the state: the tests read them) --------------------------------------

def _esc(x: object) -> str:
    return html.escape(str(x), quote=True)


def _short(text: str, n: int = 140) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


_STATUS_COLORS = {"kept": "#dbeafe", "pruned": "#fde2e4", "verified": "#dcfce7",
                  "rejected": "#fee2e2", "undecided": "#fef3c7"}


def rows_html(rows: Iterable[Node], selected: str | None = None) -> str:
    """One page of rows as a table; one `<tr data-id=...>` per row."""
    head = "".join(f"<th style='text-align:left'>{h}</th>"
                   for h in ("seq", "id", "status", "under", "rule", "what"))
    body = []
    for n in rows:
        what = n.reason if n.status == "pruned" else (n.description or n.reason or "")
        if n.kind == "candidate" and n.method:
            what = f"{n.status} ({n.method}){': ' + n.reason if n.reason else ''}"
        style = " style='outline:2px solid #2563eb'" if n.id == selected else ""
        body.append(
            f"<tr data-id='{_esc(n.id)}'{style}><td>{n.seq}</td><td><code>{_esc(n.id)}</code>"
            f"</td><td style='background:{_STATUS_COLORS.get(n.status, '#fff')}'>"
            f"{_esc(n.status)}</td><td>{_esc(n.parent or '')}</td><td>{abbr(n.rule or '')}</td>"
            f"<td>{_esc(_short(what))}</td></tr>")
    return (f"<table class='prism-rows'><thead><tr>{head}</tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table>")


def detail_html(state: SearchState, node_id: str) -> str:
    """Everything about one row: its place in the tree, and for a pruned family the rule, the
    reason and the evidence (whatever keys it has); for a candidate its proof or counterexample."""
    if node_id not in state:
        return f"<p>no row {_esc(node_id)}</p>"
    d = state.node(node_id)
    path = " › ".join([*state.ancestors(node_id), node_id])
    out = [f"<h4><code>{_esc(node_id)}</code> — {_esc(d['status'])} {_esc(d['kind'])}</h4>",
           f"<p>path: <code>{_esc(path)}</code></p>"]
    if d["kind"] == "family":
        out.append(f"<p>{_esc(d['description'])}</p>")
        if "graph" not in d:     # the engine records families' sGraphs only when asked
            out.append(f"<p class='prism-no-graph' style='color:#555'>{NO_GRAPH}</p>")
        for what, ids in (("families under it", d["children"]),
                          ("candidates", d["candidates"])):
            listed = ", ".join(ids[:MAX_LISTED]) + (" …" if len(ids) > MAX_LISTED else "")
            out.append(f"<p>{len(ids)} {what}{': ' if ids else ''}{_esc(listed)}</p>")
        if d["status"] == "pruned":
            out.append(f"<p>pruned by <b>{abbr(d['rule'])}</b>: {_esc(d['reason'])}</p>")
            meaning = definition(d["rule"])
            if meaning:       # what the rule is, in plain words, beside what it saw here
                out.append(f"<p style='color:#555'><i>{_esc(d['rule'])}</i>: "
                           f"{_esc(meaning)}</p>")
            out.append(evidence_html(d["evidence"]))
    else:
        out.append(f"<p>family <code>{_esc(d['family'])}</code>, method "
                   f"{_esc(d['method'] or '?')}</p>")
        if "proof" in d:
            out.append(proof_html(ProofState.from_json(d["proof"], candidate=node_id)))
        elif "counterexample" in d:
            out.append(counterexample_html(CounterexampleState(node_id, d["family"],
                                                               d["counterexample"],
                                                               d["method"])))
        if "reason" in d:
            out.append(f"<p>{_esc(d['reason'])}</p>")
    return "".join(out)


def evidence_html(evidence: Mapping[str, Any]) -> str:
    """A rule's evidence, key by key: an abstract expression beside the target, a z3 unsat
    core as a list, cost-bound numbers rounded; any other key as its JSON."""
    if not evidence:
        return "<p><i>no evidence recorded</i></p>"
    rows = []
    if "expression" in evidence and "target" in evidence:
        rows.append("<tr><th>expression vs target</th><td><code>"
                    f"{_esc(evidence['expression'])}</code><br>⊄ <code>"
                    f"{_esc(evidence['target'])}</code></td></tr>")
    for key, value in evidence.items():
        if key in ("expression", "target") and rows:
            continue
        rows.append(f"<tr><th style='text-align:left'>{_esc(key)}</th>"
                    f"<td>{_value_html(value)}</td></tr>")
    return f"<table class='prism-evidence'>{''.join(rows)}</table>"


def _value_html(value: Any) -> str:
    if isinstance(value, float):
        return _esc(f"{value:.4g}")
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "<ul>" + "".join(f"<li><code>{_esc(v)}</code></li>" for v in value) + "</ul>"
    if isinstance(value, dict | list):
        return f"<code>{_esc(json.dumps(value))}</code>"
    return _esc(value)

