"""The symbolic search, end to end: generate families, prune, instantiate maps, verify.

`search(target)` runs level 1 (`prism.search.generate`) under the pruning rules
(`prism.search.pruning`); every complete family goes to map instantiation (`prism.search.maps`)
and each member to the verifier with grid and loop sizes still symbolic. Every decision is an
event on the tracer. The search honours its time and family budgets and a cancel flag, and
returns what it found so far (`complete=False`) when one of them stops it.

Branch and bound: a verified candidate's modeled latency (`prism.cost`, at an assignment z3
found feasible) becomes the incumbent that the `cost_bound` rule compares lower bounds with.

On an executor (`search(..., executor=...)`, `prism.search.executors`) the tree is cut into
tasks at block graphs of `split_depth` ops (deeper, up to `MORE_CUT_DEPTH` more, while that
gives fewer than `TASKS_PER_WORKER` tasks a worker). A first pass generates the part above the
cuts and hands the tasks out; the walk then generates it again and takes each task's outcome at
its cut, numbering families and candidates as one depth-first search does. A task run in place
starts from the walk's incumbent; one run on a worker starts from the best found above the cuts
before it (a worse one, so it prunes a subset), records each family and bound, and the merge
replays branch and bound with the walk's incumbent (`_bounded`). So the result and the trace are
one depth-first search's, whatever the executor and the number of workers.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import threading
import time
from collections import ChainMap, Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any, Protocol

from prism.errors import PrismError
from prism.ir.graph import BlockGraph, KernelGraph
from prism.ir.ops import OPS
from prism.ir.serialize import graph_to_json
from prism.ir.spec import substitute_graph
from prism.search.abstract import AbstractTarget
from prism.search.concrete import mirage_check
from prism.search.config import BLOCK_VOCABULARY, SearchConfig
from prism.search.generate import Callbacks, Generator, Stop
from prism.search.maps import (
    block_bits,
    free_bits,
    instantiate,
    kernel_members,
    kernel_program,
    unsplit,
    with_blocks,
)
from prism.search.pruning import (
    MAP_LIMIT,
    Context,
    Family,
    Pruned,
    cost_bound_prune,
    family_bound_us,
    leaves,
)
from prism.search.state import BlockState, KernelState, Tensor
from prism.trace import (
    CandidateRejected,
    CandidateUndecided,
    CandidateVerified,
    FamilyGenerated,
    FamilyPruned,
    SearchFinished,
    Tracer,
)
from prism.verify.equiv import Limits, Verdict, before_proof, copied_from, verify
from prism.verify.translate import leaf

if TYPE_CHECKING:
    from prism.search.executors import Executor

@dataclass(frozen=True)
class SplitPiece:
    """What the split pass computes for one split program (`_Run.split_piece`): its verdict,
    its best enumerated assignment (with that latency) when equivalent, the descent from it,
    and for a log-sum-exp split the assignment of the member the model picks."""

    verdict: Verdict
    best: tuple[float, dict[str, int]] | None
    descended: tuple[float, dict[str, int]] | None
    env: dict[str, int] | None = None


def split_moves(graph: KernelGraph) -> list[tuple[str, KernelGraph]]:
    """The split programs of a proved one-kernel program, by move, in the pass's order; each
    two-kernel one followed by its one-launch form (`split.one_launch`, move name + "_tail")."""
    from prism.search.split import one_launch, split_loop, split_softmax, stream_softmax
    out = []
    for name, move in (("split_loop", split_loop), ("stream_softmax", stream_softmax),
                       ("split_softmax", split_softmax)):
        program, _why = move(graph)
        if program is not None:
            out.append((name, program))
            merged, _why = one_launch(program) if program.num_kernels == 2 else (None, "")
            if merged is not None:
                out.append((f"{name}_tail", merged))
    return out


def _graph_key(graph: KernelGraph) -> str:
    return json.dumps(graph_to_json(replace(graph, name="")), sort_keys=True)


SPLIT_WHAT = {
    "split_loop": "with its loop split across blocks: partial sums, then a second kernel that "
                  "sums them (flash-decoding)",
    "stream_softmax": "with its keys walked by a loop: each iteration's row max and the sums "
                      "under it, the sums kept under the running max (online softmax, "
                      "FlashAttention)",
    "split_softmax": "with its keys split across blocks: each part's row max and the sums under "
                     "it, then a second kernel that rescales them to the max of the maxes and "
                     "sums them (log-sum-exp split, flash-decoding)",
}
_ONE_LAUNCH = "; in one launch: the last block of each group to finish runs the second kernel's " \
              "block (a counter per group)"
SPLIT_WHAT |= {f"{move}_tail": what + _ONE_LAUNCH for move, what in list(SPLIT_WHAT.items())
               if move != "stream_softmax"}
SPLIT_GRACE = 0.1   # of the budget: the split move after a search its time budget stopped
# a worker's task keeps 1/TASK_SHARE of the family events the run's trace keeps in full
# (`FamilySampler`: when every listener samples), then one pruned example per rule
TASK_SHARE = 16


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
    # modeled by descending from its best enumerated assignment (`audit.descended`), as a
    # split program is: it has more sizes than `best_assignment` enumerates whole
    descend: bool = False

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
    # several kernels, verified kernel by kernel: what was left out, and why (counts)
    by_kernel: Counter[str] = field(default_factory=Counter)


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
    executor: dict[str, Any] = field(default_factory=dict)   # where its tasks ran
    seed: Candidate | None = None       # branch and bound's first incumbent (`_seed`)

    @property
    def kept(self) -> int:
        return self.generated - sum(self.pruned.values()) - sum(self.set_aside.values())

    @property
    def exhaustive(self) -> bool:
        """Every family was generated and every one not kept was pruned with a proven claim,
        and every member of every complete family was verified."""
        return self.complete and not self.set_aside and not any(
            "were not verified" in n for n in self.notes)

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
                **({"by_kernel": dict(by_kernel)} if (by_kernel := sum(
                    (f.by_kernel for f in self.families), Counter())) else {}),
                **({"notes": self.notes} if self.notes else {}),
                **({"executor": self.executor} if self.executor else {}),
                **({"seed": self._seed_json()} if self.seed is not None else {})}

    def _seed_json(self) -> dict[str, Any]:
        assert self.seed is not None
        same = json.dumps(graph_to_json(replace(self.seed.graph, name="")), sort_keys=True)
        again = next((c.id for c in self.equivalent if c.modeled_us == self.seed.modeled_us
                      and json.dumps(graph_to_json(
            replace(c.graph, name="")), sort_keys=True) == same), None)
        return {"id": self.seed.id, "modeled_us": round(self.seed.modeled_us or 0.0, 4),
                "found_again_as": again}

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
    if not [op for op in target.ops if op.kind not in ("input", "output")]:
        problems.append("the target computes nothing (no op between inputs and outputs)")
    for op in _unexpressed(target, config):
        what = OPS[op.kind].doc if op.kind in OPS else op.kind
        problems.append(f"{op.kind} ({what}) on {op.inputs} is not in the search's vocabulary")
    return problems


def _unexpressed(target: KernelGraph, config: SearchConfig) -> list[Any]:
    """The target's ops that neither the vocabulary nor an accumulator expresses."""
    vocab = set(config.block_ops) | set(config.kernel_ops)
    out = []
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
        out.append(op)
    return out


def _vocabulary_fix(target: KernelGraph, config: SearchConfig) -> str:
    """The fix for a target `expressible` refuses: the block ops it lacks that a block can
    hold, added to the vocabulary (`superoptimize` adds them itself), else a rewrite."""
    have = set(config.block_ops)
    missing = {op.kind for op in _unexpressed(target, config)}
    lacking = [k for k in BLOCK_VOCABULARY if k in missing]
    if not lacking:
        return "rewrite it with the ops the search knows"
    ops = ",".join(k for k in BLOCK_VOCABULARY if k in have or k in lacking)
    return (f"add {', '.join(lacking)} to the block vocabulary (--block-ops {ops}, or "
            "SearchConfig.block_ops), or optimize it (prism optimize, prism.superoptimize), "
            "whose vocabulary adds the program's own ops")


class _Flag(Protocol):
    def is_set(self) -> bool: ...


@dataclass(frozen=True)
class Task:
    """A subtree of the search, run on an executor: from a block graph at the cut depth."""

    index: int
    kernel: KernelState
    block: BlockState
    kernel_key: tuple[object, ...]
    parent: str                           # the id (before the cut's numbering) it descends from
    incumbent: tuple[float, str] | None   # the best candidate before the cut: (µs, its id)
    limit: int | None                     # families it may generate (the family budget left)


@dataclass(frozen=True)
class Numbering:
    """How a task names what it makes: final ids (run in place) or provisional ones."""

    family_prefix: str = "@f"
    family_base: int = 0
    candidate_prefix: str = "@c"
    candidate_base: int = 0
    parent: str = "@parent"
    incumbent: str = "@inc"


@dataclass
class TaskOutcome:
    index: int
    generated: int
    pruned: Counter[str]
    set_aside: Counter[str]
    candidates: list[Candidate]
    families: list[CompleteFamily]
    notes: list[str]
    stop_reason: str | None
    events: list[Any] | None           # a worker's events, when the search's tracer wants them
    provisional: bool                  # ids still to be numbered by the merge
    seconds: float
    worker: str = ""
    events_dropped: int = 0            # a worker's family events its sampler did not keep
    # On a worker, for the merge to apply branch and bound as one depth-first search would
    # (with the walk's incumbent, not the worse one the task started from): every family in
    # order as [id, parent, rule, claim, n] (id None: counted only; n > 1 for a run of
    # counted-only siblings pruned by one rule, which are most of a large search's families:
    # with an entry each, a search of 60 million families left gigabytes on the coordinator),
    # the position of each candidate among them, and the lower bound of each family that
    # reached `cost_bound`.
    records: list[list[Any]] = field(default_factory=list)
    candidate_at: list[int] = field(default_factory=list)
    bounds: dict[str, float] = field(default_factory=dict)

    def record_counted(self, parent: str | None, rule: str, claim: object) -> None:
        """A counted-only family: one more in the last entry when that is a run of such
        siblings pruned alike and no candidate came between, else a new entry."""
        last = self.records[-1] if self.records else None
        if last is not None and last[0] is None and last[1:4] == [parent, rule, claim] and \
                not (self.candidate_at and self.candidate_at[-1] == len(self.records)):
            last[4] += 1
        else:
            self.records.append([None, parent, rule, claim, 1])


class _Run:
    """One search: the generator's callbacks, the verifier, the counts."""

    def __init__(self, target: KernelGraph, label: str, config: SearchConfig, tracer: Tracer,
                 cancel: _Flag | None, observe: str | None = None,
                 abstract: AbstractTarget | None = None, split: str | None = None,
                 session: Any = None, first: _Run | None = None,
                 ids: tuple[str, str] = ("f", "c")):
        self.target, self.config, self.tracer, self.cancel = target, config, tracer, cancel
        self.result = SearchResult(label, config)
        # budgets run on the tracer's clock, which stands still while a person pauses the run
        self.start = tracer.budget.now()
        self.deadline = self.start + config.budget_s
        self.family_limit = config.max_families
        self.ids = ids                   # the prefixes of its family and candidate ids
        self.cid_prefix, self.cid_base = ids[1], 0
        # split "collect" (the first pass): each cut becomes a task, by its place in the tree;
        # split "absorb" (the walk): each cut takes its task's outcome from `session`
        self.split, self.session, self.first = split, session, first
        self.tasks: dict[tuple[object, ...], Task] = {}
        # the verdicts of the part above the cuts, by candidate graph: the walk re-meets them
        self.verdicts: dict[str, Candidate] = first.verdicts if first is not None else {}
        self.final_ids: dict[str, str] = {}      # walk: candidate graph → its id
        self.graph_of: dict[str, str] = {}       # first pass: candidate id → its graph
        self.recording: TaskOutcome | None = None  # a worker's task: what the merge replays
        # several kernels, kernel by kernel: each kernel program's verdict and best assignment
        # once per search (the same kernel ends many families), by the program's JSON
        self.kernel_checks: dict[str, tuple[Verdict, tuple[float, dict[str, int]] | None]] = \
            first.kernel_checks if first is not None else {}
        self.kernel_choice_lists: dict[str, list[BlockGraph]] = \
            first.kernel_choice_lists if first is not None else {}
        # proof attempts by their terms (`verify(proofs=)`): candidates that translate alike
        # share one e-graph run
        self.proofs: dict[Any, Any] = first.proofs if first is not None else {}
        # the quick trials' refutations by terms (`verify(trials=)`), which a later candidate
        # with the same terms copies: in the proofs memo, except in the walk over the cuts,
        # which keeps them in its own order (and lends them to the tasks it runs in place),
        # so a copy is the one a single depth-first search makes, whatever the executor
        # (`_as_walked`)
        self.trials: dict[Any, Any] = {} if split == "absorb" else self.proofs
        if split == "absorb" and session is not None:
            session.walked = self.trials
        # the seed's pass (`_seed`): stop after this many candidates, or at the first family
        # with a modeled equivalent member
        self.candidate_limit: int | None = None
        self.stop_at_first_best = False
        self.abstract = abstract or AbstractTarget(target, config.abstract_limits)
        needed = set().union(*(leaves(t) for t in self.abstract.terms)) & set(
            self.abstract.inputs)
        # With a rule that reads the target's e-graph off (or audited), outputs are found by
        # shape and the verifier alone decides, so an audit does not lean on what it audits.
        # (`out_of_reach` rests on the outputs the e-graph tells: audited, it is evaluated
        # against completions told by shape; off, it changes nothing else.)
        egraph_rules = {"abstract_expression", "dead_end_output"}
        self.ctx = Context(self.abstract, config, frozenset(needed),
                           shape_outputs=bool(egraph_rules & set(config.disabled))
                           or observe in egraph_rules | {"out_of_reach"}, observed=observe)
        # the member bound's verdicts before a proof, for the family it bounded last (its
        # kernel state, its members, their verdicts: None where a proof must decide), which
        # `complete` takes instead of instantiating and trying the members again
        self.screened: tuple[KernelState, list[KernelGraph], list[Verdict | None]] | None = None
        if config.member_bound and not config.concrete:
            self.ctx.screen = self._screen
        self.observe = observe
        self.observed: list[tuple[Family, Pruned]] = []
        self.stop_reason: str | None = None
        # audit: the candidates of complete families under an observed prune, by its family
        self.under: list[tuple[str, Candidate]] = []
        self.generator = Generator(self.ctx, config, Callbacks(
            self.generated, self.pruned, self.complete, self.should_stop, self.observed_prune,
            self.cut if split else None,
            lambda rule, prefix: not self.tracer.wants_family(rule, prefix), self.counted),
            observe)
        self.generator.id_prefix = ids[0]
        self._rules = self.generator.rules

    # -- callbacks ---------------------------------------------------------------------------

    def should_stop(self) -> bool:
        if self.cancel is not None and self.cancel.is_set():
            self.stop_reason = "cancelled"
        elif self.tracer.budget.now() >= self.deadline:
            self.stop_reason = "time budget"
        elif self.family_limit is not None and self.result.generated >= self.family_limit:
            self.stop_reason = "family budget"
        elif self.candidate_limit is not None and \
                len(self.result.candidates) >= self.candidate_limit:
            self.stop_reason = "candidate budget"
        return self.stop_reason is not None

    def cut(self, kernel: KernelState, block: BlockState, kernel_key: tuple[object, ...],
            parent: str) -> None:
        """The first pass records a task here; the walk absorbs that task's outcome."""
        place = (kernel.ops, block.signature())
        if self.split == "collect":
            incumbent = None if self.ctx.incumbent_us is None else (
                self.ctx.incumbent_us, str(self.ctx.incumbent_id))
            limit = None if self.family_limit is None else \
                self.family_limit - self.result.generated
            self.tasks[place] = Task(len(self.tasks), kernel, block, kernel_key, parent,
                                     incumbent, limit)
            return
        assert self.first is not None
        task = self.first.tasks.get(place)
        if task is None:        # the first pass stopped before it (budget, cancel)
            self.stop_reason = self.first.stop_reason or "time budget"
            raise Stop
        self._absorb(task, parent)

    def _absorb(self, task: Task, parent: str) -> None:
        res, gen = self.result, self.generator
        left = None if self.family_limit is None else self.family_limit - res.generated
        incumbent = ""
        if task.incumbent is not None:
            assert self.first is not None
            graph = self.first.graph_of.get(task.incumbent[1], "")
            incumbent = SEED_ID if task.incumbent[1] == SEED_ID else self.final_ids.get(
                graph, "(a candidate the search's first pass verified before this cut)")
        numbering = Numbering(self.ids[0], gen.count, self.ids[1], len(res.candidates),
                              parent, incumbent)
        # Run here, a task starts from the walk's incumbent, as one depth-first search's
        # subtree would; on a worker it started from the best before its cut in the first
        # pass (a worse one: `_bounded` replays branch and bound with the walk's).
        here = replace(task, incumbent=None if self.ctx.incumbent_us is None else
                       (self.ctx.incumbent_us, str(self.ctx.incumbent_id)))
        here_numbering = replace(numbering, incumbent=str(self.ctx.incumbent_id))
        if self.session.in_place:
            out = self.session.outcome(here, here_numbering, left)
        else:
            out = self.session.outcome(task, numbering, left)
        if out is not None and out.provisional and left is not None and out.generated >= left:
            # it ran with the family budget left at its cut in the first pass; the tasks
            # before it took some of that: run it again here with what is left now
            out = self.session.run_here(here, here_numbering, left)
        if out is None:
            return
        if out.provisional:
            out = _numbered(_bounded(out, self.ctx.incumbent_us, self.ctx.incumbent_id,
                                     self.config.device.name, self.ctx.screen is not None),
                            numbering)
        res.generated += out.generated
        gen.count += out.generated
        res.pruned.update(out.pruned)
        res.set_aside.update(out.set_aside)
        walked = {c.id: c.verdict for c in out.candidates if self._as_walked(c)}
        res.candidates += out.candidates
        res.families += out.families
        for text in out.notes:
            if text not in res.notes:
                res.notes.append(text)
        for event in out.events or ():
            if isinstance(event, CandidateRejected) and event.id in walked:
                verdict = walked[event.id]
                event = replace(event, counterexample=verdict.counterexample or
                                {"reason": verdict.reason})
            self.tracer.emit(event)
        if out.events_dropped:
            self.note(f"the workers sent each task's first "
                      f"{max(1, (self.tracer.family_cap or 0) // TASK_SHARE):,} "
                      "family events in full (a share of what this run's trace keeps) and one "
                      "pruned example per rule after them; the counts are whole")
        for cand in out.candidates:       # the incumbent, as the walk would have found it
            if cand.modeled_us is not None and (self.ctx.incumbent_us is None
                                                or cand.modeled_us < self.ctx.incumbent_us):
                self.ctx.incumbent_us, self.ctx.incumbent_id = cand.modeled_us, cand.id
        if out.stop_reason is not None:
            self.stop_reason = out.stop_reason
            if out.stop_reason == "family budget":
                raise Stop

    def note(self, text: str) -> None:
        if text not in self.result.notes:
            self.result.notes.append(text)

    def generated(self, fam: Family) -> None:
        self.result.generated += 1
        if self.recording is not None:
            self.recording.records.append([fam.id, fam.parent, None, None, 1])
        if self.tracer.wants_events:    # nobody keeps or hears it: the count is the result
            graph = graph_to_json(fam.graph) if self.config.record_graphs else None
            self.tracer.emit(FamilyGenerated(fam.id, fam.parent, fam.description, graph))

    def counted(self, why: Pruned, parent: str | None) -> None:
        """A family generated and pruned that no one sees: its counts only."""
        self.result.generated += 1
        if self.recording is not None:
            self.recording.record_counted(parent, why.rule, why.evidence.get("claim"))
        self._count(why)

    def pruned(self, fam: Family, why: Pruned) -> None:
        if self.recording is not None:      # the family generated last
            self.recording.records[-1][2:4] = [why.rule, why.evidence.get("claim")]
        self._count(why)
        if self.tracer.wants_events:
            self.tracer.emit(FamilyPruned(fam.id, fam.parent, why.rule, why.reason,
                                          why.evidence))

    def _count(self, why: Pruned) -> None:
        if why.evidence.get("claim") == "unproven":
            if not self.result.set_aside:
                self.note(
                    f"the target's e-graph stopped at its {self.abstract.report.stop_reason} "
                    f"({self.abstract.report}): families it does not reach are set aside "
                    "unproven, so the search is not exhaustive; raise "
                    "SearchConfig.abstract_limits until it saturates")
            self.result.set_aside[why.rule] += 1
        else:
            self.result.pruned[why.rule] += 1

    def observed_prune(self, fam: Family, why: Pruned) -> None:
        self.observed.append((fam, why))

    def complete(self, fam: Family, outputs: tuple[int, ...]) -> None:
        kernel = fam.kernel
        graph = kernel.graph(outputs, name=f"{self.result.target}.{fam.parent}")
        family = CompleteFamily(fam.parent or "root", graph)
        self.result.families.append(family)
        found = self._by_kernel(graph, family, kernel.equalities)
        if found is None:
            found = []
            fixed = self.config.concrete & {"imap", "fmap", "omap"}
            screened, self.screened = self.screened, None
            members: Iterable[KernelGraph] = \
                instantiate(graph, kernel.equalities, limit=MAP_LIMIT, fixed=fixed)
            early: Iterable[Verdict | None] = itertools.repeat(None)    # none decided yet
            if screened is not None and screened[0] is kernel:     # what the bound tried
                members, early = screened[1], screened[2]
            for member, verdict in zip(members, early, strict=False):
                if self.should_stop():
                    raise Stop
                if self.config.concrete and not self._fits(member):
                    continue
                found.append(self.check(member, family.id, verdict=verdict))
            if len(found) >= MAP_LIMIT:
                self.note(f"family {family.id}: map instantiation stopped at {MAP_LIMIT} "
                          "members; some were not verified")
        origin = self.generator.marked.get(fam.parent or "")
        if origin is not None:
            self.under += [(origin, c) for c in found]
        if self.stop_at_first_best and any(c.modeled_us is not None for c in found
                                           if c.verdict.verdict == "equivalent"):
            raise Stop

    def _screen(self, kernel: KernelState, members: list[KernelGraph]) -> list[bool]:
        """`Context.screen`: which members may be equivalent, by what the verifier decides
        before a proof (`before_proof`: the spec check, the quick trial). Their verdicts are
        kept for the family's completion, which verifies these members (a member that passed
        goes straight to its proof). Budgets and cancel are read before each member, as
        `complete` reads them."""
        early = []
        # its refutations join `trials` as candidates (`check`): a pruned family's members
        # are none, and a later candidate copies none of them
        trials = ChainMap({}, self.trials)
        for member in members:
            if self.should_stop():
                raise Stop
            early.append(before_proof(self.target, member, self.proofs, trials=trials))
        self.screened = (kernel, members, early)
        return [v is None for v in early]

    def _fits(self, member: KernelGraph) -> bool:
        """In the concrete mode, a member whose sizes are all numbers must fit the device: the
        hardware rule passed its family for some choice of the maps still symbolic then (the
        symbolic search leaves this to the tuner's assignments)."""
        from prism.ir.spec import problems
        from prism.search.audit import within_limits
        if member.free_vars() or problems(member) or \
                within_limits(member, {}, self.config.device):
            return True             # (a member that is no program: its check says so)
        self.note("the concrete mode left out members whose sizes do not fit the device "
                  "(blocks, shared memory or matmul tiles, checked on the member)")
        return False

    def _by_kernel(self, graph: KernelGraph, family: CompleteFamily, equalities: Any
                   ) -> list[Candidate] | None:
        """A family of several custom kernels, verified kernel by kernel; None where that
        does not apply (fewer than two custom kernels; a kernel that cannot be unsplit; an
        unsplit program the verifier cannot decide), and the members are verified whole.

        Kernel tensors hold what their abstract expressions say (the search space: no
        program passes a tensor between kernels in another layout). So a member is the
        target's program iff each of its kernels computes its kernel tensor, i.e. equals that
        kernel unsplit (`maps.unsplit`: one block, one iteration, which computes the abstract
        expression), and the program of unsplit kernels equals the target. That program is
        proved once; each kernel's members are proved against their kernel unsplit, once per
        search; every combination of proved kernels is then proved by substitution of equals.
        This turns the product of the kernels' map choices into their sum. A kernel member
        refuted against its kernel unsplit computes another tensor: no program of the space,
        and the combinations with it are not built (counted in the family's `by_kernel`)."""
        from prism.cost import modeled
        customs = [i for i, op in enumerate(graph.ops) if op.kind == "customized"]
        if len(customs) < 2 or any(d.free_vars() for _, sh in graph.tensors for d in sh) or \
                self.config.concrete:       # the concrete mode checks each program whole
            return None
        found_plain = [unsplit(graph, i) for i in customs]
        plain = [b for b in found_plain if b is not None]
        if len(plain) < len(customs):
            return None
        whole = with_blocks(graph, dict(zip(customs, plain, strict=True)))
        overall, _ = self._kernel_check(self.target, whole, model=False)
        if overall.verdict in ("unknown", "invalid"):
            return None
        if overall.verdict != "equivalent":
            family.by_kernel["unsplit_refuted"] += 1   # so none of its members is
            return []
        choices: list[list[tuple[Any, str, Verdict, Any]]] = []
        for i, block in zip(customs, plain, strict=True):
            reference = kernel_program(graph, i, block)
            proved = []
            for choice in self._kernel_choices(graph, i, equalities):
                if self.should_stop():
                    raise Stop
                verdict, best = self._kernel_check(reference, kernel_program(graph, i, choice))
                if verdict.verdict == "equivalent":
                    proved.append((choice, graph.ops[i].outputs[0], verdict, best))
                    family.by_kernel["kernel_choices_proved"] += 1
                elif verdict.verdict == "unknown":
                    self.note(f"family {family.id}: a map choice of kernel "
                              f"{graph.ops[i].outputs[0]} is undecided against the kernel "
                              "unsplit; the combinations with it were not verified")
                else:
                    family.by_kernel["kernel_choices_refuted"] += 1   # not built into programs
            if not proved:
                return []
            # best first (a kernel's latency and fit read only its sizes), so the first
            # combination is the family's best
            proved.sort(key=lambda p: (p[3] is None, p[3][0] if p[3] else 0.0))
            choices.append(proved)
        total = 1
        for c in choices:
            total *= len(c)
        if total > MAP_LIMIT:
            self.note(f"family {family.id}: {total} combinations of proved kernels, all "
                      f"equivalent; the first {MAP_LIMIT} (the best first) are listed")
        found = []
        for combo in itertools.islice(itertools.product(*choices), MAP_LIMIT):
            if self.should_stop():
                raise Stop
            member = with_blocks(graph, {i: c[0] for i, c in zip(customs, combo, strict=True)})
            verdict = Verdict("equivalent", "e-graph, kernel by kernel",
                              overall.seconds + sum(c[2].seconds for c in combo),
                              steps=overall.steps, report=overall.report,
                              sizes="symbolic" if all(c[2].sizes == "symbolic" for c in combo)
                              else "concrete",
                              parts=tuple((c[1], c[2]) for c in combo))
            best = None
            if all(c[3] is not None for c in combo):
                env = {k: v for c in combo for k, v in c[3][1].items()}
                with contextlib.suppress(PrismError):
                    best = (modeled(substitute_graph(member, env),
                                    self.config.device).latency_us, env)
            found.append(self.check(member, family.id, verdict=verdict, best=(best,)))
        return found

    def _kernel_choices(self, graph: KernelGraph, index: int, equalities: Any
                        ) -> list[BlockGraph]:
        """`maps.kernel_members` of one kernel, once per search for each kernel (the same
        first kernel ends many families)."""
        block = graph.ops[index].block
        assert block is not None
        bits = block_bits(block)
        mine = [e for e in equalities if free_bits(e) & bits]
        key = json.dumps([graph_to_json(replace(kernel_program(graph, index), name="")),
                          [[str(e.a), str(e.b)] for e in mine]], sort_keys=True)
        hit = self.kernel_choice_lists.get(key)
        if hit is None:
            hit = self.kernel_choice_lists[key] = list(kernel_members(graph, index, mine,
                                                                      MAP_LIMIT))
        return hit

    def _kernel_check(self, reference: KernelGraph, program: KernelGraph, model: bool = True
                      ) -> tuple[Verdict, tuple[float, dict[str, int]] | None]:
        """A program's verdict against its reference (a kernel against the kernel unsplit, or
        a family's unsplit program against the target: families that differ only in their
        number of grid dims share it), and its best assignment when `model` and equivalent;
        once per search."""
        from prism.search.audit import best_assignment
        key = json.dumps([graph_to_json(replace(reference, name="")),
                          graph_to_json(replace(program, name=""))], sort_keys=True)
        hit = self.kernel_checks.get(key)
        if hit is None:
            lim = self.config.verify_limits
            verdict = verify(reference, program, Limits(lim.iterations, lim.nodes),
                             refute_first=True, proofs=self.proofs, trials=self.trials)
            best = best_assignment(program, self.config.device) \
                if model and verdict.verdict == "equivalent" else None
            hit = self.kernel_checks[key] = (verdict, best)
        return hit

    def check(self, member: KernelGraph, family: str, refute_first: bool = True, *,
              verdict: Verdict | None = None,
              best: tuple[tuple[float, dict[str, int]] | None] | None = None,
              cid: str | None = None) -> Candidate:
        """Verify a member (or take the `verdict` already shown for it, and its `best`
        assignment as a 1-tuple) and record it as a candidate, named `cid` (a checkpoint's
        candidate keeps its name) or the next number."""
        cid = cid or f"{self.cid_prefix}{self.cid_base + len(self.result.candidates) + 1}"
        key = json.dumps(graph_to_json(replace(member, name="")), sort_keys=True) \
            if self.split else ""
        member = replace(member, name=f"{self.result.target}.{cid}")
        seen = self.verdicts.get(key) if self.split == "absorb" else None
        if seen is not None:
            verdict = seen.verdict
        elif verdict is None:
            verdict = self.verdict_of(member, refute_first)
        cand = Candidate(cid, family, member, verdict)
        if self.split == "absorb":
            self._as_walked(cand)
            verdict = cand.verdict
        elif verdict.terms and not verdict.copied:      # a refutation a later one may copy
            self.trials.setdefault(("refuted", verdict.terms), verdict)
        self.result.candidates.append(cand)
        if self.recording is not None:
            self.recording.candidate_at.append(len(self.recording.records))
        if self.split == "collect":
            self.verdicts[key] = cand
            self.graph_of[cid] = key
        elif self.split == "absorb":
            self.final_ids[key] = cid
        if verdict.verdict == "equivalent":
            if seen is not None:
                cand.modeled_us, cand.assignment = seen.modeled_us, seen.assignment
                cand.descend = seen.descend
                if cand.modeled_us is not None and (self.ctx.incumbent_us is None or
                                                    cand.modeled_us < self.ctx.incumbent_us):
                    self.ctx.incumbent_us, self.ctx.incumbent_id = cand.modeled_us, cand.id
            else:
                self._model(cand, *(best or ()))
            self.tracer.emit(CandidateVerified(cid, family, verdict.to_json(), verdict.method,
                                               graph_to_json(member)))
        elif verdict.verdict in ("not_equivalent", "invalid"):
            self.tracer.emit(CandidateRejected(cid, family, verdict.counterexample or
                                               {"reason": verdict.reason}, verdict.method,
                                               graph_to_json(member)))
        else:
            self.tracer.emit(CandidateUndecided(cid, family, verdict.reason, verdict.method))
        return cand

    def _as_walked(self, cand: Candidate) -> bool:
        """The walk over the cuts: a quick trial's refutation as a single depth-first search
        gives it, which copies the first refutation of the same terms in its order. A
        candidate verified elsewhere (the first pass, a worker: their own orders) takes the
        walk's copy; one the walk meets first keeps its own trial, run here if its process
        copied it from a candidate later in the walk. Whether it changed."""
        verdict = cand.verdict
        if not verdict.terms:
            return False
        first = self.trials.get(("refuted", verdict.terms))
        if first is None:
            if verdict.copied:
                verdict = before_proof(self.target, cand.graph, {}, trials=self.trials) \
                    or verdict
            else:
                self.trials[("refuted", verdict.terms)] = verdict
        elif first is not verdict:
            copy = copied_from(first, verdict.seconds)
            if not verdict.copied or (verdict.reason, verdict.counterexample) != \
                    (copy.reason, copy.counterexample):
                verdict = copy
        changed = verdict is not cand.verdict
        cand.verdict = verdict
        return changed

    def verdict_of(self, member: KernelGraph, refute_first: bool = True) -> Verdict:
        """A member's verdict against the target. Counts only (iterations, nodes): a verdict
        never depends on how busy the machine is."""
        lim = self.config.verify_limits
        if self.config.concrete & {"grid", "loop"} and not member.free_vars():
            return mirage_check(self.target, member)   # the concrete mode: Mirage's
        return verify(self.target, member, Limits(lim.iterations, lim.nodes),
                      refute_first=refute_first, proofs=self.proofs, trials=self.trials)

    def _model(self, cand: Candidate, *given: tuple[float, dict[str, int]] | None) -> None:
        """The candidate's modeled latency at its best assignment that fits the device (sizes
        over powers of two, the audit's enumeration, evaluated on the concrete tiles): the
        incumbent of branch and bound. Not z3's model, which is any fitting assignment and
        may differ from call to call; the best enumerated one is a function of the graph."""
        from prism.search.audit import best_assignment
        best = given[0] if given else best_assignment(cand.graph, self.config.device)
        if best is None:
            return
        cand.modeled_us, cand.assignment = best
        if self.ctx.incumbent_us is None or best[0] < self.ctx.incumbent_us:
            self.ctx.incumbent_us, self.ctx.incumbent_id = best[0], cand.id

    # -- running -----------------------------------------------------------------------------

    def run_task(self, task: Task, tracer: Tracer, numbering: Numbering, deadline: float,
                 limit: int | None, cancel: _Flag | None) -> TaskOutcome:
        """Run one task's subtree on this run's target e-graph and rules (`deadline` on
        `tracer.budget`'s clock). The run is reset first: a task carries nothing from another."""
        self.tracer, self.cancel, self.deadline, self.family_limit = tracer, cancel, deadline, limit
        self.result = SearchResult(self.result.target, self.config)
        self.stop_reason = None
        self.screened = None
        self.cid_prefix, self.cid_base = numbering.candidate_prefix, numbering.candidate_base
        gen = self.generator
        gen.id_prefix, gen.count, gen.seen = numbering.family_prefix, numbering.family_base, set()
        self.ctx.incumbent_us, self.ctx.incumbent_id = (
            (task.incumbent[0], numbering.incumbent) if task.incumbent else (None, None))
        provisional = numbering.family_prefix.startswith("@")
        r = self.result
        out = TaskOutcome(task.index, 0, r.pruned, r.set_aside, r.candidates, r.families,
                          r.notes, None, None, provisional, 0.0)
        self.recording = out if provisional else None
        gen.rules = tuple((name, self._bound_recorder if name == "cost_bound" and
                           provisional else rule) for name, rule in self._rules)
        start = time.perf_counter()
        try:
            with contextlib.suppress(Stop):
                gen.block_level(task.kernel, task.block, task.kernel_key, numbering.parent)
        finally:
            self.recording, gen.rules = None, self._rules
        out.generated, out.stop_reason = r.generated, self.stop_reason
        out.seconds = time.perf_counter() - start
        return out

    def cut_deeper(self) -> _Run:
        """A first pass like this one that cuts the tree one block op deeper, on the same
        budget, target e-graph and the proofs, trials and kernel checks already made."""
        deeper = replace(self.config, split_depth=self.config.split_depth + 1)
        run = _Run(self.target, self.result.target, deeper, Tracer(
            keep=False, budget=self.tracer.budget), self.cancel, split="collect", ids=self.ids,
            abstract=self.abstract)
        run.start, run.deadline = self.start, self.deadline
        run.proofs, run.kernel_checks, run.trials = self.proofs, self.kernel_checks, self.trials
        run.kernel_choice_lists = self.kernel_choice_lists
        return run

    def split_pass(self) -> None:
        """`SearchConfig.split_loops`: every proved one-kernel candidate whose loop only sums,
        also with its loop split across blocks, and every one that takes a row max over keys it
        holds whole, also streamed over the keys and split across blocks by log-sum-exp
        (`prism.search.split`), each such program a
        family of its own under the candidate's family, verified and modeled as the search's
        own candidates are. After the depth-first search, so what it found is unchanged; when
        the time budget stopped that search, the move still runs on what it proved, with
        SPLIT_GRACE of the budget more (it is a handful of programs, and it is where a program
        of many keys finds its speed), and the search stays stopped by its budget. Not after
        a cancel or another budget."""
        if not self.config.split_loops or self.stop_reason not in (None, "time budget"):
            return
        stopped = self.stop_reason
        if stopped is not None:
            self.stop_reason = None
            self.deadline = self.tracer.budget.now() + SPLIT_GRACE * self.config.budget_s
            self.note(f"the time budget stopped the depth-first search; the split move ran on "
                      f"the programs it had proved, with up to {SPLIT_GRACE:.0%} of the budget "
                      "more")
        with contextlib.suppress(Stop):
            self._split_programs()
        self.stop_reason = self.stop_reason or stopped

    def _split_programs(self) -> None:
        proved = [c for c in self.result.candidates
                  if c.verdict.verdict == "equivalent" and c.graph.num_kernels == 1]
        # On an executor of other processes the workers compute each program's verdict and
        # assignments ahead (`split_work`, a function of the program); the pass below takes
        # them in order, and computes here what a worker did not (lost, or past its deadline).
        ahead = self.session.split_ahead([c.graph for c in proved], self._wall(self.deadline)) \
            if self.session is not None and not self.session.in_place else None
        seen: set[str] = set()
        for i, cand in enumerate(proved):
            work = ahead.get(i, self.should_stop) if ahead is not None else {}
            if work is None:
                raise Stop
            for move, program in split_moves(cand.graph):
                key = _graph_key(program)
                if key in seen:
                    continue
                seen.add(key)
                if self.should_stop():
                    raise Stop
                piece = work[key] if key in work else self.split_piece(move, program)
                self._take_split(cand, move, program, piece)

    def split_work(self, graph: KernelGraph) -> dict[str, SplitPiece | None]:
        """What the split pass computes for a proved one-kernel program: each of its split
        programs' piece (`split_piece`), by the program's key; as far as the budget allows."""
        out: dict[str, SplitPiece | None] = {}
        for move, program in split_moves(graph):
            key = _graph_key(program)
            if key in out:
                continue
            if self.should_stop():
                break
            out[key] = self.split_piece(move, program)
        return out

    def split_piece(self, move: str, program: KernelGraph) -> SplitPiece | None:
        """A split program's verdict and assignments, a function of the program (and of the
        target and the config). `split_loop` and `stream_softmax`: the verdict, the best
        enumerated assignment when equivalent, and the descent from it. `split_softmax`: the
        member the model picks (the descent from the best enumerated assignment of the
        program), its verdict and its best assignment; None when no assignment fits."""
        from prism.search.audit import best_assignment, descended
        device = self.config.device
        if not move.startswith("split_softmax"):
            verdict = self.verdict_of(program)
            best = best_assignment(program, device) if verdict.verdict == "equivalent" else None
            return SplitPiece(verdict, best, None if best is None else
                              descended(program, device, best))
        start = best_assignment(program, device)
        if start is None:
            return None
        _us, env = descended(program, device, start)
        member = substitute_graph(program, env)
        verdict = self.verdict_of(member)
        return SplitPiece(verdict, best_assignment(member, device)
                          if verdict.verdict == "equivalent" else None, None, env)

    def _take_split(self, cand: Candidate, move: str, program: KernelGraph,
                    piece: SplitPiece | None) -> None:
        """A split program as a family of its own under the candidate's family, and its
        candidate, verified and modeled as the search's own candidates are."""
        from prism.search.audit import descended
        if piece is None:
            return
        if not move.startswith("split_softmax"):
            found = self.check(program, self._split_family(cand, program, SPLIT_WHAT[move]),
                               verdict=piece.verdict, best=(piece.best,))
            found.descend = True    # a checkpoint re-instantiates it the same way
            if found.modeled_us is not None and found.assignment is not None:
                # a split program has more sizes than best_assignment enumerates whole
                start = (found.modeled_us, found.assignment)
                self._model(found, piece.descended if piece.best == start else
                            descended(program, self.config.device, start))
            return
        # The rescaling meets kernel 1's parts only where both kernels' axes have one size
        # (`translate`'s concrete mode): the member the model picks is proved, on its own,
        # and is the candidate (no other member of the family is claimed).
        assert piece.env is not None
        member = substitute_graph(program, piece.env)
        self.check(member, self._split_family(cand, member, SPLIT_WHAT[move]),
                   verdict=piece.verdict, best=(piece.best,))

    def _wall(self, deadline: float) -> float:
        """A deadline on the search's clock as wall-clock time, for a worker."""
        return time.time() + (deadline - self.tracer.budget.now())

    def _split_family(self, cand: Candidate, program: KernelGraph, what: str) -> str:
        """A family of its own for a split program, under the candidate's family."""
        fid = self.generator.new_id()
        self.result.generated += 1
        self.result.families.append(CompleteFamily(fid, program))
        if self.tracer.wants_events:
            self.tracer.emit(FamilyGenerated(
                fid, cand.family, f"{cand.id} {what}",
                graph_to_json(program) if self.config.record_graphs else None))
        return fid

    def _bound_recorder(self, ctx: Context, fam: Family) -> Pruned | None:
        """`cost_bound` on a worker: the same decision, and the family's bound remembered
        (computed even without an incumbent: the walk may have one)."""
        if fam.level not in ("close", "kernel"):
            return None
        bound = family_bound_us(fam, ctx)
        assert self.recording is not None
        self.recording.bounds[fam.id] = bound
        if ctx.incumbent_us is None:
            return None
        return cost_bound_prune(bound, ctx.incumbent_us, ctx.incumbent_id,
                                self.config.device.name, ctx.screen is not None)

    def run(self) -> SearchResult:
        inputs = [Tensor(t, self.target.shape(t), leaf(name))
                  for t, name in zip(self.target.inputs, self.abstract.inputs, strict=True)]
        with self.tracer.stage("search") as summary:
            with contextlib.suppress(Stop):
                self.generator.run(inputs)
            self.split_pass()
            self.result.complete = self.stop_reason is None
            self.result.stop_reason = self.stop_reason or "exhausted"
            self.result.seconds = self.tracer.budget.now() - self.start
            summary.update(self.result.summary())
        self.tracer.emit(SearchFinished(self.result.summary()))
        return self.result


def search(target: KernelGraph, config: SearchConfig | None = None, *,
           tracer: Tracer | None = None, cancel: threading.Event | None = None,
           label: str | None = None, executor: Executor | str = "local",
           ids: tuple[str, str] = ("f", "c")) -> SearchResult:
    """Search for programs equivalent to `target`; see the module docstring. Its families and
    candidates are named `f1, f2, ...` and `c1, c2, ...`, or with the prefixes `ids` (a second
    search on the same trace, such as the pipeline's partial-fusion search, keeps its own).

    The tree is cut where a block graph has `config.split_depth` block ops; the part above the
    cuts is generated here, each subtree below one is a task for `executor` (`local`,
    `processes` or `ray`, or an `Executor(name, workers, address)`; `prism.search.executors`),
    and the outcomes are merged in the tree's order, so the result is the same whatever the
    executor and its number of workers."""
    from prism.search.executors import Executor, open_session
    where = executor if isinstance(executor, Executor) else Executor(executor)
    config = config or SearchConfig()
    problems = expressible(target, config)
    if problems:
        raise UnsupportedTargetError(f"{label or target.name}: {'; '.join(problems)}; "
                                     f"{_vocabulary_fix(target, config)}")
    tracer = tracer or Tracer(keep=False)
    label = label or target.name or "target"
    if config.concrete and where.name == "local":
        return _one_pass(target, label, config, tracer, cancel)
    # The first pass generates the part above the cuts alone, silently, to hand out the tasks
    # at once; the walk then generates it again (its verdicts remembered), in order, taking
    # each task's outcome at its cut, so that every decision above the cuts (branch and
    # bound's, the family budget's) sees what a single depth-first search would have seen.
    first = _Run(target, label, config, Tracer(keep=False, budget=tracer.budget), cancel,
                 split="collect", ids=ids)
    cap = tracer.family_cap     # every listener samples: each worker task keeps its share
    session = open_session(where, (target, label, config, tracer.wants_events,
                                   None if cap is None else max(1, cap // TASK_SHARE)),
                           first.abstract, cancel)
    try:
        with tracer.stage("search") as summary:
            session.start(tracer, first.deadline)
            inputs = [Tensor(t, target.shape(t), leaf(name)) for t, name in
                      zip(target.inputs, first.abstract.inputs, strict=True)]
            seed = _seed(target, label, config, cancel, first)

            def collect(run: _Run) -> _Run:
                if seed is not None:
                    run.ctx.incumbent_us, run.ctx.incumbent_id = seed.modeled_us, SEED_ID
                with contextlib.suppress(Stop):
                    run.generator.run(inputs)
                return run

            collect(first)
            # Too few tasks for the workers (attention cuts into 10 at 2 block ops, and 16
            # cores then idle): cut deeper. Where the tree is cut changes what runs where, not
            # the result (`tests/search/test_executors.py` compares cuts with one walk).
            want = TASKS_PER_WORKER * (session.workers if session.workers > 0 else
                                       os.cpu_count() or 1)
            deepest = min(config.split_depth + MORE_CUT_DEPTH, config.max_block_ops - 1)
            while not session.in_place and len(first.tasks) < want and \
                    first.stop_reason is None and first.config.split_depth < deepest:
                first = collect(first.cut_deeper())
            session.submit(list(first.tasks.values()))
            walk = _Run(target, label, first.config, tracer, cancel, abstract=first.abstract,
                        split="absorb", session=session, first=first, ids=ids)
            walk.result.config = config     # the cut is how it ran, not what it searched
            walk.start, walk.deadline = first.start, first.deadline
            if seed is not None:
                walk.ctx.incumbent_us, walk.ctx.incumbent_id = seed.modeled_us, SEED_ID
                walk.result.seed = seed
            with contextlib.suppress(Stop):
                walk.generator.run(inputs)
            walk.split_pass()
            result = walk.result
            result.complete = walk.stop_reason is None
            result.stop_reason = walk.stop_reason or "exhausted"
            for text in session.notes:
                walk.note(text)
            result.executor = {**session.describe(), "tasks": len(first.tasks),
                               "cut_at_block_ops": first.config.split_depth}
            result.seconds = tracer.budget.now() - first.start
            summary.update(result.summary())
    finally:
        session.close()
    tracer.emit(SearchFinished(result.summary()))
    return result


def _one_pass(target: KernelGraph, label: str, config: SearchConfig, tracer: Tracer,
              cancel: threading.Event | None) -> SearchResult:
    """The search as one depth-first pass, without cutting it into tasks. The concrete mode
    runs so in this process: its part above the cuts is most of its tree (a family per
    concrete choice at every open), which the first pass would generate twice. The result is
    the walk's (one depth-first search's either way)."""
    run = _Run(target, label, config, tracer, cancel)
    seed = _seed(target, label, config, cancel, run)
    if seed is not None:
        run.ctx.incumbent_us, run.ctx.incumbent_id = seed.modeled_us, SEED_ID
        run.result.seed = seed
    return run.run()


SEED_ID = "s1"
# tasks a search hands each worker at least, when cutting up to MORE_CUT_DEPTH block ops deeper
# than `SearchConfig.split_depth` makes them
TASKS_PER_WORKER = 16
MORE_CUT_DEPTH = 2
# The seed's budgets: counts, so the seed is the same on any machine, and the search's result
# with it: families generated, and candidates verified.
SEED_FAMILIES, SEED_CANDIDATES = 20_000, 64


def _seed(target: KernelGraph, label: str, config: SearchConfig, cancel: _Flag | None,
          first: _Run) -> Candidate | None:
    """Branch and bound's first incumbent, for a search that may build several custom kernels: the
    best member of the first complete family with an equivalent member in the search of one
    custom kernel (no kernel ops), within `SEED_FAMILIES` families and `SEED_CANDIDATES`
    candidates. A one-kernel program found early makes `cost_bound` prune every first kernel
    that is not the whole program (it costs a launch more: `family_bound_us`), instead of the
    search building the product of two kernels' trees before it reaches the one-kernel
    programs (depth-first, it closes a first kernel early and descends). The seed is a verified
    program; it is named `s1` in the prunes it makes and in the result's `seed`, and the
    search meets it again in its one-kernel part under its own candidate id. None where the
    search builds one custom kernel at most (pre-defined kernel ops after a custom kernel
    find their incumbent in it, as before), or nothing was found."""
    if config.max_custom_kernels < 2:
        return None
    one = replace(config, max_custom_kernels=1, kernel_ops=(), max_families=SEED_FAMILIES)
    run = _Run(target, label, one, Tracer(keep=False, budget=first.tracer.budget), cancel,
               abstract=first.abstract)
    run.start, run.deadline = first.start, first.deadline
    run.candidate_limit, run.stop_at_first_best = SEED_CANDIDATES, True
    inputs = [Tensor(t, target.shape(t), leaf(name))
              for t, name in zip(target.inputs, first.abstract.inputs, strict=True)]
    with contextlib.suppress(Stop):
        run.generator.run(inputs)
    best = run.result.best
    if best is None or best.modeled_us is None:
        return None
    return replace(best, id=SEED_ID, graph=replace(best.graph, name=f"{label}.{SEED_ID}"))


_TASK_ID = re.compile(r"@(?:f\d+|c\d+|parent|inc)(?!\w)")


def _renamed_json(value: Any, name: Callable[[str], str]) -> Any:
    """`value` with every provisional id in its strings renamed; a part with none is returned
    as it is, not copied (the coordinator renames every event of every task: on its serial
    path, so the walk over evidence copies only what changes)."""
    if isinstance(value, str):
        return name(value) if "@" in value else value
    if isinstance(value, dict):
        changed: dict[Any, Any] | None = None
        for k, v in value.items():
            new = _renamed_json(v, name)
            if new is not v:
                if changed is None:
                    changed = dict(value)
                changed[k] = new
        return value if changed is None else changed
    if isinstance(value, list | tuple):
        items = [_renamed_json(v, name) for v in value]
        if all(new is old for new, old in zip(items, value, strict=True)):
            return value
        return type(value)(items)
    return value


_EVENT_FIELDS: dict[type, tuple[str, ...]] = {}


def _renamed_event(event: Any, name: Callable[[str], str]) -> Any:
    """A copy of `event` with every id in it renamed, not yet emitted (seq -1)."""
    kind = type(event)
    names = _EVENT_FIELDS.get(kind)
    if names is None:
        names = _EVENT_FIELDS[kind] = tuple(f.name for f in fields(event)
                                            if f.name not in ("seq", "time"))
    state = dict(event.__dict__)          # a frozen dataclass: copied without __init__
    for f in names:
        state[f] = _renamed_json(state[f], name)
    state["seq"] = -1
    out = object.__new__(kind)
    out.__dict__.update(state)
    return out


def _renamed_candidate(c: Candidate, name: Callable[[str], str]) -> Candidate:
    return Candidate(name(c.id), name(c.family), replace(c.graph, name=name(c.graph.name)),
                     c.verdict, c.modeled_us, c.assignment, c.descend)


def _bounded(out: TaskOutcome, incumbent_us: float | None, incumbent_id: str | None,
             device: str, screened: bool = False) -> TaskOutcome:
    """A worker's outcome as one depth-first search would have made it: branch and bound
    replayed with the walk's incumbent (and each better candidate as the task found it). The
    task started from a worse incumbent, so it pruned a subset of what that search prunes:
    the families whose bound now exceeds the incumbent are pruned here, what lies below them
    is dropped (its families, candidates and events), and the ids are closed up."""
    if not out.bounds:
        return out
    inc, inc_id = incumbent_us, incumbent_id
    bounded: dict[str, tuple[float, float, str | None]] = {}   # family → bound, incumbent
    gone: set[str] = set()           # families below a bounded one
    gone_at: set[int] = set()        # their places (a counted-only family has no id)
    k = 0

    def seen_candidates(upto: int) -> None:
        nonlocal k, inc, inc_id
        while k < len(out.candidates) and out.candidate_at[k] <= upto:
            c = out.candidates[k]
            k += 1
            if c.family in gone or c.family in bounded or c.verdict.verdict != "equivalent":
                continue
            if c.modeled_us is not None and (inc is None or c.modeled_us < inc):
                inc, inc_id = c.modeled_us, c.id
    for j, (fid, parent, _rule, _claim, _n) in enumerate(out.records):
        seen_candidates(j)
        if parent in gone or parent in bounded:
            gone_at.add(j)
            if fid is not None:
                gone.add(fid)
            continue
        bound = out.bounds.get(fid) if fid is not None else None
        if bound is not None and inc is not None and bound > inc:
            bounded[fid] = (bound, inc, inc_id)
    seen_candidates(len(out.records))
    if not bounded:          # the walk's incumbent bounds nothing more than the task's did
        return out
    families: dict[int, int] = {}      # provisional number → closed-up number (named ones)
    pruned: Counter[str] = Counter()
    set_aside: Counter[str] = Counter()
    provisional = closed_up = 0
    for j, (fid, _parent, rule, claim, n) in enumerate(out.records):
        provisional += n
        if j in gone_at:
            continue
        if fid is not None:
            families[provisional] = closed_up + 1
        closed_up += n
        if fid in bounded:
            rule, claim = "cost_bound", "not_better"
        if rule is not None:
            (set_aside if claim == "unproven" else pruned)[rule] += n
    kept = [c for c in out.candidates if c.family not in gone and c.family not in bounded]
    candidates = {int(c.id[2:]): i + 1 for i, c in enumerate(kept)}

    def closed(m: re.Match[str]) -> str:
        token = m.group(0)
        if token.startswith("@f"):
            return f"@f{families.get(int(token[2:]), 0)}"
        if token.startswith("@c"):
            return f"@c{candidates.get(int(token[2:]), 0)}"
        return token

    def name(text: str) -> str:
        return _TASK_ID.sub(closed, text)
    dropped = gone | set(bounded)
    events = None
    if out.events is not None:
        events = []
        for e in out.events:
            eid = getattr(e, "id", None)
            if (isinstance(e, FamilyGenerated | FamilyPruned) and eid in gone) or \
                    (isinstance(e, FamilyPruned) and eid in bounded) or \
                    getattr(e, "family", None) in dropped:
                continue
            events.append(_renamed_event(e, name))
            if isinstance(e, FamilyGenerated) and eid in bounded:
                bound, at, by = bounded[eid]
                why = cost_bound_prune(bound, at, by, device, screened)
                assert why is not None
                events.append(_renamed_event(FamilyPruned(eid, e.parent, why.rule, why.reason,
                                                          why.evidence), name))
    return replace(out, generated=closed_up, pruned=pruned, set_aside=set_aside,
                   candidates=[_renamed_candidate(c, name) for c in kept],
                   families=[CompleteFamily(name(f.id), replace(f.graph,
                                                                name=name(f.graph.name)),
                                            f.by_kernel)
                             for f in out.families if f.id not in dropped],
                   notes=[name(t) for t in out.notes
                          if not set(_TASK_ID.findall(t)) & dropped],
                   events=events, records=[], candidate_at=[], bounds={})


def _numbered(out: TaskOutcome, n: Numbering) -> TaskOutcome:
    """A worker's outcome with its provisional ids made final."""
    def final(m: re.Match[str]) -> str:
        token = m.group(0)
        if token == "@parent":
            return n.parent
        if token == "@inc":
            return n.incumbent
        if token.startswith("@f"):
            return f"{n.family_prefix}{n.family_base + int(token[2:])}"
        return f"{n.candidate_prefix}{n.candidate_base + int(token[2:])}"

    known: dict[str, str] = {}          # parents and incumbents recur: each renamed once

    def name(text: str) -> str:
        got = known.get(text)
        if got is None:
            got = known[text] = _TASK_ID.sub(final, text)
        return got
    return replace(out, provisional=False,
                   candidates=[_renamed_candidate(c, name) for c in out.candidates],
                   families=[CompleteFamily(name(f.id), replace(f.graph,
                                                                name=name(f.graph.name)),
                                            f.by_kernel)
                             for f in out.families],
                   notes=[name(t) for t in out.notes],
                   events=None if out.events is None else
                   [_renamed_event(e, name) for e in out.events])
