"""The symbolic search, end to end: generate families, prune, instantiate maps, verify.

`search(target)` runs level 1 (`prism.search.generate`) under the pruning rules
(`prism.search.pruning`); every complete family goes to map instantiation (`prism.search.maps`)
and each member to the verifier with grid and loop sizes still symbolic. Every decision is an
event on the tracer. The search honours its time and family budgets and a cancel flag, and
returns what it found so far (`complete=False`) when one of them stops it.

Branch and bound: a verified candidate's modeled latency (`prism.cost`, at an assignment z3
found feasible) becomes the incumbent that the `cost_bound` rule compares lower bounds with.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any

from prism.errors import PrismError
from prism.ir.graph import KernelGraph
from prism.ir.ops import OPS
from prism.ir.serialize import graph_to_json
from prism.ir.spec import substitute_graph
from prism.search.abstract import AbstractTarget
from prism.search.config import SearchConfig
from prism.search.generate import Callbacks, Generator, Stop
from prism.search.maps import instantiate
from prism.search.pruning import Context, Family, Pruned, leaves
from prism.search.state import Tensor
from prism.trace import (
    CandidateRejected,
    CandidateUndecided,
    CandidateVerified,
    FamilyGenerated,
    FamilyPruned,
    SearchFinished,
    Tracer,
)
from prism.verify.equiv import Limits, Verdict, verify
from prism.verify.translate import leaf

MAP_LIMIT = 512     # concrete-map members verified per complete family


class UnsupportedTargetError(PrismError):
    """A target the search's op set cannot express."""


@dataclass
class Candidate:
    id: str
    family: str
    graph: KernelGraph
    verdict: Verdict
    modeled_us: float | None = None
    assignment: dict[str, int] | None = None

    @property
    def num_kernels(self) -> int:
        return self.graph.num_kernels

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "family": self.family,
                               "num_kernels": self.num_kernels,
                               "verdict": _public_verdict(self.verdict.verdict),
                               "method": self.verdict.method,
                               "proof_steps": self.verdict.proof_steps,
                               "sizes": self.verdict.sizes or None}
        if self.modeled_us is not None:
            out["modeled_us"] = round(self.modeled_us, 4)
            out["assignment"] = self.assignment
        if self.verdict.reason:
            out["reason"] = self.verdict.reason
        out["graph"] = graph_to_json(self.graph)
        return out


def _public_verdict(v: str) -> str:
    return "not_equivalent" if v == "invalid" else v


@dataclass
class CompleteFamily:
    id: str
    graph: KernelGraph                  # symbolic maps, grid and loop


@dataclass
class SearchResult:
    target: str
    config: SearchConfig
    seconds: float = 0.0
    complete: bool = True
    stop_reason: str = "exhausted"
    generated: int = 0
    pruned: Counter[str] = field(default_factory=Counter)
    set_aside: Counter[str] = field(default_factory=Counter)   # `unproven` prunes, per rule
    candidates: list[Candidate] = field(default_factory=list)
    families: list[CompleteFamily] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)     # limits the search hit, said aloud

    @property
    def kept(self) -> int:
        return self.generated - sum(self.pruned.values()) - sum(self.set_aside.values())

    @property
    def exhaustive(self) -> bool:
        """Every family was generated and every one not kept was pruned with a proven claim,
        and every member of every complete family was verified."""
        return self.complete and not self.set_aside and not any(
            "map instantiation stopped" in n for n in self.notes)

    @property
    def equivalent(self) -> list[Candidate]:
        return [c for c in self.candidates if c.verdict.verdict == "equivalent"]

    @property
    def best(self) -> Candidate | None:
        ranked = sorted(self.equivalent, key=lambda c: (c.modeled_us is None,
                                                        c.modeled_us or 0.0, c.num_kernels))
        return ranked[0] if ranked else None

    def summary(self) -> dict[str, Any]:
        verdicts = Counter(_public_verdict(c.verdict.verdict) for c in self.candidates)
        return {"target": self.target, "seconds": round(self.seconds, 3),
                "complete": self.complete, "stop_reason": self.stop_reason,
                "exhaustive": self.exhaustive, "device": self.config.device.name,
                "families": {"generated": self.generated, "kept": self.kept,
                             "complete": len(self.families),
                             "pruned": {r: self.pruned.get(r, 0)
                                        for r in self.config.rule_names},
                             **({"set_aside": dict(self.set_aside)} if self.set_aside
                                else {})},
                "verdicts": dict(verdicts),
                "best": self.best.id if self.best else None,
                **({"notes": self.notes} if self.notes else {})}

    def to_json(self) -> dict[str, Any]:
        out = self.summary()
        out["config"] = self.config.to_json()
        out["candidates"] = [c.to_json() for c in self.candidates]
        if not self.equivalent:
            out["message"] = self.empty_message()
        return out

    def empty_message(self) -> str:
        why = "" if self.complete else f" before the search was stopped ({self.stop_reason})"
        return (f"no candidate was proved equivalent to {self.target}{why}; raise the caps "
                "(more block ops, grid dims) or the budget, or enable pre-defined kernel ops")


def expressible(target: KernelGraph, config: SearchConfig) -> list[str]:
    """Why the search's vocabulary cannot express the target's ops (empty when it can)."""
    problems = []
    vocab = set(config.block_ops) | set(config.kernel_ops)
    if not [op for op in target.ops if op.kind not in ("input", "output")]:
        problems.append("the target computes nothing (no op between inputs and outputs)")
    for op in target.ops:
        if op.kind in ("input", "output", "customized") or op.kind in vocab:
            continue
        last = op.inputs and op.attr.get("dim") == len(target.shape(op.inputs[0])) - 1
        if op.kind == "sum" and last and "red_ld_sum" in config.accumulators:
            continue
        if op.kind == "mean" and last and "red_ld_mean" in config.accumulators:
            continue
        if op.kind == "rms_norm" and "red_ld_rms" in config.accumulators and "div" in vocab:
            continue
        what = OPS[op.kind].doc if op.kind in OPS else op.kind
        problems.append(f"{op.kind} ({what}) on {op.inputs} is not in the search's vocabulary")
    return problems


class _Run:
    """One search: the generator's callbacks, the verifier, the counts."""

    def __init__(self, target: KernelGraph, label: str, config: SearchConfig, tracer: Tracer,
                 cancel: threading.Event | None, observe: str | None = None):
        self.target, self.config, self.tracer, self.cancel = target, config, tracer, cancel
        self.result = SearchResult(label, config)
        self.start = time.perf_counter()
        self.deadline = self.start + config.budget_s
        self.abstract = AbstractTarget(target, config.abstract_limits)
        needed = set().union(*(leaves(t) for t in self.abstract.terms)) & set(
            self.abstract.inputs)
        # With a rule that reads the target's e-graph off (or audited), outputs are found by
        # shape and the verifier alone decides, so an audit does not lean on what it audits.
        egraph_rules = {"abstract_expression", "dead_end_output"}
        self.ctx = Context(self.abstract, config, frozenset(needed),
                           shape_outputs=bool(egraph_rules & set(config.disabled))
                           or observe in egraph_rules, observed=observe)
        self.observe = observe
        self.observed: list[tuple[Family, Pruned]] = []
        self.stop_reason: str | None = None
        # audit: the candidates of complete families under an observed prune, by its family
        self.under: list[tuple[str, Candidate]] = []
        self.generator = Generator(self.ctx, config, Callbacks(
            self.generated, self.pruned, self.complete, self.should_stop, self.observed_prune),
            observe)

    # -- callbacks ---------------------------------------------------------------------------

    def should_stop(self) -> bool:
        if self.cancel is not None and self.cancel.is_set():
            self.stop_reason = "cancelled"
        elif time.perf_counter() >= self.deadline:
            self.stop_reason = "time budget"
        elif (self.config.max_families is not None
              and self.result.generated >= self.config.max_families):
            self.stop_reason = "family budget"
        return self.stop_reason is not None

    def generated(self, fam: Family) -> None:
        self.result.generated += 1
        graph = graph_to_json(fam.graph) if self.config.record_graphs else None
        self.tracer.emit(FamilyGenerated(fam.id, fam.parent, fam.description, graph))

    def pruned(self, fam: Family, why: Pruned) -> None:
        if why.evidence.get("claim") == "unproven":
            if not self.result.set_aside:
                self.result.notes.append(
                    f"the target's e-graph stopped at its {self.abstract.report.stop_reason} "
                    f"({self.abstract.report}): families it does not reach are set aside "
                    "unproven, so the search is not exhaustive; raise "
                    "SearchConfig.abstract_limits until it saturates")
            self.result.set_aside[why.rule] += 1
        else:
            self.result.pruned[why.rule] += 1
        self.tracer.emit(FamilyPruned(fam.id, fam.parent, why.rule, why.reason, why.evidence))

    def observed_prune(self, fam: Family, why: Pruned) -> None:
        self.observed.append((fam, why))

    def complete(self, fam: Family, outputs: tuple[int, ...]) -> None:
        kernel = fam.kernel
        graph = kernel.graph(outputs, name=f"{self.result.target}.{fam.parent}")
        family = CompleteFamily(fam.parent or "root", graph)
        self.result.families.append(family)
        found: list[Candidate] = []
        for member in instantiate(graph, kernel.equalities, limit=MAP_LIMIT):
            if self.should_stop():
                raise Stop
            cand = self.check(member, family.id)
            found.append(cand)
        if len(found) >= MAP_LIMIT:
            self.result.notes.append(f"family {family.id}: map instantiation stopped at "
                                     f"{MAP_LIMIT} members; some were not verified")
        origin = self.generator.marked.get(fam.parent or "")
        if origin is not None:
            self.under += [(origin, c) for c in found]

    def check(self, member: KernelGraph, family: str, refute_first: bool = True) -> Candidate:
        cid = f"c{len(self.result.candidates) + 1}"
        member = replace(member, name=f"{self.result.target}.{cid}")
        # Counts only (iterations, nodes): a verdict never depends on how busy the machine is.
        lim = self.config.verify_limits
        verdict = verify(self.target, member, Limits(lim.iterations, lim.nodes),
                         refute_first=refute_first)
        cand = Candidate(cid, family, member, verdict)
        self.result.candidates.append(cand)
        if verdict.verdict == "equivalent":
            self._model(cand)
            self.tracer.emit(CandidateVerified(cid, family, verdict.to_json(), verdict.method,
                                               graph_to_json(member)))
        elif verdict.verdict in ("not_equivalent", "invalid"):
            self.tracer.emit(CandidateRejected(cid, family, verdict.counterexample or
                                               {"reason": verdict.reason}, verdict.method,
                                               graph_to_json(member)))
        else:
            self.tracer.emit(CandidateUndecided(cid, family, verdict.reason, verdict.method))
        return cand

    def _model(self, cand: Candidate) -> None:
        """The candidate's modeled latency at its best assignment that fits the device (sizes
        over powers of two, the audit's enumeration, evaluated on the concrete tiles): the
        incumbent of branch and bound. Not z3's model, which is any fitting assignment and
        may differ from call to call; the best enumerated one is a function of the graph."""
        from prism.cost import modeled
        from prism.search.audit import feasible_assignments
        best: tuple[float, dict[str, int]] | None = None
        for env in feasible_assignments(cand.graph, self.config.device):
            try:
                latency = modeled(substitute_graph(cand.graph, env), self.config.device).latency_us
            except PrismError:
                continue
            if best is None or latency < best[0]:
                best = (latency, env)
        if best is None:
            return
        cand.modeled_us, cand.assignment = best
        if self.ctx.incumbent_us is None or best[0] < self.ctx.incumbent_us:
            self.ctx.incumbent_us, self.ctx.incumbent_id = best[0], cand.id

    # -- running -----------------------------------------------------------------------------

    def run(self) -> SearchResult:
        inputs = [Tensor(t, self.target.shape(t), leaf(name))
                  for t, name in zip(self.target.inputs, self.abstract.inputs, strict=True)]
        with self.tracer.stage("search") as summary:
            with contextlib.suppress(Stop):
                self.generator.run(inputs)
            self.result.complete = self.stop_reason is None
            self.result.stop_reason = self.stop_reason or "exhausted"
            self.result.seconds = time.perf_counter() - self.start
            summary.update(self.result.summary())
        self.tracer.emit(SearchFinished(self.result.summary()))
        return self.result


def search(target: KernelGraph, config: SearchConfig | None = None, *,
           tracer: Tracer | None = None, cancel: threading.Event | None = None,
           label: str | None = None) -> SearchResult:
    """Search for programs equivalent to `target`; see the module docstring."""
    config = config or SearchConfig()
    problems = expressible(target, config)
    if problems:
        raise UnsupportedTargetError(f"{label or target.name}: {'; '.join(problems)}; "
                                     "rewrite it with the ops the search knows")
    run = _Run(target, label or target.name or "target", config, tracer or Tracer(keep=False),
               cancel)
    return run.run()
