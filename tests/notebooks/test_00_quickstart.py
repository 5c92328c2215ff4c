"""Notebook 00: its printed best latency against the cost model on the winner's graph, the
winner's interpreter output against torch, and the live workbench's winner against the first run.
"""

from __future__ import annotations

import re

import pytest

STEM = "00_quickstart"


@pytest.mark.slow
def test_00_prints_the_best_latency_with_its_kind_and_the_workbench_agrees(run):
    done = run(STEM)
    oracle = done.oracle
    found = re.search(r"^best kernel: ([0-9.]+) µs (\w+)$", done.text, re.M)
    assert found, done.text
    assert found[1] == f"{oracle['latency_us']:.2f}" and found[2] == oracle["kind"] == "modeled"
    assert oracle["modeled_us"] == pytest.approx(oracle["latency_us"], rel=1e-12)
    assert oracle["err_vs_torch"] < 1e-9             # the winner computes the workload
    assert oracle["bench_winner"] == oracle["winner"]
    assert "same winner as prism.superoptimize: True" in done.text
    assert re.search(rf"^workbench best: {found[1]} µs modeled", done.text, re.M)
    state = done.nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    assert len(state) > 10                            # the workbench's models were kept
