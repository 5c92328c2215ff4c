"""egglog as an independent oracle: the axiom table compiled to an egglog program.

Our e-graph (`prism.expr.egraph`) decides equivalence and explains it. This module decides the
same question with egglog 13.2 (saturation only, no proofs: REFERENCE.md §4.7) from THE SAME
table, `prism.expr.axioms.AXIOMS`: each axiom's lhs/rhs patterns become an egglog rule (two for a
bidirectional axiom) whose premises state its condition. Nothing of our e-graph is reused, so an
agreement between the two is evidence about both.

The program (`egglog_program` returns it, for reading):

- one sort `Term`; a constructor per term head, CamelCased (`part` → `Part`, `rms_norm` →
  `RmsNorm`), of the head's arity; every leaf (kernel input, dim index, axis, scalar) is
  `(Leaf "text")`;
- the tensor analysis as egglog functions filled by egglog rules (ruleset `analysis`):
  `(shape t)`, the data dims as a `(Vec i64)`; `(axes t)`, the parallel axes as a bit set; and,
  given as facts on the leaves, `(dim-index d)`, `(axis-bit g)`, `(axis-size g)`,
  `(scalar-atom c)`, `(word-atom a)`. A term has a shape exactly when `TensorAnalysis` gives it
  one: the shape rules check what `tensor_terms._make` checks;
- the axioms (ruleset `axioms`): `(rule ((= root LHS) guards condition) ((union root RHS)))`,
  where every tensor variable must have a shape (our `_guarded`) and the condition's words
  (`distinct`, `dim_from_end`, `size_one`, ...) become premises over those i64 facts.

One iteration saturates the analysis, then runs the axioms once; between iterations the goal
(target = candidate) and the limits are checked.

Where egglog's decision may differ from our e-graph's:
- sizes are always concrete integers (the graphs' own). Ours has constants where the graph's
  sizes are constant (`TensorAnalysis(shapes, axis_sizes)`), symbols otherwise; over symbols,
  a coincidence of sizes can let `size_one` or `same_dim` hold in egglog only. A split that does
  not divide its dim has no shape here (ours would carry the fraction);
- egglog's facts belong to an e-class, while our conditions read the witness term's own data;
- a merge of two e-classes of different shapes (an unsound axiom) stops egglog (`:no-merge`),
  reported as stop reason "conflict", as our analysis raises on it;
- the time and node limits are checked between iterations, so one iteration may overrun them.

A condition is data (`prism.expr.axioms.Condition(word, args)`); each word of the vocabulary has
an encoder here. An axiom whose condition has no encoder cannot be stated: it is left out and
listed, with the reason, in `DROPPED` (tests assert it is empty).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from prism.expr.axioms import AXIOMS, Axiom, Condition
from prism.expr.rules import FORWARD, Pattern, is_var
from prism.expr.tensor_terms import ATOM_ARGS, COMPUTE, MOVEMENT
from prism.expr.terms import Term
from prism.ir.ops import OPS

DECLARATIONS = """\
(sort Shape (Vec i64))
(function shape (Term) Shape :no-merge)      ; a tensor's data dims, outermost first
(function axes (Term) i64 :no-merge)         ; its parallel axes, one bit per axis
(function dim-index (Term) i64 :no-merge)    ; a dim atom's value
(function axis-bit (Term) i64 :no-merge)     ; an axis atom's bit
(function axis-size (Term) i64 :no-merge)    ; an axis atom's size
(relation scalar-atom (Term))                ; an atom that reads as a number
(relation word-atom (Term))                  ; an atom that is not a dim index
(ruleset analysis)
(ruleset axioms)"""

# One iteration: the analysis to a fixpoint, then every axiom once.
STEP = "(run-schedule (saturate (run analysis)) (run axioms))"
MAX_AXES = 62  # axis bits in one i64


# -- the signature: one constructor per head ------------------------------------------------------

def _arity(head: str) -> int:
    atoms = len(ATOM_ARGS.get(head, {}))
    return 1 + atoms if head in MOVEMENT else OPS[head].arity + atoms


SIGNATURE: dict[str, int] = {h: _arity(h) for h in sorted(MOVEMENT | COMPUTE)}


def constructor(head: str) -> str:
    """The egglog constructor of a head: `rms_norm` → `RmsNorm`."""
    return "".join(part.capitalize() for part in head.split("_"))


def _datatype() -> str:
    ctors = [f"({constructor(h)}{' Term' * n})" for h, n in SIGNATURE.items()]
    return "(datatype Term (Leaf String)\n  " + "\n  ".join(ctors) + ")"


def _string(text: str) -> str:
    if '"' in text or "\\" in text:
        raise ValueError(f"atom {text!r}: quotes and backslashes cannot be written to egglog")
    return f'"{text}"'


def to_egglog(term: Term) -> str:
    """A term as an egglog expression: `(part X 1 gx)` → `(Part (Leaf "X") (Leaf "1") ...)`."""
    if term.is_leaf:
        return f"(Leaf {_string(term.head)})"
    if SIGNATURE.get(term.head) != len(term.args):
        raise ValueError(f"{term.head} with {len(term.args)} argument(s) is not a term head "
                         f"(known: {', '.join(f'{h}/{n}' for h, n in SIGNATURE.items())})")
    return f"({constructor(term.head)} {' '.join(to_egglog(a) for a in term.args)})"


# -- the analysis: what tensor_terms._make computes, as egglog rules ------------------------------

def _rule(name: str, query: Sequence[str], actions: Sequence[str], ruleset: str) -> str:
    return (f"(rule ({' '.join(query)})\n      ({' '.join(actions)})\n"
            f"      :ruleset {ruleset} :name {_string(name)})")


_SAME = ["(= s (shape t))", "(= m (axes t))"]
_KEEP = ["(set (shape e) s)", "(set (axes e) m)"]
_AXIS = ["(= bit (axis-bit g))"]
_DIM = ["(= i (dim-index d))", "(< i (vec-length s))"]
# head → (its children's names, premises, actions), for the heads with one rule each
_SHAPE_RULES: dict[str, tuple[str, list[str], list[str]]] = {
    # split dim i into |g| chunks along a new axis g
    "part": ("t d g", [*_SAME, *_DIM, *_AXIS, "(= 0 (& m bit))", "(= n (axis-size g))",
                       "(= 0 (% (vec-get s i) n))"],
             ["(set (shape e) (vec-set s i (/ (vec-get s i) n)))", "(set (axes e) (| m bit))"]),
    # concatenate the chunks along axis g back into dim i
    "comb": ("t d g", [*_SAME, *_DIM, *_AXIS, "(!= 0 (& m bit))", "(= n (axis-size g))"],
             ["(set (shape e) (vec-set s i (* (vec-get s i) n)))", "(set (axes e) (^ m bit))"]),
    "rep": ("t g", [*_SAME, *_AXIS, "(= 0 (& m bit))"],
            ["(set (shape e) s)", "(set (axes e) (| m bit))"]),
    "red": ("t g", [*_SAME, *_AXIS, "(!= 0 (& m bit))"],
            ["(set (shape e) s)", "(set (axes e) (^ m bit))"]),
    "mred": ("t g", [*_SAME, *_AXIS, "(!= 0 (& m bit))"],
             ["(set (shape e) s)", "(set (axes e) (^ m bit))"]),
}
# [..., m, k] @ [..., k, n]: equal batch dims (the last two zeroed, the rest compared)
_MATMUL = ("a b", ["(= sa (shape a))", "(= sb (shape b))", "(= m (axes a))", "(= m (axes b))",
                   "(= r (vec-length sa))", "(= r (vec-length sb))", "(>= r 2)",
                   "(= (vec-get sa (- r 1)) (vec-get sb (- r 2)))",
                   "(= (vec-set (vec-set sa (- r 1) 0) (- r 2) 0) "
                   "(vec-set (vec-set sb (- r 1) 0) (- r 2) 0))"],
           ["(set (shape e) (vec-set sa (- r 1) (vec-get sb (- r 1))))", "(set (axes e) m)"])


def _compute_spec(head: str) -> tuple[str, list[str], list[str]]:
    """The shape rule of a one-tensor compute head, from its atoms (the op table's
    `term_attrs`): a reduced dim kept with size 1, a norm's dim the last, scalars numbers."""
    od = OPS[head]
    if od.category == "matmul":
        return _MATMUL
    children, query, actions = ["t"], list(_SAME), list(_KEEP)
    for j, attr in enumerate(od.term_attrs):
        if attr == "last":
            children.append("d")
            query += ["(= i (dim-index d))", "(= i (- (vec-length s) 1))"]
        elif attr == "dim":
            children.append("d")
            query += _DIM
            actions = ["(set (shape e) (vec-set s i 1))", "(set (axes e) m)"]
        else:
            children.append(f"c{j}")
            query.append(f"(scalar-atom c{j})")
    return " ".join(children), query, actions


def _binary_rules(head: str, max_rank: int) -> Iterator[str]:
    """Broadcasting, one rule per rank: each dim equal, or 1 on one side; the result the larger."""
    for r in range(max_rank + 1):
        dims = [f"(= x{i} (vec-get sa {i})) (= y{i} (vec-get sb {i})) "
                f"(= 0 (* (* (- x{i} y{i}) (- x{i} 1)) (- y{i} 1)))" for i in range(r)]
        out = " ".join(f"(max x{i} y{i})" for i in range(r))
        query = [f"(= e ({constructor(head)} a b))", "(= sa (shape a))", "(= sb (shape b))",
                 "(= m (axes a))", "(= m (axes b))", f"(= {r} (vec-length sa))",
                 f"(= {r} (vec-length sb))", *dims]
        shape = f"(vec-of {out})" if r else "(vec-empty)"
        yield _rule(f"shape-{head}-rank{r}", query, [f"(set (shape e) {shape})",
                                                      "(set (axes e) m)"], "analysis")


def analysis_rules(max_rank: int) -> list[str]:
    """The shape and axes rules of every head, for tensors of rank up to `max_rank`."""
    out: list[str] = []
    for head in SIGNATURE:
        category = "movement" if head in MOVEMENT else OPS[head].category
        if category == "binary":
            out.extend(_binary_rules(head, max_rank))
            continue
        children, query, actions = _SHAPE_RULES[head] if head in _SHAPE_RULES else \
            _compute_spec(head)
        node = f"(= e ({constructor(head)} {children}))"
        out.append(_rule(f"shape-{head}", [node, *query], actions, "analysis"))
    return out


# -- the axioms: patterns and conditions as egglog rules ------------------------------------------

class _Unencodable(Exception):
    """A condition egglog cannot be given (its reason is reported in DROPPED)."""


class _Premises:
    """The premises of one rule; facts about a variable are bound once, to `?v_fact`."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def add(self, line: str) -> None:
        if line not in self.lines:
            self.lines.append(line)

    def _bind(self, var: str, fact: str, expr: str) -> str:
        name = f"{var}_{fact}"
        self.add(f"(= {name} {expr})")
        return name

    def shape(self, v: str) -> str:
        return self._bind(v, "shape", f"(shape {v})")

    def index(self, v: str) -> str:
        return self._bind(v, "index", f"(dim-index {v})")

    def name(self, v: str) -> str:
        self.add(f"(= {v} (Leaf {v}_name))")
        return f"{v}_name"


def _distinct(p: _Premises, a: str, b: str) -> None:
    p.add(f"(!= {p.name(a)} {p.name(b)})")


def _nonzero_atom(p: _Premises, v: str) -> None:
    p.add(f"(scalar-atom {v})")
    p.add(f'(!= {p.name(v)} "0.0")')


def _dim_from_end(p: _Premises, d: str, t: str, k: int) -> None:
    p.add(f"(= {p.index(d)} (- (vec-length {p.shape(t)}) {int(k)}))")


def _batch_dim(p: _Premises, d: str, t: str) -> None:
    p.add(f"(< {p.index(d)} (- (vec-length {p.shape(t)}) 2))")


def _size_one(p: _Premises, t: str, d: str) -> None:
    s, i = p.shape(t), p.index(d)
    p.add(f"(< {i} (vec-length {s}))")
    p.add(f"(= 1 (vec-get {s} {i}))")


def _last_size_one(p: _Premises, t: str) -> None:
    s = p.shape(t)
    p.add(f"(>= (vec-length {s}) 1)")
    p.add(f"(= 1 (vec-get {s} (- (vec-length {s}) 1)))")


def _same_shape(p: _Premises, a: str, b: str) -> None:
    p.add(f"(= {p.shape(a)} {p.shape(b)})")


def _same_dim(p: _Premises, a: str, b: str, d: str) -> None:
    sa, sb, i = p.shape(a), p.shape(b), p.index(d)
    p.add(f"(< {i} (vec-length {sa}))")
    p.add(f"(< {i} (vec-length {sb}))")
    p.add(f"(= (vec-get {sa} {i}) (vec-get {sb} {i}))")


def _is_tensor(p: _Premises, *vs: str) -> None:
    for v in vs:
        p.shape(v)


def _is_axis(p: _Premises, *vs: str) -> None:
    for v in vs:
        p.add(f"(word-atom {v})")


def _axis_size(p: _Premises, v: str) -> str:
    return p._bind(v, "size", f"(axis-size {v})")


def _axis_product(p: _Premises, g: str, a: str, b: str) -> None:
    p.add(f"(= {_axis_size(p, g)} (* {_axis_size(p, a)} {_axis_size(p, b)}))")


def _same_axis_size(p: _Premises, g: str, h: str) -> None:
    p.add(f"(= {_axis_size(p, g)} {_axis_size(p, h)})")


def _all_of(p: _Premises, *conds: Condition) -> None:
    for c in conds:
        _encode(p, c)


# word of `prism.expr.axioms`' condition vocabulary → its premises
WORDS: dict[str, Callable[..., None]] = {
    "distinct": _distinct, "dim_from_end": _dim_from_end, "batch_dim": _batch_dim,
    "size_one": _size_one, "last_size_one": _last_size_one, "same_shape": _same_shape,
    "same_dim": _same_dim, "is_tensor": _is_tensor, "is_axis": _is_axis, "all_of": _all_of,
    "nonzero_atom": _nonzero_atom, "axis_product": _axis_product,
    "same_axis_size": _same_axis_size,
}


def _encode(p: _Premises, cond: Condition) -> None:
    """The premises of a condition: its word's encoder on its arguments."""
    if not isinstance(cond, Condition) or cond.word not in WORDS:
        raise _Unencodable(f"the condition {cond!r} has no egglog encoding")
    WORDS[cond.word](p, *cond.args)


def _egglog_pattern(term: Term) -> str:
    """A pattern side: variables stay `?name`, other leaves are `(Leaf ...)`."""
    if is_var(term.head):
        return term.head
    if term.is_leaf:
        return f"(Leaf {_string(term.head)})"
    return f"({constructor(term.head)} {' '.join(_egglog_pattern(a) for a in term.args)})"


def _tensor_vars(term: Term, role: str = "tensor") -> Iterator[str]:
    """The variables of a pattern that stand for tensors (not dim, axis or scalar atoms)."""
    if is_var(term.head) and role == "tensor":
        yield term.head
    atoms = ATOM_ARGS.get(term.head, {})
    for i, arg in enumerate(term.args):
        yield from _tensor_vars(arg, atoms.get(i, "tensor"))


def _axiom_rules(ax: Axiom) -> list[str]:
    rule = ax.rule()
    out = []
    for direction in rule.directions():
        source, target = (Pattern(s).term for s in rule.sides(direction))
        if is_var(source.head):
            raise _Unencodable(f"the {direction} side {source} is a bare variable")
        p = _Premises()
        p.add(f"(= __root {_egglog_pattern(source)})")
        for v in dict.fromkeys(_tensor_vars(source)):  # our _guarded: every tensor well-shaped
            p.shape(v)
        if ax.condition is not None:
            _encode(p, ax.condition)
        name = ax.name if direction == FORWARD else f"{ax.name} (backward)"
        out.append(_rule(name, p.lines, [f"(union __root {_egglog_pattern(target)})"],
                         "axioms"))
    return out


def compile_axioms(axioms: Sequence[Axiom] = AXIOMS) -> tuple[list[str], dict[str, str]]:
    """The egglog rules of the axioms, and the axioms left out with the reason for each."""
    rules: list[str] = []
    dropped: dict[str, str] = {}
    for ax in axioms:
        try:
            rules.extend(_axiom_rules(ax))
        except _Unencodable as e:
            dropped[ax.name] = str(e)
    return rules, dropped


AXIOM_RULES, DROPPED = compile_axioms()


# -- the program and the decision -----------------------------------------------------------------

def _leaf_facts(leaves: Sequence[str], input_shapes: Mapping[str, Sequence[int]],
                axis_sizes: Mapping[str, int]) -> list[str]:
    axes = [a for a in leaves if a in axis_sizes]
    if len(axes) > MAX_AXES:
        raise ValueError(f"{len(axes)} axes; the oracle's bit sets hold {MAX_AXES}")
    bits = {a: 1 << i for i, a in enumerate(axes)}
    facts = []
    for text in leaves:
        leaf = f"(Leaf {_string(text)})"
        if text in input_shapes:
            dims = " ".join(str(int(n)) for n in input_shapes[text])
            facts += [f"(set (shape {leaf}) {f'(vec-of {dims})' if dims else '(vec-empty)'})",
                      f"(set (axes {leaf}) 0)"]
            continue
        if text.isdigit():
            facts.append(f"(set (dim-index {leaf}) {int(text)})")
        else:
            facts.append(f"(word-atom {leaf})")
        if text in bits:
            facts += [f"(set (axis-bit {leaf}) {bits[text]})",
                      f"(set (axis-size {leaf}) {int(axis_sizes[text])})"]
        if _is_number(text) or text == "none":      # a number, or clamp's absent bound
            facts.append(f"(scalar-atom {leaf})")
    return facts


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _leaves(*terms: Term) -> list[str]:
    return list(dict.fromkeys(t.head for term in terms for _, t in term.subterms() if t.is_leaf))


def base_program(max_rank: int = 4) -> str:
    """Declarations, analysis rules (binary ops up to `max_rank`) and the axioms' rules."""
    return "\n".join([_datatype(), DECLARATIONS, *analysis_rules(max_rank), *AXIOM_RULES]) + "\n"


def problem_program(terms: Mapping[str, Term], input_shapes: Mapping[str, Sequence[int]],
                    axis_sizes: Mapping[str, int]) -> str:
    """The facts on the leaves, and each term bound to its global (`$target`, ...)."""
    facts = _leaf_facts(_leaves(*terms.values()), input_shapes, axis_sizes)
    return "\n".join([*facts, *(f"(let ${name} {to_egglog(t)})" for name, t in terms.items())])


def _max_rank(input_shapes: Mapping[str, Sequence[int]]) -> int:
    # No head raises a rank: the inputs' bound all. 4 covers Mirage's tensors with one program.
    return max([4, *(len(s) for s in input_shapes.values())])


def egglog_program(target: Term, candidate: Term, input_shapes: Mapping[str, Sequence[int]],
                   axis_sizes: Mapping[str, int]) -> str:
    """The whole egglog program that `egglog_check` runs (before its iterations), to read."""
    return base_program(_max_rank(input_shapes)) + problem_program(
        {"target": target, "candidate": candidate}, input_shapes, axis_sizes) + "\n"


# Loading the base program costs about half a second (parsing and compiling the rules), the
# problem itself milliseconds: a loaded EGraph is kept per base program and each problem runs
# between (push) and (pop). A caller takes the EGraph out of this dict while using it, so two
# threads never share one; a problem that fails inside egglog does not put it back.
_LOADED: dict[str, Any] = {}


class _Session:
    """A loaded EGraph holding one problem: run egglog text, query, then `close()` (pop)."""

    def __init__(self, input_shapes: Mapping[str, Sequence[int]], problem: str):
        from egglog import bindings  # heavy (a native library): loaded on first use

        self.error = bindings.EggSmolError
        self._parsed: dict[str, list[Any]] = {}
        self._base = base_program(_max_rank(input_shapes))
        self._egraph = _LOADED.pop(self._base, None)
        if self._egraph is None:
            self._egraph = bindings.EGraph()
            self.run(self._base)
        self.run("(push)")
        self.run(problem)

    def run(self, text: str) -> list[Any]:
        if text not in self._parsed:  # the loop runs the same few commands again and again
            self._parsed[text] = self._egraph.parse_program(text)
        return self._egraph.run_program(*self._parsed[text])

    def holds(self, fact: str) -> bool:
        try:
            self.run(f"(check {fact})")
        except self.error:
            return False
        return True

    def value(self, expr: str) -> str | None:
        """The value of a function call as egglog prints it, or None where it has none."""
        try:
            (out,) = self.run(f"(extract {expr})")
        except self.error:
            return None
        return str(out.termdag.to_string(out.term))

    def nodes(self) -> int:
        heads = {constructor(h) for h in SIGNATURE} | {"Leaf"}
        (sizes,) = self.run("(print-size)")
        return sum(n for name, n in sizes.sizes if name in heads)

    def close(self) -> None:
        self.run("(pop)")
        _LOADED[self._base] = self._egraph


@dataclass(frozen=True)
class EgglogReport:
    """What egglog decided: `equivalent` is True (target = candidate was derived), False (the
    rules saturated without it) or None (a limit or a conflict stopped it first)."""

    equivalent: bool | None
    stop_reason: str  # goal | saturated | iter_limit | node_limit | time_limit | conflict
    iterations: int
    nodes: int
    seconds: float
    detail: str = ""

    def __str__(self) -> str:
        return (f"egglog: {self.stop_reason} after {self.iterations} iteration(s), "
                f"{self.nodes} e-nodes, {self.seconds:.3f} s" +
                (f" ({self.detail})" if self.detail else ""))


def egglog_check(target: Term, candidate: Term, input_shapes: Mapping[str, Sequence[int]],
                 axis_sizes: Mapping[str, int], *, iterations: int = 30,
                 node_limit: int = 200_000, timeout_s: float = 10.0) -> EgglogReport:
    """Saturate the two terms with the axiom table in egglog until they meet or a limit is hit.

    `input_shapes` gives each kernel input leaf its concrete shape; `axis_sizes` each axis name
    its size (an axis name means one axis in both terms, as in `prism.verify.verify`). The limits
    are checked between iterations. The time limit counts the iterations only: loading the
    base program (the axiom table compiled, a few seconds the first time in a process) is a
    fixed cost that says nothing about this problem, and a busy machine must not turn it into a
    "time_limit" verdict. `seconds` reports both."""
    from egglog import bindings

    start = time.perf_counter()
    nodes = done = 0

    def report(equivalent: bool | None, reason: str, detail: str = "") -> EgglogReport:
        return EgglogReport(equivalent, reason, done, nodes, time.perf_counter() - start, detail)

    problem = problem_program({"target": target, "candidate": candidate}, input_shapes,
                              axis_sizes)
    try:
        session = _Session(input_shapes, problem)
        loaded = time.perf_counter()
        result: EgglogReport | None = None
        while result is None:
            nodes = session.nodes()
            if session.holds("(= $target $candidate)"):
                result = report(True, "goal")
            elif done >= iterations:
                result = report(None, "iter_limit")
            elif nodes > node_limit:
                result = report(None, "node_limit")
            elif time.perf_counter() - loaded > timeout_s:
                result = report(None, "time_limit")
            else:
                updated = session.run(STEP)[0].report.updated
                done += 1
                if not updated:  # nothing new: the goal, checked above, cannot hold now
                    result = report(False, "saturated")
        session.close()
    except bindings.EggSmolError as e:  # e.g. "Illegal merge": two shapes met in one e-class
        return report(None, "conflict", str(e).splitlines()[0])
    return result


def egglog_equivalent(target: Term, candidate: Term, input_shapes: Mapping[str, Sequence[int]],
                      axis_sizes: Mapping[str, int], *, iterations: int = 30,
                      node_limit: int = 200_000, timeout_s: float = 10.0) -> bool | None:
    """True if egglog derives target = candidate from the axioms; False if it saturates without;
    None if it stopped at a limit (or a shape conflict) before deciding."""
    return egglog_check(target, candidate, input_shapes, axis_sizes, iterations=iterations,
                        node_limit=node_limit, timeout_s=timeout_s).equivalent


def egglog_analysis(terms: Sequence[Term], input_shapes: Mapping[str, Sequence[int]],
                    axis_sizes: Mapping[str, int]
                    ) -> list[tuple[frozenset[str], tuple[int, ...]] | None]:
    """egglog's analysis of each term (no axiom applied): its axes and data shape, or None where
    it is not well-shaped. `TensorAnalysis`, at the same sizes, is its oracle."""
    globals_ = {f"t{i}": t for i, t in enumerate(terms)}
    session = _Session(input_shapes, problem_program(globals_, input_shapes, axis_sizes))
    session.run("(run-schedule (saturate (run analysis)))")
    bits = {text: session.value(f"(axis-bit (Leaf {_string(text)}))") for text in axis_sizes}
    found = [(session.value(f"(axes ${name})"), session.value(f"(shape ${name})"))
             for name in globals_]
    session.close()
    out: list[tuple[frozenset[str], tuple[int, ...]] | None] = []
    for axes, shape in found:
        if axes is None or shape is None:
            out.append(None)
            continue
        dims = shape.removeprefix("(vec-of").removeprefix("(vec-empty").removesuffix(")")
        out.append((frozenset(a for a, bit in bits.items() if bit and int(axes) & int(bit)),
                    tuple(int(n) for n in dims.split())))
    return out


__all__ = ["AXIOM_RULES", "DROPPED", "EgglogReport", "analysis_rules", "base_program",
           "compile_axioms", "egglog_analysis", "egglog_check", "egglog_equivalent",
           "egglog_program", "problem_program", "to_egglog"]
