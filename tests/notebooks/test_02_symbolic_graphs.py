"""Notebook 02: its printed tile shapes and members table against `substitute_graph` and
`assignments`.
"""

from __future__ import annotations

import ast
import json
import re

import pytest

STEM = "02_symbolic_graphs"


@pytest.mark.slow
def test_02_prints_the_tile_shapes_substitute_graph_gives(run):
    done = run(STEM)
    oracle = done.oracle
    printed: dict[str, dict[str, dict[str, object]]] = {}
    current = None
    for line in done.text.splitlines():
        head = re.match(r"^assignment (\{.*?\}): (.*)$", line)
        if head:
            current = printed.setdefault(head[1], {})
            continue
        row = re.match(r"^  (\S+)\s+\[(.*)\] → \[(.*)\]$", line)
        if row and current is not None:
            current[row[1]] = {"symbolic": row[2], "tile": [int(n) for n in row[3].split(",")]}
        elif not line.startswith("  "):
            current = None
    for env, tensors in oracle["assignments"].items():
        key = str(json.loads(env))
        assert key in printed, f"assignment {key} was not printed"
        assert printed[key] == tensors
    assert len(oracle["assignments"]) == 2
    # the members table: assignment, blocks, tiles, latency, error vs torch
    members = re.findall(r"^(\{'gx'.*?\})\s.*\s[0-9.]+\s+([0-9.e+-]+)$", done.text, re.M)
    assert len(members) == oracle["members"]
    assert all(float(err) < 1e-9 for _, err in members)
    assert all(ast.literal_eval(env) for env, _ in members)


@pytest.mark.slow
def test_02_the_exercise_s_check_passes_the_solution_and_rejects_wrong_answers(run):
    # the check cell's oracle: the W tile's width by hand and `within_limits`
    done = run(STEM)
    line = (r"^exercise passed: gx = (\d+) is the first to fail: "
            r"its W tile is (\d+) columns wide, under the (\d+) a matmul needs$")
    passed = re.search(line, done.text, re.M)
    assert passed, done.text[-2000:]
    assert int(passed[2]) < int(passed[3]) <= 2 * int(passed[2])   # half the gx would fit
    rejects = done.oracle["exercise_rejects"]
    assert rejects and all(rejects), rejects
