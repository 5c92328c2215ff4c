import json
import numpy as np
import torch
from prism.expr.egglog_oracle import egglog_check
from prism.expr.evidence import random_evidence
from prism.expr.tensor_terms import evaluate as evaluate_term
rng = np.random.default_rng(SEED + 1)
x_, w_ = rng.standard_normal(SHAPES["X"]), rng.standard_normal(SHAPES["W"])
want = (torch.nn.functional.rms_norm(torch.tensor(x_), (x_.shape[-1],)) @ torch.tensor(w_)).numpy()
terms = [steps[0].before, *(s.after for s in steps)]
values = [evaluate_term(t, {"X": x_, "W": w_}, CHECK_AT) for t in terms]
step_err = max(float(np.abs(v.array - want).max() / np.abs(want).max()) for v in values)
egg = egglog_check(unfused_term, fused_term, SHAPES, CHECK_AT)
k, g = 12, 3                                      # Σ over K-chunks of A_i B_i, by hand
a_, b_ = rng.standard_normal((4, k)), rng.standard_normal((k, 5))
chunks = sum(a_[:, i * k // g:(i + 1) * k // g] @ b_[i * k // g:(i + 1) * k // g] for i in range(g))
good, bad = random_evidence(axiom), random_evidence(wrong)
xs, ws = float_inputs(shapes, cex["seed"])   # the mutant by hand, at any member: (X W) / mean(X)
mutant_by_hand = (xs @ ws) / xs.mean(axis=1, keepdims=True)
target_by_torch = (torch.nn.functional.rms_norm(torch.tensor(xs), (xs.shape[-1],))
                   @ torch.tensor(ws)).numpy()
i = tuple(cex["index"])
# The toy e-graph where its rewrite must not fire, against the engine's EGraph on the same term.
_toy = ToyEGraph()
_toy_top, _toy_a = _toy.add(("div", ("mul", "a", "3"), "2")), _toy.add("a")
_toy_merges = cancel_times_two(_toy)
_engine = EGraph()
_e_top, _e_a = _engine.add(parse("(div (mul a 3) 2)")), _engine.add(parse("a"))
_engine.run([Rule("times-two-cancels", "(div (mul ?x 2) 2)", "?x")])
_wrong_predictions = []
for _y in (1.0, 2.0, -1.0):           # the exercise's check must reject each
    try:
        check_y_counter(_y)
    except AssertionError:
        _wrong_predictions.append(_y)
print("ORACLE " + json.dumps({
    "toy_times_three": [_toy_merges, _toy.find(_toy_top) == _toy.find(_toy_a)],
    "engine_times_three": _engine.find(_e_top) == _engine.find(_e_a),
    "check_rejects": _wrong_predictions,
    "terms": len(terms), "step_err_vs_torch": step_err, "step_axes": [list(v.axes) for v in values],
    "egglog": egg.equivalent, "egglog_report": str(egg),
    "k_split_err": float(np.abs(chunks - a_ @ b_).max()),
    "axiom": axiom.name, "random_instances": good.instances, "random_failures": len(good.failures),
    "wrong_random_failures": len(bad.failures), "wrong_random_instances": bad.instances,
    "cex_target": float(target_by_torch[i]), "cex_mutant": float(mutant_by_hand[i]),
    "cex_mismatches": int((np.abs(mutant_by_hand - target_by_torch)
                           > 1e-9 * np.abs(target_by_torch).max()).sum())}))
