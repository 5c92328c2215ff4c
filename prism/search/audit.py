"""Auditing a pruning rule: re-explore what it pruned, complete it, verify it.

`audit(target, rule)` runs the search with the rule *observed*: it is evaluated at every family
as usual, but a family it would prune is explored anyway (the other rules still apply), and
every program completed under it is handed to map instantiation and the verifier. Each prune
states a claim (`evidence["claim"]`), and the audit checks it on those programs:

    no_equivalent   no program of the family is equivalent to the target (within the caps)
    no_feasible     no equivalent program of the family fits the device — checked by
                    enumerating assignments (sizes over powers of two) and evaluating the
                    limits on the concrete tiles, independently of the z3 encoding
    not_better      no equivalent program of the family is faster (modeled) than the reference:
                    the incumbent the rule compared with (cost_bound), or the best program the
                    search found outside every pruned family (structural redundancy)

A program that breaks its family's claim is a *wrongly pruned* finding, reported with the prune
(rule, reason, evidence) and the program.
"""

from __future__ import annotations

import functools
import itertools
import json
import math
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any

from prism.cost.devices import DeviceSpec
from prism.errors import PrismError
from prism.ir.dims import DimExprError, evaluate
from prism.ir.graph import KernelGraph
from prism.ir.ops import OPS
from prism.ir.serialize import graph_to_json
from prism.ir.spec import problems, substitute_graph
from prism.search.config import SearchConfig, SearchConfigError
from prism.search.driver import (
    SEED_ID,
    Candidate,
    UnsupportedTargetError,
    _Run,
    _seed,
    expressible,
)
from prism.search.maps import kernel_program
from prism.trace import Tracer

_MAX_ASSIGNMENTS = 400


@dataclass
class AuditReport:
    rule: str
    target: str
    seconds: float = 0.0
    complete: bool = True
    pruned: int = 0                 # families the rule would have pruned
    explored: int = 0               # families generated under them
    checked: int = 0                # programs completed under them and verified
    equivalent: int = 0             # of those, proved equivalent
    wrong: list[dict[str, Any]] = field(default_factory=list)

    @property
    def sound(self) -> bool:
        return not self.wrong

    def to_json(self) -> dict[str, Any]:
        return {"rule": self.rule, "target": self.target, "seconds": round(self.seconds, 3),
                "complete": self.complete, "pruned": self.pruned, "explored": self.explored,
                "checked": self.checked, "equivalent": self.equivalent,
                "wrongly_pruned": self.wrong, "sound": self.sound}


def audit(target: KernelGraph, rule: str, config: SearchConfig | None = None, *,
          tracer: Tracer | None = None, cancel: threading.Event | None = None,
          label: str | None = None) -> AuditReport:
    config = config or SearchConfig()
    if rule not in config.rule_names:
        raise SearchConfigError(f"unknown pruning rule {rule!r}; the rules are "
                                f"{', '.join(config.rule_names)} (a rule of your own goes in "
                                "SearchConfig(rules=...))")
    issues = expressible(target, config)
    if issues:
        raise UnsupportedTargetError(f"{label or target.name}: {'; '.join(issues)}")
    run = _Run(target, label or target.name or "target", config, tracer or Tracer(keep=False),
               cancel, observe=rule)
    start = time.perf_counter()
    seed = _seed(target, run.result.target, config, cancel, run)   # as `search` starts
    if seed is not None:
        run.ctx.incumbent_us, run.ctx.incumbent_id = seed.modeled_us, SEED_ID
        run.result.seed = seed
    result = run.run()
    report = AuditReport(rule, result.target, complete=result.complete)
    prunes = {fam.id: why for fam, why in run.observed}
    report.pruned = len(prunes)
    report.explored = sum(1 for f, o in run.generator.marked.items() if f != o)
    report.checked = len(run.under)
    under_ids = {c.id for _, c in run.under}
    outside = [c for c in result.equivalent if c.id not in under_ids]
    best_outside = min((_best_latency(c.graph, config) or math.inf for c in outside),
                       default=math.inf)
    for origin, cand in run.under:
        if cand.verdict.verdict != "equivalent":
            continue
        report.equivalent += 1
        why = prunes[origin]
        finding = _broken(why.evidence.get("claim", "no_equivalent"), why.evidence, cand,
                          config, best_outside)
        if finding:
            report.wrong.append({"family": origin, "rule": why.rule, "reason": why.reason,
                                 "evidence": why.evidence, "candidate": cand.id,
                                 "finding": finding, "graph": graph_to_json(cand.graph)})
    report.seconds = time.perf_counter() - start
    return report


def _broken(claim: str, evidence: dict[str, Any], cand: Candidate, config: SearchConfig,
            best_outside: float) -> str | None:
    """Why this equivalent program breaks the prune's claim, or None when it does not. An
    `unproven` prune claims nothing, so nothing under it can break a claim (the search that
    made it says it was not exhaustive)."""
    if claim == "unproven":
        return None
    if claim == "no_equivalent":
        return "an equivalent program was pruned"
    if claim == "no_feasible":
        fits = next(iter(feasible_assignments(cand.graph, config.device)), None)
        return None if fits is None else f"an equivalent program fits the device at {fits}"
    latency = _best_latency(cand.graph, config)
    if latency is None:
        return None            # it fits nowhere: not better than anything
    reference = float(evidence.get("incumbent_us", best_outside))
    if latency < reference * (1 - 1e-9):
        return (f"an equivalent program models at {latency:.3f} µs, better than "
                f"{reference:.3f} µs")
    return None


def _best_latency(graph: KernelGraph, config: SearchConfig) -> float | None:
    found = best_assignment(graph, config.device)
    return None if found is None else found[0]


# `best_assignment`'s answers in this process, by the graph (its name left out) and device: a
# search asks for the same member's several times (the member bound, then its candidate's
# model; families that differ only in their number of grid dims share members). Dropped whole
# past `_BEST_LIMIT` entries.
_BEST: dict[tuple[str, DeviceSpec], tuple[float, dict[str, int]] | None] = {}
_BEST_LIMIT = 1 << 15


def best_assignment(graph: KernelGraph, device: DeviceSpec
                    ) -> tuple[float, dict[str, int]] | None:
    """The feasible assignment (`feasible_assignments`) of least modeled latency, with that
    latency; the first such in enumeration order; None when none fits. Remembered per process
    (`_BEST`): the answer is a function of the graph and the device.

    Kernel by kernel where the kernels share no size variable and the kernel tensors have
    concrete shapes (what the search builds): a kernel's modeled latency, its spec and its
    limits read only its own sizes, so the best of the whole program is each kernel's best,
    and two kernels cost the sum of their enumerations instead of the product (the product
    was cut at `_MAX_ASSIGNMENTS`, so a second kernel was hardly searched). One kernel is
    enumerated exactly as before. The latency returned is the whole program's, modeled once
    at the chosen assignment."""
    key = (json.dumps(graph_to_json(replace(graph, name="")), sort_keys=True), device)
    if key not in _BEST:
        if len(_BEST) >= _BEST_LIMIT:
            _BEST.clear()
        _BEST[key] = _best_assignment(graph, device)
    best = _BEST[key]
    return None if best is None else (best[0], dict(best[1]))


def _best_assignment(graph: KernelGraph, device: DeviceSpec
                     ) -> tuple[float, dict[str, int]] | None:
    from prism.cost import modeled
    parts = _kernel_parts(graph)
    env: dict[str, int] = {}
    for part in parts:
        best: tuple[float, dict[str, int]] | None = None
        for candidate in feasible_assignments(part, device):
            try:
                latency = modeled(substitute_graph(part, candidate), device).latency_us
            except PrismError:
                continue
            if best is None or latency < best[0]:
                best = (latency, candidate)
        if best is None:
            return None
        if part is graph:       # one kernel: enumerated whole, as before
            return best
        env.update(best[1])
    return modeled(substitute_graph(graph, env), device).latency_us, env


def _kernel_parts(graph: KernelGraph) -> list[KernelGraph]:
    """The graph as one program per custom kernel that has size variables (its inputs, the
    kernel, its outputs), or the graph itself when its sizes cannot be chosen kernel by
    kernel (a kernel tensor with a symbolic shape, a variable in two kernels)."""
    blocks = [i for i, op in enumerate(graph.ops)
              if op.kind == "customized" and op.block is not None and op.block.free_vars()]
    names = [graph.ops[i].block.free_vars() for i in blocks]  # type: ignore[union-attr]
    shared = sum(len(n) for n in names) != len(frozenset().union(*names)) if names else False
    if len(blocks) < 2 or shared or any(d.free_vars() for _, s in graph.tensors for d in s):
        return [graph]
    return [kernel_program(graph, i) for i in blocks]


def descended(graph: KernelGraph, device: DeviceSpec, start: tuple[float, dict[str, int]]
              ) -> tuple[float, dict[str, int]]:
    """A better assignment than `start` where one exists two sizes at a time: every pair of
    size variables tried at every pair of powers of two (the rest held), the best fitting
    change kept, sweeps repeated until none improves (a local optimum of the model, not a
    proved best). For a graph whose enumeration `_MAX_ASSIGNMENTS` cut (six sizes of
    fourteen values each: a split program's), which reaches only the first few values of its
    first variables; pairs, because a split's two sizes trade against each other (more
    splits, fewer query blocks). A function of the graph and `start`; the latency is the
    model's at the assignment returned."""
    from prism.cost import modeled
    largest = max([d.value for _, s in graph.tensors for d in s if d.is_const] or [1])
    values = [2 ** k for k in range(int(math.log2(largest)) + 1)]
    best, env = start
    names = sorted(env)
    pairs: list[tuple[str, ...]] = list(itertools.combinations(names, 2)) or \
        [(n,) for n in names]
    improved = True
    while improved:
        improved = False
        for pair in pairs:
            for combo in itertools.product(values, repeat=len(pair)):
                trial = {**env, **dict(zip(pair, combo, strict=True))}
                if trial == env or not _fits(graph, trial, device):
                    continue
                try:
                    latency = modeled(substitute_graph(graph, trial), device).latency_us
                except PrismError:
                    continue
                if latency < best * (1 - 1e-9):
                    best, env, improved = latency, trial, True
    return best, env


def feasible_assignments(graph: KernelGraph, device: DeviceSpec) -> list[dict[str, int]]:
    """Assignments (every size a power of two up to the largest dim) under which the graph is
    well-formed and within the device's limits, evaluated on the concrete tiles."""
    names = sorted(n for n in graph.free_vars())
    largest = max([d.value for _, s in graph.tensors for d in s if d.is_const] or [1])
    values = [2 ** k for k in range(int(math.log2(largest)) + 1)]
    out = []
    for combo in itertools.islice(itertools.product(values, repeat=len(names)),
                                  _MAX_ASSIGNMENTS):
        env = dict(zip(names, combo, strict=True))
        if _fits(graph, env, device):
            out.append(env)
    return out


def _fits(graph: KernelGraph, env: dict[str, int], device: DeviceSpec) -> bool:
    """Well-formed (`problems`) and within the device's limits. The limits first: they read
    only tile sizes and cost a fifth of the spec check, and most assignments exceed them or
    leave a tile dim that does not evaluate (a quotient that does not divide: the spec check,
    which evaluates every grid size, loop range and tile dim, would report it, so it is not
    run)."""
    try:
        if not within_limits(graph, env, device):
            return False
    except DimExprError:
        if not _sizes_evaluate(graph, env):
            return False
    return not problems(graph, env)


def _sizes_evaluate(graph: KernelGraph, env: dict[str, int]) -> bool:
    """Whether every grid size, loop range and tile dim of every kernel evaluates under `env`
    (the part of the spec check that fails most often when the sizes are powers of two)."""
    try:
        for _, bg in graph.iter_blocks():
            for d in (*bg.grid, bg.forloop_range, *(d for _, s in bg.tensors for d in s)):
                evaluate(d, env)
    except DimExprError:
        return False
    return True


def within_limits(graph: KernelGraph, env: dict[str, int], device: DeviceSpec) -> bool:
    from prism.search.hardware import data_shapes, whole_dim
    for custom, bg in graph.iter_blocks():
        wholes = functools.cache(functools.partial(data_shapes, graph, custom))
        if math.prod(evaluate(g, env) for g in bg.grid) > device.max_blocks:
            return False
        smem = 0
        for op in bg.ops:
            cat = OPS[op.kind].category
            if op.kind == "input" or (cat not in ("unary", "scalar", "io")
                                      and op.kind != "nored"):
                smem += sum(math.prod(evaluate(d, env) for d in bg.shape(t))
                            for t in op.outputs)
        if device.dtype_bytes * smem > device.smem_bytes:
            return False
        for op in bg.ops:
            if op.kind != "matmul":
                continue
            for t in op.inputs:
                shape = bg.shape(t)
                for k in (len(shape) - 2, len(shape) - 1):
                    size = evaluate(shape[k], env)
                    if size < device.min_matmul_tile and \
                            size != whole_dim(shape[k], t, k, wholes).value:
                        return False
    return True
