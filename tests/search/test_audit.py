"""`--audit-rule`: each rule's prunes, re-explored, completed and verified, hold their claims —
and an unsound rule is caught (the audit can fail)."""

import pytest

from prism.search import audit
from prism.search import pruning as pruning_module
from prism.search.hardware import Device
from prism.search.pruning import Pruned

# Per workload and rule: settings under which the rule prunes something and the families under
# its prunes complete into programs the verifier checks.
SETTINGS = {
    ("rmsnorm_matmul", "structural"): dict(max_block_ops=5),
    ("rmsnorm_matmul", "abstract_expression"): dict(),
    ("rmsnorm_matmul", "hardware"): dict(device=Device(smem_bytes=256)),
    ("rmsnorm_matmul", "cost_bound"): dict(kernel_ops=("matmul", "rms_norm"), max_kernel_ops=2),
    ("swiglu", "structural"): dict(),
    ("swiglu", "abstract_expression"): dict(max_block_ops=3),
    ("swiglu", "hardware"): dict(device=Device(smem_bytes=256)),
    ("swiglu", "cost_bound"): dict(kernel_ops=("matmul", "silu", "mul"), max_kernel_ops=2),
}


@pytest.mark.parametrize(("name", "rule"), sorted(SETTINGS))
def test_no_rule_prunes_an_equivalent_program_wrongly(name, rule, cases):
    report = audit(cases.small(name).graph, rule, cases.reduced(name, **SETTINGS[name, rule]),
                   label=name)
    assert report.complete and report.pruned > 0
    assert report.sound, report.wrong
    if rule in ("abstract_expression", "hardware", "cost_bound") or name == "rmsnorm_matmul":
        assert report.checked > 0, "nothing under the prunes was completed and verified"
    if rule in ("hardware", "cost_bound"):
        # Equivalent programs do sit under these prunes: the claims (none fits the device,
        # none is faster) are what the audit checked, by enumeration and by the model.
        assert report.equivalent > 0


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
