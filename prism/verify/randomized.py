"""Random testing: the independent cross-check of the equivalence verifier (DESIGN.md §1).

    random_test(target, candidate)     # float64 on inputs from each op's domain, up to rtol
    modular_test(target, candidate)    # Mirage's Z_167 × Z_83 fingerprints, exactly

Both run the two graphs with `prism.ir.interpret` on the same random inputs, `trials` times, and
compare every output. A candidate with free variables (grid sizes, loop ranges, map bits) runs
under each of a few concrete assignments — given, or found by `valid_assignments` — so one call
checks several members of its family. The answer is a `RandomTestResult` value; on a difference
it carries a `Counterexample` that reproduces it (the inputs are `float_inputs(shapes, seed,
positive)` or `modular.random_inputs(shapes, seed)`).

Float64 inputs come from each op's domain (`prism.expr.evidence.OPERAND_DOMAINS`): an input whose
values reach √'s operand, a power's base or (through a relu) a divisor, in either graph, is drawn
in [0.5, 2]; the others are standard normal. nan on both sides is never agreement: it is not a
difference either (`RandomTestResult.found_difference` is False), so `equal` is False with the
reason, and the verifier claims neither way on it. When some input is drawn > 0, one more trial
(seed `seed + trials`) draws every input standard normal and looks for a difference only: a
value one graph defines and the other does not ((a·b)^c against a^c·b^c), or defined values
that differ.

Graphs that cannot be compared (different numbers of inputs or outputs, different input shapes, a
target with free variables) raise `VerifyError`; an output of a different shape is a difference.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from prism.errors import DimExprError, VerifyError
from prism.expr.evidence import ANY, POSITIVE, POSITIVE_DRAW, operand_need
from prism.ir.dims import Dim, evaluate
from prism.ir.graph import KernelGraph, Map, Op, Shape
from prism.ir.interpret import Values, interpret
from prism.ir.semantics import FLOAT64, Semantics
from prism.ir.spec import problems
from prism.verify import modular

Assignment = tuple[tuple[str, int], ...]   # sorted (variable, value) pairs: hashable
Shapes = list[tuple[int, ...]]

ENUMERATION_BUDGET = 2048   # assignments tried exhaustively; beyond this, a seeded sample


# -- results ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Counterexample:
    """Where two graphs differ: under `assignment`, on the inputs drawn with `seed` (inputs
    `positive` drawn > 0), output `output` differs first at `index` (`target` vs `candidate`
    there), in `mismatches` elements. Float64 tests also give the largest absolute difference and
    that over max |target|. Both values nan: no difference was found, and none can be claimed,
    but the two did not agree there either (`both_nan`)."""

    assignment: Assignment
    seed: int
    output: int
    index: tuple[int, ...]
    target: float | int
    candidate: float | int
    mismatches: int
    max_abs_diff: float | None = None
    max_rel_err: float | None = None
    positive: tuple[int, ...] = ()

    @property
    def both_nan(self) -> bool:
        return all(isinstance(v, float) and math.isnan(v) for v in (self.target, self.candidate))

    def to_json(self) -> dict[str, Any]:
        return {"assignment": dict(self.assignment), "seed": self.seed, "output": self.output,
                "index": list(self.index), "target": _json_number(self.target),
                "candidate": _json_number(self.candidate), "mismatches": self.mismatches,
                "max_abs_diff": _json_number(self.max_abs_diff),
                "max_rel_err": _json_number(self.max_rel_err), "positive": list(self.positive)}


@dataclass(frozen=True)
class RandomTestResult:
    """The verdict of a random test: `equal` on every trial and assignment tested, or not, with
    a `counterexample` (or, for outputs of different shapes, only a `reason`)."""

    equal: bool
    method: str                          # "random-float64" | "random-modular"
    trials: int
    assignments: tuple[Assignment, ...]  # the assignments run, in order
    counterexample: Counterexample | None = None
    reason: str = ""

    @property
    def found_difference(self) -> bool:
        """Not equal, and shown so: values that differ, or outputs of different shapes (not
        only nan on both sides)."""
        return not self.equal and not (self.counterexample is not None and
                                       self.counterexample.both_nan)

    def to_json(self) -> dict[str, Any]:
        return {"equal": self.equal, "method": self.method, "trials": self.trials,
                "assignments": [dict(a) for a in self.assignments],
                "counterexample": self.counterexample.to_json() if self.counterexample else None,
                "reason": self.reason}


def _json_number(x: float | int | None) -> float | int | str | None:
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)   # "nan", "inf", "-inf": JSON has no such numbers
    return x


# -- the two methods -------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Diff:
    index: tuple[int, ...]
    mismatches: int
    max_abs_diff: float | None = None
    max_rel_err: float | None = None


@dataclass(frozen=True)
class _Method:
    name: str
    semantics: Semantics
    draw: Callable[[Shapes, int, Sequence[int]], list[np.ndarray]]
    compare: Callable[[np.ndarray, np.ndarray], _Diff | None]
    domains: bool = True      # draws inputs from the ops' domains (`positive_inputs`)


def float_inputs(shapes: Shapes, seed: int = 0, positive: Sequence[int] = ()
                 ) -> list[np.ndarray]:
    """Float64 arrays reproducible from `seed`: the inputs in `positive` (by position) uniform
    in [0.5, 2], the others standard normal with an exact 0 made 1."""
    rng = np.random.default_rng(seed)
    out = []
    for i, shape in enumerate(shapes):
        if i in positive:
            out.append(rng.uniform(*POSITIVE_DRAW, shape))
        else:
            a = rng.standard_normal(shape)
            out.append(np.where(a == 0.0, 1.0, a))
    return out


def _float_diff(rtol: float) -> Callable[[np.ndarray, np.ndarray], _Diff | None]:
    """Close where |candidate − target| ≤ rtol · max |target|, or both are the same inf; nan
    agrees with nothing. The first index reported is a real difference where there is one,
    else a nan on both sides."""
    def compare(want: np.ndarray, got: np.ndarray) -> _Diff | None:
        finite = np.isfinite(want) & np.isfinite(got)
        scale = float(np.abs(want[finite]).max()) if finite.any() else 0.0
        scale = max(scale, float(np.finfo(np.float64).tiny))
        abs_diff = np.where(finite, np.abs(got - want), np.inf)
        same_inf = np.isinf(want) & (want == got)
        bad = (abs_diff > rtol * scale) & ~same_inf
        if not bad.any():
            return None
        differ = bad & ~(np.isnan(want) & np.isnan(got))
        shown = differ if differ.any() else bad
        worst = float(abs_diff[shown].max())
        return _Diff(_first(shown), int(bad.sum()), worst, worst / scale)
    return compare


def _exact_diff(want: np.ndarray, got: np.ndarray) -> _Diff | None:
    bad = want != got
    return _Diff(_first(bad), int(bad.sum())) if bad.any() else None


def _first(bad: np.ndarray) -> tuple[int, ...]:
    return tuple(int(i) for i in np.unravel_index(int(np.argmax(bad)), bad.shape))


# -- the tests -------------------------------------------------------------------------------------

def random_test(target: KernelGraph, candidate: KernelGraph, *,
                assignments: Sequence[Mapping[str, int]] | None = None, trials: int = 3,
                seed: int = 0, rtol: float = 1e-9) -> RandomTestResult:
    """Do `target` and `candidate` agree in float64 on `trials` random inputs (up to `rtol` of
    each output's largest magnitude), under each assignment of the candidate's free variables?"""
    method = _Method("random-float64", FLOAT64, float_inputs, _float_diff(rtol))
    return _run(method, target, candidate, assignments, trials, seed)


def modular_test(target: KernelGraph, candidate: KernelGraph, *,
                 assignments: Sequence[Mapping[str, int]] | None = None, trials: int = 2,
                 seed: int = 0) -> RandomTestResult:
    """The same with Mirage's fingerprint arithmetic (`prism.verify.modular`), compared exactly.
    Sound and nearly complete for LAX programs; a heuristic beyond them (see that module)."""
    method = _Method("random-modular", modular.MODULAR,
                     lambda shapes, seed, positive: modular.random_inputs(shapes, seed),
                     _exact_diff, domains=False)
    return _run(method, target, candidate, assignments, trials, seed)


def _run(method: _Method, target: KernelGraph, candidate: KernelGraph,
         assignments: Sequence[Mapping[str, int]] | None, trials: int,
         seed: int) -> RandomTestResult:
    if trials < 1:
        raise VerifyError(f"trials is {trials}; run at least one trial")
    shapes = _comparable(target, candidate)
    envs = [dict(a) for a in assignments] if assignments is not None else \
        valid_assignments(candidate, seed=seed)
    if not envs:
        raise VerifyError(f"no assignment of {_names(candidate)} makes "
                          f"{_label(candidate, 'candidate')} well-formed; pass assignments=")
    for env in envs:
        _same_input_shapes(candidate, env, shapes)
    positive = tuple(sorted(positive_inputs(target) | positive_inputs(candidate))) \
        if method.domains else ()
    # Each trial draws from the domains; where some input is drawn > 0, one more trial draws
    # every input standard normal, where only a difference counts: a value that one graph
    # defines and the other does not, or two defined values that differ (nan on both sides
    # compares nothing there).
    draws = [(seed + t, positive) for t in range(trials)]
    draws += [(seed + trials, ())] if positive else []
    tested: list[Assignment] = []
    undecided: RandomTestResult | None = None   # the first nan on both sides, if no difference
    for trial_seed, drawn_positive in draws:
        arrays, want = _target_run(method, target, shapes, trial_seed, drawn_positive)
        for env in envs:
            key = _key(env)
            if key not in tested:
                tested.append(key)
            got = _quietly(candidate, arrays, env, method.semantics, _VALUES)
            failed = _compare_outputs(method, want, got, key, trial_seed, trials, tested,
                                      drawn_positive)
            if failed is not None and failed.found_difference:
                return failed
            if drawn_positive == positive:
                undecided = undecided or failed
    if undecided is not None:
        return replace(undecided, assignments=tuple(tested))
    return RandomTestResult(True, method.name, trials, tuple(tested))


_TARGET_RUNS: dict[tuple[object, ...], tuple[KernelGraph, list[np.ndarray], list[np.ndarray]]] = {}
# what the candidates' runs on those draws computed: a search's candidates share most of their
# ops (gqa's: the [256 x 4096] score tiles and their exp), and each is tested on the same draw
_VALUES = Values()


def _target_run(method: _Method, target: KernelGraph, shapes: Shapes, seed: int,
                positive: tuple[int, ...]) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """One draw and the target's outputs on it, remembered for the target: a search tests
    many candidates against one target on the same draws. The arrays are read-only, so no
    interpretation can change what the next candidate is tested on."""
    key = (id(target), method.name, tuple(map(tuple, shapes)), seed, positive)
    hit = _TARGET_RUNS.get(key)
    if hit is not None and hit[0] is target:
        return hit[1], hit[2]
    arrays = method.draw(shapes, seed, positive)
    want = _quietly(target, arrays, {}, method.semantics)
    for a in (*arrays, *want):
        a.setflags(write=False)
    if len(_TARGET_RUNS) >= 32:
        _TARGET_RUNS.clear()
        _VALUES.clear()
    _TARGET_RUNS[key] = (target, arrays, want)
    return arrays, want


def _quietly(graph: KernelGraph, arrays: list[np.ndarray], env: Mapping[str, int],
             semantics: Semantics, values: Values | None = None) -> list[np.ndarray]:
    """`interpret` without NumPy's warnings: a draw may still leave an op's domain (a negative
    scalar before a √, a near-zero divisor), and the comparison reports the nan or inf."""
    with np.errstate(all="ignore"):
        return interpret(graph, *arrays, assignment=env, semantics=semantics, values=values)


def _compare_outputs(method: _Method, want: list[np.ndarray], got: list[np.ndarray],
                     env: Assignment, seed: int, trials: int, tested: list[Assignment],
                     positive: tuple[int, ...]) -> RandomTestResult | None:
    """The first output that differs, else the first with nan on both sides, else None."""
    undecided = None
    for i, (w, g) in enumerate(zip(want, got, strict=True)):
        if w.shape != g.shape:
            reason = (f"output {i} has shape {g.shape} in the candidate, {w.shape} in the target"
                      f"{_under(env)}")
            return RandomTestResult(False, method.name, trials, tuple(tested), reason=reason)
        diff = method.compare(w, g)
        if diff is None:
            continue
        cex = Counterexample(env, seed, i, diff.index, w[diff.index].item(),
                             g[diff.index].item(), diff.mismatches, diff.max_abs_diff,
                             diff.max_rel_err, positive)
        if cex.both_nan:
            reason = (f"output {i} is nan in both graphs at index {list(diff.index)}{_under(env)}"
                      f" (inputs seed {seed}): the draw left an op's domain, and nan is no "
                      "agreement (nor a difference)")
            undecided = undecided or RandomTestResult(False, method.name, trials, tuple(tested),
                                                      cex, reason)
            continue
        reason = (f"output {i} differs at index {list(diff.index)} in {diff.mismatches} "
                  f"element(s){_under(env)} (inputs seed {seed})")
        return RandomTestResult(False, method.name, trials, tuple(tested), cex, reason)
    return undecided


# -- each op's domain ------------------------------------------------------------------------------

def positive_inputs(graph: KernelGraph) -> set[int]:
    """The inputs of `graph` (by position) to draw > 0, so that every op is defined at its
    operands: walked back from each operand's domain (`prism.expr.evidence.operand_need`)
    through the ops between, block graphs included (block input i reads custom-op input i,
    block output i writes custom-op output i)."""
    need: dict[str, int] = {}
    for op in reversed(graph.ops):
        if op.kind == "customized" and op.block is not None:
            bg = op.block
            tiles: dict[str, int] = {}
            for out, bop in zip(op.outputs, bg.output_ops, strict=False):
                tiles[bop.inputs[0]] = max(tiles.get(bop.inputs[0], ANY), need.get(out, ANY))
            _walk_back(bg.ops, tiles)
            for src, bop in zip(op.inputs, bg.input_ops, strict=False):
                need[src] = max(need.get(src, ANY), tiles.get(bop.outputs[0], ANY))
        elif op.kind not in ("input", "output"):
            _walk_back((op,), need)
    return {i for i, t in enumerate(graph.inputs) if need.get(t, ANY) == POSITIVE}


def _walk_back(ops: Sequence[Op], need: dict[str, int]) -> None:
    """Each compute op's operands' needs, from its value's need, last op first."""
    for op in reversed(ops):
        if op.kind in ("input", "output") or not op.outputs:
            continue
        value = need.get(op.outputs[0], ANY)
        for i, t in enumerate(op.inputs):
            need[t] = max(need.get(t, ANY), operand_need(op.kind, i, value))


def _under(env: Assignment) -> str:
    return f" under {', '.join(f'{k}={v}' for k, v in env)}" if env else ""


def _key(env: Mapping[str, int]) -> Assignment:
    return tuple(sorted((k, int(v)) for k, v in env.items()))


# -- can the two graphs be compared? ---------------------------------------------------------------

def _comparable(target: KernelGraph, candidate: KernelGraph) -> Shapes:
    """The target's input shapes, once the pair is known to be comparable."""
    t, c = _label(target, "target"), _label(candidate, "candidate")
    if target.free_vars():
        raise VerifyError(f"{t} has free variables ({_names(target)}); the target must be "
                          "concrete: substitute values with prism.ir.substitute_graph first")
    for what, n, m in (("inputs", len(target.inputs), len(candidate.inputs)),
                       ("outputs", len(target.outputs), len(candidate.outputs))):
        if n != m:
            raise VerifyError(f"{t} has {n} {what} and {c} has {m}; random testing compares "
                              "graphs with the same inputs and outputs, in the same order")
    return [tuple(evaluate(d) for d in target.shape(x)) for x in target.inputs]


def _same_input_shapes(candidate: KernelGraph, env: Mapping[str, int], shapes: Shapes) -> None:
    for i, (name, want) in enumerate(zip(candidate.inputs, shapes, strict=True)):
        got = tuple(evaluate(d, env) for d in candidate.shape(name))
        if got != want:
            raise VerifyError(f"input {i} ({name}) of {_label(candidate, 'candidate')} has shape "
                              f"{list(got)}{_under(_key(env))}, the target's has {list(want)}; "
                              "pass graphs whose inputs match in order and shape")


def _label(graph: KernelGraph, role: str) -> str:
    return f"{role} {graph.name}" if graph.name else f"the {role}"


def _names(graph: KernelGraph) -> str:
    return ", ".join(sorted(graph.free_vars()))


# -- assignments of a symbolic graph ---------------------------------------------------------------

def valid_assignments(graph: KernelGraph, limit: int = 4, seed: int = 0) -> list[dict[str, int]]:
    """Up to `limit` assignments of `graph`'s free variables under which it passes `spec`.

    Grid sizes and loop ranges range over the powers of two dividing the graph's concrete dims,
    and those dims themselves; map bits over 0 and 1. Every combination is tried when there are
    at most `ENUMERATION_BUDGET`, else a sample drawn with `seed` (plus the all-smallest and
    all-largest). Kept are those that pass `spec` and stay affordable to interpret (at most
    `MAX_BLOCKS` blocks per kernel, DESIGN.md §1's device bound, and `MAX_ELEMENTS` tile elements
    over all blocks). They are ordered by total parallelism (product of the sizes) and picked
    spread out: the smallest, the largest, then midpoints. Deterministic for a seed.
    """
    names = sorted(graph.free_vars())
    if not names:
        return [{}]
    family = _Family.of(graph)
    domains: list[Sequence[int]] = [(0, 1) if n in family.bits else family.sizes for n in names]
    pool = [dict(zip(names, values, strict=True)) for values in _combinations(domains, seed)]
    pool = [env for env in pool if family.plausible(env)]
    pool.sort(key=lambda env: (math.prod(v for n, v in env.items() if n not in family.bits),
                               tuple(env.values())))
    chosen: list[dict[str, int]] = []
    for i in _spread(len(pool)):
        if not problems(graph, pool[i]):
            chosen.append(pool[i])
            if len(chosen) == limit:
                break
    return chosen


def _combinations(domains: list[Sequence[int]], seed: int) -> list[tuple[int, ...]]:
    if math.prod(len(d) for d in domains) <= ENUMERATION_BUDGET:
        return list(itertools.product(*domains))
    rng = np.random.default_rng(seed)
    corners = [tuple(d[0] for d in domains), tuple(d[-1] for d in domains)]
    sample = [tuple(d[int(rng.integers(len(d)))] for d in domains)
              for _ in range(ENUMERATION_BUDGET)]
    return list(dict.fromkeys(corners + sample))


def _spread(n: int) -> Iterator[int]:
    """0, n−1, then the midpoints of the gaps, breadth first: every index once."""
    if n == 0:
        return
    yield 0
    if n == 1:
        return
    yield n - 1
    gaps = [(0, n - 1)]
    while gaps:
        lo, hi = gaps.pop(0)
        if hi - lo < 2:
            continue
        mid = (lo + hi) // 2
        yield mid
        gaps += [(lo, mid), (mid, hi)]


@dataclass(frozen=True)
class _Family:
    """What `valid_assignments` needs of a symbolic graph, gathered once."""

    dims: tuple[Dim, ...]                        # every dim: tensors, grids, loops, tiles
    maps: tuple[Map, ...]                        # every imap, fmap and omap
    blocks: tuple[tuple[Shape, tuple[Shape, ...]], ...]   # per custom kernel: (grid, tiles)
    bits: frozenset[str]                         # the 0/1 map variables
    sizes: tuple[int, ...]                       # the values grid sizes and loop ranges take

    @staticmethod
    def of(graph: KernelGraph) -> _Family:
        dims = [d for _, shape in graph.tensors for d in shape]
        maps: list[Map] = []
        blocks = []
        for _, bg in graph.iter_blocks():
            tiles = tuple(shape for _, shape in bg.tensors)
            dims += [*bg.grid, bg.forloop_range, *(d for shape in tiles for d in shape)]
            maps += [v for op in bg.ops for _, v in op.attrs if isinstance(v, Map)]
            blocks.append((bg.grid, tiles))
        entries = [e for m in maps for row in m.rows for e in row]
        bits = frozenset(b for d in [*dims, *entries] for b in _bits_of(d))
        return _Family(tuple(dict.fromkeys(dims)), tuple(maps), tuple(blocks), bits,
                       _size_candidates(graph))

    def plausible(self, env: Mapping[str, int]) -> bool:
        """The cheap part of `spec` (every dim an integer ≥ 1, every map row 0/1 with one 1 at
        most), and affordable to interpret."""
        try:
            if any(evaluate(d, env) < 1 for d in self.dims):
                return False
            if any(sum(evaluate(e, env) for e in row) > 1 for m in self.maps for row in m.rows):
                return False
            return all(_affordable(grid, tiles, env) for grid, tiles in self.blocks)
        except DimExprError:
            return False


MAX_BLOCKS = 4096          # blocks per kernel (DESIGN.md §1, hardware feasibility)
MAX_ELEMENTS = 1 << 24     # tile elements over all blocks the interpreter holds at once


def _affordable(grid: Shape, tiles: Sequence[Shape], env: Mapping[str, int]) -> bool:
    blocks = math.prod(evaluate(g, env) for g in grid)
    largest = max((math.prod(evaluate(d, env) for d in t) for t in tiles), default=1)
    return blocks <= MAX_BLOCKS and blocks * largest <= MAX_ELEMENTS


def _size_candidates(graph: KernelGraph) -> tuple[int, ...]:
    """1, the powers of two dividing some concrete dim of the graph's tensors, and those dims."""
    concrete = {d.value for _, shape in graph.tensors for d in shape if d.is_const}
    values = {1} | concrete
    for n in concrete:
        values |= {1 << k for k in range(n.bit_length()) if n % (1 << k) == 0}
    return tuple(sorted(values))


def _bits_of(d: Dim) -> set[str]:
    found: set[str] = set()
    for mono, _ in d.terms:
        for atom, _ in mono:
            if atom.num is not None and atom.den is not None:
                found |= _bits_of(atom.num) | _bits_of(atom.den)
            elif atom.is_bit:
                found.add(atom.name)
    return found
