"""Set-maps, instantiate and measure step records (prism.steps.members, prism.steps.tuning).

Oracles: the graphs and numbers the trace recorded — a set_maps record's family is the
recorded family graph with the member's outputs, its member the recorded candidate graph; an
instantiate record's program, modeled again, gives the latency the tuner recorded at the time —
and corruption: a record whose member, assignment or latency was changed is reported by id,
found by the engine's own recomputation (the search's map instantiation, the substitution and
the cost model), never by comparing with the record itself."""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest

from prism.cost import modeled
from prism.ir.serialize import graph_from_json
from prism.ir.text import from_text
from prism.pipeline import superoptimize
from prism.steps import check_records, export
from prism.steps.tuning import device_from_json
from prism.trace import (
    CandidateRejected,
    CandidateVerified,
    FamilyGenerated,
    Instantiated,
    Measured,
    Tracer,
)

_TRACE: dict[str, tuple] = {}


@pytest.fixture
def optimized(cases):
    """The events of a whole pipeline (model backend) over a reduced search with graphs."""
    name = "rmsnorm_matmul"
    if name not in _TRACE:
        tracer = Tracer()
        superoptimize(cases.small(name), device="h100", measure="model", budget_s=120,
                      search_config=cases.reduced(name, record_graphs=True, max_families=400),
                      tracer=tracer, max_trials=2)
        _TRACE[name] = tuple(tracer.events)
    return _TRACE[name]


@pytest.fixture
def records(optimized):
    return export(optimized, "rmsnorm_matmul").records


def _of(records: list[dict], kind: str) -> list[dict]:
    return [copy.deepcopy(r) for r in records if r["kind"] == kind]


def test_set_maps_records_read_back_as_the_recorded_family_and_member(optimized, records):
    families = {e.id: graph_from_json(e.graph, validate=False) for e in optimized
                if isinstance(e, FamilyGenerated)}
    members = {e.id: graph_from_json(e.graph, validate=False) for e in optimized
               if isinstance(e, CandidateVerified | CandidateRejected)}
    set_maps = _of(records, "set_maps")
    assert len(set_maps) == len(members)           # one per member, proved or refuted
    for r in set_maps:
        member = members[r["source"]]
        assert from_text(r["after"]) == replace(member, name="")
        family = from_text(r["before"])
        # the family with its outputs: the recorded family graph, and the member's outputs
        assert replace(family, ops=tuple(o for o in family.ops if o.kind != "output")) == \
            replace(families[r["parent"]], name="")
        assert [o.inputs for o in family.ops if o.kind == "output"] == \
            [o.inputs for o in member.ops if o.kind == "output"]
        # the action is the member's maps, read off the member
        (kernel,) = r["action"]["kernels"]
        (bg,) = [b for _, b in member.iter_blocks()]
        assert kernel["grid"] == [str(g) for g in bg.grid]
    assert check_records(set_maps).ok


def test_a_set_maps_record_with_another_members_choice_or_state_is_reported(records):
    set_maps = _of(records, "set_maps")
    by_family: dict[str, list[dict]] = {}
    for r in set_maps:
        by_family.setdefault(r["parent"], []).append(r)
    a, b = next(rs for rs in by_family.values() if len(rs) > 1)[:2]
    assert a["action"] != b["action"] and a["after"] != b["after"]
    swapped = copy.deepcopy(a)
    swapped["action"] = b["action"]                # another member's choice, a's member
    wrong_after = copy.deepcopy(a)
    wrong_after["after"] = b["after"]              # a's choice, another member
    never = copy.deepcopy(a)                        # a choice the search does not make
    kernel = never["action"]["kernels"][0]
    tile = next(k for k in kernel if k.endswith("_tile"))
    kernel[tile]["imap"] = [7]
    equalities = copy.deepcopy(a)
    equalities["evidence"]["equalities"] = [*equalities["evidence"]["equalities"][1:], "1 = 2"]
    failures = check_records([swapped, wrong_after, never, equalities, b]).failures
    assert [f["id"] for f in failures] == [a["id"]] * 4
    assert "another member" in failures[0]["problem"]
    assert "no member" in failures[2]["problem"]
    assert "equalities" in failures[3]["problem"]


def test_instantiate_records_model_to_the_latency_the_tuner_recorded(optimized, records):
    screened = {e.id: e.latency_us for e in optimized
                if isinstance(e, Measured) and e.kind == "modeled"}
    inst = {e.id: e for e in optimized if isinstance(e, Instantiated)}
    found = _of(records, "instantiate")
    assert sorted(r["source"] for r in found) == sorted(inst)
    for r in found:
        program = from_text(r["after"])
        assert not program.free_vars()
        for _, bg in program.iter_blocks():         # the params are the program's sizes
            sizes = [g.value for g in bg.grid] + [bg.forloop_range.value]
            assert all(v in sizes for v in r["action"]["params"].values())
        device = device_from_json(inst[r["source"]].device)
        assert modeled(program, device).latency_us == screened[r["source"]]
    assert any(r["source"] == "input[]" for r in found)   # the input program too
    assert check_records(found).ok


def test_a_corrupted_instantiate_record_is_reported(records):
    found = _of(records, "instantiate")
    sized = next(r for r in found if r["action"]["params"].get("gx", 1) > 1)
    wrong_params = copy.deepcopy(sized)
    wrong_params["action"]["params"]["gx"] //= 2
    unknown = copy.deepcopy(sized)
    unknown["action"]["params"]["nope"] = 2
    latency = copy.deepcopy(sized)
    latency["evidence"]["modeled_us"] *= 1.01
    kind = copy.deepcopy(sized)
    kind["evidence"]["kind"] = "measured"
    tiny = copy.deepcopy(sized)                     # a device its blocks do not fit
    tiny["evidence"]["device"]["max_blocks"] = 1
    failures = check_records([wrong_params, unknown, latency, kind, tiny]).failures
    assert [f["id"] for f in failures] == [sized["id"]] * 5
    problems = [f["problem"] for f in failures]
    assert "another program" in problems[0] and "nope" in problems[1]
    assert "the model gives" in problems[2] and "modeled" in problems[3]
    assert "limits" in problems[4]


def test_measure_records_recheck_modeled_latencies_and_label_the_rest(optimized, records):
    measures = _of(records, "measure")
    assert measures and all(r["evidence"]["kind"] == "modeled" for r in measures)
    report = check_records(measures)
    assert report.ok and not report.not_rechecked
    bad = copy.deepcopy(measures[0])
    bad["evidence"]["latency_us"] += 0.5
    (failure,) = check_records([bad]).failures
    assert failure["id"] == bad["id"] and "the model gives" in failure["problem"]
    # a GPU's measurement (made up here: no GPU) is not re-measured, and the report says so
    e = next(e for e in optimized if isinstance(e, Measured))
    gpu = Measured(f"{e.id}+", e.candidate, dict(e.params), 3.25, "measured", e.device)
    measured = [r for r in export([*optimized, gpu], "t").records
                if r["kind"] == "measure" and r["evidence"]["kind"] == "measured"]
    assert len(measured) == 1
    report = check_records(measured)
    assert report.ok and sum(report.not_rechecked.values()) == 1
    assert "not re-measured" in next(iter(report.not_rechecked))
    assert "not_rechecked" in report.to_json()
    for field, value in (("kind", "timed"), ("latency_us", -1.0), ("latency_us", None)):
        wrong = copy.deepcopy(measured[0])
        wrong["evidence"][field] = value
        (failure,) = check_records([wrong]).failures
        assert failure["id"] == wrong["id"]


def test_a_trace_without_instantiation_devices_is_skipped_by_reason(optimized):
    older = [replace(e, device=None) if isinstance(e, Instantiated) else e for e in optimized]
    found = export(older, "old")
    assert not any(r["kind"] == "instantiate" for r in found.records)
    assert found.skipped["instantiation without its device (a trace of an older prism)"] == \
        sum(isinstance(e, Instantiated) for e in optimized)
