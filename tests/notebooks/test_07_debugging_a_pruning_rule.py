"""Notebook 07: the unsound rule's cost, the audit's finding and the fix, against independent
routes — the cost model at the printed assignments (and on the hand-written kernel), the raw
trace events (prunes counted, the plain search's tree linked by parent), float64 random testing
and the interpreter against torch on the wrongly pruned program, assignment enumeration for its
fit, the search with the fixed rule switched off (on both workloads, its best costed over the
instantiator's assignments), and the audit's and search's own clocks inside the cells' clocks.
"""

from __future__ import annotations

import re

import pytest

STEM = "07_debugging_a_pruning_rule"
RULE = "rms_needs_whole_rows"


def _best_line(text: str, name: str) -> re.Match[str]:
    found = re.search(rf"^{re.escape(name)}: (\d+) families generated, (\d+) candidates, "
                      rf"(\d+) proved equivalent\n  best (c\d+): (\d+) kernel\(s\), ([0-9.]+) µs "
                      rf"modeled at (.*)$", text, re.M)
    assert found, f"no summary for {name}:\n{text}"
    return found


@pytest.mark.slow
def test_07_the_rule_costs_the_fused_kernel_by_the_cost_model(run):
    done = run(STEM)
    oracle = done.oracle
    for name, key in (("plain search", "plain"), ("with our rule", "with_rule"),
                      ("with the fixed rule", "repaired")):
        line, best = _best_line(done.text, name), oracle[key]
        assert (line[4], int(line[5])) == (best["id"], best["kernels"])
        assert line[6] == f"{best['modeled_us']:.2f}"
    plain, buggy, fixed = oracle["plain"], oracle["with_rule"], oracle["repaired"]
    assert plain["kernels"] == 1 and buggy["kernels"] > 1      # the fused kernel was lost
    assert buggy["modeled_us"] > plain["modeled_us"]
    assert fixed["kernels"] == 1 and fixed["modeled_us"] == pytest.approx(plain["modeled_us"])
    # the winner costs what the hand-written kernel costs at the same sizes
    assert oracle["known_best_us"] == pytest.approx(plain["modeled_us"], rel=1e-12)
    assert "the winner is laid out as the hand-written kernel: True" in done.text
    ratio = re.search(r"^  ([0-9.]+)x the plain search's best latency \(modeled\)$", done.text,
                      re.M)
    assert ratio and ratio[1] == f"{buggy['modeled_us'] / plain['modeled_us']:.2f}"


@pytest.mark.slow
def test_07_counts_explorer_and_path_match_the_raw_events(run):
    done = run(STEM)
    oracle = done.oracle
    counts = {r: (int(a), int(b)) for r, a, b in
              re.findall(r"^(\w+)\s+(\d+)\s+(\d+)$", done.text, re.M) if r in oracle["rules"]}
    assert list(counts) == oracle["rules"]          # every built-in rule, then ours
    row = counts[RULE]
    assert row[0] == 0 and row[1] == oracle["pruned_events"] > 0
    # as the prose says: with the fused kernel lost, branch and bound prunes nothing
    assert counts["cost_bound"][0] > 0 and counts["cost_bound"][1] == 0
    assert oracle["with_rule"]["kernels"] > 1
    assert re.search(rf"^{oracle['pruned_events']} families pruned by {RULE}:$", done.text, re.M)
    listed = re.findall(r"^  (f\d+)\s+block op \w+ = (rms_norm|red_ld_rms)\(X_tile\)$",
                        done.text, re.M)
    assert len(listed) == oracle["pruned_events"]
    # the audit's families are, in the plain search's numbering, exactly what the rule prunes
    wrong = oracle["wrong_descriptions"]
    assert wrong and all(re.fullmatch(r"block op \w+ = (rms_norm|red_ld_rms)\(X_tile\)", d)
                         for d in wrong.values())
    # the path to the plain winner, marked where the audit named a family
    path = re.findall(r"^( *)(f\d+) +(.*?)(   ◀ pruned by \w+)?$", done.text, re.M)
    on_path = [(fid, len(indent) // 2, bool(mark)) for indent, fid, _, mark in path
               if fid in oracle["plain_path"]][-len(oracle["plain_path"]):]
    assert [fid for fid, _, _ in on_path] == oracle["plain_path"]
    assert [d for _, d, _ in on_path] == list(range(len(oracle["plain_path"])))
    marked = [fid for fid, _, m in on_path if m]
    assert marked and marked == [f for f in oracle["plain_path"] if f in wrong]


@pytest.mark.slow
def test_07_the_wrongly_pruned_program_computes_the_target_and_fits(run):
    done = run(STEM)
    oracle = done.oracle
    lost = oracle["lost"]
    assert lost["random_test"] is True          # float64 random testing, not the e-graph
    assert lost["err_vs_torch"] < 1e-9
    assert lost["fits"] is True                 # the device limits, tile by tile
    assert lost["family"] in oracle["wrong_descriptions"]
    assert lost["family"] in oracle["plain_path"]
    assert re.search(rf"^{lost['candidate']}: {lost['modeled_us']:.2f} µs modeled at ",
                     done.text, re.M)
    assert lost["modeled_us"] == pytest.approx(oracle["plain"]["modeled_us"], rel=1e-12)
    assert "laid out as the plain search's winner: True" in done.text
    assert re.search(r"^equivalent by [\w-]+: \d+ steps, sizes symbolic$", done.text, re.M)
    err = re.search(r"^interpreted at .*: max relative error vs torch ([0-9.e+-]+)$",
                    done.text, re.M)
    assert err and float(err[1]) < 1e-9


@pytest.mark.slow
def test_07_the_audits_judge_each_version_of_the_rule(run):
    done = run(STEM)
    oracle = done.oracle
    audits = oracle["audits"]
    assert not audits["first"]["sound"] and not audits["second"]["sound"]
    assert audits["third"]["sound"] and audits["third"]["pruned"] > 0
    assert audits["third"]["equivalent"] > 0                # the claim was checked on programs
    assert re.search(rf"^sound: False; {audits['first']['wrong']} wrongly pruned programs$",
                     done.text, re.M)
    verdicts = re.findall(r"^audit: (\d+) prunes, \d+ checked, (\d+) proved equivalent; "
                          r"sound: (\w+), (\d+) wrongly pruned$", done.text, re.M)
    assert verdicts == [(str(a["pruned"]), str(a["equivalent"]), str(a["sound"]),
                         str(a["wrong"])) for a in (audits["second"], audits["third"])]
    # the narrowed rule's findings all leave X's rows whole, as the prose says
    assert oracle["second_x_fmaps"] and set(oracle["second_x_fmaps"]) == {"(-)"}
    # switched off by name, the fixed rule changes nothing
    assert oracle["fixed_rule_off_generated"] == oracle["plain_generated"]
    table = dict(re.findall(r"^(plain|first rule|rms_norm only|rms_norm, not_better)\s+\d+\s+"
                            r"\d+\s+\d+\s+[0-9.]+\s+(-|sound|unsound)$", done.text, re.M))
    assert table == {"plain": "-", "first rule": "unsound", "rms_norm only": "unsound",
                     "rms_norm, not_better": "sound"}


@pytest.mark.slow
def test_07_the_reader_s_rule_is_audited_sound_and_the_check_rejects_a_false_claim(run):
    done = run(STEM)
    passed = re.search(r"^exercise passed: audit of rms_norm_never_needed: (\d+) prunes, (\d+) "
                       r"checked, (\d+) proved equivalent; sound: True$", done.text, re.M)
    assert passed and int(passed[1]) > 0 and int(passed[3]) > 0
    assert done.oracle["exercise_rejects_no_equivalent"] is True


@pytest.mark.slow
def test_07_the_checklist_starts_with_auditing_every_new_rule(run):
    done = run(STEM)
    intro = done.nb.cells[0].source
    steps = re.findall(r"^(\d)\. \*\*(.+?)\*\*", intro, re.M)
    assert steps[0] == ("1", "Audit every new rule")
    for phrase in ("Fix the claim, not only the condition",
                   "Audit the fix again on a second workload and shape",
                   "Know what the claim is relative to"):
        assert phrase in intro


@pytest.mark.slow
def test_07_the_audit_s_cost_is_the_measured_time_against_the_search_s(run):
    done = run(STEM)
    timing = done.oracle["timing"]
    assert timing["search_within_wall"] and timing["audit_within_wall"]
    line = re.search(r"^cost: the search took ([0-9.]+) s, its audit ([0-9.]+) s, ([0-9.]+)× the "
                     r"search \(wall time on this CPU\)$", done.text, re.M)
    assert line, done.text
    assert line[1] == f"{timing['search_s']:.2f}" and line[2] == f"{timing['audit_s']:.2f}"
    assert line[3] == f"{timing['audit_s'] / timing['search_s']:.1f}"


@pytest.mark.slow
def test_07_the_fix_is_audited_sound_on_a_second_workload_and_shape(run):
    done = run(STEM)
    second = done.oracle["second"]
    pruned, checked, equivalent, sound = second["audit"]
    assert re.search(rf"^audit of the fix on rms_norm\(X\) at \{{'X': \(\d+, \d+\)\}}: {pruned} "
                     rf"prunes, {checked} checked, {equivalent} proved equivalent; sound: "
                     rf"{sound}$", done.text, re.M)
    assert sound and pruned > 0 and equivalent > 0      # not vacuous
    # switched off, the search finds nothing faster (the instantiator's assignments)
    assert second["best_on_us"] == pytest.approx(second["best_off_us"], rel=1e-12)
    assert re.search(rf"^  the search with the fix: best {second['on_kernels']} kernel\(s\), "
                     r"[0-9.]+ µs modeled$", done.text, re.M)


@pytest.mark.slow
def test_07_not_better_is_checked_against_the_cost_model(run):
    done = run(STEM)
    nb = done.oracle["not_better"]
    line = re.search(r"^(\d+) programs proved only with the rule off; the fastest models at "
                     r"([0-9.]+) µs, the best the search keeps at ([0-9.]+) µs \(modeled\)$",
                     done.text, re.M)
    assert line, done.text
    assert int(line[1]) == nb["under"] > 0
    assert line[2] == f"{nb['under_us']:.2f}" and line[3] == f"{nb['kept_us']:.2f}"
    assert (nb["under_us"] >= nb["kept_us"]) is True
    assert "not_better holds by the cost model: True" in done.text
