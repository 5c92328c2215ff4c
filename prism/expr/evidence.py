"""Randomized soundness evidence for the axiom table.

For an axiom, draw random instantiations of its variables — tensors of random shapes (dims from a
small pool, including 1 so that broadcasting occurs), dim indices, axis names — keep those where
both sides are well-shaped and the condition holds, then evaluate both sides in float64 with
`tensor_terms.evaluate` at random axis sizes dividing the shapes, and compare. The evidence is the
number of distinct instances checked; an axiom for which no instance can be drawn fails (an
axiom that can never fire is a bug in the table).

Inputs are drawn from each op's domain (`OPERAND_DOMAINS`): a tensor whose values reach the
operand of √, the base of a power or (through a relu) a divisor is drawn in [0.5, 2], the
others standard normal. A value that is nan on both sides is a failure, never agreement: it
compared nothing (an instance outside every op's domain says nothing about the identity).
Where some tensor was drawn > 0, the instance is also evaluated on standard-normal draws, where
both sides must be defined at the same values and agree there ((a·b)^c = a^c·b^c holds for
positive bases only: a rewrite must not make a defined value nan); nan on both sides is
skipped there, the values compared were the domain draw's.

This is evidence, not proof; `prism.smt` proves the pointwise-algebra axioms for all reals.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass

import numpy as np

from prism.errors import DimExprError
from prism.expr.axioms import Axiom
from prism.expr.instances import axis_relations
from prism.expr.rules import Pattern, TermFacts, is_var
from prism.expr.tensor_terms import ATOM_ARGS, Info, TensorAnalysis, TensorInfo, evaluate
from prism.expr.terms import Term
from prism.ir.dims import Dim
from prism.ir.dims import evaluate as eval_dim
from prism.ir.graph import MAX_RANK
from prism.ir.ops import ANY, OPS, POSITIVE

AXES = ("ga", "gb", "gc")
DIM_POOL = (1, 6, 12)
POSITIVE_DRAW = (0.5, 2.0)   # the range of a draw that must be > 0


# -- op domains --------------------------------------------------------------------------------
# What a value must be, for the ops that read it to be defined: any real, nonzero, or > 0 (the
# op table's `domains`: √x needs x ≥ 0 and a^b, b any real so fractional, a ≥ 0, both drawn
# > 0; a / b needs b ≠ 0; rms_norm(x) a row of x ≠ 0; ln x needs x > 0).
OPERAND_DOMAINS: dict[str, dict[int, int]] = {
    name: dict(od.domains) for name, od in OPS.items() if od.domains}


def operand_need(head: str, i: int, need: int) -> int:
    """What operand `i` of op `head` must be, for the op to be defined there and its value to
    be what `need` says (ANY, NONZERO or POSITIVE). Random draws are continuous, so a sum or
    product of nonzero values is nonzero almost surely; only relu makes exact zeros. An op passes
    `need` on unless the op table's `passes` says otherwise (e^x > 0 for every x; x² > 0 iff
    x ≠ 0; relu(x) ≠ 0 iff x > 0). mul_scalar by c ≤ 0 is the exception: its value under
    positive draws is ≤ 0, the draw leaves the domain and shows as nan, a failure."""
    od = OPS.get(head)
    passed = od.passes(i, need) if od is not None and od.passes is not None else need
    return max(passed, OPERAND_DOMAINS.get(head, {}).get(i, ANY))


def positive_leaves(terms: Collection[Term]) -> set[str]:
    """The tensor leaves of `terms` whose values must be drawn > 0 for every op in them to be
    defined."""
    found: set[str] = set()
    seen: set[tuple[Term, int]] = set()

    def walk(t: Term, need: int) -> None:
        if (t, need) in seen:
            return
        seen.add((t, need))
        if not t.args:
            if need == POSITIVE:
                found.add(t.head)
            return
        atoms = ATOM_ARGS.get(t.head, {})   # dim indices, axis names, scalars: no values
        for i, a in enumerate(t.args):
            if i not in atoms:
                walk(a, operand_need(t.head, i, need))
    for t in terms:
        walk(t, ANY)
    return found


@dataclass(frozen=True)
class Evidence:
    axiom: str
    kind: str
    instances: int
    failures: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return self.instances > 0 and not self.failures


def random_evidence(ax: Axiom, *, instances: int = 10, attempts: int = 2000, seed: int = 0
                    ) -> Evidence:
    rng = np.random.default_rng(seed)
    rule = ax.rule()
    lhs, rhs = rule.lhs, rule.rhs
    roles = _roles(lhs)
    found, failures = 0, []
    seen: set[tuple[object, ...]] = set()
    for _ in range(attempts):
        if found >= instances:
            break
        shapes = _shapes(rng, [v for v, role in roles.items() if role == "tensor"])
        subst = {v: _bind(v, role, rng) for v, role in roles.items()}
        key = tuple(sorted((v, str(t), shapes.get(v)) for v, t in subst.items()))
        if key in seen:
            continue
        # sizes the condition ties (|g| = |a|·|b|): the instance of the relation, see sizes()
        tied = axis_relations(ax.condition, {v: t.head for v, t in subst.items()
                                             if roles[v] == "axis"})
        analysis = TensorAnalysis({v[1:]: s for v, s in shapes.items()}, tied)
        left, right = lhs.instantiate(subst), rhs.instantiate(subst)
        infos = [_info(sub, analysis) for t in (left, right) for _, sub in t.subterms()
                 if sub.args or sub.head in analysis.input_shapes]
        if not all(isinstance(i, TensorInfo) for i in infos):
            continue
        if rule.condition is not None and not rule.condition(TermFacts(subst, analysis)):
            continue
        sizes = _sizes(rng, infos, tied)
        if sizes is None:
            continue
        seen.add(key)
        positive = positive_leaves((left, right))
        inputs = {v[1:]: rng.uniform(*POSITIVE_DRAW, s) if v[1:] in positive else
                  rng.standard_normal(s) for v, s in shapes.items()}
        problem = _compare(left, right, inputs, sizes)
        if not problem and positive:  # the whole reals: defined on the same values, and equal
            reals = {v[1:]: rng.standard_normal(s) for v, s in shapes.items()}
            problem = _compare(left, right, reals, sizes, domain=False)
        if problem:
            failures.append(f"{left} vs {right} at sizes {sizes}: {problem}")
        found += 1
    return Evidence(ax.name, "random", found, tuple(failures))


def _roles(p: Pattern) -> dict[str, str]:
    """Each variable's role, from where it occurs: an axis, a dim index, a scalar or a tensor."""
    roles: dict[str, str] = {}
    for _, sub in p.term.subterms():
        for i, arg in enumerate(sub.args):
            if is_var(arg.head):
                roles[arg.head] = ATOM_ARGS.get(sub.head, {}).get(i, "tensor")
    return roles


def _shapes(rng: np.random.Generator, tensor_vars: list[str]) -> dict[str, tuple[int, ...]]:
    """Shapes of one rank (1 to 4, every rank the IR allows) over one size (so matmuls and
    elementwise ops fit), each dim 1 a quarter of the time (so broadcasting occurs)."""
    rank, size = int(rng.integers(1, MAX_RANK + 1)), int(rng.choice(DIM_POOL[1:]))
    return {v: tuple(1 if rng.random() < 0.25 else size for _ in range(rank))
            for v in tensor_vars}


def _bind(v: str, role: str, rng: np.random.Generator) -> Term:
    """An axis name, a dim index, or a tensor: a kernel tensor named after the variable, half of
    the time already stacked along an axis (replicated or split), so that axioms about tensors
    with axes get instances too."""
    if role == "axis":
        return Term(str(rng.choice(AXES)), ())
    if role == "dim":
        return Term(str(rng.integers(0, MAX_RANK)), ())
    if role == "scalar":    # a constant > 0 (an epsilon, a clamp bound, a slope, a factor)
        return Term(repr(round(float(rng.uniform(0.1, 2.0)), 3)), ())
    term = Term(v[1:], ())
    for axis in rng.permutation(AXES)[:rng.integers(0, 3)]:
        if rng.integers(0, 2):
            term = Term("rep", (term, Term(str(axis), ())))
        else:
            term = Term("part", (term, Term(str(rng.integers(0, MAX_RANK)), ()),
                                 Term(str(axis), ())))
    return term


def _info(t: Term, analysis: TensorAnalysis) -> Info:
    return analysis.make(t.head, tuple(_info(a, analysis) for a in t.args))


def _sizes(rng: np.random.Generator, infos: list[Info], tied: Mapping[str, Dim]
           ) -> dict[str, int] | None:
    """Axis sizes (2 or 3, or 1) under which every symbolic dim of both sides is an integer;
    an axis the condition ties to others gets their product."""
    for combo in itertools.islice(_size_choices(rng), 6):
        env = dict(zip(AXES, combo, strict=True))
        env |= {a: eval_dim(size, env) for a, size in tied.items()}
        try:
            for info in infos:
                assert isinstance(info, TensorInfo)
                for d in info.shape:
                    eval_dim(d, env)
        except DimExprError:  # a split that does not divide at these sizes
            continue
        return env
    return None


def _size_choices(rng: np.random.Generator) -> Iterator[tuple[int, ...]]:
    while True:
        yield tuple(int(x) for x in rng.choice((1, 2, 3), size=len(AXES)))


def _compare(left: Term, right: Term, inputs: dict[str, np.ndarray], sizes: dict[str, int],
             domain: bool = True) -> str:
    """A failure, or "": in a `domain` draw every value is compared and nan agrees with nothing;
    else (draws on the whole reals) nan on both sides is skipped, nan on one side fails."""
    try:
        with np.errstate(invalid="ignore", divide="ignore"):   # nan and inf are checked below
            a = evaluate(left, inputs, sizes)
            b = evaluate(right, inputs, sizes)
    except Exception as e:  # an instance the analysis accepted but numpy cannot evaluate
        return f"evaluation failed: {type(e).__name__}: {e}"
    if set(a.axes) != set(b.axes):
        return f"different axes {a.axes} vs {b.axes}"
    x, y = a.to(sorted(a.axes)), b.to(sorted(a.axes))
    if x.shape != y.shape:
        return f"different shapes {x.shape} vs {y.shape}"
    with np.errstate(invalid="ignore"):
        close = np.isclose(x, y, rtol=1e-9, atol=1e-9)   # nan is close to nothing
    if not domain:
        close |= np.isnan(x) & np.isnan(y)
    if not close.all():
        i = tuple(int(j) for j in np.unravel_index(int(np.argmin(close)), x.shape))
        if np.isnan(x[i]) and np.isnan(y[i]):
            return (f"nan on both sides at {i}: the draw left an op's domain, and nan is no "
                    "agreement")
        where = "" if domain else " on standard-normal inputs"
        return f"values differ at {i}{where}: {x[i]} vs {y[i]}"
    return ""
