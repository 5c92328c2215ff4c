"""How many ops a completion of a block graph needs, counting the operands it must build too.

`out_of_reach`'s distances count only the ops on a waiting tensor's way to the stored output.
An op on that way also reads other operands (its *siblings*), and a sibling that the block
graph does not hold yet must be built by ops of their own. Most of a rich target's e-graph is
reachable in few ops only beside siblings that take many (nTrans: `mul(H, X)` is 4 ops below the
output, each beside a term of the expanded square), so the distances alone keep families that
no completion within the cap can finish.

Both numbers below count *op applications* the e-graph represents (`Completion`): an op's
abstract expression matched at a class, its operands' classes bound. Every op of a program
whose stored term the e-graph represents is one, at its result's class.

- **heights** `h_F(c)`: the least height, in ops, of a term of class c whose leaves are leaf
  classes (inputs, constants) or classes in F, the classes of the tensors the block graph
  holds. A new tensor of class c has at least `h_F(c)` new tensors below it, itself included
  (by induction: an op over operands of heights ≤ n makes a class of height ≤ n + 1).
- **the chain bound** of a waiting tensor w: over every chain of op applications from an
  output class down to w's class, the largest of (its ops) and (for each op on it at depth
  d, 1 for the output's own op, and each other operand s of it) d + `h_F(s)`; then the least
  over chains. In any completion, take the way t_1, ..., t_m from w to the stored tensor (ops
  k = 1..m, op k at depth m - k + 1) and an operand a of op k besides t_(k-1): the new tensors
  below a meet the way only in t_1..t_(k-1), so the completion applies at least
  m + h_F(class a) - (k - 1) ops. Its own chain bounds its op count from below, and the
  least over chains does too.

With `slack` 1 the heights are those of the block graph *before* its newest op: that op read
only held tensors, so its result has height at most 1 over F, and replacing it in any term by
that derivation raises the height by at most 1: the heights after it are at least these less 1.
The search decides an op's family before building it (`Generator._prejudge`) this way, from the
parent's heights, and the built family again with its own.

The tables are built once per target and set of op kinds; heights per set of held classes are
cached (each is its parent's with one class more, updated upward from that class).
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Iterable

from prism.expr.egraph import EGraph
from prism.expr.terms import Term

FAR = 1 << 20          # a class no term of leaves and held classes reaches; no chain fits
_CACHE = 1024          # heights kept per search (a list per set of held classes)


class Completion:
    """The target's e-graph as the two bounds read it: dense class numbers, each *op
    application* the e-graph represents as (its weight, 1; its operands' classes), each class's
    parents, and the heights over leaf classes alone.

    An op application is a match of an op's pattern (`patterns`: its abstract expression over
    variables `?0`, `?1`, ..., `ops_patterns`) at a class: the pattern's top an e-node of the
    class, its inner nodes e-nodes of the classes below, its constants leaves there, each
    variable bound to a class (one variable twice, one class). Every op of a program whose
    stored term the e-graph represents is such a match at its result's class, its operands'
    classes bound (the e-graph holds every subterm of a term it represents), so counting ops
    this way is exact where counting e-nodes (`inner_heads`) lets a head an op only puts
    inside its term stand alone for free."""

    def __init__(self, egraph: EGraph, roots: Iterable[int], patterns: Iterable[Term]):
        classes = egraph.classes()
        self.number = {c: i for i, c in enumerate(classes)}
        leafy = [any(not node.children for node in egraph.nodes(c)) for c in classes]
        applied: list[set[tuple[int, ...]]] = [set() for _ in classes]
        patterns = list(dict.fromkeys(patterns))
        for c in classes:
            i = self.number[c]
            for pattern in patterns:
                for binding in _match(egraph, pattern, c, {}):
                    applied[i].add(tuple(self.number[binding[v]]
                                         for v in _variables(pattern)))
        self.nodes: list[list[tuple[int, tuple[int, ...]]]] = [
            [(1, operands) for operands in sorted(ops)] for ops in applied]
        self.parents: list[list[tuple[int, int, tuple[int, ...]]]] = [[] for _ in classes]
        for p, nodes in enumerate(self.nodes):
            for weight, children in nodes:
                for child in set(children):
                    self.parents[child].append((p, weight, children))
        self.roots = sorted({self.number[egraph.find(r)] for r in roots})
        self.egraph = egraph
        self.leaf_heights = self._settle([0 if leafy[i] else FAR for i in range(len(classes))],
                                         [i for i in range(len(classes)) if leafy[i]])
        self._heights: dict[frozenset[int], list[int]] = {frozenset(): self.leaf_heights}
        self._upward: dict[int, dict[int, int]] = {}
        self._fits: dict[tuple[frozenset[int], int, int, int], bool] = {}

    def classes_of(self, class_ids: Iterable[int | None]) -> frozenset[int]:
        """The dense numbers of e-classes (None: a term the e-graph lacks, left out)."""
        return frozenset(self.number[self.egraph.find(c)] for c in class_ids if c is not None)

    def number_of(self, class_id: int) -> int:
        return self.number[self.egraph.find(class_id)]

    # -- heights ---------------------------------------------------------------------------

    def heights(self, held: frozenset[int]) -> list[int]:
        """`h_F` for F = `held` (dense class numbers), as a list by class number."""
        found = self._heights.get(held)
        if found is not None:
            return found
        base, extra = self.leaf_heights, sorted(held)
        for c in held:      # a cached set with one class less: the search's parent, usually
            parent = self._heights.get(held - {c})
            if parent is not None:
                base, extra = parent, [c]
                break
        out = base
        for c in extra:
            if out[c]:
                out = self._settle([*out[:c], 0, *out[c + 1:]], [c])
        if len(self._heights) >= _CACHE:
            self._heights = {frozenset(): self.leaf_heights}
        self._heights[held] = out
        return out

    def _settle(self, h: list[int], lowered: list[int]) -> list[int]:
        """Lower the heights above the classes in `lowered` until no op application lowers
        one more (a class's height: least over its applications of 1 + the operands' largest)."""
        work = list(lowered)
        parents = self.parents
        while work:
            c = work.pop()
            for p, weight, children in parents[c]:
                if h[p] <= weight:
                    continue
                if len(children) == 2:
                    a, b = h[children[0]], h[children[1]]
                    v = weight + (a if a > b else b)
                else:
                    v = weight + max(h[x] for x in children)
                if v < h[p]:
                    h[p] = v
                    work.append(p)
        return h

    # -- the chain bound -------------------------------------------------------------------

    def upward(self, c: int) -> dict[int, int]:
        """The counted nodes from class `c` up to each class above it (0/1 breadth first)."""
        found = self._upward.get(c)
        if found is not None:
            return found
        dist = {c: 0}
        queue = deque([(0, c)])
        while queue:
            d, x = queue.popleft()
            if dist.get(x, FAR) < d:
                continue
            for p, weight, _ in self.parents[x]:
                if d + weight < dist.get(p, FAR):
                    dist[p] = d + weight
                    if weight:
                        queue.append((d + weight, p))
                    else:
                        queue.appendleft((d, p))
        if len(self._upward) >= _CACHE:
            self._upward.clear()
        self._upward[c] = dist
        return dist

    def fits(self, held: frozenset[int], c: int, remaining: int, slack: int = 0) -> bool:
        """Whether some chain from an output class down to class `c` has its bound within
        `remaining` (the module's chain bound, heights over `held` less `slack`)."""
        key = (held, c, remaining, slack)
        found = self._fits.get(key)
        if found is None:
            found = self._search(self.heights(held), c, remaining, slack)
            if len(self._fits) >= 16 * _CACHE:
                self._fits.clear()
            self._fits[key] = found
        return found

    def _search(self, h: list[int], goal: int, limit: int, slack: int) -> bool:
        # Dijkstra over (class, counted nodes so far) by the bound so far, which only grows
        # down a chain; a class reached again with no fewer counted nodes is dominated. The
        # counted nodes still to come are at least the class's distance up from the goal.
        up = self.upward(goal)
        fewest: dict[int, int] = {}
        heap = [(0, 0, r) for r in self.roots if up.get(r, FAR) <= limit]
        heapq.heapify(heap)
        nodes = self.nodes
        while heap:
            bound, m, p = heapq.heappop(heap)
            if p == goal:
                return True
            if fewest.get(p, FAR) <= m:
                continue
            fewest[p] = m
            for weight, children in nodes[p]:
                m2 = m + weight
                if m2 > limit:
                    continue
                if len(children) == 2:      # most e-nodes: the same steps, unrolled
                    a, b = children
                    for child, sibling in ((a, b), (b, a)):
                        below = up.get(child)
                        if below is None or m2 + below > limit or \
                                fewest.get(child, FAR) <= m2:
                            continue
                        got = m2 + h[sibling] - slack
                        if got < m2:
                            got = m2
                        if got < bound:
                            got = bound
                        if got <= limit:
                            heapq.heappush(heap, (got, m2, child))
                    continue
                for i, child in enumerate(children):
                    below = up.get(child)
                    if below is None or m2 + below > limit or fewest.get(child, FAR) <= m2:
                        continue
                    b = max(bound, m2)
                    for j, sibling in enumerate(children):
                        if j != i:
                            b = max(b, m2 + h[sibling] - slack)
                    if b <= limit:
                        heapq.heappush(heap, (b, m2, child))
        return False

    def output_height(self, held: frozenset[int]) -> int:
        """The least height over the output classes: no completion builds an output in fewer
        new ops (one that applies none stores a held tensor, whose class is held)."""
        h = self.heights(held)
        return min(h[r] for r in self.roots)


VARIABLE = "?"          # a pattern's variables: ?0, ?1, ...


def ops_patterns(kinds: Iterable[str], choices: Callable[[str], list[dict[str, object]]],
                 ranks: Iterable[int]) -> list[Term]:
    """The abstract expression of each op of `kinds`, with each attribute set `choices` gives
    it, on operands of each rank in `ranks`, over variables: what `Completion` matches. An op
    whose expression is its operand's (`nored`; `redtox_ld_sum`, whose sum of split tiles is
    the tile's term at the trivial instantiation) applies nothing: its result has its operand's
    class."""
    from prism.ir.ops import OPS
    from prism.search.abstract import op_term
    out = []
    for kind in kinds:
        if kind == "redtox_ld_sum":
            continue
        args = [Term(f"{VARIABLE}{i}", ()) for i in range(max(OPS[kind].arity, 1))]
        for attrs in choices(kind):
            for rank in ranks:
                pattern = op_term(kind, args, rank, dict(attrs))
                if pattern.args:
                    out.append(pattern)
    return out


def _variables(pattern: Term) -> list[str]:
    """The pattern's variables, each once, in order."""
    return sorted({t.head for _, t in pattern.subterms()
                   if not t.args and t.head.startswith(VARIABLE)})


def _match(egraph: EGraph, pattern: Term, cls: int, binding: dict[str, int]
           ) -> list[dict[str, int]]:
    """Every binding of the pattern's variables under which it matches at class `cls`."""
    cls = egraph.find(cls)
    if not pattern.args:
        if pattern.head.startswith(VARIABLE):
            bound = binding.get(pattern.head)
            if bound is None:
                return [{**binding, pattern.head: cls}]
            return [binding] if bound == cls else []
        return [binding] if any(n.head == pattern.head and not n.children
                                for n in egraph.nodes(cls)) else []
    out = []
    for node in egraph.nodes(cls):
        if node.head != pattern.head or len(node.children) != len(pattern.args):
            continue
        found = [binding]
        for sub, child in zip(pattern.args, node.children, strict=True):
            found = [b for f in found for b in _match(egraph, sub, child, f)]
            if not found:
                break
        out.extend(found)
    return out
