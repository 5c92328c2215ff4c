"""fp16, bf16 and fp32 programs (`prism.ir.dtypes`): a workload's dtype, from its decorator or
its module; the cost model's bytes and peak; the PTX signatures (compiled offline); the checks,
each in its dtype within its tolerance; the result database's key; and `--dtype`.

Oracles: torch (`torch.finfo` for unit roundoffs, the module itself, float64 references), the
datasheet numbers written out here, the PTX Triton emits, and the float64 interpreter behind
every check.
"""

from __future__ import annotations

import json
import math
import re

import pytest
import torch
from torch import nn

import prism
from prism.cli import main
from prism.cost import eager_us, get_device, modeled, roofline_us
from prism.errors import DtypeError
from prism.frontend.builder import Block, Graph
from prism.instantiate.codegen import generate
from prism.instantiate.triton_backend import compile_ptx, interpreting
from prism.ir.dtypes import BFLOAT16, DTYPES, FLOAT16, FLOAT32, get_dtype
from prism.pipeline import instantiate
from prism.tune import ResultDB, make_backend, tune
from prism.tune.backends import BF16_IN_FP32, check_kernel

NAMES = ("float16", "bfloat16", "float32")


def relu_affine(X, W, B):
    """relu(X @ W + B)."""
    return torch.relu(X @ W + B)


def affine(dtype: str = "float16", m: int = 8, k: int = 32, n: int = 16) -> prism.Workload:
    return prism.workload(relu_affine, dtype=dtype, X=(m, k), W=(k, n), B=(n,))


def split_k() -> prism.KernelGraph:
    """X @ W with K split over 4 blocks: a custom kernel writing fp32 partial tiles and the
    combine kernel that adds them into the output."""
    g = Graph("split_k")
    X, W = g.input("X", (16, 256)), g.input("W", (256, 64))
    tb = Block(grid=(4, 2), forloop_range=2)
    x, w = tb.input(X, imap=(1, -1), fmap=1), tb.input(W, imap=(0, 1), fmap=0)
    tb.output(tb.accum(tb.matmul(x, w)), omap=(-1, 1))
    (out,) = g.customized(tb)
    g.output(out)
    return g.build()


# -- the table ---------------------------------------------------------------------------------

def test_each_dtype_is_torchs_with_its_size_and_roundoff():
    for name in NAMES:
        d, t = DTYPES[name], getattr(torch, name)
        assert get_dtype(t) is d and get_dtype(name) is d and get_dtype(d) is d
        assert d.bytes == t.itemsize
        assert d.unit_roundoff == torch.finfo(t).eps / 2      # u = eps / 2
        assert d.triton == f"*{d.short}"
    for alias, d in (("fp16", FLOAT16), ("half", FLOAT16), ("bf16", BFLOAT16),
                     ("fp32", FLOAT32), ("float", FLOAT32), ("torch.bfloat16", BFLOAT16),
                     ("BFloat16", BFLOAT16)):
        assert get_dtype(alias) is d, alias


def test_tolerances_follow_each_dtypes_roundoff_and_stay_below_a_bug():
    """The tolerances in units of each dtype's u (module docstring): fp16 about 41 u, bf16
    about 13 u (roundings of outputs and intermediates), fp32 room for a long reduction's K·u;
    every one far below the O(1) error of a wrong lane."""
    units = {d.name: d.tolerance / (torch.finfo(getattr(torch, d.name)).eps / 2)
             for d in DTYPES.values()}
    assert units["float16"] == pytest.approx(40.96) and units["bfloat16"] == pytest.approx(12.8)
    assert units["float32"] > 1000
    assert FLOAT32.tolerance < FLOAT16.tolerance < BFLOAT16.tolerance <= 0.05
    assert [d.tolerance_text for d in DTYPES.values()] == [
        "fp16 tolerance 2e-2", "bf16 tolerance 5e-2", "fp32 tolerance 1e-4"]


@pytest.mark.parametrize("bad", ["float64", torch.float64, torch.int32, "int8", "fp8", None])
def test_a_dtype_prism_does_not_run_is_an_error_naming_the_ones_it_does(bad):
    with pytest.raises(DtypeError, match=r"not supported: Prism runs float16, bfloat16 and "
                                         r"float32 programs .*convert"):
        prism.workload(relu_affine, dtype=bad, X=(8, 32), W=(32, 16), B=(16,))


# -- workloads --------------------------------------------------------------------------------

def test_a_workload_keeps_its_dtype_through_new_shapes_and_json():
    w = affine("bf16")
    assert w.dtype is BFLOAT16 and affine().dtype is FLOAT16
    assert w.with_shapes(X=(4, 32)).dtype is BFLOAT16
    assert w.replace(description="d").dtype is BFLOAT16
    assert w.replace(dtype=torch.float32).dtype is FLOAT32
    assert w.to_json()["dtype"] == "bfloat16"
    assert repr(w).endswith(", bfloat16)") and "float16" not in repr(affine())


def test_from_module_takes_the_modules_dtype():
    torch.manual_seed(0)
    module = nn.Linear(32, 16).to(torch.bfloat16)
    w = prism.workload.from_module(module, torch.zeros(8, 32, dtype=torch.bfloat16))
    assert w.dtype is BFLOAT16 and w.with_shapes(input=(4, 32)).dtype is BFLOAT16
    # the values are the module's bf16 parameters, and the reference is the module in float64
    x = torch.randn(8, 32).to(torch.bfloat16)
    arrays = [x.double().numpy(), *w.random_inputs(0)[1:]]
    (got,) = w.reference(*arrays)
    want = nn.Linear(32, 16).double()
    want.load_state_dict({k: v.double() for k, v in module.state_dict().items()})
    torch.testing.assert_close(torch.from_numpy(got), want(x.double()).detach())
    assert prism.from_module(nn.Linear(32, 16), (8, 32)).dtype is FLOAT32   # torch's default


def test_from_module_refuses_tensors_that_disagree_and_float64():
    module = nn.Linear(32, 16).to(torch.bfloat16)
    with pytest.raises(DtypeError, match=r"input input is float32, weight is bfloat16\); "
                                         r"convert the module and the example inputs"):
        prism.from_module(module, torch.zeros(8, 32))
    with pytest.raises(DtypeError, match=r"module Linear: weight is float64, dtype 'float64' "
                                         r"is not supported"):
        prism.from_module(nn.Linear(32, 16).double(), (8, 32))


# -- the cost model -----------------------------------------------------------------------------

def test_fp32_moves_twice_the_bytes_of_fp16_and_computes_at_the_fp32_peak():
    graph = affine(m=64, k=512, n=256).graph
    h100 = get_device("h100")
    assert (h100.dtype, h100.dtype_bytes, h100.peak_tflops) == (FLOAT16, 2, 989.0)
    fp32 = h100.for_dtype("float32")
    assert (fp32.dtype_bytes, fp32.peak_tflops) == (4, 67.0)     # H100 SXM datasheet
    assert get_device("a100").for_dtype("fp32").peak_tflops == 19.5
    assert get_device("h200").for_dtype(torch.float32).peak_tflops == 67.0
    assert h100.for_dtype("bf16").peak_tflops == 989.0 and h100.for_dtype("bf16").dtype_bytes == 2
    # every launch moves twice the bytes
    half, full = modeled(graph, h100), modeled(graph, fp32)
    assert [k.hbm_bytes * 2 for k in half.kernels] == [k.hbm_bytes for k in full.kernels]
    # roofline and eager, computed here from the shapes and the datasheet numbers
    m, k, n = 64, 512, 256
    flops = 2 * m * n * k + 2 * m * n           # the matmul, then add and relu
    for spec, size, peak in ((h100, 2, 989e12), (fp32, 4, 67e12)):
        moved = size * (m * k + k * n + n + m * n)
        want = max(moved / 3350e9, flops / peak) * 1e6 + 4.0
        assert roofline_us(graph, spec) == pytest.approx(want)
        io = [size * (m * k + k * n + m * n), size * (m * n + n + m * n), size * 2 * m * n]
        ops = [2 * m * n * k, m * n, m * n]
        eager = sum(max(b / 3350e9, f / peak) * 1e6 + 4.0 for b, f in zip(io, ops, strict=True))
        assert eager_us(graph, spec) == pytest.approx(eager)


# -- code generation ----------------------------------------------------------------------------

def test_ptx_signatures_take_the_dtypes_pointers_and_partial_tiles_stay_fp32():
    for name in NAMES:
        program = generate(split_k(), dtype=name)
        (kernel,), (combine,) = program.kernels, program.combines
        tensor = DTYPES[name].triton
        assert [t for _, t in kernel.signature] == [tensor, tensor, "*fp32"]
        assert [t for _, t in combine.signature] == ["*fp32", tensor]
        ieee = [line for line in program.source.splitlines() if "tl.dot(" in line]
        assert ieee and all(('input_precision="ieee"' in line) == (name == "float32")
                            for line in ieee)
    # fp16's module is the module generated before dtypes (no keyword), and so is bf16's source
    assert generate(split_k(), dtype="bfloat16").source == generate(split_k()).source


@pytest.mark.parametrize("name", ["bfloat16", "float32"])
def test_bf16_and_fp32_kernels_compile_for_sm90(name):
    """bf16 tiles go to a bf16 tensor-core MMA; fp32 ones to IEEE fp32 FMAs (no tf32 MMA)."""
    kernel, combine = compile_ptx(generate(split_k(), dtype=name))
    if name == "bfloat16":
        assert re.search(r"mma\.sync\.aligned\.\S+\.f32\.bf16\.bf16\.f32", kernel.ptx)
        assert "cvt.rn.bf16.f32" in combine.ptx          # the output stored as bf16
    else:
        assert "mma" not in kernel.ptx and "tf32" not in kernel.ptx
        assert "fma.rn.f32" in kernel.ptx


# -- checks ---------------------------------------------------------------------------------------

def test_a_check_runs_in_its_dtype_within_its_tolerance():
    w = affine(m=16, k=64, n=32)
    graph = w.graph
    source = generate(graph).source
    arrays = w.random_inputs(0)
    reports = {n: check_kernel(graph, source, arrays, w.reference, n) for n in NAMES}
    for name, report in reports.items():
        assert report["passed"] and report["dtype"] == name, report
        assert report["tolerance"] == DTYPES[name].tolerance
    # fp16 rounds its outputs to fp16: an error fp32's tolerance would refuse
    assert reports["float16"]["max_rel_err_vs_torch"] > FLOAT32.tolerance
    assert reports["float32"]["max_rel_err_vs_torch"] < FLOAT32.tolerance
    if interpreting():
        assert reports["bfloat16"]["where"] == f"triton interpreter, {BF16_IN_FP32}"
        assert reports["float16"]["where"] == "triton interpreter"
        # the launcher refuses bf16 tensors there, which is why the check holds bf16 in fp32
        from prism.instantiate.triton_backend import load
        bf16 = [torch.tensor(a, dtype=torch.bfloat16) for a in arrays]
        with pytest.raises(TypeError, match=r"computes bfloat16 tl\.dot wrong"):
            load(source).run(*bf16)


def test_a_failed_check_says_its_dtypes_tolerance():
    from prism.pipeline import Check
    from prism.report import check_text
    failed = Check.from_json({"checked": True, "passed": False, "max_rel_err_vs_torch": 2e-4,
                              "dtype": "float32", "tolerance": FLOAT32.tolerance})
    assert failed.reason == "max relative error 2.0e-04 against torch is over the fp32 " \
                            "tolerance 1e-4"
    assert Check.from_json(failed.to_json()) == failed
    older = Check("passed", where="gpu", max_rel_err_vs_torch=1e-3)     # a record without one
    assert "(fp16 tolerance 2e-2)" in check_text(older)


@pytest.mark.parametrize("name", NAMES)
def test_a_workload_is_optimized_and_checked_in_its_dtype(name):
    w = affine(name)
    result = prism.superoptimize(w, budget_s=60, compile_ptx=False)
    best = result.best
    assert best is not None and best.check.status == "passed", best and best.check
    assert best.dtype == best.check.dtype == name
    assert best.check.tolerance == DTYPES[name].tolerance
    assert best.check.max_rel_err_vs_torch is not None
    assert best.check.max_rel_err_vs_torch <= DTYPES[name].tolerance
    spec = get_device("h100").for_dtype(name)
    assert result.eager_us == eager_us(w.graph, spec)
    assert result.roofline_us == roofline_us(w.graph, spec)
    assert best.modeled_us == modeled(best.graph, spec).latency_us
    assert ('input_precision="ieee"' in best.triton_source) == (name == "float32" and
                                                               "tl.dot(" in best.triton_source)
    from prism.report import check_text
    assert DTYPES[name].tolerance_text in check_text(best.check)


def test_the_dtype_argument_overrides_the_workloads():
    result = prism.superoptimize(affine("float16"), dtype="fp32", budget_s=60, compile_ptx=False)
    assert result.best is not None and result.best.check.dtype == "float32"
    with pytest.raises(DtypeError):
        prism.superoptimize(affine(), dtype="float64", budget_s=60)


# -- the result database ------------------------------------------------------------------------

def test_a_timing_in_one_dtype_is_never_reused_for_another(tmp_path):
    graph = affine().graph
    db = ResultDB(tmp_path / "db.jsonl")
    runs = []
    for name in ("float16", "float32", "float16", "float32"):
        spec = get_device("h100").for_dtype(name)
        result = tune(instantiate(graph, None, spec), make_backend("model", spec), spec, db=db,
                      compile_ptx=False)
        runs.append([(t.cached, t.latency_us) for t in result.finalists])
    assert [c for c, _ in runs[0] + runs[1]] == [False] * (len(runs[0]) + len(runs[1]))
    assert runs[2] == [(True, us) for _, us in runs[0]]        # each dtype's own record
    assert runs[3] == [(True, us) for _, us in runs[1]]
    assert all(math.isfinite(us) for _, us in runs[0])
    assert runs[1][0][1] > runs[0][0][1]                         # fp32 is slower, not reused


# -- the command line ---------------------------------------------------------------------------

def test_optimize_refuses_a_dtype_it_does_not_run(capsys):
    assert main(["optimize", "rmsnorm_matmul", "--dtype", "float64"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert "--dtype: 'float64' is not a dtype Prism runs: give float16, bfloat16 or float32" in err


def test_optimize_runs_the_dtype_it_is_given(capsys, tmp_path):
    (tmp_path / "mine.py").write_text(
        "import torch\nimport prism\n\n"
        "@prism.workload(X=(8, 32), W=(32, 16), B=(16,))\n"
        "def relu_affine(X, W, B):\n    return torch.relu(X @ W + B)\n")
    code = main(["optimize", f"{tmp_path / 'mine.py'}:relu_affine", "--dtype", "bf16",
                 "--budget", "60", "--max-trials", "2", "--out", str(tmp_path / "out"),
                 "--db", str(tmp_path / "db.jsonl"), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0, doc
    check = doc["best"]["check"]
    assert check["status"] == "passed" and check["dtype"] == "bfloat16"
    assert check["tolerance"] == BFLOAT16.tolerance
    ptx = (tmp_path / "out" / "kernel.ptx").read_text()
    assert "bf16" in ptx                      # the winner compiled with bf16 tensors
