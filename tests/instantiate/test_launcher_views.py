"""The generated launcher with the user's own tensors: inputs the IR holds in another layout (a
transposed weight read with permuted strides, a rank-1 bias held as a row), outputs returned in
torch's shape, and the guards `run` puts on its inputs. Real kernels, run in Triton's interpreter
(or on the GPU), against torch in float64 on the same fp16 values."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from dataclasses import replace

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from prism.frontend.builder import Block, Graph
from prism.frontend.workload import workload
from prism.instantiate import triton_backend
from prism.instantiate.codegen import generate
from prism.ir.graph import Interface, View
from prism.ir.interpret import interpret
from prism.tune.backends import check_kernel

M, K, N = 8, 32, 16


def fused_linear(loop: int, bias: bool):
    """relu(x @ Wᵀ (+ b)) as one custom kernel on grid (2,): W is the user's [N, K], the IR's
    [K, N] read through a transposed view; b the user's [N], the IR's [1, N]."""
    g = Graph("fused_linear")
    X, W = g.input("X", (M, K)), g.input("W", (K, N))
    B = g.input("B", (1, N)) if bias else None
    tb = Block(grid=(2,), forloop_range=loop)
    x = tb.input(X, imap=(-1,), fmap=1 if loop > 1 else -1)
    w = tb.input(W, imap=(1,), fmap=0 if loop > 1 else -1)
    y = tb.matmul(x, w)
    if B is not None:        # in the loop body: with one iteration, before the accumulator
        y = tb.relu(tb.add(y, tb.input(B, imap=(1,))))
    tb.output(tb.accum(y, "nored"), omap=(1,))
    (out,) = g.customized(tb)
    g.output(out)
    views = (None, View((N, K), (1, 0))) + ((View((N,)),) if bias else ())
    return replace(g.build(), interface=Interface(views))


def device():
    return "cpu" if triton_backend.interpreting() else "cuda"


def user_tensors(bias: bool, dtype=torch.float16, seed=0):
    rng = np.random.default_rng(seed)
    shapes = [(M, K), (N, K)] + ([(N,)] if bias else [])
    return [torch.tensor(rng.standard_normal(s) * 0.5, dtype=dtype, device=device())
            for s in shapes]


def torch_reference(x, w, b=None):
    x, w = x.double().cpu(), w.double().cpu()
    y = F.linear(x, w, None if b is None else b.double().cpu())
    return (torch.relu(y) if b is not None else y).numpy()


def load(graph):
    module = triton_backend.load(generate(graph))
    module._alloc = lambda shape, dtype, dev: torch.full(shape, float("nan"), dtype=dtype,
                                                         device=dev)
    return module


def close(got, want, tol=2e-2):
    got = got.detach().double().cpu().numpy()
    assert got.shape == want.shape and not np.isnan(got).any()
    err = np.abs(got - want).max() / np.abs(want).max()
    assert err <= tol, f"relative error {err:.3g}"


@pytest.mark.parametrize("loop,bias", [(1, True), (2, False)])
def test_kernel_reads_the_users_weight_with_permuted_strides(loop, bias):
    graph = fused_linear(loop, bias)
    source = generate(graph).source
    assert ".contiguous()" not in source.split("def run(")[1]      # no copy of W
    tensors = user_tensors(bias)
    got = load(graph).run(*tensors)
    assert tuple(got.shape) == (M, N)
    want = torch_reference(*tensors)
    close(got, want)
    exact = [t.double().cpu().numpy() for t in tensors]     # the interpreter, through the views
    np.testing.assert_allclose(graph.to_user(interpret(graph, *graph.to_ir(exact)))[0], want,
                               rtol=1e-9, atol=1e-9)


def test_traced_linear_runs_on_the_users_tensors():
    """A traced F.linear + bias + relu, every op pre-defined in the launcher: W is taken as the
    user's [N, K] and seen transposed, b as the user's [N]; a keepdim=False sum is returned in
    torch's shape."""
    @workload(x=(M, K), w=(N, K), b=(N,))
    def linear_relu(x, w, b):
        return torch.relu(F.linear(x, w, b)), F.linear(x, w, b).sum(-1)

    graph = linear_relu.graph
    tensors = user_tensors(True)
    got = load(graph).run(*tensors)
    assert [tuple(t.shape) for t in got] == [(M, N), (M,)]
    wants = linear_relu.reference(*tensors)
    for g, w in zip(got, wants, strict=True):
        close(g, w)
    report = check_kernel(graph, generate(graph).source, linear_relu.random_inputs(0),
                          linear_relu.reference)
    assert report["passed"], report


def test_launcher_guards_dtype_contiguity_and_grad():
    module = load(fused_linear(1, True))
    x, w, b = user_tensors(True)
    with pytest.raises(TypeError, match=r"X has dtype torch.int32; this kernel takes float16"):
        module.run(x.to(torch.int32), w, b)
    with pytest.raises(TypeError, match=r"W is torch.float32 .* but X is torch.float16"):
        module.run(x, w.float(), b)
    with pytest.raises(ValueError, match=r"W is not contiguous .*pass W\.contiguous\(\)"):
        module.run(x, w.t().contiguous().t(), b)
    with pytest.raises(ValueError, match=r"B has shape \(1, 16\); this kernel was generated "
                                         r"for \(16,\)"):
        module.run(x, w, b.reshape(1, N))              # the IR's shape is not the user's
    wg = w.clone().requires_grad_(True)
    with pytest.warns(UserWarning, match="inference-only: W require"):
        out = module.run(x, wg, b)
    assert not out.requires_grad
    close(out, torch_reference(x, w, b))


def test_float32_inputs_run():
    module = load(fused_linear(2, False))
    x, w = user_tensors(False, torch.float32)
    out = module.run(x, w)
    assert out.dtype == torch.float32
    close(out, torch_reference(x, w), tol=1e-3)


@pytest.mark.skipif(not triton_backend.interpreting(), reason="the interpreter's refusal")
def test_bfloat16_is_refused_under_the_interpreter():
    module = load(fused_linear(1, True))
    x, w, b = user_tensors(True, torch.bfloat16)
    with pytest.raises(TypeError, match=r"Triton 3\.9's interpreter computes bfloat16 "
                                        r"tl\.dot wrong"):
        module.run(x, w, b)


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a GPU")
def test_cpu_tensors_without_the_interpreter_name_it(tmp_path):
    path = triton_backend.write_module(generate(fused_linear(1, True)), tmp_path / "kernel.py")
    script = textwrap.dedent(f"""
        import importlib.util, torch
        spec = importlib.util.spec_from_file_location("k", {str(path)!r})
        module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)
        try:
            module.run(torch.ones({M}, {K}).half(), torch.ones({N}, {K}).half(),
                       torch.ones({N}).half())
        except ValueError as e:
            print(e)
    """)
    env = {**os.environ, "TRITON_INTERPRET": "0"}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env=env, timeout=300)
    assert "X is a CPU tensor; Triton kernels run on a GPU" in out.stdout, out.stderr[-2000:]
    assert "TRITON_INTERPRET=1" in out.stdout
