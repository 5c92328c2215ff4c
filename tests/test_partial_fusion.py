"""Partial fusion (`prism.pipeline._fused_or_partial`): when no program of one custom kernel
holding every op fits the device, a second search lets the program's ops run as pre-defined
kernel ops; the ops a block cannot hold stay outside and the rest is still fused. The result
says which ops stayed outside and why.

Oracles: torch (the winner's check runs the kernel in Triton's interpreter against the workload's
torch reference, outputs poisoned with NaN first), the device's shared memory (a row of 32,768
fp16 values is 64 KiB, eight of them 512 KiB: more than the 227 KiB a block of an H100 may have),
and the search's own JSON for the claims the text makes.
"""

from __future__ import annotations

import json

import pytest
import torch

import prism
from prism.cost import get_device
from prism.pipeline import (
    INPUT_PROGRAM,
    OptimizeResult,
    _last_resort,
    instantiate,
    outside_ops,
)
from prism.trace import Tracer
from prism.tune import make_backend

VOCAB = 32768


def vocab_logsumexp(X, W, B):
    return torch.logsumexp(torch.relu(X @ W + B), dim=-1)


def linear_bias_relu(X, W, B):
    return torch.relu(X @ W + B)


@pytest.mark.slow
def test_a_row_too_long_for_a_block_stays_outside_and_the_rest_is_fused():
    rows = 8
    assert rows * VOCAB * 2 > get_device("h100").smem_bytes      # no block holds the rows
    w = prism.workload(vocab_logsumexp, X=(rows, 64), W=(64, VOCAB), B=(VOCAB,))
    result = prism.superoptimize(w, budget_s=180, compile_ptx=False)
    doc = result.to_json()
    best = result.best
    assert best is not None, doc.get("notes")
    assert best.check.status == "passed", best.check           # against torch
    assert best.candidate.startswith("pc") and best.verdict is not None
    assert best.verdict.verdict == "equivalent"
    assert len(best.graph.custom_ops) == 1                      # matmul, bias and relu fused
    fusion = doc["fusion"]
    assert [o["op"] for o in fusion["outside"]] == ["logsumexp"]
    fused = fusion["fusion_search"]
    assert fused["exhaustive"] and fusion["partial_search"] is not None
    assert "logsumexp" in fusion["kernel_ops"]
    why = fusion["outside"][0]["why"]
    assert f"exhaustive over {fused['families']['generated']:,} families" in why
    assert doc["baseline"]["modeled_speedup_vs_eager"] > 1
    # every candidate the fusion search proved has no member that fits this device
    assert f"{fused['verdicts'].get('equivalent', 0):,} proved equivalent, none" in why or \
        "none proved equivalent" in why


def test_a_program_that_fuses_runs_no_partial_search():
    w = prism.workload(linear_bias_relu, X=(8, 32), W=(32, 16), B=(16,))
    result = prism.superoptimize(w, budget_s=120, compile_ptx=False)
    doc = result.to_json()
    assert result.best is not None and result.best.check.passed
    assert result.best.num_kernels == 1 and not outside_ops(result.best.graph)
    assert doc["fusion"]["partial_search"] is None and doc["fusion"]["outside"] == []
    assert not any(c.id.startswith("pc") for c in result.search.candidates)


def test_outside_ops_are_the_compute_ops_outside_custom_kernels():
    w = prism.workload(vocab_logsumexp, X=(8, 64), W=(64, 128), B=(128,))
    assert [o["op"] for o in outside_ops(w.graph)] == ["matmul", "add", "relu", "logsumexp"]


def test_the_input_program_is_the_last_resort_when_no_finalist_is_left():
    """With every finalist set aside, the check loop reaches the input program: it is measured
    then, and its check (against torch) passes."""
    from prism.pipeline import _best_kernel, check_best
    w = prism.workload(linear_bias_relu, X=(8, 32), W=(32, 16), B=(16,))
    graph, spec = w.graph, get_device("h100")
    result = OptimizeResult("t", "h100", "model", graph, None, None, None, 0.0, 0.0, [])
    trials = list(_last_resort(result, [], instantiate(graph, None, spec),
                               make_backend("model", spec), spec, Tracer(), None))
    assert [t.config.candidate for t in trials] == [INPUT_PROGRAM]
    best = _best_kernel(result, trials[0], spec)
    assert best.proved and best.is_input_program
    assert check_best(best, w, "model").status == "passed"
    assert "last resort" in result.notes[0]


def silu_plus_residual(X, W, R):
    return torch.nn.functional.silu(X @ W) + R


def test_ops_the_block_vocabulary_lacks_run_outside_instead_of_a_refusal():
    """A config whose block ops leave out the program's add: `prism search` refuses it
    (`UnsupportedTargetError`); the pipeline runs only the partial search, keeps the add
    outside and fuses the matmul and silu."""
    w = prism.workload(silu_plus_residual, X=(8, 32), W=(32, 16), R=(8, 16))
    config = prism.SearchConfig(block_ops=("matmul", "silu"), max_block_inputs=3, budget_s=60)
    result = prism.superoptimize(w, budget_s=120, compile_ptx=False, search_config=config)
    doc = result.to_json()
    assert result.best is not None and result.best.check.passed
    fusion = doc["fusion"]
    assert "add" in fusion["fusion_search"]["not_run"]
    assert [o["op"] for o in fusion["outside"]] == ["add"]
    assert len(result.best.graph.custom_ops) == 1
    assert "block vocabulary cannot hold" in fusion["outside"][0]["why"]
    assert doc["baseline"]["modeled_speedup_vs_eager"] > 1


RESIDUAL = '''
import torch
import prism

@prism.workload(X=(8, 32), W=(32, 16), R=(8, 16))
def silu_plus_residual(X, W, R):
    return torch.nn.functional.silu(X @ W) + R
'''


def test_prism_optimize_prints_and_reports_the_ops_left_outside(capsys, tmp_path):
    from prism.cli import main
    (tmp_path / "mine.py").write_text(RESIDUAL)
    out = tmp_path / "out"
    code = main(["optimize", f"{tmp_path / 'mine.py'}:silu_plus_residual", "--block-ops",
                 "matmul,silu", "--budget", "120", "--out", str(out), "--max-trials", "2"])
    text = capsys.readouterr().out
    assert code == 0, text
    line = next(ln for ln in text.splitlines() if "outside custom kernels:" in ln)
    assert "add (" in line and "block vocabulary cannot hold" in line
    doc = json.loads((out / "result.json").read_text())
    assert [o["op"] for o in doc["fusion"]["outside"]] == ["add"]
    assert doc["best"]["candidate"].startswith("pc")
    page = (out / "report.html").read_text()
    assert "Outside custom kernels: <code>add</code>" in page
    assert "Partial-fusion search (pre-defined kernel ops allowed)" in page


def test_the_note_on_a_kept_input_program_counts_the_fused_programs_that_fit():
    """When the fusion search proved programs that fit but the input program won, the note says
    how many fit; it says none fits only when the search's own candidates say so (oracle: the
    search's candidates, modeled at fitting assignments)."""
    from dataclasses import replace

    from prism.pipeline import Fusion, _best_kernel, search_config_for
    from prism.search import search
    w = prism.workload(linear_bias_relu, X=(8, 32), W=(32, 16), B=(16,))
    graph, spec = w.graph, get_device("h100")
    found = search(graph, replace(search_config_for(graph, 120, spec), max_families=3000))
    fits = [c for c in found.equivalent if c.modeled_us is not None]
    assert fits
    result = OptimizeResult("t", "h100", "model", graph, None, None, None, 0.0, 0.0, [])
    (trial,) = _last_resort(result, [], instantiate(graph, None, spec),
                            make_backend("model", spec), spec, Tracer(), None)
    kept = _best_kernel(result, trial, spec)
    assert kept.is_input_program
    said = Fusion(found.summary(), fits=len(fits)).why_outside(kept)
    assert f"{len(fits):,} with a member that fits the device" in said
    assert "none with a member that fits" not in said
    assert "none with a member that fits" in Fusion(found.summary()).why_outside(kept)
