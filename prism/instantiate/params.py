"""Parameter instantiation: candidate grid sizes and loop ranges for a verified sGraph.

A verified candidate has concrete maps and symbolic sizes (every grid dim and loop range a
variable). Its concrete kernels are the assignments of those variables, chosen as Prism's auto
tuner does (REFERENCE.md §1.7), for whatever shapes the graph has:

1. for each variable, n = gcd of the data dims it divides (every tile dim `D / (… var …)`);
2. if n ≤ 64, the powers of two dividing n; else, for a loop range, n/256 (at least 1) doubled
   while ≤ n/16, and for a grid size n/512 (at least 1) doubled while ≤ n/8 — keeping divisors of
   n; a variable that divides no dim is 1;
3. the Cartesian product filtered by the spec (exact divisibility, every shape well formed) and
   the device limits (Π grid ≤ max blocks, shared memory at 2 bytes per element, matmul tiles);
4. at most `limit` survivors, evenly spaced.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from prism.cost.devices import DeviceSpec, default_device
from prism.ir.dims import Dim, evaluate, quotients
from prism.ir.graph import KernelGraph
from prism.ir.spec import problems
from prism.search.audit import within_limits
from prism.search.concrete import size_candidates

MAX_CONFIGS = 20


@dataclass(frozen=True)
class Variable:
    name: str
    role: str        # "grid" or "loop"
    n: int           # gcd of the data dims it divides (0: divides none)

    def candidates(self) -> list[int]:
        # rule 2 above; it sits in the search, whose concrete mode opens block graphs with it
        return size_candidates(self.n, self.role)


def variables(graph: KernelGraph) -> list[Variable]:
    """The graph's size variables, grid sizes first then loop ranges, each with its n."""
    roles: dict[str, str] = {}
    for _, bg in graph.iter_blocks():
        for g in bg.grid:
            for v in g.free_vars():
                roles.setdefault(v, "grid")
        for v in bg.forloop_range.free_vars():
            roles.setdefault(v, "loop")
    divided: dict[str, list[int]] = {v: [] for v in roles}
    ones = dict.fromkeys(graph.free_vars(), 1)
    for _, bg in graph.iter_blocks():
        for _, shape in bg.tensors:
            for d in shape:
                _collect(d, divided, ones)
    order = sorted(roles, key=lambda v: (roles[v] != "grid", v))
    return [Variable(v, roles[v], math.gcd(*divided[v]) if divided[v] else 0) for v in order]


def _collect(d: Dim, divided: dict[str, list[int]], ones: dict[str, int]) -> None:
    # the sizes that divide this dim; one that multiplies it (a split program's partial sums,
    # `s·128`, stored by s blocks) says nothing about what it may be
    names = frozenset().union(*(den.free_vars() for _, den in quotients(d))) & divided.keys()
    if not names:
        return
    whole = evaluate(d, ones)       # the data dim: every size 1 (maps are concrete)
    for v in names:
        divided[v].append(whole)


def assignments(graph: KernelGraph, device: DeviceSpec | None = None,
                limit: int = MAX_CONFIGS) -> list[dict[str, int]]:
    """Up to `limit` feasible assignments of the graph's size variables, evenly spaced over all
    feasible ones (a concrete graph has one, the empty assignment, when it fits the device:
    a graph without size variables is held to the device's limits like any member)."""
    device = device or default_device()
    vs = variables(graph)
    if not vs:
        return [{}] if not problems(graph) and within_limits(graph, {}, device) else []
    feasible = []
    for combo in itertools.product(*[v.candidates() for v in vs]):
        env = {v.name: c for v, c in zip(vs, combo, strict=True)}
        if not problems(graph, env) and within_limits(graph, env, device):
            feasible.append(env)
    return spaced(feasible, limit)


def spaced(items: list[dict[str, int]], limit: int) -> list[dict[str, int]]:
    if len(items) <= limit:
        return items
    step = (len(items) - 1) / (limit - 1) if limit > 1 else 0
    return [items[round(k * step)] for k in range(limit)]
