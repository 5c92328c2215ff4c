"""Events, the tracer that stamps and broadcasts them, and JSONL trace files (DESIGN.md §4).

Imports nothing from the rest of `prism` but `prism.errors`: every layer may import this one.
"""

from prism.trace.events import (
    EVENT_TYPES,
    MEASURE_KINDS,
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
    event_from_json,
    event_to_json,
)
from prism.trace.tracer import (
    TRACE_FILE,
    BudgetClock,
    FamilySampler,
    JsonlWriter,
    Listener,
    Tracer,
    read_jsonl,
    replay,
    write_jsonl,
)

__all__ = [
    "EVENT_TYPES",
    "MEASURE_KINDS",
    "TRACE_FILE",
    "BudgetClock",
    "CandidateRejected",
    "CandidateUndecided",
    "CandidateVerified",
    "Event",
    "FamilyGenerated",
    "FamilyPruned",
    "FamilySampler",
    "Instantiated",
    "JsonlWriter",
    "Listener",
    "Measured",
    "SearchFinished",
    "StageFinished",
    "StageStarted",
    "Tracer",
    "event_from_json",
    "event_to_json",
    "read_jsonl",
    "replay",
    "write_jsonl",
]
