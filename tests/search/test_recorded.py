"""The search gives the results it gave when they were recorded (issue 17: faster, at identical
results): the same families generated, kept and pruned per rule, the same candidates with the
same verdicts and graphs, the same best and its modeled latency. The oracle is
`recorded_searches.json`, written by `tests/search/recorded.py` from the search before it was
made faster; rewrite it only for a change that is meant to change results, and say so."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

# loaded by path, as the tests are (importlib mode)
_spec = importlib.util.spec_from_file_location("recorded", Path(__file__).with_name("recorded.py"))
assert _spec is not None and _spec.loader is not None
recorded_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(recorded_module)
CASES, RECORDED, record = recorded_module.CASES, recorded_module.RECORDED, recorded_module.record

# recorded before the search was made faster (`d03cde1`; the last four on `8e6359b`, the same
# search); the slow ones take 20 s to 90 s each now (lora: 779 candidates to verify)
QUICK = ("swiglu-program-5ops", "attention-program-5ops", "rmsnorm_matmul-prism-60k")


@pytest.mark.parametrize("case", [
    pytest.param(c, marks=() if c in QUICK else pytest.mark.slow) for c in CASES])
def test_the_search_gives_the_recorded_results(case):
    recorded = json.loads(RECORDED.read_text())[case]
    fresh = record(case)
    assert fresh["summary"] == recorded["summary"]
    assert fresh["candidates"] == recorded["candidates"]
    assert fresh["best_modeled_us"] == recorded["best_modeled_us"]
