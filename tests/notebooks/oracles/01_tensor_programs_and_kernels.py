import json
import numpy as np
import torch
from prism.check import max_rel_err
rng = np.random.default_rng(12345)
xs = [rng.standard_normal(SHAPES[p]) for p in ("X", "W")]
X_t, W_t = (torch.from_numpy(a) for a in xs)
want = (torch.nn.functional.rms_norm(X_t, (X_t.shape[-1],)) @ W_t).numpy()
print("ORACLE " + json.dumps({"fused_vs_torch": max_rel_err(prism.interpret(fused, *xs), [want]),
                              "sweep": len(SWEEP) ** 2}))
