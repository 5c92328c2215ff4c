import json
import numpy as np
import torch
from prism.expr.evidence import random_evidence
rng = np.random.default_rng(1)
k, g = 12, 3                                      # Σ over K-chunks of A_i B_i, by hand
a_, b_ = rng.standard_normal((4, k)), rng.standard_normal((k, 5))
chunks = sum(a_[:, i * k // g:(i + 1) * k // g] @ b_[i * k // g:(i + 1) * k // g] for i in range(g))
good, bad = random_evidence(axiom), random_evidence(wrong)
xs, ws = float_inputs(shapes, cex["seed"])   # the mutant by hand, at any member: (X W) / mean(X)
mutant_by_hand = (xs @ ws) / xs.mean(axis=1, keepdims=True)
target_by_torch = (torch.nn.functional.rms_norm(torch.tensor(xs), (xs.shape[-1],))
                   @ torch.tensor(ws)).numpy()
i = tuple(cex["index"])
# the exercise's check must reject each
_wrong_predictions = [_y for _y in (1.0, 2.0, -1.0) if _rejects(check_y_counter, _y)]
print("ORACLE " + json.dumps({
    "check_rejects": _wrong_predictions,
    "k_split_err": float(np.abs(chunks - a_ @ b_).max()),
    "axiom": axiom.name, "random_instances": good.instances, "random_failures": len(good.failures),
    "wrong_random_failures": len(bad.failures), "wrong_random_instances": bad.instances,
    "cex_target": float(target_by_torch[i]), "cex_mutant": float(mutant_by_hand[i]),
    "cex_mismatches": int((np.abs(mutant_by_hand - target_by_torch)
                           > 1e-9 * np.abs(target_by_torch).max()).sum())}))
