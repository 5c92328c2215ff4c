"""Notebook 03: its printed counts, tree, examples and ablation against independent routes — the
raw trace events (counted and linked by parent without `SearchState`), the cost model on the
winners, the abstract-expression e-graph on the printed expression, assignment enumeration for
the hardware example, and each rule's audit, whose re-exploration of the rule's prunes predicts
what the search finds with the rule switched off.
"""

from __future__ import annotations

import re

import pytest

STEM = "03_search_and_pruning"


def _ablation_rows(text: str) -> dict[str, dict[str, object]]:
    rows = {}
    for m in re.finditer(r"^(\w+)\s+(\d+) → +(\d+)\s+(\d+) → +(\d+)\s+(\d+) → +(\d+)\s+"
                         r"[0-9.]+ → +[0-9.]+\s+(yes|family budget|time budget)\s+"
                         r"([0-9.]+|-) → ([0-9.]+|-)$", text, re.M):
        rows[m[1]] = {"families": (int(m[2]), int(m[3])), "candidates": (int(m[4]), int(m[5])),
                      "proved": (int(m[6]), int(m[7])), "done": m[8], "best": (m[9], m[10])}
    return rows


@pytest.mark.slow
def test_03_summary_and_tree_match_the_raw_events(run):
    done = run(STEM)
    oracle = done.oracle
    assert re.search(rf"^families generated {oracle['generated']}$", done.text, re.M)
    printed = dict(re.findall(r"^  pruned by (\w+)\s+(\d+)$", done.text, re.M))
    assert {r: int(n) for r, n in printed.items() if int(n)} == oracle["pruned"]
    assert re.search(rf"^  kept\s+{oracle['kept']}$", done.text, re.M)
    # the first families, indented by depth, each marked with the rule that pruned it
    tree = re.findall(r"^( *)(f\d+) +(.*?)(?:✗ (\w+):.*)?$", done.text, re.M)
    first = [[fid, len(indent) // 2, rule or None] for indent, fid, _, rule in tree]
    assert first[:len(oracle["tree"])] == oracle["tree"]
    # the winner's path: the lines after the tree, down to the candidate
    path = first[len(oracle["tree"]):][:len(oracle["winner_path"])]
    assert [fid for fid, _, _ in path] == oracle["winner_path"]
    assert [d for _, d, _ in path] == list(range(len(oracle["winner_path"])))


@pytest.mark.slow
def test_03_best_latencies_are_the_cost_model_at_the_printed_assignment(run):
    done = run(STEM)
    oracle = done.oracle
    best, small, inc = oracle["best"], oracle["small_best"], oracle["incumbent"]
    assert re.search(rf"^best: {best['id']}, {best['kernels']} kernel\(s\), "
                     rf"{best['modeled_us']:.2f} µs modeled at ", done.text, re.M)
    assert re.search(rf"^small device    best {small['id']}: {small['kernels']} kernel\(s\), "
                     rf"{small['modeled_us']:.2f} µs modeled$", done.text, re.M)
    assert small["kernels"] > best["kernels"]        # nothing fused fits the small device
    assert re.search(rf"^the incumbent {inc['id']}: .* {inc['modeled_us']:.2f} µs modeled",
                     done.text, re.M)


@pytest.mark.slow
def test_03_rule_examples_hold_against_independent_checks(run):
    done = run(STEM)
    oracle = done.oracle
    # the abstract-expression example is really absent from the target's e-graph
    assert f"expression       {oracle['abstract']['expression']}" in done.text
    assert oracle["abstract"]["in_target"] is False
    assert oracle["abstract"]["target_in_target"] is True
    # the hardware rule: its count, its claim held by enumeration (not z3), and the fused
    # kernel's verdict on both devices
    hw = oracle["audits"]["hardware"]
    assert re.search(rf"^device with {oracle['small_smem']} B of shared memory: {hw['pruned']} "
                     "families pruned by hardware$", done.text, re.M)
    assert hw["sound"] and hw["pruned"] > 0 and hw["equivalent"] > 0
    fits = oracle["fused_fits"]
    assert fits["default"] and not fits["small"]
    found = re.search(r"^default device \(\d+ B\): fits: (.*)$", done.text, re.M)
    assert found, done.text
    model = dict(kv.split("=") for kv in found[1].split(", "))
    assert {k: int(v) for k, v in model.items()} in fits["default"]
    assert re.search(rf"^small device \({oracle['small_smem']} B\): no assignment fits",
                     done.text, re.M)
    cost = oracle["audits"]["cost_bound"]
    assert cost["sound"] and cost["pruned"] == oracle["pruned"]["cost_bound"]


@pytest.mark.slow
def test_03_ablation_is_what_each_rules_audit_predicts(run):
    done = run(STEM)
    oracle = done.oracle
    rows = _ablation_rows(done.text)
    assert set(rows) == {"structural", "abstract_expression", "hardware", "cost_bound"}
    for rule, audit in oracle["audits"].items():
        row = rows[rule]
        assert row["done"] == "yes"
        # switched off, the search generates and verifies exactly what the audit explored
        # under the rule's prunes, on top of the search with the rule on
        assert row["families"][1] == audit["off_generated"]
        assert row["candidates"][1] == audit["off_candidates"]
        assert row["proved"][1] == audit["off_equivalent"]
        assert row["best"][0] == row["best"][1] != "-"
        assert audit["sound"]
        line = re.search(rf"^{rule}\s+same best: (\w+); every program proved with it is "
                         rf"proved without it: (\w+); (\d+) more proved without it$",
                         done.text, re.M)
        assert line, rule
        assert line[1] == line[2] == "True" and int(line[3]) == audit["equivalent"]
    abstract = rows["abstract_expression"]
    assert abstract["done"] == "family budget"
    assert abstract["families"][1] == oracle["max_families"] > abstract["families"][0]
    assert re.search(r"^abstract_expression\s+unfinished with the rule off", done.text, re.M)
