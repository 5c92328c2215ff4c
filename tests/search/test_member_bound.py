"""`SearchConfig.member_bound` (issue 17, item 5): `cost_bound` on each complete one-kernel
program's best modeled member, before it is verified.

Oracles: the same search without the bound (its best, its candidates and verdicts), the audit
(every equivalent program under a prune, completed, verified and modeled at its best assignment:
none is faster than the incumbent), and one depth-first walk against the processes executor.
"""

from __future__ import annotations

from dataclasses import replace

from prism.cost import get_device, memory_floor_us, modeled
from prism.ir.spec import substitute_graph
from prism.search import audit, search
from prism.search.audit import best_assignment, feasible_assignments
from prism.search.executors import Executor
from prism.search.maps import instantiate
from prism.search.pruning import members_bound_us
from prism.search.split import split_loop
from prism.trace import FamilyGenerated, FamilyPruned, Tracer
from prism.verify.equiv import before_proof

from .test_executors import outcome

H100 = get_device("h100")


def _config(cases, **changes):
    # two grid dims and the split move: members that differ in their grids, some of which the
    # split move takes (their bound is their memory floor), some of which it does not
    return cases.reduced("attention", grid_dims=(1, 2), split_loops=True, **changes)


def _verdicts(result):
    return {c.graph.to_json().__repr__(): c.verdict.verdict for c in result.candidates}


def _bounded(ctx, fam):
    """A complete family the search meets (a rule of a test's own reads it): its program, all
    its members (enumerated, without the search's limit) and the member bound; None before a
    family closes."""
    outputs = ctx.outputs(fam.kernel) if fam.level == "close" else None
    if outputs is None:
        return None
    program = fam.kernel.graph(outputs, name="watched")
    return (program, list(instantiate(program, fam.kernel.equalities)),
            members_bound_us(fam.kernel, outputs, ctx))


def test_the_member_bound_prunes_and_keeps_the_best(cases):
    graph = cases.small("attention").graph
    plain = search(graph, _config(cases))
    bound = search(graph, _config(cases, member_bound=True))
    pruned = bound.summary()["families"]["pruned"]
    assert plain.summary()["families"]["pruned"]["cost_bound"] == 0
    assert pruned["cost_bound"] > 0
    assert bound.exhaustive and plain.exhaustive
    assert bound.best is not None and plain.best is not None
    assert bound.best.modeled_us == plain.best.modeled_us
    # fewer programs verified, each with the verdict the search without the bound gave it
    mine, theirs = _verdicts(bound), _verdicts(plain)
    assert len(mine) < len(theirs)
    assert all(theirs.get(key) == verdict for key, verdict in mine.items() if key in theirs)


def test_no_program_below_a_prune_is_faster_than_its_bound(cases):
    """Each prune's claim, held against the search without the bound: every program it proved
    in the pruned family, and every split program made of one of them (a family of its own
    under it), models at least at the prune's lower bound."""
    graph = cases.small("attention").graph
    tracer, bound_tracer = Tracer(), Tracer()
    plain = search(graph, _config(cases), tracer=tracer)
    search(graph, _config(cases, member_bound=True), tracer=bound_tracer)
    parent = {e.id: e.parent for e in tracer.events if isinstance(e, FamilyGenerated)}
    prunes = [e for e in bound_tracer.events
              if isinstance(e, FamilyPruned) and e.rule == "cost_bound"]
    assert prunes
    checked = 0
    for prune in prunes:
        for cand in plain.candidates:
            if cand.modeled_us is None or prune.id not in (cand.family, parent.get(cand.family)):
                continue
            checked += 1
            assert cand.modeled_us >= prune.evidence["lower_bound_us"] * (1 - 1e-9), cand.id
    assert checked > 0


def test_the_member_bound_prunes_no_faster_program(cases):
    report = audit(cases.small("attention").graph, "cost_bound",
                   _config(cases, member_bound=True), label="attention")
    assert report.complete and report.pruned > 0 and report.checked > 0
    assert report.sound, report.wrong


def test_the_member_bound_is_the_same_on_processes(cases):
    graph = cases.small("attention").graph
    config = _config(cases, member_bound=True)
    walk = outcome(search(graph, replace(config, split_depth=99)))
    assert walk["summary"]["families"]["pruned"]["cost_bound"] > 0
    assert outcome(search(graph, config, executor=Executor("processes", 2))) == walk


def test_the_memory_floor_is_below_every_split_program(cases):
    """A split member's bound is its memory floor: below the modeled latency of the program the
    split move makes of it, at every assignment that fits."""
    result = search(cases.small("attention").graph, _config(cases))
    splittable = [c.graph for c in result.candidates if c.graph.num_kernels == 1
                  and split_loop(c.graph)[0] is not None]
    assert splittable
    for member in splittable[:5]:
        floor = memory_floor_us(member, H100)
        program = split_loop(member)[0]
        envs = feasible_assignments(program, H100)
        assert envs
        for env in envs:
            assert floor <= modeled(substitute_graph(program, env), H100).latency_us


def test_a_family_the_split_move_takes_is_bounded_by_its_memory_floor(cases):
    """Read at every complete program of a search (a rule of our own that prunes nothing): a
    family with a member the split move takes is bounded by the family's memory floor, not by
    its members' best assignments (its split programs may beat them); any other by its best
    member, found again here by enumeration."""
    seen = {"split": 0, "whole": 0}

    def watch(ctx, fam):
        if (bounded := _bounded(ctx, fam)) is None:
            return None
        graph, members, bound = bounded
        if any(split_loop(m)[0] is not None for m in members):
            seen["split"] += 1
            assert bound == memory_floor_us(graph, H100)
        else:
            seen["whole"] += 1
            bests = [b[0] for m in members if (b := best_assignment(m, H100)) is not None]
            assert bound == min(bests, default=0.0)
        return None

    search(cases.small("attention").graph, _config(cases, rules=(("watch", watch),)))
    assert seen["split"] > 0 and seen["whole"] > 0


def test_the_member_bound_reads_only_members_that_may_be_equivalent(cases):
    """With the bound on, a family is bounded by its members that the verifier does not show
    not equivalent before a proof (the spec check, the quick trial: `before_proof`), found
    again here without the search's memo: a family whose members all fail is bounded by 0 (the
    verifier rejects them, each with its counterexample), and a family the split move takes
    through a member that may be equivalent by its memory floor."""
    graph = cases.small("attention").graph
    seen = {"none_left": 0, "some_shown": 0, "split": 0, "whole": 0}

    def watch(ctx, fam):
        if (bounded := _bounded(ctx, fam)) is None:
            return None
        program, members, bound = bounded
        left = [m for m in members if before_proof(graph, m) is None]
        seen["some_shown"] += len(left) < len(members)
        if not left:
            seen["none_left"] += 1
            assert bound == 0.0
        elif any(split_loop(m)[0] is not None for m in left):
            seen["split"] += 1
            assert bound == memory_floor_us(program, H100)
        else:
            seen["whole"] += 1
            bests = [b[0] for m in left if (b := best_assignment(m, H100)) is not None]
            assert bound == min(bests, default=0.0)
        return None

    search(graph, _config(cases, member_bound=True, rules=(("watch", watch),)))
    assert seen["some_shown"] and seen["split"] and seen["whole"], seen


def test_members_the_bound_tried_keep_their_verdicts(cases):
    """The members a bound tried before a proof are verified from what it found (the search
    does not try them again): every candidate's verdict, method, reason and counterexample
    are those of the search without the bound, where both have it."""
    graph = cases.small("attention").graph

    def told(result):
        return {c.graph.to_json().__repr__(): (c.verdict.verdict, c.verdict.method,
                                               c.verdict.reason, c.verdict.counterexample)
                for c in result.candidates}
    mine = told(search(graph, _config(cases, member_bound=True)))
    theirs = told(search(graph, _config(cases)))
    shared = set(mine) & set(theirs)
    assert shared and any(mine[k][0] == "not_equivalent" for k in shared)
    assert all(mine[k] == theirs[k] for k in shared)


def test_a_family_with_more_members_than_are_read_is_not_bounded(cases, monkeypatch):
    """The bound reads at most `MAP_LIMIT` members, as the search verifies at most that many:
    a family that reaches the limit is bounded by 0 (no claim about members not read), any
    other by its best member, found again here over all its members by enumeration. With the
    limit at 20, some families at it would have had a bound above 0."""
    import prism.search.pruning as pruning
    monkeypatch.setattr(pruning, "MAP_LIMIT", 20)     # its families have 16 to 51 members
    seen = {"at_limit_would_bound": 0, "below_limit_bounded": 0}

    def watch(ctx, fam):
        if (bounded := _bounded(ctx, fam)) is None:
            return None
        _, members, bound = bounded
        bests = [b[0] for m in members if (b := best_assignment(m, H100)) is not None]
        if len(members) >= 20:
            assert bound == 0.0
            seen["at_limit_would_bound"] += min(bests, default=0.0) > 0
        elif not any(split_loop(m)[0] is not None for m in members):
            assert bound == min(bests, default=0.0)
            seen["below_limit_bounded"] += bound > 0
        return None

    search(cases.small("attention").graph, _config(cases, rules=(("watch", watch),)))
    assert seen["at_limit_would_bound"] and seen["below_limit_bounded"], seen
