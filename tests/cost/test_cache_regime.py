"""The cost model predicts a cold-L2 run (`CACHE_REGIME`), and what is timed on a GPU is timed in
that regime: `bench/gpu_check.py` times every column (our kernel, eager, torch.compile) through
`triton_backend.bench_cuda`, the helper the cuda backend tunes with, which is
`triton.testing.do_bench`, and the installed Triton's `do_bench` clears the L2 before each timed
call with a buffer larger than every modeled device's L2.

No GPU here: Triton's source is read, not imported (importing it would decide the interpreter
mode for the rest of the session), and `do_bench` and `bench_cuda` are stood in for.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from prism.cost import DEVICES
from prism.cost.model import CACHE_REGIME
from prism.instantiate import triton_backend

ROOT = Path(__file__).resolve().parents[2]


def triton_source(relative: str) -> ast.Module:
    spec = importlib.util.find_spec("triton")          # finds the package without importing it
    assert spec is not None and spec.submodule_search_locations
    return ast.parse((Path(spec.submodule_search_locations[0]) / relative).read_text())


def function(tree: ast.AST, name: str) -> ast.FunctionDef:
    return next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name)


def test_do_bench_clears_the_l2_before_every_timed_call():
    do_bench = function(triton_source("testing.py"), "do_bench")
    timed = [loop for loop in ast.walk(do_bench) if isinstance(loop, ast.For)
             and any("start_event[i].record()" in ast.unparse(s) for s in loop.body)]
    assert len(timed) == 1, "do_bench's timed loop not found"
    steps = [ast.unparse(s) for s in timed[0].body]
    flush = next(k for k, s in enumerate(steps) if "clear_cache(cache)" in s)
    start = next(k for k, s in enumerate(steps) if s == "start_event[i].record()")
    call = steps.index("fn()")
    assert flush < start < call, steps


def test_the_flush_buffer_is_larger_than_every_modeled_l2():
    getter = function(triton_source("backends/nvidia/driver.py"),
                      "get_empty_cache_for_benchmark")
    (size,) = [n.value for n in ast.walk(getter) if isinstance(n, ast.Assign)
               and ast.unparse(n.targets[0]) == "cache_size"]
    flushed = eval(compile(ast.Expression(size), "cache_size", "eval"), {"__builtins__": {}})
    assert flushed >= 256 * 1024 * 1024
    assert all(flushed > d.l2_bytes for d in DEVICES.values())


def test_bench_cuda_is_do_bench_in_median_mode(monkeypatch: pytest.MonkeyPatch):
    calls: list[tuple[Any, dict[str, Any]]] = []

    def do_bench(fn: Any, **kwargs: Any) -> float:
        calls.append((fn, kwargs))
        return 0.0125                                    # ms
    monkeypatch.setitem(sys.modules, "triton.testing", types.SimpleNamespace(do_bench=do_bench))

    def fn() -> None:
        pass
    assert triton_backend.bench_cuda(fn, warmup_ms=5, rep_ms=7) == pytest.approx(12.5)
    assert calls == [(fn, {"warmup": 5, "rep": 7, "return_mode": "median"})]


def load_gpu_check() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "bench" / "gpu_check.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_gpu_check_times_every_column_with_bench_cuda(monkeypatch: pytest.MonkeyPatch):
    gpu_check = load_gpu_check()
    timed: list[Any] = []

    def bench_cuda(fn: Any, **kwargs: Any) -> float:
        timed.append(fn())
        return 3.0
    monkeypatch.setattr(gpu_check, "bench_cuda", bench_cuda)
    row = gpu_check.timed({"prism": lambda a, b: ("prism", a, b),
                           "eager": lambda a, b: ("eager", a, b),
                           "compile": lambda a, b: ("compile", a, b)}, [1, 2])
    assert timed == [("prism", 1, 2), ("eager", 1, 2), ("compile", 1, 2)]
    assert row == {"prism_us": 3.0, "eager_us": 3.0, "compile_us": 3.0, "cache": CACHE_REGIME}


def test_gpu_check_has_no_other_timer():
    """Every timing in gpu_check.py of the model's regime goes through `time_us` (bench_cuda):
    no do_bench, CUDA event or other benchmark helper of its own, and `timed` is how its rows
    are timed; the one other regime, a CUDA graph's replay, is `graph_us` alone, whose columns
    say so (`graph_regime`)."""
    tree = ast.parse((ROOT / "bench" / "gpu_check.py").read_text())
    called = {}
    for fn in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
        for call in (c for c in ast.walk(fn) if isinstance(c, ast.Call)):
            name = ast.unparse(call.func).split(".")[-1]
            called.setdefault(name, set()).add(fn.name)
    assert called["bench_cuda"] == {"time_us"}
    assert called["time_us"] == {"timed"}
    assert called["timed"] == {"compared"}
    assert called["do_bench_cudagraph"] == {"graph_us"}
    assert called["graph_us"] == {"compared"}
    assert not {"do_bench", "Event", "elapsed_time"} & called.keys()


@pytest.mark.parametrize("name", ["attention_safe", "qknorm_attention_safe"])
def test_gpu_check_drives_the_safe_rows_to_logits_of_magnitude_100(name: str):
    """The GPU check's large-logit row, run here on the CPU with the torch program as both
    sides: the logits it makes reach about 100 (oracle: the float64 logits computed apart), the
    safe program stays finite, and the plain form (exp without the max) does not."""
    import torch

    from prism.workloads import get_workload
    gpu_check = load_gpu_check()
    w = get_workload(name)
    shapes = {"Q": (1, 4, 16), "K": (1, 64, 16), "V": (1, 64, 16)}
    inputs = [torch.randn(shapes[p], dtype=torch.float64) * 0.1 for p in ("Q", "K", "V")]
    row = gpu_check.large_logits(w.__wrapped__, w.__wrapped__, inputs,
                                 normed=name.startswith("qknorm"))
    assert row == {"large_logits_finite": True, "large_logits_max_rel_err": 0.0}
    # the logits large_logits made, computed apart
    q, k = inputs[0], inputs[1]
    if name.startswith("qknorm"):
        q = q / q.pow(2).mean(-1, keepdim=True).sqrt()
    base = (q @ k.transpose(-1, -2)).abs().max() / 4.0
    big_logits = (q @ (k * (100.0 / base)).transpose(-1, -2)) / 4.0
    assert float(big_logits.abs().max()) == pytest.approx(100.0)
    plain = torch.exp(big_logits.to(torch.float16))
    assert not torch.isfinite(plain).all()        # fp16's exp overflows past about 11
