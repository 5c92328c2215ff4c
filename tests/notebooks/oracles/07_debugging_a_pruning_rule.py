import dataclasses as _dc
import json
from prism.check import max_rel_err
from prism.cost import modeled
from prism.ir.spec import substitute_graph
from prism.search import RULE_NAMES
from prism.search.audit import within_limits
from prism.trace import FamilyGenerated as _Gen, FamilyPruned as _Pruned
from prism.verify.randomized import random_test
from prism.workloads.known_best import known_best as _known_best

_cost = base.device


def _modeled(graph, env):
    return modeled(substitute_graph(graph, env), _cost).latency_us


def _best(found):
    b = found.best
    return {"id": b.id, "kernels": b.graph.num_kernels, "assignment": b.assignment,
            "modeled_us": _modeled(b.graph, b.assignment)}


# the plain search's tree, from the raw events (not SearchState)
_parent = {e.id: e.parent for e in plain_tracer.events if isinstance(e, _Gen)}
_description = {e.id: e.description for e in plain_tracer.events if isinstance(e, _Gen)}
_path = [plain.best.family]
while _parent.get(_path[-1]) is not None:
    _path.append(_parent[_path[-1]])
_a = plain.best.assignment
_x_fmaps = []
for _f in second.wrong:
    ((_op, _block),) = list(graph_from_json(_f["graph"]).iter_blocks())
    _loads = [b for b in _block.ops if b.kind == "input"]
    _x_fmaps.append(next(str(b.attr["fmap"]) for s, b in zip(_op.inputs, _loads, strict=True)
                         if s == "X"))
_inputs = workload.random_inputs(SEED + 1)
_off = search(workload.graph, _dc.replace(fixed, disabled=frozenset({RULE})))


# The exercise's check must reject the same rule with the claim no_equivalent: a block op
# rms_norm after the loop, on accumulated whole rows, is right.
def _no_equivalent(ctx, family):
    pruned = my_rule(ctx, family)
    return None if pruned is None else Pruned(MY_RULE, pruned.reason,
                                              {**pruned.evidence, "claim": "no_equivalent"})


try:
    check_my_rule(_no_equivalent)
    _rejects = False
except AssertionError:
    _rejects = True
print("ORACLE " + json.dumps({
    "exercise_rejects_no_equivalent": _rejects,
    "plain": _best(plain), "with_rule": _best(with_rule), "repaired": _best(repaired),
    # the hand-written kernel at the winner's sizes costs what the winner costs
    "known_best_us": _modeled(_known_best("rmsnorm_matmul", SHAPES, grid=_a["gx"],
                                          loop=_a["F"]), {}),
    "rules": [*RULE_NAMES, RULE],
    "pruned_events": sum(1 for e in buggy_tracer.events
                         if isinstance(e, _Pruned) and e.rule == RULE),
    "plain_path": _path[::-1],
    # the audit's families, looked up in the plain search's own numbering
    "wrong_descriptions": {f["family"]: _description[f["family"]] for f in report.wrong},
    "lost": {"candidate": lost_finding["candidate"], "family": lost_finding["family"],
             "assignment": lost_env, "modeled_us": _modeled(lost, lost_env),
             "fits": within_limits(lost, lost_env, device),
             "random_test": random_test(workload.graph, lost, assignments=[lost_env]).equal,
             "err_vs_torch": max_rel_err(prism.interpret(lost, *_inputs, assignment=lost_env),
                                         workload.reference(*_inputs))},
    "second_x_fmaps": _x_fmaps,
    "fixed_rule_off_generated": _off.generated, "plain_generated": plain.generated,
    "audits": {name: {"sound": a.sound, "pruned": a.pruned, "equivalent": a.equivalent,
                      "wrong": len(a.wrong)}
               for name, a in (("first", report), ("second", second), ("third", third))}}))
