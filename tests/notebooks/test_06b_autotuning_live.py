"""Notebook 06b: its ranking against every configuration re-costed; its best-so-far rows
against the tracer's events; its interpreted finalists, the winner run again against torch, and
its cached rows against the database file; no measured number without a GPU; the exercise's
finalists against the configurations ranked and told apart by their concrete graphs' JSON.
"""

from __future__ import annotations

import re

import pytest
import torch

STEM = "06b_autotuning_live"
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
def test_06b_every_latency_line_names_its_kind(run):
    done = run(STEM)
    assert not done.errors, "\n\n".join(done.errors)
    unlabelled = [line for line in done.text.splitlines()
                  if "µs" in line and not any(k in line for k in KINDS)]
    assert not unlabelled, unlabelled


@pytest.mark.slow
def test_06b_the_ranking_is_every_configuration_re_costed(run):
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
def test_06b_best_so_far_is_the_running_minimum_of_the_events(run):
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
def test_06b_interpreted_finalists_rank_by_the_model_and_hit_the_cache(run):
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
def test_06b_measures_only_on_a_gpu(run):
    done = run(STEM)
    if torch.cuda.is_available():
        assert re.search(r"^\S+\s+[0-9.]+\s+[0-9.]+\s+[0-9.]+$", done.text, re.M)
    else:
        assert "no measurement was made" in done.text
        assert not re.search(r"measured µs|µs measured", done.text)


@pytest.mark.slow
def test_06b_the_reader_s_finalists_are_the_tuner_s(run):
    done = run(STEM)
    oracle = done.oracle
    found = re.search(r"^exercise passed: (\d+) finalists, (.*), as the tuner chose them$",
                      done.text, re.M)
    assert found, done.text[-2000:]
    assert found[2].split(", ") == oracle["distinct_best"]
    assert int(found[1]) == len(oracle["distinct_best"])
    assert oracle["exercise_rejects"] and all(oracle["exercise_rejects"])
