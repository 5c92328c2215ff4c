"""No traceback reaches a user (issue 14, item 5): binary input files, dims too large to
allocate (refused up front with the size), a user module that calls `sys.exit` or raises at
import, a closed pipe, bad command lines, and Python API arguments of the wrong type — each one
line naming the problem and the fix, exit 2 (141 for the pipe), JSON with `--json`."""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from prism.errors import ArgumentTypeError, PrismError, TooLargeError

BINARY = b"\x89PNG\r\n\x1a\n\x00\xff\xfe binary"


def assert_error(run, kind, *words):
    assert run.code == 2, run
    assert run.error["type"] == kind, run.error
    for w in words:
        assert w in run.error["message"], (w, run.error["message"])
    assert "\n" not in run.error["message"]


# -- binary files ----------------------------------------------------------------------------

@pytest.mark.parametrize("argv,kind,words", [
    (("verify", "rmsnorm_matmul", "{bin}"), "GraphFormatError", "not UTF-8 text (binary bytes)"),
    (("verify", "{bin}", "rmsnorm_matmul"), "GraphFormatError", "not UTF-8 text"),
    (("render", "{bin}"), "GraphFormatError", "not UTF-8 text"),
    (("interpret", "{bin}"), "GraphFormatError", "not UTF-8 text"),
    (("import-mirage", "{bin}"), "GraphFormatError", "not UTF-8 text"),
    (("search", "rmsnorm_matmul", "--shape", "X=8x64", "--shape", "W=64x64", "--checkpoint",
      "{bin}"), "CheckpointError", "not UTF-8 text (binary bytes), so not a checkpoint"),
    (("optimize", "{binpy}:f"), "UserModuleError", "null bytes"),
], ids=["verify-candidate", "verify-target", "render", "interpret", "import-mirage",
        "search-checkpoint", "optimize-module"])
def test_a_binary_input_file_is_a_clear_error(cli, tmp_path, argv, kind, words):
    (tmp_path / "x.json").write_bytes(BINARY)
    (tmp_path / "x.py").write_bytes(BINARY)
    args = [a.format(bin=tmp_path / "x.json", binpy=tmp_path / "x.py") for a in argv]
    assert_error(cli(*args, "--json"), kind, words)
    assert (tmp_path / "x.json").read_bytes() == BINARY


# -- sizes too large to allocate -------------------------------------------------------------

HUGE = 2 ** 40


def test_dims_too_large_to_allocate_are_refused_up_front_with_the_size(cli, tmp_path):
    run = cli("search", "rmsnorm_matmul", "--shape", f"X=8x{HUGE}", "--shape", f"W={HUGE}x64",
              "--trace", tmp_path / "t.jsonl", "--json")
    assert_error(run, "TooLargeError", "rmsnorm_matmul: its tensors need 640.0 TiB as float64",
                 f"the largest, W[{HUGE}, 64], 512.0 TiB", "give smaller shapes (--shape)")
    assert list(tmp_path.iterdir()) == []                  # refused before the trace began
    run = cli("optimize", "rmsnorm_matmul", "--shape", f"X=8x{HUGE}", "--shape",
              f"W={HUGE}x64", "--out", tmp_path / "out", "--json")
    assert_error(run, "TooLargeError", "640.0 TiB")
    assert list(tmp_path.iterdir()) == []


def test_a_graph_file_too_large_to_interpret_or_verify_is_refused(cli, tmp_path):
    from prism.frontend.builder import Graph
    from prism.ir.serialize import save
    g = Graph("big")
    X, W = g.input("X", (8, HUGE)), g.input("W", (HUGE, 64))
    g.output(g.matmul(X, W))
    save(g.build(), tmp_path / "big.json")
    for argv in (("interpret", tmp_path / "big.json"),
                 ("verify", tmp_path / "big.json", tmp_path / "big.json")):
        assert_error(cli(*argv, "--json"), "TooLargeError", "big: its tensors need",
                     "more than this machine's")


def test_the_python_api_refuses_a_too_large_program_before_the_search():
    from prism.pipeline import superoptimize
    from prism.workloads import get_workload
    w = get_workload("rmsnorm_matmul").with_shapes(X=(8, HUGE), W=(HUGE, 64))
    with pytest.raises(TooLargeError, match=r"640\.0 TiB"):
        superoptimize(w, db=None)


# -- a user's module -------------------------------------------------------------------------

@pytest.mark.parametrize("source,words", [
    ("import sys\nsys.exit(3)\n", "the module called sys.exit(3) while being imported; keep "
     "script code under `if __name__ == \"__main__\":`"),
    ("import sys\nsys.exit('usage: mine.py N')\n", "called sys.exit('usage: mine.py N')"),
    ("raise RuntimeError('boom')\n", "importing it failed with RuntimeError: boom; fix the "
     "module"),
    ("def f(:\n", "importing it failed with SyntaxError"),
    ("import no_such_module_here\n", "ModuleNotFoundError"),
], ids=["sys.exit(3)", "sys.exit(text)", "raises", "syntax-error", "missing-import"])
def test_a_user_module_that_exits_or_raises_at_import_is_reported_as_such(cli, tmp_path, source,
                                                                          words):
    (tmp_path / "mine.py").write_text(source)
    for command in ("optimize", "search", "interpret"):
        run = cli(command, f"{tmp_path / 'mine.py'}:f", "--json")
        assert_error(run, "UserModuleError", f"{tmp_path / 'mine.py'}: ", words)


def test_a_missing_module_or_function_is_a_clear_error(cli, tmp_path, user_workload):
    assert_error(cli("optimize", f"{tmp_path / 'nope.py'}:f", "--json"), "PrismError",
                 "no such file")
    assert_error(cli("optimize", user_workload.replace("relu_proj", "other"), "--json"),
                 "PrismError", "'other' is not a function decorated with @prism.workload")


# -- the command line ------------------------------------------------------------------------

@pytest.mark.parametrize("argv,words", [
    (("optimize",), "the following arguments are required: target"),
    (("frobnicate",), "invalid choice: 'frobnicate'"),
    (("workloads", "--colour"), "unrecognized arguments: --colour"),
    (("optimize", "rmsnorm_matmul", "--measure", "fast"), "invalid choice: 'fast'"),
    (("search", "rmsnorm_matmul", "--shape", "X=8xy"), "is not NAME=8x1024"),
], ids=["missing-target", "unknown-command", "unknown-option", "bad-choice", "bad-shape"])
def test_a_bad_command_line_is_one_line_and_json_with_json(cli, argv, words):
    run = cli(*argv, "--json")
    assert run.code == 2 and words in run.error["message"], run
    text = cli(*argv)
    assert text.code == 2 and text.out == "" and text.err.startswith("error: ")
    assert text.err.count("\n") == 1 and words in text.err


def test_a_closed_pipe_ends_quietly(prism_process):
    """`prism workloads | head -0`: the reader is gone before prism writes."""
    proc = prism_process("workloads", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()                 # head has read what it wanted and exited
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 141
    assert err == ""                     # no BrokenPipeError, no "Exception ignored"


def test_a_real_pipe_into_head_shows_the_first_lines_and_nothing_else(tmp_path):
    import os
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(f"{sys.executable} -m prism workloads | head -1", shell=True,
                          cwd=root, env={**os.environ, "PYTHONPATH": str(root)},
                          capture_output=True, text=True, timeout=120)
    assert done.stdout.startswith("rmsnorm_matmul") and done.stdout.count("\n") == 1
    assert done.stderr == ""


# -- the Python API ----------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs,words", [
    (dict(budget_s="10"), "budget_s='10' is a str; pass seconds as a number"),
    (dict(search_config={}), "search_config={} is a dict; pass a prism.SearchConfig(...)"),
    (dict(db="results.jsonl"), "db='results.jsonl' is a str; pass a prism.tune.ResultDB"),
    (dict(max_trials=True), "max_trials=True is a bool; pass a positive count"),
    (dict(max_trials=2.0), "max_trials=2.0 is a float"),
    (dict(out=3), "out=3 is a int; pass a folder path"),
    (dict(device=100), "device=100 is a int; pass a device name"),
    (dict(measure=None), "measure=None is a NoneType"),
    (dict(tracer=[]), "tracer=[] is a list; pass a prism.trace.Tracer"),
    (dict(cancel=True), "cancel=True is a bool; pass a threading.Event"),
    (dict(checkpoint=1), "checkpoint=1 is a int"),
], ids=lambda v: next(iter(v)) if isinstance(v, dict) else None)
def test_an_api_argument_of_the_wrong_type_is_a_clear_type_error(tmp_path, kwargs, words):
    from prism.pipeline import superoptimize
    with pytest.raises(ArgumentTypeError) as err:
        superoptimize("rmsnorm_matmul", **{"db": None, **kwargs})
    assert isinstance(err.value, TypeError) and isinstance(err.value, PrismError)
    assert str(err.value).startswith("superoptimize: ") and words in str(err.value)
    assert list(tmp_path.iterdir()) == []


def test_an_api_count_of_zero_is_refused():
    from prism.pipeline import superoptimize
    with pytest.raises(PrismError, match="max_trials is 0; give at least 1"):
        superoptimize("rmsnorm_matmul", max_trials=0, db=None)


def test_interpret_reports_a_nan_output_and_exits_1(tmp_path, cli):
    # ln of standard-normal inputs: NaN where an input is negative, in torch's reference too
    program = tmp_path / "logs.py"
    program.write_text("import torch\nimport prism\n\n\n@prism.workload(X=(4, 8))\n"
                       "def logs(X):\n    return torch.log(X)\n")
    run = cli("interpret", f"{program}:logs")
    assert run.code == 1, run
    assert "nan" not in run.out.replace("NaN", ""), run.out
    assert re.search(r"output 0 holds \d+ NaN\(s\) \(torch's has NaN too\)", run.out), run.out
    run = cli("interpret", f"{program}:logs", "--json")
    assert run.code == 1
    (row,) = json.loads(run.out)["results"]
    assert row["max_rel_err"] is None and row["nan_outputs"][0]["in_torch"]
