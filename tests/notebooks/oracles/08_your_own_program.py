import inspect
import json
import math as _math
import os
import re
import subprocess
import sys
import tempfile
import textwrap

import numpy as np

from prism.cost import get_device, modeled as modeled_cost

# The user's cell, as a file: the exact function source (its decorator included), then the
# command line the notebook says is the same run, and kernel.py imported the way a user would,
# all in one fresh process under TRITON_INTERPRET=1.
work = Path(tempfile.mkdtemp(prefix="prism-08-oracle-"))
(work / "my_program.py").write_text(
    f"import torch\nimport prism\n\nSHAPES = {SHAPES!r}\n\n\n"
    + inspect.getsource(gelu_residual.__wrapped__))
torch.save([t.cpu() for t in inputs], work / "inputs.pt")
caps = ["--max-block-ops", str(SEARCH["max_block_ops"]), "--grid-dims", "1",
        "--block-ops", ",".join(block_ops),
        "--accumulators", ",".join(SEARCH["accumulators"]), "--max-trials", str(MAX_TRIALS)]
script = textwrap.dedent(f"""
    import contextlib, io, json, sys, torch
    from prism.cli import main
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = main(["optimize", {str(work / "my_program.py")!r} + ":gelu_residual", *{caps!r},
                     "--out", {str(work / "cli")!r}, "--db", {str(work / "db.jsonl")!r},
                     "--budget", {str(BUDGET_S)!r}, "--json"])
    sys.path.insert(0, {str(out)!r})
    import kernel
    torch.save(kernel.run(*torch.load({str(work / "inputs.pt")!r})), {str(work / "got.pt")!r})
    print("CLI " + json.dumps({{"code": code, "doc": json.loads(buf.getvalue())}}))
""")
proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                      env={**os.environ, "TRITON_INTERPRET": "1"}, timeout=300)
cli = json.loads(proc.stdout.split("CLI ", 1)[1]) if "CLI " in proc.stdout else {
    "code": None, "doc": {"error": proc.stderr[-2000:]}}
fresh = torch.load(work / "got.pt") if (work / "got.pt").exists() else None
want64 = gelu_residual.__wrapped__(*[t.double().cpu() for t in inputs])

# The baselines by hand from the device table (each kernel max(bytes / bw, flops / peak) plus
# a launch; fp16 is 2 bytes): eager is matmul, gelu, add; the roofline reads X, W, H and writes
# the output once.
spec = get_device(DEVICE)
n, k = SHAPES["X"]
m = SHAPES["W"][1]
x, w, h, o = (2 * a * b for a, b in (SHAPES["X"], SHAPES["W"], SHAPES["H"], (n, m)))
bw, peak = spec.mem_bw_gbps * 1e3, spec.fp16_tflops * 1e6
eager_kernels = [(x + w + o, 2 * n * m * k), (2 * o, n * m), (h + 2 * o, n * m)]
flops_total = 2 * n * m * k + 2 * n * m
ptx_text = (out / "kernel.ptx").read_text()


_exercise_rejects = [_rejects(check_block_ops, b) for b in (
    ("matmul", "gelu"), ("matmul", "gelu", "add", "exp"), ("matmul", "matmul", "gelu", "add"))]
# Section 8, against torch itself in float64 (not the workloads' `.reference`): the module run
# in float64 on the drawn input, and F.scaled_dot_product_attention on the drawn Q, K, V with
# the boolean mask the drawn additive mask stands for (0 where a key is kept)
import copy as _copy

import torch.nn.functional as _F
_px = projection.random_inputs(SEED)
_p_ir = projection.graph.to_user(prism.interpret(projection.graph,
                                                 *projection.graph.to_ir(_px)))[0]
with torch.no_grad():
    _p_want = _copy.deepcopy(projection.module).double()(torch.from_numpy(_px[0])).numpy()
_projection_err = float(np.abs(_p_ir - _p_want).max() / np.abs(_p_want).max())
_attn = {}
for _w in (sdpa, by_hand):
    _d = _w.random_inputs(SEED)
    _q, _k, _v = (torch.from_numpy(_d[i]) for i in range(3))
    _keep = torch.from_numpy(_d[3] == 0)
    _want = _F.scaled_dot_product_attention(_q, _k, _v, attn_mask=_keep).numpy()
    _got = _w.graph.to_user(prism.interpret(_w.graph, *_w.graph.to_ir(_d)))[0]
    _attn[_w.name] = float(np.abs(_got - _want).max() / np.abs(_want).max())
_same_program = [(op.kind, op.attrs) for op in sdpa.graph.ops] == \
    [(op.kind, op.attrs) for op in by_hand.graph.ops]

# Section 9, by other routes than the engine's own counts: each form's best program as a member
# (its sizes filled in), its kernels counted as the launches its generated run() makes, run in
# the float64 interpreter and as an fp16 Triton kernel on the inputs the check drew, each against
# F.scaled_dot_product_attention in float64; the best single kernel re-costed over the members
# the instantiator enumerates (not the search's own pick), the split at the search's sizes
# (checked to fit the device); the blocks read off each kernel's grid.
from prism.instantiate import triton_backend as _backend
from prism.instantiate.codegen import generate as _generate
from prism.instantiate.params import assignments as _assignments
from prism.ir.spec import substitute_graph as _substitute
from prism.search.audit import within_limits

_h100 = get_device(DEVICE)
_raw = plain_decode.random_inputs(0)
_drawn = [a.astype(np.float16).astype(np.float64) for a in _raw]    # as the fp16 kernels see them
_want9 = _F.scaled_dot_product_attention(*[torch.from_numpy(a) for a in _drawn],
                                         scale=1.0).numpy()


def _best_member_us(graph):
    """The best latency over the members that fit (inf: none fits)."""
    return min((modeled_cost(_substitute(graph, env), _h100).latency_us
                for env in _assignments(graph, _h100, limit=10_000)), default=_math.inf)


def _launches(source):
    return len(re.findall(r"^\s+\w+\[\(.*?\)\]\(", source.split("\ndef run(", 1)[1], re.M))


_section9 = {}
for _name, _opt in decoded.items():
    _found = _opt.search.best
    _member = _substitute(_found.graph, _found.assignment)
    _module = _backend.load(_generate(_member).source)
    _ir = [np.ascontiguousarray(a) for a in _opt.graph.to_ir(_drawn)]   # the member's layout: K
    with np.errstate(all="ignore"):                                     # as the IR reads it
        _got16 = _module.run(*[torch.tensor(a, dtype=torch.float16) for a in _ir])
        (_got64,) = prism.interpret(_member, *_ir)
    _got16 = _got16.double().numpy()
    _ones = [c for c in _opt.search.equivalent if c.num_kernels == 1]
    _section9[_name] = {
        "launches": _launches(_generate(_member).source),
        "symbolic": bool(_found.graph.free_vars()),
        "interpreter_err": float(np.abs(_got64 - _want9).max()
                                 / np.abs(_want9).max()),
        "fp16_finite": bool(np.isfinite(_got16).all()),
        "fp16_err": float(np.abs(_got16 - _want9).max() / np.abs(_want9).max())
        if np.isfinite(_got16).all() else None,
        "best_us": modeled_cost(_member, _h100).latency_us,     # at the search's own sizes,
        "fits": within_limits(_found.graph, _found.assignment, _h100),   # which fit the device
        "one_kernel_us": min(_best_member_us(c.graph) for c in _ones),
        "winner_launches": _launches(_opt.best.triton_source) if _opt.best else None,
    }
_split = decoded["safe_decode"].best.graph
_alone = _substitute(one_kernel["safe_decode"].graph, one_kernel["safe_decode"].assignment)
_section9["blocks"] = {what: [_math.prod(d.value for d in bg.grid) for _, bg in g.iter_blocks()]
                       for what, g in (("one kernel", _alone), ("split", _split))}
_section9["sm_count"] = _h100.sm_count
_s = torch.from_numpy(_raw[0]) @ torch.from_numpy(_raw[1]).transpose(-2, -1)
_section9["largest_score"] = float(_s.max())
_section9["fp16_exp_limit"] = float(np.log(np.finfo(np.float16).max))
_section9["exp_overflows_fp16"] = bool(np.isinf(np.float16(np.exp(float(_s.max())))))
_section9["attention_safe_ops"] = [op.kind for op in prism.get_workload("attention_safe").graph.ops]
_section9["safe_decode_ops"] = [op.kind for op in safe_decode.graph.ops]
print("ORACLE " + json.dumps({
    "section9": _section9,
    "section8_attention_err": _attn, "section8_same_program": _same_program,
    "section8_projection_err": _projection_err,
    "section8_projection_ops": [op.kind for op in projection.graph.ops
                                if op.kind not in ("input", "output")],
    "exercise_rejects": _exercise_rejects,
    "cli_code": cli["code"], "cli_best": (cli["doc"].get("best") or {}).get("config"),
    "cli_latency_us": (cli["doc"].get("best") or {}).get("latency_us"),
    "cli_error": cli["doc"].get("error"),
    "fresh_equals_notebook": fresh is not None and bool(torch.equal(fresh, got.cpu())),
    "fresh_vs_torch": None if fresh is None else float(
        (fresh.double() - want64).abs().max() / want64.abs().max()),
    "eager_us": sum(max(b / bw, f / peak) + spec.launch_us for b, f in eager_kernels),
    "roofline_us": max((x + w + h + o) / bw, flops_total / peak) + spec.launch_us,
    "modeled_us": modeled_cost(result.best.graph, spec).latency_us,
    "sizes": {key: os.path.getsize(p) for key, p in result.files.items()},
    "jit_kernels": sorted(re.findall(r"^@triton\.jit\ndef (\w+)\(",
                                     (out / "kernel.py").read_text(), re.M)),
    "ptx_entries": sorted(re.findall(r"^\.visible \.entry (\w+)\(", ptx_text, re.M)),
    "ptx_target": re.findall(r"^\.target (\S+)", ptx_text, re.M),
}))
