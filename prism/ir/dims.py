"""Dimension expressions: the sizes of symbolic tiles, grids and loops.

A `Dim` is an immutable value in a canonical form, so structural equality is semantic equality
for everything the normal form decides:

    Dim   = Σ coef · monomial             (a polynomial with integer coefficients)
    monomial = Π atom^power               (atoms sorted, powers ≥ 1)
    atom  = var | bit | (Dim ÷ Dim)       (a quotient that did not simplify)

`bit` variables are the 0/1 map variables m[T,d,p]; `bit·bit = bit` is applied on construction,
so the tile formula `D / ((1 − m + m·g) · (1 − f + f·F))` collapses to `D / (g·F)` when the bits
are 1 and to `D` when they are 0. Quotients cancel what they can: `c·x / c = x`, `(D ÷ g)·g = D`,
`x ÷ x = 1`, `x ÷ 1 = x`, and constant quotients fold when exact. Evaluation insists that every
quotient divides exactly: a tile size is an integer or the assignment is invalid.

JSON form: an int; `"name"` (a variable); `["bit", "name"]`; `["+", a, b, ...]`;
`["*", a, b, ...]`; `["/", a, b]`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Union

from prism.errors import DimExprError

DimLike = Union["Dim", int, str]
Monomial = tuple[tuple["Atom", int], ...]

_MAX_JSON_DEPTH = 64


class Atom:
    """A variable (plain or 0/1) or an irreducible quotient. Compared by `key`."""

    __slots__ = ("_hash", "den", "is_bit", "key", "name", "num")

    def __init__(self, *, name: str = "", is_bit: bool = False,
                 num: Dim | None = None, den: Dim | None = None):
        self.name, self.is_bit, self.num, self.den = name, is_bit, num, den
        if num is not None and den is not None:
            self.key = f"({num.key})/({den.key})"
        else:
            self.key = ("?" if is_bit else "") + name
        self._hash = hash(self.key)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Atom) and self.key == other.key

    def __hash__(self) -> int:
        return self._hash

    def __lt__(self, other: Atom) -> bool:
        return self.key < other.key


class Dim:
    """A canonical polynomial over atoms. Build with `dim()`, `var()`, `bit()` and operators."""

    __slots__ = ("_hash", "key", "terms")

    def __init__(self, terms: Mapping[Monomial, int]):
        items = sorted(((m, c) for m, c in terms.items() if c != 0),
                       key=lambda mc: _mono_key(mc[0]))
        self.terms: tuple[tuple[Monomial, int], ...] = tuple(items)
        self.key = " + ".join(f"{c}*{_mono_key(m)}" for m, c in self.terms) or "0"
        # A constant hashes like its int, because it compares equal to it.
        self._hash = hash(self.terms[0][1] if self.terms and not self.terms[0][0] and len(
            self.terms) == 1 else 0 if not self.terms else self.key)

    # -- structure ---------------------------------------------------------------------------
    def __eq__(self, other: object) -> bool:
        if isinstance(other, int):
            other = const(other)
        return isinstance(other, Dim) and self.key == other.key

    def __hash__(self) -> int:
        return self._hash

    @property
    def is_const(self) -> bool:
        return all(not m for m, _ in self.terms)

    @property
    def value(self) -> int:
        """The integer of a constant expression."""
        if not self.is_const:
            raise DimExprError(f"dimension {self} is symbolic; evaluate it under an assignment")
        return self.terms[0][1] if self.terms else 0

    def free_vars(self) -> frozenset[str]:
        names: set[str] = set()
        for mono, _ in self.terms:
            for atom, _ in mono:
                if atom.num is not None and atom.den is not None:
                    names |= atom.num.free_vars() | atom.den.free_vars()
                else:
                    names.add(atom.name)
        return frozenset(names)

    # -- arithmetic ----------------------------------------------------------------------------
    def __add__(self, other: DimLike) -> Dim:
        return add(self, other)

    __radd__ = __add__

    def __sub__(self, other: DimLike) -> Dim:
        return add(self, mul(-1, other))

    def __rsub__(self, other: DimLike) -> Dim:
        return add(other, mul(-1, self))

    def __mul__(self, other: DimLike) -> Dim:
        return mul(self, other)

    __rmul__ = __mul__

    def __truediv__(self, other: DimLike) -> Dim:
        return div(self, other)

    def __rtruediv__(self, other: DimLike) -> Dim:
        return div(other, self)

    # -- printing ------------------------------------------------------------------------------
    def __str__(self) -> str:
        if not self.terms:
            return "0"
        parts = []
        for i, (mono, coef) in enumerate(self.terms):
            body = "*".join(_atom_str(a) + (f"^{p}" if p > 1 else "") for a, p in mono)
            mag = abs(coef)
            text = (str(mag) if not body else body if mag == 1 else f"{mag}*{body}")
            sign = "-" if coef < 0 else "+"
            parts.append(("-" if coef < 0 else "") + text if i == 0 else f" {sign} {text}")
        return "".join(parts)

    def __repr__(self) -> str:
        return f"Dim({self})"


def _mono_key(mono: Monomial) -> str:
    return "*".join(a.key + (f"^{p}" if p > 1 else "") for a, p in mono)


def _atom_str(atom: Atom) -> str:
    if atom.num is not None and atom.den is not None:
        num, den = str(atom.num), str(atom.den)
        num = num if _is_simple(atom.num) else f"({num})"
        den = den if _is_simple(atom.den) and len(atom.den.terms[0][0]) <= 1 else f"({den})"
        return f"{num}/{den}"
    return atom.name


def _is_simple(d: Dim) -> bool:
    return len(d.terms) <= 1 and (not d.terms or d.terms[0][1] > 0)


# -- constructors ------------------------------------------------------------------------------

def const(n: int) -> Dim:
    if isinstance(n, bool) or not isinstance(n, int):
        raise DimExprError(f"a dimension constant must be an int, got {n!r}")
    return Dim({(): n})


def var(name: str) -> Dim:
    """A positive integer variable: a grid size, a loop range, a data dim."""
    _check_name(name)
    return Dim({((Atom(name=name), 1),): 1})


def bit(name: str) -> Dim:
    """A 0/1 map variable m[T,d,p]."""
    _check_name(name)
    return Dim({((Atom(name=name, is_bit=True), 1),): 1})


def _check_name(name: str) -> None:
    if not isinstance(name, str) or not name.isidentifier():
        raise DimExprError(f"dimension variable name {name!r} must be an identifier")


def dim(x: DimLike) -> Dim:
    """Coerce an int (constant), a str (variable name) or a Dim."""
    if isinstance(x, Dim):
        return x
    if isinstance(x, str):
        return var(x)
    return const(x)


def add(*xs: DimLike) -> Dim:
    acc: dict[Monomial, int] = {}
    for x in xs:
        for mono, coef in dim(x).terms:
            acc[mono] = acc.get(mono, 0) + coef
    # Collecting like terms can create a coefficient that cancels a quotient: 2·(D÷2) = D.
    out: dict[Monomial, int] = {}
    for mono, coef in acc.items():
        for m2, c2 in _mono_mul(mono, (), coef) if coef else ():
            out[m2] = out.get(m2, 0) + c2
    return Dim(out)


def mul(*xs: DimLike) -> Dim:
    result = const(1)
    for x in xs:
        acc: dict[Monomial, int] = {}
        for m1, c1 in result.terms:
            for m2, c2 in dim(x).terms:
                for mono, c in _mono_mul(m1, m2, c1 * c2):
                    acc[mono] = acc.get(mono, 0) + c
        result = Dim(acc)
    return result


def _mono_mul(m1: Monomial, m2: Monomial, coef: int) -> list[tuple[Monomial, int]]:
    powers: dict[Atom, int] = {}
    for atom, p in (*m1, *m2):
        powers[atom] = 1 if atom.is_bit else powers.get(atom, 0) + p
    # (n ÷ d)·d = n: cancel a quotient against a monomial denominator present among the factors.
    for atom in sorted(powers):
        if atom.den is None or atom.num is None or atom not in powers:
            continue
        den = _single_monomial(atom.den)
        if den is None:
            continue
        den_mono, den_coef = den
        rest = dict(powers)
        rest[atom] -= 1
        if rest[atom] == 0:
            del rest[atom]
        if den_coef != 0 and coef % den_coef == 0 and _mono_divides(den_mono, rest):
            for a, p in den_mono:
                rest[a] -= p
                if rest[a] == 0:
                    del rest[a]
            left = Dim({tuple(sorted(rest.items())): coef // den_coef})
            return list(mul(left, atom.num).terms)
    return [(tuple(sorted(powers.items())), coef)]


def _single_monomial(d: Dim) -> tuple[Monomial, int] | None:
    return d.terms[0] if len(d.terms) == 1 else None


def _mono_divides(small: Monomial, big: Mapping[Atom, int]) -> bool:
    return all(big.get(a, 0) >= p for a, p in small)


def div(num: DimLike, den: DimLike) -> Dim:
    n, d = dim(num), dim(den)
    if d == const(0):
        raise DimExprError(f"division of {n} by zero")
    if d == const(1):
        return n
    if n == d:
        return const(1)
    single = _single_monomial(d)
    if single is not None:
        den_mono, den_coef = single
        powers = dict(den_mono)
        if all(c % den_coef == 0 and _mono_divides(den_mono, dict(m)) for m, c in n.terms):
            acc: dict[Monomial, int] = {}
            for m, c in n.terms:
                left = dict(m)
                for a, p in powers.items():
                    left[a] -= p
                    if left[a] == 0:
                        del left[a]
                acc[tuple(sorted(left.items()))] = c // den_coef
            return Dim(acc)
    # What does not cancel stays a quotient atom (constants that do not divide included, so that
    # evaluation reports them).
    return Dim({((Atom(num=n, den=d), 1),): 1})


# -- evaluation and substitution ---------------------------------------------------------------

def substitute(d: Dim, env: Mapping[str, DimLike]) -> Dim:
    """Replace variables (plain or bit) by expressions; the result is re-normalised."""
    total = const(0)
    for mono, coef in d.terms:
        term = const(coef)
        for atom, p in mono:
            if atom.num is not None and atom.den is not None:
                value = div(substitute(atom.num, env), substitute(atom.den, env))
            elif atom.name in env:
                value = dim(env[atom.name])
            else:
                value = bit(atom.name) if atom.is_bit else var(atom.name)
            for _ in range(p):
                term = mul(term, value)
        total = add(total, term)
    return total


def evaluate(d: DimLike, env: Mapping[str, int] | None = None) -> int:
    """The integer value of `d` under `env`. Every quotient must divide exactly."""
    expr = dim(d)
    env = env or {}
    missing = expr.free_vars() - set(env)
    if missing:
        raise DimExprError(
            f"dimension {expr} has unbound variable(s) {', '.join(sorted(missing))}; "
            "give them values in the assignment")
    return _eval(expr, env)


def _eval(d: Dim, env: Mapping[str, int]) -> int:
    total = 0
    for mono, coef in d.terms:
        term = coef
        for atom, p in mono:
            if atom.num is not None and atom.den is not None:
                n, q = _eval(atom.num, env), _eval(atom.den, env)
                if q == 0:
                    raise DimExprError(f"{_atom_str(atom)} divides by zero under this assignment")
                if n % q:
                    raise DimExprError(
                        f"{_atom_str(atom)} = {n}/{q} is not an integer under this assignment; "
                        "choose sizes that divide the dimension")
                value = n // q
            else:
                value = env[atom.name]
            term *= value**p
        total += term
    return total


def quotients(d: Dim) -> list[tuple[Dim, Dim]]:
    """Every (numerator, denominator) quotient in `d`, innermost first."""
    found: list[tuple[Dim, Dim]] = []
    for mono, _ in d.terms:
        for atom, _ in mono:
            if atom.num is not None and atom.den is not None:
                found += quotients(atom.num) + quotients(atom.den)
                found.append((atom.num, atom.den))
    return found


# -- JSON --------------------------------------------------------------------------------------

def to_json(d: Dim) -> Any:
    if d.is_const:
        return d.value
    terms = [_term_json(m, c) for m, c in d.terms]
    return terms[0] if len(terms) == 1 else ["+", *terms]


def _term_json(mono: Monomial, coef: int) -> Any:
    factors: list[Any] = [] if coef == 1 else [coef]
    for atom, p in mono:
        if atom.num is not None and atom.den is not None:
            j: Any = ["/", to_json(atom.num), to_json(atom.den)]
        else:
            j = ["bit", atom.name] if atom.is_bit else atom.name
        factors += [j] * p
    if not factors:
        return coef
    return factors[0] if len(factors) == 1 else ["*", *factors]


def from_json(j: Any, _depth: int = 0) -> Dim:
    """Parse the JSON form; malformed input raises `DimExprError`, never anything else."""
    if _depth > _MAX_JSON_DEPTH:
        raise DimExprError("dimension expression nests too deeply (over 64 levels); "
                           "the file is corrupt or hand-written wrongly")
    if isinstance(j, bool):
        raise DimExprError(f"dimension expression {j!r} is a boolean; use an int")
    if isinstance(j, int):
        return const(j)
    if isinstance(j, str):
        return var(j)
    if isinstance(j, list) and j and isinstance(j[0], str):
        head, args = j[0], j[1:]
        if head == "bit" and len(args) == 1 and isinstance(args[0], str):
            return bit(args[0])
        parsed = [from_json(a, _depth + 1) for a in args]
        if head == "+" and parsed:
            return add(*parsed)
        if head == "*" and parsed:
            return mul(*parsed)
        if head == "/" and len(parsed) == 2:
            return div(parsed[0], parsed[1])
    raise DimExprError(f"not a dimension expression: {str(j)[:80]}; "
                       'expected an int, a name, ["bit", name] or ["+"|"*"|"/", ...]')


def shape_str(shape: Iterable[Dim | int]) -> str:
    return "[" + ", ".join(str(s) for s in shape) + "]"
