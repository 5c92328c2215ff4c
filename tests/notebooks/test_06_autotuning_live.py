"""Notebook 06: its roofline table against the bytes of torch's own tensors and the engine's
`roofline_us`, eager against two library kernels written out by hand; its ranking against every
configuration re-costed; its breakdown against the model's documented formula; its best-so-far
rows against the tracer's events; its interpreted finalists, the winner run again against torch,
and its cached rows against the database file; no measured number without a GPU.
"""

from __future__ import annotations

import re

import pytest
import torch

STEM = "06_autotuning_live"
KINDS = ("modeled", "interpreted", "measured")


def rows(text: str, pattern: str) -> list[tuple[str, ...]]:
    return re.findall(pattern, text, re.M)


def between(text: str, head: str, end: str) -> str:
    """The printed lines after the first line starting with `head`, up to one starting with
    `end`."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.lstrip().startswith(head))
    stop = next(i for i in range(start + 1, len(lines)) if lines[i].startswith(end))
    return "\n".join(lines[start + 1:stop])


@pytest.mark.slow
def test_06_every_latency_line_names_its_kind(run):
    done = run(STEM)
    assert not done.errors, "\n\n".join(done.errors)
    unlabelled = [line for line in done.text.splitlines()
                  if "µs" in line and not any(k in line for k in KINDS)]
    assert not unlabelled, unlabelled


@pytest.mark.slow
def test_06_the_roofline_is_bytes_over_bandwidth_plus_a_launch(run):
    done = run(STEM)
    oracle = done.oracle
    total = re.search(r"^minimum traffic ([0-9.]+) MB", done.text, re.M)
    assert total and float(total[1]) == pytest.approx(oracle["bytes"] / 1e6, abs=1e-3)
    table = rows(done.text, r"^(\w+)\s+\d+\s+\d+\s+\d+\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)"
                            r"\s+([0-9.]+)\s+([0-9.]+)$")
    assert [r[0] for r in table] == list(oracle["devices"])
    for name, memory, compute, launch, roofline, eager in table:
        want = oracle["devices"][name]
        assert float(memory) == pytest.approx(want["memory_us"], abs=1e-3)
        assert float(roofline) == pytest.approx(want["roofline_us"], abs=1e-3)
        assert float(roofline) == pytest.approx(
            max(float(memory), float(compute)) + float(launch), abs=2e-3)
        assert float(eager) == pytest.approx(want["eager_us"], abs=1e-3)
        assert float(roofline) < float(eager)
        assert float(compute) < float(memory)    # memory bound on every GPU, as the prose says
    # "single-digit FLOPs per byte", as section 1 prints it
    intensity = re.search(r"([0-9.]+) FLOP per byte$", done.text, re.M)
    assert intensity and 1 <= float(intensity[1]) < 10
    prose = " ".join(" ".join(c.source.split()) for c in done.nb.cells
                     if c.cell_type == "markdown")
    assert "single-digit FLOPs per byte" in prose


@pytest.mark.slow
def test_06_the_ranking_is_every_configuration_re_costed(run):
    done = run(STEM)
    oracle = done.oracle
    assert oracle["events_match"]          # one modeled event per configuration, each right
    printed = rows(between(done.text, "rank ", "finalists"),
                   r"^\s*(\d+)\s+(\S+\[\S*\])\s+([0-9.]+)\s+([0-9.]+)$")
    ranking = oracle["ranking"]
    assert len(printed) >= 4
    for rank, cid, latency, _ in printed:
        want_id, want_us = ranking[int(rank) - 1]
        assert cid == want_id and float(latency) == pytest.approx(want_us, abs=5e-3)
    chosen = re.search(r"^chosen: (\S+) at ([0-9.]+) µs modeled$", done.text, re.M)
    assert chosen and chosen[1] == ranking[0][0]
    assert float(chosen[2]) == pytest.approx(ranking[0][1], abs=5e-3)


@pytest.mark.slow
def test_06_the_breakdown_follows_the_documented_formula(run):
    done = run(STEM)
    oracle = done.oracle
    printed = rows(done.text, r"^\s*(\d+) ([\d,]+)\s+(\d+)\s+\d+%\s+\d+\s+([0-9.]+)\s+([0-9.]+)"
                              r"\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)$")
    assert [r[0] for r in printed] == list(oracle["breakdown"])
    for gx, _, blocks, _, l2, memory, compute, _, latency in printed:
        want = oracle["breakdown"][gx]
        assert int(blocks) == int(gx)
        assert float(l2) == pytest.approx(want["l2_mb"], abs=0.01)
        assert float(memory) == pytest.approx(want["memory_us"], abs=2e-3)
        assert float(latency) == pytest.approx(want["latency_us"], abs=2e-3)
        assert float(compute) < 0.1 * float(memory)          # memory bound, as the prose says
    best = min(printed, key=lambda r: float(r[-1]))
    assert int(best[0]) == oracle["best_gx"]
    chosen = re.search(r"^chosen: \S+gx=(\d+)\]", done.text, re.M)
    assert chosen and int(chosen[1]) == oracle["best_gx"]


@pytest.mark.slow
def test_06_best_so_far_is_the_running_minimum_of_the_events(run):
    done = run(STEM)
    printed = rows(between(done.text, "measurement ", "after "),
                   r"^\s*(\d+)  (\S+)\s+([0-9.]+)\s+([0-9.]+)$")
    want = done.oracle["improvements"]
    assert len(printed) == len(want) >= 2
    for (n, cid, latency, low), (wn, wid, wus) in zip(printed, want, strict=True):
        assert (int(n), cid) == (wn, wid)
        assert float(latency) == float(low) == pytest.approx(wus, abs=5e-3)
    lows = [float(r[3]) for r in printed]
    assert lows == sorted(lows, reverse=True)


@pytest.mark.slow
def test_06_interpreted_finalists_rank_by_the_model_and_hit_the_cache(run):
    done = run(STEM)
    oracle = done.oracle
    if "interpreted_kinds" not in oracle:
        pytest.skip("a GPU is present: the notebook runs no interpreter")
    assert oracle["interpreted_kinds"] == ["interpreted"]
    first = rows(done.text, r"^(\S+\[\S*\])\s+([0-9.]+)\s+(\d+)  ok$")
    assert len(first) == len(oracle["finalist_modeled"])
    for cid, modeled_us, _ in first:
        assert float(modeled_us) == pytest.approx(oracle["finalist_modeled"][cid], abs=5e-3)
    chosen = re.search(r"^chosen by the model: (\S+); fastest on this CPU: (\S+) ", done.text,
                       re.M)
    assert chosen and chosen[1] == oracle["model_choice"]
    assert chosen[2] == min(first, key=lambda r: int(r[2]))[0]
    assert oracle["winner_vs_torch"] < 2e-2
    assert re.search(r"^check: passed in the triton interpreter", done.text, re.M)
    again = rows(done.text, r"^(\S+\[\S*\])\s+(True|False)\s+(\d+)\s+(True|False)$")
    assert [r[0] for r in again] == [r[0] for r in first]
    assert all(r[1] == "True" and r[3] == "True" for r in again)
    for cid, _, latency, _ in again:
        assert int(latency) == round(oracle["db_latency"][cid])
    records = re.search(r"^results\.jsonl: (\d+) records$", done.text, re.M)
    assert records and int(records[1]) == oracle["db_records"] == len(first)


@pytest.mark.slow
def test_06_measures_only_on_a_gpu(run):
    done = run(STEM)
    if torch.cuda.is_available():
        assert re.search(r"^\S+\s+[0-9.]+\s+[0-9.]+\s+[0-9.]+$", done.text, re.M)
    else:
        assert "no measurement was made" in done.text
        assert not re.search(r"measured µs|µs measured", done.text)


@pytest.mark.slow
def test_06_the_exercise_s_check_passes_the_solution_and_rejects_wrong_answers(run):
    # the check cell's oracle: the engine's `roofline_us`
    done = run(STEM)
    line = (r"^exercise passed: ([0-9.]+) µs by hand, \1 µs by roofline_us"
            r" \(modeled\)$")
    assert re.search(line, done.text, re.M), done.text[-2000:]
    rejects = done.oracle["exercise_rejects"]
    assert rejects and all(rejects), rejects
