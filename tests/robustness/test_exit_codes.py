"""Exit codes that mean what they say (issue 14, item 4): `verify` exits 0 only for
`equivalent` (1 not_equivalent, 3 unknown, 4 invalid), so `prism verify T C && deploy` never
deploys a refuted candidate; every numeric option is validated (positive, finite, integers where
counts) with one line naming the option, exit 2, and JSON with `--json`; the README's command
table documents the codes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from prism.ir.serialize import save
from prism.verify.mutate import mutants
from prism.workloads.known_best import known_best

ROOT = Path(__file__).resolve().parents[2]
SHAPES = {"X": (8, 64), "W": (64, 64)}


@pytest.fixture
def fused(tmp_path):
    graph = known_best("rmsnorm_matmul", SHAPES)
    save(graph, tmp_path / "fused.json")
    return graph, tmp_path / "fused.json"


def test_verify_exits_0_only_for_equivalent(cli, fused, tmp_path):
    graph, path = fused
    run = cli("verify", "rmsnorm_matmul", path, "--json")
    assert run.code == 0 and run.doc["results"][0]["verdict"] == "equivalent"

    wrong = next(m for m in mutants(graph) if m.kind == "swap-operands")
    save(wrong.graph, tmp_path / "wrong.json")
    run = cli("verify", "rmsnorm_matmul", tmp_path / "wrong.json", "--json")
    assert run.code == 1 and run.doc["results"][0]["verdict"] == "not_equivalent"

    run = cli("verify", "rmsnorm_matmul", path, "--iterations", "1", "--nodes", "1", "--json")
    assert run.code == 3 and run.doc["results"][0]["verdict"] == "unknown"

    doc = graph.to_json()
    doc["tensors"]["custom"] = [8, 32]                 # a shape the graph's ops contradict
    (tmp_path / "bad.json").write_text(json.dumps(doc))
    run = cli("verify", "rmsnorm_matmul", tmp_path / "bad.json", "--json")
    assert run.code == 4 and run.doc["results"][0]["verdict"] == "invalid"
    run = cli("verify", "rmsnorm_matmul", tmp_path / "bad.json")         # the same as text
    assert run.code == 4 and ": invalid (" in run.out


def test_a_file_of_several_candidates_exits_with_its_strongest_finding():
    """A refutation outranks an invalid candidate, which outranks an undecided one; 0 only
    when every candidate is proved."""
    from prism.cli import _verify_code
    assert _verify_code(["equivalent", "equivalent"]) == 0
    assert _verify_code(["equivalent", "unknown"]) == 3
    assert _verify_code(["unknown", "invalid", "equivalent"]) == 4
    assert _verify_code(["invalid", "not_equivalent", "unknown"]) == 1


NUMERIC = [
    # (command line, the option, what the message says)
    (("optimize", "rmsnorm_matmul", "--max-trials", "0"), "--max-trials", "'0' is not a positive "
     "integer"),
    (("optimize", "rmsnorm_matmul", "--max-trials", "-3"), "--max-trials", "not a positive"),
    (("optimize", "rmsnorm_matmul", "--max-trials", "2.5"), "--max-trials", "not a positive"),
    (("optimize", "rmsnorm_matmul", "--budget", "nan"), "--budget", "not a positive finite"),
    (("optimize", "rmsnorm_matmul", "--budget", "inf"), "--budget", "not a positive finite"),
    (("optimize", "rmsnorm_matmul", "--budget", "-1"), "--budget", "not a positive finite"),
    (("optimize", "rmsnorm_matmul", "--budget", "0"), "--budget", "not a positive finite"),
    (("search", "rmsnorm_matmul", "--budget", "ten"), "--budget", "not a positive finite"),
    (("verify", "rmsnorm_matmul", "rmsnorm_matmul", "--nodes", "0"), "--nodes", "'0' is not a "
     "positive integer"),
    (("verify", "rmsnorm_matmul", "rmsnorm_matmul", "--iterations", "-5"), "--iterations",
     "not a positive integer"),
    (("verify", "rmsnorm_matmul", "rmsnorm_matmul", "--time-limit", "-1"), "--time-limit",
     "not a positive finite number of seconds"),
    (("verify", "rmsnorm_matmul", "rmsnorm_matmul", "--time-limit", "nan"), "--time-limit",
     "not a positive finite"),
    (("verify", "rmsnorm_matmul", "rmsnorm_matmul", "--index", "-1"), "--index",
     "not an integer ≥ 0"),
    (("search", "rmsnorm_matmul", "--max-block-ops", "0"), "--max-block-ops", "not a positive"),
    (("search", "rmsnorm_matmul", "--max-kernel-ops", "-1"), "--max-kernel-ops",
     "not a positive"),
    (("search", "rmsnorm_matmul", "--max-accumulators", "x"), "--max-accumulators",
     "not a positive"),
    (("search", "rmsnorm_matmul", "--max-block-inputs", "0"), "--max-block-inputs",
     "not a positive"),
    (("search", "rmsnorm_matmul", "--max-custom-kernels", "0"), "--max-custom-kernels",
     "not a positive"),
    (("search", "rmsnorm_matmul", "--max-families", "0"), "--max-families", "not a positive"),
    (("search", "rmsnorm_matmul", "--seed", "-2"), "--seed", "not an integer ≥ 0"),
    (("search", "rmsnorm_matmul", "--grid-dims", "1,x"), "--grid-dims", "'1,x' is not grid-dim "
     "counts from 1, 2, 3"),
    (("search", "rmsnorm_matmul", "--grid-dims", "4"), "--grid-dims", "is not grid-dim counts"),
    (("interpret", "rmsnorm_matmul", "--seed", "-1"), "--seed", "not an integer ≥ 0"),
    (("render", "rmsnorm_matmul", "--index", "x"), "--index", "not an integer ≥ 0"),
    (("import-mirage", "x.json", "--index", "-4"), "--index", "not an integer ≥ 0"),
    (("check", "--seed", "1.5"), "--seed", "not an integer ≥ 0"),
]


@pytest.mark.parametrize("argv,option,words", NUMERIC,
                         ids=[" ".join(a[0:1] + a[-2:]) for a, _, _ in NUMERIC])
def test_a_numeric_option_out_of_range_is_refused_before_any_work(cli, tmp_path, argv, option,
                                                                  words):
    run = cli(*argv, "--json")
    assert run.code == 2
    message = run.error["message"]
    assert run.error["type"] == "UsageError"
    assert f"prism {argv[0]}: argument {option}" in message and words in message, message
    assert message.endswith(f"see `prism {argv[0]} --help`") and "\n" not in message
    text = cli(*argv)
    assert text.code == 2 and text.out == "" and text.err == f"error: {message}\n"


def test_the_readme_command_table_documents_the_exit_codes():
    readme = (ROOT / "README.md").read_text()
    table = readme[readme.index("## The `prism` command"):]
    table = table[:table.index("\n## ", 3)]
    row = next(r for r in table.splitlines() if r.startswith("| `prism verify"))
    for code, verdict in ((0, "equivalent"), (1, "not_equivalent"), (3, "unknown"),
                          (4, "invalid")):
        assert re.search(rf"{code} (for |only for )?`?{verdict}`?", row), (code, verdict, row)
    for code in ("2", "70", "130", "141"):
        assert f"| {code} |" in table, code
