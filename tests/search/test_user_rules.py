"""A user's own pruning rules (`SearchConfig(rules=...)`): run after the built-ins, counted,
traced, switchable off and auditable by name. Oracles: the plain search's candidates (a rule
switched off changes nothing), the verifier and the float64 interpreter against torch (what an
unsound rule's audit finding computes)."""

import pytest

import prism
from prism.check import max_rel_err
from prism.ir.serialize import graph_from_json
from prism.search import SearchConfig, SearchConfigError, audit, search
from prism.search.pruning import Pruned
from prism.trace import FamilyPruned, Tracer


def prune_every_stored_block(ctx, fam):
    """Unsound on purpose: every block graph that stores its result is pruned."""
    if fam.level == "close":
        return Pruned("prune_every_stored_block", "no block graph may store its result",
                      {"claim": "no_equivalent"})
    return None


def no_exp(ctx, fam):
    """Sound for a program without exp: a tensor made by exp is no part of it."""
    if fam.level == "block" and fam.kind == "exp":
        return Pruned("no_exp", "the target computes no exp", {"claim": "no_equivalent"})
    return None


def _ids(result):
    return sorted((c.family, c.id) for c in result.equivalent)


def test_a_user_rule_prunes_is_counted_and_traced(cases):
    w = cases.small("rmsnorm_matmul")
    config = cases.reduced("rmsnorm_matmul", rules=(("prune_every_stored_block",
                                                     prune_every_stored_block),))
    tracer = Tracer()
    result = search(w.graph, config, tracer=tracer)
    pruned = result.summary()["families"]["pruned"]
    assert list(pruned)[-1] == "prune_every_stored_block" and pruned[
        "prune_every_stored_block"] > 0
    assert not result.equivalent                     # every fused kernel stores a block's result
    events = [e for e in tracer.events if isinstance(e, FamilyPruned)
              and e.rule == "prune_every_stored_block"]
    assert len(events) == pruned["prune_every_stored_block"]
    assert result.to_json()["config"]["user_rules"] == ["prune_every_stored_block"]


def test_a_user_rule_switched_off_changes_nothing(cases):
    w = cases.small("rmsnorm_matmul")
    off = cases.reduced("rmsnorm_matmul", rules=(("prune_every_stored_block",
                                                  prune_every_stored_block),),
                        disabled=frozenset({"prune_every_stored_block"}))
    assert _ids(search(w.graph, off)) == _ids(cases.searched("rmsnorm_matmul"))


def test_the_audit_finds_an_unsound_user_rule_and_its_finding_computes_the_program(cases):
    w = cases.small("rmsnorm_matmul")
    config = cases.reduced("rmsnorm_matmul", rules=(("prune_every_stored_block",
                                                     prune_every_stored_block),))
    report = audit(w.graph, "prune_every_stored_block", config, label="rmsnorm_matmul")
    assert not report.sound and report.pruned > 0
    finding = report.wrong[0]
    assert finding["rule"] == "prune_every_stored_block"
    program = graph_from_json(finding["graph"])
    assert prism.verify(w.graph, program).verdict == "equivalent"
    env = {v: 1 for v in program.free_vars()}
    inputs = w.random_inputs(3)
    assert max_rel_err(prism.interpret(program, *inputs, assignment=env),
                       w.reference(*inputs)) < 1e-9


def test_the_audit_finds_a_sound_user_rule_sound(cases):
    w = cases.small("rmsnorm_matmul")
    # abstract_expression off: it would prune every exp family before the user rule is asked
    config = cases.reduced("rmsnorm_matmul", block_ops=("matmul", "div", "rms_norm", "exp"),
                           rules=(("no_exp", no_exp),),
                           disabled=frozenset({"abstract_expression"}))
    report = audit(w.graph, "no_exp", config, label="rmsnorm_matmul")
    assert report.complete and report.pruned > 0
    assert report.sound, report.wrong


@pytest.mark.parametrize(("rules", "message"), [
    ((("cannot_close", no_exp),), "taken"),
    ((("no_exp", no_exp), ("no_exp", no_exp)), "taken"),
    ((("no exp", no_exp),), "identifier"),
    ((("no_exp", 3),), r"\(name, function\) pair"),
    ((no_exp,), r"\(name, function\) pair"),                   # the name forgotten
    (("no_exp", no_exp), r"\(name, function\) pair"),          # the pair not in a tuple
])
def test_a_bad_user_rule_is_a_clear_error(rules, message):
    with pytest.raises(SearchConfigError, match=message):
        SearchConfig(rules=rules)


def test_disabling_an_unknown_rule_names_the_user_rules_too():
    with pytest.raises(SearchConfigError, match="no_exp"):
        SearchConfig(rules=(("no_exp", no_exp),), disabled=frozenset({"nonsense"}))
