"""Formal equivalence: is a candidate graph equal to the target, for every grid size and loop
range? The answer is a value — `Proved(steps)`, `Refuted(counterexample)`, `Unknown(reason)` or
`Invalid(reason)` — never a print.

1. The candidate must be well-formed (`spec`; a symbolic candidate gets every check that needs
   no value of its grid sizes, loop ranges and map bits) and take the target's inputs and give
   its outputs (same counts and shapes), else `Invalid`.
2. Both become tensor terms (`translate`), the candidate's inputs renamed to the target's by
   position; grid and loop sizes stay opaque axis names, so one proof covers every size. A
   candidate translation refuses (a map row with two 1s, symbolic maps) is `Invalid`.
3. An e-graph holding both, with the tensor analysis, is saturated with the axiom table until
   each output pair shares an e-class (the goal) or a limit is reached. Each proof is the flat
   explanation from candidate to target, replayed by the independent checker before it is
   returned.
   Sizes are tried symbolic first (the proof then holds for every grid size and loop range);
   a concrete candidate that fails so is tried with its sizes known.
4. Without a proof, random testing decides between `Refuted` (a counterexample) and `Unknown`
   (the limits were reached, or the axioms could not show it; random tests found no difference,
   or could not run: no assignment of the candidate's sizes it tried is well-formed, or could
   not compare: nan on both sides, which is neither agreement nor a difference). An `Unknown`
   after a saturated e-graph names its gap: the pair of subterms, one on each side, where the
   two terms come closest without meeting (`EGraph.nearest_gap`), so a user sees which identity
   is missing.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass, field, replace
from typing import Any

from prism.errors import PrismError, VerifyError
from prism.expr import EGraph, RunReport, Step, check_explanation
from prism.expr.axioms import AXIOMS_BY_NAME, rules
from prism.expr.rules import Rule
from prism.expr.tensor_terms import TensorAnalysis
from prism.expr.terms import Term
from prism.ir.graph import KernelGraph
from prism.ir.spec import problems
from prism.verify.randomized import random_test
from prism.verify.translate import Translation, translate


@dataclass(frozen=True)
class Limits:
    iterations: int = 30
    nodes: int = 20_000
    seconds: float | None = None      # a wall-clock cap for interactive use (`prism verify
                                      # --time-limit`); the search never sets one, so its
                                      # verdicts do not depend on machine load


@dataclass(frozen=True)
class Verdict:
    verdict: str                      # equivalent | not_equivalent | unknown | invalid
    method: str
    seconds: float
    steps: tuple[tuple[Step, ...], ...] = ()       # one proof per output
    counterexample: dict[str, Any] | None = None
    reason: str = ""
    report: str = ""
    sizes: str = ""        # a proof's grid and loop sizes: "symbolic" (every size) or "concrete"
    egraph_view: dict[str, Any] | None = None   # the e-graph around the first output's class
    # A program of several custom kernels proved kernel by kernel (`prism.search.driver`):
    # `steps` prove the target equal to its unsplit program, and each part proves one kernel
    # equal to that kernel unsplit, as (the kernel tensor it stores, its verdict).
    parts: tuple[tuple[str, Verdict], ...] = ()
    # Without a proof after a saturated e-graph: where the candidate's and the target's terms
    # come closest (`EGraph.nearest_gap`), the two subterms an identity would have to join.
    gap: dict[str, Any] | None = None
    # A quick trial's refutation: the digest of the terms it is kept by (`_terms_key`), and
    # whether it was copied from an earlier candidate with those terms (`copied_from`). Not
    # part of the verdict: the search puts copies in its walk's order by them.
    terms: str = field(default="", compare=False)
    copied: bool = field(default=False, compare=False)

    @property
    def proof_steps(self) -> int:
        return sum(len(s) for s in self.steps) + sum(v.proof_steps for _, v in self.parts)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"verdict": self.verdict, "method": self.method,
                               "proof_steps": self.proof_steps, "seconds": round(self.seconds, 4)}
        if self.steps:
            out["sizes"] = self.sizes
            out["proof"] = [[step_json(s) for s in proof] for proof in self.steps]
        if self.counterexample is not None:
            out["counterexample"] = self.counterexample
        if self.reason:
            out["reason"] = self.reason
        if self.report:
            out["egraph"] = self.report
        if self.egraph_view:
            out["egraph_view"] = self.egraph_view
        if self.parts:
            out["by_kernel"] = [{"kernel": name, **v.to_json()} for name, v in self.parts]
        if self.gap:
            out["gap"] = self.gap
        return out


def step_json(s: Step) -> dict[str, Any]:
    ax = AXIOMS_BY_NAME.get(s.rule)
    return {"axiom": s.rule, "direction": s.direction, "path": list(s.path),
            "rewrote": str(s.before.at(s.path)), "into": str(s.after.at(s.path)),
            "before": str(s.before), "after": str(s.after),
            "statement": ax.statement if ax else "", "evidence": ax.evidence if ax else ""}


@dataclass
class _Clock:
    start: float = field(default_factory=time.perf_counter)

    def __call__(self) -> float:
        return time.perf_counter() - self.start


def verify(target: KernelGraph, candidate: KernelGraph, limits: Limits = Limits(), *,
           refute_first: bool = False, table: list[Rule] | None = None,
           proofs: dict[Any, Any] | None = None,
           trials: MutableMapping[Any, Any] | None = None) -> Verdict:
    """Prove with grid and loop sizes as opaque symbols, so the proof holds for every size; a
    candidate whose sizes are constants and which that cannot prove is tried once more with its
    sizes known (a kernel may rely on them: a split that meets the previous kernel's
    concatenation), and its proof then says `sizes: concrete`.

    `refute_first` (the search, which sees many wrong candidates): one float64 random trial at
    one small assignment first; a difference there is a counterexample, and no e-graph runs.
    `table`: the rules to prove with (default: the axiom table; axiom discovery passes the table
    with a candidate axiom added, `prism.expr.discover`).

    `proofs`: a memo the caller keeps across calls (the search keeps one per search). Many
    candidates translate to the same terms (they differ in what the terms abstract away); a
    proof attempt is a function of the terms, the sizes' analysis, the rules and the count
    limits, so an attempt on terms seen before returns what the first attempt found (the
    checked proof, or its failure) instead of saturating again. With `refute_first` the memo
    also keeps the quick trial's outcome by the candidate's terms: two candidates whose terms
    are equal compute one function (the translation is what every proof rests on), so a
    candidate whose terms an earlier one refuted is refuted with that candidate's
    counterexample, which its reason says, and one whose terms passed the trial goes straight
    to the proof. `trials`: where the refutations are kept instead (default: `proofs`)."""
    clock = _Clock()
    early = before_proof(target, candidate, proofs if limits.seconds is None else None,
                         refute_first=refute_first, clock=clock, trials=trials)
    if early is not None:
        return early
    notes: list[str] = []
    gaps: list[dict[str, Any]] = []
    table = rules() if table is None else table
    memo = proofs if limits.seconds is None else None    # a wall-clock limit: never reused
    verdict = _prove(target, candidate, limits, clock, notes, gaps, table, concrete=False,
                     memo=memo)
    if verdict is None and candidate.custom_ops and not candidate.free_vars():
        verdict = _prove(target, candidate, limits, clock, notes, gaps, table, concrete=True,
                         memo=memo)
        if verdict is None and _loop_meets_grid(candidate):
            verdict = _prove(target, candidate, limits, clock, notes, gaps, table, concrete=True,
                             loop_first=True, memo=memo)
    return verdict if verdict is not None else \
        _fallback(target, candidate, clock, notes, gaps[-1] if gaps else None)


def before_proof(target: KernelGraph, candidate: KernelGraph,
                 proofs: dict[Any, Any] | None = None, *, refute_first: bool = True,
                 clock: Callable[[], float] | None = None,
                 trials: MutableMapping[Any, Any] | None = None) -> Verdict | None:
    """What `verify` decides before it tries a proof: "invalid" for a candidate the spec check
    rejects, and with `refute_first` "not_equivalent" for one the quick trial refutes (kept in
    `trials`, default `proofs`, by the digest of the candidate's terms, as `verify` keeps it;
    a pass is kept in `proofs`); None when a proof must decide.
    The search's branch and bound asks this first, to bound a family by the members that may
    be equivalent (`SearchConfig.member_bound`); a later `verify` of a member that passed the
    trial goes straight to the proof."""
    clock = clock or _Clock()
    invalid = invalid_reason(target, candidate)
    if invalid:
        return Verdict("invalid", "spec", clock(), reason=invalid)
    if not refute_first:
        return None
    kept = proofs if trials is None else trials
    key = _terms_key(target, candidate) if proofs is not None else None
    digest = "" if key is None else hashlib.blake2b(repr(key).encode(),
                                                     digest_size=16).hexdigest()
    if kept is not None and digest:
        first: Verdict | None = kept.get(("refuted", digest))
        if first is not None:
            return copied_from(first, clock())
    seen = proofs.get(key) if proofs is not None and key is not None else None
    env = _small_assignment(candidate) if seen is None else None
    if env is not None:
        quick = random_test(target, candidate, assignments=[env], trials=1)
        if quick.found_difference:
            cex = quick.counterexample.to_json() if quick.counterexample else None
            refuted = Verdict("not_equivalent", quick.method, clock(), counterexample=cex,
                              reason=f"random testing at {env or 'its sizes'} found a "
                                     "difference", terms=digest)
            if kept is not None and digest:
                kept[("refuted", digest)] = refuted
            return refuted
    if proofs is not None and key is not None:
        proofs[key] = ("passed",)
    return None


def copied_from(first: Verdict, seconds: float) -> Verdict:
    """A quick trial's refutation `first`, for a later candidate with the same terms."""
    return replace(first, seconds=seconds, copied=True, reason=(
        "its terms are those of an earlier candidate of this search (the same program up to "
        f"rounding), where {first.reason}; the counterexample is that candidate's"))


def _terms_key(target: KernelGraph, candidate: KernelGraph) -> tuple[Any, ...] | None:
    """What decides the function a candidate computes, for `verify`'s memo: the target's and
    the candidate's terms (sizes symbolic) and the candidate's axis sizes; None where the
    candidate cannot be translated (its verdict is then found without the memo)."""
    try:
        tgt = translate(target)
        cand = translate(candidate, input_names=tgt.inputs)
    except PrismError:
        return None
    return ("quick", tuple(tgt.terms), tuple(cand.terms),
            tuple(sorted((n, str(d)) for n, d in cand.sizes.items())))


def _loop_meets_grid(candidate: KernelGraph) -> bool:
    """Some kernel after the first has a loop range equal to one of its grid sizes: named by
    size, the two axes take the name the kernel before it used in the order they are named, so
    a concatenation it walks meets its grid axis rather than its loop (`translate`'s
    `loop_first` names the loop first)."""
    blocks = [b for _, b in candidate.iter_blocks()]
    return any(not _one(b.forloop_range) and b.forloop_range in b.grid for b in blocks[1:])


def _one(d: Any) -> bool:
    return bool(d.is_const and d.value == 1)


def _prove(target: KernelGraph, candidate: KernelGraph, limits: Limits, clock: _Clock,
           notes: list[str], gaps: list[dict[str, Any]], table: list[Rule], concrete: bool,
           loop_first: bool = False, memo: dict[Any, Any] | None = None) -> Verdict | None:
    """A checked proof, or None with the reason appended to `notes` (and, when the e-graph
    saturated, where the terms came closest appended to `gaps`); through `memo` (see
    `verify`), once per distinct attempt."""
    if memo is None:
        return _attempt(target, candidate, limits, clock, notes, gaps, table, concrete,
                        loop_first)
    tgt = translate(target)
    try:
        cand = translate(candidate, input_names=tgt.inputs, concrete_sizes=concrete,
                         loop_first=loop_first)
    except PrismError:
        return _attempt(target, candidate, limits, clock, notes, gaps, table, concrete,
                        loop_first)
    analysis = proof_analysis(target, tgt, cand, concrete)
    key = (tuple(tgt.terms), tuple(cand.terms), concrete, loop_first,
           tuple(sorted((n, str(d)) for n, d in analysis.axis_sizes.items())),
           tuple(sorted((n, tuple(str(d) for d in shape))
                        for n, shape in analysis.input_shapes.items())),
           limits, tuple(id(rule) for rule in table), tuple(table))
    hit = memo.get(key)
    if hit is None:
        mine_notes: list[str] = []
        mine_gaps: list[dict[str, Any]] = []
        verdict = _attempt(target, candidate, limits, clock, mine_notes, mine_gaps, table,
                           concrete, loop_first)
        hit = memo[key] = (verdict, tuple(mine_notes), tuple(mine_gaps))
    verdict, found_notes, found_gaps = hit
    notes.extend(found_notes)
    gaps.extend(found_gaps)
    return None if verdict is None else replace(verdict, seconds=clock())


def _attempt(target: KernelGraph, candidate: KernelGraph, limits: Limits, clock: _Clock,
             notes: list[str], gaps: list[dict[str, Any]], table: list[Rule], concrete: bool,
             loop_first: bool) -> Verdict | None:
    """One proof attempt (`_prove` without the memo)."""
    tgt = translate(target)
    try:
        cand = translate(candidate, input_names=tgt.inputs, concrete_sizes=concrete,
                         loop_first=loop_first)
    except PrismError as e:  # a graph the terms cannot express is no program to prove
        return Verdict("invalid", "translate", clock(),
                       reason=f"the candidate cannot be translated: {e}")
    analysis = proof_analysis(target, tgt, cand, concrete)
    egraph = EGraph(analysis)
    pairs = [(egraph.add(c), egraph.add(t)) for c, t in zip(cand.terms, tgt.terms, strict=True)]
    report: RunReport | None = None
    try:
        report = egraph.run(table, iter_limit=limits.iterations, node_limit=limits.nodes,
                            time_limit=limits.seconds,
                            goal=lambda e: all(e.find(a) == e.find(b) for a, b in pairs))
    except PrismError as e:  # an analysis conflict: record it, never claim a proof
        notes.append(f"the e-graph stopped: {e}")
        return None
    if all(egraph.find(a) == egraph.find(b) for a, b in pairs):
        proofs = []
        for c, t in zip(cand.terms, tgt.terms, strict=True):
            steps = egraph.explain(c, t)
            check_explanation(steps, table, c, t, analysis)
            proofs.append(tuple(steps))
        return Verdict("equivalent", "e-graph", clock(), steps=tuple(proofs), report=str(report),
                       sizes="concrete" if concrete else "symbolic",
                       egraph_view=egraph.neighbourhood(pairs[0][1]))
    stop = {"saturated": "the axioms cannot show it (saturated)"}.get(
        report.stop_reason, f"limit reached ({report.stop_reason})")
    order = ", the loop's axis named first" if loop_first else ""
    notes.append(f"{stop} with {'concrete' if concrete else 'symbolic'} sizes{order}: {report}")
    if report.stop_reason == "saturated":
        k, (left, right) = next((k, p) for k, p in enumerate(pairs)
                                if egraph.find(p[0]) != egraph.find(p[1]))
        gap = egraph.nearest_gap(left, right)
        if gap is not None:
            gaps.append({"output": k, "sizes": "concrete" if concrete else "symbolic",
                         "candidate": str(egraph.extract(gap[0])),
                         "target": str(egraph.extract(gap[1]))})
    return None


def proof_analysis(target: KernelGraph, tgt: Translation, cand: Translation, concrete: bool
                   ) -> TensorAnalysis:
    """The tensor analysis a proof runs (and is replayed) under. Concrete: every axis has its
    size. Symbolic: an axis whose size is a constant is opaque, the variable of its own name, so
    the proof holds for every size; an axis whose size is an expression in the graph's size
    variables keeps that expression (a kernel 2 chunk axis of (64·s)/64 = s positions has as many
    as the kernel 1 grid axis of s that wrote the chunks), so the proof holds for every value of
    those variables, and a condition relating the two axes' sizes sees that they are equal."""
    sizes = {**tgt.sizes, **cand.sizes}
    if not concrete:
        sizes = {name: size for name, size in sizes.items() if not size.is_const}
    return TensorAnalysis(dict(zip(tgt.inputs, (target.shape(t) for t in target.inputs),
                                   strict=True)), sizes)


def _fallback(target: KernelGraph, candidate: KernelGraph, clock: _Clock, notes: list[str],
              gap: dict[str, Any] | None = None) -> Verdict:
    """No proof: random testing decides between a counterexample and `unknown`. An `unknown`
    carries the gap of the last saturated e-graph, and its reason names it."""
    why = "; ".join(notes)
    # said of an `unknown` only: a refuted candidate's terms differ, no identity is missing
    missing = "" if gap is None else (
        f"; the terms came closest at output {gap['output']}, where the candidate's "
        f"{_short(gap['candidate'])} never met the target's {_short(gap['target'])}: if the "
        "candidate is correct, an identity between these two is missing from the axioms")
    try:
        result = random_test(target, candidate)
    except VerifyError as e:  # no assignment it tried makes the candidate well-formed
        return Verdict("unknown", "e-graph", clock(),
                       reason=f"no proof: {why}{missing}; random testing could not run: {e}",
                       gap=gap)
    if result.found_difference:
        cex = result.counterexample.to_json() if result.counterexample else None
        return Verdict("not_equivalent", result.method, clock(), counterexample=cex,
                       reason=f"no proof ({why}); random testing found a difference")
    found = "found no difference" if result.equal else f"could not compare: {result.reason}"
    return Verdict("unknown", "e-graph", clock(),
                   reason=f"no proof: {why}{missing}; random testing ({result.method}, "
                          f"{result.trials} trial(s)) {found}", gap=gap)


def _short(term: str, limit: int = 240) -> str:
    return term if len(term) <= limit else f"{term[:limit - 1]}…"


def _small_assignment(candidate: KernelGraph) -> dict[str, int] | None:
    """Every size 2 (a real split) if the candidate is well-formed so; else every size 1, each
    raised to 2 in turn where the candidate stays well-formed (a grid size 2 over a batch of
    one is not, the loop's 2 over the keys is), so the trial still splits what it can: with
    every size 1 nothing is split, and a program that takes a max or a sum over one part of
    a row only would pass it. None if not even every size 1 is well-formed."""
    names = sorted(candidate.free_vars())
    env = dict.fromkeys(names, 2)
    if not problems(candidate, env):
        return env
    env = dict.fromkeys(names, 1)
    if problems(candidate, env):
        return None
    for name in names:
        raised = {**env, name: 2}
        if not problems(candidate, raised):
            env = raised
    return env


def invalid_reason(target: KernelGraph, candidate: KernelGraph) -> str:
    """Why `candidate` cannot be compared with `target` (not well-formed, or another interface:
    inputs or outputs that differ in number or shape); empty when it can."""
    found = problems(candidate)   # with free variables: the checks that need no value
    if found:
        return f"the candidate is not well-formed: {found[0]}"
    if len(candidate.inputs) != len(target.inputs):
        return (f"the candidate takes {len(candidate.inputs)} inputs, the target "
                f"{len(target.inputs)}")
    for t, c in zip(target.inputs, candidate.inputs, strict=True):
        if target.shape(t) != candidate.shape(c):
            return (f"input {c} has shape {_shape(candidate, c)}, the target's {t} "
                    f"{_shape(target, t)}")
    if len(candidate.outputs) != len(target.outputs):
        return (f"the candidate gives {len(candidate.outputs)} outputs, the target "
                f"{len(target.outputs)}")
    for t, c in zip(target.outputs, candidate.outputs, strict=True):
        if target.shape(t) != candidate.shape(c):
            return f"output {c} has shape {_shape(candidate, c)}, the target's {_shape(target, t)}"
    return ""


def _shape(g: KernelGraph, t: str) -> str:
    return "[" + ", ".join(str(d) for d in g.shape(t)) + "]"


def show_proof(steps: tuple[Step, ...]) -> str:
    """A proof, one rewrite per line: the axiom, its direction and the subterm it rewrote."""
    lines = [f"  start  {steps[0].before}" if steps else "  (the terms are identical)"]
    for i, s in enumerate(steps, 1):
        arrow = "→" if s.direction == "forward" else "←"
        lines.append(f"  {i:>3}. {s.rule} {arrow}  {s.before.at(s.path)}  ⇒  {s.after.at(s.path)}")
    if steps:
        lines.append(f"  end    {steps[-1].after}")
    return "\n".join(lines)


__all__ = ["Limits", "Term", "Verdict", "show_proof", "step_json", "verify"]
