"""Triton's launch knobs as tuning parameters: `num_warps` and `num_stages` reach the generated
launcher and the offline compile (the PTX's thread count is the oracle), and a measuring backend
tries them on its best finalists (the model and the interpreter, which cannot rank them, do not).

Oracles: the PTX (`.reqntid`: 32 threads a warp), the float64 interpreter, the model."""

from __future__ import annotations

import re

import numpy as np
import pytest

from prism.cost import get_device
from prism.frontend.builder import Block, Graph
from prism.instantiate import triton_backend
from prism.instantiate.codegen import CodegenError, generate
from prism.instantiate.triton_backend import compile_ptx
from prism.ir.interpret import interpret
from prism.tune import Config, tune
from prism.tune.backends import ModelBackend
from prism.tune.tuner import KNOB_FINALISTS, KNOBS, Trial, with_knobs

H100 = get_device("h100")


def _looped():
    """X @ W with a loop over K: what num_stages pipelines."""
    g = Graph("looped")
    X, W = g.input("X", (16, 256)), g.input("W", (256, 64))
    tb = Block(grid=(2,), forloop_range=4)
    x, w = tb.input(X, imap=(-1,), fmap=1), tb.input(W, imap=(1,), fmap=0)
    tb.output(tb.accum(tb.matmul(x, w)), omap=(1,))
    (out,) = g.customized(tb)
    g.output(out)
    return g.build()


def _threads(ptx: str) -> int:
    found = re.search(r"\.reqntid\s+(\d+)", ptx)
    assert found, "no .reqntid in the PTX"
    return int(found.group(1))


def test_the_knobs_reach_the_launch_and_the_compile():
    default = generate(_looped())
    tuned = generate(_looped(), num_warps=8, num_stages=2)
    assert "num_warps=4)" in default.source and "num_stages" not in default.source
    assert "num_warps=8, num_stages=2)" in tuned.source
    (k4,) = compile_ptx(default)
    (k8,) = compile_ptx(tuned)
    assert _threads(k4.ptx) == 4 * 32 and _threads(k8.ptx) == 8 * 32


def test_the_knobs_change_nothing_the_kernel_computes():
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((16, 256)), rng.standard_normal((256, 64))]
    import torch
    tensors = [torch.tensor(a, dtype=torch.float16) for a in arrays]
    want = interpret(_looped(), *[t.double().numpy() for t in tensors])[0]
    for warps, stages in ((4, None), (8, 2), (2, 3)):
        module = triton_backend.load(generate(_looped(), num_warps=warps, num_stages=stages))
        got = module.run(*tensors).double().numpy()
        assert np.abs(got - want).max() / np.abs(want).max() < 2e-2


def test_knobs_out_of_range_are_refused_with_the_fix():
    with pytest.raises(CodegenError, match="num_warps must be a power of two"):
        generate(_looped(), num_warps=3)
    with pytest.raises(CodegenError, match="num_stages ≥ 1"):
        generate(_looped(), num_stages=0)


def test_a_measuring_backend_tries_the_knobs_on_its_best_finalists():
    graph = _looped()
    finalists = [Trial(Config(f"c{k}", graph, ()), float(k)) for k in range(5)]
    out = with_knobs(finalists)
    assert len(out) == KNOB_FINALISTS * len(KNOBS) + (5 - KNOB_FINALISTS)
    ids = [t.config.id for t in out]
    assert len(set(ids)) == len(ids)
    assert "c0[num_warps=8]" in ids and "c0[num_stages=2,num_warps=8]" in ids
    assert "c4[]" in ids and not any(i.startswith("c4[num") for i in ids)
    # a knob setting is modeled as its kernel is: the model does not see it
    assert {t.modeled_us for t in out if t.config.candidate == "c1"} == {1.0}


def test_the_model_backend_does_not_multiply_its_finalists():
    configs = [Config("c1", _looped(), ())]
    result = tune(configs, ModelBackend(H100), H100, compile_ptx=False)
    assert [t.config.id for t in result.finalists] == ["c1[]"]
    assert result.finalists[0].program.num_warps == 4
