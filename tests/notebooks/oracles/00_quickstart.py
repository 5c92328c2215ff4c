import json
import math
import re
from collections import Counter

from prism.check import max_rel_err
from prism.cost import get_device, modeled
from prism.search.audit import feasible_assignments

_device = get_device(DEVICE)
_events = Counter(type(e).__name__ for e in result.trace)
_pruned = Counter(e.rule for e in result.trace if type(e).__name__ == "FamilyPruned")
_judged = [e for e in result.trace if type(e).__name__ in
           ("CandidateVerified", "CandidateRejected", "CandidateUndecided")]
_instantiated = Counter(e.candidate for e in result.trace if type(e).__name__ == "Instantiated")

# the winner's members by the audit's enumeration (every power of two up to the largest dim),
# each run in the float64 interpreter against torch: the one proof's worth, checked member by member
_arrays = workload.random_inputs(2)
_expected = workload.reference(*_arrays)
_covered = feasible_assignments(result.best.symbolic, _device)
_member_errs = [max_rel_err(prism.interpret(result.best.symbolic, *_arrays, assignment=env),
                            _expected) for env in _covered]


def _nbytes(shape):
    return math.prod(d.value for d in shape) * _device.dtype_bytes


def _us(nbytes, gbps):
    return nbytes / (gbps * 1e3)        # bytes over GB/s, in µs


# eager by hand: one library launch per operator, its distinct inputs and output moved once
# through HBM (these ops' FLOPs are far below it: matmul 2mnk, the norm a few per element)
_eager_ops = [op for op in workload.graph.ops if op.kind not in ("input", "output")]
_eager_rest, _eager_flops_us = 0.0, 0.0
for op in _eager_ops:
    _eager_rest += _us(sum(_nbytes(workload.graph.shape(t)) for t in {*op.inputs, *op.outputs}),
                       _device.mem_bw_gbps)
    out = [d.value for d in workload.graph.shape(op.outputs[0])]
    k = workload.graph.shape(op.inputs[0])[-1].value
    _eager_flops_us += (2 * math.prod(out) * k if op.kind == "matmul"
                        else 4 * math.prod(out)) / (_device.peak_tflops * 1e6)

# the fused kernel by hand: its launches in the generated run(), and one custom kernel's bytes:
# each tile loaded once per block (per iteration when the loop walks it), each output tile stored
# once per block; a tensor's own size through HBM, the replicated excess through L2, memory time
# divided by the fraction of SMs busy
_run_body = result.best.triton_source.split("\ndef run(", 1)[1]
_fused_launches = len(re.findall(r"^\s+\w+\[\(.*?\)\]\(", _run_body, re.M))
((_, _bg),) = result.best.graph.iter_blocks()
_blocks = math.prod(g.value for g in _bg.grid)
_loop = _bg.forloop_range.value
_hbm = _l2 = 0
for tile_op, tensor in zip(_bg.input_ops, next(op for op in result.best.graph.ops
                                               if op.kind == "customized").inputs, strict=True):
    walked = _loop > 1 and any(e.value == 1 for e in tile_op.attr["fmap"].rows[0])
    moved = _blocks * (_loop if walked else 1) * _nbytes(_bg.shape(tile_op.outputs[0]))
    own = _nbytes(result.best.graph.shape(tensor))
    _hbm, _l2 = _hbm + min(moved, own), _l2 + max(0, moved - own)
for out_op in _bg.output_ops:
    (tile,) = out_op.inputs
    _hbm += _blocks * _nbytes(_bg.shape(tile))
_fused_rest = ((_us(_hbm, _device.mem_bw_gbps) + _us(_l2, _device.l2_bw_gbps))
               / min(1, _blocks / _device.sm_count))


_exercise_rejects = [*(_rejects(check_speedup, speedup_without_launches * f) for f in (1.01, 0.99)),
                     _rejects(check_speedup, result.eager_us / best.modeled_us)]
print("ORACLE " + json.dumps({
    "exercise_rejects": _exercise_rejects,
    "latency_us": result.best.latency_us, "kind": result.best.latency_kind,
    "modeled_us": modeled(result.best.graph, get_device(DEVICE)).latency_us,
    "err_vs_torch": max_rel_err(prism.interpret(result.best.graph, *workload.random_inputs(1)),
                                workload.reference(*workload.random_inputs(1))),
    "bench_winner": bench.winner["best"], "winner": result.best.config,
    # the three numbers, from the trace's events and the audit
    "generated": _events["FamilyGenerated"], "pruned": dict(_pruned),
    "candidate": result.best.candidate, "covered": _covered, "member_errs": _member_errs,
    "covered_instantiated": _instantiated[result.best.candidate],
    # the two levels
    "complete": len({e.family for e in _judged}), "judged": len(_judged),
    "proved": _events["CandidateVerified"],
    "all_members": sum(len(feasible_assignments(c.graph, _device))
                       for c in result.search.candidates),
    "proved_members": sum(n for c, n in _instantiated.items() if c != "input"),
    # the launches
    "launch_us": _device.launch_us, "eager_us": result.eager_us,
    "eager_launches": len(_eager_ops), "eager_rest": _eager_rest,
    "eager_flops_us": _eager_flops_us, "fused_launches": _fused_launches,
    "fused_rest": _fused_rest, "fused_us": result.best.modeled_us}))
