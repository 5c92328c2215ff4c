"""The cost model against hand computation (the formulas of DESIGN.md §6 written out here) and
its invariants on real graphs: roofline ≤ lower bound ≤ modeled latency for every workload's
hand-built fused kernel at several grid and loop sizes, and for every member of a symbolic
family; the fused kernels beat the modeled eager baseline. That the model's launches are the
generated code's is tests/instantiate/test_launches.py."""

import dataclasses
import functools
import math

import pytest

from prism.cost import (
    DEVICES,
    eager_us,
    full_size_flops,
    get_device,
    lower_bound_us,
    modeled,
    roofline_us,
)
from prism.cost.model import CACHE_REGIME
from prism.errors import PrismError, ShapeError, UnknownDeviceError
from prism.frontend.builder import Block, Graph
from prism.ir.dims import var
from prism.ir.graph import KernelGraph
from prism.ir.infer import infer_shapes
from prism.workloads import WORKLOADS, get_workload
from prism.workloads.known_best import known_best

H100 = get_device("h100")
SHAPES = {"X": (8, 1024), "W": (1024, 1024)}   # rmsnorm_matmul's default


def mem_us(nbytes: float, device=H100) -> float:
    return nbytes / (device.mem_bw_gbps * 1e9) * 1e6


def flop_us(flops: float, device=H100) -> float:
    return flops / (device.fp16_tflops * 1e12) * 1e6


@functools.cache
def traced(name: str) -> KernelGraph:
    return get_workload(name).graph


# -- devices ---------------------------------------------------------------------------------------

def test_devices_are_looked_up_in_any_case():
    assert get_device("H100") is get_device("h100") is DEVICES["h100"]
    assert (H100.sm_count, H100.mem_bw_gbps, H100.fp16_tflops) == (132, 3350.0, 989.0)
    assert get_device("A100").sm_count == 108
    assert get_device("h200").mem_bw_gbps > H100.mem_bw_gbps


def test_an_unknown_device_names_the_known_ones():
    with pytest.raises(UnknownDeviceError) as err:
        get_device("tpu-v5")
    assert all(name in str(err.value) for name in ("a100", "h100", "h200"))
    assert isinstance(err.value, PrismError)


# -- hand computation ------------------------------------------------------------------------------

def test_roofline_of_rmsnorm_matmul_is_the_hand_formula():
    (n, d), (_, cols) = SHAPES["X"], SHAPES["W"]
    nbytes = (n * d + d * cols + n * cols) * 2                  # X, W read; Y written; fp16
    flops = 2 * n * d * cols + 3 * n * d                        # matmul; rms_norm
    expected = max(mem_us(nbytes), flop_us(flops)) + H100.launch_us
    assert mem_us(nbytes) > flop_us(flops)                      # memory-bound: flops don't matter
    assert roofline_us(known_best("rmsnorm_matmul", SHAPES), H100) == pytest.approx(expected)
    assert roofline_us(traced("rmsnorm_matmul"), H100) == pytest.approx(expected)


def test_eager_rmsnorm_matmul_is_one_kernel_per_op():
    (n, d), (_, cols) = SHAPES["X"], SHAPES["W"]
    rms_norm = max(mem_us(2 * n * d * 2), flop_us(3 * n * d)) + H100.launch_us
    matmul = max(mem_us((n * d + d * cols + n * cols) * 2),
                 flop_us(2 * n * d * cols)) + H100.launch_us
    assert eager_us(traced("rmsnorm_matmul"), H100) == pytest.approx(rms_norm + matmul)


def test_the_unfused_program_is_the_launchers_torch_calls():
    """The generated launcher's rms_norm is three launches (the rows' fp32 norms, their scaling,
    the division), six with an epsilon (the scaling is four in-place launches on the norms),
    its matmul one: more than the eager baseline's one kernel per op."""
    (n, d), (_, cols) = SHAPES["X"], SHAPES["W"]
    x, norms = n * d * 2, n * 4
    scale = max(mem_us(2 * norms), flop_us(n)) + H100.launch_us
    rms_norm = (max(mem_us(x + norms), flop_us(2 * n * d)) + H100.launch_us + scale
                + max(mem_us(2 * x + norms), flop_us(n * d)) + H100.launch_us)
    matmul = max(mem_us((n * d + d * cols + n * cols) * 2),
                 flop_us(2 * n * d * cols)) + H100.launch_us
    cost = modeled(traced("rmsnorm_matmul"), H100)
    assert cost.latency_us == pytest.approx(rms_norm + matmul)
    assert [(k.kind, k.step) for k in cost.kernels] == [
        ("rms_norm", "norm"), ("rms_norm", "scale"), ("rms_norm", "divide"), ("matmul", "")]
    assert cost.launches == 4 and "4 launch(es)" in str(cost)
    g = Graph("with_eps")
    X, W = g.input("X", SHAPES["X"]), g.input("W", SHAPES["W"])
    g.output(g.matmul(g.rms_norm(X, eps=1e-6), W))
    with_eps = modeled(g.build(), H100)
    assert [k.step for k in with_eps.kernels] == ["norm", "square", "scale", "add_eps", "sqrt",
                                                  "divide", ""]
    assert with_eps.latency_us == pytest.approx(rms_norm + 3 * scale + matmul)
    assert eager_us(traced("rmsnorm_matmul"), H100) < cost.latency_us
    assert eager_us(traced("swiglu"), H100) == pytest.approx(modeled(traced("swiglu"),
                                                                     H100).latency_us)


def test_full_size_flops_count_every_op_once_at_full_size():
    (n, d), (_, cols) = SHAPES["X"], SHAPES["W"]
    matmul = 2 * n * d * cols
    assert full_size_flops(traced("rmsnorm_matmul")) == matmul + 3 * n * d
    # Fused: the matmul, nored (an add per element), red_ld_rms (square, add) and the div.
    fused = matmul + n * cols + 2 * n * d + n * cols
    for grid, loop in ((None, None), (1, 1), (64, 4)):
        assert full_size_flops(known_best("rmsnorm_matmul", SHAPES, grid=grid, loop=loop)) == fused


def test_a_fused_kernel_is_modeled_by_hand():
    """grid 64 over W's columns, loop 16 over d: W read once, X replicated into every block
    (the excess from L2), Y written once; memory-bound on 64 of 132 SMs."""
    (n, d), (_, cols) = SHAPES["X"], SHAPES["W"]
    (k,) = modeled(known_best("rmsnorm_matmul", SHAPES, grid=64, loop=16), H100).kernels
    x, w, y = n * d * 2, d * cols * 2, n * cols * 2
    assert (k.blocks, k.waves) == (64, 1)
    assert k.hbm_bytes == x + w + y
    assert k.l2_bytes == 64 * x - x
    memory = (mem_us(x + w + y) + (64 * x - x) / (H100.l2_bw_gbps * 1e9) * 1e6) / (64 / 132)
    assert k.memory_us == pytest.approx(memory)
    assert k.latency_us == pytest.approx(max(memory, k.compute_us) + H100.launch_us)
    assert k.bound == "memory"


def split_k(parts: int = 4) -> KernelGraph:
    """`parts` blocks each multiply 1/parts of d, and their [8, 1024] tiles are summed."""
    g = Graph("split_k")
    X, W = g.input("X", SHAPES["X"]), g.input("W", SHAPES["W"])
    tb = Block(grid=(parts,), forloop_range=1)
    x, w = tb.input(X, imap=(1,)), tb.input(W, imap=(0,))
    tb.output(tb.accum(tb.matmul(x, w)), omap=(-1,))
    (out,) = g.customized(tb)
    g.output(out)
    return g.build()


def test_summed_partial_outputs_cost_fp32_partials_and_a_combine_launch():
    """The kernel writes 4 fp32 partial tiles of Y [8, 1024] (to L2: they fit); the combine
    reads them back, adds them and writes Y once to HBM, in ⌈8192 / 256⌉ = 32 blocks."""
    kernel, combine = modeled(split_k(), H100).kernels
    y, partials = 8 * 1024 * 2, 4 * 8 * 1024 * 4
    assert (kernel.kind, combine.kind, combine.name) == ("customized", "combine", kernel.name)
    assert kernel.hbm_bytes == (8 * 1024 + 1024 * 1024) * 2      # X and W once, Y not yet
    assert kernel.l2_bytes == partials
    assert (combine.blocks, combine.hbm_bytes, combine.l2_bytes) == (32, y, partials)
    assert combine.flops == 4 * 8 * 1024
    memory = (mem_us(y) + partials / (H100.l2_bw_gbps * 1e9) * 1e6) / (32 / 132)
    assert combine.memory_us == pytest.approx(memory)
    assert combine.latency_us == pytest.approx(memory + H100.launch_us)
    for parts in (2, 4, 16):
        graph = split_k(parts)
        assert roofline_us(graph, H100) <= lower_bound_us(graph, H100) <= \
            modeled(graph, H100).latency_us


def test_partials_that_do_not_fit_in_l2_go_through_hbm():
    fits = modeled(split_k(), H100).kernels
    spills = modeled(split_k(), dataclasses.replace(H100, l2_bytes=0)).kernels
    partials = 4 * 8 * 1024 * 4
    assert [k.l2_bytes for k in spills] == [0, 0]
    assert [s.hbm_bytes - f.hbm_bytes for s, f in zip(spills, fits, strict=True)] == \
        [partials, partials]


def test_the_model_states_its_cache_regime():
    cost = modeled(split_k(), H100)
    assert cost.cache == CACHE_REGIME and "cold L2" in CACHE_REGIME
    assert "do_bench" in CACHE_REGIME


def test_replicated_reads_that_do_not_fit_in_l2_come_from_hbm():
    graph = known_best("rmsnorm_matmul", SHAPES, grid=64)
    (fits,) = modeled(graph, H100).kernels
    (spills,) = modeled(graph, dataclasses.replace(H100, l2_bytes=0)).kernels
    assert spills.l2_bytes == 0
    assert spills.hbm_bytes == fits.hbm_bytes + fits.l2_bytes
    assert spills.latency_us > fits.latency_us


def test_too_few_blocks_leave_sms_idle():
    """The same program on 1 block and on one block per SM (W's 1056 columns = 132 × 8)."""
    shapes = {"X": (8, 1024), "W": (1024, 8 * H100.sm_count)}
    (one,) = modeled(known_best("rmsnorm_matmul", shapes, grid=1, loop=16), H100).kernels
    (full,) = modeled(known_best("rmsnorm_matmul", shapes, grid=H100.sm_count, loop=16),
                      H100).kernels
    assert one.latency_us > full.latency_us
    assert one.memory_us == pytest.approx(mem_us(one.hbm_bytes) * H100.sm_count)
    assert one.compute_us == pytest.approx(flop_us(one.flops) * H100.sm_count)
    assert full.compute_us == pytest.approx(flop_us(full.flops))
    assert one.waves == full.waves == 1


# -- invariants on every workload ------------------------------------------------------------------

SIZES = [{}, {"grid": 1, "loop": 1}, {"grid": 2, "loop": 4}, {"grid": 8, "loop": 1},
         {"grid": 8, "loop": 4}]


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_roofline_and_lower_bound_never_exceed_the_model(name):
    shapes = get_workload(name).shapes
    for sizes in SIZES:
        graph = known_best(name, shapes, **sizes)
        cost = modeled(graph, H100)
        assert cost.roofline_us == pytest.approx(roofline_us(graph, H100))
        assert cost.roofline_us <= cost.latency_us * (1 + 1e-9), sizes
        assert lower_bound_us(graph, H100) <= cost.latency_us * (1 + 1e-9), sizes


@pytest.mark.parametrize("name", ["rmsnorm_matmul", "swiglu", "gated_mlp"])
def test_the_fused_kernel_beats_eager(name):
    shapes = get_workload(name).shapes
    fused = min(modeled(known_best(name, shapes, grid=grid), H100).latency_us
                for grid in (32, 64, 128, 256))
    eager = eager_us(traced(name), H100)
    assert roofline_us(traced(name), H100) <= fused < eager


# -- symbolic families -----------------------------------------------------------------------------

def test_modeled_needs_a_concrete_program_and_the_bound_does_not():
    concrete = known_best("rmsnorm_matmul", SHAPES)
    (op,) = concrete.custom_ops
    assert op.block is not None
    block = dataclasses.replace(op.block, grid=(var("g0"),))
    family = infer_shapes(dataclasses.replace(concrete, ops=tuple(
        dataclasses.replace(o, block=block) if o is op else o for o in concrete.ops)))
    with pytest.raises(PrismError, match="instantiate grid, loop and maps"):
        modeled(family, H100)
    bound = lower_bound_us(family, H100)
    assert full_size_flops(family) == full_size_flops(concrete)
    for grid in (1, 2, 16, 64, 256):
        member = known_best("rmsnorm_matmul", SHAPES, grid=grid)
        assert bound <= modeled(member, H100).latency_us


def symbolic_rmsnorm_matmul(x_shape, w_shape, w_imap="symbolic", w_fmap="symbolic",
                            grid="g0", loop="F") -> KernelGraph:
    g = Graph("rmsnorm_matmul")
    X, W = g.input("X", x_shape), g.input("W", w_shape)
    tb = Block(grid=(grid,), forloop_range=loop)
    x = tb.input(X, imap=(-1,), fmap=1)
    w = tb.input(W, imap=w_imap, fmap=w_fmap)
    tb.output(tb.div(tb.accum(tb.matmul(x, w), "nored"), tb.accum(x, "red_ld_rms")), omap=(1,))
    (out,) = g.customized(tb)
    g.output(out)
    return g.build()


def test_the_lower_bound_holds_for_every_member_of_a_family_with_symbolic_maps():
    x, w = (8, 256), (256, 512)
    family = symbolic_rmsnorm_matmul(x, w)
    bound = lower_bound_us(family, H100)
    members = 0
    for imap in ((1,), (-1,)):
        for fmap in (0, None):
            for grid in (1, 4, 32):
                for loop in (1, 4, 16):
                    try:
                        member = symbolic_rmsnorm_matmul(x, w, imap, fmap, grid, loop)
                    except (ShapeError, PrismError):
                        continue   # the maps and sizes do not fit together
                    members += 1
                    assert bound <= modeled(member, H100).latency_us
                    assert full_size_flops(member) == full_size_flops(family)
    assert members >= 9


def test_symbolic_kernel_shapes_are_refused():
    g = Graph("symbolic")
    X = g.input("X", ("n", 1024))
    g.output(g.exp(X))
    with pytest.raises(PrismError, match="instantiate the shapes"):
        roofline_us(g.build(), H100)


@pytest.mark.parametrize("device", list(DEVICES))
def test_every_device_models_every_workload(device):
    spec = get_device(device)
    for name, w in WORKLOADS.items():
        cost = modeled(known_best(name, w.shapes), spec)
        assert math.isfinite(cost.latency_us) and cost.latency_us > spec.launch_us


def test_a_program_whose_tiles_fit_only_at_its_own_sizes_counts_its_own_flops():
    """Each of 16 blocks adds B[8, 64] to its own 64 columns of X: at one block the tiles
    ([8, 1024] and [8, 64]) no longer fit, so the program's own arithmetic is counted."""
    g = Graph("tile_add")
    X, B = g.input("X", (8, 1024)), g.input("B", (8, 64))
    tb = Block(grid=(16,), forloop_range=1)
    tb.output(tb.accum(tb.add(tb.input(X, imap=(1,)), tb.input(B, imap=(-1,)))), omap=(1,))
    (out,) = g.customized(tb)
    g.output(out)
    graph = g.build()
    assert full_size_flops(graph) == 16 * (8 * 64 + 8 * 64)   # add, then nored
    assert roofline_us(graph, H100) <= modeled(graph, H100).latency_us
