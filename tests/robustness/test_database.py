"""The result database checks what it reads (issue 14, item 3): each bad record — an edited
number, a wrong kind, a modeled latency below its roofline bound, binary bytes, a cut-off line —
is skipped and reported with its line and reason; a real run's own records all pass; a run over
an edited database uses none of the bad records and says so (a note, and a count on the
report); appends never swallow a record."""

from __future__ import annotations

import html
import json
import math

import pytest

from prism.tune import ResultDB
from prism.tune.database import result_key

GOOD = {"config": "c1[gx=2]", "latency_us": 5.0, "kind": "modeled", "error": None,
        "roofline_us": 4.0}


def line(**fields):
    rec = {"key": result_key(n=json.dumps(fields, sort_keys=True)), **GOOD, **fields}
    return json.dumps(rec)


BAD = {
    "negative latency": (line(latency_us=-100.0), "latency -100.0 µs is not a finite positive"),
    "zero latency": (line(latency_us=0.0), "latency 0.0 µs is not a finite positive"),
    "nan latency": (line(latency_us=math.nan), "latency nan µs is not a finite positive"),
    "inf without an error": (line(latency_us=math.inf), "latency inf µs is not a finite"),
    "latency as text": (line(latency_us="5"), "latency '5' is not a number"),
    "latency as a bool": (line(latency_us=True), "latency True is not a number"),
    "unknown kind": (line(kind="guessed"), "kind 'guessed' is not one of measured"),
    "below the roofline": (line(latency_us=2.0), "modeled latency 2 µs is below its roofline "
                           "bound 4 µs"),
    "modeled with no bound": (line(roofline_us=None), "without the roofline bound"),
    "a bound that is not positive": (line(roofline_us=-1.0), "roofline bound -1.0 is not"),
    "a failure with a latency": (line(error="boom"), "a failed measurement (boom) with a "
                                 "latency of 5.0 µs instead of inf"),
    "an error that is not text": (line(error=3, latency_us=math.inf), "its error is not text"),
    "a key that is not a digest": (json.dumps({"key": "abc", **GOOD}), "not a SHA-256"),
    "no config": (line(config=None), "its config is not a name"),
    "not an object": ("[1, 2, 3]", "not a JSON object but list"),
    "cut-off line": (line()[:40], "not valid JSON (a cut-off or edited line)"),
    "binary bytes": ("\udcff\udcfe\x00PNG", "not UTF-8 text (binary bytes)"),
}


@pytest.mark.parametrize("name", list(BAD))
def test_a_bad_record_is_skipped_and_reported_with_its_line(tmp_path, name):
    bad, reason = BAD[name]
    first, last = line(config="first"), line(config="last")
    db = tmp_path / "db.jsonl"
    db.write_bytes(b"\n".join(t.encode("utf-8", "surrogateescape") for t in (first, bad, last))
                   + b"\n")
    loaded = ResultDB(db)
    assert len(loaded) == 2                                # the good ones on either side
    assert {loaded.get(json.loads(t)["key"])["config"] for t in (first, last)} == {"first",
                                                                                    "last"}
    (skipped,) = loaded.bad
    assert skipped.line == 2 and reason in skipped.reason, skipped
    assert loaded.damaged == 1 and loaded.summary()["skipped"] == 1
    (note,) = loaded.notes()
    assert note.startswith(f"the result database {db}: 1 bad record(s) skipped")
    assert f"line 2: {skipped.reason}" in note


def test_a_failed_measurement_is_a_good_record(tmp_path):
    db = tmp_path / "db.jsonl"
    db.write_text(line(error="CompileError: out of registers", latency_us=math.inf) + "\n")
    assert len(ResultDB(db)) == 1 and ResultDB(db).bad == []


def test_an_append_after_a_cut_off_line_starts_a_line_of_its_own(tmp_path):
    db = tmp_path / "db.jsonl"
    db.write_text(line(config="whole") + "\n" + line(config="cut")[:50])   # a crash mid-write
    key = result_key(n="new")
    ResultDB(db).put(key, GOOD)
    again = ResultDB(db)
    assert again.get(key) == {"key": key, **GOOD}           # not swallowed by the cut-off line
    assert len(again) == 2 and [b.line for b in again.bad] == [2]
    assert db.read_text().count("\n") == 3 and db.read_text().endswith("\n")


def test_an_unwritable_database_never_loses_a_measurement(tmp_path):
    db = ResultDB(tmp_path / "db.jsonl")
    (tmp_path / "db.jsonl").mkdir()                   # a folder took its place
    key = result_key(n="kept")
    db.put(key, GOOD)
    assert db.get(key)["latency_us"] == 5.0           # kept in memory, and said so
    (note,) = db.notes()
    assert "1 record(s) could not be written (Is a directory); the run kept them" in note


# -- through a real run ----------------------------------------------------------------------

def run_twice(cli, tmp_path, user_workload, caps, edit):
    """optimize, edit the database it wrote, optimize again into another folder."""
    db = tmp_path / "db.jsonl"
    first = cli("optimize", user_workload, *caps, "--out", tmp_path / "one", "--db", db,
                "--json")
    assert first.code == 0
    records = [json.loads(t) for t in db.read_text().splitlines()]
    assert records and ResultDB(db).bad == []          # a real run's records all pass
    assert all(r["latency_us"] >= r["roofline_us"] for r in records if r["error"] is None)
    edit(db, records)
    second = cli("optimize", user_workload, *caps, "--out", tmp_path / "two", "--db", db,
                 "--json")
    assert second.code == 0
    return first.doc, second.doc


def rewrite(db, records):
    db.write_text("".join(json.dumps(r) + "\n" for r in records))


@pytest.mark.parametrize("edit,reason", [
    (dict(latency_us=-100.0), "latency -100.0 µs is not a finite positive number"),
    (dict(latency_us=1e-3), "is below its roofline bound"),
    (dict(kind="measured", latency_us=1e-3), "a 'measured' record under a key of the 'modeled' "
     "backend"),
], ids=["negative", "below-roofline", "measured-as-modeled"])
def test_an_edited_record_is_not_used_and_the_run_says_so(cli, tmp_path, user_workload, caps,
                                                          edit, reason):
    def apply(db, records):
        best = next(r for r in records if r["error"] is None)
        best.update(edit)
        rewrite(db, records)
    first, second = run_twice(cli, tmp_path, user_workload, caps, apply)
    assert second["best"]["latency_us"] == first["best"]["latency_us"] > 0   # the model's own
    assert any(reason in n and "bad record(s) skipped" in n for n in second["notes"])
    saved = json.loads((tmp_path / "two" / "result.json").read_text())
    assert saved["notes"] == second["notes"]
    page = (tmp_path / "two" / "report.html").read_text()
    assert "<b>1 bad record(s) skipped</b>" in page and html.escape(reason) in page


def test_binary_bytes_in_the_database_are_a_bad_record_not_a_traceback(cli, tmp_path,
                                                                        user_workload, caps):
    def apply(db, records):
        with db.open("ab") as f:
            f.write(b"\x00\xff\xfe\x89PNG\r\n\x1a\n")
    _, second = run_twice(cli, tmp_path, user_workload, caps, apply)
    assert any("not UTF-8 text (binary bytes)" in n for n in second["notes"])
