"""The hardware pruning rule against its oracle: brute-force enumeration of every assignment
(grid sizes and loop range over powers of two, bits over 0/1), checked by `spec` and limits
evaluated on the concrete tile shapes by `prism.search.audit.within_limits` (no z3)."""

import functools
import itertools
from dataclasses import replace

import pytest

from prism.cost import DeviceSpec, get_device
from prism.frontend.builder import Block, Graph
from prism.ir.dims import var
from prism.ir.graph import KernelGraph
from prism.ir.spec import check, problems
from prism.search import check_hardware, hardware_constraints
from prism.search.audit import within_limits
from prism.search.hardware import variable_bounds
from prism.smt import NamedConstraint, hardware_feasibility

H100 = get_device("h100")


def rmsnorm_matmul(symbolic_maps: bool) -> KernelGraph:
    """The fused RMSNorm+MatMul with symbolic grid and loop; W's maps symbolic if asked."""
    g = Graph("rmsnorm_matmul")
    X = g.input("X", (8, 256))
    W = g.input("W", (256, 512))
    tb = Block(grid=("g0",), forloop_range="F")
    x = tb.input(X, imap=(-1,), fmap=1)
    w = (tb.input(W, imap="symbolic", fmap="symbolic") if symbolic_maps
         else tb.input(W, imap=(1,), fmap=0))
    y = tb.div(tb.accum(tb.matmul(x, w), "nored"), tb.accum(x, "red_ld_rms"))
    tb.output(y, omap=(1,))
    (out,) = g.customized(tb)
    g.output(out)
    return g.build()


@functools.cache
def well_formed_assignments(symbolic_maps: bool) -> list[dict[str, int]]:
    """Every assignment `spec` accepts: bits over 0/1, sizes over powers of two up to 512."""
    graph = rmsnorm_matmul(symbolic_maps)
    names = sorted(graph.free_vars())
    bits = [n for n in names if "_p" in n]   # the builder's map bits: {tile}_{im,fm}_d{d}_p{p}
    sizes = [n for n in names if n not in bits]
    powers = [2**k for k in range(10)]
    envs = (dict(zip(bits + sizes, values, strict=True))
            for values in itertools.product(*[(0, 1)] * len(bits), *[powers] * len(sizes)))
    return [env for env in envs if not problems(graph, env)]


def brute_force(symbolic_maps: bool, dev: DeviceSpec) -> bool:
    graph = rmsnorm_matmul(symbolic_maps)
    return any(within_limits(graph, env, dev) for env in well_formed_assignments(symbolic_maps))


DEVICES = {
    "default (8-row X below the 16 tile)": H100,
    "8 tiles": replace(H100, min_matmul_tile=8),
    "tiny smem": replace(H100, smem_bytes=512, min_matmul_tile=8),
    "just enough smem": replace(H100, smem_bytes=528, min_matmul_tile=8),
    "one block": replace(H100, max_blocks=1, min_matmul_tile=8),
    "one block, 16 KB": replace(H100, max_blocks=1, smem_bytes=16 * 1024, min_matmul_tile=8),
}


@pytest.mark.parametrize("symbolic_maps", [False, True], ids=["fixed maps", "symbolic maps"])
@pytest.mark.parametrize("device", list(DEVICES.values()), ids=list(DEVICES))
def test_check_hardware_agrees_with_brute_force(symbolic_maps: bool, device: DeviceSpec):
    graph = rmsnorm_matmul(symbolic_maps)
    verdict = check_hardware(graph, device)
    assert verdict.feasible is brute_force(symbolic_maps, device), verdict.reason
    if verdict.feasible:
        assert verdict.assignment is not None
        check(graph, verdict.assignment)   # raises if ill-formed
        assert within_limits(graph, dict(verdict.assignment), device)
    else:
        assert verdict.core and verdict.reason.startswith("no assignment fits: ")
        constraints = hardware_constraints(graph, device)
        core = [c for c in constraints if c.name in verdict.core]
        assert len(core) == len(verdict.core)
        alone = hardware_feasibility(core, variable_bounds(graph))
        assert alone.status == "unsat"


def test_expected_verdicts_and_cores():
    # Not only agreement: the limits above do split the families both ways.
    graph = rmsnorm_matmul(False)
    assert check_hardware(graph, DEVICES["8 tiles"]).feasible is True
    tiny = check_hardware(graph, DEVICES["tiny smem"])
    assert tiny.feasible is False and "smem ≤ 512 B" in tiny.core
    one = check_hardware(graph, DEVICES["one block, 16 KB"])
    assert one.feasible is False and {"blocks g0 ≤ 1", "smem ≤ 16384 B"} <= set(one.core)
    # X's 8 rows are a whole data dim: padded to a 16-row tile, never a reason to prune.
    assert check_hardware(graph, H100).feasible is True
    wide = check_hardware(graph, replace(H100, min_matmul_tile=1024))
    assert wide.feasible is False
    assert any("(matmul tile)" in c and "W_tile" in c for c in wide.core), wide.core


def test_unsat_core_names_the_clash():
    g = var("g")
    cs = [NamedConstraint.of("g ≥ 10", 10, "<=", g), NamedConstraint.of("g ≤ 4", g, "<=", 4),
          NamedConstraint.of("64/g divides", 64, "exact", g)]
    answer = hardware_feasibility(cs, {"g": (1, 64)})
    assert answer.status == "unsat" and set(answer.core) == {"g ≥ 10", "g ≤ 4"}
    ok = hardware_feasibility(cs[1:], {"g": (1, 64)})
    assert ok.status == "sat" and ok.model is not None and 64 % ok.model["g"] == 0
    assert ok.model["g"] <= 4


@pytest.mark.parametrize("device", list(DEVICES.values()), ids=list(DEVICES))
def test_a_witness_shows_feasible_only_when_it_fits(device: DeviceSpec):
    """The search's witnesses (assignments that fitted earlier families): one that satisfies
    every constraint decides the family feasible without z3, and it does fit (the oracle:
    `spec` and the limits on the concrete tiles); one that does not is passed over, so an
    infeasible family is still proven so by z3."""
    graph = rmsnorm_matmul(True)
    envs = well_formed_assignments(True)
    fitting = [e for e in envs if within_limits(graph, e, device)]
    unfit = [e for e in envs if not within_limits(graph, e, device)]
    for env in fitting[:8] + fitting[-8:]:
        witnesses = [dict(env)]
        verdict = check_hardware(graph, device, witnesses=witnesses)
        assert verdict.feasible is True and witnesses == [env]    # z3 was not asked
        check(graph, verdict.assignment)
        assert within_limits(graph, dict(verdict.assignment), device)
    for env in unfit[:8] + unfit[-8:]:
        witnesses = [dict(env)]
        verdict = check_hardware(graph, device, witnesses=witnesses)
        assert verdict.feasible is bool(fitting), verdict.reason
        if verdict.feasible:            # z3 found another, and it joins the witnesses
            assert len(witnesses) == 2 and witnesses[-1] == dict(verdict.assignment)


def test_a_witness_with_a_grid_dim_less_fits_with_that_dim_unsplit():
    """A witness without a variable (the family has a grid dim more): sizes 1, bits 0."""
    graph = rmsnorm_matmul(False)
    verdict = check_hardware(graph, DEVICES["8 tiles"])
    assert verdict.feasible and verdict.assignment is not None
    env = {k: v for k, v in verdict.assignment.items() if k != "g0"}
    again = check_hardware(graph, DEVICES["8 tiles"], witnesses=[env])
    assert again.feasible is True
    assert again.assignment is not None and again.assignment["g0"] in (1, verdict.assignment["g0"])


def test_a_family_whose_tiles_must_match_across_three_inputs_fits():
    """Attention over gqa's shapes with every map symbolic: the scores' tile must match V's,
    and all of them fit in shared memory. z3 finds a fitting assignment (gqa's first closed
    family, of this kind, took 15 s with each constraint behind its assumption, as the
    query first ran; 0.6 s untracked); the oracle is the assignment itself, well-formed
    (`spec.check`) and within the device's limits on its concrete tiles."""
    g = Graph("gqa_family")
    Q = g.input("Q", (2, 256, 64))
    K = g.input("K", (2, 64, 4096))
    V = g.input("V", (2, 4096, 64))
    tb = Block(grid=("gx",), forloop_range="F")
    q, k, v = (tb.input(t, imap="symbolic", fmap="symbolic") for t in (Q, K, V))
    e = tb.exp(tb.matmul(q, k))
    tb.output(tb.div(tb.accum(tb.matmul(e, v), "nored"), tb.accum(e, "red_ld_sum")),
              omap="symbolic")
    (out,) = g.customized(tb)
    g.output(out)
    graph = g.build()
    verdict = check_hardware(graph, H100)
    assert verdict.feasible is True and verdict.assignment is not None, verdict.reason
    check(graph, verdict.assignment)
    assert within_limits(graph, dict(verdict.assignment), H100)
