import json
from prism.cost import get_device, modeled
from prism.expr.terms import parse
from prism.ir.spec import substitute_graph
from prism.search import audit
from prism.search.abstract import AbstractTarget
from prism.search.audit import feasible_assignments
from prism.trace import FamilyGenerated as _Gen, FamilyPruned as _Pruned

# the tree, from the raw events (not SearchState): parents, depths, the rule that pruned each
_parent = {e.id: e.parent for e in tracer.events if isinstance(e, _Gen)}
_rule = {e.id: e.rule for e in tracer.events if isinstance(e, _Pruned)}


def _depth(fid):
    d = 0
    while _parent.get(fid) is not None:
        fid, d = _parent[fid], d + 1
    return d


def _path(fid):
    out = [fid]
    while _parent.get(out[-1]) is not None:
        out.append(_parent[out[-1]])
    return out[::-1]


def _modeled(cand, device_name):
    graph = substitute_graph(cand.graph, cand.assignment)
    return modeled(graph, get_device(device_name)).latency_us


_counts = {}
for e in tracer.events:
    if isinstance(e, _Pruned):
        _counts[e.rule] = _counts.get(e.rule, 0) + 1
_generated = sum(1 for e in tracer.events if isinstance(e, _Gen))
# audits: each rule's prunes re-explored and their claims checked (enumeration, the cost model)
_audits = {rule: audit(workload.graph, rule, cfg) for rule, cfg in
           (("structural", config), ("hardware", small_config), ("cost_bound", config))}
_on = {"structural": result, "hardware": small, "cost_bound": result}
_incumbent = next(c for c in result.candidates if c.id == bounded[0].evidence["incumbent"])
_target = AbstractTarget(workload.graph)
print("ORACLE " + json.dumps({
    "generated": _generated, "pruned": _counts, "kept": _generated - sum(_counts.values()),
    "tree": [[e.id, _depth(e.id), _rule.get(e.id)]
             for e in [e for e in tracer.events if isinstance(e, _Gen)][:FIRST_EVENTS]],
    "winner_path": _path(result.best.family),
    "best": {"id": result.best.id, "kernels": result.best.graph.num_kernels,
             "modeled_us": _modeled(result.best, config.cost_device)},
    "small_best": {"id": small.best.id, "kernels": small.best.graph.num_kernels,
                   "modeled_us": _modeled(small.best, small_config.cost_device)},
    "incumbent": {"id": _incumbent.id, "modeled_us": _modeled(_incumbent, config.cost_device)},
    "abstract": {"expression": abstract[0].evidence["expression"],
                 "in_target": _target.lookup(parse(abstract[0].evidence["expression"]))
                 is not None,
                 "target_in_target": _target.lookup(parse(abstract[0].evidence["target"]))
                 is not None},
    "fused_fits": {"default": feasible_assignments(fused, config.device),
                   "small": feasible_assignments(fused, small_device)},
    "audits": {rule: {"sound": a.sound, "pruned": a.pruned, "explored": a.explored,
                      "checked": a.checked, "equivalent": a.equivalent,
                      "off_generated": _on[rule].generated + a.explored,
                      "off_candidates": len(_on[rule].candidates) + a.checked,
                      "off_equivalent": len(_on[rule].equivalent) + a.equivalent}
               for rule, a in _audits.items()},
    "max_families": ABLATION_MAX_FAMILIES, "small_smem": SMALL_SMEM_BYTES}))
