"""Events, the tracer and JSONL trace files. The oracle is the event itself: what is written and
read back (or replayed) must equal what was emitted."""

from __future__ import annotations

import contextlib
import json
import math
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prism.errors import ListenerError, PrismError, TraceFormatError, TraceWriteError
from prism.trace import (
    EVENT_TYPES,
    CandidateRejected,
    CandidateUndecided,
    CandidateVerified,
    Event,
    FamilyGenerated,
    FamilyPruned,
    Instantiated,
    JsonlWriter,
    Measured,
    SearchFinished,
    StageFinished,
    StageStarted,
    Tracer,
    event_from_json,
    event_to_json,
    read_jsonl,
    replay,
    write_jsonl,
)

# One of each event type, with nested payloads, None links and an inf latency.
SAMPLES: list[Event] = [
    FamilyGenerated("f0", None, "root: the input program"),
    FamilyGenerated("f1", "f0", "fuse rms_norm into matmul", graph={"ops": [{"op": "matmul"}]}),
    FamilyPruned("f2", "f0", "shared_memory", "needs 300 KiB > 228 KiB", {"bytes": 307200}),
    CandidateVerified("c1", "f1", [{"axiom": "assoc", "at": [0, 1]}], method="egraph"),
    CandidateVerified("c2", "f1", {"steps": [], "smt": "unsat"}),
    CandidateRejected("c3", "f1", {"inputs": {"X": [[1.0, 2.0]]}, "max_abs_diff": 0.5}, "random"),
    CandidateUndecided("c4", "f1", "limit reached (node_limit)", "e-graph"),
    Instantiated("k1", "c1", {"block_m": 64, "grid": [8, 1]}),
    Measured("k1", "c1", {"block_m": 64}, 12.5, "modeled", device="h100"),
    Measured("k2", "c1", {"block_m": 128}, math.inf, "measured"),
    StageStarted("search"),
    StageFinished("search", 1.25, {"families": 3}),
    StageFinished("verify", 0.5, error="RuntimeError: z3 timed out"),
    SearchFinished({"generated": 3, "pruned": {"shared_memory": 1}, "best": "k1"}),
]


def stamped(events: list[Event]) -> list[Event]:
    tracer = Tracer()
    for e in events:
        tracer.emit(e)
    return tracer.events


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def valid_line(event: Event) -> str:
    return json.dumps(event_to_json(event))


# --- events and their JSON ---------------------------------------------------------------------


def test_samples_cover_every_event_type() -> None:
    assert {e.type for e in SAMPLES} == set(EVENT_TYPES)
    assert all(EVENT_TYPES[name].__name__ == name for name in EVENT_TYPES)


@pytest.mark.parametrize("event", SAMPLES, ids=lambda e: e.type)
def test_json_round_trip(event: Event) -> None:
    data = event_to_json(event)
    assert data["type"] == type(event).__name__
    text = json.dumps(data, allow_nan=False)  # strict JSON, even for latency_us = inf
    assert event_from_json(json.loads(text)) == event


def test_file_round_trip_keeps_every_event_in_order(tmp_path: Path) -> None:
    events = stamped(SAMPLES)
    write_jsonl(events, tmp_path / "trace.jsonl")
    assert read_jsonl(tmp_path / "trace.jsonl") == events


def test_payloads_are_normalized_to_json_when_the_event_is_made() -> None:
    params: dict[str, Any] = {"grid": (8, 1), "score": -math.inf}
    e = Instantiated("k", "c", params)
    params["grid"] = (1, 1)  # the event is a snapshot, not a view of the engine's dict
    assert e.params == {"grid": [8, 1], "score": "-inf"}
    assert event_from_json(event_to_json(e)) == e


def test_payload_that_is_not_json_raises_at_the_emit_site() -> None:
    with pytest.raises(TypeError, match=r"FamilyPruned.evidence\['x'\] is a object"):
        FamilyPruned("f", None, "r", "why", {"x": object()})
    with pytest.raises(TypeError, match="keys are strings"):
        Instantiated("k", "c", {1: 2})  # type: ignore[dict-item]


def test_users_can_build_events_without_seq_and_time() -> None:
    e = StageStarted("search")
    assert (e.seq, e.time) == (-1, 0.0)
    assert e.type == "StageStarted"


def test_measured_with_a_bad_kind_raises() -> None:
    with pytest.raises(TraceFormatError, match="measured, interpreted, modeled"):
        Measured("k", "c", {}, 1.0, "guessed")
    assert issubclass(TraceFormatError, PrismError)


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ([1, 2], "not an array"),
        ({"id": "f"}, 'no "type"'),
        ({"type": "Teleported"}, "unknown event type 'Teleported'"),
        ({"type": "FamilyPruned", "id": "f", "parent": None, "rule": "r"}, "field 'reason'"),
        ({"type": "StageStarted", "stage": 3}, "'stage' should be a string, not an integer"),
        ({"type": "StageStarted", "stage": "s", "seq": True}, "'seq' should be an integer"),
        ({"type": "StageStarted", "stage": "s", "extra": 1}, "unknown field 'extra'"),
        ({"type": "SearchFinished", "summary": []}, "'summary' should be an object"),
        ({"type": "StageFinished", "stage": "s", "seconds": "1"}, "'seconds' should be a number"),
        ({"type": "Measured", "id": "k", "candidate": None, "params": {}, "latency_us": 1,
          "kind": "vibes"}, "Measured.kind"),
    ],
)
def test_event_from_json_names_the_problem(data: Any, problem: str) -> None:
    with pytest.raises(TraceFormatError, match=problem) as info:
        event_from_json(data)
    assert "\n" not in str(info.value)


# --- the tracer --------------------------------------------------------------------------------


def test_tracer_stamps_seq_and_time_in_order() -> None:
    tracer = Tracer()
    returned = [tracer.emit(e) for e in SAMPLES]
    assert tracer.events == returned
    assert [e.seq for e in returned] == list(range(len(SAMPLES)))
    times = [e.time for e in returned]
    assert times == sorted(times) and times[0] >= 0.0
    assert [dataclass_fields(e) for e in returned] == [dataclass_fields(e) for e in SAMPLES]


def dataclass_fields(e: Event) -> dict[str, Any]:
    data = event_to_json(e)
    del data["seq"], data["time"]
    return data


def test_keep_false_keeps_nothing_but_still_tells_listeners() -> None:
    tracer = Tracer(keep=False)
    seen: list[Event] = []
    tracer.subscribe(seen.append)
    tracer.emit(StageStarted("search"))
    assert tracer.events == [] and [e.seq for e in seen] == [0]


def test_listeners_are_called_in_order_and_can_unsubscribe() -> None:
    tracer, calls = Tracer(), []
    tracer.subscribe(lambda e: calls.append(("a", e.seq)))
    stop_b = tracer.subscribe(lambda e: calls.append(("b", e.seq)))
    tracer.emit(StageStarted("x"))
    stop_b()
    stop_b()  # unsubscribing twice is harmless
    tracer.emit(StageStarted("y"))
    assert calls == [("a", 0), ("b", 0), ("a", 1)]


def test_a_listener_that_raises_does_not_stop_the_others_or_the_engine() -> None:
    tracer = Tracer()
    seen: list[Event] = []

    def broken(event: Event) -> None:
        raise RuntimeError("widget fell over")

    tracer.subscribe(broken)
    tracer.subscribe(seen.append)
    tracer.emit(StageStarted("a"))
    tracer.emit(StageStarted("b"))
    assert [e.seq for e in seen] == [0, 1]
    assert len(tracer.events) == 2
    assert [str(err) for err in tracer.listener_errors] == ["widget fell over"] * 2
    assert "StageStarted #1" in tracer.listener_errors[1].__notes__[0]


def test_a_required_listener_that_raises_stops_the_run_after_the_others_hear_it() -> None:
    tracer = Tracer()
    before: list[Event] = []
    after: list[Event] = []

    def broken(event: Event) -> None:
        if event.seq == 1:
            raise RuntimeError("disk gone")

    tracer.subscribe(before.append)
    tracer.subscribe(broken, required=True)
    tracer.subscribe(after.append)
    tracer.emit(StageStarted("a"))
    with pytest.raises(ListenerError) as err:
        tracer.emit(StageStarted("b"))
    message = str(err.value)
    assert "broken" in message and "RuntimeError: disk gone" in message
    assert "StageStarted #1" in message
    assert [e.seq for e in before] == [e.seq for e in after] == [0, 1]  # both heard #1
    assert isinstance(err.value.__cause__, RuntimeError)
    assert tracer.listener_errors == [err.value.__cause__]
    tracer.emit(StageStarted("c"))  # the failed listener is gone; the others go on
    assert [e.seq for e in after] == [0, 1, 2]


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (Linux)")
def test_a_trace_file_on_a_full_disk_is_a_trace_write_error() -> None:
    tracer = Tracer()
    writer = JsonlWriter("/dev/full", fix="choose another --out")
    tracer.subscribe(writer, required=True)
    with pytest.raises(TraceWriteError) as err:
        tracer.emit(StageStarted("search"))
    assert str(err.value) == ("the trace file /dev/full could not be written: No space left "
                              "on device; choose another --out")
    writer.close()  # what it could not write has been reported once, not again at close
    # not required: recorded, as for any listener
    quiet = Tracer()
    with JsonlWriter("/dev/full") as second:
        quiet.subscribe(second)
        quiet.emit(StageStarted("search"))
    assert isinstance(quiet.listener_errors[0], TraceWriteError)


def test_a_trace_file_that_cannot_be_opened_is_a_trace_write_error(tmp_path: Path) -> None:
    with pytest.raises(TraceWriteError, match="could not be written: No such file"):
        JsonlWriter(tmp_path / "no folder" / "trace.jsonl")


def test_emit_is_thread_safe_seq_unique_contiguous_and_in_order() -> None:
    tracer = Tracer()
    seen: list[Event] = []
    tracer.subscribe(seen.append)
    threads, per_thread = 8, 400
    barrier = threading.Barrier(threads)

    def work(t: int) -> None:
        barrier.wait()
        for i in range(per_thread):
            tracer.emit(FamilyGenerated(f"t{t}.{i}", None, "x"))

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible
    try:
        workers = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
    finally:
        sys.setswitchinterval(old)
    total = threads * per_thread
    assert [e.seq for e in tracer.events] == list(range(total))
    assert [e.seq for e in seen] == list(range(total))  # listeners see seq order
    assert len({e.id for e in tracer.events}) == total  # type: ignore[attr-defined]
    times = [e.time for e in tracer.events]
    assert times == sorted(times)


def test_stage_emits_started_and_finished_with_its_summary() -> None:
    ticks = iter([0.0, 1.0, 1.5, 4.0, 4.5])  # start, started, stage begins, stage ends, finished
    tracer = Tracer(clock=lambda: next(ticks))
    with tracer.stage("search") as summary:
        summary["families"] = 7
    started, finished = tracer.events
    assert started == StageStarted("search", seq=0, time=1.0)
    assert finished == StageFinished("search", 2.5, {"families": 7}, seq=1, time=4.5)


def test_stage_that_raises_still_finishes_and_reraises() -> None:
    tracer = Tracer()
    with pytest.raises(KeyError), tracer.stage("verify"):
        raise KeyError("c9")
    finished = tracer.events[-1]
    assert isinstance(finished, StageFinished)
    assert finished.error == "KeyError: 'c9'"


# --- JSONL files and replay --------------------------------------------------------------------


def test_jsonl_writer_flushes_each_line_so_a_live_file_can_be_tailed(tmp_path: Path) -> None:
    path = tmp_path / "live.jsonl"
    tracer = Tracer()
    with JsonlWriter(path) as writer:
        tracer.subscribe(writer)
        tracer.emit(StageStarted("search"))
        assert read_jsonl(path) == tracer.events  # before close
        for e in SAMPLES:
            tracer.emit(e)
    assert read_jsonl(path) == tracer.events
    assert all(json.loads(line) for line in path.read_text().splitlines())
    tracer.emit(StageStarted("late"))  # a closed writer is a listener error, not a crash
    assert "closed" in str(tracer.listener_errors[-1])


def test_replay_into_a_tracer_keeps_seq_and_time_and_tells_its_listeners(tmp_path: Path) -> None:
    events = stamped(SAMPLES)
    write_jsonl(events, tmp_path / "t.jsonl")
    target = Tracer()
    seen: list[Event] = []
    target.subscribe(seen.append)
    assert replay(tmp_path / "t.jsonl", target) == events
    assert target.events == events and seen == events
    assert target.emit(StageStarted("after")).seq == len(events)  # numbering continues


def test_replay_into_a_plain_listener(tmp_path: Path) -> None:
    events = stamped(SAMPLES)
    write_jsonl(events, tmp_path / "t.jsonl")
    seen: list[Event] = []
    replay(tmp_path / "t.jsonl", seen.append)
    assert seen == events


def test_blank_lines_are_skipped(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "t.jsonl", ["", valid_line(SAMPLES[0]), "  ", "\r"])
    assert read_jsonl(path) == [SAMPLES[0]]


@pytest.mark.parametrize(
    ("bad_line", "problem"),
    [
        ('{"type": "StageStarted", "sta', "not valid JSON \\(truncated\\?\\)"),
        ('{"type": "Warp", "stage": "s"}', "unknown event type 'Warp'"),
        ('{"type": "StageFinished", "stage": "s"}', "missing field 'seconds'"),
        ('{"type": "StageStarted", "stage": ["s"]}', "'stage' should be a string"),
        ("42", "not an integer"),
    ],
)
def test_a_bad_line_names_the_file_and_line_number(
    tmp_path: Path, bad_line: str, problem: str
) -> None:
    path = write_lines(tmp_path / "trace.jsonl", [valid_line(SAMPLES[0]), "", bad_line])
    seen: list[Event] = []
    with pytest.raises(TraceFormatError, match=rf"trace\.jsonl line 3: .*{problem}") as info:
        replay(path, seen.append)
    assert "re-run the search" in str(info.value) and "\n" not in str(info.value)
    assert seen == []  # nothing is delivered from a file with a bad line


def test_bad_utf8_is_a_format_error(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(valid_line(SAMPLES[0]).encode() + b"\n\xff\xfe\n")
    with pytest.raises(TraceFormatError, match="line 2: not UTF-8"):
        read_jsonl(path)


def test_deeply_nested_json_is_a_format_error(tmp_path: Path) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    nested = '{"type": "SearchFinished", "summary": {"x": ' + "[" * 300 + "]" * 300 + "}}"
    for line in (deep, nested):
        with pytest.raises(TraceFormatError, match="line 1"):
            read_jsonl(write_lines(tmp_path / "t.jsonl", [line]))


# --- properties --------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=200)
@given(lines=st.lists(st.text(), max_size=5))
def test_arbitrary_text_lines_either_read_or_raise_trace_format_error(
    tmp_path: Path, lines: list[str]
) -> None:
    path = tmp_path / "fuzz.jsonl"
    path.write_bytes("\n".join(lines).encode("utf-8", "surrogatepass"))
    with contextlib.suppress(TraceFormatError):  # the property: no other exception escapes
        read_jsonl(path)


FIELD_NAMES = sorted({f for e in SAMPLES for f in event_to_json(e)} | {"extra"})


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=100)
@given(
    sample=st.sampled_from(SAMPLES),
    changes=st.dictionaries(st.sampled_from(FIELD_NAMES), json_values, max_size=3),
    dropped=st.sets(st.sampled_from(FIELD_NAMES), max_size=2),
)
def test_damaged_event_lines_either_read_or_raise_trace_format_error(
    tmp_path: Path, sample: Event, changes: dict[str, Any], dropped: set[str]
) -> None:
    data = {k: v for k, v in {**event_to_json(sample), **changes}.items() if k not in dropped}
    path = write_lines(tmp_path / "fuzz.jsonl", [json.dumps(data)])
    try:
        (event,) = read_jsonl(path)
    except TraceFormatError:
        return
    assert event_from_json(event_to_json(event)) == event or _has_nan(event)


def _has_nan(event: Event) -> bool:
    return any(isinstance(v, float) and math.isnan(v) for v in vars(event).values())


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=50)
@given(evidence=st.dictionaries(st.text(), json_values), reason=st.text())
def test_any_json_payload_round_trips_through_a_file(
    tmp_path: Path, evidence: dict[str, Any], reason: str
) -> None:
    events = stamped([FamilyPruned("f1", None, "rule", reason, evidence)])
    write_jsonl(events, tmp_path / "t.jsonl")
    assert read_jsonl(tmp_path / "t.jsonl") == events


# --- what a trace costs: optional fields at None, microsecond times, gzip ----------------------

def test_an_optional_field_at_none_is_left_out_and_read_back_as_its_default() -> None:
    plain = FamilyGenerated("f1", None, "block op exp2 = exp(X)")     # graph not recorded
    data = event_to_json(plain)
    assert "graph" not in data and data["parent"] is None             # a link is never left out
    assert event_from_json(data) == plain
    assert "method" not in event_to_json(SAMPLES[4]) and "error" not in event_to_json(SAMPLES[11])


def test_the_tracer_stamps_times_to_a_tenth_of_a_millisecond() -> None:
    ticks = iter([10.0, 10.123456789, 10.5000004])
    tracer = Tracer(clock=lambda: next(ticks))
    tracer.emit(StageStarted("search"))
    tracer.emit(StageStarted("tune"))
    assert [e.time for e in tracer.events] == [0.1235, 0.5]


def test_a_gz_path_is_written_compressed_and_read_back_whatever_its_name(tmp_path: Path) -> None:
    # a search's trace: thousands of near-identical family events
    events = stamped([FamilyPruned(f"f{i}", "f0", "abstract_expression",
                                   f"exp{i % 7} = (exp X) is not a subexpression of the target",
                                   {"expression": "(exp X)", "claim": "no_equivalent"})
                      for i in range(2000)])
    write_jsonl(events, tmp_path / "trace.jsonl")
    write_jsonl(events, tmp_path / "trace.jsonl.gz")
    packed = (tmp_path / "trace.jsonl.gz").read_bytes()
    plain = (tmp_path / "trace.jsonl").stat().st_size
    assert packed[:2] == b"\x1f\x8b" and len(packed) * 10 < plain
    assert read_jsonl(tmp_path / "trace.jsonl.gz") == events
    (tmp_path / "renamed.jsonl").write_bytes(packed)       # told by its first bytes
    assert read_jsonl(tmp_path / "renamed.jsonl") == events
    seen: list[Event] = []
    assert replay(tmp_path / "trace.jsonl.gz", seen.append) == events == seen


def test_a_gz_trace_being_written_reads_up_to_its_last_flush(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import prism.trace.tracer as tracer_module
    monkeypatch.setattr(tracer_module, "GZIP_FLUSH_S", 0.0)     # a flush after every event
    path = tmp_path / "live.jsonl.gz"
    tracer = Tracer()
    with JsonlWriter(path) as writer:
        tracer.subscribe(writer)
        for e in SAMPLES:
            tracer.emit(e)
            assert read_jsonl(path) == tracer.events            # no gzip trailer yet
    assert read_jsonl(path) == tracer.events


def test_a_damaged_gz_trace_is_a_format_error(tmp_path: Path) -> None:
    write_jsonl(stamped(SAMPLES), tmp_path / "trace.jsonl.gz")
    packed = bytearray((tmp_path / "trace.jsonl.gz").read_bytes())
    packed[12:40] = bytes(28)                                # zeros over the deflate stream
    (tmp_path / "trace.jsonl.gz").write_bytes(bytes(packed))
    with pytest.raises(TraceFormatError, match=r"trace\.jsonl\.gz"):
        read_jsonl(tmp_path / "trace.jsonl.gz")


def test_a_family_sampler_wants_a_family_exactly_when_it_would_keep_one_of_its_events():
    """`FamilySampler.wants_family`, asked before a pruned family is built, says True exactly
    when the sampler would keep its generated or its pruned event; the tracer asks it only
    when every listener samples (a plain listener, or `keep`, wants every family)."""
    from prism.trace import FamilySampler
    kept: list = []
    sampler = FamilySampler(kept, 4)
    tracer = Tracer(keep=False)
    assert not tracer.wants_family("cannot_close", "f") and tracer.family_cap is None
    tracer.subscribe(sampler)
    assert tracer.family_cap == 4
    decided = []
    for i, rule in enumerate(["a", "a", "a", "b", "a", "b"]):
        wants = tracer.wants_family(rule, "f")
        before = len(kept)
        if wants:
            tracer.emit(FamilyGenerated(f"f{i}", None, "x"))
            tracer.emit(FamilyPruned(f"f{i}", None, rule, "why"))
            assert len(kept) > before            # it kept one of the two, as it said
        decided.append(wants)
    # two families fill the cap of 4 events; then only a rule not seen yet ("b") is wanted
    assert decided == [True, True, False, True, False, False]
    assert [(e.type, e.id) for e in kept] == [
        ("FamilyGenerated", "f0"), ("FamilyPruned", "f0"), ("FamilyGenerated", "f1"),
        ("FamilyPruned", "f1"), ("FamilyPruned", "f3")]
    assert sampler.families == 12 and sampler.dropped == 7   # 3 declined (6), f3's generated
    tracer.subscribe(lambda event: None)    # a plain listener hears every family
    assert tracer.wants_family("a", "f") and tracer.family_cap is None
    assert Tracer(keep=True).wants_family("a", "f")
