"""Ctrl-C keeps the work (issue 14, item 2): a real SIGINT to a real `prism search` or `prism
optimize` stops it as its budget would — the result so far, the checkpoint and the trace are
written (beside the earlier ones, named `.interrupted-`), the run says it was interrupted, and
it exits 130. A second SIGINT stops at once, still keeping the earlier results intact."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from prism.errors import TraceFormatError
from prism.search.checkpoint import load_checkpoint
from prism.trace import CandidateVerified, SearchFinished, read_jsonl

ROOT = Path(__file__).resolve().parents[2]
SMALL = ("--shape", "X=8x64", "--shape", "W=64x64", "--budget", "300")
# a vocabulary wide enough that the search is still going, minutes on, when it is interrupted
WIDE = ("--block-ops", "matmul,div,mul,rms_norm,exp,silu,sqrt,square")


def wait_for_a_candidate(trace: Path, proc: subprocess.Popen[str], seconds: float = 240) -> None:
    """Until the run's (staged) trace holds a verified candidate: interrupt a search that has
    found something and is still going."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the run ended before it was interrupted"
        if trace.exists() and any(isinstance(e, CandidateVerified) for e in _so_far(trace)):
            return
        time.sleep(0.1)
    raise AssertionError(f"no verified candidate in {trace} after {seconds} s")


def _so_far(trace: Path) -> list[Any]:
    """The events a trace being written holds so far (plain or gzip); none while a line is cut."""
    try:
        return read_jsonl(trace)
    except TraceFormatError:
        return []


def test_sigint_stops_a_search_as_a_budget_would_and_keeps_result_checkpoint_and_trace(
        prism_process, tmp_path, siblings):
    trace, checkpoint = tmp_path / "t.jsonl", tmp_path / "ck.json"
    trace.write_text("the earlier trace\n")
    proc = prism_process("search", "rmsnorm_matmul", *SMALL, "--trace", trace, "--checkpoint",
                         checkpoint, "--json", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_for_a_candidate(tmp_path / f"t.jsonl.partial-{proc.pid}", proc)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert err.startswith("interrupted: the search stops now and keeps what it found")
    doc = json.loads(out)
    assert doc["interrupted"] is True and doc["complete"] is False
    assert doc["stop_reason"] == "cancelled"
    found = [c for c in doc["candidates"] if c["verdict"] == "equivalent"]
    assert found                                            # the result so far
    assert trace.read_text() == "the earlier trace\n"       # the earlier trace is intact
    assert not checkpoint.exists()                          # a later run would load it as final
    kept_trace, kept_checkpoint = Path(doc["trace"]), Path(doc["checkpoint"]["path"])
    assert kept_trace.name.startswith("t.jsonl.interrupted-")
    assert kept_checkpoint.name.startswith("ck.json.interrupted-")
    assert sorted(siblings(trace)) == [kept_trace.name]
    events = read_jsonl(kept_trace)
    finished = [e for e in events if isinstance(e, SearchFinished)]
    assert len(finished) == 1 and finished[0].summary["stop_reason"] == "cancelled"
    assert {e.id for e in events if isinstance(e, CandidateVerified)} == {c["id"] for c in found}
    ck = load_checkpoint(kept_checkpoint)
    assert [c[0] for c in ck.candidates] == [c["id"] for c in found]


def test_sigint_stops_optimize_and_writes_what_it_found_beside_the_earlier_results(
        prism_process, tmp_path, earlier, siblings, snapshot):
    out, before = earlier
    proc = prism_process("optimize", "rmsnorm_matmul", *SMALL, *WIDE, "--out", out, "--db",
                         tmp_path / "db.jsonl", "--max-trials", "2", stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    wait_for_a_candidate(out.with_name(f"out.partial-{proc.pid}") / "trace.jsonl.gz", proc)
    proc.send_signal(signal.SIGINT)
    text, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, (text, err)
    assert "interrupted: the search stops now; what it found is tuned, checked and written" in err
    assert snapshot(out) == before                           # the earlier results are intact
    (kept,) = siblings(out)
    assert kept.startswith("out.interrupted-")
    assert text.rstrip().endswith(f"interrupted: the results so far are in {tmp_path / kept}; "
                                  f"{out} is as the previous run left it")
    result = json.loads((tmp_path / kept / "result.json").read_text())
    assert result["interrupted"] is True and result["search"]["stop_reason"] == "cancelled"
    assert result["best"]["verdict"] == "equivalent" and result["best"]["check"]["passed"]
    assert result["files"]["kernel"] == str(tmp_path / kept / "kernel.py")
    assert (tmp_path / kept / "kernel.py").exists()
    events = read_jsonl(tmp_path / kept / "trace.jsonl.gz")
    assert events[-1].type == "StageFinished" and events[-1].stage == "write"


def test_a_second_sigint_stops_at_once_and_still_keeps_the_earlier_results(
        prism_process, tmp_path, earlier, siblings, snapshot):
    out, before = earlier
    proc = prism_process("optimize", "rmsnorm_matmul", *SMALL, *WIDE, "--out", out, "--db",
                         tmp_path / "db.jsonl", "--json", stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    wait_for_a_candidate(out.with_name(f"out.partial-{proc.pid}") / "trace.jsonl.gz", proc)
    proc.send_signal(signal.SIGINT)
    assert proc.stderr is not None      # the first was handled (two at once would be one)
    assert proc.stderr.readline().startswith("interrupted: the search stops now")
    proc.send_signal(signal.SIGINT)     # while it tunes: compiling takes seconds
    text, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err
    doc = json.loads(text)              # JSON on stdout, even so
    if "error" in doc:                  # it stopped at once
        error = doc["error"]
        assert error["type"] == "KeyboardInterrupt" and error["message"].startswith("interrupted")
    else:       # on a loaded machine the work after the first can be done before the second
        assert doc["interrupted"] is True and doc["search"]["stop_reason"] == "cancelled"
    assert snapshot(out) == before
    (kept,) = siblings(out)
    assert kept.startswith("out.interrupted-")
    assert (tmp_path / kept / "trace.jsonl.gz").exists()


def test_a_sigint_during_a_z3_check_reaches_the_handler(tmp_path):
    """z3 catches SIGINT while it checks, unless told not to (`prism.smt` does): a Ctrl-C that
    landed during a hardware or equivalence query was swallowed, and the search went on."""
    script = tmp_path / "z.py"
    script.write_text(
        "import signal, sys\n"
        "from prism import smt\n"
        "got = []\n"
        "signal.signal(signal.SIGINT, lambda *a: got.append(1))\n"
        "z3 = smt._z3()\n"
        "x, y, z = z3.Ints('x y z')\n"
        "s = z3.Solver()\n"
        "s.set('timeout', 4000)\n"
        "s.add(x * x * x + y * y * y == z * z * z, x > 2, y > 2, z > 2)\n"
        "print('ready', flush=True)\n"
        "s.check()\n"
        "print('handled' if got else 'swallowed', flush=True)\n")
    proc = subprocess.Popen([sys.executable, str(script)], cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, text=True,
                            stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    time.sleep(1.0)                     # inside the check (a 4 s timeout)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    assert out == "handled\n"


def test_a_ctrl_c_to_the_process_group_stops_a_search_on_processes_and_keeps_its_work(
        prism_process, tmp_path):
    """A terminal's Ctrl-C reaches every process of the group, the workers too: they leave it
    to the coordinator, which stops the search as at its budget and keeps what was found."""
    trace = tmp_path / "t.jsonl"
    proc = prism_process("search", "rmsnorm_matmul", *SMALL, *WIDE, "--executor", "processes",
                         "--workers", "2", "--trace", trace, "--json", stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, start_new_session=True)
    wait_for_a_candidate(tmp_path / f"t.jsonl.partial-{proc.pid}", proc)
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    doc = json.loads(out)
    assert doc["stop_reason"] == "cancelled" and doc["executor"]["name"] == "processes"
    assert [c for c in doc["candidates"] if c["verdict"] == "equivalent"]
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
