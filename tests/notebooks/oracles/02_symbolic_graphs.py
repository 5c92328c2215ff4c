import json
from prism.instantiate.params import assignments
from prism.ir.spec import substitute_graph
((_, symbolic),) = sgraph.iter_blocks()
out = {"members": len(assignments(sgraph)), "assignments": {}}
for env in ASSIGNMENTS:
    ((_, concrete),) = substitute_graph(sgraph, env).iter_blocks()
    out["assignments"][json.dumps(env)] = {
        name: {"symbolic": ", ".join(str(d) for d in symbolic.shape(name)),
               "tile": [d.value for d in shape]} for name, shape in concrete.tensors}


out["exercise_rejects"] = [_rejects(check_first_failing_gx, g) for g in (4, 16)]
print("ORACLE " + json.dumps(out))
