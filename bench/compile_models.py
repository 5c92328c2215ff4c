"""`prism.compile` on two models people use (issue 22): compile times, the cache, a new batch
served from the checkpoint against a fresh search, the advisor with and without, and on a GPU the
models timed against eager and `torch.compile` with Inductor, side by side in one run.

    TRITON_INTERPRET=1 .venv/bin/python bench/compile_models.py      # CPU: kernels interpreted
    .venv/bin/python bench/compile_models.py                          # a GPU machine

The models: a gated MLP (two bias-free Linear layers, SiLU, product; x [8, 256], hidden 512) and
transformers' `LlamaDecoderLayer` from a small local config (hidden 64, 4 heads, intermediate 128,
sequence 8; random weights, nothing downloaded). Every compiled model is checked against eager
(max absolute error printed). Times are wall seconds of the first call after `prism.compile`
(the search, or the cache, plus Dynamo and Inductor), each with fresh caches unless it says
otherwise. Latencies in the regions' sums are `modeled` (H100 cost model); the GPU rows are
`measured` (CUDA events, medians of 50 calls after 10 warm-up calls). Writes
bench/results/<date>-compile.{md,json}.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import prism.dynamo as pc

BUDGET = 20.0


class GatedMLP(torch.nn.Module):
    def __init__(self, d: int = 256, hidden: int = 512):
        super().__init__()
        self.gate = torch.nn.Linear(d, hidden, bias=False)
        self.up = torch.nn.Linear(d, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.silu(self.gate(x)) * self.up(x)


def llama() -> tuple[torch.nn.Module, Any]:
    import transformers
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRotaryEmbedding
    config = transformers.LlamaConfig(hidden_size=64, intermediate_size=128,
                                      num_attention_heads=4, num_key_value_heads=4, head_dim=16,
                                      max_position_embeddings=64, rms_norm_eps=1e-6)
    config._attn_implementation = "sdpa"
    layer = LlamaDecoderLayer(config, layer_idx=0).eval()
    rotary = LlamaRotaryEmbedding(config)

    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layer = layer

        def forward(self, h: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> Any:
            out = self.layer(h, attention_mask=None, position_embeddings=(cos, sin))
            return out[0] if isinstance(out, tuple) else out

    def inputs(batch: int, device: str) -> tuple[torch.Tensor, ...]:
        h = torch.randn(batch, 8, 64, device=device)
        cos, sin = rotary(h, torch.arange(8, device=device)[None])
        return h, cos, sin
    return Block().eval(), inputs


def models(device: str) -> list[tuple[str, torch.nn.Module, Any]]:
    torch.manual_seed(0)
    mlp = GatedMLP().eval().to(device)
    block, inputs = llama()
    return [("gated MLP", mlp, lambda b, dev: (torch.randn(b, 256, device=dev),)),
            ("LlamaDecoderLayer", block.to(device), inputs)]


def first_call(model: torch.nn.Module, args: tuple[torch.Tensor, ...], cache: Path,
               **options: Any) -> tuple[Any, float, float]:
    """A fresh `prism.compile` (or the given one) called once: the compiled model, seconds,
    and the max absolute error against eager."""
    compiled = options.pop("compiled", None)
    if compiled is None:
        torch._dynamo.reset()        # Dynamo's per-code cache holds 8 graphs; each run is new
    started = time.perf_counter()
    if compiled is None:
        compiled = pc.compile(model, budget_s=BUDGET, cache_dir=cache, **options)
    with torch.no_grad():
        got = compiled(*args)
        seconds = time.perf_counter() - started
        want = model(*args)
    err = float((got.float() - want.float()).abs().max())
    return compiled, seconds, err


def regions(compiled: Any, graph: int = -1) -> dict[str, Any]:
    rs = compiled.prism_report.graphs[graph]
    fused = [r for r in rs if r.status == "fused"]
    return {"fused": len(fused), "fallback": sum(r.status == "fallback" for r in rs),
            "outside": sum(r.status == "outside" for r in rs),
            "skipped_by_advice": sum(r.advised is not None and r.advised.advice.skip
                                     for r in rs),
            "kernel_us_modeled": round(sum(r.kernel_us or 0.0 for r in fused), 3),
            "eager_us_modeled": round(sum(r.eager_us or 0.0 for r in fused), 3),
            "sources": sorted({r.source for r in fused}),
            "rest": compiled.prism_report.rest[graph] if compiled.prism_report.rest else ""}


def narrow(summary: str) -> dict[str, Any]:
    """A user's advisor for the comparison: prefer one-kernel programs and cap the block graph
    at 4 ops (a narrower search), label by the first op."""
    first = next((line.split("= ")[1].split("(")[0] for line in summary.splitlines()
                  if " = " in line), "")
    return {"label": f"starts with {first}", "kernels": 1, "max_block_ops": 4}


def timed_gpu(fn: Any, args: tuple[torch.Tensor, ...]) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    with torch.no_grad():
        for _ in range(10):
            fn(*args)
        for _ in range(50):
            start.record()
            fn(*args)
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) * 1000.0)
    return sorted(times)[len(times) // 2]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="bench/results")
    args = p.parse_args()
    gpu = torch.cuda.is_available()
    device = "cuda" if gpu else "cpu"
    rows: dict[str, Any] = {"date": datetime.date.today().isoformat(), "device": device,
                            "budget_s": BUDGET, "models": {}}
    for name, model, make in models(device):
        row: dict[str, Any] = {}
        x8, x16 = make(8 if name == "gated MLP" else 1, device), \
            make(16 if name == "gated MLP" else 2, device)
        with tempfile.TemporaryDirectory() as tmp:
            cache = Path(tmp) / "cache"
            compiled, s, err = first_call(model, x8, cache)
            row["first compile"] = {"seconds": round(s, 2), "max_abs_err": err,
                                    **regions(compiled)}
            again, s, err = first_call(model, x8, cache)
            row["second compile (cache)"] = {"seconds": round(s, 2), "max_abs_err": err,
                                             **regions(again)}
            _, s, err = first_call(model, x16, cache, compiled=again)
            row["new batch (checkpoint)"] = {"seconds": round(s, 2), "max_abs_err": err,
                                             **regions(again)}
        with tempfile.TemporaryDirectory() as tmp:
            compiled, s, err = first_call(model, x16, Path(tmp) / "cache")
            row["new batch, fresh search"] = {"seconds": round(s, 2), "max_abs_err": err,
                                              **regions(compiled)}
        for label, advisor in (("no advisor", None), ("heuristic advisor", "heuristic"),
                               ("user advisor (1 kernel, 4 block ops)", narrow)):
            with tempfile.TemporaryDirectory() as tmp:
                compiled, s, err = first_call(model, x8, Path(tmp) / "cache", advisor=advisor)
                row[label] = {"seconds": round(s, 2), "max_abs_err": err, **regions(compiled)}
        if gpu:
            with tempfile.TemporaryDirectory() as tmp:
                prism_model, _, _ = first_call(model, x8, Path(tmp) / "cache")
                inductor = torch.compile(model)
                row["gpu, measured µs"] = {
                    "eager": timed_gpu(model, x8), "torch.compile (inductor)":
                    timed_gpu(inductor, x8), "prism": timed_gpu(prism_model, x8)}
        else:
            row["gpu, measured µs"] = "not run: no CUDA GPU on this machine"
        rows["models"][name] = row
        print(name, json.dumps(row, indent=1), flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = out / f"{rows['date']}-compile"
    stem.with_suffix(".json").write_text(json.dumps(rows, indent=1) + "\n")
    lines = [f"# prism.compile on two models ({rows['date']}, {device}, "
             f"{BUDGET:g} s a region)", "",
             "Command: `TRITON_INTERPRET=1 .venv/bin/python bench/compile_models.py`. Seconds: "
             "the first call after prism.compile (search or cache, Dynamo, Inductor). "
             "Region latencies: modeled (H100).", ""]
    for name, row in rows["models"].items():
        lines += [f"## {name}", "", "| run | seconds | fused | fell back (advised) | outside | "
                  "Σ kernel µs (modeled) | Σ eager µs (modeled) | sources | rest | max abs err "
                  "vs eager |", "|---|---|---|---|---|---|---|---|---|---|"]
        for label, r in row.items():
            if isinstance(r, dict) and "seconds" in r:
                lines.append(f"| {label} | {r['seconds']} | {r['fused']} | {r['fallback']} "
                             f"({r['skipped_by_advice']}) | "
                             f"{r['outside']} | {r['kernel_us_modeled']} | "
                             f"{r['eager_us_modeled']} | {', '.join(r['sources'])} | "
                             f"{r['rest']} | {r['max_abs_err']:.1e} |")
        gpu_row = row["gpu, measured µs"]
        lines += ["", f"GPU (measured): {gpu_row}", ""]
    stem.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print(f"wrote {stem}.md and .json")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
