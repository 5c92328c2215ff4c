"""The reference interpreter against torch (float64) on hand-built block graphs.

Each block graph is the fused form of a program torch computes directly; the oracle is that
program in torch, or an index-by-index numpy loop where the semantics under test is data movement.
"""

import importlib

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from prism.errors import InputError, SpecError
from prism.frontend.builder import Block, Graph
from prism.ir.interpret import interpret
from prism.workloads.known_best import known_best

rng = np.random.default_rng(2026)


def randn(*shape):
    return rng.standard_normal(shape)


def rel_err(got, want):
    return float(np.abs(got - want).max() / np.abs(want).max())


def rms_norm(x):
    return F.rms_norm(x, (x.shape[-1],), eps=0.0)


@pytest.mark.parametrize(("n", "d", "grid", "loop"), [(8, 256, 4, 4), (16, 128, 1, 1),
                                                      (8, 256, 16, 8), (4, 64, 2, 64)])
def test_fused_rmsnorm_matmul(n, d, grid, loop):
    g = known_best("rmsnorm_matmul", {"X": (n, d), "W": (d, d)}, grid=grid, loop=loop)
    X, W = randn(n, d), randn(d, d)
    (out,) = interpret(g, X, W)
    want = (rms_norm(torch.from_numpy(X)) @ torch.from_numpy(W)).numpy()
    assert rel_err(out, want) < 1e-12


@pytest.mark.parametrize("name", ["rmsnorm_mlp", "swiglu", "gated_mlp"])
def test_fused_mlps(name):
    n, d = 8, 128
    params = {"rmsnorm_mlp": ("Wup", "Wgate"), "swiglu": ("Wgate", "Wup"),
              "gated_mlp": ("W1", "W2")}[name]
    shapes = {"X": (n, d), **{p: (d, d) for p in params}}
    g = known_best(name, shapes, grid=4, loop=2)
    arrays = [randn(*shapes[p]) for p in g.inputs]
    X, W1, W2 = (torch.from_numpy(a) for a in arrays)
    if name == "rmsnorm_mlp":
        want = (rms_norm(X) @ W1) * (rms_norm(X) @ W2)
    else:
        want = F.silu(X @ W1) * (X @ W2)
    (out,) = interpret(g, *arrays)
    assert rel_err(out, want.numpy()) < 1e-12


def test_symbolic_block_graph_under_assignments():
    g = Graph()
    X, W = g.input("X", (8, 256)), g.input("W", (256, 128))
    tb = Block(grid=("gx",), forloop_range="F")
    x, w = tb.input(X, imap=(-1,), fmap=1), tb.input(W, imap=(1,), fmap=0)
    tb.output(tb.div(tb.accum(tb.matmul(x, w)), tb.accum(x, "red_ld_rms")), omap=(1,))
    (o,) = g.customized(tb)
    g.output(o)
    kg = g.build()
    Xa, Wa = randn(8, 256), randn(256, 128)
    want = (rms_norm(torch.from_numpy(Xa)) @ torch.from_numpy(Wa)).numpy()
    for gx, f in [(1, 1), (2, 16), (8, 4), (128, 256)]:
        (out,) = interpret(kg, Xa, Wa, assignment={"gx": gx, "F": f})
        assert rel_err(out, want) < 1e-12
    with pytest.raises(SpecError, match="not an integer"):
        interpret(kg, Xa, Wa, assignment={"gx": 3, "F": 4})


def test_two_grid_dims_and_sum_across_blocks():
    """Grid (x, y, z): x splits rows of X, y splits columns of W, z splits K on both operands and
    the output sums the z blocks (omap z → none): partial sums of a matmul."""
    g = Graph()
    X, W = g.input("X", (32, 64)), g.input("W", (64, 48))
    tb = Block(grid=(2, 3, 4), forloop_range=2)
    x = tb.input(X, imap=(0, -1, 1), fmap=1)
    w = tb.input(W, imap=(-1, 1, 0), fmap=0)
    tb.output(tb.accum(tb.matmul(x, w)), omap=(0, 1, -1))
    (o,) = g.customized(tb)
    g.output(o)
    Xa, Wa = randn(32, 64), randn(64, 48)
    (out,) = interpret(g.build(), Xa, Wa)
    assert rel_err(out, Xa @ Wa) < 1e-12


def test_imap_and_fmap_on_the_same_dim_nest_grid_outside_loop():
    """Dim 0 of X[64, 4] split by grid x (2 blocks) then by the loop (4 iterations): block b,
    iteration i reads rows ((b·4 + i)·8 ...+8); `nored` sums the iterations."""
    g = Graph()
    X = g.input("X", (64, 4))
    tb = Block(grid=(2,), forloop_range=4)
    tb.output(tb.accum(tb.exp(tb.input(X, imap=(0,), fmap=0))), omap=(0,))
    (o,) = g.customized(tb)
    g.output(o)
    Xa = randn(64, 4)
    (out,) = interpret(g.build(), Xa)
    want = np.zeros((16, 4))
    for b in range(2):
        for i in range(4):
            start = (b * 4 + i) * 8
            want[b * 8:(b + 1) * 8] += np.exp(Xa[start:start + 8])
    assert rel_err(out, want) < 1e-14


@pytest.mark.parametrize(("kind", "fn"), [
    ("red_ld_sum", lambda x: x.sum(-1, keepdims=True)),
    ("red_ld_mean", lambda x: x.mean(-1, keepdims=True)),
    ("red_ld_rms", lambda x: np.sqrt((x * x).mean(-1, keepdims=True))),
    ("redtox_ld_sum", lambda x: x.reshape(4, 4, 16).sum(1)),
])
def test_accumulators(kind, fn):
    g = Graph()
    X = g.input("X", (4, 64))
    tb = Block(grid=(1,), forloop_range=2, reduction_dimx=16)
    tb.output(tb.accum(tb.input(X, fmap=1), kind), omap=(-1,))
    (o,) = g.customized(tb)
    g.output(o)
    Xa = randn(4, 64)
    (out,) = interpret(g.build(), Xa)
    assert rel_err(out, fn(Xa)) < 1e-13


def test_batched_attention_block():
    """exp/sum/div attention fused over the batch (grid) and the keys (loop): O = Σ_i e_i V_i /
    Σ_i rowsum(e_i), e_i = exp(Q K_i)."""
    g = Graph()
    Q, K, V = g.input("Q", (2, 16, 8)), g.input("K", (2, 8, 32)), g.input("V", (2, 32, 8))
    tb = Block(grid=(2,), forloop_range=4)
    q = tb.input(Q, imap=(0,))
    k = tb.input(K, imap=(0,), fmap=2)
    v = tb.input(V, imap=(0,), fmap=1)
    e = tb.exp(tb.matmul(q, k))
    tb.output(tb.div(tb.accum(tb.matmul(e, v)), tb.accum(e, "red_ld_sum")), omap=(0,))
    (o,) = g.customized(tb)
    g.output(o)
    Qa, Ka, Va = (0.3 * randn(2, 16, 8), 0.3 * randn(2, 8, 32), randn(2, 32, 8))
    (out,) = interpret(g.build(), Qa, Ka, Va)
    want = torch.softmax(torch.from_numpy(Qa) @ torch.from_numpy(Ka), -1) @ torch.from_numpy(Va)
    assert rel_err(out, want.numpy()) < 1e-12


def test_kernel_level_ops_chain():
    g = Graph()
    X, W = g.input("X", (4, 8)), g.input("W", (8, 8))
    h = g.matmul(g.rms_norm(X), W)
    g.output(g.mul(g.silu(h), g.sum(g.square(h), dim=1)))
    Xa, Wa = randn(4, 8), randn(8, 8)
    (out,) = interpret(g.build(), Xa, Wa)
    ht = rms_norm(torch.from_numpy(Xa)) @ torch.from_numpy(Wa)
    want = F.silu(ht) * (ht * ht).sum(1, keepdim=True)
    assert rel_err(out, want.numpy()) < 1e-12


def test_input_errors_name_the_problem():
    g = known_best("rmsnorm_matmul", {"X": (8, 64), "W": (64, 64)})
    with pytest.raises(InputError, match="takes 2 inputs"):
        interpret(g, randn(8, 64))
    with pytest.raises(InputError, match="input W has shape"):
        interpret(g, randn(8, 64), randn(64, 32))


def test_torch_tensors_are_accepted():
    g = known_best("rmsnorm_matmul", {"X": (8, 64), "W": (64, 64)})
    X, W = torch.randn(8, 64, dtype=torch.float16), torch.randn(64, 64, dtype=torch.float16)
    (out,) = interpret(g, X, W)
    want = (rms_norm(X.double()) @ W.double()).numpy()
    assert rel_err(out, want) < 1e-12


def test_the_interpreter_runs_blas_on_one_thread_and_gives_the_callers_setting_back(monkeypatch):
    """Inside `interpret` NumPy's BLAS has one thread (a threaded BLAS waiting for a busy core
    made tile products up to 300x slower); the caller's setting is what it was afterwards.
    Oracle: threadpoolctl's own report, read inside an op's reference and after the call."""
    from threadpoolctl import threadpool_info, threadpool_limits

    interp = importlib.import_module("prism.ir.interpret")   # the module, not the function
    seen = []
    real = interp._apply

    def apply(*args, **kwargs):
        seen.append({i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"})
        return real(*args, **kwargs)
    monkeypatch.setattr(interp, "_apply", apply)
    g = Graph()
    a, b = g.input("A", (4, 8)), g.input("B", (8, 4))
    g.output(g.matmul(a, b))
    graph = g.build()
    x, y = randn(4, 8), randn(8, 4)
    with threadpool_limits(2, user_api="blas"):
        before = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
        (out,) = interpret(graph, x, y)
        after = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
    assert seen and all(s == {1} for s in seen)
    assert after == before
    np.testing.assert_allclose(out, x @ y, rtol=1e-12)


@pytest.mark.parametrize("limit_bytes, names", [(256 << 20, None), (4 << 20, None),
                                                 (256 << 20, 40)],
                         ids=["kept", "mostly dropped", "names dropped"])
def test_values_kept_across_runs_give_every_run_its_own_outputs(limit_bytes, names):
    """A search's candidates run on one draw with a shared `Values` (as its random tests do):
    each gives exactly the outputs it gives alone, though most of its ops' values come from
    the runs before it; with a memory limit that drops most values, or a names limit that
    drops everything between runs, the same outputs again. A writable input is never named,
    so nothing is taken or kept for it."""
    from prism.ir.interpret import Values
    from prism.search import search
    from prism.search.config import SearchConfig
    from prism.verify.randomized import valid_assignments
    from prism.workloads import get_workload
    target = get_workload("swiglu").graph
    result = search(target, SearchConfig(budget_s=600, max_block_ops=5))
    graphs = [(target, {})] + [(c.graph, valid_assignments(c.graph)[0])
                               for c in result.candidates]
    assert len(graphs) > 20
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal([d.value for d in target.shape(t)]) for t in target.inputs]
    for a in arrays:
        a.setflags(write=False)
    values = Values(limit_bytes)
    if names is not None:
        values.NAMES = names
    for g, env in graphs + graphs[:5]:
        shared = interpret(g, *arrays, assignment=env, values=values)
        alone = interpret(g, *arrays, assignment=env)
        assert all(np.array_equal(s, a) for s, a in zip(shared, alone, strict=True))
    assert values.hits > 0
    writable = Values()
    interpret(graphs[1][0], *[a.copy() for a in arrays], assignment=graphs[1][1],
              values=writable)
    assert writable.hits == writable.misses == 0


def test_values_shared_between_threads_give_every_run_its_own_outputs():
    """Two threads run a search's candidates with one `Values` while a third asks it to clear
    again and again (a new draw, as the random tests do): every run gives exactly what it
    gives alone. A clear waits for the runs under way, whose names it would give other
    values."""
    import threading

    from prism.ir.interpret import Values
    from prism.search import search
    from prism.search.config import SearchConfig
    from prism.verify.randomized import valid_assignments
    from prism.workloads import get_workload
    target = get_workload("swiglu").graph
    result = search(target, SearchConfig(budget_s=600, max_block_ops=5))
    graphs = [(target, {})] + [(c.graph, valid_assignments(c.graph)[0])
                               for c in result.candidates]
    rng = np.random.default_rng(1)
    arrays = [rng.standard_normal([d.value for d in target.shape(t)]) for t in target.inputs]
    for a in arrays:
        a.setflags(write=False)
    alone = [interpret(g, *arrays, assignment=env) for g, env in graphs]
    values, done, wrong = Values(), threading.Event(), []

    def runs(order: list[int]) -> None:
        for i in order:
            g, env = graphs[i]
            got = interpret(g, *arrays, assignment=env, values=values)
            if not all(np.array_equal(x, y) for x, y in zip(got, alone[i], strict=True)):
                wrong.append(i)

    def clears() -> None:
        while not done.is_set():
            values.clear()

    n = len(graphs)
    workers = [threading.Thread(target=runs, args=(list(range(n)) * 2,)),
               threading.Thread(target=runs, args=(list(reversed(range(n))) * 2,))]
    clearer = threading.Thread(target=clears)
    clearer.start()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    done.set()
    clearer.join()
    assert not wrong
    assert values.hits + values.misses > 0
