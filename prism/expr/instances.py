"""The shape situations of an axiom: every generic instantiation its condition allows.

An axiom's pattern variables are tensors, data-dim indices or axis names. A *generic instance*
binds each tensor variable to a stacked tensor of a given rank, axes and symbolic shape, each dim
index to a number, and each axis variable to a name; it is kept when both sides are well-shaped
and the condition holds, decided by `TensorAnalysis` and `TermFacts` exactly as the e-graph does.
`generic_instances` enumerates them all, up to renaming:

- ranks 1 to 4, every rank the IR allows (`prism.ir.graph.MAX_RANK`; every tensor variable has
  the same rank, as the table's axioms need);
- every dim index below the rank, for each dim variable;
- axis variables equal or distinct (set partitions over `ga`, `gb`, ...);
- each tensor variable's axes: any subset of the bound axis names. (An axis that no atom of the
  pattern names, carried by every tensor, is passed unchanged by every head, so an instance with
  it is the instance without it applied at each of its positions: it adds no case.)
- each dim literally 1 (it broadcasts) or a symbolic size; symbolic sizes are equal or distinct
  within a *position class*: the dim positions that an op or a condition compares (one class
  per position, and the last two positions together when the axiom multiplies matrices; the
  condition words compare one position: `same_shape`, `same_dim`, `size_one`). Sizes of
  different classes are never compared, so they get distinct names; that loses no generality,
  since a symbolic size stands for every positive integer, equal to another one or not.
- positions that play the same part are taken in one order only: a position that no dim index
  names, that is not one of a matmul's last two, and that is not the last when the condition
  reads the last dim (`last_size_one`) is *anonymous*, and every head treats anonymous positions
  alike (elementwise, with broadcasting). An instance whose anonymous positions carry the same
  size patterns in another order is this one with its indices permuted, so its identity is the
  same statement: only the non-decreasing orders are kept (at rank 4 a three-tensor elementwise
  axiom has 330 instances instead of 4096).

The enumeration prunes with two necessary conditions: a choice of axes and dim indices must be
well-shaped with all sizes 1 (a size of 1 never fails a comparison), and each class's sizes
must be well-shaped with the other classes' sizes 1.

A tensor variable `?a` becomes the leaf `T_a`; `StackedAnalysis` gives such leaves axes.
`float64_counterexample` evaluates an instance at concrete sizes, to confirm a refutation.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from prism.errors import PrismError
from prism.expr.axioms import Axiom, Condition
from prism.expr.rules import Rule, TermFacts, fold_data, is_var
from prism.expr.tensor_terms import (
    ATOM_ARGS,
    SYMBOLIC_PREFIX,
    TERM_ATTRS,
    Info,
    TensorAnalysis,
    TensorInfo,
    evaluate,
)
from prism.expr.terms import Term
from prism.ir.dims import Dim, dim, var
from prism.ir.dims import evaluate as eval_dim
from prism.ir.graph import MAX_RANK

AXIS_NAMES = ("ga", "gb", "gc", "gd")
MAX_ELEMENTS = 1 << 16   # per tensor, in a float64 counterexample search


class StackedAnalysis(TensorAnalysis):
    """`TensorAnalysis` whose leaves may be stacked tensors (leaves with axes); `axis_sizes`
    gives the axes whose sizes the instance ties to others' (`axis_relations`)."""

    def __init__(self, leaves: Mapping[str, TensorInfo],
                 axis_sizes: Mapping[str, Dim] | None = None):
        super().__init__({}, axis_sizes)
        self.leaves = dict(leaves)

    def make(self, head: str, child_data: tuple[Info, ...]) -> Info:
        if not child_data and head in self.leaves:
            return self.leaves[head]
        return super().make(head, child_data)


@dataclass(frozen=True)
class Instance:
    """One generic instantiation: the two sides, the tensor leaves, the analysis deciding them."""

    lhs: Term
    rhs: Term
    subst: Mapping[str, Term]
    leaves: Mapping[str, TensorInfo]
    analysis: StackedAnalysis
    infos: Mapping[Term, Info]          # the analysis of every subterm of both sides

    def describe(self) -> str:
        tensors = "; ".join(f"{name}: axes [{', '.join(sorted(info.axes))}] shape "
                            f"[{', '.join(str(d) for d in info.shape)}]"
                            for name, info in sorted(self.leaves.items()))
        return f"{self.lhs} = {self.rhs} with {tensors}"


class UnsupportedPattern(ValueError):
    """A pattern this enumeration cannot instantiate (a scalar variable, a variable in two
    roles)."""


def roles(rule: Rule) -> dict[str, str]:
    """Each variable's role, from where it occurs: "tensor", "dim", "axis" or "scalar"."""
    found: dict[str, str] = {}
    for pattern in (rule.lhs, rule.rhs):
        for _, sub in pattern.term.subterms():
            for i, arg in enumerate(sub.args):
                if not is_var(arg.head):
                    continue
                role = ATOM_ARGS.get(sub.head, {}).get(i, "tensor")
                if found.setdefault(arg.head, role) != role:
                    raise UnsupportedPattern(f"{arg.head} is both a {found[arg.head]} and a "
                                             f"{role}")
    for v in rule.vars:
        found.setdefault(v, "tensor")  # a side that is a bare variable
    return found


def _optional_scalars(rule: Rule) -> set[str]:
    """The scalar variables that stand where an op's attribute may be None (clamp's bounds)."""
    found: set[str] = set()
    for pattern in (rule.lhs, rule.rhs):
        for _, sub in pattern.term.subterms():
            for i, arg in enumerate(sub.args):
                if is_var(arg.head) and TERM_ATTRS.get(sub.head, {}).get(i) in ("lo", "hi"):
                    found.add(arg.head)
    return found


def leaf_name(var_name: str) -> str:
    return f"T_{var_name[1:]}"


def generic_instances(ax: Axiom) -> Iterator[Instance]:
    """Every kept generic instance of `ax`, smallest rank first."""
    rule = ax.rule()
    role = roles(rule)
    tensors = [v for v in rule.vars if role[v] == "tensor"]
    dims = [v for v in rule.vars if role[v] == "dim"]
    axes = [v for v in rule.vars if role[v] == "axis"]
    # A scalar is symbolic: one instance holds for every value (z3 reads it as a real
    # constant); a clamp bound is also absent (`none`), a case of its own.
    scalars = [v for v in rule.vars if role[v] == "scalar"]
    optional = _optional_scalars(rule)
    scalar_values = [[Term(f"{SYMBOLIC_PREFIX}{v[1:]}"), *([Term("none")] if v in optional
                                                            else [])] for v in scalars]
    matrices = any(sub.head == "matmul" for p in (rule.lhs, rule.rhs)
                   for _, sub in p.term.subterms())
    reads_last = not _names_positions_by_index(ax.condition)
    for rank in range(1, MAX_RANK + 1):
        classes = _position_classes(rank, matrices)
        for dim_values in itertools.product(range(rank), repeat=len(dims)):
            named = set(dim_values) | ({rank - 1} if reads_last else set())
            anonymous = [c for c, positions in enumerate(classes)
                         if len(positions) == 1 and positions[0] not in named]
            for names in _partitions(len(axes)):
                bound = sorted(set(names))
                atoms = {v: Term(str(d)) for v, d in zip(dims, dim_values, strict=True)}
                atoms |= {v: Term(n) for v, n in zip(axes, names, strict=True)}
                sizes = axis_relations(ax.condition, dict(zip(axes, names, strict=True)))
                for values in itertools.product(*scalar_values):
                    atoms |= dict(zip(scalars, values, strict=True))
                    for var_axes in itertools.product(_subsets(bound), repeat=len(tensors)):
                        stacks = {v: frozenset(a) for v, a in zip(tensors, var_axes,
                                                                  strict=True)}
                        yield from _shaped(rule, atoms, stacks, rank, classes, anonymous,
                                           sizes)


# Condition words that read positions only through dim-index atoms (or not at all).
_BY_INDEX = frozenset({"is_tensor", "is_axis", "distinct", "dim_from_end", "batch_dim",
                       "size_one", "same_shape", "same_dim", "all_of", "axis_product",
                       "same_axis_size"})


def axis_relations(cond: Condition | None, names: Mapping[str, str]) -> dict[str, Dim]:
    """The axis sizes a condition ties together, for axis variables bound to `names`: under
    `axis_product(g, a, b)` axis g has |a|·|b| positions, under `same_axis_size(g, h)` h has
    |g|. So the instance is the generic one of the relation (|a| and |b| any sizes), not one
    where opaque sizes happen to be equal. Names bound to the same axis relate nothing new."""
    out: dict[str, Dim] = {}
    if not isinstance(cond, Condition):
        return out
    if cond.word == "all_of":
        for c in cond.args:
            out |= axis_relations(c, names)
    elif cond.word == "axis_product":
        g, a, b = (names.get(v) for v in cond.args)
        if g is not None and a is not None and b is not None and g not in (a, b):
            out[g] = var(a) * var(b)
    elif cond.word == "same_axis_size":
        g, h = (names.get(v) for v in cond.args)
        if g is not None and h is not None and g != h:
            out[h] = var(g)
    return out


def _names_positions_by_index(cond: Condition | None) -> bool:
    """Whether `cond` reads data positions only through dim-index atoms (so the positions no
    atom names are anonymous to it)."""
    if cond is None:
        return True
    if not isinstance(cond, Condition) or cond.word not in _BY_INDEX:
        return False
    return all(_names_positions_by_index(a) for a in cond.args if isinstance(a, Condition))


def _shaped(rule: Rule, atoms: dict[str, Term], stacks: dict[str, frozenset[str]], rank: int,
            classes: list[list[int]], anonymous: Sequence[int] = (),
            axis_sizes: Mapping[str, Dim] | None = None) -> Iterator[Instance]:
    def shaped(shapes: dict[str, tuple[Dim, ...]], condition: bool) -> Instance | None:
        inst = _instance(rule, atoms, stacks, shapes, axis_sizes)
        if not all(isinstance(inst.infos[t], TensorInfo) for t in (inst.lhs, inst.rhs)):
            return None
        if condition and rule.condition is not None and \
                not rule.condition(TermFacts(inst.subst, inst.analysis)):
            return None
        return inst

    ones = {v: (dim(1),) * rank for v in stacks}
    if shaped(ones, condition=False) is None:
        return  # ill-formed whatever the sizes: all-ones shapes never fail a size comparison
    per_class: list[list[tuple[tuple[int, ...], _Sizes]]] = []
    for c, positions in enumerate(classes):
        viable = []
        for code, sizes in _class_sizes(c, positions, list(stacks)):
            if shaped({v: tuple(sizes.get((v, j), dim(1)) for j in range(rank))
                       for v in stacks}, condition=False) is not None:
                viable.append((code, sizes))
        per_class.append(viable)
    for combo in _combinations(per_class, anonymous):
        merged: dict[tuple[str, int], Dim] = {}
        for sizes in combo:
            merged |= sizes
        found = shaped({v: tuple(merged[v, j] for j in range(rank)) for v in stacks},
                       condition=True)
        if found is not None:
            yield found


def _instance(rule: Rule, atoms: dict[str, Term], stacks: dict[str, frozenset[str]],
              shapes: dict[str, tuple[Dim, ...]],
              axis_sizes: Mapping[str, Dim] | None = None) -> Instance:
    leaves = {leaf_name(v): TensorInfo(stacks[v], shapes[v]) for v in stacks}
    subst = atoms | {v: Term(leaf_name(v)) for v in stacks}
    analysis = StackedAnalysis(leaves, axis_sizes)
    lhs, rhs = rule.lhs.instantiate(subst), rule.rhs.instantiate(subst)
    cache: dict[Term, Info] = {}
    for side in (lhs, rhs):
        fold_data(side, analysis, cache)
    return Instance(lhs, rhs, subst, leaves, analysis, cache)


def _position_classes(rank: int, matrices: bool) -> list[list[int]]:
    if matrices and rank >= 2:
        return [[j] for j in range(rank - 2)] + [[rank - 2, rank - 1]]
    return [[j] for j in range(rank)]


_Sizes = dict[tuple[str, int], Dim]   # a size per slot (tensor variable, position)


def _combinations(per_class: Sequence[Sequence[tuple[tuple[int, ...], _Sizes]]],
                  anonymous: Sequence[int]) -> Iterator[tuple[_Sizes, ...]]:
    """One size pattern per class: every combination, except that the anonymous classes take
    their patterns in non-decreasing order (the other orders permute anonymous positions). Their
    viable patterns are the same list, as the positions play the same part; if they are not,
    every order is kept."""
    group = list(anonymous)
    codes = [[code for code, _ in per_class[c]] for c in group]
    if len(group) < 2 or any(cs != codes[0] for cs in codes):
        group = []
    others = [c for c in range(len(per_class)) if c not in group]
    orders = itertools.combinations_with_replacement(range(len(per_class[group[0]])),
                                                     len(group)) if group else [()]
    for order in orders:
        chosen = dict(zip(group, order, strict=True))
        for rest in itertools.product(*(range(len(per_class[c])) for c in others)):
            chosen |= dict(zip(others, rest, strict=True))
            yield tuple(per_class[c][chosen[c]][1] for c in range(len(per_class)))


def _class_sizes(c: int, positions: Sequence[int], tensors: Sequence[str]
                 ) -> Iterator[tuple[tuple[int, ...], _Sizes]]:
    """Each slot (tensor, position) of a class literally 1 or a symbolic size, symbols equal or
    distinct: restricted growth strings, 0 standing for 1 (with the string itself)."""
    slots = [(v, j) for v in tensors for j in positions]
    for code in _growth_strings(len(slots)):
        yield code, {s: dim(1) if k == 0 else var(f"N{c}{chr(96 + k)}")
                     for s, k in zip(slots, code, strict=True)}


def _growth_strings(n: int, top: int = 0) -> Iterator[tuple[int, ...]]:
    """Length-n sequences where each value is at most one more than the largest so far (above
    `top`): with 0 standing for the size 1 and k ≥ 1 for the k-th symbol, every pattern of 1s and
    equal or distinct symbols, once up to renaming."""
    if n == 0:
        yield ()
        return
    for k in range(top + 2):
        for rest in _growth_strings(n - 1, max(top, k)):
            yield (k, *rest)


def _partitions(n: int) -> Iterator[tuple[str, ...]]:
    """Axis names for n axis variables, every pattern of equal and distinct once."""
    for code in _growth_strings(n, -1):
        yield tuple(AXIS_NAMES[k] for k in code)


def _subsets(names: Sequence[str]) -> list[tuple[str, ...]]:
    return [c for r in range(len(names) + 1) for c in itertools.combinations(names, r)]


# -- counterexamples in float64 ---------------------------------------------------------------

def float64_counterexample(inst: Instance, hint: Mapping[str, int], seeds: int = 3) -> str | None:
    """A concrete counterexample to `inst`, found by evaluating both sides in float64 (the
    definition, `tensor_terms.evaluate`) at sizes from `hint` (a solver's model) or small sizes
    that divide, with random inputs in [0.5, 2] (where sqrt, pow and div are defined); None if
    none was found. A leaf with axes, which `evaluate` does not take, is written as splits of a
    plain tensor along dim 0 (a split is a bijection, so its values are as arbitrary)."""
    names = sorted({n for info in inst.infos.values() if isinstance(info, TensorInfo)
                    for n in (*info.axes, *(v for d in info.shape for v in d.free_vars()))})
    axes = {a for info in inst.infos.values() if isinstance(info, TensorInfo) for a in info.axes}
    tries = [{n: hint.get(n, 2) for n in names}]
    tries += [{n: a if n in axes else d for n in names}
              for a, d in ((2, 4), (3, 6), (2, 12), (3, 12), (1, 3))]
    plain = {}
    for name, info in inst.leaves.items():
        term = Term(name)
        for a in sorted(info.axes):
            term = Term("part", (term, Term("0"), Term(a)))
        plain[name] = term
    lhs, rhs = _replace_leaves(inst.lhs, plain), _replace_leaves(inst.rhs, plain)
    tied = inst.analysis.axis_sizes
    for env in tries:
        env |= {a: eval_dim(size, env) for a, size in tied.items()}  # |g| = |a|·|b|, as bound
        for seed in range(seeds):
            found = _differ(inst, lhs, rhs, env, np.random.default_rng(seed))
            if found:
                return found
    return None


def _replace_leaves(term: Term, leaves: Mapping[str, Term]) -> Term:
    if not term.args:
        return leaves.get(term.head, term)
    return Term(term.head, [_replace_leaves(a, leaves) for a in term.args])


def _differ(inst: Instance, lhs: Term, rhs: Term, env: dict[str, int],
            rng: np.random.Generator) -> str:
    try:
        shapes = {}
        for name, info in inst.leaves.items():
            shape = [eval_dim(d, env) for d in info.shape]
            shape[0] *= math.prod(env[a] for a in info.axes)  # the splits' plain tensor
            shapes[name] = tuple(shape)
        if any(math.prod(s) > MAX_ELEMENTS or min(s) < 1 for s in shapes.values()):
            return ""
        inputs = {name: rng.uniform(0.5, 2.0, s) for name, s in shapes.items()}
        left, right = evaluate(lhs, inputs, env), evaluate(rhs, inputs, env)
    except (PrismError, ValueError, KeyError):
        return ""  # sizes that do not divide, or not evaluable
    order = sorted(left.axes)
    x, y = left.to(order), right.to(order)
    if x.shape != y.shape:
        return f"at sizes {env}: shapes {x.shape} and {y.shape}"
    with np.errstate(invalid="ignore"):
        bad = ~np.isclose(x, y, rtol=1e-6, atol=1e-9, equal_nan=True)
    if not bad.any():
        return ""
    i = tuple(int(j) for j in np.argwhere(bad)[0])
    return (f"at sizes {env}, index {i} (axes {order} first): lhs {float(x[i])!r}, "
            f"rhs {float(y[i])!r}")
