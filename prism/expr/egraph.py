"""An e-graph with explanations: equality saturation whose every equality can be replayed.

Design (after egg, Willsey et al. POPL'21, with explanations always on):

- Every e-node is added once per distinct *original* form (head, ids it was added with) and gets
  its own id, which stands for one concrete term; the union-find groups ids into e-classes.
- `_memo` maps canonical e-nodes (children are e-class roots) to an id holding that node; after
  `rebuild()` it is congruence-closed: equal canonical nodes are in one class.
- Unions are deferred-rebuilt: a union queues the parents of the absorbed class; `rebuild()`
  re-canonicalises them and merges congruent ones (justified by congruence).
- A rule fires on *witnesses*: each variable is bound to one id of the matched class (its leaf
  if it has one, else its root), its condition is asked of those witnesses, and the union joins
  the concrete instances side[σ] and other[σ]. So each rule edge is one checkable rewrite, and
  the checker, asking the same `Facts` of the same terms, gets the same answer.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple, cast

from prism.errors import NotEquivalentError, RuleError
from prism.expr.explain import CONGRUENCE, Justification, Node, ProofForest, RuleEdge
from prism.expr.proof import Step
from prism.expr.rules import (
    BACKWARD,
    DIRECTIONS,
    FORWARD,
    Analysis,
    Facts,
    Rule,
    is_var,
    rules_by_name,
)
from prism.expr.terms import Term

# A compiled pattern: a variable name, or ((head, arity), compiled arguments).
_Compiled = str | tuple[tuple[str, int], tuple[Any, ...]]
_Subst = dict[str, int]
# the matches of one rule's direction at one class: (rule, direction, class, variables, found),
# each of `found` the classes of `variables` in one match; `variables` None: `found` holds
# the substitutions themselves (the recursive matcher's, the oracle)
_Matches = tuple[Rule, str, int, tuple[str, ...] | None, list[Any]]
_REVERSE = {FORWARD: BACKWARD, BACKWARD: FORWARD}
# Match only where something changed after a run's first pass (`EGraph.run`); False matches
# every class every pass, the plain algorithm the tests hold the semi-naive one to.
SEMINAIVE = True
# Patterns with an op at their root matched by generated loops (`_matcher`); False: by `_match`,
# the oracle of tests/expr/test_matcher.py
COMPILED_MATCHERS = True


class ENode(NamedTuple):
    """A canonical e-node: a head and the e-class ids of its children."""

    head: str
    children: tuple[int, ...]


@dataclass(frozen=True)
class RunReport:
    """What `EGraph.run` did; `applied` counts, per rule, the unions that merged two classes."""

    stop_reason: str  # "saturated" | "goal" | "iter_limit" | "node_limit" | "time_limit"
    iterations: int
    nodes: int
    classes: int
    seconds: float
    applied: dict[str, int]

    def __str__(self) -> str:
        return (f"{self.stop_reason} after {self.iterations} iteration(s): {self.nodes} e-nodes "
                f"in {self.classes} e-classes, {self.seconds:.3f} s")


class _Class:
    __slots__ = ("by_op", "data", "leaf", "nodes", "parents")

    def __init__(self, node: Node, node_id: int, data: Any):
        self.nodes: dict[Node, int] = {node: node_id}  # canonical node → an id added as it
        self.parents: list[tuple[Node, int]] = []  # (node using this class, its id)
        self.by_op: dict[tuple[str, int], list[tuple[int, ...]]] = {}  # filled by rebuild
        self.data = data
        self.leaf = None if node[1] else node_id  # the oldest leaf id in the class


class EGraph:
    """Terms, equalities between them, equality saturation, extraction and explanations."""

    def __init__(self, analysis: Analysis | None = None):
        self.analysis = analysis
        self._uf: list[int] = []  # union-find parent of each id
        self._node: list[Node] = []  # each id's node as it was added
        self._term_data: list[Any] = []  # each id's analysis data, folded over its own term
        self._terms: dict[int, Term] = {}
        self._uncanon: dict[Node, int] = {}  # node as added → its id
        self._memo: dict[Node, int] = {}  # canonical node → an id holding it
        self._classes: dict[int, _Class] = {}  # keyed by root id
        self._pending: list[tuple[Node, int]] = []  # parents to re-canonicalise
        self._analysis_pending: list[tuple[Node, int]] = []  # parents to re-make
        self._index: dict[tuple[str, int], list[int]] = {}  # (head, arity) → classes
        self._forest = ProofForest(self._node.__getitem__, self._term)
        self._dirty = False
        self._changes = 0  # new canonical nodes + merges; unchanged across a pass = saturated
        self._touched: list[int] = []  # ids whose class changed since the last match pass
        self.seminaive = SEMINAIVE
        self.compiled_matchers = COMPILED_MATCHERS
        self._extraction: tuple[int, dict[int, Node]] = (-1, {})

    # ---- building -------------------------------------------------------------------------

    def add(self, term: Term) -> int:
        """Add a term; return an id of its e-class that stands for exactly this term."""
        return self._add_term(term, {})

    def _add_term(self, term: Term, seen: dict[Term, int]) -> int:
        if term not in seen:
            children = tuple(self._add_term(a, seen) for a in term.args)
            seen[term] = self._add_node(term.head, children)
            self._terms.setdefault(seen[term], term)
        return seen[term]

    def _add_node(self, head: str, children: tuple[int, ...]) -> int:
        node = (head, children)
        known = self._uncanon.get(node)
        if known is not None:
            return known
        new = self._forest.add()
        self._uf.append(new)
        self._node.append(node)
        self._uncanon[node] = new
        if self.analysis is not None:
            self._term_data.append(
                self.analysis.make(head, tuple(self._term_data[c] for c in children)))
        canon = self._canonical(node)
        existing = self._memo.get(canon)
        if existing is not None:  # a congruent node exists: join its class
            self._uf[new] = self.find(existing)
            self._forest.union(new, existing, CONGRUENCE)
            return new
        self._memo[canon] = new
        self._classes[new] = _Class(canon, new, self._make(canon))
        self._touched.append(new)
        for child in set(canon[1]):
            self._classes[child].parents.append((canon, new))
        self._changes += 1
        self._dirty = True
        return new

    def _make(self, node: Node) -> Any:
        if self.analysis is None:
            return None
        return self.analysis.make(node[0], tuple(self._classes[self.find(c)].data
                                                 for c in node[1]))

    def _canonical(self, node: Node) -> Node:
        return (node[0], tuple(self.find(c) for c in node[1])) if node[1] else node

    def find(self, id_: int) -> int:
        """The canonical id (root) of the e-class holding `id_`."""
        uf = self._uf
        root = id_
        while uf[root] != root:
            root = uf[root]
        while uf[id_] != root:  # path compression
            uf[id_], id_ = root, uf[id_]
        return root

    def union(self, a: int, b: int, reason: str) -> bool:
        """Assert term(a) = term(b). Explanations show it as a forward step of a rule named
        `reason`, so the checker accepts it only given a rule of that name stating it.
        Returns whether two classes merged; call `rebuild()` before querying."""
        return self._union(a, b, RuleEdge(reason, FORWARD, ()))

    def _union(self, a: int, b: int, why: Justification) -> bool:
        keep, gone = self.find(a), self.find(b)
        if keep == gone:
            return False
        self._forest.union(a, b, why)
        if len(self._classes[keep].parents) < len(self._classes[gone].parents):
            keep, gone = gone, keep
        self._uf[gone] = keep
        self._touched.append(keep)
        kept, absorbed = self._classes[keep], self._classes.pop(gone)
        self._pending.extend(absorbed.parents)  # they mention `gone`: re-canonicalise
        kept.nodes.update(absorbed.nodes)
        kept.parents.extend(absorbed.parents)
        if kept.leaf is None or (absorbed.leaf is not None and absorbed.leaf < kept.leaf):
            kept.leaf = absorbed.leaf
        if self.analysis is not None:
            merged = self.analysis.merge(kept.data, absorbed.data)
            if merged != kept.data or merged != absorbed.data:
                self._analysis_pending.extend(kept.parents)
            kept.data = merged
        self._changes += 1
        self._dirty = True
        return True

    def rebuild(self) -> None:
        """Restore the invariants: congruence closure, analysis fixpoint, canonical nodes."""
        if not self._dirty:
            return
        while self._pending or self._analysis_pending:
            while self._pending:
                node, id_ = self._pending.pop()
                canon = self._canonical(node)
                other = self._memo.setdefault(canon, id_)
                if self.find(other) != self.find(id_):  # f(x..) and f(y..) with x = y
                    self._union(other, id_, CONGRUENCE)
            self._repair_data()
        self._normalize()
        self._dirty = False

    def _repair_data(self) -> None:
        """Re-make the data of parents whose children's data changed, to a fixpoint."""
        analysis = self.analysis
        while analysis is not None and self._analysis_pending:
            node, id_ = self._analysis_pending.pop()
            cls = self._classes[self.find(id_)]
            merged = analysis.merge(cls.data, self._make(node))
            if merged != cls.data:
                cls.data = merged
                self._analysis_pending.extend(cls.parents)
                self._touched.append(id_)

    def _normalize(self) -> None:
        """Canonicalise every class's nodes; rebuild the memo, parent lists and head index."""
        self._memo, self._index = {}, {}
        for root, cls in self._classes.items():
            nodes: dict[Node, int] = {}
            for node, id_ in cls.nodes.items():
                nodes.setdefault(self._canonical(node), id_)
            cls.nodes, cls.parents, cls.by_op = nodes, [], {}
            for node in nodes:
                cls.by_op.setdefault((node[0], len(node[1])), []).append(node[1])
            for op in cls.by_op:
                self._index.setdefault(op, []).append(root)
            self._memo.update(nodes)
        for cls in self._classes.values():
            for node, id_ in cls.nodes.items():
                for child in set(node[1]):
                    self._classes[child].parents.append((node, id_))

    # ---- equality saturation --------------------------------------------------------------

    def run(self, rules: Iterable[Rule], *, iter_limit: int = 30, node_limit: int = 10_000,
            time_limit: float | None = None,
            goal: Callable[[EGraph], bool] | None = None) -> RunReport:
        """Saturate: match every rule (both directions if bidirectional), apply, rebuild, repeat.

        Stops at the first of: `goal(self)` holds (checked before each iteration), an iteration
        changed nothing, `iter_limit` iterations, more than `node_limit` e-nodes (also checked
        while applying, before congruence closure), `time_limit` seconds when one is given (also
        checked while matching and applying). An interrupted iteration is counted and rebuilt.
        Without `time_limit` the run is a function of its inputs and counts alone: the engine's
        decisions (pruning, verdicts) never set one, so they do not depend on machine load.
        """
        rules = list(rules)
        rules_by_name(rules)  # names must be unique: reports and explanations use them
        compiled = {(r.name, d): _compile(r.sides(d)[0].term) for r in rules
                    for d in DIRECTIONS}
        matchers = {key: _matcher(pattern) for key, pattern in compiled.items()
                    if not isinstance(pattern, str) and self.compiled_matchers}
        depth = max((_depth(p) for p in compiled.values()), default=0)
        start = time.perf_counter()
        deadline = math.inf if time_limit is None else start + time_limit
        applied = dict.fromkeys((r.name for r in rules), 0)
        iterations, reason = 0, None
        self.rebuild()
        while reason is None:
            reason = self._stop_reason(goal, iterations, iter_limit, node_limit, deadline)
            if reason is None:
                before = self._changes
                # Semi-naive matching: after the first pass, only classes within a pattern's
                # depth above one that changed since the last pass can match anew. A match
                # anywhere else was found in that pass and applied then (its instance is
                # already in the root's class: applying it again is a no-op) or refused by
                # its condition, which reads only the matched classes' facts, unchanged. So
                # the unions, their order and the explanations are the same as matching
                # everything (`seminaive = False`, the oracle of `tests/expr`).
                roots = self._affected(depth) if self.seminaive and iterations else None
                self._touched = []
                matches, reason = self._search(rules, compiled, deadline, roots, matchers)
                reason = reason or self._apply(matches, compiled, applied, node_limit, deadline)
                self.rebuild()
                iterations += 1
                if reason is None and self._changes == before:
                    reason = "saturated"
        return RunReport(reason, iterations, self.num_nodes, self.num_classes,
                         time.perf_counter() - start, applied)

    def _stop_reason(self, goal: Callable[[EGraph], bool] | None, iterations: int,
                     iter_limit: int, node_limit: int, deadline: float) -> str | None:
        if goal is not None and goal(self):
            return "goal"
        self.rebuild()  # the goal may have added terms
        if iterations >= iter_limit:
            return "iter_limit"
        if len(self._memo) > node_limit:
            return "node_limit"
        if time.perf_counter() >= deadline:
            return "time_limit"
        return None

    def _affected(self, depth: int) -> set[int]:
        """The classes that changed since the last match pass and those up to `depth` parent
        steps above them: where a pattern of that depth can match anew."""
        frontier = {self.find(i) for i in self._touched}
        seen = set(frontier)
        for _ in range(depth):
            above = set()
            for root in frontier:
                for _node, id_ in self._classes[root].parents:
                    parent = self.find(id_)
                    if parent not in seen:
                        seen.add(parent)
                        above.add(parent)
            if not above:
                break
            frontier = above
        return seen

    def _search(self, rules: list[Rule], compiled: dict[tuple[str, str], _Compiled],
                deadline: float, only: set[int] | None = None,
                matchers: dict[tuple[str, str], _Matcher] | None = None
                ) -> tuple[list[_Matches], str | None]:
        """Every match of every rule, class by class in index order (`only`: in those
        classes alone). A pattern with an op at its root is matched by its `_matcher` (the
        same matches in the same order as `_match`, as tuples instead of dicts)."""
        matches: list[_Matches] = []
        classes = self._classes
        for rule in rules:
            for direction in rule.directions():
                pattern = compiled[(rule.name, direction)]
                roots = (list(classes) if isinstance(pattern, str)
                         else self._index.get(pattern[0], ()))
                if only is not None:
                    roots = [r for r in roots if r in only]
                fast = matchers.get((rule.name, direction)) if matchers is not None else None
                if fast is not None:
                    names, match = fast
                    for root in roots:
                        found = match(classes, root)
                        if found:
                            matches.append((rule, direction, root, names, found))
                else:
                    for root in roots:
                        substs = self._match(pattern, root, {})
                        if substs:
                            matches.append((rule, direction, root, None, substs))
                if time.perf_counter() >= deadline:
                    return matches, "time_limit"
        return matches, None

    def _match(self, pattern: _Compiled, root: int, subst: _Subst) -> list[_Subst]:
        """Every extension of `subst` under which `pattern` matches a node of class `root`."""
        if isinstance(pattern, str):
            return _bind([subst], pattern, root)
        op, args = pattern
        found: list[_Subst] = []
        for children in self._classes[root].by_op.get(op, ()):
            partial = [subst]
            for arg, child in zip(args, children, strict=True):
                if isinstance(arg, str):  # a variable: bind or compare, no recursion
                    partial = _bind(partial, arg, child)
                else:
                    partial = [s for p in partial for s in self._match(arg, child, p)]
                if not partial:
                    break
            found.extend(partial)
        return found

    def _apply(self, matches: list[_Matches],
               compiled: dict[tuple[str, str], _Compiled], applied: dict[str, int],
               node_limit: int, deadline: float) -> str | None:
        """Apply each match in order: skip it where its other side is already in the matched
        class (a `_lookup` of the tuple, else `_lookup_instance` of the dict), else union the
        two sides' instances on the witnesses. A dict is made only for a match applied."""
        count = 0
        uf, memo, find = self._uf, self._memo, self.find
        for rule, direction, root, names, found in matches:
            built = compiled[(rule.name, _REVERSE[direction])]
            lookup = None if names is None else _lookup(built, names)
            for one in found:
                if len(memo) > node_limit:
                    return "node_limit"
                if count % 256 == 255 and time.perf_counter() >= deadline:
                    return "time_limit"
                count += 1
                if lookup is not None:
                    if lookup(one, uf, memo, find) == find(root):
                        continue  # already equal: a new edge would prove nothing new
                    subst = dict(zip(names, one, strict=True))  # type: ignore[arg-type]
                else:
                    subst = one
                    if self._lookup_instance(built, subst) == find(root):
                        continue
                witness = {var: self._witness(c) for var, c in subst.items()}
                if rule.condition is not None and \
                        not rule.condition(_WitnessFacts(self, witness)):
                    continue
                a = self._instantiate(compiled[(rule.name, direction)], witness)
                b = self._instantiate(built, witness)
                if self._union(a, b, RuleEdge(rule.name, direction, tuple(witness.items()))):
                    applied[rule.name] += 1
        return None

    def _witness(self, root: int) -> int:
        """The id a variable bound to this class stands for: its oldest leaf, else its root."""
        root = self.find(root)
        leaf = self._classes[root].leaf
        return root if leaf is None else leaf

    def _lookup_instance(self, pattern: _Compiled, subst: _Subst) -> int | None:
        """The class of the pattern instance if it is represented (up to congruence), or None."""
        uf = self._uf
        if isinstance(pattern, str):
            root = subst[pattern]
            return root if uf[root] == root else self.find(root)
        (head, _), args = pattern
        children = []
        for arg in args:
            if isinstance(arg, str):  # the common case, inlined: this runs once per match
                child = subst[arg]
                if uf[child] != child:
                    child = self.find(child)
            else:
                sub = self._lookup_instance(arg, subst)
                if sub is None:
                    return None
                child = sub
            children.append(child)
        found = self._memo.get((head, tuple(children)))
        return found if found is None or uf[found] == found else self.find(found)

    def _instantiate(self, pattern: _Compiled, witness: dict[str, int]) -> int:
        """The id of the pattern's instance whose variables are the witnesses' own terms."""
        if isinstance(pattern, str):
            return witness[pattern]
        (head, _), args = pattern
        return self._add_node(head, tuple([self._instantiate(a, witness) for a in args]))

    # ---- queries --------------------------------------------------------------------------

    @property
    def num_nodes(self) -> int:
        self.rebuild()
        return len(self._memo)

    @property
    def num_classes(self) -> int:
        self.rebuild()
        return len(self._classes)

    def lookup(self, term: Term) -> int | None:
        """The root of the class representing `term` (up to congruence), or None; adds nothing."""
        self.rebuild()
        children = []
        for arg in term.args:
            child = self.lookup(arg)
            if child is None:
                return None
            children.append(child)
        id_ = self._memo.get((term.head, tuple(children)))
        return None if id_ is None else self.find(id_)

    def equivalent(self, a: Term, b: Term) -> bool:
        """Whether a = b has been proved (both terms are added if they are not represented)."""
        ia, ib = self.add(a), self.add(b)
        self.rebuild()
        return self.find(ia) == self.find(ib)

    def classes(self) -> list[int]:
        """The canonical ids of all e-classes."""
        self.rebuild()
        return list(self._classes)

    def nodes(self, class_id: int) -> list[ENode]:
        """The canonical e-nodes of a class."""
        self.rebuild()
        return [ENode(*node) for node in self._classes[self.find(class_id)].nodes]

    def neighbourhood(self, class_id: int, max_classes: int = 12) -> dict[str, Any]:
        """A small picture of the e-graph around a class, as JSON: the classes reachable from it
        through its e-nodes' children, breadth first, at most `max_classes`, each with its
        e-nodes (head and child class ids); children beyond the limit are listed as cut."""
        self.rebuild()
        root = self.find(class_id)
        order, seen = [root], {root}
        for cid in order:
            for node in self.nodes(cid):
                for child in map(self.find, node.children):
                    if child not in seen and len(order) < max_classes:
                        seen.add(child)
                        order.append(child)
        return {"root": root, "classes": [
            {"id": c, "nodes": [{"head": n.head, "children": [self.find(x) for x in n.children]}
                                for n in self.nodes(c)]} for c in order],
            "cut": sorted({self.find(x) for c in order for n in self.nodes(c)
                           for x in n.children} - seen)}

    def nearest_gap(self, a: int, b: int) -> tuple[int, int] | None:
        """Where two classes that did not meet come closest: from (a, b), while some e-node of
        one class and some e-node of the other have the same head and all their children
        equal but one pair, of the same analysis data (shape), descend into that pair (the one
        whose smallest terms are smallest);
        the pair where no such step exists is the gap, the subterms an identity would have to
        join. None when a and b are one class."""
        self.rebuild()
        a, b = self.find(a), self.find(b)
        if a == b:
            return None
        size = self._sizes()
        seen = {(a, b)}
        while True:
            steps = []
            for na in self._classes[a].nodes:
                for nb in self._classes[b].nodes:
                    if na[0] != nb[0] or len(na[1]) != len(nb[1]) or not na[1]:
                        continue
                    differ = [(self.find(x), self.find(y))
                              for x, y in zip(na[1], nb[1], strict=True)
                              if self.find(x) != self.find(y)]
                    # a pair of different shapes can never be joined: the gap is above it
                    if len(differ) == 1 and differ[0] not in seen and \
                            self._classes[differ[0][0]].data == self._classes[differ[0][1]].data:
                        steps.append(differ[0])
            if not steps:
                return a, b
            a, b = min(steps, key=lambda p: (size.get(p[0], 0) + size.get(p[1], 0), p))
            seen.add((a, b))

    def _sizes(self) -> dict[int, int]:
        """Each class's smallest term size (as `extract` picks it)."""
        best = self._best_nodes()
        size: dict[int, int] = {}

        def of(root: int) -> int:
            if root not in size:
                size[root] = 1 + sum(of(c) for c in best[root][1])
            return size[root]

        for root in best:
            of(root)
        return size

    def data(self, class_id: int) -> Any:
        """The analysis data of a class (None without an analysis)."""
        self.rebuild()
        return self._classes[self.find(class_id)].data

    def extract(self, class_id: int) -> Term:
        """A smallest term (by AST size) in the class."""
        self.rebuild()
        best = self._best_nodes()
        built: dict[int, Term] = {}

        def build(root: int) -> Term:
            if root not in built:
                head, children = best[root]
                built[root] = Term(head, [build(c) for c in children])
            return built[root]

        return build(self.find(class_id))

    def _best_nodes(self) -> dict[int, Node]:
        """For each class, a node of least total size; costs relaxed to a fixpoint."""
        if self._extraction[0] == self._changes:
            return self._extraction[1]
        cost: dict[int, int] = {}
        best: dict[int, Node] = {}
        changed = True
        while changed:
            changed = False
            for root, cls in self._classes.items():
                for node in cls.nodes:
                    if all(c in cost for c in node[1]):
                        size = 1 + sum(cost[c] for c in node[1])
                        if size < cost.get(root, size + 1):
                            cost[root], best[root], changed = size, node, True
        self._extraction = (self._changes, best)
        return best

    # ---- explanations ---------------------------------------------------------------------

    def explain(self, a: Term, b: Term) -> list[Step]:
        """A flat explanation of a = b: whole terms, each one rule application from the last."""
        ia, ib = self.add(a), self.add(b)
        self.rebuild()
        if self.find(ia) != self.find(ib):
            raise NotEquivalentError(f"{a} and {b} are not proved equal in this e-graph; "
                                     "run more rules (or larger limits) first")
        return list(self._forest.explain(ia, ib))

    def _term(self, id_: int) -> Term:
        """The concrete term an id was added as."""
        if id_ not in self._terms:
            head, children = self._node[id_]
            self._terms[id_] = Term(head, [self._term(c) for c in children])
        return self._terms[id_]

    def __repr__(self) -> str:
        return f"EGraph({self.num_nodes} e-nodes, {self.num_classes} e-classes)"


class _WitnessFacts(Facts):
    """Facts about the witness ids of a match: the same answers `TermFacts` gives for their terms
    (the atom of a leaf; analysis data folded over the id's own term, not merged over its class)."""

    def __init__(self, egraph: EGraph, witness: dict[str, int]):
        self._egraph = egraph
        self._witness = witness

    def _id(self, var: str) -> int:
        if var not in self._witness:
            raise RuleError(f"a condition asks about {var}, which its pattern does not bind")
        return self._witness[var]

    def atom(self, var: str) -> str | None:
        head, children = self._egraph._node[self._id(var)]
        return None if children else head

    def data(self, var: str) -> Any:
        if self._egraph.analysis is None:
            raise RuleError(f"a condition reads the analysis data of {var}, but the e-graph "
                            "has no analysis")
        return self._egraph._term_data[self._id(var)]


def _bind(substs: list[_Subst], var: str, root: int) -> list[_Subst]:
    """Extend each substitution with var ↦ root, dropping those that bind var elsewhere."""
    out = []
    for subst in substs:
        bound = subst.get(var)
        if bound is None:
            out.append({**subst, var: root})
        elif bound == root:
            out.append(subst)
    return out


_Matcher = tuple[tuple[str, ...], Callable[[dict[int, Any], int], list[tuple[int, ...]]]]


@functools.lru_cache(maxsize=4096)
def _matcher(pattern: _Compiled) -> _Matcher:
    """A pattern with an op at its root as nested loops: (its variables in the order `_match`
    binds them, a function of (classes, root) giving each match as a tuple of their classes).
    One loop per op of the pattern, outermost first as `_match` recurses, so the matches come
    in `_match`'s order; a variable seen before is compared instead of bound. For

        add(add(a, b), c)

    it is

        for n0 in classes[root].by_op.get(op0, ()):
            for n1 in classes[n0[0]].by_op.get(op1, ()):
                v0 = n1[0]; v1 = n1[1]; v2 = n0[1]; out.append((v0, v1, v2))"""
    names: list[str] = []
    ops: list[tuple[str, int]] = []
    lines = ["def match(classes, root):", "    out = []"]
    depth = 1

    def emit(p: _Compiled, where: str) -> None:
        nonlocal depth
        if isinstance(p, str):
            if p in names:
                lines.append("    " * depth + f"if v{names.index(p)} != {where}: continue")
            else:
                names.append(p)
                lines.append("    " * depth + f"v{len(names) - 1} = {where}")
            return
        op, args = p
        n = len(ops)
        ops.append(op)
        lines.append("    " * depth + f"for n{n} in classes[{where}].by_op.get(op{n}, ()):")
        depth += 1
        for k, arg in enumerate(args):
            emit(arg, f"n{n}[{k}]")

    assert not isinstance(pattern, str)
    emit(pattern, "root")
    lines.append("    " * depth + f"out.append(({''.join(f'v{i}, ' for i in range(len(names)))}))")
    lines.append("    return out")
    scope: dict[str, Any] = {f"op{i}": op for i, op in enumerate(ops)}
    exec("\n".join(lines), scope)   # our own loops: no user text reaches them
    return tuple(names), scope["match"]


_Lookup = Callable[[tuple[int, ...], list[int], dict[Node, int], Callable[[int], int]],
                   int | None]


@functools.lru_cache(maxsize=4096)
def _lookup(pattern: _Compiled, names: tuple[str, ...]) -> _Lookup:
    """`EGraph._lookup_instance` of `pattern` as straight-line code over a match tuple (the
    classes of `names`, in order): a function of (found, union-find, memo, find) giving the
    class of the pattern's instance, or None where it is not represented. For

        add(a, add(b, c))   with names (a, b, c)

    it is

        x0 = found[0]; if uf[x0] != x0: x0 = find(x0)
        x1 = found[1]; ...; x2 = found[2]; ...
        x3 = memo.get((op0, (x1, x2))); if x3 is None: return None
        if uf[x3] != x3: x3 = find(x3)
        x4 = memo.get((op1, (x0, x3))); ...; return x4"""
    lines = ["def lookup(found, uf, memo, find):"]
    heads: list[str] = []
    count = 0

    def emit(p: _Compiled) -> str:
        nonlocal count
        if isinstance(p, str):
            var = f"x{count}"
            count += 1
            lines.append(f"    {var} = found[{names.index(p)}]")
        else:
            (head, _), args = p
            children = [emit(a) for a in args]
            heads.append(head)
            var = f"x{count}"
            count += 1
            lines.append(f"    {var} = memo.get((head{len(heads) - 1}, "
                         f"({''.join(c + ', ' for c in children)})))")
            lines.append(f"    if {var} is None: return None")
        lines.append(f"    if uf[{var}] != {var}: {var} = find({var})")
        return var

    lines.append(f"    return {emit(pattern)}")
    scope: dict[str, Any] = {f"head{i}": head for i, head in enumerate(heads)}
    exec("\n".join(lines), scope)   # our own code: no user text reaches it
    return cast(_Lookup, scope["lookup"])


def _depth(pattern: _Compiled) -> int:
    """How many parent steps a pattern's variables are below its root (0: a variable)."""
    if isinstance(pattern, str):
        return 0
    return 1 + max((_depth(a) for a in pattern[1]), default=0)


def _compile(pattern: Term) -> _Compiled:
    if is_var(pattern.head):
        return pattern.head
    return ((pattern.head, len(pattern.args)), tuple(_compile(a) for a in pattern.args))
