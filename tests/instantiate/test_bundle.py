"""One `kernel.py` for several shapes (`prism.instantiate.bundle`), against the float64
interpreter: each shape's launcher runs in Triton's interpreter from the one bundled module, and
a shape the module does not carry is refused with the shapes it does carry.

The end-to-end path (`superoptimize(..., also_at=...)`, `prism optimize --also-at`) is in
tests/test_optimize_cli.py.
"""

from __future__ import annotations

import ast

import numpy as np
import pytest
import torch

from prism.instantiate import triton_backend
from prism.instantiate.bundle import BundleError, bundle
from prism.instantiate.codegen import generate
from prism.ir.interpret import interpret
from prism.workloads.known_best import known_best

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning:triton.runtime.interpreter")

SHAPES = [{"X": (8, 64), "W": (64, 128)}, {"X": (16, 64), "W": (64, 128)},
          {"X": (4, 128), "W": (128, 64)}]


def programs() -> list[tuple[dict, object]]:
    return [(s, known_best("rmsnorm_matmul", s, grid=2, loop=2)) for s in SHAPES]


def test_each_shape_runs_from_one_module_and_matches_the_interpreter() -> None:
    made = programs()
    source = bundle([generate(g, name="rmsnorm_matmul").source for _, g in made])
    module = triton_backend.load(source)
    rng = np.random.default_rng(5)
    for shapes, graph in made:
        xs = [rng.standard_normal(shapes[p]) for p in ("X", "W")]
        want = interpret(graph, *xs)[0]
        where = "cpu" if triton_backend.interpreting() else "cuda"
        got = module.run(*[torch.tensor(x, dtype=torch.float32, device=where) for x in xs])
        assert tuple(got.shape) == want.shape
        np.testing.assert_allclose(got.double().cpu().numpy(), want, rtol=1e-4, atol=1e-4)


def test_shared_helpers_once_and_each_shape_kernel_renamed() -> None:
    made = programs()[:2]
    sources = [generate(g, name="rmsnorm_matmul").source for _, g in made]
    tree = ast.parse(bundle(sources))
    defined = [n.name if isinstance(n, ast.FunctionDef) else n.targets[0].id  # type: ignore
               for n in tree.body if isinstance(n, ast.FunctionDef | ast.Assign)]
    kernels = [n.name for n in ast.parse(sources[0]).body if isinstance(n, ast.FunctionDef)
               and n.decorator_list]
    assert kernels                              # the known-best program has a custom kernel
    # the oracle: each source's own definitions, which the bundle keeps once or per shape
    assert defined.count("_prepare") == 1 and defined.count("run") == 1
    for k in [*kernels, "run", "_INPUTS"]:
        assert f"{k}_s0" in defined and f"{k}_s1" in defined, k
    assert len(defined) == len(set(defined))


def test_a_shape_not_carried_is_refused_with_the_shapes_carried() -> None:
    made = programs()[:2]
    module = triton_backend.load(bundle([generate(g).source for _, g in made]))
    with pytest.raises(ValueError, match=r"\(3, 64\).*carries the shapes \(8, 64\) \(64, 128\); "
                       r"\(16, 64\) \(64, 128\)"):
        module.run(torch.zeros(3, 64), torch.zeros(64, 128))


def test_modules_that_cannot_be_bundled_are_refused() -> None:
    s0, s1 = (generate(g).source for _, g in programs()[:2])
    with pytest.raises(BundleError, match="same input shapes"):
        bundle([s0, s0])
    with pytest.raises(BundleError, match="not a generated kernel module"):
        bundle([s0, "x = 1\nprint(x)\n"])
    with pytest.raises(BundleError, match="at least one"):
        bundle([])
    assert bundle([s1]) == s1                   # one shape: the module as generated
