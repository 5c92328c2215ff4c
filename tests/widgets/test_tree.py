"""The search as a tree. The state's tree queries against oracles read off the events themselves:
a subtree's counts are its descendants' events counted by a walk of the raw parent links, a
node's groups are a direct tally of its children's final (rule, reason), a jump's path is the
parent chain. The view is driven through its own controls: the messages the tree's script
sends, the jump box, the follow checkbox, the comparison's boxes."""

from __future__ import annotations

import html
import math
import re
import time
import types
from collections import Counter, defaultdict

import pytest

import prism.search
from prism.search import AuditReport
from prism.trace import (
    CandidateRejected,
    CandidateUndecided,
    CandidateVerified,
    FamilyGenerated,
    FamilyPruned,
    Tracer,
)
from widgets import Workbench
from widgets.explorer import NO_GRAPH, SearchExplorer, SearchState
from widgets.tree import (
    ROWS,
    SearchTree,
    counts_text,
    group_key,
    node_key,
    reason_key,
)

CANDIDATES = {CandidateVerified: "verified", CandidateRejected: "rejected",
              CandidateUndecided: "undecided"}


@pytest.fixture(scope="module")
def graphs(small) -> types.SimpleNamespace:
    """A search of the small target that kept every family's partial sGraph."""
    config = prism.search.SearchConfig(**{**small.config.__dict__, "record_graphs": True})
    tracer = Tracer()
    prism.search.search(small.graph, config, tracer=tracer)
    return types.SimpleNamespace(events=list(tracer.events))


def state_of(events) -> SearchState:
    state = SearchState()
    for e in events:
        state.add(e)
    return state


def raw_tree(events):
    """The tree as the events state it, with no help from the state: parent and final
    (status, rule, reason) of every row, and each row's children."""
    parent, final = {}, {}
    for e in events:
        if isinstance(e, FamilyGenerated):
            parent[e.id], final[e.id] = e.parent, ("kept", None, "")
        elif isinstance(e, FamilyPruned):
            parent[e.id], final[e.id] = e.parent, ("pruned", e.rule, e.reason)
        elif type(e) in CANDIDATES:
            parent[e.id] = e.family
            final[e.id] = (CANDIDATES[type(e)], None, getattr(e, "reason", ""))
    kids = defaultdict(list)
    for i, p in parent.items():
        kids[p].append(i)
    return parent, final, kids


def descendant_counts(root, final, kids) -> Counter:
    """Walk the subtree under `root` (None: the search) and count what its events say."""
    counts: Counter = Counter()
    todo = list(kids[None]) if root is None else [root]
    while todo:
        i = todo.pop()
        status, rule, _ = final[i]
        counts[status] += 1
        if status in ("kept", "pruned"):
            counts["families"] += 1
        if rule is not None:
            counts["pruned " + rule] += 1
        todo.extend(kids[i])
    return counts


def as_counter(sub) -> Counter:
    c = Counter({"families": sub.families, "kept": sub.kept, "verified": sub.verified,
                 "rejected": sub.rejected, "undecided": sub.undecided,
                 "pruned": sum(sub.pruned.values())})
    c.update({"pruned " + r: n for r, n in sub.pruned.items()})
    return +c


# -- the state's queries -----------------------------------------------------------------------

def test_subtree_counts_are_the_descendants_events(recorded):
    state = state_of(recorded.events)
    _, final, kids = raw_tree(recorded.events)
    for root in [None, *(i for i in final if final[i][0] in ("kept", "pruned"))]:
        assert as_counter(state.subtree(root)) == +descendant_counts(root, final, kids), root
    whole = state.subtree(None)
    assert whole.families == state.generated and whole.pruned == {
        r: n for r, n in state.rule_counts().items() if n}


def test_counts_hold_when_children_come_before_their_parents(recorded):
    """A distributed search's events may arrive deepest first; a trace fed twice replaces
    every row (latest wins): the counts stay those of the events."""
    parent, final, kids = raw_tree(recorded.events)

    def depth(e) -> int:
        i, d = getattr(e, "id", None), 0
        while i in parent and parent[i] is not None:
            i, d = parent[i], d + 1
        return d

    deepest_first = sorted(recorded.events, key=lambda e: -depth(e))   # stable: per-id order
    for events in (deepest_first, [*recorded.events, *recorded.events]):
        state = state_of(events)
        for root in [None, *kids[None], *list(final)[::7]]:
            assert as_counter(state.subtree(root)) == +descendant_counts(root, final, kids)


def test_groups_are_a_direct_tally_of_the_children(recorded):
    state = state_of(recorded.events)
    _, final, kids = raw_tree(recorded.events)
    for p in [None, *final]:
        tally = Counter((final[k][1] or final[k][0], final[k][2]) for k in kids.get(p, []))
        found = Counter({(g.head, r): n for g in state.groups(p) for r, n in g.reasons})
        assert found == tally, p
        for g in state.groups(p):
            assert g.count == sum(n for _, n in g.reasons)
            assert [n for _, n in g.reasons] == sorted((n for _, n in g.reasons), reverse=True)
            for reason, n in g.reasons:
                rows = state.group_rows(p, g.head, reason, 0, n + 5)
                assert [r.id for r in rows] == [k for k in kids[p] if
                                                (final[k][1] or final[k][0], final[k][2]) ==
                                                (g.head, reason)]


def test_the_path_to_a_row_is_its_parent_chain(recorded):
    state = state_of(recorded.events)
    parent, _, _ = raw_tree(recorded.events)
    for i in parent:
        chain, at = [i], parent[i]
        while at is not None:
            chain.append(at)
            at = parent[at]
        assert state.path(i) == chain[::-1]
    family = next(i for i in parent if i.startswith("f"))
    candidate = next(e.id for e in recorded.events if isinstance(e, CandidateVerified))
    assert state.find(family.upper()) == family and state.find(f" {candidate} ") == candidate
    assert state.find(family[1:]) == family                  # a bare number: a family
    assert state.find("nothing") is None


def test_an_audit_marks_its_families_and_counts_them_up_the_tree(recorded):
    state = state_of(recorded.events)
    pruned = next(e for e in recorded.events if isinstance(e, FamilyPruned) and
                  len(state.ancestors(e.id)) >= 2)
    report = AuditReport(pruned.rule, "rmsnorm_matmul", wrong=[
        {"family": pruned.id, "rule": pruned.rule, "reason": pruned.reason, "candidate": "c9",
         "finding": "an equivalent program was pruned"}])
    assert state.add_audit(report) == 1
    assert state.audit[pruned.id][0]["candidate"] == "c9"
    for fid in [None, *state.path(pruned.id)]:
        assert state.subtree(fid).findings == 1
    assert state.subtree(state.children(None)[-1]).findings in (0, 1)
    assert state.add_audit(report.to_json()) == 1          # the CLI's JSON does the same
    assert state.subtree(None).findings == 2


def test_tree_queries_cost_what_they_return_at_100000_families():
    events = [FamilyGenerated("f0", None, "seed", seq=0)]
    for i in range(1, 100_000):            # one very wide family and a chain under it
        parent = "f0" if i % 2 else f"f{i - 1}"
        events.append(FamilyGenerated(f"f{i}", parent, "op", seq=i))
        if i % 3 == 0:
            events.append(FamilyPruned(f"f{i}", parent, "cannot_close", f"reason {i % 4}", {},
                                       seq=i))
    state = state_of(events)
    start = time.perf_counter()
    for _ in range(1000):
        state.subtree(None), state.subtree("f0"), state.groups("f0")
        state.group_rows("f0", "cannot_close", "reason 1", 0, ROWS)
    spent = time.perf_counter() - start
    assert state.subtree("f0").families == 100_000
    assert sum(g.count for g in state.groups("f0")) == len(state.children("f0"))
    # a walk of the subtree per query would be 10^8 steps here: minutes, not this
    assert spent < 5.0, spent
    tree = SearchTree(state)
    start = time.perf_counter()
    tree.jump_to("f99999")
    assert tree.selected == "f99999" and time.perf_counter() - start < 10.0


# -- the view, through its controls ------------------------------------------------------------

def click(tree: SearchTree, **message) -> None:
    """What the tree's script sends when a row is clicked."""
    tree._on_msg(tree.tree, message, [])


def row(tree: SearchTree, key: str) -> dict:
    (found,) = [r for r in tree.tree.rows if r["key"] == key]
    return found


def test_expanding_a_node_shows_its_children_grouped_by_rule_and_reason(recorded):
    tree = SearchTree.from_events(recorded.events)
    state = tree.state
    top = tree.tree.rows[0]
    assert top["label"] == "the search" and top["counts"] == counts_text(state.subtree(None))
    # the family with the most pruned children, and its biggest rule group
    fid = max((e.id for e in recorded.events if isinstance(e, FamilyGenerated)),
              key=lambda f: len(state.children(f)))
    tree.reveal(fid)
    click(tree, toggle=node_key(fid))
    groups = state.groups(fid)
    keys = {group_key(fid, g.head) for g in groups}
    drawn = {r["head"]: r for r in tree.tree.rows if r["key"] in keys}
    assert set(drawn) == {g.head for g in groups}
    biggest = max((g for g in groups if g.head not in ("kept", "verified", "rejected")),
                  key=lambda g: g.count)
    label = drawn[biggest.head]["label"]
    assert label.startswith(f"{biggest.head}: {biggest.count} children — ")
    reason, n = biggest.reasons[0]                  # the group's row names its top reasons
    assert (f"{reason} ({n})" if len(reason) <= 70 else f"{reason[:69]}… ({n})") in label
    # opening the group lists its reasons (or, with one reason, its rows)
    click(tree, toggle=group_key(fid, biggest.head))
    if len(biggest.reasons) > 1:
        reason, n = biggest.reasons[0]
        assert row(tree, reason_key(fid, biggest.head, reason))["label"] == f"{reason} ({n})"
        click(tree, toggle=reason_key(fid, biggest.head, reason))
    ids = [r["id"] for r in tree.tree.rows if r["kind"] == "node"]
    first = state.group_rows(fid, biggest.head, biggest.reasons[0][0], 0, 1)[0].id
    assert first in ids
    click(tree, toggle=group_key(fid, biggest.head))              # and closes again
    assert first not in [r["id"] for r in tree.tree.rows]


def test_a_group_draws_a_bounded_number_of_rows_and_shows_more():
    events = [FamilyGenerated("f0", None, "seed", seq=0)]
    for i in range(1, 3 * ROWS):
        events += [FamilyGenerated(f"f{i}", "f0", "op", seq=2 * i),
                   FamilyPruned(f"f{i}", "f0", "cannot_close", "same reason", {}, seq=2 * i + 1)]
    tree = SearchTree.from_events(events)
    click(tree, toggle=node_key("f0"))
    click(tree, toggle=group_key("f0", "cannot_close"))
    nodes = [r for r in tree.tree.rows if r["kind"] == "node" and r["id"] != "f0"][1:]
    assert len(nodes) == ROWS
    more = [r for r in tree.tree.rows if r["kind"] == "more"]
    assert len(more) == 1 and f"({3 * ROWS - 1 - ROWS} rows not drawn)" in more[0]["label"]
    click(tree, more=more[0]["key"])
    assert len([r for r in tree.tree.rows if r["kind"] == "node"]) == 2 + 2 * ROWS
    # a jump past the drawn rows draws that row after them
    tree.jump.value = f"f{3 * ROWS - 1}"
    assert tree.tree.rows[-2]["id"] == f"f{3 * ROWS - 1}" and tree.tree.rows[-2]["selected"]


def test_the_jump_box_opens_the_tree_down_to_the_row_and_selects_it(recorded):
    tree = SearchTree.from_events(recorded.events)
    state = tree.state
    deep = max((e.id for e in recorded.events if isinstance(e, FamilyPruned)),
               key=lambda i: len(state.ancestors(i)))
    tree.jump.value = deep
    assert tree.selected == deep and tree.tree.selected == deep
    drawn = [r["id"] for r in tree.tree.rows if r["kind"] == "node"]
    assert [i for i in drawn if i in state.path(deep)] == state.path(deep)
    assert all(row(tree, node_key(i))["open"] for i in state.ancestors(deep))
    assert [r["id"] for r in tree.tree.rows if r["selected"]] == [deep]
    node = state.node(deep)
    assert "pruned by" in tree.detail.value and node["rule"] in tree.detail.value
    tree.jump.value = "f999999"
    assert "no row f999999" in tree.jump_note.value and tree.selected == deep


def test_clicking_a_row_shows_its_decision_beside_its_partial_sgraph(graphs, recorded):
    tree = SearchTree.from_events(graphs.events)
    pruned = next(e for e in graphs.events if isinstance(e, FamilyPruned))
    click(tree, select=pruned.id)
    assert tree.selected == pruned.id
    assert "pruned by <b>" in tree.detail.value and pruned.rule in tree.detail.value
    assert pruned.reason.split(" ")[0] in tree.detail.value
    assert "<svg" in tree.picture.value and "partial sGraph" in tree.picture.value
    # a trace without graphs says the graph was not kept, and how to keep it
    bare = SearchTree.from_events(recorded.events)
    click(bare, select=pruned.id)
    assert NO_GRAPH in bare.picture.value and "<svg" not in bare.picture.value
    # a candidate: its proof in the detail; the buttons hand it to the comparison
    verified = next(e for e in graphs.events if isinstance(e, CandidateVerified))
    click(tree, select=verified.id)
    assert "proof" in tree.detail.value.lower() and not tree.as_first.disabled
    tree.as_first.click()
    assert tree.compare.first.value == verified.id


def test_two_candidates_side_by_side_with_a_structural_diff(graphs):
    tree = SearchTree.from_events(graphs.events)
    verified = [e for e in graphs.events if isinstance(e, CandidateVerified)]
    rejected = [e for e in graphs.events if isinstance(e, CandidateRejected)]
    a, b = verified[0], rejected[0] if rejected else verified[1]
    tree.compare.first.value, tree.compare.second.value = a.id, b.id
    body = tree.compare.body.value
    assert body.count("<svg") >= 2 and a.id in body and b.id in body
    assert "proof" in body.lower()
    diff = body.split("structural diff", 1)[1]
    assert f"--- {a.id}" in diff and f"+++ {b.id}" in diff
    from prism.ir.serialize import graph_from_json
    from prism.ir.text import to_text
    only_a = set(to_text(graph_from_json(a.graph)).splitlines()[1:]) - \
        set(to_text(graph_from_json(b.graph)).splitlines()[1:])
    assert only_a
    for line in only_a:                               # every line only in A is a "-" line
        assert f">{html.escape('-' + line)}</div>" in diff
    tree.compare.second.value = a.id
    assert "the same graph" in tree.compare.body.value
    tree.compare.second.value = "c424242"
    assert "no candidate c424242" in tree.compare.body.value


def test_the_comparison_shows_each_candidates_triton_source_when_tuning_made_one(recorded):
    """The winner's candidate beside a rejected one: the winner's side shows the source of its
    fastest configuration, the very module the pipeline chose (the run's own text); the
    rejected side says why it has none."""
    result = recorded.result
    best = result.best
    rejected = next(e for e in recorded.events if isinstance(e, CandidateRejected))
    tree = SearchTree.from_events(recorded.events)
    tree.compare.first.value, tree.compare.second.value = best.candidate, rejected.id
    body = tree.compare.body.value
    mine = [e for e in recorded.events if e.type == "Measured" and e.candidate == best.candidate
            and e.kind == best.latency_kind]
    fastest = min(e.latency_us for e in mine)
    shown = re.search(r"Triton source of <code>([^<]+)</code>, ([0-9.e+-]+) µs \((\w+)\)", body)
    assert shown, body[-2000:]
    config = html.unescape(shown.group(1))
    assert shown.group(3) == best.latency_kind
    assert math.isclose(float(shown.group(2)), fastest, rel_tol=1e-3)
    assert next(e.latency_us for e in mine if e.id == config) == fastest
    assert config == best.config or best.candidate == "input"
    if config == best.config:                       # the same configuration: the same module
        text = html.unescape(re.sub(r"<[^>]+>", "", body.split("prism-source", 1)[1]))
        assert best.triton_source.strip() in text
    assert "no Triton source: rejected candidates are never instantiated" in body


def test_audit_findings_are_marked_in_the_tree(recorded):
    tree = SearchTree.from_events(recorded.events)
    pruned = next(e for e in recorded.events if isinstance(e, FamilyPruned))
    tree.show_audit({"wrongly_pruned": [{"family": pruned.id, "finding": "an equivalent "
                                         "program was pruned"}]})
    tree.jump.value = pruned.id
    assert "audit: wrongly pruned" in row(tree, node_key(pruned.id))["mark"]
    assert "1 audit finding" in tree.tree.rows[0]["counts"]


def test_follow_the_newest_during_a_live_run(small, until):
    explorer = SearchExplorer(interval=0.02)
    tree = SearchTree.of(explorer)
    assert tree.follow.layout.display == "none"            # nothing live: no checkbox
    explorer.prepare(small.graph, small.config)
    explorer.run(paused=True)
    assert tree.follow.layout.display is None
    tree.follow.value = True
    try:
        for _ in range(3):
            explorer.step(40)
            until(lambda: explorer.state.generated >= 10 and
                  tree.selected == explorer.state.newest)
            newest = explorer.state.newest
            assert newest is not None
            assert [r["id"] for r in tree.tree.rows if r["selected"]] == [newest]
            drawn = [r["id"] for r in tree.tree.rows if r["kind"] == "node"]
            assert set(explorer.state.path(newest)) <= set(drawn)
    finally:
        explorer.cancel()
        explorer.join(30)


def test_the_workbench_search_tab_shows_the_tree_with_the_table_one_click_away(recorded):
    bench = Workbench.from_trace(recorded.events)
    tab = bench.widget.children[0]
    assert bench.tree.widget in bench._views["tree"].children
    assert bench._views["tree"].layout.display is None
    assert bench._views["table"].layout.display == "none"
    assert bench.tree.tree.rows[0]["counts"] == counts_text(bench.explorer.state.subtree(None))
    bench.search_view.value = "table"
    assert bench._views["table"].layout.display is None
    assert bench._views["tree"].layout.display == "none"
    assert bench.explorer.header in tab.children
    assert bench.explorer.widget.children[1].layout.display != "none"   # its own, untouched
