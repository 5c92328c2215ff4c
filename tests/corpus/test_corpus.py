"""The corpus of programs users bring (`corpus_programs.py`): none is refused, each traced graph
computes what torch computes (float64, the user's layouts through the graph's views), and a sample
is optimized end to end — the kernel run in Triton's interpreter against torch (outputs poisoned
with NaN first, fp16 tolerance), a matmul with an elementwise epilogue fused into one kernel
modeled faster than eager.

Optimizing every program takes minutes each on this machine, so the whole corpus is a benchmark
(`bench/corpus.py`, whose table the programs issue records); the sample here keeps one of each
kind of epilogue (bias, activation with a parameter, scalar, residual, transposed weight), and one
program of partial fusion (an op no block can hold stays outside, the rest is fused).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
import torch

import prism
from prism.ir.interpret import interpret


def _corpus() -> ModuleType:
    """The corpus module, loaded by path (the tests are imported by path too: importlib mode)."""
    spec = importlib.util.spec_from_file_location(
        "corpus_programs", Path(__file__).with_name("corpus_programs.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_CORPUS = _corpus()
PROGRAMS, MODULES = _CORPUS.PROGRAMS, _CORPUS.MODULES

SAMPLE = ("linear_bias_relu", "linear_leaky_relu", "silu_times_two", "linear_transposed_weight",
          "scalar_shift")


def workload(name: str) -> prism.Workload:
    entry = PROGRAMS[name]
    return prism.workload(entry.fn, dtype=entry.dtype, bool_inputs=entry.bool_inputs,
                          **entry.shapes)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_every_program_is_traced_and_computes_what_torch_does(name):
    w = workload(name)
    arrays = w.random_inputs(0)
    graph = w.graph
    got = graph.to_user(interpret(graph, *graph.to_ir(arrays)))
    want = w.reference(*arrays)
    assert len(got) == len(want)
    for g, t in zip(got, want, strict=True):
        assert np.shape(g) == np.shape(t)
        np.testing.assert_allclose(g, t, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_every_module_is_traced_and_computes_what_it_does(name):
    entry = MODULES[name]
    torch.manual_seed(0)
    module = entry.make()
    for p in module.parameters():
        torch.nn.init.normal_(p, std=0.5)
    w = prism.workload.from_module(module, torch.zeros(*entry.shape,
                                                       dtype=getattr(torch, entry.dtype)))
    assert w.dtype.name == entry.dtype
    arrays = w.random_inputs(0)
    graph = w.graph
    got = graph.to_user(interpret(graph, *graph.to_ir(arrays)))
    with torch.no_grad():
        want = module.double()(torch.from_numpy(arrays[0])).numpy()
    np.testing.assert_allclose(got[0], want, rtol=1e-9, atol=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("name", SAMPLE)
def test_an_epilogue_fuses_into_one_checked_kernel_faster_than_eager(name):
    assert PROGRAMS[name].kind == "epilogue"
    result = prism.superoptimize(workload(name), budget_s=240, compile_ptx=False)
    doc = result.to_json()
    best = doc["best"]
    assert best is not None, doc.get("notes")
    assert best["check"]["status"] == "passed", best["check"]     # torch, in the interpreter
    assert best["num_kernels"] == 1
    assert best["latency_kind"] == "modeled"
    assert doc["baseline"]["modeled_speedup_vs_eager"] > 1


@pytest.mark.slow
def test_an_op_no_block_holds_stays_outside_and_the_rest_is_fused():
    """vocab_max_logit: amax over 32,768 logits a row (8 rows: 512 KiB in fp16, over a block's
    227 KiB) stays a pre-defined kernel; the projection and gelu are one custom kernel, checked
    against torch. (`tests/test_partial_fusion.py` runs the other `partial` program.)"""
    name = "vocab_max_logit"
    assert PROGRAMS[name].kind == "partial"
    result = prism.superoptimize(workload(name), budget_s=120, compile_ptx=False)
    doc = result.to_json()
    best = doc["best"]
    assert best is not None, doc.get("notes")
    assert best["check"]["status"] == "passed", best["check"]
    assert best["num_custom_kernels"] == 1 and best["verdict"] == "equivalent"
    assert [o["op"] for o in doc["fusion"]["outside"]] == ["max"]
    assert doc["baseline"]["modeled_speedup_vs_eager"] > 1
