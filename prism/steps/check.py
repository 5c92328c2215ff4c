"""Replaying step records: the action applied to the state gives the next state, and the
evidence re-checks (`prism.steps.evidence`). A failure names the record, its kind and what
fails; the report is a value (`CheckReport`), never a print.

    open_kernel, add_op,   `before` read back (`from_text`) and rebuilt as a search state
    add_kernel_op,         (`rebuild`: it must be one), the action applied as the generator
    close_block            does (`apply`), the result's text equal to `after`
    prune                  `before` rebuilt, `after` empty, the rule's evidence re-checked
    prove                  `after` equal to `before`, every proof step replayed by the
                           independent checker from the candidate's terms, and the proofs of
                           one search all ending at the same (the target's) terms
    set_maps               the member made again from the family by the search's map
                           instantiation with the action's choice, equal to `after`, under the
                           family's own equalities, well-formed (`prism.steps.members`)
    instantiate            the params substituted again, the program well-formed and within
                           the recorded device's limits, its modeled latency recomputed equal
    measure                a `modeled` latency recomputed equal; an `interpreted` or
                           `measured` one checked labelled and consistent only, and counted in
                           the report's `not_rechecked` (`prism.steps.tuning`)
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prism.errors import PrismError
from prism.ir.text import from_text
from prism.steps.evidence import check_proof, check_prune
from prism.steps.export import FORMAT
from prism.steps.members import check_set_maps
from prism.steps.states import apply, rebuild
from prism.steps.tuning import check_instantiate, check_measure

GENERATION = ("open_kernel", "add_op", "add_kernel_op", "close_block")
_FIX = "export the steps again with `prism export-steps`"


class StepsFormatError(PrismError):
    """A steps file that is not JSON Lines of step records."""


@dataclass
class CheckReport:
    checked: Counter[str] = field(default_factory=Counter)      # records per kind
    failures: list[dict[str, str]] = field(default_factory=list)
    # claims replayed only in part (a measured latency cannot be measured again here): what
    # was not re-checked, with the number of records
    not_rechecked: Counter[str] = field(default_factory=Counter)

    @property
    def ok(self) -> bool:
        return not self.failures

    def to_json(self) -> dict[str, Any]:
        return {"checked": sum(self.checked.values()), "by_kind": dict(self.checked),
                "failed": len(self.failures), "failures": self.failures,
                **({"not_rechecked": dict(self.not_rechecked)} if self.not_rechecked else {})}


def check_records(records: list[dict[str, Any]]) -> CheckReport:
    """Replay every record; a record that fails is reported, and the rest are still checked."""
    report = CheckReport()
    ends: dict[str, tuple[str, list[str]]] = {}     # search → (first prove record, its ends)
    for r in records:
        kind = str(r.get("kind"))
        report.checked[kind] += 1
        try:
            if kind == "measure":
                wrong, unchecked = _measure(r)
                if unchecked is not None and wrong is None:
                    report.not_rechecked[unchecked] += 1
            else:
                wrong = _check(r, kind, ends)
        except PrismError as err:
            wrong = f"{type(err).__name__}: {err}"
        if wrong is not None:
            report.failures.append({"id": str(r.get("id")), "kind": kind,
                                    "source": str(r.get("source")), "problem": wrong})
    return report


def _check(r: dict[str, Any], kind: str, ends: dict[str, tuple[str, list[str]]]) -> str | None:
    action = r.get("action")
    if not isinstance(action, dict) or action.get("kind") != kind:
        return f"its action is {action!r}, not a {kind} action"
    if kind == "set_maps":
        return check_set_maps(r)
    if kind == "instantiate":
        return check_instantiate(r)
    before = from_text(r["before"])
    if kind in GENERATION:
        if not isinstance(r.get("after"), str):
            return "a generation step has no state after"
        state = apply(rebuild(before), action)
        got = state.text()
        if got != r["after"]:
            return f"the action gives another state: {diff(got, r['after'])}"
        return None
    if kind == "prune":
        if r.get("after") is not None:
            return "a prune leaves no state, but the record has one after"
        evidence = r.get("evidence", {})
        if evidence.get("rule") != action.get("rule"):
            return f"the action prunes by {action.get('rule')!r}, the evidence is " \
                   f"{evidence.get('rule')!r}'s"
        return check_prune(action["rule"], rebuild(before), evidence)
    if kind == "prove":
        if r.get("after") != r["before"]:
            return "a proof changes no state, but the record's after differs from before"
        wrong, found = check_proof(before, r.get("evidence", {}))
        if wrong is not None:
            return wrong
        search = str(r.get("search", ""))
        first = ends.setdefault(search, (str(r.get("id")), found))
        if first[1] != found:
            return f"the proof ends at {found}, record {first[0]}'s at {first[1]}: not the " \
                   "same target"
        return None
    return f"unknown record kind {kind!r}"


def _measure(r: dict[str, Any]) -> tuple[str | None, str | None]:
    action = r.get("action")
    if not isinstance(action, dict) or action.get("kind") != "measure":
        return f"its action is {action!r}, not a measure action", None
    return check_measure(r)


def diff(got: str, want: str) -> str:
    for a, b in zip(got.splitlines(), want.splitlines(), strict=False):
        if a != b:
            return f"{a.strip()!r} where the record has {b.strip()!r}"
    return f"{len(got.splitlines())} lines where the record has {len(want.splitlines())}"


def read_steps(path: str | Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(the header, the records) of a steps file; `StepsFormatError` names the line."""
    header: dict[str, Any] = {}
    records = []
    with Path(path).open(encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
            except ValueError:
                raise StepsFormatError(f"{path} line {number}: not valid JSON; {_FIX}") from None
            if not isinstance(data, dict):
                raise StepsFormatError(f"{path} line {number}: not a JSON object; {_FIX}")
            if data.get("format") == FORMAT:
                header = data
            elif "kind" in data and "before" in data:
                records.append(data)
            else:
                raise StepsFormatError(f"{path} line {number}: neither a steps header nor a "
                                       f"step record; {_FIX}")
    if not header:
        raise StepsFormatError(f"{path}: no {FORMAT} header line: not a steps file; {_FIX}")
    return header, records
