"""Step-level trajectories: a search's trace as one record per decision, and their replay.

`export_steps(trace, out)` writes the records of a trace recorded with graphs
(`prism.steps.export`); `check_steps(path)` replays each one (`prism.steps.check`). States are
the text form of graphs (`prism.ir.text`); actions are the generator's own steps
(`prism.steps.states`); evidence re-checks without the search (`prism.steps.evidence`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from prism.steps.check import CheckReport, StepsFormatError, check_records, read_steps
from prism.steps.export import TraceWithoutGraphsError, export, header, select
from prism.steps.states import State, StepError, apply, derive, rebuild


def export_steps(trace: str | Path, out: str | Path, *, balance: float = 4.0,
                 dedupe: bool = True) -> dict[str, Any]:
    """Write the filtered step records of `trace` to `out` (JSON Lines, a header line first);
    return the summary: counts per group (exported, near-duplicates, balanced out, kept) and
    the decisions skipped, by reason."""
    from prism.trace import read_jsonl
    found = export(read_jsonl(trace), str(trace))
    kept, counts = select(found.records, balance, dedupe)
    summary = {**counts, "skipped": dict(found.skipped),
               "by_kind": _by_kind(kept)}
    with Path(out).open("w", encoding="utf-8") as f:
        f.write(json.dumps(header(str(trace), summary)) + "\n")
        for r in kept:
            f.write(json.dumps(r) + "\n")
    return summary


def check_steps(path: str | Path) -> CheckReport:
    """Replay every record of the steps file `path`."""
    _, records = read_steps(path)
    return check_records(records)


def _by_kind(records: list[dict[str, Any]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for r in records:
        counts[r["kind"]] = counts.get(r["kind"], 0) + 1
    return counts


__all__ = ["CheckReport", "State", "StepError", "StepsFormatError", "TraceWithoutGraphsError",
           "apply", "check_records", "check_steps", "derive", "export", "export_steps",
           "read_steps", "rebuild", "select"]
