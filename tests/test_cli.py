"""The `prism` command: every --json command prints exactly one JSON document; every user error
is one line naming the problem and the fix, with exit status 2 and no traceback."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from prism.cli import main

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "external" / "mirage_mugraphs"


def run_json(capsys, *argv):
    code = main([*argv, "--json"])
    out = capsys.readouterr().out
    return code, json.loads(out)  # exactly one JSON document, nothing else on stdout


def test_workloads_json_lists_the_nine(capsys):
    code, doc = run_json(capsys, "workloads")
    assert code == 0
    names = [w["name"] for w in doc["workloads"]]
    assert names == ["rmsnorm_matmul", "rmsnorm_mlp", "swiglu", "attention", "qknorm_attention",
                     "gated_mlp", "lora", "gqa", "ntrans"]
    assert doc["workloads"][0]["params"] == {"X": [8, 1024], "W": [1024, 1024]}
    assert [w["name"] for w in doc["variants"]] == ["attention_safe", "qknorm_attention_safe",
                                                    "gqa_safe"]
    assert doc["variants"][0]["params"] == {"Q": [2, 8, 128], "K": [2, 8192, 128],
                                            "V": [2, 8192, 128]}


@pytest.mark.skipif(not CORPUS.is_dir(), reason="external Mirage corpus not present")
def test_import_mirage_json_prints_our_graphs(capsys, tmp_path):
    code, doc = run_json(capsys, "import-mirage", str(CORPUS / "lora.json"), "--out",
                         str(tmp_path))
    assert code == 0 and len(doc["graphs"]) == 4
    assert all(g["format"] == "prism.kernel_graph" for g in doc["graphs"])
    # the saved files load back to the same graphs
    from prism.ir.serialize import graph_from_json, load
    for i, g in enumerate(doc["graphs"]):
        assert load(tmp_path / f"lora.{i}.json") == graph_from_json(g)


def test_render_writes_svg_with_block_cluster(capsys, tmp_path):
    svg = tmp_path / "fused.svg"
    code, doc = run_json(capsys, "render", "rmsnorm_matmul", "--known-best", "-o", str(svg))
    assert code == 0 and doc["files"] == [str(svg)]
    text = svg.read_text()
    assert "grid (16), forloop range 16" in text and "omap x→1" in text


def test_interpret_compares_with_torch(capsys):
    code, doc = run_json(capsys, "interpret", "rmsnorm_matmul", "--known-best")
    assert code == 0
    (row,) = doc["results"]
    assert row["num_custom_kernels"] == 1 and row["max_rel_err"] < 1e-9


def test_check_writes_report_trace_and_svgs(capsys, tmp_path):
    code, doc = run_json(capsys, "check", "rmsnorm_matmul", "--out", str(tmp_path))
    assert code == 0
    assert [r["label"] for r in doc["graphs"]] == ["rmsnorm_matmul (traced)",
                                                  "rmsnorm_matmul (hand-fused)"]
    assert all(r["max_rel_err"] < 1e-9 for r in doc["graphs"])
    assert all(Path(r["svg"]).is_file() for r in doc["graphs"])
    stages = [json.loads(line)["stage"] for line in
              (tmp_path / "trace.jsonl").read_text().splitlines()]
    assert stages[:2] == ["workloads", "workloads"] and "render" in stages


@pytest.mark.parametrize(("argv", "words"), [
    (["render", "no_such_workload"], "unknown workload"),
    (["render", "missing.json"], "no such file"),
    (["interpret", "rmsnorm_matmul", "--index", "3"], "--index"),
])
def test_user_errors_are_one_line(capsys, argv, words):
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    err = captured.err.strip()
    assert err.startswith("error: ") and "\n" not in err and words in err.lower()


def test_errors_with_json_are_a_json_document(capsys, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "prism.kernel_graph", "ops": [')
    code, doc = run_json(capsys, "render", str(bad))
    assert code == 2
    assert doc["error"]["type"] == "GraphFormatError" and "truncated" in doc["error"]["message"]


def test_module_entry_point():
    out = subprocess.run([sys.executable, "-m", "prism", "workloads", "--json"],
                         capture_output=True, text=True, check=True)
    assert len(json.loads(out.stdout)["workloads"]) == 9


def test_a_users_own_workload_file(capsys, tmp_path):
    source = tmp_path / "mine.py"
    source.write_text(
        "import torch\nimport prism\n\n"
        "@prism.workload(X=(4, 32), W=(32, 16))\n"
        "def scaled(X, W):\n"
        "    return torch.nn.functional.silu(X @ W) * 0.5\n")
    code, doc = run_json(capsys, "interpret", f"{source}:scaled")
    assert code == 0
    (row,) = doc["results"]
    assert row["label"] == "scaled" and row["max_rel_err"] < 1e-12
    assert main(["interpret", f"{source}:missing"]) == 2
    assert "not a function decorated with @prism.workload" in capsys.readouterr().err
