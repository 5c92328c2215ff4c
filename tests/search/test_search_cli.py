"""`prism search`: the JSON contract of the issue, the trace, checkpoints, audits, exit codes."""

import json
import re

from prism.cli import main
from prism.ir.serialize import graph_from_json
from prism.search import RULE_NAMES
from prism.trace import read_jsonl

SMALL = ["--shape", "X=8x64", "--shape", "W=64x64", "--max-block-ops", "4", "--grid-dims", "1",
         "--block-ops", "matmul,div,rms_norm"]


def run_json(capsys, *argv):
    code = main([*argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_search_json_trace_and_candidates(capsys, tmp_path):
    trace = tmp_path / "t.jsonl"
    code, doc = run_json(capsys, "search", "rmsnorm_matmul", *SMALL, "--budget", "120",
                         "--trace", str(trace))
    assert code == 0
    assert doc["target"] == "rmsnorm_matmul" and doc["complete"] is True
    assert isinstance(doc["seconds"], float)
    fam = doc["families"]
    assert fam["generated"] == fam["kept"] + sum(fam["pruned"].values())
    assert tuple(fam["pruned"]) == RULE_NAMES and doc["exhaustive"] is True
    verdicts = {c["verdict"] for c in doc["candidates"]}
    assert "equivalent" in verdicts and verdicts <= {"equivalent", "not_equivalent", "unknown"}
    for c in doc["candidates"]:
        assert {"id", "num_kernels", "verdict", "graph"} <= set(c)
        graph = graph_from_json(c["graph"])
        assert graph.num_kernels == c["num_kernels"] == 1
    events = read_jsonl(trace)
    pruned = [e for e in events if e.type == "FamilyPruned"]
    assert len(pruned) == sum(fam["pruned"].values())
    assert all(e.rule and e.reason and e.evidence for e in pruned)


def test_checkpoint_written_then_reused_at_new_shapes(capsys, tmp_path):
    ck = tmp_path / "ck.json"
    code, first = run_json(capsys, "search", "rmsnorm_matmul", *SMALL, "--checkpoint", str(ck))
    assert code == 0 and ck.exists() and first["checkpoint"]["loaded"] is False
    code, again = run_json(capsys, "search", "rmsnorm_matmul", "--shape", "X=16x128",
                           "--shape", "W=128x128", "--checkpoint", str(ck))
    assert code == 0 and again["checkpoint"]["loaded"] is True
    assert again["families"]["generated"] == 0
    assert len(again["candidates"]) == first["verdicts"]["equivalent"]
    graph = graph_from_json(again["candidates"][0]["graph"])
    assert [d.value for d in graph.shape(graph.inputs[0])] == [16, 128]


def test_audit_rule_reports_and_exits_zero_when_sound(capsys):
    code, doc = run_json(capsys, "search", "rmsnorm_matmul", *SMALL, "--audit-rule",
                         "cannot_close")
    assert code == 0 and doc["sound"] is True and doc["pruned"] > 0


def test_empty_result_says_so_and_exits_one(capsys):
    code, doc = run_json(capsys, "search", "swiglu", "--shape", "X=8x64", "--shape",
                         "Wgate=64x64", "--shape", "Wup=64x64", "--max-block-ops", "2",
                         "--grid-dims", "1")
    assert code == 1
    assert all(c["verdict"] != "equivalent" for c in doc["candidates"])
    assert "no candidate was proved equivalent" in doc["message"]
    assert main(["search", "swiglu", "--shape", "X=8x64", "--shape", "Wgate=64x64", "--shape",
                 "Wup=64x64", "--max-block-ops", "2", "--grid-dims", "1"]) == 1
    assert "no candidate was proved equivalent" in capsys.readouterr().out


def test_user_errors(capsys, tmp_path):
    for argv, words in [(["--budget", "0"], "budget"), (["--budget", "-1"], "budget"),
                        (["--shape", "X=8by64"], "name=8x1024"),
                        (["--shape", "Y=8x64"], "parameters x, w"),
                        (["--disable", "magic"], "unknown pruning rule"),
                        (["--audit-rule", "magic"], "unknown pruning rule")]:
        assert main(["search", "rmsnorm_matmul", *argv]) == 2, argv
        err = capsys.readouterr().err.strip()
        assert err.startswith("error: ") and "\n" not in err and words in err.lower(), err
    source = tmp_path / "scaled.py"
    source.write_text("import torch\nimport prism\n\n@prism.workload(X=(4, 32))\n"
                      "def half(X):\n    return X * 0.5\n")
    code, doc = run_json(capsys, "search", f"{source}:half")
    assert code == 2 and "mul_scalar" in doc["error"]["message"]
    assert doc["error"]["type"] == "UnsupportedTargetError"
    # the fix it names works: the vocabulary it gives searches the program
    fix = re.search(r"add mul_scalar to the block vocabulary \(--block-ops ([a-z_,]+), or",
                    doc["error"]["message"])
    assert fix is not None and "prism optimize" in doc["error"]["message"], doc["error"]
    assert main(["search", f"{source}:half", "--block-ops", fix.group(1),
                 "--max-block-ops", "2", "--budget", "60"]) == 0
    assert "c1: equivalent" in capsys.readouterr().out


def test_a_users_own_workload(capsys, tmp_path):
    source = tmp_path / "mine.py"
    source.write_text("import torch\nimport prism\n\n"
                      "@prism.workload(X=(8, 32), W=(32, 32))\n"
                      "def act(X, W):\n"
                      "    return torch.exp(X @ W)\n")
    code, doc = run_json(capsys, "search", f"{source}:act", "--max-block-ops", "3",
                         "--grid-dims", "1", "--block-ops", "matmul,exp")
    assert code == 0 and doc["target"] == "act"
    fused = [c for c in doc["candidates"] if c["verdict"] == "equivalent"
             and c["num_kernels"] == 1]
    assert fused
