"""`prism optimize`: a user's own `@prism.workload` function end to end — the JSON contract, the
files, and `kernel.py` imported in a fresh process under TRITON_INTERPRET=1 against torch — and
clear errors for what cannot be done here."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

from prism.cli import main

USER = textwrap.dedent('''
    import torch
    import prism

    @prism.workload(X=(8, 64), W=(64, 32))
    def relu_proj(X, W):
        """relu(X @ W): a user's own program."""
        return torch.relu(X @ W)
''')
CAPS = ["--max-block-ops", "3", "--grid-dims", "1", "--block-ops", "matmul,relu",
        "--accumulators", "nored", "--max-trials", "2"]


def run_json(capsys, *argv):
    code = main([*argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_a_users_function_is_optimized_and_its_module_runs_in_a_fresh_process(capsys,
                                                                             tmp_path):
    (tmp_path / "mine.py").write_text(USER)
    out = tmp_path / "out"
    db = tmp_path / "db.jsonl"
    code, doc = run_json(capsys, "optimize", f"{tmp_path / 'mine.py'}:relu_proj", *CAPS,
                         "--out", str(out), "--db", str(db), "--budget", "120")
    assert code == 0, doc
    assert doc["target"] == "relu_proj" and doc["device"] == "h100"
    best = doc["best"]
    assert set(best) >= {"latency_us", "latency_kind", "roofline_us", "num_kernels", "verdict",
                         "params"}
    assert best["latency_kind"] == "modeled" and best["verdict"] == "equivalent"
    assert best["num_kernels"] == 1 and best["check"]["passed"]
    assert best["roofline_us"] <= best["latency_us"] < doc["baseline"]["eager_latency_us"]
    for key in ("kernel", "ptx", "trace", "report"):
        assert os.path.exists(doc["files"][key]), key
    # the user's path: import kernel.py with TRITON_INTERPRET=1, CPU tensors in, tensor out
    X, W = torch.randn(8, 64).half(), torch.randn(64, 32).half()
    torch.save((X, W), tmp_path / "inputs.pt")
    script = textwrap.dedent(f'''
        import sys, torch
        sys.path.insert(0, {str(out)!r})
        import kernel
        X, W = torch.load({str(tmp_path / "inputs.pt")!r})
        torch.save(kernel.run(X, W), {str(tmp_path / "got.pt")!r})
    ''')
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    subprocess.run([sys.executable, "-c", script], check=True, env=env, timeout=300)
    got = torch.load(tmp_path / "got.pt")
    want = torch.relu(X.double() @ W.double())
    assert got.dtype == torch.float16 and got.shape == (8, 32)
    assert float((got.double() - want).abs().max() / want.abs().max()) <= 2e-2
    # the table for people
    code = main(["optimize", f"{tmp_path / 'mine.py'}:relu_proj", *CAPS, "--out", str(out),
                 "--db", str(db), "--budget", "120"])
    text = capsys.readouterr().out
    assert code == 0
    assert "roofline bound" in text and "eager" in text and "modeled" in text


def test_more_shapes_are_served_from_the_checkpoint_and_kernel_py_dispatches(capsys,
                                                                            tmp_path):
    """`--also-at`: one search, its checkpoint re-instantiated at each other shape (no search:
    the stop reason says so), every shape proved and checked, and kernel.py, imported in a fresh
    process, runs each shape against torch in float64 and refuses one it does not carry."""
    (tmp_path / "mine.py").write_text(USER)
    out = tmp_path / "out"
    code, doc = run_json(capsys, "optimize", f"{tmp_path / 'mine.py'}:relu_proj", *CAPS,
                         "--out", str(out), "--db", str(tmp_path / "db.jsonl"), "--budget",
                         "120", "--also-at", "X=16x64", "--also-at", "X=4x64,W=64x16")
    assert code == 0, doc
    assert [s["shapes"] for s in doc["shapes"]] == [{"X": [16, 64]}, {"X": [4, 64], "W": [64, 16]}]
    for shaped in doc["shapes"]:
        assert shaped["carried"] and shaped["best"]["verdict"] == "equivalent"
        assert shaped["best"]["check"]["passed"]
    assert os.path.exists(doc["files"]["checkpoint"])
    with gzip.open(doc["files"]["trace"], "rt") as f:       # trace.jsonl.gz
        events = [json.loads(line) for line in f]
    stage = next(e for e in events if e["type"] == "StageFinished" and e["stage"] == "shapes")
    assert len(stage["summary"]["shapes"]) == 2
    shapes = [((8, 64), (64, 32)), ((16, 64), (64, 32)), ((4, 64), (64, 16))]
    torch.manual_seed(3)
    inputs = [tuple(torch.randn(*s).half() for s in pair) for pair in shapes]
    torch.save(inputs, tmp_path / "inputs.pt")
    script = textwrap.dedent(f'''
        import sys, torch
        sys.path.insert(0, {str(out)!r})
        import kernel
        inputs = torch.load({str(tmp_path / "inputs.pt")!r})
        torch.save([kernel.run(X, W) for X, W in inputs], {str(tmp_path / "got.pt")!r})
        try:
            kernel.run(torch.zeros(5, 64).half(), torch.zeros(64, 32).half())
        except ValueError as e:
            print(e)
    ''')
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    ran = subprocess.run([sys.executable, "-c", script], check=True, env=env, timeout=300,
                         capture_output=True, text=True)
    for (X, W), got in zip(inputs, torch.load(tmp_path / "got.pt"), strict=True):
        want = torch.relu(X.double() @ W.double())
        assert got.shape == want.shape
        assert float((got.double() - want).abs().max() / want.abs().max()) <= 2e-2
    assert "(5, 64) (64, 32): this module carries the shapes" in ran.stdout
    # each other shape came from the checkpoint, not a search of its own
    code, again = run_json(capsys, "optimize", f"{tmp_path / 'mine.py'}:relu_proj", *CAPS,
                           "--out", str(tmp_path / "o2"), "--budget", "120", "--shape",
                           "X=16x64", "--checkpoint", doc["files"]["checkpoint"])
    assert code == 0 and again["search"]["stop_reason"] == "checkpoint"
    code, bad = run_json(capsys, "optimize", f"{tmp_path / 'mine.py'}:relu_proj", *CAPS,
                         "--out", str(tmp_path / "o3"), "--also-at", "Y=4x4")
    assert code == 2 and "names Y" in bad["error"]["message"]


def test_what_cannot_be_done_here_is_a_clear_error(capsys, tmp_path):
    code, doc = run_json(capsys, "optimize", "swiglu", "--device", "v100", "--out",
                         str(tmp_path))
    assert code == 2 and "v100" in doc["error"]["message"]
    if not torch.cuda.is_available():
        code, doc = run_json(capsys, "optimize", "swiglu", "--measure", "cuda", "--out",
                             str(tmp_path))
        assert code == 2 and "CUDA GPU" in doc["error"]["message"]
    code, doc = run_json(capsys, "optimize", "nope.py:f", "--out", str(tmp_path))
    assert code == 2 and "no such file" in doc["error"]["message"]


def test_a_check_that_cannot_run_says_not_run_and_is_no_success(capsys, tmp_path, monkeypatch):
    import prism.instantiate.triton_backend as tb

    def missing(*args, **kwargs):       # as where Triton is not installed
        raise ImportError("No module named 'triton'")
    monkeypatch.setattr(tb, "load", missing)
    (tmp_path / "mine.py").write_text(USER)
    argv = ["optimize", f"{tmp_path / 'mine.py'}:relu_proj", *CAPS, "--out",
            str(tmp_path / "out"), "--db", str(tmp_path / "db.jsonl"), "--budget", "120"]
    code, doc = run_json(capsys, *argv)
    check = doc["best"]["check"]
    assert code == 1 and check["status"] == "not run" and check["passed"] is False, check
    assert "ImportError" in check["reason"]
    code = main(argv)
    text = capsys.readouterr().out
    line = next(x for x in text.splitlines() if x.strip().startswith("check:"))
    assert code == 1 and line.strip().startswith("check: not run (the check raised ImportError")
    assert "passed" not in line, line


def test_a_trace_file_that_cannot_be_written_is_an_error(tmp_path):
    """A required trace listener on a full disk stops the run with TraceWriteError; the output
    folder's previous results stay as they were (the run wrote into a fresh folder beside it)."""
    if not os.path.exists("/dev/full"):
        pytest.skip("needs /dev/full (Linux), whose writes fail with ENOSPC")
    from prism.errors import TraceWriteError
    from prism.pipeline import superoptimize
    from prism.targets import resolve
    from prism.trace import JsonlWriter, Tracer
    (tmp_path / "mine.py").write_text(USER)
    out = tmp_path / "out"
    out.mkdir()
    (out / "kernel.py").write_text("# the previous run's kernel\n")
    tracer = Tracer()
    tracer.subscribe(JsonlWriter("/dev/full", fix="choose another --out"), required=True)
    target = resolve(f"{tmp_path / 'mine.py'}:relu_proj")[0]
    with pytest.raises(TraceWriteError) as err:
        superoptimize(target.workload, out=out, tracer=tracer, max_trials=2, budget_s=120,
                      db=None)
    message = str(err.value)
    assert message.startswith("the trace file /dev/full could not be written")
    assert "No space left on device" in message and "--out" in message
    assert sorted(p.name for p in out.iterdir()) == ["kernel.py"]
    assert (out / "kernel.py").read_text() == "# the previous run's kernel\n"
    left = [p.name for p in tmp_path.iterdir() if p.name.startswith("out.")]
    assert len(left) == 1 and left[0].startswith("out.failed-"), left
    assert (tmp_path / left[0] / "trace.jsonl.gz").exists()
