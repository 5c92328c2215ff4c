import inspect
import json
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
def _rejects(check, answer):
    """Whether the exercise's check cell rejects `answer` (a wrong one, here)."""
    try:
        check(answer)
    except AssertionError:
        return True
    return False


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
print("ORACLE " + json.dumps({
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
