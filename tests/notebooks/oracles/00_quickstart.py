import json
from prism.check import max_rel_err
from prism.cost import get_device, modeled
print("ORACLE " + json.dumps({
    "latency_us": result.best.latency_us, "kind": result.best.latency_kind,
    "modeled_us": modeled(result.best.graph, get_device(DEVICE)).latency_us,
    "err_vs_torch": max_rel_err(prism.interpret(result.best.graph, *workload.random_inputs(1)),
                                workload.reference(*workload.random_inputs(1))),
    "bench_winner": bench.winner["best"], "winner": result.best.config}))
