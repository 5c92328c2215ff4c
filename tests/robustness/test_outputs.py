"""Output folders are written whole or not at all (issue 14, item 1): a run writes into a fresh
folder beside `--out` and renames it into place when it finishes; one that fails leaves the
earlier results untouched and its own partial results in `OUT.failed-<time>`; a lock refuses a
second concurrent run into the same folder, and a lock left by a killed run is taken over (the
run says so)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

from prism.trace import SearchFinished, read_jsonl

SMALL = ("--shape", "X=8x64", "--shape", "W=64x64")


def test_a_finished_run_replaces_the_earlier_results_whole(caps, cli, tmp_path, user_workload,
                                                           earlier, siblings, snapshot):
    out, before = earlier
    (out / "stale.txt").write_text("from a run of another program\n")
    run = cli("optimize", user_workload, *caps, "--out", out, "--db", tmp_path / "db.jsonl",
              "--json")
    assert run.code == 0, run.out
    assert sorted(os.listdir(out)) == ["kernel.ptx", "kernel.py", "report.html", "result.json",
                                       "trace.jsonl.gz"]                 # nothing of the old run
    assert run.doc["files"]["kernel"] == str(out / "kernel.py")
    assert json.loads((out / "result.json").read_text())["files"] == run.doc["files"]
    assert (out / "kernel.py").read_bytes() != before["kernel.py"]
    assert any(isinstance(e, SearchFinished) for e in read_jsonl(out / "trace.jsonl.gz"))
    assert siblings(out) == []                                        # no staging, no lock


def test_a_typo_in_the_target_leaves_the_earlier_results(cli, tmp_path, earlier, siblings,
                                                         snapshot):
    out, before = earlier
    run = cli("optimize", "rmsnorm_matmull", "--out", out, "--db", tmp_path / "db.jsonl",
              "--json")
    assert run.code == 2 and run.error["type"] == "UnknownWorkloadError"
    assert "rmsnorm_matmull" in run.error["message"]
    assert snapshot(out) == before and siblings(out) == []


def test_a_run_that_fails_midway_keeps_its_partial_results_beside_the_earlier_ones(
        caps, cli, tmp_path, user_workload, earlier, siblings, snapshot):
    out, before = earlier
    damaged = tmp_path / "damaged.json"     # fails inside the search stage, after the trace began
    damaged.write_text('{"format": "prism.search_checkpoint", "version": 1}')
    run = cli("optimize", user_workload, *caps, "--out", out, "--db", tmp_path / "db.jsonl",
              "--checkpoint", damaged, "--json")
    assert run.code == 2 and run.error["type"] == "CheckpointError"
    assert "damaged checkpoint" in run.error["message"]
    assert snapshot(out) == before
    (failed,) = siblings(out)
    assert failed.startswith("out.failed-")
    events = read_jsonl(tmp_path / failed / "trace.jsonl.gz")
    assert events[-1].type == "StageFinished" and "CheckpointError" in events[-1].error
    assert not (tmp_path / failed / "result.json").exists()


def test_check_and_import_mirage_write_their_folders_whole(cli, tmp_path, corpus_dir, earlier,
                                                           siblings, snapshot):
    out, before = earlier
    run = cli("import-mirage", corpus_dir / "lora.json", "--index", "7", "--out", out, "--json")
    assert run.code == 2 and "--index must be in 0.." in run.error["message"]
    assert snapshot(out) == before and siblings(out) == []
    run = cli("check", "no_such_workload", "--out", out, "--json")
    assert run.code == 2 and run.error["type"] == "UnknownWorkloadError"
    assert snapshot(out) == before
    (failed,) = siblings(out)           # `check` had begun its trace: kept, beside
    assert failed.startswith("out.failed-") and (tmp_path / failed / "trace.jsonl").exists()
    run = cli("import-mirage", corpus_dir / "lora.json", "--out", out, "--json")
    assert run.code == 0
    assert sorted(os.listdir(out)) == [f"lora.{i}.json" for i in range(len(run.doc["graphs"]))]
    assert siblings(out) == [failed]


def test_a_search_that_fails_keeps_the_earlier_trace(cli, tmp_path, siblings):
    trace = tmp_path / "t.jsonl"
    trace.write_text("the earlier trace\n")
    damaged = tmp_path / "damaged.json"
    damaged.write_text('{"format": "prism.search_checkpoint", "version": 1}')
    run = cli("search", "rmsnorm_matmul", *SMALL, "--trace", trace, "--checkpoint", damaged,
              "--json")
    assert run.code == 2 and run.error["type"] == "CheckpointError"
    assert trace.read_text() == "the earlier trace\n"
    (failed,) = siblings(trace)
    assert failed.startswith("t.jsonl.failed-")
    assert read_jsonl(tmp_path / failed) == []      # the run failed before its first event


# -- the lock --------------------------------------------------------------------------------

def write_lock(out, pid):
    out.with_name(f"{out.name}.lock").write_text(f"{pid}\n{socket.gethostname()}\n")


def test_a_second_run_into_a_folder_being_written_is_refused(cli, tmp_path, earlier, siblings,
                                                             snapshot):
    out, before = earlier
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        write_lock(out, holder.pid)
        run = cli("optimize", "rmsnorm_matmul", *SMALL, "--out", out, "--db",
                  tmp_path / "db.jsonl", "--json")
        assert run.code == 2 and run.error["type"] == "OutputLockedError"
        assert run.error["message"] == (
            f"--out {out}: another prism run (pid {holder.pid}) is writing into it (lock "
            f"{out}.lock); wait for it to finish or choose another --out")
        assert snapshot(out) == before and siblings(out) == ["out.lock"]   # its lock stays
    finally:
        holder.kill()
        holder.wait()


def test_a_lock_left_by_a_dead_run_is_taken_over_and_the_run_says_so(caps, cli, tmp_path,
                                                                     user_workload, earlier,
                                                                     siblings):
    out, _ = earlier
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()                                       # its pid is free: no process has it
    write_lock(out, dead.pid)
    run = cli("optimize", user_workload, *caps, "--out", out, "--db", tmp_path / "db.jsonl")
    assert run.code == 0, run.err
    note = (f"note: took over the lock {out}.lock of pid {dead.pid}, which is no longer running "
            f"(an earlier run into {out} was killed)")
    assert note in run.out
    assert siblings(out) == [] and (out / "kernel.py").exists()


def test_two_real_runs_into_one_folder_one_is_refused_and_the_trace_stays_readable(
        caps, prism_process, tmp_path, user_workload, earlier, siblings):
    out, _ = earlier
    argv = ("optimize", user_workload, *caps, "--out", out, "--db", tmp_path / "db.jsonl",
            "--json")
    first = prism_process(*argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    lock = out.with_name("out.lock")
    for _ in range(600):                 # until the first run holds the folder
        if lock.exists():
            break
        time.sleep(0.05)
    second = prism_process(*argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out2, _ = second.communicate(timeout=300)
    _, err1 = first.communicate(timeout=300)
    assert second.returncode == 2
    assert json.loads(out2)["error"]["message"].startswith(
        f"--out {out}: another prism run (pid {first.pid}) is writing into it")
    assert first.returncode == 0, err1
    events = read_jsonl(out / "trace.jsonl.gz")            # one run's events, in order
    assert [e.seq for e in events] == list(range(len(events)))
    assert any(isinstance(e, SearchFinished) for e in events)
    assert siblings(out) == []


def test_a_run_killed_with_sigkill_leaves_the_earlier_results_and_the_next_run_recovers(
        prism_process, tmp_path, earlier, siblings, snapshot):
    out, before = earlier
    run = prism_process("optimize", "rmsnorm_matmul", *SMALL, "--out", out, "--db",
                        tmp_path / "db.jsonl", "--budget", "300", stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL)
    partial = out.with_name(f"out.partial-{run.pid}")
    for _ in range(1200):                # until its search has written some of its trace
        if (partial / "trace.jsonl.gz").exists() and (partial / "trace.jsonl.gz").stat().st_size:
            break
        time.sleep(0.05)
    os.kill(run.pid, signal.SIGKILL)
    run.wait()
    assert snapshot(out) == before
    assert siblings(out) == ["out.lock", f"out.partial-{run.pid}"]
    from prism.outputs import OutputFolder
    folder = OutputFolder(out)               # the next run into the folder
    assert folder.notes == [f"took over the lock {out}.lock of pid {run.pid}, which is no longer "
                            f"running (an earlier run into {out} was killed); its partial "
                            f"results are in {partial}"]
    (folder.staging / "kernel.py").write_text("# the new run's kernel\n")
    assert folder.finish() == out
    assert snapshot(out) == {"kernel.py": b"# the new run's kernel\n"}
    assert siblings(out) == [f"out.partial-{run.pid}"]      # the killed run's, for its owner
