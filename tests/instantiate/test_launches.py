"""The cost model charges the launches the generated code makes: every kernel launch a generated
module's `run()` makes, counted while it runs, against `modeled(graph).kernels` (one entry per
launch, in order), for the nine workloads (hand-fused kernels and traced, unfused graphs, at their
default shapes), every graph of the Mirage corpus, and programs that sum blocks or chain kernels.

The count is the oracle and knows nothing of the model:
- a Triton launch is counted where Triton runs it (`JITFunction.run`, or under TRITON_INTERPRET=1
  `InterpretedFunction.run`), with its grid, and not executed: a kernel launches nothing, and the
  launcher's control flow does not depend on data, so the count is the same and the corpus's
  real shapes take no interpreter time;
- a torch launch is counted at torch's dispatcher (`TorchDispatchMode`): every aten op the
  launcher calls except allocations (`empty`, which fills nothing) and views (an op that writes
  no tensor and whose every result shares an input's storage: `view`, `expand`, `_unsafe_view`).
  An aten op is one GPU kernel for the ops the launcher uses (a library may still split one, e.g.
  a split-K GEMM; the model counts a library call as one launch, and so does this count).
Before this test, the model charged one launch per kernel op while the launcher added a
`.float()` per operand and a `.to()` per pre-defined op and a `.sum().to()` per summed output.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from prism.cost import get_device, modeled
from prism.frontend.builder import Block, Graph
from prism.frontend.mirage import import_mirage
from prism.instantiate import triton_backend
from prism.instantiate.codegen import generate
from prism.ir.graph import KernelGraph
from prism.workloads import WORKLOADS, get_workload
from prism.workloads.known_best import known_best

H100 = get_device("h100")
ALLOCATIONS = frozenset({"empty", "empty_strided"})


@dataclass(frozen=True)
class Launch:
    by: str                          # "triton" or "torch"
    name: str                        # the kernel, or the aten op
    grid: tuple[int, ...] = ()


def tensors(tree: Any) -> list[torch.Tensor]:
    return [t for t in tree_flatten(tree)[0] if isinstance(t, torch.Tensor)]


def launches_a_kernel(func: Any, args: Any, result: Any) -> bool:
    """Whether an aten op computes, and so launches a kernel on a GPU: not an allocation, and not
    a view (it writes no tensor, and every result lies in an input's storage)."""
    if func.overloadpacket.__name__ in ALLOCATIONS:
        return False
    schema = func._schema
    if any(a.alias_info is not None and a.alias_info.is_write
           for a in (*schema.arguments, *schema.returns)):
        return True
    storages = {t.untyped_storage().data_ptr() for t in tensors(args)}
    results = tensors(result)
    return not results or any(t.untyped_storage().data_ptr() not in storages for t in results)


class TorchLaunches(TorchDispatchMode):
    def __init__(self, log: list[Launch]):
        super().__init__()
        self.log = log

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        result = func(*args, **kwargs)
        if launches_a_kernel(func, (args, kwargs), result):
            self.log.append(Launch("torch", str(func)))
        return result


@pytest.fixture
def count(monkeypatch: pytest.MonkeyPatch) -> Callable[[KernelGraph], list[Launch]]:
    """`count(graph)`: the launches of `graph`'s generated `run()` on contiguous fp16 inputs."""
    triton_backend.interpreting()            # decides the interpreter before triton's import
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction
    log: list[Launch] = []

    def run(self: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> None:
        if not warmup:
            log.append(Launch("triton", self.fn.__name__, tuple(grid)))
    for cls in (InterpretedFunction, JITFunction):
        monkeypatch.setattr(cls, "run", run)

    def count(graph: KernelGraph) -> list[Launch]:
        module = triton_backend.load(generate(graph))
        device = "cpu" if triton_backend.interpreting() else "cuda"
        inputs = [torch.ones([d.value for d in graph.shape(t)], dtype=torch.float16,
                             device=device) for t in graph.inputs]
        log.clear()
        with TorchLaunches(log):
            module.run(*inputs)
        return list(log)
    return count


def assert_model_counts(graph: KernelGraph, launches: list[Launch]) -> None:
    """The model's launches are the code's, one for one: a Triton launch for each custom and
    combine kernel (with the model's block count as its grid), a torch one for each of the
    predefined ops'."""
    cost = modeled(graph, H100)
    model = ["triton" if k.kind in ("customized", "combine") else "torch" for k in cost.kernels]
    code = [launch.by for launch in launches]
    assert len(cost.kernels) == len(launches), \
        f"{graph.name}: the model charges {model}, the code launches {launches}"
    assert model == code, f"{graph.name}: model {model}, code {code}"
    for k, launch in zip(cost.kernels, launches, strict=True):
        if launch.by == "triton":
            assert math.prod(launch.grid) == k.blocks, f"{graph.name}: {launch} vs {k}"


def test_the_counter_counts_what_computes_and_skips_allocations_and_views():
    x = torch.ones(4, 6, dtype=torch.float16)
    log: list[Launch] = []
    with TorchLaunches(log):
        torch.empty(3)
        x.view(6, 4), x.t(), x[:2], x.unsqueeze(0).expand(2, 4, 6), x.contiguous(), x.detach()
        x.reshape(24), torch.matmul(x.view(1, 4, 6), x.view(1, 6, 4))
        x.to(torch.float16)
        assert [launch.name for launch in log] == ["aten.bmm.default"]
        x.float(), x.t().contiguous(), x.sum(dim=0).to(torch.float16), torch.zeros(3), x.mul_(1)
    assert [launch.name for launch in log] == [
        "aten.bmm.default", "aten._to_copy.default", "aten.clone.default", "aten.sum.dim_IntList",
        "aten.zeros.default", "aten.mul_.Tensor"]


# -- the nine workloads ----------------------------------------------------------------------------

@pytest.mark.parametrize("name", list(WORKLOADS))
def test_the_model_counts_the_launches_of_the_hand_fused_kernel(count, name):
    graph = known_best(name, get_workload(name).shapes)
    launches = count(graph)
    assert [launch.by for launch in launches] == ["triton"]
    assert_model_counts(graph, launches)


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_the_model_counts_the_launches_of_the_unfused_graph(count, name):
    graph = get_workload(name).graph
    launches = count(graph)
    assert launches and all(launch.by == "torch" for launch in launches)
    assert_model_counts(graph, launches)


# -- the Mirage corpus -----------------------------------------------------------------------------

def corpus(folder: Path) -> Iterator[KernelGraph]:
    for path in sorted(folder.glob("*.json")):
        yield from import_mirage(path)


def test_the_model_counts_the_launches_of_every_corpus_graph(count, corpus_dir):
    graphs = list(corpus(corpus_dir))
    assert len(graphs) == 84
    kinds = set()
    for graph in graphs:
        launches = count(graph)
        kinds |= {launch.by for launch in launches}
        assert_model_counts(graph, launches)
    assert kinds == {"triton", "torch"}      # gated_mlp's graphs multiply in torch after a kernel


# -- blocks summed, kernels chained, every pre-defined op ------------------------------------------

def summed(grid: tuple[int, ...], x_imap: tuple[int, ...], w_imap: tuple[int, ...],
           omaps: tuple[tuple[int, ...], ...], cols: int = 96) -> KernelGraph:
    """X [8, 512] @ W [512, cols], the loop walking K, the blocks' tiles stored once per omap."""
    g = Graph("summed")
    X, W = g.input("X", (8, 512)), g.input("W", (512, cols))
    tb = Block(grid=grid, forloop_range=2)
    x = tb.input(X, imap=x_imap, fmap=1)
    w = tb.input(W, imap=w_imap, fmap=0)
    y = tb.accum(tb.matmul(x, w))
    for omap in omaps:
        tb.output(y, omap=omap)
    for out in g.customized(tb):
        g.output(out)
    return g.build()


def chain() -> KernelGraph:
    """rms_norm in torch → a custom kernel summing 4 blocks → exp in torch → a custom kernel."""
    g = Graph("chain")
    X, W = g.input("X", (16, 256)), g.input("W", (256, 2048))
    r = g.rms_norm(X)
    tb = Block(grid=(4, 2), forloop_range=2)
    x, w = tb.input(r, imap=(1, -1), fmap=1), tb.input(W, imap=(0, 1), fmap=0)
    tb.output(tb.accum(tb.matmul(x, w)), omap=(-1, 1))
    (h,) = g.customized(tb)
    e = g.exp(h)
    tb2 = Block(grid=(4,), forloop_range=1)
    tb2.output(tb2.accum(tb2.silu(tb2.input(e, imap=(0,)))), omap=(0,))
    (out,) = g.customized(tb2)
    g.output(out)
    return g.build()


def every_predefined_op() -> KernelGraph:
    g = Graph("kernel_ops")
    X, W, Y = g.input("X", (4, 8)), g.input("W", (8, 6)), g.input("Y", (4, 6))
    m = g.matmul(X, W)
    for t in (m, g.exp(g.mul_scalar(m, 0.25)), g.silu(m), g.relu(m), g.gelu(m),
              g.sqrt(g.square(m)), g.add(m, Y), g.mul(m, Y), g.div(m, Y), g.pow(m, Y),
              g.sum(m, dim=0), g.mean(m, dim=1), g.rms_norm(m)):
        g.output(t)
    return g.build()


PROGRAMS: dict[str, Callable[[], KernelGraph]] = {
    "split-k": lambda: summed((4,), (1,), (0,), ((-1,),)),
    # 2 × 4 blocks: x splits the columns, y splits K; one output sums y, the other x and y
    "two-summed-outputs": lambda: summed((2, 4), (-1, 1), (1, 0), ((1, -1), (-1, -1))),
    # Y [8, 100]: 800 elements, not a multiple of COMBINE_BLOCK
    "split-k-ragged": lambda: summed((4,), (1,), (0,), ((-1,),), cols=100),
    "chain": chain,
    "every-predefined-op": every_predefined_op,
}


@pytest.mark.parametrize("case", list(PROGRAMS))
def test_the_model_counts_the_launches_of_summed_and_chained_programs(count, case):
    graph = PROGRAMS[case]()
    assert_model_counts(graph, count(graph))


def test_a_summed_output_is_one_combine_launch_not_two_torch_calls(count):
    from prism.instantiate.codegen import COMBINE_BLOCK
    launches = count(PROGRAMS["two-summed-outputs"]())
    assert COMBINE_BLOCK == 256
    assert [(launch.by, launch.grid) for launch in launches] == [
        ("triton", (2, 4)),
        ("triton", (3,)),            # [8, 96], the 4 blocks along y summed: 768 elements
        ("triton", (2,)),            # [8, 48], all 8 blocks summed: 384 elements
    ]
