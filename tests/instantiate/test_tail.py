"""A kernel with a tail (`launch="tail"`): a split program's second kernel run in the first one's
launch, by the last block of each group to finish.

Oracles: the float64 interpreter of the same graph and numpy's attention (every allocation
poisoned with NaN, so a part the tail reads before it is written shows), the counters back at 0
after each run, and Triton's offline compiler (the PTX holds the counter's atomic). The
interpreter runs blocks one after another, so it shows what the tail computes once every part is
stored; that the last block of a group runs it is the counter's doing on a GPU, which only the
generated code's test below and the PTX see here."""

import inspect
import itertools

import numpy as np
import pytest

from prism.cost import get_device, modeled
from prism.instantiate.bundle import bundle
from prism.instantiate.codegen import generate
from prism.instantiate.triton_backend import compile_ptx
from prism.ir.spec import substitute_graph
from prism.search.split import one_launch, split_loop, split_softmax
from tests.search.test_split_loop import _one_kernel, _reference
from tests.search.test_split_softmax import SCALE, one_kernel_safe

SHAPES = {"Q": (2, 4, 16), "K": (2, 16, 64), "V": (2, 64, 16)}


def _safe_reference(Q, K, V):
    S = Q @ K * SCALE
    e = np.exp(S - S.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)) @ V


def _arrays(seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(SHAPES[p]) * 0.3 for p in ("Q", "K", "V")]


def inspect_source(module):
    return inspect.getsource(module)


def _tail_program(move, one):
    program, why = move(one)
    assert program is not None, why
    merged, why = one_launch(program)
    assert merged is not None, why
    return merged


@pytest.mark.parametrize("env", [dict(zip("brsF", v, strict=True)) for v in
                                 itertools.product((1, 2), (1, 2), (1, 2, 4), (1, 2))])
def test_split_key_attention_in_one_launch_computes_attention(kit, env):
    graph = substitute_graph(_tail_program(split_loop, _one_kernel(SHAPES)), env)
    program = kit.check(graph, _arrays(), reference=lambda *a: [_reference(*a)])
    assert len(program.kernels) == 1 and program.combines == ()


@pytest.mark.parametrize("parts", [2, 4])
def test_the_log_sum_exp_split_in_one_launch_computes_safe_attention(kit, parts):
    merged = _tail_program(split_softmax, one_kernel_safe(SHAPES))
    env = {v: 2 for v in merged.free_vars()} | {"s": parts}
    kit.check(substitute_graph(merged, env), _arrays(1),
              reference=lambda *a: [_safe_reference(*a)])


def test_each_run_leaves_the_counters_at_zero_and_runs_again_the_same(kit):
    graph = substitute_graph(_tail_program(split_loop, _one_kernel(SHAPES)),
                             {"b": 2, "r": 2, "s": 4, "F": 1})
    module = kit.load(generate(graph))
    tensors = kit.fp16(_arrays(2))
    first = kit.as64([module.run(*tensors)])[0]
    (counters,) = module._COUNTERS.values()
    assert counters.tolist() == [0, 0, 0, 0]       # one per group (b, r), back at 0
    # the block that takes the count to 4, the group's split count, runs the tail
    assert "tl.atomic_add(counters_ptr + group, 1)" in inspect_source(module)
    assert "if arrived == 3:" in inspect_source(module)
    second = kit.as64([module.run(*tensors)])[0]
    np.testing.assert_array_equal(first, second)
    kit.assert_close(first, _reference(*kit.as64(tensors)), what="one launch")


def test_the_one_launch_program_compiles_with_its_counter_and_the_model_counts_one_launch():
    graph = substitute_graph(_tail_program(split_loop, _one_kernel(SHAPES)),
                             {"b": 2, "r": 2, "s": 4, "F": 1})
    program = generate(graph)
    (kernel,) = compile_ptx(program)
    assert "atom.global" in kernel.ptx and "ld.global.cg" in kernel.ptx
    cost = modeled(graph, get_device("h100"))
    assert cost.launches == 1 and [k.kind for k in cost.kernels] == ["customized", "tail"]
    assert cost.kernels[0].blocks == 16 == int(np.prod(program.kernels[0].grid))
    # the log-sum-exp split's tail walks the parts in a loop of its own, after the head's loop
    safe = _tail_program(split_softmax, one_kernel_safe(SHAPES))
    program = generate(substitute_graph(safe, {"b": 2, "r": 2, "s": 4}))
    (kernel,) = compile_ptx(program)
    assert "atom.global" in kernel.ptx


def test_a_bundle_of_two_shapes_keeps_a_counter_per_kernel(kit):
    """`kernel.py` for several shapes renames each shape's kernels; each keeps its own counters
    (keyed by the kernel, not by its name, which the bundle renames)."""
    other = {"Q": (2, 8, 16), "K": (2, 16, 128), "V": (2, 128, 16)}
    env = {"b": 2, "r": 2, "s": 4, "F": 1}
    sources = [generate(substitute_graph(_tail_program(split_loop, _one_kernel(shapes)),
                                         env | {"s": s})).source
               for shapes, s in ((SHAPES, 4), (other, 8))]
    module = kit.load(bundle(sources))
    rng = np.random.default_rng(3)
    for shapes in (SHAPES, other, SHAPES):
        tensors = kit.fp16([rng.standard_normal(shapes[p]) * 0.3 for p in ("Q", "K", "V")])
        kit.assert_close(kit.as64([module.run(*tensors)])[0], _reference(*kit.as64(tensors)),
                         what=f"bundle at {shapes['Q']}")
    assert sorted(c.numel() for c in module._COUNTERS.values()) == [4, 4]
    assert all(c.tolist() == [0] * 4 for c in module._COUNTERS.values())
