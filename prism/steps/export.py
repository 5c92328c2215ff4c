"""A search's trace as step records: one per atomic decision, with its evidence.

    {"id": "s7", "source": "f7", "parent": "f3", "kind": "add_op", "group": "add_op",
     "before": <text>, "action": {...}, "after": <text>, "evidence": {...}, "rationale": {...}}

Kinds (`prism.steps.states` for the actions):

    open_kernel, add_op, add_kernel_op, close_block   a family generated: the parent family's
                       state before, the family's after; its rationale is what the rules then
                       said of it (kept, or the rule that pruned it), from the trace
    prune              a family pruned by a rule: the family's state before, no state after
                       (every completion is dropped); evidence the rule's, with its reason
    set_maps           a complete family's maps chosen: the family (maps symbolic) before,
                       the member after, the family's dimension equalities as evidence
                       (`prism.steps.members`)
    prove              a candidate proved equivalent: its graph before and after (maps set,
                       nothing more to build), the proof as evidence
    instantiate        a candidate's sizes assigned by the tuner, with its modeled latency
    measure            a configuration measured, with the latency's kind (`prism.steps.tuning`:
                       both need the trace of a whole pipeline, `prism optimize`)

States are the text form of the family's graph (`prism.ir.text`), so a trace must record
graphs (`prism search --trace-graphs`); without them `TraceWithoutGraphsError` says so.
Decisions the records cannot replay are counted as skipped, by reason, never dropped silently:
a family whose parent has no state, a family that is not one generator step from its parent
(a split program made after the search), a proof of several kernels proved kernel by kernel.

Filtering (`select`) keeps the first record of each near-duplicate class — the same action
kind, op and rule on a state whose text is the same once tensor names are stripped of their
numbers — then balances: no group keeps more than `balance` times the records of the rarest
group (at least `MIN_CAP`), taken evenly over the trace. Every count is in the summary.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from prism.errors import PrismError
from prism.ir.serialize import graph_from_json
from prism.ir.text import to_text
from prism.steps.members import choice, equalities, family_text
from prism.steps.states import State, StepError, derive, rebuild, root
from prism.steps.tuning import Pipeline
from prism.trace.events import (
    CandidateRejected,
    CandidateVerified,
    Event,
    FamilyGenerated,
    FamilyPruned,
    Instantiated,
    Measured,
    StageFinished,
)

FORMAT = "prism.steps"
VERSION = 1
MIN_CAP = 64            # the fewest records balancing leaves a group (the rarest has a few)
_NUMBERED = re.compile(r"\b([A-Za-z_]+?)_?\d+(_\d+)?\b")


class TraceWithoutGraphsError(PrismError):
    """A trace whose families carry no graphs: no states can be exported from it."""


@dataclass
class Export:
    """The records of one trace, before filtering, and what was skipped and why."""

    source: str
    records: list[dict[str, Any]] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)


def export(events: Iterable[Event], source: str = "trace") -> Export:
    """Every decision of the trace `events` that can be replayed, as a step record."""
    events = list(events)
    out = Export(source)
    families = [e for e in events if isinstance(e, FamilyGenerated)]
    if families and all(e.graph is None for e in families):
        raise TraceWithoutGraphsError(
            f"{source}: its {len(families)} families carry no graphs, so no state can be "
            "exported; search again with --trace-graphs (SearchConfig(record_graphs=True))")
    states: dict[str, State] = {}
    texts: dict[str, str] = {}
    outcome: dict[str, dict[str, Any]] = {}
    for e in events:
        if isinstance(e, FamilyPruned):
            outcome[e.id] = {"outcome": "pruned", "rule": e.rule,
                             "claim": e.evidence.get("claim")}
    for e in events:
        if isinstance(e, FamilyGenerated):
            _family(out, e, states, texts, outcome)
        elif isinstance(e, FamilyPruned):
            if e.id not in texts:
                out.skipped["prune of a family without a state"] += 1
                continue
            out.records.append(_record(
                out, e.id, e.parent, "prune", f"prune:{e.rule}", texts[e.id],
                {"kind": "prune", "rule": e.rule}, None,
                {"rule": e.rule, "reason": e.reason, **e.evidence},
                _prune_rationale(e.rule, e.evidence)))
        elif isinstance(e, CandidateVerified | CandidateRejected):
            _set_maps(out, e, states)
            if isinstance(e, CandidateVerified):
                _proof(out, e)
    _tuning(out, events)
    return out


def _set_maps(out: Export, e: CandidateVerified | CandidateRejected,
              states: dict[str, State]) -> None:
    state = states.get(e.family or "")
    if e.graph is None or state is None:
        out.skipped["member of a family without a state (a split program)"] += 1
        return
    try:
        member = graph_from_json({**e.graph, "name": ""}, validate=False)
        before = family_text(state, member)
    except PrismError:
        out.skipped["member that does not read or closes no family"] += 1
        return
    action = choice(member)
    verified = isinstance(e, CandidateVerified)
    out.records.append(_record(
        out, e.id, e.family, "set_maps", "set_maps", before, action, to_text(member),
        {"equalities": equalities(state), "candidate": e.id,
         "outcome": "proved" if verified else "refuted"},
        {"grid": [k["grid"] for k in action["kernels"]],
         "loop": [k["forloop_range"] for k in action["kernels"]],
         "equalities": len(state.kernel.equalities),
         "outcome": "proved" if verified else "refuted"}))


def _tuning(out: Export, events: list[Event]) -> None:
    """The instantiate and measure records of the tuner's events (a pipeline's trace)."""
    graphs = {e.id: graph_from_json({**e.graph, "name": ""}, validate=False)
              for e in events if isinstance(e, CandidateVerified) and e.graph is not None}
    target = next((e.summary["target"] for e in events if isinstance(e, StageFinished)
                   and e.stage == "check" and isinstance(e.summary.get("target"), dict)), None)
    tuner = Pipeline(graphs, graph_from_json({**target, "name": ""}, validate=False)
                     if target is not None else None)
    screens: set[str] = set()
    for e in events:
        if isinstance(e, Instantiated):
            why = tuner.instantiated(e)
            if why is not None:
                out.skipped[why] += 1
        elif isinstance(e, Measured):
            if e.id not in screens and e.kind == "modeled":
                found = tuner.screened(e)
                if found is not None:
                    screens.add(e.id)
                    out.records.append(_record(out, kind="instantiate", group="instantiate",
                                               **found))
            record = tuner.measured(e)
            if isinstance(record, str):
                out.skipped[record] += 1
            else:
                out.records.append(_record(out, kind="measure",
                                           group=f"measure:{e.kind}", **record))


def _family(out: Export, e: FamilyGenerated, states: dict[str, State], texts: dict[str, str],
            outcome: dict[str, dict[str, Any]]) -> None:
    if e.graph is None:
        out.skipped["family without a graph"] += 1
        return
    try:
        graph = graph_from_json(e.graph, validate=False)
        after = rebuild(graph)
    except PrismError:
        out.skipped["family graph that is no search state"] += 1
        return
    states[e.id] = after
    texts[e.id] = after.text()
    before = states.get(e.parent) if e.parent is not None else root(graph)
    if before is None:
        out.skipped["family whose parent has no state"] += 1
        return
    action = derive(before, after)
    if action is None:
        out.skipped["family that is not one generator step from its parent"] += 1
        return
    before_text = texts[e.parent] if e.parent is not None else before.text()
    out.records.append(_record(out, e.id, e.parent, action["kind"], action["kind"],
                               before_text, action, texts[e.id], {"description": e.description},
                               outcome.get(e.id, {"outcome": "kept"})))


def _proof(out: Export, e: CandidateVerified) -> None:
    proof = e.proof if isinstance(e.proof, dict) else {}
    if e.graph is None or "proof" not in proof:
        out.skipped["proof without a graph or steps"] += 1
        return
    if proof.get("by_kernel"):
        out.skipped["proof of several kernels, kernel by kernel"] += 1
        return
    try:
        text = to_text(graph_from_json({**e.graph, "name": ""}, validate=False))
    except PrismError:
        out.skipped["proof whose graph does not read"] += 1
        return
    steps = [[{k: s[k] for k in ("axiom", "direction", "path", "before", "after")}
              for s in output] for output in proof["proof"]]
    axioms = Counter(s["axiom"] for output in steps for s in output)
    out.records.append(_record(
        out, e.id, e.family, "prove", "prove", text,
        {"kind": "prove", "candidate": e.id, "method": e.method}, text,
        {"proof": steps, "sizes": proof.get("sizes")},
        {"verdict": proof.get("verdict"), "steps": sum(axioms.values()),
         "axioms": dict(axioms.most_common(3))}))


def _record(out: Export, source: str, parent: str | None, kind: str, group: str, before: str,
            action: dict[str, Any], after: str | None, evidence: dict[str, Any],
            rationale: dict[str, Any]) -> dict[str, Any]:
    return {"id": f"s{len(out.records) + 1}", "search": out.source, "source": source,
            "parent": parent, "kind": kind,
            "group": group, "before": before, "action": action, "after": after,
            "evidence": evidence, "rationale": rationale}


def _prune_rationale(rule: str, ev: dict[str, Any]) -> dict[str, Any]:
    """The rule, its claim and the one or two numbers or terms it rests on (from `ev` only)."""
    keys = {"cannot_close": ("pending", "remaining"), "dead_end_inputs": ("missing",),
            "abstract_expression": ("expression", "saturated"),
            "dead_end_output": ("expression", "shape"),
            "out_of_reach": ("expression", "distance", "needed", "remaining"),
            "hardware": ("unsat_core",),
            "cost_bound": ("lower_bound_us", "incumbent_us")}.get(rule, ())
    return {"rule": rule, "claim": ev.get("claim"),
            "because": {k: ev[k] for k in keys if k in ev}}


# -- filtering --------------------------------------------------------------------------------

def near_duplicate_key(record: dict[str, Any]) -> str:
    """Records with the same key are near-duplicates: the same action on the same state once
    the numbers in tensor names are dropped from both (the same decision on the same partial
    program, numbered otherwise)."""
    action = json.dumps(record["action"], sort_keys=True)
    text = _NUMBERED.sub(r"\1", f"{action}\n{record['before']}")
    return hashlib.sha256(text.encode()).hexdigest()


def select(records: list[dict[str, Any]], balance: float = 4.0, dedupe: bool = True,
           floor: int = MIN_CAP) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(the records kept, the counts per group: exported, near-duplicates dropped, dropped to
    balance, kept). A group keeps at most `balance` times the records of the rarest group, or
    `floor` when that is more; `balance` ≤ 0 keeps every group whole."""
    exported = Counter(r["group"] for r in records)
    seen: set[str] = set()
    unique: list[dict[str, Any]] = []
    duplicates: Counter[str] = Counter()
    for r in records:
        key = near_duplicate_key(r)
        if dedupe and key in seen:
            duplicates[r["group"]] += 1
            continue
        seen.add(key)
        unique.append(r)
    by_group: dict[str, list[dict[str, Any]]] = {}
    for r in unique:
        by_group.setdefault(r["group"], []).append(r)
    cap = None
    if balance > 0 and by_group:
        cap = max(floor, int(balance * min(len(g) for g in by_group.values())))
    kept_ids: set[str] = set()
    for group in by_group.values():
        kept_ids |= {r["id"] for r in _evenly(group, cap)}
    kept = [r for r in unique if r["id"] in kept_ids]
    counts = {g: {"exported": exported[g], "near_duplicates": duplicates[g],
                  "balanced_out": len(by_group.get(g, [])) - sum(
                      1 for r in by_group.get(g, []) if r["id"] in kept_ids),
                  "kept": sum(1 for r in kept if r["group"] == g)}
              for g in sorted(exported)}
    return kept, {"groups": counts, "cap_per_group": cap, "balance": balance,
                  "exported": len(records), "kept": len(kept)}


def _evenly(group: list[dict[str, Any]], cap: int | None) -> list[dict[str, Any]]:
    """At most `cap` of `group`, spread evenly over it (the trace's order: early and late
    decisions of the search alike)."""
    if cap is None or len(group) <= cap:
        return group
    return [group[(i * len(group)) // cap] for i in range(cap)]


def header(source: str, summary: dict[str, Any]) -> dict[str, Any]:
    return {"format": FORMAT, "version": VERSION, "source": source, "summary": summary}


__all__ = ["FORMAT", "VERSION", "Export", "StepError", "TraceWithoutGraphsError", "export",
           "header", "near_duplicate_key", "select"]
