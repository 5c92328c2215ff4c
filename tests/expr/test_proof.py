"""The explanation checker accepts a hand-written correct proof and rejects every forged step
(oracle: proofs written by hand, each forgery breaking exactly one thing)."""

from dataclasses import replace

import pytest

from prism.errors import ProofCheckError
from prism.expr import Facts, Rule, Step, check_explanation, parse


def nonzero_divisor(facts: Facts) -> bool:
    return facts.atom("?b") != "0"


RULES = [
    Rule("cancel", "(/ (* ?a ?b) ?b)", "?a", condition=nonzero_divisor),  # ab/b = a, b≠0
    Rule("comm-mul", "(* ?a ?b)", "(* ?b ?a)"),  # ab = ba
]
T = parse


def step(rule, direction, before, after, path, **subst):
    return Step(rule, direction, T(before), T(after), path,
                {f"?{v}": T(t) for v, t in subst.items()})


# g(xy/y) = g(x): commute the product there and back (a detour), then cancel
START, END = T("(g (/ (* x y) y))"), T("(g x)")
GOOD = [step("comm-mul", "forward", "(g (/ (* x y) y))", "(g (/ (* y x) y))", (0, 0),
             a="x", b="y"),
        step("comm-mul", "backward", "(g (/ (* y x) y))", "(g (/ (* x y) y))", (0, 0),
             a="x", b="y"),
        step("cancel", "forward", "(g (/ (* x y) y))", "(g x)", (0,), a="x", b="y")]


def test_a_correct_explanation_checks():
    check_explanation(GOOD, RULES, START, END)
    check_explanation([], RULES, START, START)


def forged(index, **changes):
    steps = list(GOOD)
    steps[index] = replace(steps[index], **changes)
    return steps


@pytest.mark.parametrize(("steps", "message"), [
    (forged(2, path=(0, 0)), r"step 2 .*is not \(/ \(\* \?a \?b\) \?b\)"),
    (forged(2, path=(3,)), r"step 2 .*has 1 argument"),
    (forged(2, rule="cancel-all"), r"step 2 .*no rule named 'cancel-all'"),
    (forged(0, rule="cancel"), r"step 0 .*is not \(/"),
    (forged(2, direction="sideways"), r"step 2 .*direction must be"),
    (forged(2, subst={"?a": T("x"), "?b": T("x")}), r"step 2 .*is not .* under the subst"),
    (forged(2, subst={"?a": T("x")}), r"step 2 .*binds \['\?a'\]"),
    (forged(0, subst={"?a": T("x"), "?b": T("y"), "?c": T("z")}), r"step 0 .*binds"),
    (forged(2, after=T("(g y)")), r"step 2 .*rewriting gives \(g x\), the step claims \(g y\)"),
    (forged(1, before=T("(g (/ (* y y) y))")), r"step 1: starts from"),
    (GOOD[:2], r"ends at \(g \(/ \(\* x y\) y\)\), not at \(g x\)"),
])
def test_forged_steps_are_rejected(steps, message):
    with pytest.raises(ProofCheckError, match=message):
        check_explanation(steps, RULES, START, END)


def test_a_step_that_violates_the_condition_is_rejected():
    # (x·0)/0 = x does not follow: the condition b ≠ 0 fails, although the pattern matches
    bad = step("cancel", "forward", "(/ (* x 0) 0)", "x", (), a="x", b="0")
    with pytest.raises(ProofCheckError, match=r"step 0 .*condition does not hold .*\?b ↦ 0"):
        check_explanation([bad], RULES, T("(/ (* x 0) 0)"), T("x"))


def test_a_forward_only_rule_may_be_used_backward():
    # an explanation is an equality proof: x = ab/b read right to left is a backward step
    back = step("cancel", "backward", "x", "(/ (* x y) y)", (), a="x", b="y")
    check_explanation([back], RULES, T("x"), T("(/ (* x y) y)"))
    with pytest.raises(ProofCheckError, match="condition does not hold"):
        check_explanation([replace(back, after=T("(/ (* x 0) 0)"), subst={"?a": T("x"),
                                                                         "?b": T("0")})],
                          RULES, T("x"), T("(/ (* x 0) 0)"))
