"""Terms: immutable, hash-consed s-expressions.

A `Term` is a head and a tuple of argument terms; a leaf has no arguments and its head is the atom
(`X`, `1`, `g0`). Terms are hash-consed: building the same structure twice returns the same object,
so structural equality is identity and hashing is one cached integer. The intern table holds terms
weakly, so terms nobody references are freed.

    >>> t = parse("(div (matmul X W) (rms X))")
    >>> str(t.at((0, 1))), t.size()
    ('W', 6)
    >>> t.replace_at((1,), parse("R")) is parse("(div (matmul X W) R)")
    True
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Iterable, Iterator
from typing import Any, ClassVar

from prism.errors import TermSyntaxError

Path = tuple[int, ...]

_DELIMITERS = frozenset("() \t\r\n")


class Term:
    """A hash-consed s-expression: `Term("+", (a, b))` is `(+ a b)`; `Term("a")` is the leaf `a`."""

    __slots__ = ("__weakref__", "_hash", "_size", "args", "head")
    head: str
    args: tuple[Term, ...]
    _hash: int
    _size: int

    _interned: ClassVar[weakref.WeakValueDictionary[tuple[str, tuple[Term, ...]], Term]] = (
        weakref.WeakValueDictionary())
    _lock: ClassVar[threading.Lock] = threading.Lock()

    def __new__(cls, head: str, args: Iterable[Term] = ()) -> Term:
        key = (head, tuple(args))
        term = cls._interned.get(key)
        if term is not None:
            return term
        _check_parts(*key)
        with cls._lock:  # re-check under the lock: two threads must not intern two copies
            term = cls._interned.get(key)
            if term is None:
                term = object.__new__(cls)
                object.__setattr__(term, "head", head)
                object.__setattr__(term, "args", key[1])
                object.__setattr__(term, "_hash", hash(key))
                object.__setattr__(term, "_size", 1 + sum(a._size for a in key[1]))
                cls._interned[key] = term
        return term

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Term is immutable; build a new one (e.g. with replace_at)")

    def __hash__(self) -> int:
        return self._hash

    # Equality is identity (object.__eq__): hash-consing makes equal structure the same object.

    def __reduce__(self) -> tuple[Any, ...]:
        return (Term, (self.head, self.args))  # unpickling re-interns

    @property
    def is_leaf(self) -> bool:
        return not self.args

    def size(self) -> int:
        """The number of nodes of the term as a tree (shared subterms count once per use)."""
        return self._size

    def at(self, path: Path) -> Term:
        """The subterm reached by following argument indices: `t.at(())` is `t`."""
        term = self
        for depth, i in enumerate(path):
            if not 0 <= i < len(term.args):
                raise IndexError(f"path {path} leaves {self} at step {depth}: {term} has "
                                 f"{len(term.args)} argument(s), no index {i}")
            term = term.args[i]
        return term

    def replace_at(self, path: Path, new: Term) -> Term:
        """This term with the subterm at `path` replaced by `new`."""
        if not path:
            return new
        i, rest = path[0], path[1:]
        if not 0 <= i < len(self.args):
            raise IndexError(f"path {path} leaves {self}: it has {len(self.args)} argument(s)")
        args = list(self.args)
        args[i] = args[i].replace_at(rest, new)
        return Term(self.head, args)

    def subterms(self) -> Iterator[tuple[Path, Term]]:
        """Every subterm with its path, parents before children, arguments left to right."""
        stack: list[tuple[Path, Term]] = [((), self)]
        while stack:
            path, term = stack.pop()
            yield path, term
            stack.extend(((*path, i), a) for i, a in reversed(list(enumerate(term.args))))

    def __str__(self) -> str:
        return _text(self)

    def __repr__(self) -> str:
        return f"parse({str(self)!r})"


@functools.lru_cache(maxsize=1 << 16)
def _text(term: Term) -> str:
    """A term's text, remembered: terms are interned, and the search prints the same ones in
    many prune reasons."""
    if not term.args:
        return term.head
    return f"({term.head} {' '.join(_text(a) for a in term.args)})"


def _check_parts(head: str, args: tuple[Term, ...]) -> None:
    """A head must print as one atom, so that `parse(str(t)) is t`."""
    if not isinstance(head, str) or not head or any(c in _DELIMITERS for c in head):
        raise TermSyntaxError(f"term head {head!r} is not an atom: use a non-empty string "
                              "without spaces or parentheses")
    for a in args:
        if not isinstance(a, Term):
            raise TypeError(f"arguments of {head!r} must be Terms, got {type(a).__name__}")


def _tokens(text: str) -> Iterator[str]:
    atom: list[str] = []
    for c in text:
        if c in _DELIMITERS:
            if atom:
                yield "".join(atom)
                atom = []
            if c in "()":
                yield c
        else:
            atom.append(c)
    if atom:
        yield "".join(atom)


def parse(text: str) -> Term:
    """Read one s-expression: an atom (`X`) or a list whose first element is an atom (`(f X 1)`).

    `(f)` is rejected rather than read as the leaf `f`, so that `str(parse(s)) == s` for every
    accepted `s` in normal form.
    """
    stack: list[list[Any]] = []  # open lists: [head or None, args...]
    result: Term | None = None
    for token in _tokens(text):
        if result is not None:
            raise TermSyntaxError(f"{text!r} has text after its first complete term; "
                                  "parse one term at a time")
        if token == "(":
            stack.append([])
        elif token == ")":
            if not stack:
                raise TermSyntaxError(f"{text!r} closes a parenthesis that was never opened")
            items = stack.pop()
            if len(items) < 2:
                what = "an empty list ()" if not items else f"({items[0]}) with no arguments"
                raise TermSyntaxError(f"{text!r} contains {what}; write a leaf without parens")
            if not isinstance(items[0], str):
                raise TermSyntaxError(f"{text!r}: a list must start with an atom, "
                                      f"not {items[0]}")
            term = Term(items[0], items[1:])
            if stack:
                stack[-1].append(term)
            else:
                result = term
        elif stack:
            # the first element stays a str (the head); later atoms become leaf terms
            stack[-1].append(token if not stack[-1] else Term(token))
        else:
            result = Term(token)
    if stack:
        raise TermSyntaxError(f"{text!r} has {len(stack)} unclosed parenthesis(es)")
    if result is None:
        raise TermSyntaxError("empty text: expected an atom or a parenthesised list")
    return result
