"""On a GPU machine: optimize the nine workloads with `--measure cuda` and time each best kernel
against PyTorch eager and `torch.compile`, side by side in one process, then write a table with
the cost model's error per workload (measured / modeled). Run by `bench/gpu_check.sh`, after
`prism calibrate`.

    python bench/gpu_check.py --out bench/results/gpu_check [--budget 30] [--workloads a,b]

Every column is timed in the regime the cost model predicts (`prism.cost.model.CACHE_REGIME`):
L2 flushed before each call, by `time_us`, which is `prism.instantiate.triton_backend.bench_cuda`
(`triton.testing.do_bench`, CUDA events, medians), the helper `--measure cuda` tunes with. Each
row records the regime. Each workload's optimize run gets `--budget` seconds (search and tuning);
with nine workloads and compile warm-up the whole run stays under 7 minutes at the default 30 s.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from prism.cost.model import CACHE_REGIME
from prism.instantiate.triton_backend import bench_cuda

PRISM_FIVE = ("rmsnorm_matmul", "rmsnorm_mlp", "swiglu", "attention", "qknorm_attention")
NINE = (*PRISM_FIVE, "gated_mlp", "lora", "gqa", "ntrans")
# attention as practitioners write it (issue 19): the eager column is their torch program, which
# is F.scaled_dot_product_attention itself
SAFE = ("attention_safe", "qknorm_attention_safe", "gqa_safe")


def time_us(fn: Callable[[], Any]) -> float:
    """The median µs of `fn()`, L2 flushed before each call (CACHE_REGIME)."""
    return bench_cuda(fn, warmup_ms=25, rep_ms=200)


def timed(fns: Mapping[str, Callable[..., Any]], inputs: Sequence[Any]) -> dict[str, Any]:
    """`<name>_us` for each of `fns` called on `inputs`, every one timed by `time_us`, and the
    regime they were timed in."""
    row: dict[str, Any] = {f"{name}_us": round(time_us(functools.partial(fn, *inputs)), 2)
                           for name, fn in fns.items()}
    row["cache"] = CACHE_REGIME
    return row


GRAPH_REGIME = ("CUDA graph replay (triton.testing.do_bench_cudagraph, median): no host launch "
                "cost, L2 warm")


def graph_us(fns: Mapping[str, Callable[..., Any]], inputs: Sequence[Any]) -> dict[str, Any]:
    """`<name>_graph_us` for each of `fns`: the median µs of a call replayed from a CUDA graph,
    which leaves out the host's launch cost that `time_us` includes (Triton's Python launcher
    is a large part of a small kernel's time); None, with the reason, where a call cannot be
    captured."""
    import triton.testing
    row: dict[str, Any] = {"graph_regime": GRAPH_REGIME}
    for name, fn in fns.items():
        try:
            ms = triton.testing.do_bench_cudagraph(functools.partial(fn, *inputs), rep=100,
                                                   return_mode="median")
            row[f"{name}_graph_us"] = round(ms * 1000, 2)
        except Exception as e:  # a call that cannot be captured is a reason, not a failed run
            row[f"{name}_graph_us"] = None
            row[f"{name}_graph_error"] = f"{type(e).__name__}: {e}"[:300]
    return row


def large_logits(kernel: Callable[..., Any], eager: Callable[..., Any],
                 inputs: Sequence[Any], normed: bool) -> dict[str, Any]:
    """The safe kernel on logits of magnitude about 100 (K scaled up: fp16's exp overflows past
    about 11), against the torch program: whether every output is finite, and the error.
    `normed`: the program normalises Q first (qknorm), so the logits are taken from that."""
    import torch
    q, k = inputs[0].float(), inputs[1].float()
    if normed:
        q = torch.nn.functional.rms_norm(q, (q.shape[-1],), eps=0.0)
    logits = (q @ k.transpose(-1, -2)).abs().max() / q.shape[-1] ** 0.5
    scale = 100.0 / max(float(logits), 1e-6)
    big = [inputs[0], inputs[1] * scale, *inputs[2:]]
    want, got = eager(*big).float(), kernel(*big).float()
    return {"large_logits_finite": bool(torch.isfinite(got).all()),
            "large_logits_max_rel_err": float((got - want).abs().max()
                                              / want.abs().max().clamp_min(1e-6))}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="bench/results/gpu_check")
    ap.add_argument("--budget", type=float, default=30.0)
    ap.add_argument("--workloads", default=",".join((*NINE, *SAFE)))
    ap.add_argument("--device", default="h100", help="the cost model's device for the model "
                    "column (h100, h200, a100)")
    ap.add_argument("--executor", default="local", help="where each optimize run's search "
                    "runs (local, processes, ray): the same results, sooner on many cores")
    ap.add_argument("--workers", type=int, help="worker processes for --executor processes")
    ap.add_argument("--checkpoints", help="a folder of <workload>.ck.json.gz search checkpoints "
                    "(bench/gpu_prep.sh writes them on a CPU machine): each optimize run loads "
                    "its workload's, so the budget goes to tuning and timing, not the search")
    args = ap.parse_args()
    import torch
    if not torch.cuda.is_available():
        print("no CUDA GPU: this check needs one (use `prism optimize --measure model` here)",
              file=sys.stderr)
        return 2
    import prism
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for name in args.workloads.split(","):
        folder = out / name
        started = time.perf_counter()
        command = [sys.executable, "-m", "prism", "optimize", name, "--measure", "cuda",
                   "--device", args.device, "--budget", str(args.budget), "--out", str(folder),
                   "--json", "--executor", args.executor]
        if args.workers:
            command += ["--workers", str(args.workers)]
        checkpoint = Path(args.checkpoints) / f"{name}.ck.json.gz" if args.checkpoints else None
        if checkpoint is not None and checkpoint.is_file():
            command += ["--checkpoint", str(checkpoint)]
        done = subprocess.run(command, capture_output=True, text=True)
        seconds = time.perf_counter() - started
        try:
            doc = json.loads(done.stdout)
        except ValueError:
            doc = {"error": {"message": done.stderr.strip().splitlines()[-1:]}}
        row = {"workload": name, "optimize_s": round(seconds, 1), "budget_s": args.budget,
               "executor": args.executor + (f" x{args.workers}" if args.workers else ""),
               "searched": "loaded its checkpoint" if "--checkpoint" in command else "here"}
        if not doc.get("best"):
            row["error"] = doc.get("error") or "no kernel"
            print(done.stderr[-2000:], file=sys.stderr)
        else:
            try:
                row.update(compared(name, folder, doc, prism.get_workload(name)))
            except Exception as e:  # one workload's failure is its row, not the run's
                row["error"] = f"{type(e).__name__}: {e}"
        rows.append(row)
        print(json.dumps(row), flush=True)
        write(out, rows)
    print((out / "gpu_check.md").read_text())
    return 0 if all("error" not in r for r in rows) else 1


def compared(name: str, folder: Path, doc: dict[str, Any], w: Any) -> dict[str, Any]:
    """The best kernel of `name`'s optimize run (in `folder`, described by `doc`) timed beside
    eager and torch.compile, with its error against eager and the model's error."""
    import torch
    row: dict[str, Any] = {}
    inputs = [torch.tensor(a, dtype=torch.float16, device="cuda")
              for a in w.random_inputs(0)]
    spec = importlib.util.spec_from_file_location(f"best_{name}", folder / "kernel.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    eager = w.__wrapped__
    compiled = torch.compile(eager)
    want = eager(*inputs)
    got = module.run(*inputs)
    err = float((got.float() - want.float()).abs().max() / want.float().abs().max())
    compiled(*inputs)  # compile before timing
    row.update(timed({"prism": module.run, "eager": eager, "compile": compiled}, inputs))
    if name in SAFE:
        row.update(large_logits(module.run, eager, inputs, normed=name.startswith("qknorm")))
    # last: a failed capture must not disturb the columns above
    row.update(graph_us({"prism": module.run, "eager": eager, "compile": compiled}, inputs))
    best = doc["best"]
    row.update({"tuned_us": best["latency_us"], "tuned_kind": best["latency_kind"],
                "modeled_us": best["modeled_us"], "roofline_us": best["roofline_us"],
                "modeled_eager_us": doc["baseline"]["eager_latency_us"],
                "params": best["params"], "kernels": best["num_kernels"],
                "max_rel_err_vs_eager": err, "gpu": torch.cuda.get_device_name(),
                "model_error": round(row["prism_us"] / best["modeled_us"], 3)})
    return row


def write(out: Path, rows: list[dict[str, Any]]) -> None:
    """gpu_check.json and gpu_check.md for the rows so far."""
    (out / "gpu_check.json").write_text(json.dumps(rows, indent=2))
    lines = ["| workload | prism µs (measured) | eager µs (measured) | torch.compile µs (measured) "
             "| prism modeled µs | measured / modeled | roofline µs (modeled) | rel err | params "
             "| prism µs (graph) | eager µs (graph) | torch.compile µs (graph) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    notes = []
    for r in rows:
        label = r["workload"] + (f" ({r['budget_s']:g} s)" if "budget_s" in r else "")
        if r.get("note"):
            notes.append(f"- {r['workload']}: {r['note']}")
        if "error" in r:
            lines.append(f"| {label} | error: {r['error']} | | | | | | | | | | |")
            continue
        lines.append(f"| {label} | {r['prism_us']} | {r['eager_us']} | "
                     f"{r['compile_us']} | {r['modeled_us']} | {r['model_error']} | "
                     f"{r['roofline_us']} | "
                     f"{r['max_rel_err_vs_eager']:.1e} | {r['params']} | "
                     f"{r.get('prism_graph_us')} | {r.get('eager_graph_us')} | "
                     f"{r.get('compile_graph_us')} |")
    lines.append(f"\nMeasured columns (and the tuner's cuda timings): {CACHE_REGIME}; the "
                 "modeled columns predict the same regime. Graph columns: " + GRAPH_REGIME + ". "
                 "A workload's (N s) is its optimize run's budget.")
    lines += ["", *notes] if notes else []
    (out / "gpu_check.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main())
