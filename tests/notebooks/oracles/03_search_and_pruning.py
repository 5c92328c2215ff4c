import json
import re as _re
import numpy as _np
import torch as _torch
from prism.cost import modeled
from prism.expr.tensor_terms import evaluate as _evaluate
from prism.expr.terms import parse
from prism.ir.serialize import graph_from_json as _from_json
from prism.ir.spec import substitute_graph
from prism.search import audit
from prism.search.abstract import AbstractLimits as _Limits, AbstractTarget
from prism.search.audit import feasible_assignments
from prism.trace import (CandidateRejected as _Rejected, CandidateUndecided as _Undecided,
                         CandidateVerified as _Verified, FamilyGenerated as _Gen,
                         FamilyPruned as _Pruned, Tracer as _Tracer)

# the tree, from the raw events (not SearchState): parents, depths, the rule that pruned each
_gen = {e.id: e for e in tracer.events if isinstance(e, _Gen)}
_parent = {fid: e.parent for fid, e in _gen.items()}
_rule = {e.id: e.rule for e in tracer.events if isinstance(e, _Pruned)}
_pruned_events = [e for e in tracer.events if isinstance(e, _Pruned)]


def _depth(fid):
    d = 0
    while _parent.get(fid) is not None:
        fid, d = _parent[fid], d + 1
    return d


def _path(fid, parent=_parent):
    out = [fid]
    while parent.get(out[-1]) is not None:
        out.append(parent[out[-1]])
    return out[::-1]


def _modeled(cand, device):
    graph = substitute_graph(cand.graph, cand.assignment)
    return modeled(graph, device).latency_us


_incumbent = next(c for c in result.candidates if c.id == bounded[0].evidence["incumbent"])
_counts = {}
for e in _pruned_events:
    _counts[e.rule] = _counts.get(e.rule, 0) + 1
_generated = len(_gen)

# 3.1, from the path's descriptions alone (not the rules' code): what each example's rule saw
_OP = _re.compile(r"^block op (\w+) = \w+\((.*)\)$")
_KOP = _re.compile(r"^kernel op (\w+) = \w+\((.*)\)$")
_OPEN = _re.compile(r"^custom kernel on (.*), symbolic grid")
_STORE = _re.compile(r"^store \w+ as kernel tensor (\w+)")


def _walk(fid):
    """Kernels made (custom and pre-defined), the open block's ops and waiting tensors, and the
    graph inputs each kernel tensor reaches, replaying the decisions on the path."""
    reach = {t: {t} for t in workload.graph.inputs}
    kernels, ops, waiting, sources = 0, 0, set(), []
    for step in _path(fid):
        text = _gen[step].description
        if m := _OPEN.match(text):
            kernels += 1
            sources = m[1].split(", ")
            ops, waiting = 0, {f"{s}_tile" for s in sources}
        elif m := _OP.match(text):
            ops += 1
            waiting = (waiting - set(m[2].split(", "))) | {m[1]}
        elif m := _STORE.match(text):
            reach[m[1]] = set().union(*(reach[s] for s in sources))
        elif m := _KOP.match(text):
            kernels += 1
            reach[m[1]] = set().union(*(reach[a] for a in m[2].split(", ")))
    return {"kernels": kernels, "ops": ops, "waiting": len(waiting), "sources": sources,
            "reached": sorted(set().union(*(reach[s] for s in sources))) if sources else []}


_examples = {rule: next(e for e in _pruned_events if e.rule == rule)
             for rule in ("cannot_close", "dead_end_inputs", "dead_end_output")}
_rng = _np.random.default_rng(7)
_x, _w = _rng.standard_normal(SHAPES["X"]), _rng.standard_normal(SHAPES["W"])
_want = (_torch.nn.functional.rms_norm(_torch.tensor(_x), (_x.shape[-1],))
         @ _torch.tensor(_w)).numpy()
_stored = _evaluate(parse(_examples["dead_end_output"].evidence["expression"]),
                    {"X": _x, "W": _w}, {}).array
_dead_ends = {rule: {"id": e.id, **_walk(e.id)} for rule, e in _examples.items()}
_dead_ends["dead_end_output"]["differs_from_torch"] = bool(
    _stored.shape != _want.shape or _np.abs(_stored - _want).max() > 1e-6)

# 3.3: the out_of_reach example's path replayed: the kernel it opens and the ops it has used
_reach_example = {"id": reach[0].id, **_walk(reach[0].id)}

# 3.2: one iteration short of saturation, the e-graph holds the same e-nodes and is unsaturated
_target = AbstractTarget(workload.graph)
_short = AbstractTarget(workload.graph, _Limits(iterations=_target.report.iterations - 1))

# 4: every rule off, counted from its raw trace (not the result's counters)
_unpruned = {"generated": sum(isinstance(e, _Gen) for e in unpruned_tracer.events),
             "pruned": sum(isinstance(e, _Pruned) for e in unpruned_tracer.events),
             "candidates": sum(isinstance(e, (_Verified, _Rejected, _Undecided))
                               for e in unpruned_tracer.events),
             "on_candidates": sum(isinstance(e, (_Verified, _Rejected, _Undecided))
                                  for e in tracer.events)}


# 4: each rule's audit, traced. The observed rule prunes nothing, so the audit's run is the
# search with the rule off; its prunes re-explored predict that search's extra work.
def _audit(rule, cfg):
    t = _Tracer()
    a = audit(workload.graph, rule, cfg, tracer=t)
    return a, t.events


_audits = {rule: _audit(rule, small_config if rule == "hardware" else config)
           for rule in RULE_NAMES if rule != "abstract_expression"}
_on = {rule: small if rule == "hardware" else result for rule in _audits}


def _unnamed(graph):
    return dataclasses.replace(graph, name="")


# out_of_reach's audit tells outputs by shape, but switched off it changes nothing else: the
# ablation's row is a search of its own, counted from its raw trace
_reach_off_tracer = _Tracer()
search(workload.graph, dataclasses.replace(config, disabled=frozenset({"out_of_reach"}),
                                           max_families=ABLATION_MAX_FAMILIES),
       tracer=_reach_off_tracer)
_reach_off = {"generated": sum(isinstance(e, _Gen) for e in _reach_off_tracer.events),
              "candidates": sum(isinstance(e, (_Verified, _Rejected, _Undecided))
                                for e in _reach_off_tracer.events),
              "equivalent": sum(isinstance(e, _Verified) for e in _reach_off_tracer.events),
              "pruned": sum(isinstance(e, _Pruned) for e in _reach_off_tracer.events),
              "keeps_on": {_unnamed(c.graph) for c in result.equivalent}
              <= {_unnamed(_from_json(e.graph)) for e in _reach_off_tracer.events
                  if isinstance(e, _Verified)}}


# the programs proved with dead_end_output on but not off: a custom kernel whose output has the
# target's output shape, then matmul; that one-kernel prefix was refuted in the audit's run
_deo_events = _audits["dead_end_output"][1]
_refuted_blocks = [g.custom_ops[0].block
                   for g in (_from_json(e.graph) for e in _deo_events if isinstance(e, _Rejected))
                   if len(g.custom_ops) == 1 and g.num_kernels == 1]
_off_proved = {_unnamed(_from_json(e.graph)) for e in _deo_events if isinstance(e, _Verified)}
_out_shape = workload.graph.shape(workload.graph.outputs[0])
_missing = []
for c in result.equivalent:
    g = c.graph
    if _unnamed(g) in _off_proved:
        continue
    steps = [op for op in g.ops if op.kind not in ("input", "output")]
    _missing.append({"kinds": [op.kind for op in steps],
                     "first_shape_is_output": g.shape(steps[0].outputs[0]) == _out_shape,
                     "then_matmul_of_it": steps[-1].inputs[0] == steps[0].outputs[0],
                     "prefix_refuted": steps[0].block in _refuted_blocks})

# the tree's counts under the top family of the jump's path, from the raw events: its
# descendants by parent links, each kept or pruned by a rule, and its children grouped
_top = _path(bounded[0].id)[0]
_under = [fid for fid in _gen if _top in _path(fid)]
_tree_pruned = {}
for _fid in _under:
    if _fid in _rule:
        _tree_pruned[_rule[_fid]] = _tree_pruned.get(_rule[_fid], 0) + 1
_tree_groups = {}
for _fid, _p in _parent.items():
    if _p == _top:
        _head = _rule.get(_fid, "kept")
        _tree_groups[_head] = _tree_groups.get(_head, 0) + 1

_exercise_rejects = [*(_rejects(check_prunes, {**prunes_by_rule, r: n + 1})
                       for r, n in list(prunes_by_rule.items())[:2]),
                     _rejects(check_prunes, {})]
print("ORACLE " + json.dumps({
    "exercise_rejects": _exercise_rejects,
    "generated": _generated, "pruned": _counts, "kept": _generated - sum(_counts.values()),
    "exhaustive": not any(e.evidence.get("claim") == "unproven" for e in _pruned_events),
    "claims": sorted({e.evidence["claim"] for e in _pruned_events}),
    "tree": [[e.id, _depth(e.id), _rule.get(e.id)]
             for e in [e for e in tracer.events if isinstance(e, _Gen)][:FIRST_EVENTS]],
    "winner_path": _path(result.best.family),
    "best": {"id": result.best.id, "kernels": result.best.graph.num_kernels,
             "modeled_us": _modeled(result.best, config.device)},
    "small_best": {"id": small.best.id, "kernels": small.best.graph.num_kernels,
                   "modeled_us": _modeled(small.best, small_config.device)},
    "incumbent": {"id": _incumbent.id, "modeled_us": _modeled(_incumbent, config.device)},
    "dead_ends": _dead_ends, "caps": {"block_ops": config.max_block_ops,
                                      "kernels": config.max_kernel_ops},
    "target_inputs": sorted(workload.graph.inputs),
    "abstract": {"expression": abstract[0].evidence["expression"],
                 "in_target": _target.lookup(parse(abstract[0].evidence["expression"]))
                 is not None,
                 "target_in_target": _target.lookup(parse(abstract[0].evidence["target"]))
                 is not None},
    "egraph": {"saturated": _target.saturated, "iterations": _target.report.iterations,
               "nodes": _target.report.nodes, "short_saturated": _short.saturated,
               "short_nodes": _short.report.nodes},
    "fused_fits": {"default": feasible_assignments(fused, config.device),
                   "small": feasible_assignments(fused, small_device)},
    "unpruned": {**_unpruned, "max_families": UNPRUNED_MAX_FAMILIES},
    "audits": {rule: {"sound": a.sound, "pruned": a.pruned, "explored": a.explored,
                      "checked": a.checked, "equivalent": a.equivalent,
                      "run_generated": sum(isinstance(e, _Gen) for e in events),
                      "run_candidates": sum(isinstance(e, (_Verified, _Rejected, _Undecided))
                                            for e in events),
                      "run_equivalent": sum(isinstance(e, _Verified) for e in events),
                      "on_plus_explored": _on[rule].generated + a.explored,
                      "on_plus_checked": len(_on[rule].candidates) + a.checked,
                      "on_plus_equivalent": len(_on[rule].equivalent) + a.equivalent}
               for rule, (a, events) in _audits.items()},
    "dead_end_output_missing": _missing, "reach_example": _reach_example,
    "reach_off": _reach_off,
    "search_tree": {"top": _top, "families": len(_under), "pruned": _tree_pruned,
             "kept": len(_under) - sum(_tree_pruned.values()), "groups": _tree_groups,
             "path": _path(bounded[0].id)},
    "max_families": ABLATION_MAX_FAMILIES, "small_smem": SMALL_SMEM_BYTES}))
