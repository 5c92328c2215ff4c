"""Trace files kept small (issue 20, item 6): a line leaves out the seq the previous line
implies, an output folder's trace is gzip (`TRACE_FILE`), a compressed trace still being
written reads up to its last whole line, and `prism optimize --trace F.jsonl` also writes the
run's events as plain text. The oracles are the tracer's own events and the raw JSON lines."""

from __future__ import annotations

import gzip
import json
import zlib
from pathlib import Path

from prism.cli import main
from prism.trace import (
    TRACE_FILE,
    FamilyGenerated,
    FamilyPruned,
    JsonlWriter,
    StageStarted,
    Tracer,
    read_jsonl,
    write_jsonl,
)

CAPS = ["--shape", "X=8x64", "--shape", "W=64x64", "--max-block-ops", "3", "--grid-dims", "1",
        "--block-ops", "matmul,rms_norm", "--accumulators", "nored", "--max-trials", "1",
        "--budget", "60"]


def _families(n: int) -> list[FamilyGenerated | FamilyPruned]:
    out: list[FamilyGenerated | FamilyPruned] = []
    for i in range(n):
        out.append(FamilyGenerated(f"f{i}", None, "custom kernel on X"))
        out.append(FamilyPruned(f"f{i}", None, "structural", "too many ops"))
    return out


def test_a_line_leaves_out_the_seq_its_predecessor_implies_and_reading_restores_it(
        tmp_path: Path) -> None:
    tracer = Tracer()
    path = tmp_path / "t.jsonl"
    with JsonlWriter(path) as writer:
        tracer.emit(StageStarted("before the file"))      # seq 0 never reaches the file
        tracer.subscribe(writer)
        for e in _families(50):
            tracer.emit(e)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines[0]["seq"] == 1                            # the first line says where it starts
    assert all("seq" not in line for line in lines[1:])
    assert read_jsonl(path) == tracer.events[1:]           # seq 1..100, as stamped


def test_unstamped_and_non_contiguous_seqs_are_written_out(tmp_path: Path) -> None:
    events = [StageStarted("a"), StageStarted("b"),                      # -1, -1: unstamped
              StageStarted("c", seq=4), StageStarted("d", seq=9), StageStarted("e", seq=10)]
    write_jsonl(events, tmp_path / "t.jsonl")
    lines = [json.loads(line) for line in (tmp_path / "t.jsonl").read_text().splitlines()]
    assert [line.get("seq") for line in lines] == [-1, -1, 4, 9, None]
    assert read_jsonl(tmp_path / "t.jsonl") == events


def test_a_hand_written_file_without_seqs_reads_as_unstamped(tmp_path: Path) -> None:
    (tmp_path / "t.jsonl").write_text('{"type": "StageStarted", "stage": "a"}\n'
                                      '{"type": "StageStarted", "stage": "b"}\n')
    assert [e.seq for e in read_jsonl(tmp_path / "t.jsonl")] == [-1, -1]


def test_a_live_gz_trace_cut_inside_a_line_reads_its_whole_lines(tmp_path: Path) -> None:
    events = [StageStarted(f"s{i}", seq=i) for i in range(3)]
    text = "".join(json.dumps({"type": "StageStarted", "seq": e.seq, "stage": e.stage}) + "\n"
                   for e in events)
    packer = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    cut = len(text) - 10                                   # inside the last line
    data = packer.compress(text[:cut].encode()) + packer.flush(zlib.Z_SYNC_FLUSH)  # no trailer
    (tmp_path / "live.jsonl.gz").write_bytes(data)
    assert read_jsonl(tmp_path / "live.jsonl.gz") == events[:2]


def test_a_staged_writer_compresses_when_the_name_shown_ends_in_gz(tmp_path: Path) -> None:
    staged = tmp_path / "trace.jsonl.gz.partial-1"          # how `OutputFile` stages it
    tracer = Tracer()
    with JsonlWriter(staged, shown=tmp_path / "trace.jsonl.gz") as writer:
        tracer.subscribe(writer)
        for e in _families(5):
            tracer.emit(e)
    assert staged.read_bytes()[:2] == b"\x1f\x8b"
    assert read_jsonl(staged) == tracer.events


def test_optimize_writes_its_trace_compressed_and_a_plain_copy_on_request(
        tmp_path: Path, capsys) -> None:
    out, copy = tmp_path / "out", tmp_path / "plain.jsonl"
    code = main(["optimize", "rmsnorm_matmul", *CAPS, "--out", str(out), "--trace", str(copy),
                 "--db", str(tmp_path / "db.jsonl"), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0, doc
    packed = out / TRACE_FILE
    assert TRACE_FILE.endswith(".gz") and doc["files"]["trace"] == str(packed)
    assert doc["files"]["trace_copy"] == str(copy)
    assert packed.read_bytes()[:2] == b"\x1f\x8b"
    text = copy.read_text()                                # plain: every line a JSON object
    assert gzip.decompress(packed.read_bytes()).decode() == text
    events = read_jsonl(copy)
    assert events == read_jsonl(packed)
    assert [e.seq for e in events] == list(range(len(events)))
    assert events[-1].type == "StageFinished" and events[-1].stage == "write"
