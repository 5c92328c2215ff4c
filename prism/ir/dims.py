"""Dimension expressions: the sizes of symbolic tiles, grids and loops.

A `Dim` is an immutable value in a normal form, so structural equality (and the hash) is
equality of the normal form:

    Dim      = Σ coef · monomial          (integer coefficients, like terms merged, none zero)
    monomial = Π atom^power               (atoms ordered, powers ≥ 1, a bit's power 1)
    atom     = var | bit | (Dim ÷ Dim)    (an exact quotient that did not simplify)

`bit` variables are the 0/1 map variables m[T,d,p]; `bit·bit = bit` is applied on construction,
so the tile formula `D / ((1 − m + m·g) · (1 − f + f·F))` collapses to `D / (g·F)` when the bits
are 1 and to `D` when they are 0. Evaluation insists that every quotient divides exactly: a tile
size is an integer or the assignment is invalid.

Every constructor ends in one normaliser, `Dim(terms)`, which rewrites until no rule applies, so a
Dim rebuilt from its own terms (its JSON, a substitution of nothing) is the same Dim. Each rule
keeps the value and the condition that every quotient divides; only a quotient that cancels
completely drops its condition (a tile times its split factor is the whole dim). With
`d = c·N` a monomial (c > 0 an integer, N a product of atoms) and `a`, `b` monomials:

    a·x + b·x = (a + b)·x;  0·x vanishes;  m·m = m                     (a polynomial)
    k·M·(n ÷ d) = (k div c)·(M/N)·n + (k mod c)·M·(n ÷ d)   if N | M   (cancellation)
    (a·P) ÷ (b·P) = a ÷ b   for a non-constant P                       (a common factor)
    (k·n) ÷ (k·d) = n ÷ d   for an integer or a plain variable k       (lowest terms)
    (q·d + r) ÷ d = q + r ÷ d,  r's coefficients 0..c−1 where N divides (the remainder)
    n ÷ 1 = n;  0 ÷ d = 0
and, where n and d are polynomials in variables and bits (no quotient inside):
    n ÷ (−d) = (−n) ÷ d;  (−n) ÷ d = −(n ÷ d)     (the last term of d, and of n where N does
                                                    not divide it, positive)
    r ÷ c = k·(r′ ÷ c) − (k·r′ − r)/c   with r′ = u·r mod c least over the units u mod c, k = 1/u

Plain variables are sizes, positive, so cancelling them keeps `d | n`; bits may be 0, and a
quotient by a bit does not cancel in a product (`m·(x ÷ m)` stays: with `m·m = m` the result
would depend on the order of the products). So polynomials in variables and bits are equal
exactly when their functions are, and a quotient `n ÷ d` of such polynomials, d a monomial,
equals another exactly when both value and divisibility do (`D/2 + F/2` asks more than
`(D + F)/2`: they are different Dims). What the rules do not decide:
a quotient by a sum is an atom that cancels only a monomial multiple of its denominator
(`(g·D + D) ÷ (g + 1)` stays); and a term with several quotients is rewritten by the first that
cancels, in atom order, so such products can depend on the order they are formed in:
`(2·(D÷2))·(F÷2) = D·(F÷2)` but `(2·(F÷2))·(D÷2) = F·(D÷2)`, equal in value, distinct as Dims.

JSON form: an int; `"name"` (a variable); `["bit", "name"]`; `["+", a, b, ...]`;
`["*", a, b, ...]`; `["/", a, b]`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping
from typing import Any, Union

from prism.errors import DimExprError

DimLike = Union["Dim", int, str]
Monomial = tuple[tuple["Atom", int], ...]
Term = tuple[Monomial, int]

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

    @property
    def is_plain(self) -> bool:
        """A size variable: positive, so it cancels from both sides of a quotient."""
        return self.num is None and not self.is_bit

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Atom) and self.key == other.key

    def __hash__(self) -> int:
        return self._hash

    def __lt__(self, other: Atom) -> bool:
        return self.key < other.key


class Dim:
    """A polynomial over atoms in normal form. Build with `dim()`, `var()`, `bit()` and
    operators; `Dim(terms)` normalises any terms it is given."""

    # `_const` (the int of a constant, else None), `_free` and `_str` are computed once: a
    # Dim never changes, and the search asks each of them many times
    __slots__ = ("_const", "_free", "_hash", "_str", "key", "terms")

    def __init__(self, terms: Mapping[Monomial, int] | Iterable[Term]):
        pairs = terms.items() if isinstance(terms, Mapping) else terms
        self.terms: tuple[Term, ...] = tuple(sorted(_normalise(pairs).items(),
                                                    key=lambda mc: _mono_key(mc[0])))
        self.key = " + ".join(f"{c}*{_mono_key(m)}" for m, c in self.terms) or "0"
        self._const: int | None = (self.terms[0][1] if self.terms else 0) \
            if all(not m for m, _ in self.terms) else None
        self._free: frozenset[str] | None = None
        self._str: str | None = None
        # A constant hashes like its int, because it compares equal to it.
        self._hash = hash(self._const if self._const is not None else self.key)

    # -- structure ---------------------------------------------------------------------------
    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if isinstance(other, int):
            return self._const is not None and self._const == other and \
                not isinstance(other, bool)
        return isinstance(other, Dim) and self.key == other.key

    def __hash__(self) -> int:
        return self._hash

    @property
    def is_const(self) -> bool:
        return self._const is not None

    @property
    def value(self) -> int:
        """The integer of a constant expression."""
        if self._const is None:
            raise DimExprError(f"dimension {self} is symbolic; evaluate it under an assignment")
        return self._const

    def free_vars(self) -> frozenset[str]:
        if self._free is None:
            names: set[str] = set()
            for mono, _ in self.terms:
                for atom, _ in mono:
                    if atom.num is not None and atom.den is not None:
                        names |= atom.num.free_vars() | atom.den.free_vars()
                    else:
                        names.add(atom.name)
            self._free = frozenset(names)
        return self._free

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
        if self._str is None:
            self._str = self._text()
        return self._str

    def _text(self) -> str:
        if not self.terms:
            return "0"
        parts = []
        for i, (mono, coef) in enumerate(self.terms):
            # A quotient among other factors is bracketed: 2*(m/2) is not 2*m/2.
            alone = len(mono) == 1 and mono[0][1] == 1 and abs(coef) == 1
            body = "*".join((_atom_str(a) if alone or a.num is None else f"({_atom_str(a)})")
                            + (f"^{p}" if p > 1 else "") for a, p in mono)
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


# -- the normal form -----------------------------------------------------------------------------

def _normalise(terms: Iterable[Term]) -> dict[Monomial, int]:
    """Merge like terms and cancel quotients until no rule applies. A term that cancels may
    merge with another into one that cancels again: 2·(m÷2) from m÷2 + m÷2 is m."""
    out: dict[Monomial, int] = {}
    pending = list(terms)
    while pending:
        mono, coef = pending.pop()
        coef += out.pop(mono, 0)
        if coef == 0:
            continue
        rewritten = _cancel(mono, coef)
        if rewritten is None:
            out[mono] = coef
        else:
            pending += rewritten
    return out


def _cancel(mono: Monomial, coef: int) -> list[Term] | None:
    """The term coef·mono rewritten by the first quotient of it that cancels, or None."""
    for atom, _ in mono:
        den = _single_term(atom.den) if atom.num is not None and atom.den is not None else None
        if atom.num is None or den is None or den[1] <= 0:
            continue
        den_mono, c = den
        if any(a.is_bit for a, _ in den_mono):
            continue   # m·(x ÷ m) stays: with m·m = m, cancelling would depend on the order
        others = _mono_divide(mono, ((atom, 1),))
        rest = _mono_divide(others, den_mono) if others is not None else None
        if rest is None:
            continue
        q, r = divmod(coef, c)
        if q:   # k·M·(n ÷ c·N) = (k div c)·(M/N)·n + (k mod c)·M·(n ÷ c·N)
            return [(mono, r)] * bool(r) + [(_mono_mul(rest, m), q * k) for m, k in atom.num.terms]
    return None


def _single_term(d: Dim) -> Term | None:
    return d.terms[0] if len(d.terms) == 1 else None


def _mono_mul(m1: Monomial, m2: Monomial) -> Monomial:
    powers = dict(m1)
    for atom, p in m2:
        powers[atom] = 1 if atom.is_bit else powers.get(atom, 0) + p
    return tuple(sorted(powers.items()))


def _mono_divide(big: Monomial, small: Monomial) -> Monomial | None:
    """big / small, or None when small does not divide big."""
    powers = dict(big)
    for atom, p in small:
        left = powers.get(atom, 0) - p
        if left < 0:
            return None
        if left:
            powers[atom] = left
        else:
            del powers[atom]
    return tuple(sorted(powers.items()))


def _scale_down(d: Dim, k: int, mono: Monomial) -> Dim:
    """d / (k·mono), for a k and a mono that divide every term."""
    out = []
    for m, c in d.terms:
        left = _mono_divide(m, mono)
        assert left is not None and c % k == 0
        out.append((left, c // k))
    return Dim(out)


def _common_plain(terms: Iterable[Term]) -> Monomial:
    """The largest product of plain variables dividing every term."""
    common: dict[Atom, int] | None = None
    for mono, _ in terms:
        powers = {a: p for a, p in mono if a.is_plain}
        common = powers if common is None else {
            a: min(p, powers[a]) for a, p in common.items() if a in powers}
    return tuple(sorted((common or {}).items()))


def _content(d: Dim) -> tuple[int, Monomial, Dim]:
    """d = k·M·P: the integer content k, the common plain monomial M and the primitive part P
    (for a polynomial, k takes the sign that leaves P's last term positive)."""
    k, mono = math.gcd(*(c for _, c in d.terms)), _common_plain(d.terms)
    primitive = _scale_down(d, k, mono)
    if _is_polynomial(primitive.terms) and primitive.terms[-1][1] < 0:
        k, primitive = -k, mul(-1, primitive)
    return k, mono, primitive


# -- constructors ------------------------------------------------------------------------------

def const(n: int) -> Dim:
    if isinstance(n, bool) or not isinstance(n, int):
        raise DimExprError(f"a dimension constant must be an int, got {n!r}")
    if -_SMALL <= n <= _SMALL:
        return _SMALL_CONSTS[n + _SMALL]
    return Dim([((), n)])


def var(name: str) -> Dim:
    """A positive integer variable: a grid size, a loop range, a data dim."""
    _check_name(name)
    return _variable(name, False)


def bit(name: str) -> Dim:
    """A 0/1 map variable m[T,d,p]."""
    _check_name(name)
    return _variable(name, True)


@functools.lru_cache(maxsize=1 << 16)
def _variable(name: str, is_bit: bool) -> Dim:
    """The Dim of one variable, made once (a Dim never changes): the search opens every
    custom kernel with the same symbolic sizes and maps."""
    return _atom(Atom(name=name, is_bit=is_bit))


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


# Dims are immutable values: the arithmetic is remembered (the search rebuilds the same tile
# sizes and byte counts for every family it opens). Typed, so 2.0 and True are not taken for 2.
@functools.lru_cache(maxsize=1 << 16, typed=True)
def add(*xs: DimLike) -> Dim:
    return Dim([t for x in xs for t in dim(x).terms])


@functools.lru_cache(maxsize=1 << 16, typed=True)
def mul(*xs: DimLike) -> Dim:
    result = const(1)
    for x in xs:
        result = Dim([(_mono_mul(m1, m2), c1 * c2)
                      for m1, c1 in result.terms for m2, c2 in dim(x).terms])
    return result


@functools.lru_cache(maxsize=1 << 16, typed=True)
def div(num: DimLike, den: DimLike) -> Dim:
    n, d = dim(num), dim(den)
    if not d.terms:
        raise DimExprError(f"division of {n} by zero")
    if not n.terms:
        return n
    (nk, nm, np), (dk, dm, dp) = _content(n), _content(d)
    if np == dp and not dp.is_const:   # (a·P) ÷ (b·P) = a ÷ b
        return div(Dim([(nm, nk)]), Dim([(dm, dk)]))
    # Lowest terms: (k·n) ÷ (k·d) = n ÷ d. Signs and units move only through polynomials in
    # variables and bits: negating a term with a quotient inside can cancel it into another form.
    pure = _is_polynomial(n.terms)
    k, common = math.gcd(nk, dk), _common_plain(n.terms + d.terms)
    n, d = _scale_down(n, k, common), _scale_down(d, k, common)
    if pure and _is_polynomial(d.terms) and d.terms[-1][1] < 0:   # n ÷ (−d) = (−n) ÷ d
        n, d = mul(-1, n), mul(-1, d)
    if d == 1:
        return n
    single = _single_term(d)
    if single is None or single[1] < 0:   # a quotient by a sum is an atom
        sign = -1 if pure and n.terms[-1][1] < 0 else 1
        return mul(sign, _atom(Atom(num=mul(sign, n), den=d)))
    den_mono, c = single
    whole, rest = _remainder(n.terms, den_mono, c)
    if not rest:
        return whole
    if not den_mono and _is_polynomial(rest):
        return add(whole, _by_constant(rest, c))
    loose = [k for m, k in rest if _mono_divide(m, den_mono) is None]
    if _is_polynomial(rest) and loose and loose[-1] < 0:   # (−r) ÷ d = −(r ÷ d)
        more, rest = _remainder([(m, -k) for m, k in rest], den_mono, c)
        return add(whole, mul(-1, add(more, _quotient(Dim(rest), d))))
    return add(whole, _quotient(Dim(rest), d))


def _remainder(terms: Iterable[Term], den_mono: Monomial, c: int) -> tuple[Dim, list[Term]]:
    """n = q·d + r for d = c·N: q takes what it can of each term N divides, leaving r a
    coefficient in 0..c−1 there; the other terms stay in r."""
    quotient: list[Term] = []
    rest: list[Term] = []
    for m, k in terms:
        left = _mono_divide(m, den_mono)
        q, r = divmod(k, c) if left is not None else (0, k)
        if left is not None and q:
            quotient.append((left, q))
        if r:
            rest.append((m, r))
    return Dim(quotient), rest


def _quotient(r: Dim, d: Dim) -> Dim:
    """r ÷ d as an atom, unless r and d share their primitive part."""
    (rk, rm, rp), (dk, dm, dp) = _content(r), _content(d)
    if rp == dp and not dp.is_const:
        return div(Dim([(rm, rk)]), Dim([(dm, dk)]))
    return _atom(Atom(num=r, den=d))


def _atom(atom: Atom, coef: int = 1) -> Dim:
    return Dim([(((atom, 1),), coef)])


def _is_polynomial(terms: Iterable[Term]) -> bool:
    """No quotient in any term: a polynomial in variables and bits."""
    return all(a.num is None for mono, _ in terms for a, _ in mono)


def _by_constant(r: list[Term], c: int) -> Dim:
    """r ÷ c, r's coefficients in 1..c−1, as k·(r′ ÷ c) − P with r′ = u·r mod c for the unit u
    that makes r′ least, k = 1/u mod c and P = (k·r′ − r)/c: c | r exactly when c | r′, so
    (3·D + 6·F) ÷ 5 and 3·((D + 2·F) ÷ 5) are one Dim."""
    terms = sorted(r, key=lambda mc: _mono_key(mc[0]), reverse=True)
    # The units that make the last term's coefficient a its least, gcd(a, c) (a < c, so
    # c/gcd > 1); the other terms decide among them.
    g = math.gcd(terms[0][1], c)
    step = c // g
    units = [u for u in range(pow(terms[0][1] // g, -1, step), c, step) if math.gcd(u, c) == 1]
    u = min(units, key=lambda u: [u * k % c for _, k in terms])
    least = [(mono, u * k % c) for mono, k in terms]
    k = pow(u, -1, c)
    return add(_atom(Atom(num=Dim(least), den=const(c)), k),
               Dim([(mono, (b - k * a) // c) for (mono, a), (_, b) in
                    zip(least, terms, strict=True)]))


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


# the constants the shapes use most, built once (`const` hands them out; a Dim never changes)
_SMALL = 1024
_SMALL_CONSTS = [Dim([((), n)]) for n in range(-_SMALL, _SMALL + 1)]
