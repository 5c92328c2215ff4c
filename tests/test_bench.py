"""`prism bench`: every figure of a `--quick` row against an oracle that did not compute it (the
run's own trace file, counted here; the cost model called directly on the winner's graph and the
program), the scaling points against the search run here, the fit against exact data, and the
history files, the comparison and the README section against the document they came from."""

from __future__ import annotations

import copy
import json
import math
import statistics
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from prism import bench, bench_report
from prism.cli import main
from prism.cost import eager_us, get_device, modeled, roofline_us
from prism.ir.serialize import graph_from_json
from prism.trace import (
    CandidateRejected,
    CandidateUndecided,
    CandidateVerified,
    FamilyGenerated,
    FamilyPruned,
    SearchFinished,
    StageFinished,
    read_jsonl,
)
from prism.workloads import get_workload

# swiglu finds a fused kernel at the quick cap; attention finds none there (its winner is the
# input program and it has no proof times): both kinds of row
QUICK_TWO = ("swiglu", "attention")


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bench")
    out, runs = tmp / "results", tmp / "runs"
    code = main(["bench", *QUICK_TWO, "--quick", "--out", str(out), "--runs", str(runs),
                 "--json"])
    return code, out, runs


@pytest.fixture(scope="module")
def doc(quick):
    _, out, _ = quick
    (path,) = out.glob("*.json")
    return json.loads(path.read_text())


def _stage(events, name):
    (found,) = [e for e in events if isinstance(e, StageFinished) and e.stage == name]
    return found


@pytest.mark.slow
def test_quick_run_exits_0_and_has_a_row_per_workload(quick, doc):
    code, _, _ = quick
    assert code == 0
    assert [r["workload"] for r in doc["rows"]] == list(QUICK_TWO)
    assert doc["settings"]["quick"] and doc["settings"]["max_block_ops"] == 5
    assert doc["ablation"] == [] and "--ablation" in doc["ablation_note"]
    assert len(doc["commit"]) == 40 and doc["versions"]["z3-solver"]
    assert doc["command"].startswith("prism bench swiglu attention --quick")


@pytest.mark.slow
@pytest.mark.parametrize("name", QUICK_TWO)
def test_search_figures_are_the_traces_counts(quick, doc, name):
    _, _, runs = quick
    row = next(r for r in doc["rows"] if r["workload"] == name)
    events = read_jsonl(runs / name / "trace.jsonl.gz")
    assert row["families_generated"] == sum(isinstance(e, FamilyGenerated) for e in events)
    prunes = [e for e in events if isinstance(e, FamilyPruned)]
    proven = Counter(e.rule for e in prunes if e.evidence.get("claim") != "unproven")
    unproven = Counter(e.rule for e in prunes if e.evidence.get("claim") == "unproven")
    assert {k: v for k, v in row["families_pruned"].items() if v} == dict(proven)
    assert row["families_set_aside"] == dict(unproven)
    assert row["cost_bound_share"] == (pytest.approx(proven["cost_bound"] / sum(proven.values()),
                                                     abs=1e-6)       # the row keeps 6 places
                                       if proven else None)
    assert row["families_kept"] == row["families_generated"] - len(prunes)
    verified = [e for e in events if isinstance(e, CandidateVerified)]
    assert row["candidates_verified"] == len(verified)
    assert row["candidates_checked"] == len(verified) + sum(
        isinstance(e, CandidateRejected | CandidateUndecided) for e in events)
    proofs = [e.proof["seconds"] for e in verified]
    if proofs:
        assert row["proof_seconds_median"] == pytest.approx(statistics.median(proofs), abs=1e-3)
        assert row["proof_seconds_max"] == pytest.approx(max(proofs), abs=1e-3)
    else:
        assert row["proof_seconds_median"] is None and row["proof_seconds_max"] is None
    # every search of the run: the fusion search, and the partial-fusion one when it ran
    searches = [e for e in events if isinstance(e, StageFinished) and e.stage == "search"]
    assert row["search_seconds"] == pytest.approx(sum(e.summary["seconds"] for e in searches),
                                                  abs=2e-3)
    assert row["families_per_second"] == pytest.approx(
        row["families_generated"] / row["search_seconds"], rel=1e-2)
    assert row["tuning_seconds"] == _stage(events, "tune").summary["seconds"]
    finished = [e.summary for e in events if isinstance(e, SearchFinished)]
    assert len(finished) == len(searches) == (1 if row["partial_fusion"] is None else 2)
    assert row["exhaustive"] == all(s["exhaustive"] for s in finished)
    stopped = [s for s in finished if not s["complete"]]
    assert row["search_state"] == (
        f"stopped: {stopped[0]['stop_reason']}" if stopped else "exhaustive"
        if row["exhaustive"] else "complete, not exhaustive")


@pytest.mark.slow
@pytest.mark.parametrize("name", QUICK_TWO)
def test_kernel_figures_are_the_cost_models(quick, doc, name):
    _, _, runs = quick
    row = next(r for r in doc["rows"] if r["workload"] == name)
    events = read_jsonl(runs / name / "trace.jsonl.gz")
    winner = graph_from_json(_stage(events, "check").summary["graph"])
    program = get_workload(name).graph
    assert row["latency_kind"] == "modeled"
    result = json.loads((runs / name / "result.json").read_text())
    assert row["best_latency_us"] == pytest.approx(result["best"]["latency_us"], abs=1e-4)
    for device in ("h100", "h200"):
        spec, figures = get_device(device), row["modeled"][device]
        lat, roof, eager = (modeled(winner, spec).latency_us, roofline_us(program, spec),
                            eager_us(program, spec))
        assert figures["best_latency_us"] == pytest.approx(lat, abs=1e-4)
        assert figures["roofline_us"] == pytest.approx(roof, abs=1e-4)
        assert figures["eager_latency_us"] == pytest.approx(eager, abs=1e-4)
        assert figures["best_over_roofline"] == pytest.approx(lat / roof, abs=1e-3)
        assert figures["speedup_vs_eager"] == pytest.approx(eager / lat, abs=1e-3)
    assert row["best_latency_us"] == row["modeled"]["h100"]["best_latency_us"]
    assert row["roofline_us"] == row["modeled"]["h100"]["roofline_us"]
    # the two devices differ in bandwidth: a row that copied one into the other would show it
    assert row["modeled"]["h200"]["eager_latency_us"] < row["modeled"]["h100"]["eager_latency_us"]
    assert row["best"]["input_program"] == (result["best"]["candidate"] == "input")
    # attention at cap 5: no one kernel holds it, the partial-fusion search fuses its softmax
    fused_whole = result["fusion"]["partial_search"] is None
    assert (row["partial_fusion"] is None) == fused_whole
    if not fused_whole:
        assert row["partial_fusion"]["outside"] == [o["op"] for o in result["fusion"]["outside"]]


@pytest.mark.slow
def test_peak_rss_is_a_whole_process_in_mib(doc):
    import os
    total_mib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**20
    for row in doc["rows"]:
        # a process that imported torch and z3 holds more than 100 MiB; KiB read as bytes or
        # as MiB would fall outside
        assert 100 < row["peak_rss_mb"] < total_mib


@pytest.mark.slow
def test_history_files_hold_the_document(quick, doc):
    _, out, _ = quick
    stem = bench_report.stem(doc)
    assert stem.endswith("-quick") and stem.startswith(doc["date"][:10])
    for suffix in (".json", ".md", ".svg", ".html"):
        assert (out / f"{stem}{suffix}").is_file()
    md = (out / f"{stem}.md").read_text()
    for row in doc["rows"]:
        line = next(li for li in md.splitlines() if li.startswith(f"| {row['workload']} |"))
        assert f"| {row['families_generated']} |" in line
        assert f"{row['roofline_us']:.2f} µs" in line
    svg = ET.fromstring((out / f"{stem}.svg").read_text())
    bars = [r for r in svg.iter("{http://www.w3.org/2000/svg}rect")
            if r.get("height") != "10"]          # the legend's swatches are 10 high
    assert len(bars) == 3 * len(doc["rows"])
    page = (out / f"{stem}.html").read_text()
    assert "<svg" in page and json.dumps(bench_report.figures(doc)) in page


@pytest.mark.slow
def test_compare_prints_each_change_as_a_ratio(quick, doc, tmp_path, capsys):
    later = copy.deepcopy(doc)
    later["commit"] = "f" * 40
    later["rows"][0]["search_seconds"] = doc["rows"][0]["search_seconds"] / 2
    later["rows"] = later["rows"][:1]
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(doc))
    b.write_text(json.dumps(later))
    capsys.readouterr()
    assert main(["bench", "--compare", str(a), str(b), "--json"]) == 0
    diff = json.loads(capsys.readouterr().out)
    first = diff["rows"][0]
    assert first["changes"] == {"search_seconds": {"a": doc["rows"][0]["search_seconds"],
                                                   "b": later["rows"][0]["search_seconds"],
                                                   "ratio": 0.5}}
    assert diff["only_in_a"] == [doc["rows"][1]["workload"]]
    text = bench_report.compare_text(diff)
    assert "(0.50×)" in text and "only in A" in text


@pytest.mark.slow
def test_readme_section_is_rewritten_from_the_latest_full_run(doc, tmp_path, monkeypatch,
                                                               capsys):
    results = tmp_path / "results"
    results.mkdir()
    full = copy.deepcopy(doc)
    full["settings"]["quick"] = False
    older = copy.deepcopy(full)
    older["date"], older["rows"] = "2000-01-01T00:00:00+00:00", []
    for d in (doc, full, older):      # the quick one never stands for the latest
        (results / f"{bench_report.stem(d)}.json").write_text(json.dumps(d))
    latest = bench_report.latest_results(results)
    assert latest.name == f"{bench_report.stem(full)}.json"
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{bench_report.README_BEGIN}\nold table\n"
                      f"{bench_report.README_END}\nafter\n")
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert main(["bench", "--readme", "--out", "results", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["changed"] is True
    text = readme.read_text()
    assert "old table" not in text and text.startswith("intro\n") and text.endswith("after\n")
    for row in full["rows"]:
        line = next(li for li in text.splitlines() if li.startswith(f"| {row['workload']} |"))
        assert f"{row['eager_latency_us']:.2f} µs" in line
    # already up to date (the CLI names the results file as --out gave it)
    assert not bench_report.rewrite_readme(readme, full, str(Path("results") / latest.name))
    readme.write_text("no markers\n")
    assert main(["bench", "--readme", "--out", "results"]) == 2


def test_scaling_points_are_the_search_at_each_cap():
    from prism.pipeline import program_block_ops, search_config_for
    from prism.search import search
    settings = replace(bench.QUICK, budget_s=60.0)
    doc = bench.run_bench([], settings, scaling_caps=(4, 5), scaling_targets=("attention",))
    part = doc["scaling"]["workloads"]["attention"]
    graph = get_workload("attention").graph
    for point in part["points"]:
        # the quick bench's vocabulary: the program's own ops
        config = replace(search_config_for(graph, 60.0, "h100"), max_block_ops=point["cap"],
                         block_ops=program_block_ops(graph))
        here = search(graph, config)        # the canonical order: the same families
        assert point["families_generated"] == here.generated
        assert point["families_kept"] == here.kept and point["complete"] == here.complete
    assert part["fit"]["caps_used"] == [4, 5]
    families = [p["families_generated"] for p in part["points"]]
    k = math.log(families[1] / families[0]) / math.log(5 / 4)     # two points: an exact line
    assert part["fit"]["families_generated"]["power"]["exponent"] == pytest.approx(k, abs=1e-3)


def test_fit_recovers_an_exact_power_law_and_an_exponential():
    caps = [5, 6, 7, 8, 9, 10, 11]
    power = bench.fit_growth(caps, [3.0 * c ** 2.5 for c in caps])
    assert power["better"] == "power" and power["power"]["exponent"] == pytest.approx(2.5)
    assert power["power"]["scale"] == pytest.approx(3.0) and power["power"]["r2"] == 1.0
    expo = bench.fit_growth(caps, [2.0 * 1.7 ** c for c in caps])
    assert expo["better"] == "exponential" and expo["exponential"]["base"] == pytest.approx(1.7)
    assert bench.fit_growth([5], [10.0]) is None
    two = bench.fit_growth([4, 5], [100.0, 200.0])
    assert two["better"] is None and "cannot tell" in two["statement"]


def test_a_budget_stopped_point_stays_out_of_the_fit():
    points = [{"cap": c, "complete": c < 7, "families_generated": 10 * c,
               "search_seconds": float(c)} for c in (5, 6, 7)]
    fit = bench.scaling_fit(points)
    assert fit["caps_used"] == [5, 6] and fit["caps_left_out"] == [7]
    assert fit["families_generated"]["power"]["exponent"] == pytest.approx(1.0)


def test_unknown_workload_fails_before_any_run(capsys):
    assert main(["bench", "no_such_workload", "--quick", "--json"]) == 2
    assert "UnknownWorkloadError" in capsys.readouterr().out


def test_bad_settings_and_files_are_one_line_errors(tmp_path):
    with pytest.raises(bench.BenchError, match="positive"):
        bench.BenchSettings(budget_s=0)
    with pytest.raises(bench_report.ResultsError, match="is not JSON"):
        bench_report.load_results(Path(__file__))
    other = tmp_path / "other.json"
    other.write_text("[1, 2]")
    with pytest.raises(bench_report.ResultsError, match="not a `prism bench` results file"):
        bench_report.load_results(other)
    with pytest.raises(bench_report.ResultsError, match="no full `prism bench` run"):
        bench_report.latest_results(tmp_path)


USER = '''
import torch
import prism

@prism.workload(X=(8, 64), W=(64, 32))
def relu_proj(X, W):
    return torch.relu(X @ W)
'''


@pytest.mark.slow
def test_a_users_function_is_a_row(tmp_path, capsys):
    from prism.targets import load_workload_file
    source = tmp_path / "mine.py"
    source.write_text(USER)
    target = f"{source}:relu_proj"
    code = main(["bench", target, "--quick", "--max-block-ops", "3", "--budget", "60",
                 "--out", str(tmp_path / "results"), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0
    (row,) = doc["rows"]
    graph = load_workload_file(target).graph
    assert row["workload"] == "relu_proj" and row["max_block_ops"] == 3
    assert row["roofline_us"] == pytest.approx(roofline_us(graph, get_device("h100")), abs=1e-4)
    assert row["best_latency_us"] is not None and row["latency_kind"] == "modeled"


KILLED = USER + '''

@prism.workload(X=(8, 64), W=(64, 32))
def dies_in_its_process(X, W):
    import multiprocessing, os, signal
    if multiprocessing.parent_process() is not None:   # the bench's own process for the row
        os.kill(os.getpid(), signal.SIGKILL)            # as the out-of-memory killer does
    return torch.relu(X @ W)
'''


def test_a_row_whose_process_is_killed_says_so_and_the_bench_goes_on(tmp_path):
    source = tmp_path / "mine.py"
    source.write_text(KILLED)
    settings = replace(bench.QUICK, max_block_ops=3, budget_s=60.0)
    doc = bench.run_bench([f"{source}:dies_in_its_process", f"{source}:relu_proj"], settings)
    dead, alive = doc["rows"]
    assert dead["workload"].endswith("dies_in_its_process")
    assert "killed (SIGKILL)" in dead["error"] and "out-of-memory" in dead["error"]
    assert alive["workload"] == "relu_proj" and alive["best_latency_us"] is not None
    assert "killed (SIGKILL)" in bench_report.markdown(doc)


def test_a_row_searched_on_worker_processes_is_the_local_row():
    """A row's process is not daemonic, so its search may start a pool of its own
    (`--executor processes`, which once failed: daemonic processes may not have children);
    its search and winner are the local executor's."""
    # a budget that does not bind on a loaded machine: both searches exhaustive, so comparable
    settings = replace(bench.QUICK, max_block_ops=4, budget_s=600.0)
    local = bench.run_bench(["swiglu"], settings)["rows"][0]
    pooled = bench.run_bench(["swiglu"], replace(settings, executor="processes", workers=2))
    row = pooled["rows"][0]
    assert "error" not in row, row["error"]
    assert local["exhaustive"] and row["exhaustive"]
    assert row["executor"]["name"] == "processes" and row["executor"]["workers"] == 2
    for key in ("families_generated", "families_kept", "families_pruned",
                "candidates_verified", "best_latency_us"):
        assert row[key] == local[key], key


# -- the ablation --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def ablation(tmp_path_factory):
    """The quick ablation of rmsnorm_matmul (two shapes, 4 block ops, 5 s per concrete search)
    without the per-flag rows, and its history files: about 20 s."""
    doc = bench.run_bench([], bench.QUICK_ABLATION, ablation=["rmsnorm_matmul"],
                          ablation_flags=False, command="prism bench rmsnorm_matmul --ablation "
                          "--quick")
    out = tmp_path_factory.mktemp("ablation")
    return doc, bench_report.write_history(doc, out)


def test_the_ablation_row_is_its_sides_and_the_cost_model(ablation):
    """Every figure of the row against an oracle that did not compute it: each winner's
    latency is the cost model's on its graph at that shape, `same_best` and the ratio are
    recomputed from those, and the concrete winner is a program the float64 interpreter finds
    equal to the workload's torch reference at that shape."""
    import numpy as np

    from prism.ir.interpret import interpret
    from prism.search.concrete import MIRAGE_CHECK
    doc, _ = ablation
    (row,) = doc["ablation"]
    workload = get_workload("rmsnorm_matmul")
    assert row["workload"] == "rmsnorm_matmul" and row["shapes"] == 2
    latencies = {}
    for side in ("symbolic", "concrete"):
        shapes = row[side]["shapes"]
        assert [e["shape"] for e in shapes] == [
            {k: list(v) for k, v in s.items()} for s in workload.shape_sets[:2]]
        assert row[side]["seconds"] == pytest.approx(sum(e["seconds"] for e in shapes),
                                                     abs=2e-3)
        for e in shapes:
            best = e["best"]
            graph = graph_from_json(best["graph"])
            assert not graph.free_vars()
            assert best["modeled_us"] == pytest.approx(
                modeled(graph, get_device("h100")).latency_us, rel=1e-6)
            latencies[side, tuple(e["shape"]["X"])] = best["modeled_us"]
            if side == "concrete":
                assert best["accepted_by"] in (MIRAGE_CHECK, "the input program")
                assert set(e["accepted_by"]) <= {MIRAGE_CHECK}
                w = workload.with_shapes(**{k: tuple(v) for k, v in e["shape"].items()})
                arrays = w.random_inputs(0)
                (got,) = interpret(graph, *arrays)
                (want,) = w.reference(*arrays)
                assert np.abs(got - want).max() <= 1e-6 * np.abs(want).max()
    assert row[ "symbolic"]["shapes"][0]["search_state"] == "exhaustive"
    second = row["symbolic"]["shapes"][1]
    assert second["search_state"] == "re-instantiated" and second["families_generated"] == 0
    same = all(latencies["symbolic", x] == pytest.approx(latencies["concrete", x], rel=1e-9)
               for x in ((8, 1024), (8, 2048)))
    assert row["same_best"] is same and ("why" in row) is (not same)
    assert row["ratio"] == pytest.approx(row["concrete_seconds"] / row["symbolic_seconds"],
                                         abs=1e-3)
    stopped = [e["search_state"].startswith("stopped") for e in row["concrete"]["shapes"]]
    assert row["concrete"]["complete"] is (not any(stopped))
    assert row["ratio_kind"] == ("exact" if not any(stopped) else
                                 "lower bound (the concrete side was stopped by its budget)")


def test_the_symbolic_side_is_the_search_run_here(ablation):
    """The symbolic side's first shape is the search in the canonical order, run here."""
    from prism.pipeline import program_block_ops, search_config_for
    from prism.search import search
    doc, _ = ablation
    first = doc["ablation"][0]["symbolic"]["shapes"][0]
    graph = get_workload("rmsnorm_matmul").graph
    here = search(graph, replace(search_config_for(graph, 60.0, "h100"), max_block_ops=4,
                                 block_ops=program_block_ops(graph)))   # the quick vocabulary
    assert first["families_generated"] == here.generated
    assert first["candidates_accepted"] == len(here.equivalent)
    assert first["accepted_by"] == {"e-graph": len(here.equivalent)}


def test_the_ablation_files_quote_each_ratio_with_its_command(ablation):
    doc, files = ablation
    (row,) = doc["ablation"]
    assert files["json"].endswith("-ablation-quick.json")
    md = Path(files["markdown"]).read_text()
    assert f"{row['ratio']:.2f}×" in md and "`prism bench rmsnorm_matmul --ablation --quick`" in md
    svg = ET.fromstring(Path(files["svg"]).read_text())
    bars = [r for r in svg.iter("{http://www.w3.org/2000/svg}rect") if r.get("height") != "10"]
    assert len(bars) == 2


def _side(seconds, states, bests, programs=None, candidates=None):
    shapes = [{"shape": {"X": [8, 1024 * (k + 1)]}, "seconds": s, "search_seconds": s,
               "search_state": st, "best": None if b is None else {
                   "modeled_us": b[0], "program": b[1], "config": f"c[{b[1]}]",
                   "num_kernels": 1}}
              for k, (s, st, b) in enumerate(zip(seconds, states, bests, strict=True))]
    return {"concrete": [], "shapes": shapes, "seconds": sum(seconds),
            "search_seconds": sum(seconds),
            "complete": not any(st.startswith("stopped") for st in states),
            "device": "h100", "_programs": programs or [[] for _ in seconds],
            "_candidates": candidates or [[] for _ in seconds]}


def _fused_symbolic():
    """The fused RMSNorm+MatMul with symbolic grid g0 and loop F (a symbolic candidate)."""
    from prism.frontend.builder import Block, Graph
    g = Graph("fused")
    X, W = g.input("X", (8, 256)), g.input("W", (256, 512))
    tb = Block(grid=("g0",), forloop_range="F")
    x, w = tb.input(X, imap=(-1,), fmap=1), tb.input(W, imap=(1,), fmap=0)
    tb.output(tb.div(tb.accum(tb.matmul(x, w), "nored"), tb.accum(x, "red_ld_rms")), omap=(1,))
    (out,) = g.customized(tb)
    g.output(out)
    return g.build()


def test_an_ablation_row_says_why_the_winners_differ():
    from prism.bench_ablation import _digest, ablation_row
    from prism.ir.serialize import graph_to_json
    from prism.ir.spec import substitute_graph
    candidate = _fused_symbolic()
    # a size the tuner's 20 evenly spaced assignments may leave out, but a feasible one
    z = _digest(substitute_graph(candidate, {"g0": 4, "F": 2}))
    symbolic = _side([2.0, 0.5], ["exhaustive", "re-instantiated"], [(5.0, "a"), (7.0, "b")],
                     candidates=[[], [graph_to_json(candidate)]])
    # the concrete side stopped at the first shape before it found "a"; at the second it
    # found a better program that the symbolic candidates have at a size the tuner left out
    concrete = _side([10.0, 10.0], ["stopped: time budget", "exhaustive"],
                     [(9.0, "input"), (6.5, z)], programs=[["input"], [z]])
    row = ablation_row("w", symbolic, concrete)
    assert row["ratio"] == 8.0 and row["ratio_kind"].startswith("lower bound")
    assert not row["same_best"] and row["same_program"] == [False, False]
    first, second = row["why"].split("; ")
    assert "X(8, 1024)" in first and "stopped: time budget before it reached it" in first
    assert "X(8, 2048)" in second and "not among the at most 20" in second
    assert "_programs" not in row["symbolic"]
    # not reachable at all: the checkpoint searched at the first shape
    row = ablation_row("w", _side([2.0, 0.5], ["exhaustive", "re-instantiated"],
                                  [(5.0, "a"), (7.0, "b")]), concrete)
    assert "checkpoint, searched at the first shape" in row["why"].split("; ")[1]
    same = ablation_row("w", symbolic, _side([4.0, 4.0], ["exhaustive"] * 2,
                                             [(5.0, "a"), (7.0, "c")]))
    assert same["same_best"] and "why" not in same and same["ratio_kind"] == "exact"
    assert same["same_program"] == [True, False]


def test_an_ablation_run_is_not_the_latest_full_run(tmp_path):
    full = {"date": "2026-01-02T00:00:00+00:00", "commit": "a" * 40, "settings": {},
            "rows": [{"workload": "w"}]}
    alone = {**full, "date": "2026-01-03T00:00:00+00:00", "rows": [], "ablation": [{}]}
    assert bench_report.stem(alone).endswith("-ablation")
    for d in (full, alone):
        (tmp_path / f"{bench_report.stem(d)}.json").write_text(json.dumps(d))
    assert bench_report.latest_results(tmp_path).name == f"{bench_report.stem(full)}.json"


def test_the_readme_stands_on_the_newest_run_of_every_workload(tmp_path):
    """A later run of a few named workloads is the newest, but not the README's whole table."""
    whole = {"date": "2026-01-02T00:00:00+00:00", "commit": "a" * 40, "settings": {},
             "rows": [{"workload": "w"}, {"workload": "v"}]}
    few = {**whole, "date": "2026-01-03T00:00:00+00:00", "commit": "b" * 40,
           "rows": [{"workload": "v"}]}
    for d in (whole, few):
        (tmp_path / f"{bench_report.stem(d)}.json").write_text(json.dumps(d))
    assert bench_report.latest_results(tmp_path).name == f"{bench_report.stem(few)}.json"
    assert bench_report.latest_results(tmp_path, covering=("w", "v")).name == \
        f"{bench_report.stem(whole)}.json"
    # none covers them: the newest still stands
    assert bench_report.latest_results(tmp_path, covering=("u",)).name == \
        f"{bench_report.stem(few)}.json"


def test_measured_rows_come_from_the_gpu_checks_files_and_only_measured_figures(tmp_path):
    """`prism bench` merges what bench/gpu_check.sh wrote: gpu_check.json rows (as
    bench/gpu_check.py writes them) and calibration figures of kind `measured`; an interpreted
    calibration (a CPU run) is left out, and without files the section says nothing was
    measured."""
    from prism.bench import measured_section
    from prism.bench_report import measured_lines

    empty = measured_section(tmp_path)
    assert empty["rows"] == [] and empty["calibration"] == []
    assert "no GPU run is committed" in empty["note"]
    (tmp_path / "gpu_check").mkdir()
    rows = [{"workload": "swiglu", "optimize_s": 40.1, "prism_us": 12.5, "eager_us": 30.0,
             "compile_us": 20.0, "cache": "L2 flushed", "tuned_us": 12.4,
             "tuned_kind": "measured", "modeled_us": 10.0, "roofline_us": 8.0,
             "modeled_eager_us": 25.0, "params": {"gx": 64}, "kernels": 1,
             "max_rel_err_vs_eager": 1e-3, "gpu": "NVIDIA H100", "model_error": 1.25},
            {"workload": "ntrans", "optimize_s": 3.0, "error": "no kernel"}]
    (tmp_path / "gpu_check" / "gpu_check.json").write_text(json.dumps(rows))
    cal = tmp_path / "calibration"
    cal.mkdir()
    measured = {"value": 3.1, "kind": "measured", "how": "x", "model": 4.0,
                "measured_over_model": 0.775}
    (cal / "calibration-h100-measured.json").write_text(json.dumps(
        {"device": "h100", "kind": "measured", "gpu": "NVIDIA H100", "date": "2026-12-02",
         "figures": {"launch_us": measured, "hbm_gbps": {**measured, "kind": "interpreted"}}}))
    (cal / "calibration-h100-interpreted.json").write_text(json.dumps(
        {"device": "h100", "kind": "interpreted", "figures": {"launch_us": measured}}))
    got = measured_section(tmp_path)
    assert [r["workload"] for r in got["rows"]] == ["swiglu", "ntrans"]
    assert got["rows"][0]["prism_us"] == 12.5 and got["rows"][0]["model_error"] == 1.25
    assert got["rows"][0]["kind"] == "measured" and got["rows"][1]["error"] == "no kernel"
    assert len(got["calibration"]) == 1
    assert list(got["calibration"][0]["figures"]) == ["launch_us"]
    text = "\n".join(measured_lines(got))
    assert "| swiglu | 12.50 | 30.00 | 20.00 | 10.00 | 1.250 | NVIDIA H100 | n/a / n/a / n/a |" \
        in text
    # a row's budget, graph-replay timings and note reach the table
    rows[0].update(budget_s=35.0, prism_graph_us=5.5, eager_graph_us=6.0, compile_graph_us=4.75,
                   graph_regime="graph replay", note="the input program won")
    (tmp_path / "gpu_check" / "gpu_check.json").write_text(json.dumps(rows))
    text = "\n".join(measured_lines(measured_section(tmp_path)))
    assert "| swiglu (35 s) | 12.50 | 30.00 | 20.00 | 10.00 | 1.250 | NVIDIA H100 | " \
        "5.50 / 6.00 / 4.75 |" in text
    assert "- swiglu: the input program won" in text and "graph replay" in text
    assert "launch_us: 3.1 (measured) against the model's 4.0 (0.775x)" in text
    (tmp_path / "gpu_check" / "gpu_check.json").write_text("{not json")
    with pytest.raises(bench.BenchError, match="not JSON"):
        measured_section(tmp_path)
