"""Advice (`prism.advice`, issue 22 item 4): the schema refuses what it does not define, the
default heuristic reads a region's summary text, and advice only reorders or narrows — every
finalist is still a proved candidate, the winner is still checked, and the model's own first
choice is never pushed out of the finalists.

Oracles: the region's own graph (its ops, and the text form parsed back), an unadvised run of the
same search (its finalists and winner), the search's verdicts, and torch (the compiled model
against eager)."""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F

import prism.dynamo as pc
from prism.advice import Advice, AdviceError, ask, heuristic, summary_text
from prism.cost import get_device
from prism.instantiate.triton_backend import interpreting
from prism.ir.text import from_text
from prism.pipeline import superoptimize
from prism.workloads import get_workload

H100 = get_device("h100")


def test_the_schema_takes_its_fields_and_refuses_others_by_name() -> None:
    got = Advice.of({"label": "norm", "params": {"gx": [4, 8]}, "kernels": 1,
                     "risks": ["long rows"]})
    assert got.params == {"gx": (4, 8)} and got.kernels == 1 and got.risks == ("long rows",)
    assert not got.empty and Advice.of({"label": "x", "risks": ["y"]}).empty
    with pytest.raises(AdviceError, match="fields bypass_check"):
        Advice.of({"bypass_check": True})
    with pytest.raises(AdviceError, match="kernels takes a positive whole number"):
        Advice.of({"kernels": 0})
    with pytest.raises(AdviceError, match=r"returns a prism\.Advice or a mapping"):
        Advice.of("fuse everything")

    def broken(summary: str) -> Advice:
        raise RuntimeError("no network")
    with pytest.raises(AdviceError, match="advisor broken raised RuntimeError: no network"):
        ask(broken, get_workload("swiglu").graph, "float16", H100)


@pytest.mark.parametrize("name", ["rmsnorm_matmul", "attention", "attention_safe", "swiglu"])
def test_the_heuristic_reads_the_programs_ops_from_its_summary(name: str) -> None:
    graph = get_workload(name).graph
    text = summary_text(graph, "float16", H100)
    # the summary holds the program: its text form parses back to the same ops
    assert [op.kind for op in from_text(text.split("\n", 1)[1]).ops] == \
        [op.kind for op in graph.ops]
    advice = heuristic(text)
    kinds = {op.kind for op in graph.ops}
    assert ("norm" in advice.label) == bool(kinds & {"rms_norm", "rms", "mean"})
    assert ("matmul" in advice.label) == ("matmul" in kinds)
    # the overflow note exactly where an exp has no max-subtraction in the program
    assert bool(advice.risks) == ("exp" in kinds and "max" not in kinds)
    assert advice.empty                    # the heuristic narrows nothing at these shapes


def test_advice_reorders_tuning_and_narrows_the_search_but_every_finalist_is_proved(cases):
    work = cases.small("rmsnorm_matmul")
    config = cases.reduced("rmsnorm_matmul")
    plain = superoptimize(work, search_config=config, max_trials=3, compile_ptx=False)
    finalists = [t.config for t in plain.tuning.finalists]
    # hint a size the model ranks below the finalists: a configuration the plain run left out
    taken = {p for c in finalists for p in c.params}
    var, value = next(p for t in sorted(plain.tuning.screened, key=lambda t: t.modeled_us)
                      if t.modeled_us < float("inf") for p in t.config.params
                      if p not in taken)
    assert not any(dict(c.params).get(var) == value for c in finalists)
    advice = Advice(params={var: (value,)})
    steered = superoptimize(work, search_config=config, max_trials=3, compile_ptx=False,
                            advice=advice)
    ids = [t.config.id for t in steered.tuning.finalists]
    assert any(dict(t.config.params).get(var) == value for t in steered.tuning.finalists)
    assert finalists[0].id in ids          # the model's own first choice stays
    proved = {c.id for c in steered.search.equivalent}
    assert all(t.config.candidate in proved for t in steered.tuning.finalists)
    assert steered.best is not None and steered.best.check.passed
    # the winner is still the best finalist by its latency, hinted or not
    assert steered.best.latency_us == min(t.latency_us for t in steered.tuning.finalists
                                          if t.ok)
    stages = {e.stage: e.summary for e in steered.trace if e.type == "StageFinished"}
    assert stages["advice"]["advice"]["params"] == {var: [value]}
    assert "hinted configurations first" in stages["advice"]["effects"][0]
    hinted = sum(dict(t.config.params).get(var) == value for t in steered.tuning.finalists)
    assert stages["advice outcome"]["outcome"].startswith(
        f"{hinted} of {len(ids)} finalists took the hints")

    # the workbench shows the advice, what it changed and the outcome, from the run's events
    from widgets.workbench import Workbench
    shown = Workbench.from_trace(steered.trace).advice.value
    assert f"{var}" in shown and "hinted configurations first" in shown
    assert stages["advice outcome"]["outcome"].split(";")[0] in shown

    narrow = superoptimize(work, search_config=config, max_trials=3, compile_ptx=False,
                           advice={"max_block_ops": config.max_block_ops - 1})
    assert narrow.search.summary()["families"]["generated"] < \
        plain.search.summary()["families"]["generated"]
    assert narrow.best is None or narrow.best.proved


class GatedMLP(torch.nn.Module):
    """SwiGLU as model code writes it: two bias-free Linear layers, SiLU, a product."""

    def __init__(self):
        super().__init__()
        self.gate = torch.nn.Linear(64, 64, bias=False)
        self.up = torch.nn.Linear(64, 64, bias=False)

    def forward(self, x):
        return F.silu(self.gate(x)) * self.up(x)


@pytest.mark.skipif(not interpreting(), reason="runs kernels in Triton's interpreter")
def test_a_users_advisor_sees_each_region_and_its_skip_is_obeyed(cases, tmp_path):
    torch.manual_seed(0)
    model, seen = GatedMLP().eval(), []

    def advisor(summary: str) -> dict:
        seen.append(summary)
        return {"label": "gated mlp", "skip": True, "risks": ["none known"]}

    report = tmp_path / "report.json"
    compiled = pc.compile(model, advisor=advisor, report=report, cache_dir=tmp_path / "c",
                          search_config=cases.reduced("swiglu"))
    x = torch.randn(8, 64)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x))
    (region,) = json.loads(report.read_text())["graphs"][0]
    assert region["status"] == "fallback" and "advisor (advisor)" in region["reason"]
    assert region["advice"]["advice"]["label"] == "gated mlp"
    assert region["advice"]["outcome"] == "left to torch, as advised"
    (summary,) = seen
    ops = [op.kind for op in from_text(summary.split("\n", 1)[1]).ops]
    assert ops.count("matmul") == 2 and "silu" in ops
    assert not list((tmp_path / "c").glob("*.json"))      # no search ran, nothing cached


@pytest.mark.skipif(not interpreting(), reason="runs kernels in Triton's interpreter")
def test_a_compiled_regions_advice_is_on_its_trace_and_in_the_workbench(cases, tmp_path):
    """`prism.compile(..., out=DIR)`: each optimized region leaves prism optimize's outputs;
    its trace holds the advisor's advice and its outcome, which the workbench shows."""
    from prism.trace import read_jsonl
    from widgets.workbench import Workbench

    torch.manual_seed(0)
    model = GatedMLP().eval()
    compiled = pc.compile(model, out=tmp_path / "regions", cache_dir=tmp_path / "c",
                          search_config=cases.reduced("swiglu"), rest="eager")
    x = torch.randn(8, 64)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-5)
    (region,) = compiled.prism_report.graphs[0]
    trace = tmp_path / "regions" / f"graph0-region{region.index}" / "trace.jsonl.gz"
    stages = {e.stage: e.summary for e in read_jsonl(trace) if e.type == "StageFinished"}
    # the label the heuristic gives this program's ops, from the region's own report
    assert stages["advice"]["advice"]["label"] == region.advised.advice.label
    assert "matmul" in region.advised.advice.label
    assert stages["advice outcome"]["outcome"].startswith("the winner is ")
    shown = Workbench.from_trace(trace).advice.value
    assert region.advised.advice.label in shown and "heuristic" in shown
