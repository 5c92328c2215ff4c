"""Notebook 00: its printed best latency against the cost model on the winner's graph, the
winner's interpreter output against torch, and the live workbench's winner against the first run;
the pipeline figure's stages in order, before the engine runs; the three worked numbers and the
two levels' counts against the trace's events and the audit's enumeration of members (each member
run against torch); the launch table against the launches in the generated `run()` and the bytes
counted by hand.
"""

from __future__ import annotations

import ast
import itertools
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


def _line(text: str, pattern: str) -> re.Match[str]:
    found = re.search(pattern, text, re.M)
    assert found, f"no line matches {pattern!r} in:\n{text}"
    return found


@pytest.mark.slow
def test_00_draws_the_pipeline_before_the_engine_runs(run):
    done = run(STEM)
    svgs = [(i, o.data["image/svg+xml"]) for i, c in enumerate(done.code_cells)
            for o in c.outputs if "image/svg+xml" in o.get("data", {})]
    i, svg = svgs[0]
    engine = next(k for k, c in enumerate(done.code_cells) if "prism.superoptimize(" in c.source)
    assert i < engine
    stages = ("program", "families", "prune", "prove", "instantiate", "Triton", "tune")
    at = [svg.index(f">{s}<") for s in stages]
    assert at == sorted(at)                           # each stage once, in pipeline order
    edges = re.findall(r"<title>(\w+)(?:-|&#45;)&gt;(\w+)</title>", svg)
    assert edges == list(itertools.pairwise(stages))   # one line, each stage to the next


@pytest.mark.slow
def test_00_three_numbers_agree_with_the_trace_and_the_audit(run):
    done = run(STEM)
    oracle, text = done.oracle, done.text
    assert int(_line(text, r"^1\. The search generated (\d+) families")[1]) == oracle["generated"]
    two = _line(text, r"^2\. It pruned (\d+) of them \((\d+)%\), most by (\w+) \((\d+)\) and "
                      r"(\w+) \((\d+)\)\.$")
    pruned = oracle["pruned"]
    total = sum(pruned.values())
    assert int(two[1]) == total and int(two[2]) == round(100 * total / oracle["generated"])
    top = sorted(pruned.values(), reverse=True)[:2]
    assert [pruned[two[3]], pruned[two[5]]] == [int(two[4]), int(two[6])] == top
    three = _line(text, r"^3\. One proof covers (\d+) members: (\w+)'s sGraph was proved once, "
                        r"and on the \w+ its feasible assignments are (.*)\.$")
    covered = [ast.literal_eval(env) for env in re.findall(r"\{[^}]*\}", three[3])]
    assert three[2] == oracle["candidate"]
    assert int(three[1]) == len(covered) == oracle["covered_instantiated"]
    assert covered == oracle["covered"] and len(covered) > 1
    assert all(err < 1e-9 for err in oracle["member_errs"])   # every member computes the program


@pytest.mark.slow
def test_00_the_two_levels_count_what_the_trace_and_the_audit_count(run):
    done = run(STEM)
    oracle, text = done.oracle, done.text
    one = _line(text, r"^level 1: (\d+) families generated, (\d+) complete")
    assert (int(one[1]), int(one[2])) == (oracle["generated"], oracle["complete"])
    two = _line(text, r"^level 2: those (\d+) complete families -> (\d+) candidates .* -> "
                      r"(\d+) members")
    assert (int(two[1]), int(two[2]), int(two[3])) == (
        oracle["complete"], oracle["judged"], oracle["all_members"])
    judged = _line(text, r"^verifier: (\d+) candidates judged, (\d+) proved, instead of (\d+) "
                         r"concrete kernels one by one \(([0-9.]+)x fewer\)$")
    assert (int(judged[1]), int(judged[2]), int(judged[3])) == (
        oracle["judged"], oracle["proved"], oracle["all_members"])
    assert judged[4] == f"{oracle['all_members'] / oracle['judged']:.1f}"
    assert oracle["all_members"] > oracle["judged"]
    tuning = _line(text, r"^tuning: the (\d+) proved candidates' (\d+) members")
    assert (int(tuning[1]), int(tuning[2])) == (oracle["proved"], oracle["proved_members"])


@pytest.mark.slow
def test_00_the_launch_table_matches_a_count_by_hand(run):
    done = run(STEM)
    oracle, text = done.oracle, done.text
    launch = oracle["launch_us"]
    assert _line(text, r"\(modeled, ([0-9.]+) µs a launch\)$")[1] == str(launch)
    number = r"\s+(\d+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)%$"
    eager = _line(text, r"^eager \(one kernel per operator\)" + number)
    fused = _line(text, rf"^fused: {re.escape(oracle['winner'])}" + number)
    for row, launches, rest in ((eager, oracle["eager_launches"], oracle["eager_rest"]),
                                (fused, oracle["fused_launches"], oracle["fused_rest"])):
        total = launches * launch + rest
        assert int(row[1]) == launches
        assert row[2] == f"{launches * launch:.2f}" and row[3] == f"{rest:.3f}"
        assert row[4] == f"{total:.2f}" and row[5] == f"{100 * launches * launch / total:.2f}"
    assert oracle["eager_us"] == pytest.approx(oracle["eager_launches"] * launch
                                               + oracle["eager_rest"], rel=1e-9)
    assert oracle["eager_flops_us"] < oracle["eager_rest"]    # the hand count's premise
    assert oracle["fused_us"] == pytest.approx(oracle["fused_launches"] * launch
                                               + oracle["fused_rest"], rel=1e-9)
    saved = oracle["eager_us"] - oracle["fused_us"]
    launches_saved = (oracle["eager_launches"] - oracle["fused_launches"]) * launch
    line = _line(text, r"^fusion saves ([0-9.]+) µs modeled; the launches saved are ([0-9.]+) µs "
                       r"of it \((\d+)%\)$")
    assert (line[1], line[2], line[3]) == (f"{saved:.2f}", f"{launches_saved:.2f}",
                                           f"{100 * launches_saved / saved:.0f}")
    # the prose around the table: "about 2x" is the speed-up the notebook printed, which the
    # hand counts (launches and bytes, counted apart from the model) give to the digit
    printed = float(_line(text, r"^speed-up over eager: ([0-9.]+)x modeled$")[1])
    by_hand = (oracle["eager_launches"] * launch + oracle["eager_rest"]) / (
        oracle["fused_launches"] * launch + oracle["fused_rest"])
    assert f"{by_hand:.2f}" == f"{printed:.2f}" and round(by_hand) == 2
    assert oracle["fused_rest"] > oracle["eager_rest"] and launches_saved > saved


@pytest.mark.slow
def test_00_the_exercise_s_check_passes_the_solution_and_rejects_wrong_answers(run):
    # the check cell's oracle: the cost model re-costs both programs with free launches
    done = run(STEM)
    line = (r"^exercise passed: ([0-9.]+)x without launches by hand, "
            r"\1x by the cost model \(modeled\)$")
    assert re.search(line, done.text, re.M), done.text[-2000:]
    rejects = done.oracle["exercise_rejects"]
    assert rejects and all(rejects), rejects
