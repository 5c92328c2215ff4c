"""Training data from searches: every family with the best modeled latency reachable below it,
and every tuning configuration with its modeled latency. No torch here.

A family's label is the minimum modeled latency over the proven candidates of its subtree (a
candidate belongs to the family that completed it and to each family above it, by the trace's
parent links). A family with no candidate below it is labelled `reach=False` and has no latency:
the model learns that as a class, not as a number. That negative is a fact only where the search
below it ran to the end: the searches here run without `cost_bound` (branch and bound would cut
subtrees for being no better, not for holding nothing) and, when a budget stopped one, its
negatives are dropped as censored (`Examples.censored` counts them).

The families' states are the ones a trace records (`SearchConfig.record_graphs`, what
`prism export-steps` writes as each step's state): each graph is read back into the search's
state (`prism.steps.states.rebuild`) and encoded by `prism.learn.features`, as the search's
own states are when the learned order scores children.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from prism.cost import modeled
from prism.errors import PrismError
from prism.instantiate.params import assignments
from prism.ir.graph import KernelGraph
from prism.ir.serialize import graph_from_json
from prism.ir.spec import substitute_graph
from prism.learn import features
from prism.search.abstract import AbstractTarget
from prism.search.config import SearchConfig
from prism.search.driver import SearchResult, search
from prism.search.pruning import Context, leaves
from prism.steps.states import rebuild
from prism.trace import FamilyGenerated, Tracer
from prism.trace.events import Event


@dataclass(frozen=True)
class FamilyExample:
    search: str
    program: list[float]
    tokens: list[features.Token]
    node: list[float]
    reach: bool
    log_ratio: float            # log(best µs below / reference µs); nan when not reach


@dataclass(frozen=True)
class ConfigExample:
    search: str
    numbers: list[float]
    log_ratio: float            # log(modeled µs / the program's roofline-like reference)


@dataclass
class Examples:
    families: list[FamilyExample] = field(default_factory=list)
    configs: list[ConfigExample] = field(default_factory=list)
    censored: int = 0           # negatives dropped: their search did not run to the end
    skipped: Counter[str] = field(default_factory=Counter)

    def __iadd__(self, other: Examples) -> Examples:
        self.families += other.families
        self.configs += other.configs
        self.censored += other.censored
        self.skipped.update(other.skipped)
        return self


def context(target: KernelGraph, config: SearchConfig) -> Context:
    """The search's context for `target`, as the driver builds it (the rules on)."""
    abstract = AbstractTarget(target, config.abstract_limits)
    needed = set().union(*(leaves(t) for t in abstract.terms)) & set(abstract.inputs)
    return Context(abstract, config, frozenset(needed))


def labelled_search(target: KernelGraph, config: SearchConfig, label: str
                    ) -> tuple[SearchResult, list[Event]]:
    """The search whose families are labelled: graphs recorded, `cost_bound` off."""
    config = replace(config, record_graphs=True, disabled=config.disabled | {"cost_bound"})
    tracer = Tracer(keep=True)
    return search(target, config, tracer=tracer, label=label), tracer.events


def best_below(events: Iterable[Event], result: SearchResult) -> dict[str, float]:
    """Each family's best modeled latency over the proven candidates below it (families with
    none are absent)."""
    parent = {e.id: e.parent for e in events if isinstance(e, FamilyGenerated)}
    best: dict[str, float] = {}
    for cand in result.equivalent:
        if cand.modeled_us is None:
            continue
        fid: str | None = cand.family
        while fid is not None and fid in parent:
            if best.get(fid, math.inf) > cand.modeled_us:
                best[fid] = cand.modeled_us
            fid = parent[fid]
    return best


def family_examples(target: KernelGraph, config: SearchConfig, label: str,
                    limit: int | None = None) -> tuple[Examples, SearchResult]:
    """Every family of `target`'s search (at most `limit`, spread evenly), labelled."""
    result, events = labelled_search(target, config, label)
    ctx = context(target, result.config)
    best = best_below(events, result)
    out = Examples()
    generated = [e for e in events if isinstance(e, FamilyGenerated)]
    if limit is not None and len(generated) > limit:
        generated = [generated[(i * len(generated)) // limit] for i in range(limit)]
    prog: list[float] | None = None
    ref = 1.0
    for e in generated:
        if e.graph is None:
            out.skipped["family without a graph"] += 1
            continue
        try:
            state = rebuild(graph_from_json(e.graph, validate=False))
        except PrismError:
            out.skipped["family that is no generator state (a split program)"] += 1
            continue
        if prog is None:
            prog = features.program(ctx, state.kernel)
            ref = features.reference_us(ctx, state.kernel)
        reach = e.id in best
        if not reach and not result.complete:
            out.censored += 1
            continue
        out.families.append(FamilyExample(
            label, prog, features.tokens(ctx, state.kernel, state.block),
            features.node(ctx, state.kernel, state.block), reach,
            math.log(best[e.id] / ref) if reach else math.nan))
    return out, result


def config_examples(target: KernelGraph, result: SearchResult, label: str,
                    limit: int = 2000) -> list[ConfigExample]:
    """The tuner's configurations of the search's proven candidates (every feasible assignment,
    `prism.instantiate.params`), each with its modeled latency; at most `limit`, spread evenly."""
    device = result.config.device
    graphs = configurations(result)
    if len(graphs) > limit:
        graphs = [graphs[(i * len(graphs)) // limit] for i in range(limit)]
    out = []
    for graph in graphs:
        try:
            us = modeled(graph, device).latency_us
        except PrismError:
            continue
        out.append(ConfigExample(label, features.configuration(graph, device),
                                 math.log(us / _reference(target, result))))
    return out


def configurations(result: SearchResult) -> list[KernelGraph]:
    """The concrete programs the tuner may try: each proven candidate at each of its feasible
    assignments, in the order the tuner lists them (`prism.pipeline.instantiate`)."""
    out = []
    for cand in result.equivalent:
        for env in assignments(cand.graph, result.config.device):
            out.append(substitute_graph(cand.graph, env))
    return out


def _reference(target: KernelGraph, result: SearchResult) -> float:
    from prism.cost import roofline_us
    return roofline_us(target, result.config.device)
