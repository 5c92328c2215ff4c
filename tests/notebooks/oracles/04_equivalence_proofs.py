import json
import numpy as np
import torch
from prism.expr.egglog_oracle import egglog_check
from prism.expr.tensor_terms import evaluate as evaluate_term
rng = np.random.default_rng(SEED + 1)
x_, w_ = rng.standard_normal(SHAPES["X"]), rng.standard_normal(SHAPES["W"])
want = (torch.nn.functional.rms_norm(torch.tensor(x_), (x_.shape[-1],)) @ torch.tensor(w_)).numpy()
terms = [steps[0].before, *(s.after for s in steps)]
values = [evaluate_term(t, {"X": x_, "W": w_}, CHECK_AT) for t in terms]
step_err = max(float(np.abs(v.array - want).max() / np.abs(want).max()) for v in values)
egg = egglog_check(unfused_term, fused_term, SHAPES, CHECK_AT)
# The toy e-graph where its rewrite must not fire, against the engine's EGraph on the same term.
_toy = ToyEGraph()
_toy_top, _toy_a = _toy.add(("div", ("mul", "a", "3"), "2")), _toy.add("a")
_toy_merges = cancel_times_two(_toy)
_engine = EGraph()
_e_top, _e_a = _engine.add(parse("(div (mul a 3) 2)")), _engine.add(parse("a"))
_engine.run([Rule("times-two-cancels", "(div (mul ?x 2) 2)", "?x")])
# The exercise: its term equals `a` in float64, and its check refuses a rule that leaves the
# terms apart and a false rule that closes the proof.
_a = rng.standard_normal(5)
_why = {}
for _what, _rule in (("leaves the terms apart", Rule("plus-zero", "(add ?x 0)", "?x")),
                     ("closes the proof but is false", Rule("drop-factor", "(mul ?x ?y)", "?x"))):
    _message = _rejection(check_my_rule, _rule)
    _why[_what] = "accepted" if _message is None else \
        "z3 refutes" if _message.startswith("z3 refutes") else _message
print("ORACLE " + json.dumps({
    "toy_times_three": [_toy_merges, _toy.find(_toy_top) == _toy.find(_toy_a)],
    "engine_times_three": _engine.find(_e_top) == _engine.find(_e_a),
    "terms": len(terms), "step_err_vs_torch": step_err, "step_axes": [list(v.axes) for v in values],
    "egglog": egg.equivalent, "egglog_report": str(egg),
    "exercise": {"float64_equal": bool(np.array_equal(((_a * 1) * 2) / 2, _a)),
                 "rejects": _why}}))
