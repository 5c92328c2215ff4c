"""Events: one frozen dataclass per decision the engine makes, and their JSON form.

Every event carries `seq` (its place in the stream, stamped by the tracer) and `time` (seconds
since the tracer started); both have defaults, so engine code builds events without them. Ids are
strings; `parent`, `family` and `candidate` link an event to the family or candidate it is about:

    FamilyGenerated.id ← FamilyPruned.id            (the family that was pruned)
    FamilyGenerated.id ← CandidateVerified.family   ← Instantiated.candidate ← Measured.candidate
                       ← CandidateRejected.family, CandidateUndecided.family

JSON form: `{"type": "<class name>", "seq": ..., "time": ..., <fields>}`. Payloads (`evidence`,
`proof`, `counterexample`, `params`, `summary`, `graph`) are normalized to plain JSON values when
the event is made, so the event in memory equals the one read back from a file: tuples become
lists, and non-finite floats become the strings "inf", "-inf" and "nan" (JSON has none). Top-level
float fields (`latency_us`, `seconds`, `time`) stay floats; only their JSON form spells a
non-finite value as one of those strings, so a failed kernel's `latency_us = inf` round-trips.
An optional field left at its default None (a family's `graph` when graphs are not recorded, a
`method`, a `device`, an `error`) is left out of the JSON form and read back as that default:
a search's trace holds one such field per family, and "null" on each was 2% of its bytes.
"""

from __future__ import annotations

import math
import types
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, ClassVar, get_args, get_origin, get_type_hints

from prism.errors import TraceFormatError

MEASURE_KINDS = ("measured", "interpreted", "modeled")

_FIX = "re-run the search to write a new trace"
_MAX_DEPTH = 200  # payload nesting; deeper than any proof term we write, shallower than the stack
_NONFINITE = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}
_FIELD_TYPES: dict[type, dict[str, frozenset[type]]] = {}


@dataclass(frozen=True, kw_only=True)
class Event:
    """Base of every event: its place in the stream and when it happened (tracer-stamped)."""

    type: ClassVar[str] = "Event"

    seq: int = -1  # -1: not emitted yet; the tracer stamps 0, 1, 2, ...
    time: float = 0.0  # seconds since the tracer started

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.type = cls.__name__

    def __post_init__(self) -> None:
        # Frozen: normalized values are written through object.__setattr__, once, here.
        for name, json in _normalized_fields(type(self)):
            value = getattr(self, name)
            if json:
                object.__setattr__(self, name, _json_value(value, f"{self.type}.{name}", 0))
            elif isinstance(value, int) and not isinstance(value, bool):
                object.__setattr__(self, name, float(value))


@dataclass(frozen=True)
class FamilyGenerated(Event):
    """The search generated a family of sGraphs; `graph` is its sGraph JSON when recorded."""

    id: str
    parent: str | None
    description: str
    graph: dict[str, Any] | None = None


@dataclass(frozen=True)
class FamilyPruned(Event):
    """The family `id` was pruned by `rule`; `evidence` is what the rule saw."""

    id: str
    parent: str | None
    rule: str
    reason: str
    evidence: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CandidateVerified(Event):
    """Candidate `id` of `family` is proved equivalent to the input program."""

    id: str
    family: str | None
    proof: dict[str, Any] | list[Any]
    method: str | None = None  # e.g. "egraph", "z3", "random"
    graph: dict[str, Any] | None = None  # the candidate's sGraph JSON, when recorded


@dataclass(frozen=True)
class CandidateRejected(Event):
    """Candidate `id` of `family` is not equivalent; `counterexample` shows where they differ."""

    id: str
    family: str | None
    counterexample: dict[str, Any]
    method: str | None = None
    graph: dict[str, Any] | None = None  # the candidate's sGraph JSON, when recorded


@dataclass(frozen=True)
class CandidateUndecided(Event):
    """Candidate `id` of `family` was neither proved nor refuted within the limits (`reason`)."""

    id: str
    family: str | None
    reason: str
    method: str | None = None


@dataclass(frozen=True)
class Instantiated(Event):
    """Candidate became the concrete kernel `id` with parameters `params` (tiles, grid, ...);
    `device`, when recorded, is the device it was instantiated for (every `DeviceSpec` field,
    its dtype by name): what a step export needs to re-check its limits and modeled latency."""

    id: str
    candidate: str | None
    params: dict[str, Any]
    device: dict[str, Any] | None = None


@dataclass(frozen=True)
class Measured(Event):
    """Kernel `id` took `latency_us`; `kind` says what the number means (never shown without it).

    `latency_us = inf` is a kernel that failed to compile or run: it scores, it does not raise.
    """

    id: str
    candidate: str | None
    params: dict[str, Any]
    latency_us: float
    kind: str  # one of MEASURE_KINDS
    device: str | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.kind not in MEASURE_KINDS:
            raise TraceFormatError(
                f"Measured.kind is {self.kind!r}; use one of {', '.join(MEASURE_KINDS)}"
            )


@dataclass(frozen=True)
class StageStarted(Event):
    """A pipeline stage began."""

    stage: str


@dataclass(frozen=True)
class StageFinished(Event):
    """A pipeline stage ended after `seconds`; `error` is set when it ended by raising."""

    stage: str
    seconds: float
    summary: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


@dataclass(frozen=True)
class SearchFinished(Event):
    """The whole search ended; `summary` holds its counts and the best result."""

    summary: dict[str, Any]


EVENT_TYPES: dict[str, type[Event]] = {
    cls.type: cls
    for cls in (
        FamilyGenerated,
        FamilyPruned,
        CandidateVerified,
        CandidateRejected,
        CandidateUndecided,
        Instantiated,
        Measured,
        StageStarted,
        StageFinished,
        SearchFinished,
    )
}


def event_to_json(event: Event) -> dict[str, Any]:
    """`{"type": ..., "seq": ..., "time": ..., <fields>}`: strict JSON (`allow_nan=False`);
    optional fields at their default None are left out."""
    out: dict[str, Any] = {"type": event.type}
    for f in fields(event):
        value = getattr(event, f.name)
        if value is None and f.default is None:    # read back as its default (the docstring)
            continue
        if isinstance(value, float) and not math.isfinite(value):
            value = _float_name(value)
        elif isinstance(value, dict | list):
            value = _json_value(value, f.name, 0)  # a copy: the caller may mutate it
        out[f.name] = value
    return out


def event_from_json(data: object) -> Event:
    """The event `data` (a decoded JSON object) describes; `TraceFormatError` says what is wrong."""
    if not isinstance(data, dict):
        raise TraceFormatError(f"an event is a JSON object, not {_json_type(data)}; {_FIX}")
    tag = data.get("type")
    if not isinstance(tag, str):
        raise TraceFormatError(f"the event has no \"type\" string naming its kind; {_FIX}")
    cls = EVENT_TYPES.get(tag)
    if cls is None:
        known = ", ".join(sorted(EVENT_TYPES))
        raise TraceFormatError(
            f"unknown event type {tag!r} (known: {known}); the trace may come from another "
            f"version of prism: {_FIX}"
        )
    accepted = _field_types(cls)
    unknown = sorted(set(data) - set(accepted) - {"type"})
    if unknown:
        raise TraceFormatError(f"{tag} has unknown field {unknown[0]!r}; {_FIX}")
    kwargs: dict[str, Any] = {}
    for f in fields(cls):
        if f.name not in data:
            if f.default is MISSING and f.default_factory is MISSING:
                raise TraceFormatError(f"{tag} is missing field {f.name!r}; {_FIX}")
            continue
        kwargs[f.name] = _check_field(tag, f.name, data[f.name], accepted[f.name])
    try:
        return cls(**kwargs)
    except TraceFormatError:
        raise
    except (TypeError, ValueError) as err:  # e.g. a payload nested deeper than _MAX_DEPTH
        raise TraceFormatError(f"{tag} is not a valid event ({err}); {_FIX}") from None


_NORMALIZED: dict[type, tuple[tuple[str, bool], ...]] = {}


def _normalized_fields(cls: type[Event]) -> tuple[tuple[str, bool], ...]:
    """The fields `__post_init__` normalizes: (name, True) for a JSON payload (a dict or a
    list), (name, False) for a float that may be given as an int (cached per class)."""
    found = _NORMALIZED.get(cls)
    if found is None:
        found = tuple((name, dict in accepted or list in accepted)
                      for name, accepted in _field_types(cls).items()
                      if dict in accepted or list in accepted or float in accepted)
        _NORMALIZED[cls] = found
    return found


def _field_types(cls: type[Event]) -> dict[str, frozenset[type]]:
    """Field name → the JSON-level types it accepts, read from the annotations (cached)."""
    if cls in _FIELD_TYPES:
        return _FIELD_TYPES[cls]
    hints = get_type_hints(cls)
    out: dict[str, frozenset[type]] = {}
    for f in fields(cls):
        hint = hints[f.name]
        alternatives = get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
        out[f.name] = frozenset(get_origin(a) or a for a in alternatives)
    _FIELD_TYPES[cls] = out
    return out


def _check_field(tag: str, name: str, value: Any, accepted: frozenset[type]) -> Any:
    if value is None and type(None) in accepted:
        return None
    if float in accepted:
        if isinstance(value, str) and value in _NONFINITE:
            return _NONFINITE[value]
        if isinstance(value, int | float) and not isinstance(value, bool):
            try:
                return float(value)
            except OverflowError:  # an integer literal too large for a float
                pass
    elif int in accepted:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif isinstance(value, tuple(t for t in accepted if t is not type(None))):
        return value
    want = " or ".join(sorted(_JSON_NAMES[t] for t in accepted))
    raise TraceFormatError(
        f"{tag} field {name!r} should be {want}, not {_json_type(value)}; {_FIX}"
    )


def _json_value(value: object, where: str, depth: int) -> Any:
    """A plain-JSON copy of `value`: tuples → lists, non-finite floats → "inf"/"-inf"/"nan"."""
    if depth > _MAX_DEPTH:
        raise ValueError(f"{where} is nested more than {_MAX_DEPTH} levels deep")
    kind = type(value)      # the plain types first, exactly (a subclass takes the long way)
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if isinstance(value, dict) and kind is dict:
        try:                # the error, if any, is raised again below with its full place
            return {k: _json_value(v, "", depth + 1) for k, v in value.items()
                    if type(k) is str or _not_a_key()}
        except (TypeError, ValueError):
            pass
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else _float_name(value)
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise TypeError(f"{where} has key {k!r}; JSON object keys are strings")
            out[k] = _json_value(v, f"{where}[{k!r}]", depth + 1)
        return out
    if isinstance(value, list | tuple):
        return [_json_value(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(value)]
    raise TypeError(
        f"{where} is a {type(value).__name__}, not a JSON value; convert it first "
        f"(.tolist(), .item(), str())"
    )


def _not_a_key() -> bool:
    raise TypeError("a JSON object key that is not a string")


def _float_name(x: float) -> str:
    return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")


_JSON_NAMES = {dict: "an object", list: "an array", str: "a string", bool: "a boolean",
               int: "an integer", float: "a number", type(None): "null"}


def _json_type(value: object) -> str:
    return _JSON_NAMES.get(type(value), type(value).__name__)
