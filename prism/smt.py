"""The z3 layer: proofs of the axiom table, for all shapes and all real values.

The only module that imports z3, and only inside functions, so `import prism` does not load it.

    prove_axiom(AXIOMS_BY_NAME["comb-part"]) -> SmtResult(status="proved", ...)

Semantics (what `tensor_terms.evaluate` computes, written for z3). A tensor of rank r is a
function from r integer indices to the reals; sizes are positive integer constants (symbolic:
z3 Ints) and every index is constrained to its range; an axis g of size |g| adds an integer
position index in [0, |g|). A term is encoded as a real expression of its free indices (the
positions of its axes, by name, then its data indices):

    leaf ?a            an uninterpreted function of (its positions, its data indices)
    (part t d g)       at (pos_g, i): t at i with i_d := pos_g·w + i_d, w the result's dim d
    (comb t d g)       at i: t at (pos_g := i_d div w, i_d := i_d mod w), w t's dim d
    (rep t g)          t, ignoring pos_g
    (red t g)          Σ_{p<|g|} t at pos_g := p;  (mred t g) is that / |g|
    compute heads      as the op table's `smt` entry says (`prism.ir.ops.OpDef.smt`):
      polynomial       add, sub, neg, mul, square, mul_scalar, add_scalar as +, −, ·, x·x, t·c,
                       t + c; div as a · 1/b, reciprocal as 1/x
      piecewise        relu, abs, leaky_relu, clamp, maximum, minimum as z3 if-then-else terms
      uninterpreted    exp, silu, gelu, sqrt, pow, tanh, log, ...: any function of the operands
      reductions       sum, mean, matmul: Σ over a data index (mean: / its size); max, min and
                       logsumexp: an uninterpreted function of the row's size and values;
                       (rms_norm t d e) is t · 1/sqrt(mean of t² over the last dim + e) and
                       layer_norm the same of t − mean t, the op table's definitions
    broadcasting       an operand's dim that is literally 1 is indexed at 0

A size that the analysis writes as a quotient D/g (a split dim) is a fresh Int w with D = g·w.

Where this differs from `evaluate` (float64):
- reals, not floats: no rounding, no overflow, no inf or nan;
- every divisor is ASSUMED non-zero (numpy gives inf or nan; z3's x/0 is unconstrained): each
  divisor free of summation indices is asserted ≠ 0, and a proof holds whatever 1/0 is;
- exp, silu, gelu, sqrt, pow, ... are any functions: what holds for every function holds for
  them, but an identity particular to one (e^(a+b) = e^a·e^b) is not provable here (`unknown`);
- sums are uninterpreted, with the laws below, instead of computed.

Sums. `Σ_{k<n} f(k)` is the uninterpreted `SUMm(n.., λk. if k in range then f(k) else 0)` of a
masked z3 lambda, so it depends on the summand's values in range only (z3's array
extensionality gives congruence). Before that, each side is put in a normal form, a polynomial
of box sums `c · Σ_{k1<n1..km<nm} Πfactors`, by these laws of finite sums (never by the identity
being proved): distributivity and linearity (Σ(f+g) = Σf + Σg, Σ c·f = c·Σf for c free of k),
Fubini (nested sums are one box), Σ_{k<n} c = n·c, and Σ_{k<1} f(k) = f(0). Three more laws are
added as ground lemmas about the sums that occur: box order does not matter (for equal ranges),
Σ_{k<n} f(k) = f(0) when n = 1, and Σ_{k<a·b} f(k) = Σ_{p<a} Σ_{j<b} f(p·b + j) for a split
dim (a = g, b = w) or a product of sizes (where in range (p·b + j) div b = p and mod b = j).

`prove_axiom` proves `∀ indices in range: lhs = rhs`, and equal axes and shapes, on every
generic instance of the axiom (`prism.expr.instances`: ranks 1-4, every rank the IR allows; every
dim index, every size-1 pattern, axes equal or distinct, as the condition allows). It is
- `proved` when z3 proves every instance (an instance without sums is proved as an instance of
  its *abstract goal*, tensor reads replaced by variables: one z3 call per shape of goal);
- `refuted` on the first counterexample: z3's model when the query has no uninterpreted function
  but the tensors; else a float64 one, at sizes from z3's model, by `evaluate`; or when the
  sides differ in axes or shape, or when no instance exists (the axiom can never apply);
- `unknown` when z3 times out (`timeout_ms`, per query), or finds a model that interprets Σ or
  exp, ... freely and no float64 counterexample shows it is one;
- `not_stated` for heads or variables outside this encoding.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from prism.expr.axioms import Axiom
from prism.expr.instances import (
    Instance,
    UnsupportedPattern,
    float64_counterexample,
    generic_instances,
)
from prism.expr.tensor_terms import COMPUTE, MOVEMENT, SYMBOLIC_PREFIX, TERM_ATTRS, TensorInfo
from prism.expr.terms import Term
from prism.ir.dims import Atom, Dim, DimLike, dim
from prism.ir.graph import MAX_RANK
from prism.ir.ops import OPS, POLY, REDUCE

STATUSES = ("proved", "refuted", "unknown", "not_stated")
# The ops z3 sees as any function of their operands (the op table's `smt` is None).
UNINTERPRETED = {n: od.arity for n, od in OPS.items() if od.compute and od.smt is None}
# The reductions z3 sees as any function of a row (`_Encoder._row_function`).
ROW_FUNCTIONS = frozenset({"max", "min", "logsumexp"})
MODEL_CHARS = 2000
_ONE = dim(1)


@dataclass(frozen=True)
class SmtResult:
    axiom: str
    status: str                 # one of STATUSES
    seconds: float
    detail: str
    model: str | None = None    # the counterexample of a refutation
    instances: int = 0          # generic instances proved (before a refutation, if any)


class NotStated(Exception):
    """A term outside what this module encodes."""


def prove_axiom(axiom: Axiom, *, timeout_ms: int = 5000, first_unknown: bool = False
                ) -> SmtResult:
    """Prove `axiom` on each of its generic instances; `timeout_ms` bounds each z3 query.
    `first_unknown`: stop at the first undecided instance (axiom discovery, where an undecided
    candidate is dropped anyway and the rest of its instances would cost a timeout each)."""
    start = time.perf_counter()

    def result(status: str, detail: str, model: str | None = None, n: int = 0) -> SmtResult:
        return SmtResult(axiom.name, status, time.perf_counter() - start, detail, model, n)

    rule = axiom.rule()
    heads = {sub.head for p in (rule.lhs, rule.rhs) for _, sub in p.term.subterms() if sub.args}
    outside = sorted(heads - MOVEMENT - COMPUTE)
    if outside:
        return result("not_stated", f"heads outside the encoding: {', '.join(outside)}")
    unknown: list[str] = []
    notes: set[str] = set()
    proved: dict[int, Any] = {}
    n = 0
    try:
        for n, inst in enumerate(generic_instances(axiom), start=1):
            try:
                verdict, why, model, used = _prove_instance(inst, timeout_ms, proved)
            except NotStated as e:
                return result("not_stated", f"{e} (in {inst.describe()})", n=n - 1)
            notes |= used
            if verdict == "refuted":
                return result("refuted", f"{why}: {inst.describe()}", model, n - 1)
            if verdict == "unknown":
                unknown.append(f"{why}: {inst.describe()}" +
                               (f"; its model: {model}" if model else ""))
                if first_unknown:
                    return result("unknown", f"undecided at instance {n} (stopped there): "
                                             f"{unknown[0]}", n=n - 1)
    except UnsupportedPattern as e:
        return result("not_stated", str(e))
    if n == 0:
        return result("refuted", "no generic instance is well-shaped and satisfies the condition: "
                                 "the axiom can never apply, a bug in the table")
    assumptions = _assumptions(notes)
    if unknown:
        return result("unknown", f"{len(unknown)} of {n} instances undecided, first: "
                                 f"{unknown[0]}{assumptions}", n=n - len(unknown))
    return result("proved", f"all {n} generic instances (ranks 1-{MAX_RANK}){assumptions}", n=n)


def _assumptions(notes: set[str]) -> str:
    said = []
    if "div" in notes:
        said.append("assuming every divisor is non-zero")
    if "sum" in notes:
        said.append("using the laws of finite sums")
    functions = sorted(notes & (set(UNINTERPRETED) | ROW_FUNCTIONS))
    if functions:
        said.append(f"{', '.join(functions)} uninterpreted")
    return f"; {'; '.join(said)}" if said else ""


def _z3() -> Any:
    import z3  # the heavy import, here only
    # z3's solver catches SIGINT while it checks and only cancels that check, so a Ctrl-C landing
    # there never reached our handler and the run went on (`prism search` ignored it, at random)
    z3.set_param("ctrl_c", False)
    return z3


def _prove_instance(inst: Instance, timeout_ms: int, proved: dict[int, Any]
                    ) -> tuple[str, str, str | None, set[str]]:
    """(verdict, why, model, what was used) for one instance. `proved` holds the abstract goals
    (see `_abstract`) proved so far."""
    z3 = _z3()
    enc = _Encoder(inst)
    left, right = enc.info(inst.lhs), enc.info(inst.rhs)
    if left.axes != right.axes:
        return ("refuted", f"the sides have different axes ({sorted(left.axes)} vs "
                           f"{sorted(right.axes)})", None, set())
    if left.rank != right.rank:
        return ("refuted", f"the sides have ranks {left.rank} and {right.rank}", None, set())
    ls, rs = [enc.size(d) for d in left.shape], [enc.size(d) for d in right.shape]
    differ = [a != b for a, b in zip(ls, rs, strict=True) if not a.eq(b)]
    if differ:
        shapes = _check(enc.facts, z3.Or(*differ), timeout_ms)
        if shapes.verdict == "sat":
            return "refuted", "the sides have different shapes", shapes.text, set()
        if shapes.verdict == "unknown":
            return "unknown", f"z3 could not compare the shapes ({shapes.text})", None, set()
    pos = {a: z3.Int(f"pos_{a}") for a in sorted(left.axes)}
    idx = tuple(z3.Int(f"i{j}") for j in range(left.rank))
    enc.facts += [z3.And(p >= 0, p < enc.size_of_axis(a)) for a, p in pos.items()]
    enc.facts += [z3.And(i >= 0, i < n) for i, n in zip(idx, ls, strict=True)]
    zl = enc.to_z3(enc.poly(inst.lhs, pos, idx))
    zr = enc.to_z3(enc.poly(inst.rhs, pos, idx))
    facts = enc.facts + enc.divisor_facts() + enc.sum_lemmas()
    if "sum" not in enc.used:
        abstract = _abstract(z3, enc, enc.facts, zl != zr)
        if abstract.get_id() in proved:
            return "proved", "", None, enc.used
        if _check([abstract], z3.BoolVal(True), timeout_ms).verdict == "unsat":
            proved[abstract.get_id()] = abstract  # held: z3 reuses the ids of freed terms
            return "proved", "", None, enc.used
    answer = _check(facts, zl != zr, timeout_ms)
    if answer.verdict == "unsat":
        return "proved", "", None, enc.used
    if answer.verdict == "unknown":
        return "unknown", f"z3 gave up ({answer.text})", None, enc.used
    opaque = ", ".join(sorted(enc.used & ({"sum"} | set(UNINTERPRETED) | ROW_FUNCTIONS)))
    if not opaque:
        return "refuted", "counterexample", answer.text, enc.used
    # The model interprets Σ or exp, ... freely: look for a counterexample in float64 instead.
    witness = float64_counterexample(inst, answer.sizes)
    if witness is not None:
        return ("refuted", f"counterexample in float64 (z3's model, which interprets {opaque} "
                           "freely, gave the sizes to try)", witness, enc.used)
    return ("unknown", f"z3 found a model, but it interprets {opaque} freely, and no float64 "
                       "counterexample was found", answer.text, enc.used)


def _abstract(z3: Any, enc: _Encoder, facts: Sequence[Any], goal: Any) -> Any:
    """The goal with each tensor read replaced by a real variable v0, v1, ... (numbered in the
    order the encoding made them), with the facts it may need: divisors non-zero, and sizes
    positive and split exactly when a coefficient uses sizes. It is the same z3 term (z3 terms
    are hash-consed) for every instance of the same shape, and it implies the goal, an instance
    of it: z3 proves one abstract goal per shape instead of each instance. (Reads equal only by
    index arithmetic become distinct variables, so an abstract goal may fail where the goal
    holds; then the goal itself is checked.)"""
    pairs = [(read, z3.Real(f"v{n}")) for n, read in enumerate(enc.reads.values())]
    kept = [x != 0 for x in enc.divisors] + (list(facts) if enc.coefficient_sizes else [])
    formula = [z3.substitute(f, *pairs) for f in (*kept, goal)]
    return z3.And(*formula)


@dataclass(frozen=True)
class _Answer:
    verdict: str                        # "unsat" | "sat" | "unknown"
    text: str = ""                      # the model when sat, the reason when unknown
    sizes: dict[str, int] = field(default_factory=dict)   # the model's integer constants


def _check(facts: Sequence[Any], goal: Any, timeout_ms: int) -> _Answer:
    z3 = _z3()
    solver = z3.Solver()
    solver.set(timeout=timeout_ms)
    solver.add(*facts, goal)
    answer = solver.check()
    if answer == z3.unsat:
        return _Answer("unsat")
    if answer == z3.unknown:
        return _Answer("unknown", solver.reason_unknown())
    model = solver.model()
    # z3's own symbols (the value of x/0, ...) are not identifiers: leave them out
    decls = sorted((d for d in model.decls() if d.name().isidentifier()), key=lambda d: d.name())
    text = ", ".join(f"{d.name()} = {model[d]}" for d in decls)
    sizes = {d.name(): model[d].as_long() for d in decls
             if d.arity() == 0 and z3.is_int_value(model[d])}
    return _Answer("sat", text[:MODEL_CHARS], sizes)


# -- the encoding ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Mono:
    """coef · Σ_{box} Π factors: coef is free of summation indices (None: 1); box is ((index,
    range), ...)."""

    coef: Any
    box: tuple[tuple[Any, Any], ...]
    factors: tuple[Any, ...]


_Poly = list[_Mono]


@dataclass(frozen=True)
class _BoxSum:
    indices: tuple[Any, ...]   # canonical index constants b0, b1, ...
    ranges: tuple[Any, ...]
    body: Any                  # unmasked, over the canonical indices


class _Encoder:
    """Encodes the terms of one instance; collects the facts the query assumes."""

    def __init__(self, inst: Instance):
        self.z3 = _z3()
        self.inst = inst
        self.infos = inst.infos
        self.facts: list[Any] = []
        self.sizes: dict[str, Any] = {}
        self.quotients: list[tuple[Any, Any, Any]] = []   # (num, den, q) with num = den·q
        self.functions: dict[str, Any] = {}
        self.divisors: list[Any] = []
        self.bound: set[str] = set()                       # names of summation indices
        self.sums: dict[int, tuple[Any, _BoxSum]] = {}     # z3 id of a SUM term → it
        self.used: set[str] = set()
        self.fresh = itertools.count()
        self.one, self.zero = self.z3.IntVal(1), self.z3.IntVal(0)
        self.size_of: dict[Dim, Any] = {}
        self.chunks: dict[int, tuple[Any, Any, Dim, Any]] = {}  # id of p·w + i → (it, p, w, i)
        self.memo: dict[int, tuple[Any, frozenset[str]]] = {}
        self.reads: dict[int, Any] = {}                     # z3 id of a tensor read → it
        self.coefficient_sizes = False                      # whether a coefficient has a size

    # -- sizes -------------------------------------------------------------------------------
    def info(self, term: Term) -> TensorInfo:
        info = self.infos[term]
        assert isinstance(info, TensorInfo)
        return info

    def size_of_axis(self, name: str) -> Any:
        """An axis's size: its own variable, or the product the instance ties it to
        (`instances.axis_relations`)."""
        tied = self.inst.analysis.axis_sizes.get(name)
        return self._var(name) if tied is None else self.size(tied)

    def _var(self, name: str) -> Any:
        if name not in self.sizes:
            self.sizes[name] = self.z3.Int(name)
            self.facts.append(self.sizes[name] > 0)
        return self.sizes[name]

    def size(self, d: Dim) -> Any:
        """The z3 Int of a dimension expression; a quotient num/den is a fresh w, num = den·w."""
        if d not in self.size_of:
            self.size_of[d] = self._size(d)
        return self.size_of[d]

    def _size(self, d: Dim) -> Any:
        z3 = self.z3
        total = None
        for mono, coef in d.terms:
            term = None if coef == 1 else z3.IntVal(coef)
            for atom, power in mono:
                if atom.is_bit:
                    raise NotStated(f"dimension {d} has a map bit")
                if atom.num is not None and atom.den is not None:
                    key = f"({atom.key})"
                    if key not in self.sizes:
                        num, den = self.size(atom.num), self.size(atom.den)
                        q = self._var(f"w{len(self.quotients)}")
                        self.sizes[key] = q
                        self.quotients.append((num, den, q))
                        self.facts.append(num == den * q)
                    value = self.sizes[key]
                else:
                    value = self._var(atom.name)
                for _ in range(power):
                    term = value if term is None else term * value
            term = z3.IntVal(1) if term is None else term
            total = term if total is None else total + term
        return z3.IntVal(0) if total is None else total

    # -- terms -------------------------------------------------------------------------------
    def poly(self, term: Term, pos: dict[str, Any], idx: tuple[Any, ...]) -> _Poly:
        """The value of `term` at axis positions `pos` and data indices `idx`."""
        head, args = term.head, term.args
        info = self.info(term)
        if not args:
            if head not in self.inst.leaves:
                raise NotStated(f"leaf {head} is not a tensor of the instance")
            f = self._function(head, [self.z3.IntSort()] * (len(info.axes) + info.rank))
            read = f(*[pos[a] for a in sorted(info.axes)], *idx)
            self.reads.setdefault(read.get_id(), read)
            return self._atom(read)
        if head == "part":
            d, g = int(args[1].head), args[2].head
            inner = dict(pos)
            p, w = inner.pop(g), self.size(info.shape[d])
            index = p * w + idx[d]
            self.chunks[index.get_id()] = (index, p, info.shape[d], idx[d])
            return self.poly(args[0], inner, _put(idx, d, index))
        if head == "comb":
            d, g = int(args[1].head), args[2].head
            width = self.info(args[0]).shape[d]
            digits = self._digits(idx[d], width)
            if digits is not None:
                return self.poly(args[0], pos | {g: digits[0]}, _put(idx, d, digits[1]))
            w = self.size(width)
            return self.poly(args[0], pos | {g: idx[d] / w}, _put(idx, d, idx[d] % w))
        if head == "rep":
            return self.poly(args[0], {a: p for a, p in pos.items() if a != args[1].head}, idx)
        if head in ("red", "mred"):
            g = args[1].head
            k = self._index()
            total = self._sum(k, self.size_of_axis(g), False,
                              self.poly(args[0], pos | {g: k}, idx))
            return total if head == "red" else self._scale(total, self.size_of_axis(g))
        return self._compute(term, pos, idx)

    def _digits(self, index: Any, width: Dim) -> tuple[Any, Any] | None:
        """(index div width, index mod width) without z3's integer division, when `index` was
        built by splits: p·W + j with 0 ≤ j < W is (p, j) when W is the width, and
        (p·m + q, r) when W = m·width and j is (q, r) in turn (a split of a split: the chunks
        of a concatenation read in groups of m). None when the index is not so built."""
        chunk = self.chunks.get(index.get_id())
        if chunk is None:
            return None
        _, p, outer, j = chunk
        if outer == width:
            return p, j
        m = outer / width
        if any(a.num is not None for mono, _ in m.terms for a, _ in mono) or m * width != outer:
            return None
        inner = self._digits(j, width)
        return None if inner is None else (p * self.size(m) + inner[0], inner[1])

    def _operands(self, term: Term, pos: dict[str, Any], idx: tuple[Any, ...]) -> list[_Poly]:
        """The tensor arguments of an elementwise op, broadcast: a dim of 1 is indexed at 0."""
        return [self.poly(a, pos, tuple(self.zero if d == _ONE else i for i, d in
                                        zip(idx, self.info(a).shape, strict=True)))
                for a in term.args if isinstance(self.infos.get(a), TensorInfo)]

    def _compute(self, term: Term, pos: dict[str, Any], idx: tuple[Any, ...]) -> _Poly:
        """A compute head, as the op table says it reaches the solver (`OpDef.smt`)."""
        z3, head, args = self.z3, term.head, term.args
        od = OPS[head]
        if od.smt == REDUCE:
            return self._reduce(term, pos, idx)
        kids = self._operands(term, pos, idx)
        attrs = {name: self.scalar(args[i].head) for i, name in TERM_ATTRS.get(head, {}).items()
                 if name not in ("dim", "last")}
        if od.smt == POLY:
            return self._poly_op(head, kids, attrs)
        if callable(od.smt):
            return self._atom(od.smt(z3, [self.to_z3(k) for k in kids], attrs))
        if od.smt is None and head in COMPUTE:     # any function: an uninterpreted one
            self.used.add(head)
            f = self._real_function(head, od.arity)
            return self._atom(f(*[self.to_z3(k) for k in kids]))
        raise NotStated(f"head {head!r} has no encoding")

    def _poly_op(self, head: str, kids: list[_Poly], attrs: dict[str, Any]) -> _Poly:
        if head == "add":
            return kids[0] + kids[1]
        if head == "sub":
            return kids[0] + self._negated(kids[1])
        if head == "neg":
            return self._negated(kids[0])
        if head == "mul":
            return self._mul(kids[0], kids[1])
        if head == "square":
            return self._mul(kids[0], kids[0])
        if head == "div":
            return self._mul(kids[0], self._inverse(kids[1]))
        if head == "reciprocal":
            return self._inverse(kids[0])
        if head == "mul_scalar":
            return self._mul(kids[0], self._const(attrs["scalar"]))
        if head == "add_scalar":
            return kids[0] + self._const(attrs["scalar"])
        raise NotStated(f"head {head!r} has no polynomial encoding")

    def _negated(self, p: _Poly) -> _Poly:
        return self._mul(p, self._const(self.z3.RealVal(-1)))

    def _reduce(self, term: Term, pos: dict[str, Any], idx: tuple[Any, ...]) -> _Poly:
        head, args = term.head, term.args
        if head in ("sum", "mean"):
            d = int(args[1].head)
            shape = self.info(args[0]).shape
            k = self._index()
            total = self._sum(k, self.size(shape[d]), shape[d] == _ONE,
                              self.poly(args[0], pos, _put(idx, d, k)))
            return total if head == "sum" else self._scale(total, self.size(shape[d]))
        if head in ("max", "min", "logsumexp"):
            # Any function of the row: an uninterpreted function of its size and its values
            # (what holds for it holds for max, min and logsumexp alike).
            d = int(args[1].head)
            shape = self.info(args[0]).shape
            k = self._index()
            body = self.to_z3(self.poly(args[0], pos, _put(idx, d, k)))
            if shape[d] == _ONE and head != "logsumexp":
                return self._atom(self.z3.substitute(body, (k, self.z3.IntVal(0))))
            self.used.add(head)
            return self._atom(self._row_function(head, k, self.size(shape[d]), body))
        if head == "matmul":
            a, b = args
            shape = self.info(a).shape
            k = self._index()
            product = self._mul(self.poly(a, pos, (*idx[:-1], k)),
                                self.poly(b, pos, (*idx[:-2], k, idx[-1])))
            return self._sum(k, self.size(shape[-1]), shape[-1] == _ONE, product)
        if head in ("rms_norm", "layer_norm"):
            shape = self.info(args[0]).shape
            n, one = self.size(shape[-1]), shape[-1] == _ONE
            eps = self._const(self.scalar(args[2].head))
            x = self.poly(args[0], pos, idx)
            if head == "layer_norm":
                k = self._index()
                mean = self._scale(self._sum(k, n, one, self.poly(args[0], pos, (*idx[:-1], k))),
                                   n)
                x = x + self._negated(mean)
            k = self._index()
            row = self.poly(args[0], pos, (*idx[:-1], k))
            if head == "layer_norm":
                row = row + self._negated(mean)
            squares = self._sum(k, n, one, self._mul(row, row))
            self.used.add("sqrt")
            rms = self._real_function("sqrt", 1)(self.to_z3(self._scale(squares, n) + eps))
            return self._mul(x, self._inverse(self._atom(rms)))
        raise NotStated(f"head {head!r} has no encoding")

    def scalar(self, text: str) -> Any:
        """A scalar atom in z3: a number as a rational constant, a generic instance's symbolic
        scalar (`c_…`) as an unconstrained real constant (one proof for every value), `none` as
        None (an absent clamp bound)."""
        if text == "none":
            return None
        if text.startswith(SYMBOLIC_PREFIX):
            return self.z3.Real(text)
        return self.z3.RealVal(repr(float(text)))

    def _row_function(self, head: str, k: Any, n: Any, body: Any) -> Any:
        """HEAD(n, λ b0. body): an uninterpreted function of a row's size and values."""
        z3 = self.z3
        b = z3.Int("b0")
        f = self._function(head.upper(), [z3.IntSort(), z3.ArraySort(z3.IntSort(),
                                                                      z3.RealSort())])
        return f(n, z3.Lambda([b], z3.If(z3.And(b >= 0, b < n), z3.substitute(body, (k, b)),
                                         z3.RealVal(0))))

    # -- polynomials of box sums -----------------------------------------------------------
    def _const(self, c: Any) -> _Poly:
        return [_Mono(c, (), ())]

    def _atom(self, x: Any) -> _Poly:
        return [_Mono(None, (), (x,))]

    def _scale(self, p: _Poly, n: Any) -> _Poly:
        """p / n for a positive size n."""
        self.coefficient_sizes = True
        inv = 1 / self.z3.ToReal(n)
        return [_Mono(_times(m.coef, inv), m.box, m.factors) for m in p]

    def _mul(self, p: _Poly, q: _Poly) -> _Poly:
        out = []
        for a in p:
            for b in q:
                if {str(k) for k, _ in a.box} & {str(k) for k, _ in b.box}:
                    b = self._rename(b)  # x·x where x is a sum: Σ_k f(k) · Σ_k' f(k')
                out.append(_Mono(_times(a.coef, b.coef), a.box + b.box,
                                 a.factors + b.factors))
        return out

    def _rename(self, m: _Mono) -> _Mono:
        pairs = [(k, self._index()) for k, _ in m.box]
        return _Mono(m.coef, tuple((new, n) for (_, new), (_, n) in zip(pairs, m.box, strict=True)),
                     tuple(self.z3.substitute(f, *pairs) for f in m.factors))

    def _inverse(self, p: _Poly) -> _Poly:
        self.used.add("div")
        x = self.to_z3(p)
        self.divisors.append(x)
        return self._atom(1 / x)

    def _index(self) -> Any:
        k = self.z3.Int(f"k{next(self.fresh)}")
        self.bound.add(str(k))
        return k

    def _sum(self, k: Any, n: Any, is_one: bool, p: _Poly) -> _Poly:
        """Σ_{k<n} p: k joins the box of each monomial that mentions it."""
        z3 = self.z3
        if is_one:  # Σ_{k<1} f(k) = f(0)
            return [_Mono(m.coef, m.box, tuple(z3.substitute(f, (k, z3.IntVal(0)))
                                               for f in m.factors)) for m in p]
        out = []
        for m in p:
            if any(str(k) in self._names(f) for f in m.factors):
                out.append(_Mono(m.coef, (*m.box, (k, n)), m.factors))
            else:  # Σ_{k<n} c = n·c
                self.coefficient_sizes = True
                out.append(_Mono(_times(m.coef, z3.ToReal(n)), m.box, m.factors))
        return out

    def to_z3(self, p: _Poly) -> Any:
        z3 = self.z3
        terms = []
        for m in p:
            body = _product(z3, m.factors)
            if m.box:
                self.used.add("sum")
                body = self._box_sum([k for k, _ in m.box], [n for _, n in m.box], body)
            terms.append(body if m.coef is None else m.coef * body)
        if not terms:
            return z3.RealVal(0)
        return z3.Sum(*sorted(terms, key=lambda t: t.hash())) if len(terms) > 1 else terms[0]

    def _box_sum(self, indices: Sequence[Any], ranges: Sequence[Any], body: Any,
                 keep_order: bool = False) -> Any:
        """SUMm(ranges, λ indices. masked body), indices renamed b0, b1, ... in range order."""
        z3 = self.z3
        order = list(range(len(indices)))
        if not keep_order:
            order.sort(key=lambda j: str(ranges[j]))
        canon = [z3.Int(f"b{j}") for j in range(len(order))]
        body = z3.substitute(body, *[(indices[j], canon[i]) for i, j in enumerate(order)])
        ranks = tuple(ranges[j] for j in order)
        in_range = z3.And(*[z3.And(b >= 0, b < n) for b, n in zip(canon, ranks, strict=True)])
        m = len(canon)
        sum_m = self._function(f"SUM{m}", [z3.IntSort()] * m +
                               [z3.ArraySort(*[z3.IntSort()] * m, z3.RealSort())])
        term = sum_m(*ranks, z3.Lambda(canon, z3.If(in_range, body, z3.RealVal(0))))
        self.sums.setdefault(term.get_id(), (term, _BoxSum(tuple(canon), ranks, body)))
        return term

    def _function(self, name: str, domain: Sequence[Any]) -> Any:
        """The uninterpreted function `name`: domain → Real."""
        if name not in self.functions:
            self.functions[name] = self.z3.Function(name, *domain, self.z3.RealSort())
        return self.functions[name]

    def _real_function(self, name: str, arity: int) -> Any:
        return self._function(name, [self.z3.RealSort()] * arity)

    def _names(self, e: Any) -> frozenset[str]:
        """The free constants of e."""
        return _free_names(self.z3, e, self.memo)

    # -- facts -------------------------------------------------------------------------------
    def divisor_facts(self) -> list[Any]:
        """x ≠ 0 for each divisor that is free of summation indices."""
        return [x != 0 for x in self.divisors if not (self.bound and self._names(x) & self.bound)]

    def sum_lemmas(self) -> list[Any]:
        """Ground instances of the box-order, range-1 and split laws about the sums in play:
        every order of equal ranges of each sum; a range that is 1 dropped, again on the result;
        each factoring of a range of the sums of the goal split, once."""
        z3 = self.z3
        lemmas: list[Any] = []
        todo = [(term, box, True) for term, box in self.sums.values()]
        seen = {term.get_id() for term, _, _ in todo}

        def derived(term: Any, original: bool) -> Any:
            if term.get_id() in self.sums and term.get_id() not in seen:
                seen.add(term.get_id())
                todo.append((term, self.sums[term.get_id()][1], original))
            return term

        while todo:
            term, box, original = todo.pop()
            lemmas += [term == other for other in self._reorders(box)]
            for j, n in enumerate(box.ranges):
                if not n.eq(self.one):
                    lemmas.append(z3.Implies(n == 1, term == derived(self._drop(box, j),
                                                                     original)))
                if original:
                    lemmas += [term == derived(self._split(box, j, outer, inner), False)
                               for outer, inner in self._factorings(n)]
        return lemmas

    def _reorders(self, box: _BoxSum) -> Iterator[Any]:
        ties = [j for j in range(len(box.ranges))
                if sum(n.eq(box.ranges[j]) for n in box.ranges) > 1]
        for perm in itertools.permutations(ties):
            if list(perm) != ties:
                order = list(range(len(box.ranges)))
                for src, dst in zip(ties, perm, strict=True):
                    order[src] = dst
                yield self._box_sum([box.indices[j] for j in order],
                                    [box.ranges[j] for j in order], box.body, keep_order=True)

    def _drop(self, box: _BoxSum, j: int) -> Any:
        body = self.z3.substitute(box.body, (box.indices[j], self.z3.IntVal(0)))
        rest = [i for i in range(len(box.ranges)) if i != j]
        if not rest:
            return body
        return self._box_sum([box.indices[i] for i in rest], [box.ranges[i] for i in rest], body)

    def _factorings(self, n: Any) -> Iterator[tuple[Any, Any]]:
        """(outer, inner) with n = outer·inner: a split dim's (count, width), and the two
        orders of each way to write a product of sizes as two factors."""
        z3 = self.z3
        for num, den, q in self.quotients:
            if num.eq(n):
                yield den, q
        if z3.is_mul(n):
            factors = n.children()
            for i, f in enumerate(factors):
                rest = factors[:i] + factors[i + 1:]
                other = rest[0] if len(rest) == 1 else z3.Product(*rest)
                yield f, other
                yield other, f

    def _split(self, box: _BoxSum, j: int, outer: Any, inner: Any) -> Any:
        """Σ_{m<outer·inner} f(m) as Σ_{p<outer} Σ_{k<inner} f(p·inner + k)."""
        z3 = self.z3
        p, k = self._index(), self._index()
        m = p * inner + k
        # in range (0 ≤ k < inner, and the masked body is read in range only): m div inner = p
        # and m mod inner = k, which undoes a concatenation's index arithmetic
        body = z3.substitute(z3.substitute(box.body, (box.indices[j], m)),
                             (m / inner, p), (m % inner, k))
        indices = [*box.indices[:j], p, k, *box.indices[j + 1:]]
        ranges = [*box.ranges[:j], outer, inner, *box.ranges[j + 1:]]
        fresh = [self._index() for _ in indices]  # the canonical names are reused inside
        body = z3.substitute(body, *zip(indices, fresh, strict=True))
        return self._box_sum(fresh, ranges, body)


def _put(idx: tuple[Any, ...], d: int, value: Any) -> tuple[Any, ...]:
    return (*idx[:d], value, *idx[d + 1:])


def _product(z3: Any, factors: Sequence[Any]) -> Any:
    if not factors:
        return z3.RealVal(1)
    ordered = sorted(factors, key=lambda f: f.hash())
    return z3.Product(*ordered) if len(ordered) > 1 else ordered[0]


def _times(a: Any, b: Any) -> Any:
    """The product of two coefficients, None standing for 1."""
    return b if a is None else a if b is None else a * b


def _free_names(z3: Any, e: Any, memo: dict[int, tuple[Any, frozenset[str]]]
                ) -> frozenset[str]:
    key = e.get_id()  # z3 reuses the ids of freed terms: the memo holds each term alive
    if key not in memo:
        if z3.is_quantifier(e):
            names = _free_names(z3, e.body(), memo)
        elif z3.is_const(e) and e.decl().kind() == z3.Z3_OP_UNINTERPRETED:
            names = frozenset({e.decl().name()})
        elif z3.is_app(e):
            names = frozenset().union(*[_free_names(z3, c, memo) for c in e.children()])
        else:
            names = frozenset()
        memo[key] = (e, names)
    return memo[key][1]


__all__ = ["STATUSES", "SmtResult", "prove_axiom"]


# == hardware feasibility: is there an assignment of a symbolic family that fits the device? ==
#
# A separate use of z3 from the axiom proofs above. Constraints are relations over `Dim`s; the
# integer semantics, written for z3:
#   plain variable v   an Int with lo ≤ v ≤ hi (its declared bounds, hard facts)
#   bit b              an Int with 0 ≤ b ≤ 1 (hard)
#   quotient n ÷ d     a fresh Int q; `n = d·q` is asserted ONLY by a named `exact(n, d)`
#                      relation, so a quotient whose exactness no constraint states is free
#                      (a core that omits its exactness is still unsat: fewer constraints).
# Each named constraint is tracked by a Bool assumption of the same name, so `unsat_core()`
# names the constraints that clash. Running out of the resource limit (`rlimit`, z3's
# deterministic count of work, never wall-clock time) is `unknown`, never `unsat`.


@dataclass(frozen=True)
class Relation:
    """`lhs <= rhs`, `lhs == rhs`, or `exact`: the quotient lhs ÷ rhs divides exactly."""

    lhs: Dim
    op: Literal["<=", "==", "exact"]
    rhs: Dim


@dataclass(frozen=True)
class NamedConstraint:
    """Holds when one of `any_of` holds (usually a single relation)."""

    name: str
    any_of: tuple[Relation, ...]

    @staticmethod
    def of(name: str, lhs: DimLike, op: Literal["<=", "==", "exact"],
           rhs: DimLike) -> NamedConstraint:
        return NamedConstraint(name, (Relation(dim(lhs), op, dim(rhs)),))


@dataclass(frozen=True)
class Feasibility:
    status: Literal["sat", "unsat", "unknown"]
    model: dict[str, int] | None    # every variable and bit, when sat
    core: tuple[str, ...]           # clashing constraint names, when unsat
    reason: str = ""


def hardware_feasibility(constraints: Sequence[NamedConstraint],
                         bounds: Mapping[str, tuple[int, int]], *,
                         rlimit: int = 2_000_000) -> Feasibility:
    """Whether some assignment (plain variables within `bounds`, bits 0/1) satisfies every
    constraint; if not, an unsat core of constraint names. Two queries at most, each under
    `rlimit`: the constraints untracked, then, unless that found an assignment, each behind
    its named assumption (for the core); the answer is the second's, so an `unknown` costs
    both limits."""
    z3 = _z3()
    names = [c.name for c in constraints]
    if len(set(names)) != len(names):
        raise ValueError("constraint names must be unique: the unsat core is reported by name")
    # First the constraints as they are, untracked: z3 finds a fitting assignment far sooner
    # so (gqa's first family: 0.6 s, against 15 s with each constraint behind its assumption).
    # Only an unsat core needs the tracked query, or an answer where this one ran out; a
    # model found here fits every constraint, which the tracked query could only confirm.
    solver, enc, _ = _query(z3, constraints, bounds, rlimit, tracked=False)
    if solver.check() == z3.sat:
        return _sat(solver.model(), enc)
    solver, enc, tracks = _query(z3, constraints, bounds, rlimit, tracked=True)
    answer = solver.check(*tracks)
    if answer == z3.sat:
        return _sat(solver.model(), enc)
    if answer == z3.unsat:
        return Feasibility("unsat", None, tuple(str(t) for t in solver.unsat_core()))
    return Feasibility("unknown", None, (), str(solver.reason_unknown()))


def _query(z3: Any, constraints: Sequence[NamedConstraint],
           bounds: Mapping[str, tuple[int, int]], rlimit: int, *, tracked: bool
           ) -> tuple[Any, _DimEncoder, list[Any]]:
    """A solver holding the constraints (each behind a Bool assumption of its name when
    `tracked`, returned to check under) and the variables' domains, under `rlimit`.

    A context of its own: z3's heuristics follow the order its terms were made in, so in a
    shared context one query's time and (under the resource limit) verdict depended on the
    queries before it (measured: the same family 1 s after one search, 56 s after another)."""
    context = z3.Context()
    enc = _DimEncoder(z3, bounds, context)
    solver = z3.Solver(ctx=context)
    solver.set("rlimit", rlimit)
    tracks = []
    for c in constraints:
        holds = z3.Or(*[enc.relation(r) for r in c.any_of])
        if tracked:
            tracks.append(z3.Bool(c.name, context))
            holds = z3.Implies(tracks[-1], holds)
        solver.add(holds)
    solver.add(*enc.domains)
    return solver, enc, tracks


def _sat(m: Any, enc: _DimEncoder) -> Feasibility:
    model = {n: m.eval(v, model_completion=True).as_long() for n, v in enc.vars.items()}
    return Feasibility("sat", dict(sorted(model.items())), ())


class _DimEncoder:
    """Dims → z3 integer terms, declaring each variable once with its domain."""

    def __init__(self, z3: Any, bounds: Mapping[str, tuple[int, int]], context: Any = None):
        self.z3, self.bounds, self.context = z3, bounds, context
        self.vars: dict[str, Any] = {}
        self.quotients: dict[str, Any] = {}
        self.domains: list[Any] = []

    def relation(self, r: Relation) -> Any:
        if r.op == "exact":
            return self.term(r.lhs) == self.term(r.rhs) * self._quotient(Atom(num=r.lhs,
                                                                             den=r.rhs))
        lhs, rhs = self.term(r.lhs), self.term(r.rhs)
        return lhs <= rhs if r.op == "<=" else lhs == rhs

    def term(self, d: Dim) -> Any:
        total: Any = self.z3.IntVal(0, self.context)
        for mono, coef in d.terms:
            factors: list[Any] = [self.z3.IntVal(coef, self.context)]
            for atom, power in mono:
                factors += [self._atom(atom)] * power
            total = total + (self.z3.Product(*factors) if len(factors) > 1 else factors[0])
        return total

    def _atom(self, atom: Atom) -> Any:
        if atom.num is not None and atom.den is not None:
            return self._quotient(atom)
        if atom.name not in self.vars:
            v = self.vars[atom.name] = self.z3.Int(atom.name, self.context)
            if atom.is_bit:
                lo, hi = 0, 1
            elif atom.name in self.bounds:
                lo, hi = self.bounds[atom.name]
            else:
                raise ValueError(f"variable {atom.name} has no bounds; give (lo, hi) for it")
            self.domains += [v >= lo, v <= hi]
        return self.vars[atom.name]

    def _quotient(self, atom: Atom) -> Any:
        if atom.key not in self.quotients:
            assert atom.num is not None and atom.den is not None
            self.term(atom.num), self.term(atom.den)   # declare the variables inside
            self.quotients[atom.key] = self.z3.Int(f"q{len(self.quotients)}[{atom.key}]",
                                                   self.context)
        return self.quotients[atom.key]
