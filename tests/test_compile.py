"""`prism.compile` and `torch.compile(backend="prism")` (issue 22, first slice): a model's graph cut
into regions, each supported region superoptimized and run as its Triton kernel (the
interpreter on this CPU), the rest left to torch; the kernels cached by region, and a new batch
size served from the region's checkpoint without a search.

Oracles: the model run eagerly (the compiled model must match it), and the cache and report
files themselves."""

from __future__ import annotations

import json
import os
import shutil

import pytest
import torch
import torch.nn.functional as F

import prism
import prism.dynamo as pc
from prism.instantiate.triton_backend import interpreting

pytestmark = pytest.mark.skipif(not interpreting(), reason="runs kernels in Triton's "
                                "interpreter (TRITON_INTERPRET=1, as the suite sets)")


class GatedMLP(torch.nn.Module):
    """SwiGLU as model code writes it (two bias-free Linear layers), then a running sum over
    the features, an op no block holds (torch.cumsum is not in the frontend's tables)."""

    def __init__(self, d: int = 64, hidden: int = 64, cumsum: bool = False):
        super().__init__()
        self.gate = torch.nn.Linear(d, hidden, bias=False)
        self.up = torch.nn.Linear(d, hidden, bias=False)
        self.cumsum = cumsum

    def forward(self, x):
        y = F.silu(self.gate(x)) * self.up(x)
        return torch.cumsum(y, -1) if self.cumsum else y


def _options(cases, tmp_path):
    return {"budget_s": 120, "cache_dir": tmp_path / "cache",
            "search_config": cases.reduced("swiglu")}


def _model(cumsum=False):
    torch.manual_seed(0)
    return GatedMLP(cumsum=cumsum).eval()


def test_a_model_compiles_to_a_checked_kernel_cached_and_reused_at_a_new_batch(cases, tmp_path):
    model, report = _model(), tmp_path / "report.json"
    compiled = pc.compile(model, report=report, **_options(cases, tmp_path))
    x = torch.randn(8, 64)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-5)
    doc = json.loads(report.read_text())
    (region,) = doc["graphs"][0]
    assert region["status"] == "fused" and region["source"] == "search", region
    assert region["latency_kind"] == region["eager_kind"] == "modeled"
    assert region["kernel_us"] < region["eager_us"]          # one kernel against three
    assert list((tmp_path / "cache").glob("*.json"))

    again = pc.compile(model, **_options(cases, tmp_path))   # a second compile: the cache
    with torch.no_grad():
        torch.testing.assert_close(again(x), model(x), rtol=1e-4, atol=1e-5)
    (hit,) = again.prism_report.graphs[0]
    assert hit.status == "fused" and hit.source == "cache" and hit.seconds < region["seconds"]

    wide = torch.randn(16, 64)                               # a new batch: the checkpoint
    with torch.no_grad():
        torch.testing.assert_close(again(wide), model(wide), rtol=1e-4, atol=1e-5)
    (served,) = again.prism_report.graphs[1]
    assert served.status == "fused" and served.source == "checkpoint", served


@pytest.mark.parametrize("rest", ["inductor", "eager"])
def test_an_op_outside_the_frontend_is_left_to_inductor_and_the_rest_is_fused(cases, tmp_path,
                                                                            rest):
    """The fused region runs as `prism::region_kernel` inside the graph Inductor compiled (or
    the eager graph, asked): the generated module's run() is called, and the model matches
    eager. Inductor needs a C++ compiler on a CPU; without one the report says eager, and why."""
    model = _model(cumsum=True)
    before = set(pc._KERNELS)
    compiled = pc.compile(model, rest=rest, **_options(cases, tmp_path))
    x = torch.randn(8, 64)
    with torch.no_grad():
        compiled(x)                                  # compiles: the region's kernel is made
        (key,) = set(pc._KERNELS) - before
        module, outs = pc._KERNELS[key]
        calls = []

        class Counting:
            def run(self, *args):
                calls.append(len(args))
                return module.run(*args)
        pc._KERNELS[key] = (Counting(), outs)
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-4)
    assert calls == [3]                              # x and the two weights
    regions = compiled.prism_report.graphs[0]
    assert [r.status for r in regions] == ["fused", "outside"]
    assert "cumsum" in regions[1].ops[0] and "does not lower" in regions[1].reason
    (how,) = compiled.prism_report.rest
    if rest == "eager":
        assert how == "eager (asked)"
    elif shutil.which(os.environ.get("CXX", "g++")) or shutil.which("c++"):
        assert how == "inductor"
    else:
        assert how.startswith("eager: Inductor could not compile it here")


def test_autograd_runs_torch_where_the_kernel_is_inference_only(cases, tmp_path):
    model = _model()
    compiled = pc.compile(model, **_options(cases, tmp_path))
    x = torch.randn(8, 64)
    compiled(x).sum().backward()
    got = model.gate.weight.grad.clone()
    model.zero_grad()
    model(x).sum().backward()
    torch.testing.assert_close(got, model.gate.weight.grad)


def test_torch_compile_with_backend_prism_by_name(tmp_path, monkeypatch):
    """What a user writes: `torch.compile(model, backend="prism")`, default options (the cache
    under $PRISM_CACHE_DIR), matching eager, the region fused."""
    monkeypatch.setenv("PRISM_CACHE_DIR", str(tmp_path))
    torch._dynamo.reset()
    model = _model()
    compiled = torch.compile(model, backend="prism", dynamic=False)
    x = torch.randn(8, 64)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-5)
    entries = [p for p in (tmp_path / "compile").glob("*.json") if ".ck." not in p.name]
    assert len(entries) == 1 and "def run(" in json.loads(entries[0].read_text())["source"]


def test_the_backend_is_registered_with_torch():
    from torch._dynamo.backends.registry import lookup_backend
    assert lookup_backend("prism") is pc.backend
    assert prism.compile is pc.compile


@pytest.mark.slow
def test_a_llama_decoder_layer_compiles_matches_eager_and_reports_its_regions(tmp_path):
    """transformers' LlamaDecoderLayer from a small local config, random weights, nothing
    downloaded: rotary embeddings (indexing, cat) and the attention's head transposes stay in
    torch, the norms, the gated MLP and the residual adds are regions of their own."""
    transformers = pytest.importorskip("transformers")
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRotaryEmbedding

    config = transformers.LlamaConfig(hidden_size=64, intermediate_size=128,
                                      num_attention_heads=4, num_key_value_heads=4, head_dim=16,
                                      max_position_embeddings=64, rms_norm_eps=1e-6)
    config._attn_implementation = "sdpa"
    torch.manual_seed(0)
    layer = LlamaDecoderLayer(config, layer_idx=0).eval()

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = layer

        def forward(self, h, cos, sin):
            return self.layer(h, attention_mask=None, position_embeddings=(cos, sin))

    block = Block().eval()
    h = torch.randn(1, 8, 64)
    cos, sin = LlamaRotaryEmbedding(config)(h, torch.arange(8)[None])
    report = tmp_path / "regions.json"
    compiled = pc.compile(block, budget_s=20, cache_dir=tmp_path / "cache", report=report)
    with torch.no_grad():
        want, got = block(h, cos, sin), compiled(h, cos, sin)
    want, got = (x[0] if isinstance(x, tuple) else x for x in (want, got))
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    regions = json.loads(report.read_text())["graphs"][0]
    assert {r["status"] for r in regions} <= {"fused", "fallback", "outside"}
    assert all(r["reason"] for r in regions)
    fused = [r for r in regions if r["status"] == "fused"]
    assert fused and all(r["kernel_us"] <= r["eager_us"] for r in fused)
    assert any("sdpa" in op or "scaled_dot_product" in op for r in regions
               if r["status"] == "outside" for op in r["ops"])
