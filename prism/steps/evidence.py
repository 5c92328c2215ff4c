"""Re-checking a step's evidence from the step's state alone, never from the search's memory.

    prune cannot_close         the waiting tiles and the ops left, counted on the state: more
                               wait than the ops left can consume down to one stored tile
    prune dead_end_inputs      the inputs the open kernel's sources are computed from, read off
                               the state: none of the missing ones among them
    prune abstract_expression  the new tensor's abstract expression recomputed from the state
                               equals the recorded one, and the recorded target's terms,
                               saturated again under the axiom table, do not hold it
    prune dead_end_output      the same expression is in no class of a target output
    prune out_of_reach         the named tensor waits in the state's block graph with the
                               recorded expression, the ops left are the recorded cap less the
                               state's ops, and in the target's terms saturated again its class
                               is further from an output than that (distances recomputed for
                               the recorded ops); or, for the waiting tensors together, each
                               waits with its recorded expression and distance (recomputed so)
                               and the ops they need together (`ops_needed`, at the recorded
                               ops' largest arity) exceed the ops left; or, for the
                               sibling bounds (`siblings`), the heights over the classes of
                               the state's tensors and the named tensor's chain bound
                               (`prism.search.completion`), recomputed in the saturated
                               target, exceed the ops left (the output's height, when no
                               tensor is named)
    prune hardware             the unsat core's constraints, built again from the state's graph
                               for the recorded device, are unsatisfiable together (z3)
    prune cost_bound           the cost model's lower bound of the state's graph, recomputed,
                               is at most the recorded bound, and that exceeds the incumbent
    prove                      every step of the proof replayed by the independent checker
                               (`prism.expr.check_explanation`), from the candidate's own terms

Each check returns None when the evidence holds, else what fails (a sentence).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from prism.errors import PrismError
from prism.expr import Step, check_explanation
from prism.expr.terms import Term, parse
from prism.ir.graph import KernelGraph
from prism.steps.states import State

Check = Callable[[State, dict[str, Any]], str | None]


def check_prune(rule: str, state: State, evidence: dict[str, Any]) -> str | None:
    """Whether `evidence` of a prune by `rule` holds of `state`; None when it does."""
    check = PRUNE_CHECKS.get(rule)
    if check is None:
        return f"no re-check is known for rule {rule!r}"
    try:
        return check(state, evidence)
    except (PrismError, KeyError, TypeError, ValueError) as err:
        return f"the evidence cannot be re-checked: {type(err).__name__}: {err}"


def _cannot_close(state: State, ev: dict[str, Any]) -> str | None:
    block = state.block
    if block is None:
        return "cannot_close on a state with no open block graph"
    pending = len(block.open_tensors)
    if ev["pending"] != pending:
        return f"the evidence says {ev['pending']} tiles wait, the state has {pending}"
    # each op consumes at most two tiles and makes one: the count falls by at most one per op,
    # so after the `remaining` ops at least pending - remaining wait, and a block stores ≥ 1
    if pending - ev["remaining"] < 2:
        return (f"{pending} waiting tiles and {ev['remaining']} ops left can end with one "
                "tile to store: nothing is shown")
    return None


def _dead_end_inputs(state: State, ev: dict[str, Any]) -> str | None:
    if state.block is None:
        return "dead_end_inputs on a state with no open block graph"
    by_name = {t.name: t for t in state.kernel.tensors}
    reached = {leaf.head for s in state.block.sources
               for _, leaf in by_name[s].term.subterms() if not leaf.args}
    inputs = {t.term.head for t in state.kernel.tensors[:state.kernel.num_inputs]}
    missing = set(ev["missing"])
    if not missing or not missing <= inputs:
        return f"the missing inputs {sorted(missing)} are not inputs of the state"
    if missing & reached:
        return f"the open kernel does read {sorted(missing & reached)}"
    return None


def _expression(state: State, ev: dict[str, Any]) -> str | None:
    made = str(state.new_tensor().term)
    if made != ev["expression"]:
        return f"the state's new tensor is {made}, the evidence says {ev['expression']}"
    if ev.get("claim") == "no_equivalent" and not ev.get("saturated"):
        return "claims no_equivalent from a target e-graph that did not saturate"
    return None


def _abstract_expression(state: State, ev: dict[str, Any]) -> str | None:
    wrong = _expression(state, ev)
    if wrong is not None:
        return wrong
    target = _target(state, ev)
    if target.saturated != bool(ev.get("saturated")):
        return f"the target's e-graph saturated: {target.saturated}, the evidence says " \
               f"{ev.get('saturated')}"
    if target.egraph.lookup(parse(ev["expression"])) is not None:
        return f"{ev['expression']} is a subexpression of the target"
    return None


def _dead_end_output(state: State, ev: dict[str, Any]) -> str | None:
    if "expression" not in ev:      # told apart by shape (an audit): the shape is the evidence
        shape = str(state.new_tensor().shape)
        return None if shape == ev.get("shape") else \
            f"the new tensor's shape is {shape}, the evidence says {ev.get('shape')}"
    wrong = _expression(state, ev)
    if wrong is not None:
        return wrong
    target = _target(state, ev)
    found = target.egraph.lookup(parse(ev["expression"]))
    if found is not None and any(target.egraph.find(found) == target.egraph.find(r)
                                 for r in target.roots):
        return f"{ev['expression']} equals a target output"
    return None


def _out_of_reach(state: State, ev: dict[str, Any]) -> str | None:
    from prism.search.abstract import distances, inner_heads
    block = state.block
    if block is None:
        return "out_of_reach on a state with no open block graph"
    waiting = {block.tensors[i].name: block.tensors[i] for i in block.open_tensors}
    if "waiting" in ev:
        return _out_of_reach_together(state, ev, waiting)
    if ev.get("siblings"):
        return _out_of_reach_siblings(state, ev, waiting)
    tensor = waiting.get(ev["tensor"])
    if tensor is None:
        return f"{ev['tensor']} does not wait for a consumer in the state"
    if str(tensor.term) != ev["expression"]:
        return f"{ev['tensor']} is {tensor.term}, the evidence says {ev['expression']}"
    remaining = ev["cap"] - block.compute_ops
    wrong = _left_and_claim(remaining, ev)
    if wrong:
        return wrong
    target = _target(state, ev)
    found = target.egraph.lookup(tensor.term)
    if found is None:
        return f"{ev['expression']} is not in the target's e-graph: nothing to measure"
    choices = _tried(ev)
    far = distances(target.egraph, target.roots, inner_heads(
        [kind for kind, _ in ev["ops"]], choices)).get(
        target.egraph.find(found))
    if far is not None and far <= remaining:     # None: below no output at all
        return f"{ev['expression']} is {far} op(s) from an output, within the {remaining} left"
    return None


def _left_and_claim(remaining: int, ev: dict[str, Any]) -> str | None:
    """What `out_of_reach`'s checks share: the ops left under the cap, counted on the state,
    are the recorded ones, and `no_equivalent` rests on a saturated e-graph."""
    if remaining != ev["remaining"]:
        return f"{remaining} ops are left under the cap, the evidence says {ev['remaining']}"
    if ev.get("claim") == "no_equivalent" and not ev.get("saturated"):
        return "claims no_equivalent from a target e-graph that did not saturate"
    return None


def _out_of_reach_together(state: State, ev: dict[str, Any], waiting: dict[str, Any]
                           ) -> str | None:
    from prism.search.abstract import distances, inner_heads
    from prism.search.pruning import BELOW_NONE, max_arity, ops_needed
    assert state.block is not None
    remaining = ev["cap"] - state.block.compute_ops
    wrong = _left_and_claim(remaining, ev)
    if wrong:
        return wrong
    names = [name for name, _, _ in ev["waiting"]]
    if len(set(names)) != len(names):
        return f"the evidence names a waiting tensor twice: {names}"
    target = _target(state, ev)
    far = distances(target.egraph, target.roots, inner_heads(
        [kind for kind, _ in ev["ops"]], _tried(ev)))
    spread = []
    for name, expression, recorded in ev["waiting"]:
        tensor = waiting.get(name)
        if tensor is None:
            return f"{name} does not wait for a consumer in the state"
        if str(tensor.term) != expression:
            return f"{name} is {tensor.term}, the evidence says {expression}"
        found = target.egraph.lookup(tensor.term)
        d = 0 if found is None else far.get(target.egraph.find(found), BELOW_NONE)
        if d != recorded:
            return f"{name} is {d} op(s) from an output, the evidence says {recorded}"
        spread.append(d)
    arity = max_arity(kind for kind, _ in ev["ops"])
    if arity > ev["arity"]:
        return f"an op tried reads {arity} operands, the evidence says at most {ev['arity']}"
    needed = ops_needed(spread, arity)
    if needed <= remaining:
        return f"the waiting tensors need {needed} op(s) together, within the {remaining} left"
    return None


def _out_of_reach_siblings(state: State, ev: dict[str, Any], waiting: dict[str, Any]
                           ) -> str | None:
    from prism.search.completion import Completion, ops_patterns
    assert state.block is not None
    remaining = ev["cap"] - state.block.compute_ops
    wrong = _left_and_claim(remaining, ev)
    if wrong:
        return wrong
    ranks = {len(t.shape) for t in (*state.kernel.tensors, *state.block.tensors)}
    if not ranks <= set(ev["ranks"]):
        return (f"the state holds tensors of rank {sorted(ranks)}, the ops were matched at "
                f"{ev['ranks']}")
    target = _target(state, ev)
    key = (json.dumps(ev["ops"], sort_keys=True), tuple(ev["ranks"]))
    if key not in target.completions:       # once per search's ops (a file holds thousands)
        target.completions[key] = Completion(target.egraph, target.roots, ops_patterns(
            sorted({kind for kind, _ in ev["ops"]}), _tried(ev), ev["ranks"]))
    completion = target.completions[key]
    held = completion.classes_of(target.egraph.lookup(t.term) for t in state.block.tensors)
    if ev["tensor"] is None:
        least = completion.output_height(held)
        if least <= remaining:
            return (f"a target output is {least} op(s) high over what the block graph holds, "
                    f"within the {remaining} left")
        return None
    tensor = waiting.get(ev["tensor"])
    if tensor is None:
        return f"{ev['tensor']} does not wait for a consumer in the state"
    if str(tensor.term) != ev["expression"]:
        return f"{ev['tensor']} is {tensor.term}, the evidence says {ev['expression']}"
    found = target.egraph.lookup(tensor.term)
    if found is None:
        return f"{ev['expression']} is not in the target's e-graph: nothing to measure"
    if completion.fits(held, completion.number_of(found), remaining):
        return (f"some way from {ev['expression']} to an output, with the operands it reads, "
                f"fits the {remaining} op(s) left")
    return None


def _tried(ev: dict[str, Any]) -> Callable[[str], list[dict[str, Any]]]:
    """The ops the search tried, each with each attribute set it tried (the evidence's
    `ops`: [kind, attrs] pairs), as `inner_heads` reads them."""
    tried: dict[str, list[dict[str, Any]]] = {}
    for kind, attrs in ev["ops"]:
        tried.setdefault(kind, []).append(dict(attrs))
    return lambda kind: tried.get(kind, [])


class _Saturated:
    def __init__(self, terms: tuple[Term, ...], shapes: tuple[tuple[str, Any], ...]):
        from prism.expr.axioms import rules
        from prism.expr.egraph import EGraph
        from prism.expr.tensor_terms import TensorAnalysis
        from prism.search.abstract import AbstractLimits
        limits = AbstractLimits()
        self.egraph = EGraph(TensorAnalysis(dict(shapes), {}))
        self.roots = [self.egraph.add(t) for t in terms]
        report = self.egraph.run(rules(), iter_limit=limits.iterations, node_limit=limits.nodes)
        self.saturated = report.stop_reason == "saturated"
        self.completions: dict[tuple[str, tuple[int, ...]], Any] = {}   # sibling bounds' tables


def _target(state: State, ev: dict[str, Any]) -> _Saturated:
    raw = ev["target"]
    terms = tuple(parse(t) for t in ([raw] if isinstance(raw, str) else raw))
    inputs = state.kernel.tensors[:state.kernel.num_inputs]
    return _saturated(terms, tuple((t.term.head, t.shape) for t in inputs))


@functools.lru_cache(maxsize=32)
def _saturated(terms: tuple[Term, ...], shapes: tuple[tuple[str, Any], ...]) -> _Saturated:
    """One saturation per target (a file holds thousands of prunes of one search)."""
    return _Saturated(terms, shapes)


def _hardware(state: State, ev: dict[str, Any]) -> str | None:
    from prism.cost.devices import get_device
    from prism.search.hardware import hardware_constraints, variable_bounds
    from prism.smt import hardware_feasibility
    d = ev["device"]
    device = replace(get_device(d["name"]), smem_bytes=d["smem_bytes"],
                     max_blocks=d["max_blocks"], min_matmul_tile=d["min_matmul_tile"])
    if device.dtype_bytes != d["dtype_bytes"]:     # the run's element type, by its bytes
        device = device.for_dtype({2: "float16", 4: "float32"}[d["dtype_bytes"]])
    graph = state.graph()
    core = set(ev["unsat_core"])
    chosen = [c for c in hardware_constraints(graph, device) if c.name in core]
    if len(chosen) != len(core) or not core:
        have = {c.name for c in chosen}
        return f"the unsat core names constraints the state does not have: {sorted(core - have)}"
    answer = hardware_feasibility(chosen, variable_bounds(graph))
    if answer.status != "unsat":
        return f"the unsat core's constraints are {answer.status} together (z3)"
    return None


def _cost_bound(state: State, ev: dict[str, Any]) -> str | None:
    from prism.cost import lower_bound_us
    from prism.cost.devices import get_device
    bound = lower_bound_us(state.graph(), get_device(ev["device"]))
    # a search of several custom kernels adds the kernel still to come: the recorded bound is
    # then larger than this one, never smaller
    if bound > ev["lower_bound_us"] * (1 + 1e-9):
        return f"the recomputed lower bound {bound:.4f} µs exceeds the recorded " \
               f"{ev['lower_bound_us']:.4f} µs"
    if not ev["lower_bound_us"] > ev["incumbent_us"]:
        return "the bound does not exceed the incumbent's latency"
    return None


PRUNE_CHECKS: dict[str, Check] = {
    "cannot_close": _cannot_close,
    "dead_end_inputs": _dead_end_inputs,
    "abstract_expression": _abstract_expression,
    "dead_end_output": _dead_end_output,
    "out_of_reach": _out_of_reach,
    "hardware": _hardware,
    "cost_bound": _cost_bound,
}


# -- proofs -----------------------------------------------------------------------------------

def check_proof(graph: KernelGraph, ev: dict[str, Any]) -> tuple[str | None, list[str]]:
    """(None when every output's proof replays from the candidate's terms, else what fails;
    the terms each proof ends at: the target's, the same for every candidate of a search)."""
    from prism.expr.axioms import rules
    from prism.expr.tensor_terms import TensorAnalysis
    from prism.verify.translate import tensor_leaf, translate
    concrete = ev.get("sizes") == "concrete"
    proofs = ev["proof"]
    shapes = {tensor_leaf(t): graph.shape(t) for t in graph.inputs}
    failure = "no translation of the candidate starts its proofs"
    for loop_first in (False, True):    # the verifier tries both orders of a kernel's axes
        try:
            tr = translate(graph, concrete_sizes=concrete, loop_first=loop_first)
        except PrismError as err:
            return f"the candidate cannot be translated: {err}", []
        if len(tr.terms) != len(proofs):
            return f"{len(proofs)} proofs for {len(tr.terms)} outputs", []
        sizes = {n: s for n, s in tr.sizes.items() if concrete or not s.is_const}
        analysis = TensorAnalysis(shapes, sizes)
        ends, wrong = [], None
        for k, (start, proof) in enumerate(zip(tr.terms, proofs, strict=True)):
            try:
                steps = [_step(s) for s in proof]
                end = steps[-1].after if steps else start
                if steps and steps[0].before is not start:
                    wrong = f"output {k}: the proof starts at {steps[0].before}, the " \
                            f"candidate's term is {start}"
                    break
                check_explanation(steps, rules(), start, end, analysis)
            except PrismError as err:
                wrong = f"output {k}: {err}"
                break
            ends.append(str(end))
        if wrong is None:
            return None, ends
        failure = wrong
    return failure, []


def _step(s: dict[str, Any]) -> Step:
    """A proof step from its JSON; the substitution is found again by matching the rule's sides
    (the JSON leaves it out), so the checker still checks everything it states."""
    from prism.expr.axioms import rules
    from prism.expr.rules import rules_by_name
    rule = rules_by_name(rules()).get(s["axiom"])
    if rule is None:
        raise ProofStepError(f"no axiom named {s['axiom']!r}")
    before, after, path = parse(s["before"]), parse(s["after"]), tuple(s["path"])
    matched, built = rule.sides(s["direction"])
    subst: dict[str, Term] = {}
    try:
        ok = _match(matched.term, before.at(path), subst) and \
            _match(built.term, after.at(path), subst)
    except IndexError:
        ok = False
    if not ok:
        raise ProofStepError(f"{s['axiom']} does not match the rewritten subterm at {path}")
    return Step(s["axiom"], s["direction"], before, after, path, subst)


class ProofStepError(PrismError):
    """A proof step that names no axiom or whose axiom does not match its terms."""


def _match(pattern: Term, term: Term, subst: dict[str, Term]) -> bool:
    """Syntactic matching of a rule side (`?x` leaves are variables), extending `subst`."""
    if len(pattern.head) > 1 and pattern.head[0] == "?":
        bound = subst.setdefault(pattern.head, term)
        return bound is term
    if pattern.head != term.head or len(pattern.args) != len(term.args):
        return False
    return all(_match(p, t, subst) for p, t in zip(pattern.args, term.args, strict=True))
