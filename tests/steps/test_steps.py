"""Step records (prism.steps): exported from a search's trace, replayed by check-steps.

Oracles: the graphs the trace recorded (each record's state, read back from its text, is the
family's recorded graph), the trace's own counts (one record per family generated and per
prune), and corruption: a record whose state, action or evidence was changed must be reported,
by id, with what fails."""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from pathlib import Path

import pytest

from prism.cli import main
from prism.cost.devices import get_device
from prism.ir.serialize import graph_from_json
from prism.ir.text import from_text
from prism.search.driver import search
from prism.steps import (
    StepError,
    TraceWithoutGraphsError,
    check_records,
    export,
    export_steps,
    rebuild,
    select,
)
from prism.steps.check import GENERATION
from prism.trace import FamilyGenerated, FamilyPruned, Tracer, write_jsonl

_TRACES: dict[tuple[object, ...], tuple] = {}     # one search per setting, per session


@pytest.fixture
def traced(cases):
    """The events of a reduced search (with graphs unless `graphs=False`; `smem`: a device
    this small makes the hardware rule prune, with z3's unsat core)."""
    def run(name: str = "rmsnorm_matmul", graphs: bool = True, smem: int | None = None
            ) -> tuple:
        key = (name, graphs, smem)
        if key not in _TRACES:
            overrides: dict[str, object] = {"record_graphs": graphs}
            if smem is not None:
                overrides["device"] = replace(get_device("h100"), smem_bytes=smem)
            tracer = Tracer()
            search(cases.small(name).graph, cases.reduced(name, **overrides), label=name,
                   tracer=tracer)
            _TRACES[key] = tuple(tracer.events)
        return _TRACES[key]
    return run


@pytest.fixture
def records(traced):
    def run(name: str = "rmsnorm_matmul", **kw: object) -> list[dict]:
        return export(traced(name, **kw), name).records
    return run


def _first(records: list[dict], kind: str, **where: object) -> dict:
    for r in records:
        if r["kind"] == kind and all(r["action"].get(k) == v for k, v in where.items()):
            return copy.deepcopy(r)
    raise AssertionError(f"no {kind} record with {where}")


def test_each_state_reads_back_as_the_recorded_graph(traced, records):
    events = traced("rmsnorm_matmul")
    recorded = {e.id: graph_from_json(e.graph, validate=False) for e in events
                if isinstance(e, FamilyGenerated)}
    records = records()
    generated = [r for r in records if r["kind"] in GENERATION]
    assert len(generated) == len(recorded)          # one record per family, none skipped
    for r in generated:
        assert from_text(r["after"]) == replace(recorded[r["source"]], name="")
        if r["parent"] is not None:
            assert from_text(r["before"]) == replace(recorded[r["parent"]], name="")


def test_one_prune_record_per_prune_with_its_rule_and_evidence(traced, records):
    events = traced("rmsnorm_matmul")
    pruned = {e.id: e for e in events if isinstance(e, FamilyPruned)}
    prunes = [r for r in records() if r["kind"] == "prune"]
    assert sorted(r["source"] for r in prunes) == sorted(pruned)
    for r in prunes:
        e = pruned[r["source"]]
        assert r["after"] is None and r["action"] == {"kind": "prune", "rule": e.rule}
        assert r["evidence"] == {"rule": e.rule, "reason": e.reason, **e.evidence}
        # the rationale quotes the evidence, nothing else
        assert all(r["evidence"][k] == v for k, v in r["rationale"]["because"].items())


def test_every_exported_record_checks(records):
    records = records()
    kinds = {r["kind"] for r in records}
    assert {"open_kernel", "add_op", "close_block", "prune", "prove"} <= kinds
    report = check_records(records)
    assert report.ok, report.failures[:3]
    assert sum(report.checked.values()) == len(records)


def test_a_corrupted_state_after_is_reported(records):
    r = _first(records(), "add_op", op="matmul")
    r["after"] = r["after"].rstrip("\n").rsplit("\n", 1)[0] + "\n"   # the op it made dropped
    (failure,) = check_records([r]).failures
    assert failure["id"] == r["id"] and "another state" in failure["problem"]


def test_a_corrupted_state_before_is_reported(records):
    r = _first(records(), "close_block")
    lines = r["before"].splitlines()
    # a tile's shape changed: no state the search makes has it
    i = next(i for i, line in enumerate(lines) if line.strip().startswith("input X_tile"))
    lines[i] = lines[i].replace("input X_tile [", "input X_tile [2*", 1)
    r["before"] = "\n".join(lines) + "\n"
    (failure,) = check_records([r]).failures
    assert failure["id"] == r["id"]


@pytest.mark.parametrize("field,value", [("op", "div"), ("inputs", ["W_tile", "X_tile"]),
                                         ("output", "matmul9")])
def test_a_corrupted_action_is_reported(records, field, value):
    r = _first(records(), "add_op", op="matmul")
    assert r["action"][field] != value
    r["action"][field] = value
    (failure,) = check_records([r]).failures
    assert failure["id"] == r["id"]


def test_a_close_with_another_grid_count_is_reported(records):
    r = _first(records(), "close_block")
    r["action"]["grid_dims"] += 1
    (failure,) = check_records([r]).failures
    assert "another state" in failure["problem"]


def test_corrupted_prune_evidence_is_reported(records):
    records = records()
    close = _first(records, "prune", rule="cannot_close")
    close["evidence"]["pending"] += 1
    expr = _first(records, "prune", rule="abstract_expression")
    # the target's own expression: a subexpression of the target, so nothing was shown
    expr["evidence"]["expression"] = expr["evidence"]["target"]
    other = _first(records, "prune", rule="abstract_expression")
    other["evidence"]["rule"] = "hardware"
    failures = check_records([close, expr, other]).failures
    assert [f["id"] for f in failures] == [close["id"], expr["id"], other["id"]]
    assert "2 tiles wait" in failures[0]["problem"] or "wait" in failures[0]["problem"]


def test_a_hardware_prune_rechecks_its_unsat_core_with_z3(records):
    records = records(smem=256)
    hardware = [r for r in records if r["kind"] == "prune" and r["action"]["rule"] == "hardware"]
    assert hardware
    assert check_records(hardware).ok
    # the core less the device's shared-memory limit is satisfiable: no longer evidence
    bad = copy.deepcopy(hardware[0])
    core = bad["evidence"]["unsat_core"]
    bad["evidence"]["unsat_core"] = [c for c in core if "smem" not in c]
    assert bad["evidence"]["unsat_core"] != core
    (failure,) = check_records([bad]).failures
    assert "sat" in failure["problem"] or "unsat core" in failure["problem"]


def test_a_corrupted_proof_is_reported(records):
    proves = [r for r in records() if r["kind"] == "prove"]
    r = copy.deepcopy(next(p for p in proves if any(p["evidence"]["proof"])))
    proof = next(p for p in r["evidence"]["proof"] if p)
    assert check_records([r]).ok
    proof[0]["axiom"] = "mul_comm" if proof[0]["axiom"] != "mul_comm" else "add_comm"
    (failure,) = check_records([r]).failures
    assert failure["id"] == r["id"]
    dropped = copy.deepcopy(next(p for p in proves if any(p["evidence"]["proof"])))
    next(p for p in dropped["evidence"]["proof"] if p).pop(0)   # it no longer starts at the
    assert not check_records([dropped]).ok                       # candidate's terms


def test_proofs_of_one_search_must_end_at_the_same_target(records):
    proves = [r for r in records() if r["kind"] == "prove" and any(r["evidence"]["proof"])]
    assert check_records(proves).ok
    # a proof of another program, relabelled as this search's: it ends elsewhere
    alien = copy.deepcopy(_first(records("swiglu"), "prove"))
    alien["search"] = proves[0]["search"]
    assert not check_records([proves[0], alien]).ok


def test_rebuild_refuses_a_graph_that_is_no_search_state(traced):
    events = traced("rmsnorm_matmul")
    g = graph_from_json(next(e for e in events if isinstance(e, FamilyGenerated)
                             and "block op" in e.description).graph, validate=False)
    assert rebuild(g).graph() == replace(g, name="")
    with pytest.raises(StepError, match="open custom kernel"):   # two open blocks
        rebuild(replace(g, ops=(*g.ops, g.ops[-1])))


def test_a_trace_without_graphs_says_how_to_get_them(traced):
    with pytest.raises(TraceWithoutGraphsError, match="--trace-graphs"):
        export(traced("rmsnorm_matmul", graphs=False), "t.jsonl")


def _fake(i: int, group: str, before: str) -> dict:
    return {"id": f"s{i}", "kind": group.split(":")[0], "group": group, "before": before,
            "action": {"kind": group.split(":")[0]}}


def test_near_duplicates_differ_only_in_tensor_numbers():
    records = [_fake(1, "add_op", "exp3 = exp(X_tile)\n"), _fake(2, "add_op",
                                                                  "exp5 = exp(X_tile)\n"),
               _fake(3, "add_op", "exp5 = exp(W_tile)\n")]
    kept, counts = select(records, balance=0)
    assert [r["id"] for r in kept] == ["s1", "s3"]
    assert counts["groups"]["add_op"] == {"exported": 3, "near_duplicates": 1,
                                          "balanced_out": 0, "kept": 2}


def test_balancing_caps_each_group_and_the_counts_add_up():
    def word(i: int) -> str:    # distinct states without digits (digits are numbering)
        return "".join(chr(ord("a") + int(c)) for c in str(i)) + "\n"
    records = [_fake(i, "prune:cannot_close", word(i)) for i in range(300)] + \
        [_fake(300 + i, "open_kernel", "x" + word(i)) for i in range(3)]
    kept, counts = select(records, balance=4.0, floor=10)
    assert counts["cap_per_group"] == 12
    groups = counts["groups"]
    assert groups["prune:cannot_close"]["kept"] == 12 and groups["open_kernel"]["kept"] == 3
    for c in groups.values():
        assert c["exported"] == c["near_duplicates"] + c["balanced_out"] + c["kept"]
    ids = [int(r["id"][1:]) for r in kept if r["group"] == "prune:cannot_close"]
    assert ids[0] == 0 and ids[-1] >= 250       # spread over the whole search, not its start


def test_cli_exports_and_checks(traced, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    trace, steps = tmp_path / "t.jsonl.gz", tmp_path / "steps.jsonl"
    write_jsonl(traced("rmsnorm_matmul"), trace)
    assert main(["export-steps", str(trace), "--out", str(steps), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    lines = steps.read_text().splitlines()
    assert doc["kept"] == len(lines) - 1 and json.loads(lines[0])["summary"]["kept"] == doc["kept"]
    assert sum(doc["by_kind"].values()) == doc["kept"]
    assert main(["check-steps", str(steps)]) == 0
    assert "0 failed" in capsys.readouterr().out
    # one record's action corrupted: exit 1, and the failure names it
    records = [json.loads(line) for line in lines]
    victim = next(r for r in records[1:] if r["kind"] == "add_op")
    victim["action"]["op"] = "div" if victim["action"]["op"] != "div" else "matmul"
    steps.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert main(["check-steps", str(steps), "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["failed"] == 1 and out["failures"][0]["id"] == victim["id"]


def test_cli_export_without_graphs_fails_naming_the_fix(traced, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]):
    trace = tmp_path / "t.jsonl"
    write_jsonl(traced("rmsnorm_matmul", graphs=False), trace)
    assert main(["export-steps", str(trace), "--out", str(tmp_path / "s.jsonl")]) == 2
    assert "--trace-graphs" in capsys.readouterr().err


def test_export_steps_writes_a_summary_with_the_counts(traced, tmp_path: Path):
    trace = tmp_path / "t.jsonl"
    write_jsonl(traced("rmsnorm_matmul"), trace)
    summary = export_steps(trace, tmp_path / "s.jsonl", balance=0, dedupe=False)
    events = traced("rmsnorm_matmul")
    families = sum(isinstance(e, FamilyGenerated) for e in events)
    prunes = sum(isinstance(e, FamilyPruned) for e in events)
    kinds = summary["by_kind"]
    assert kinds["prune"] == prunes
    assert kinds["open_kernel"] + kinds["add_op"] + kinds["close_block"] == families
    assert summary["kept"] == summary["exported"] and not summary["skipped"]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["rmsnorm_mlp", "swiglu", "gated_mlp", "attention",
                                  "qknorm_attention", "gqa", "lora", "ntrans"])
def test_steps_of_every_workload_check(records, cases, name: str):
    tracer = Tracer()
    search(cases.small(name).graph, cases.reduced(name, record_graphs=True, max_families=400),
           label=name, tracer=tracer)
    found = export(tracer.events, name)
    assert found.records and not found.skipped
    kept, _ = select(found.records)
    report = check_records(kept)
    assert report.ok, report.failures[:3]
