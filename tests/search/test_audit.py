"""`--audit-rule`: each rule's prunes, re-explored, completed and verified, hold their claims —
and an unsound rule is caught (the audit can fail)."""

from dataclasses import replace

import pytest

from prism.cost import get_device
from prism.search import audit
from prism.search import pruning as pruning_module
from prism.search.config import KERNEL_OPS
from prism.search.pruning import Pruned

H100 = get_device("h100")

WORKLOADS = ("rmsnorm_matmul", "rmsnorm_mlp", "swiglu", "gated_mlp", "attention",
             "qknorm_attention", "gqa", "lora", "ntrans")
# Audit caps: each workload's reduced search (tests/conftest.py) with fewer block ops where the
# audit would otherwise explore for minutes (an audit explores everything its rule pruned).
AUDIT_CAPS = {"rmsnorm_mlp": dict(max_block_ops=6), "qknorm_attention": dict(max_block_ops=6),
              "ntrans": dict(max_block_ops=4)}
SMALL_ABSTRACT_CAPS = dict(max_block_ops=4)   # the abstract-expression audit explores most
# What each rule needs to prune at all: a device with 256 B of shared memory, and pre-defined
# kernel ops (so that a first verified program is an incumbent to bound by).
TINY_SMEM = replace(H100, smem_bytes=256)


def rule_settings(cases, name, rule):
    caps = dict(AUDIT_CAPS.get(name, {}))
    if rule == "abstract_expression" and name != "rmsnorm_matmul":
        caps = {**caps, **SMALL_ABSTRACT_CAPS}
    if rule == "hardware":
        caps["device"] = TINY_SMEM
    if rule == "cannot_close" and name == "ntrans":
        # out_of_reach's sibling bounds prune every ntrans family cannot_close would, earlier
        caps["disabled"] = frozenset({"out_of_reach"})
    if rule == "cost_bound":
        ops = {op.kind for op in cases.small(name).graph.ops}
        caps.update(kernel_ops=tuple(k for k in KERNEL_OPS if k in ops), max_kernel_ops=2)
    return cases.reduced(name, **caps)


# Where a rule's prunes were measured to hold completed programs the verifier checked (the
# audit then checks the claim on real programs, not only that nothing completes).
CHECKED = {"abstract_expression": {"rmsnorm_matmul"},
           "dead_end_output": {"rmsnorm_matmul", "rmsnorm_mlp", "attention", "gqa", "ntrans"},
           "hardware": {"rmsnorm_matmul", "lora"},
           "cost_bound": set(WORKLOADS) - {"ntrans", "rmsnorm_mlp", "qknorm_attention"}}


def audited(cases, name, rule):
    report = audit(cases.small(name).graph, rule, rule_settings(cases, name, rule), label=name)
    assert report.complete, "the audit did not finish"
    assert report.sound, report.wrong
    if name in CHECKED.get(rule, ()):
        assert report.pruned > 0 and report.checked > 0, report.to_json()
    return report


@pytest.mark.parametrize("name", WORKLOADS)
def test_cannot_close_prunes_only_blocks_that_never_close(cases, name):
    report = audited(cases, name, "cannot_close")
    assert report.pruned > 0 and report.checked == 0   # the claim: nothing under it completes


@pytest.mark.parametrize("name", WORKLOADS)
def test_dead_end_inputs_prunes_no_equivalent_program(cases, name):
    assert audited(cases, name, "dead_end_inputs").pruned > 0


@pytest.mark.parametrize("name", WORKLOADS)
def test_dead_end_output_prunes_no_equivalent_program(cases, name):
    audited(cases, name, "dead_end_output")


@pytest.mark.parametrize("name", WORKLOADS)
def test_abstract_expression_prunes_no_equivalent_program(cases, name):
    assert audited(cases, name, "abstract_expression").pruned > 0


@pytest.mark.parametrize("name", WORKLOADS)
def test_hardware_prunes_no_program_that_fits(cases, name):
    report = audited(cases, name, "hardware")
    if name in CHECKED["hardware"]:
        # equivalent programs do sit under these prunes: none fits, checked by enumeration
        assert report.equivalent > 0


@pytest.mark.parametrize("name", WORKLOADS)
def test_cost_bound_prunes_no_faster_program(cases, name):
    report = audited(cases, name, "cost_bound")
    if name in CHECKED["cost_bound"]:
        assert report.equivalent > 0   # none is faster than the incumbent, by the model


def test_an_unsound_rule_is_found(cases, monkeypatch):
    """A rule that prunes every block graph storing its result, claiming that nothing
    equivalent lies there: the audit completes those families and finds the fused kernel."""
    def liar(ctx, fam):
        if fam.level == "close":
            return Pruned("cost_bound", "prunes every stored block graph",
                          {"claim": "no_equivalent"})
        return None
    monkeypatch.setitem(pruning_module.RULES, "cost_bound", liar)
    report = audit(cases.small("rmsnorm_matmul").graph, "cost_bound",
                   cases.reduced("rmsnorm_matmul"), label="rmsnorm_matmul")
    assert not report.sound and report.wrong
    finding = report.wrong[0]
    assert finding["rule"] == "cost_bound" and finding["graph"]["format"] == "prism.kernel_graph"
    assert "equivalent program was pruned" in finding["finding"]


def test_unknown_rule_is_a_clear_error(cases):
    from prism.search import SearchConfigError
    with pytest.raises(SearchConfigError, match="the rules are"):
        audit(cases.small("swiglu").graph, "nonsense")
