"""Graph text: a kernel graph or sGraph as one line per op, for people and language models.

    graph rmsnorm_matmul.known_best
    input X [8, 1024]
    input W [1024, 1024]
    custom [8, 1024] = customized(X, W) grid=[16] loop=16
      input X_tile [8, 64] fmap=[01] imap=[00]     # block input i loads the custom op's input i
      input W_tile [64, 64] fmap=[10] imap=[01]    # a map: one 0/1 row per parallel dim
      matmul [8, 64] = matmul(X_tile, W_tile)
      ...
      output div omap=[01]
    output custom

It carries what the JSON of `prism.ir.serialize` carries and what that JSON cannot (attributes
that are None, booleans or tuples; a block's thread count; an interface's trailing empty views),
so that `from_text(to_text(g)) == g` and `to_text(from_text(t)) == t` for every graph. Grammar (a
block's lines are indented two spaces more than its custom op's line; `#` starts a comment):

    text   := 'graph' [name] NL ('let' $name '=' dim NL)* scope
    scope  := ['order' name*]  ('tensor' name shape)*  op*
    op     := 'input' name [shape] attr* [view]          an input op (no inputs, one output)
            | 'output' name attr* [view]                 an output op (one input, no outputs)
            | [out (',' out)* '='] kind '(' [name (',' name)*] ')' [block] attr* [view]
    out    := name [shape]        the shape where the tensor is first named, bare after that
    block  := 'grid=' shape 'loop=' dim ['dimx=' int] ['threads=' int]   (defaults 64, 128)
    attr   := key '=' value       (a key spelled grid, loop, dimx or threads is quoted)
    value  := int | float (Python's repr) | "string" | None | True | False
            | '(' [value (',' value)* [',']] ')'      a tuple
            | '[' row* ']'                            a Map, one row per parallel dim
    row    := a 0/1 string ('100': splits data dim 0) | '(' dim (',' dim)* ')'
    view   := 'as' ('-' | shape ['perm=' '(' ints ')'] ['made=' name])   (graph level only)
    shape  := '[' [dim (',' dim)*] ']'
    dim    := ['-'] term (('+' | '-') term)*        term := factor ('*' factor)*
    factor := power ['/' power]                     power := atom ['^' int]
    atom   := int | var | '?' bit | $let | '(' dim ')'
    name   := an identifier (dots allowed) or a JSON string

A dim is written as its JSON tree (`dims.to_json`) reads and parsed back into that tree, so it is
the Dim `dims.from_json` builds: `D/(g0*F)`, `2*(m/2)`, a 0/1 map variable as `?m_X_d0_p0`. A
long quotient written more than once (an sGraph's tile sizes, which the normal form expands) is
named once by a `let` line and written `$1` after. A scope's tensors are in the order the text
names them, after the names of its `order` line (written only where the table has another
order); a `tensor` line declares a tensor no op outputs. `as` is the view of the i-th input
(output) op (`prism.ir.graph.View`); `as -` marks an empty view after the last one.

`from_text` raises `GraphFormatError` naming the line, the column and what is wrong. Like the
graph constructors, and unlike the JSON loader, it does not run `prism.ir.spec.check`: an
sGraph's symbolic tiles are checked once instantiated.
"""

from __future__ import annotations

import itertools
import json
import numbers
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from prism.errors import DimExprError, GraphFormatError, PrismError
from prism.ir import dims
from prism.ir.graph import BlockGraph, Interface, KernelGraph, Map, Op, Shape, View

INDENT = "  "
BLOCK_KEYS = ("grid", "loop", "dimx", "threads")
MAX_POWER = 64       # a dim's power is that many factors (its JSON repeats them)
LET_MIN_CHARS = 24   # a quotient this long (in JSON) written twice or more gets a `let` name
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
_TOKEN = re.compile(r"""
      (?P<space>[ \t]+)
    | (?P<comment>\#.*)
    | (?P<string>"(?:[^"\\]|\\.)*")
    | (?P<number>\d+(?:\.\d*)?(?:[eE][+-]?\d+)?)
    | (?P<name>[A-Za-z_][A-Za-z0-9_.]*)
    | (?P<ref>\$[A-Za-z0-9_]+)
    | (?P<punct>[\[\](),=+\-*/^?])
    """, re.VERBOSE)


# -- writing -------------------------------------------------------------------------------------

def to_text(graph: KernelGraph) -> str:
    """The graph as text, one line per op (see the module docstring)."""
    w = _Writer(_repeated_quotients(graph))
    lines = ["graph" + (f" {_word(graph.name)}" if graph.name else "")]
    lines += w.let_lines()
    views = {"input": graph.interface.inputs, "output": graph.interface.outputs}
    w.scope(graph.ops, graph.tensors, 0, lines, views)
    return "\n".join(lines) + "\n"


def _repeated_quotients(graph: KernelGraph) -> list[Any]:
    """The long quotients written more than once (an sGraph's tile sizes), innermost first."""
    seen: dict[str, tuple[Any, int]] = {}

    def walk(j: Any) -> None:
        if isinstance(j, list) and j[0] != "bit":
            for sub in j[1:]:
                walk(sub)
            if j[0] == "/":
                key = json.dumps(j)
                seen[key] = (j, seen.get(key, (j, 0))[1] + 1)

    def walk_graph(ops: tuple[Op, ...], tensors: tuple[tuple[str, Shape], ...],
                   extra: tuple[dims.Dim, ...] = ()) -> None:
        for d in (*extra, *(d for _, shape in tensors for d in shape)):
            walk(dims.to_json(d))
        for op in ops:
            for _, v in op.attrs:
                if isinstance(v, Map):
                    for row in v.rows:
                        for e in row:
                            walk(dims.to_json(e))
            if op.block is not None:
                b = op.block
                walk_graph(b.ops, b.tensors, (*b.grid, b.forloop_range))

    walk_graph(graph.ops, graph.tensors)
    return [j for key, (j, n) in seen.items() if n > 1 and len(key) >= LET_MIN_CHARS]


class _Writer:
    """Writes dims (with the graph's `let` names for repeated quotients), shapes, values and
    the lines of each scope."""

    def __init__(self, repeated: list[Any]):
        self.repeated = repeated
        self.lets: dict[str, str] = {}          # a quotient's JSON → its $name

    def let_lines(self) -> list[str]:
        lines = []
        for j in self.repeated:                 # each written with the lets before it
            name = f"${len(self.lets) + 1}"
            lines.append(f"let {name} = {self._factor(j)}")
            self.lets[json.dumps(j)] = name
        return lines

    def scope(self, ops: tuple[Op, ...], tensors: tuple[tuple[str, Shape], ...], depth: int,
              lines: list[str], views: dict[str, tuple[View | None, ...]] | None) -> None:
        pad = INDENT * depth
        table = dict(tensors)
        if len(table) != len(tensors):
            raise GraphFormatError(f"the tensor table names a tensor twice "
                                   f"({[n for n, _ in tensors]}); a graph has one shape per tensor")
        produced = {t for op in ops for t in op.outputs}
        loose = [n for n, _ in tensors if n not in produced]
        named = loose + list(dict.fromkeys(t for op in ops for t in op.outputs if t in table))
        order = [n for n, _ in tensors]
        if named != order:   # the shortest prefix of the table after which the text's order holds
            k = next(k for k in range(1, len(order) + 1)
                     if order[k:] == [n for n in named if n not in order[:k]])
            lines.append(pad + "order " + " ".join(_word(n) for n in order[:k]))
        lines += [f"{pad}tensor {_word(n)} {self.shape(table[n])}" for n in loose]
        written: set[str] = set(loose)
        position = {"input": 0, "output": 0}
        for op in ops:
            outs = []
            for t in op.outputs:
                first = t in table and t not in written
                written.add(t)
                outs.append(_word(t) + (f" {self.shape(table[t])}" if first else ""))
            if op.kind == "input" and not op.inputs and len(op.outputs) == 1 and not op.block:
                head = f"input {outs[0]}"
            elif op.kind == "output" and len(op.inputs) == 1 and not op.outputs and not op.block:
                head = f"output {_word(op.inputs[0])}"
            else:
                head = (", ".join(outs) + " = " if outs else "") + \
                    f"{_word(op.kind)}({', '.join(_word(t) for t in op.inputs)})"
            parts = [head]
            if op.block is not None:
                b = op.block
                parts += [f"grid={self.shape(b.grid)}",
                          f"loop={self._operand(dims.to_json(b.forloop_range))}"]
                parts += [f"dimx={b.reduction_dimx}"] * (b.reduction_dimx != 64)
                parts += [f"threads={b.block_threads}"] * (b.block_threads != 128)
            parts += [f"{_key(k)}={self.value(k, v)}" for k, v in op.attrs]
            if views is not None and op.kind in position:
                i, seq = position[op.kind], views[op.kind]
                position[op.kind] += 1
                last = max((j for j, v in enumerate(seq) if v is not None), default=-1)
                if i < len(seq) and (seq[i] is not None or i > last):
                    parts.append("as " + self.view(seq[i]))
            lines.append(pad + " ".join(parts))
            if op.block is not None:
                self.scope(op.block.ops, op.block.tensors, depth + 1, lines, None)

    def shape(self, shape: Shape | tuple[int, ...]) -> str:
        return "[" + ", ".join(self.dim(d) for d in shape) + "]"

    def view(self, v: View | None) -> str:
        if v is None:
            return "-"
        out = self.shape(v.shape)
        if v.perm:
            out += f" perm=({', '.join(str(p) for p in v.perm)}{',' * (len(v.perm) == 1)})"
        return out + (f" made={_word(v.made)}" if v.made else "")

    def value(self, key: str, v: Any) -> str:
        if v is None or isinstance(v, bool):
            return repr(v)
        if isinstance(v, numbers.Integral):
            return str(int(v))
        if isinstance(v, numbers.Real):
            return repr(float(v))          # the shortest text that reads back as the same float
        if isinstance(v, str):
            return json.dumps(v, ensure_ascii=False)
        if isinstance(v, tuple):
            return "(" + ", ".join(self.value(key, x) for x in v) + "," * (len(v) == 1) + ")"
        if isinstance(v, Map):
            return "[" + " ".join(self.row(row) for row in v.rows) + "]"
        raise GraphFormatError(f"attribute {key}={v!r} is a {type(v).__name__}, which graph text "
                               "cannot write (ints, floats, strings, None, bools, tuples, Maps)")

    def row(self, row: tuple[dims.Dim, ...]) -> str:
        if row and all(e.is_const and e.value in (0, 1) for e in row):
            return "".join(str(e.value) for e in row)
        return "(" + ", ".join(self.dim(e) for e in row) + ")"

    # A dim is written from its JSON tree: an int, a name, ["bit", name], ["+", term, ...],
    # ["*", coef?, factor, ...] (a factor repeated p times is its p-th power), ["/", num, den].
    def dim(self, d: dims.Dim | int) -> str:
        return self._sum(dims.to_json(dims.dim(d)))

    def _sum(self, j: Any) -> str:
        terms = j[1:] if isinstance(j, list) and j[0] == "+" else [j]
        out = ""
        for i, t in enumerate(terms):
            coef, text = self._term(t)
            out += ("-" if coef < 0 else "") + text if i == 0 else \
                (" - " if coef < 0 else " + ") + text
        return out

    def _term(self, j: Any) -> tuple[int, str]:
        """A term's sign and the text of its magnitude."""
        if isinstance(j, int):
            return j, str(abs(j))
        coef, factors = 1, [j]
        if isinstance(j, list) and j[0] == "*":
            coef, factors = (j[1], j[2:]) if isinstance(j[1], int) else (1, j[1:])
        powers: list[list[Any]] = []
        for f in factors:
            if powers and powers[-1][0] == f:
                powers[-1][1] += 1
            else:
                powers.append([f, 1])
        alone = len(powers) == 1 and powers[0][1] == 1 and abs(coef) == 1
        texts = [str(abs(coef))] * (abs(coef) != 1)
        for f, p in powers:
            text = self._operand(f) if _is_quotient(f) and json.dumps(f) in self.lets \
                else self._factor(f)
            if _is_quotient(f) and not alone and not text.startswith("$"):
                text = f"({text})"      # 2*(m/2): a quotient among other factors is bracketed
            texts.append(text + (f"^{p}" if p > 1 else ""))
        return coef, "*".join(texts)

    def _factor(self, j: Any) -> str:
        if _is_quotient(j):
            return f"{self._operand(j[1])}/{self._operand(j[2])}"
        return self._operand(j)

    def _operand(self, j: Any) -> str:
        """An int ≥ 0, a variable, a bit or a let as it is; anything else in brackets."""
        if isinstance(j, int) and j >= 0:
            return str(j)
        if isinstance(j, str):
            return j
        if isinstance(j, list) and j[0] == "bit":
            return "?" + j[1]
        if _is_quotient(j) and json.dumps(j) in self.lets:
            return self.lets[json.dumps(j)]
        return f"({self._sum(j)})"


def _is_quotient(j: Any) -> bool:
    return isinstance(j, list) and j[0] == "/"


def _word(s: str) -> str:
    return s if _NAME.fullmatch(s) else json.dumps(s, ensure_ascii=False)


def _key(k: str) -> str:
    return json.dumps(k, ensure_ascii=False) if k in BLOCK_KEYS else _word(k)


# -- reading -------------------------------------------------------------------------------------

@dataclass
class _Token:
    kind: str       # string, number, name, punct, end
    text: str
    col: int


class _Line:
    """One line's tokens, read left to right; every failure names the line and the column."""

    def __init__(self, number: int, text: str):
        self.number, self.text = number, text
        self.indent = len(text) - len(text.lstrip(" "))
        self.tokens: list[_Token] = []
        pos = 0
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if m is None:
                raise self.fail(f"unexpected character {text[pos]!r}", pos)
            kind = m.lastgroup or ""
            if kind not in ("space", "comment"):
                self.tokens.append(_Token(kind, m.group(), pos))
            pos = m.end()
        self.tokens.append(_Token("end", "", len(text)))
        self.i = 0
        self.lets: dict[str, Any] = {}      # the graph's `let` names → their dims' JSON trees

    def fail(self, what: str, col: int | None = None) -> GraphFormatError:
        col = self.peek().col if col is None else col
        return GraphFormatError(f"line {self.number}, column {col + 1}: {what} "
                                f"(in {self.text.strip()[:80]!r}); fix the graph text")

    def peek(self, ahead: int = 0) -> _Token:
        return self.tokens[min(self.i + ahead, len(self.tokens) - 1)]

    def next(self) -> _Token:
        tok = self.peek()
        self.i += tok.kind != "end"
        return tok

    def at(self, text: str, ahead: int = 0) -> bool:
        tok = self.peek(ahead)
        return tok.kind in ("punct", "name") and tok.text == text

    def take(self, text: str) -> bool:
        """Step over `text` if it comes next."""
        if self.at(text):
            self.next()
            return True
        return False

    def expect(self, text: str, what: str) -> None:
        if not self.at(text):
            raise self.fail(f"expected {text!r} {what}, found {self._found()}")
        self.next()

    def _found(self) -> str:
        tok = self.peek()
        return "the end of the line" if tok.kind == "end" else repr(tok.text)

    def is_word(self, ahead: int = 0) -> bool:
        return self.peek(ahead).kind in ("name", "string")

    def word(self, what: str) -> str:
        tok = self.peek()
        if tok.kind == "name":
            return self.next().text
        if tok.kind == "string":
            return self._string()
        raise self.fail(f"expected {what} (a name or a quoted string), found {self._found()}")

    def _string(self) -> str:
        tok = self.next()
        try:
            s = json.loads(tok.text)
        except json.JSONDecodeError as e:
            raise self.fail(f"bad string {tok.text} ({e.msg})", tok.col) from None
        assert isinstance(s, str)
        return s

    def end(self, what: str) -> None:
        if self.peek().kind != "end":
            raise self.fail(f"unexpected {self._found()} after {what}")

    # -- dims ----------------------------------------------------------------------------------
    def tree(self, check: bool = False) -> Any:
        """A dim's JSON tree (`dims.to_json`'s form); `check`: that it builds a dim."""
        col = self.peek().col
        tree = self._sum()
        if check:
            self._build(tree, col)
        return tree

    def dim(self) -> dims.Dim:
        col = self.peek().col
        return self._build(self._sum(), col)

    def _build(self, tree: Any, col: int) -> dims.Dim:
        try:
            return dims.from_json(tree)
        except DimExprError as e:
            raise self.fail(str(e), col) from None

    def _sum(self) -> Any:
        terms = [self._term(-1 if self.take("-") else 1)]
        while self.at("+") or self.at("-"):
            terms.append(self._term(-1 if self.next().text == "-" else 1))
        return terms[0] if len(terms) == 1 else ["+", *terms]

    def _term(self, sign: int) -> Any:
        factors = self._factor()
        while self.at("*"):
            self.next()
            factors += self._factor()
        coef = sign
        if isinstance(factors[0], int):
            coef, factors = sign * factors[0], factors[1:]
        if not factors:
            return coef
        if coef == 1:
            return factors[0] if len(factors) == 1 else ["*", *factors]
        return ["*", coef, *factors]

    def _factor(self) -> list[Any]:
        num = self._power()
        if not self.at("/"):
            return num
        self.next()
        den = self._power()
        if self.at("/"):
            raise self.fail("a quotient of a quotient is ambiguous; bracket one of them")
        return [["/", _product(num), _product(den)]]

    def _power(self) -> list[Any]:
        tok = self.next()
        if tok.kind == "number" and tok.text.isdigit():
            atom: Any = int(tok.text)
        elif tok.kind == "name":
            atom = tok.text
        elif tok.text == "?" and self.peek().kind == "name":
            atom = ["bit", self.next().text]
        elif tok.kind == "ref":
            if tok.text not in self.lets:
                raise self.fail(f"{tok.text} is not defined by a let line above", tok.col)
            atom = self.lets[tok.text]
        elif tok.text == "(":
            atom = self._sum()
            self.expect(")", "to close the bracket")
        else:
            found = "the end of the line" if tok.kind == "end" else repr(tok.text)
            raise self.fail("expected a dimension (an int, a name, ?bit, $let or a bracket), "
                            f"found {found}", tok.col)
        if not self.at("^"):
            return [atom]
        self.next()
        p = self.next()
        if p.kind != "number" or not p.text.isdigit() or not 1 <= int(p.text) <= MAX_POWER:
            raise self.fail(f"a power should be an int from 1 to {MAX_POWER}, found "
                            f"{p.text!r}", p.col)
        return [atom] * int(p.text)

    def shape(self) -> tuple[dims.Dim, ...]:
        self.expect("[", "to open a shape")
        out = []
        while not self.at("]"):
            out.append(self.dim())
            if not self.at("]"):
                self.expect(",", "between a shape's dims")
        self.next()
        return tuple(out)

    def ints(self, what: str) -> tuple[int, ...]:
        self.expect("(", f"to open {what}")
        out = []
        while not self.at(")"):
            tok = self.next()
            if tok.kind != "number" or not tok.text.isdigit():
                raise self.fail(f"{what} should list ints, found {tok.text!r}", tok.col)
            out.append(int(tok.text))
            if not self.at(")"):
                self.expect(",", f"between the ints of {what}")
        self.next()
        return tuple(out)

    # -- attribute values ------------------------------------------------------------------------
    def value(self) -> Any:
        tok = self.peek()
        if tok.text == "[" and tok.kind == "punct":
            return self._map()
        if tok.text == "(" and tok.kind == "punct":
            self.next()
            items = []
            while not self.at(")"):
                items.append(self.value())
                if not self.at(")"):
                    self.expect(",", "between a tuple's values")
            self.next()
            return tuple(items)
        if tok.kind == "string":
            return self._string()
        sign = -1 if self.take("-") else 1
        tok = self.next()
        if tok.kind == "number":
            return sign * (float(tok.text) if any(c in tok.text for c in ".eE") else int(tok.text))
        if tok.kind == "name" and tok.text in ("inf", "nan"):
            return sign * float(tok.text)
        if sign == 1 and tok.kind == "name" and tok.text in ("None", "True", "False"):
            return {"None": None, "True": True, "False": False}[tok.text]
        raise self.fail(f"expected a value (a number, a \"string\", None, True, False, a tuple "
                        f"or a [map]), found {tok.text!r}", tok.col)

    def _map(self) -> Map:
        col = self.next().col
        rows: list[tuple[dims.Dim, ...]] = []
        while not self.at("]"):
            tok = self.peek()
            if tok.kind == "number" and re.fullmatch(r"[01]+", tok.text):
                rows.append(tuple(dims.const(int(c)) for c in self.next().text))
            elif self.at("("):
                self.next()
                row = []
                while not self.at(")"):
                    row.append(self.dim())
                    if not self.at(")"):
                        self.expect(",", "between a map row's entries")
                self.next()
                rows.append(tuple(row))
            else:
                raise self.fail("expected a map row (a 0/1 string such as 010, or (entry, ...))"
                                f" or ']', found {self._found()}")
        self.next()
        if len({len(r) for r in rows}) > 1:
            raise self.fail("map rows have different lengths", col)
        return Map(tuple(rows))


def _product(factors: list[Any]) -> Any:
    return factors[0] if len(factors) == 1 else ["*", *factors]


@dataclass
class _Scope:
    """The ops and tensors of one graph level as they are read."""

    ops: list[Op]
    shapes: dict[str, Shape]
    order: tuple[str, ...] | None = None
    order_line: _Line | None = None

    def declare(self, line: _Line, name: str, shape: Shape) -> None:
        if name in self.shapes:
            raise line.fail(f"tensor {name!r} is given a shape twice; give it where the tensor "
                            "is first named")
        self.shapes[name] = shape

    def tensors(self) -> tuple[tuple[str, Shape], ...]:
        order = self.order or ()
        if len(set(order)) < len(order) or not set(order) <= set(self.shapes):
            assert self.order_line is not None
            raise self.order_line.fail("the order line should list tensors of this graph (or "
                                       f"block) once each: {', '.join(self.shapes)}", 0)
        return tuple((n, self.shapes[n])
                     for n in (*order, *(n for n in self.shapes if n not in order)))


def from_text(text: str) -> KernelGraph:
    """Read a graph written by `to_text` (or by hand); `GraphFormatError` names the bad line."""
    lines = []
    for number, raw in enumerate(text.splitlines(), 1):
        if "\t" in raw[:len(raw) - len(raw.lstrip())]:
            raise GraphFormatError(f"line {number}: indented with a tab; indent blocks with two "
                                   "spaces")
        read = _Line(number, raw)
        if read.tokens[0].kind != "end":
            lines.append(read)
    if not lines or not lines[0].at("graph") or lines[0].indent:
        where = f"line {lines[0].number}" if lines else "the text"
        raise GraphFormatError(f"{where}: graph text starts with a line 'graph NAME'; "
                               "fix the graph text")
    head = lines[0]
    head.next()
    name = head.word("the graph's name") if head.peek().kind != "end" else ""
    head.end("the graph's name")
    lets: dict[str, Any] = {}
    for each in lines:
        each.lets = lets
    body = iter(lines[1:])
    line = next(body, None)
    while line is not None and line.at("let") and line.peek(1).kind == "ref":
        line.next()
        ref = line.next().text
        if ref in lets:
            raise line.fail(f"{ref} is defined twice", 0)
        line.expect("=", f"after {ref}")
        lets[ref] = line.tree(check=True)
        line.end(f"{ref}'s definition")
        line = next(body, None)
    views: dict[str, dict[int, View | None]] = {"input": {}, "output": {}}
    try:
        rest = itertools.chain([line] if line is not None else [], body)
        scope, first_view, _ = _read_scope(rest, 0, views)
    except RecursionError:
        raise GraphFormatError("brackets or blocks nest too deeply to be a graph; fix the graph "
                               "text") from None
    interface = Interface(*(tuple(v.get(i) for i in range(max(v, default=-1) + 1))
                            for v in (views["input"], views["output"])))
    tensors = scope.tensors()
    try:
        return KernelGraph(tuple(scope.ops), tensors, name, interface)
    except PrismError as e:          # the views do not fit the tensors
        raise (first_view or head).fail(str(e), 0) from None


@dataclass
class _OpLine:
    """What an op's line says besides the op: its block's parameters, its view."""

    op: Op
    block: tuple[tuple[dims.Dim, ...], dims.Dim, int, int] | None = None
    has_view: bool = False
    view: View | None = None


def _read_scope(lines: Iterator[_Line], depth: int,
                views: dict[str, dict[int, View | None]] | None
                ) -> tuple[_Scope, _Line | None, _Line | None]:
    """The ops at `depth` (views: the graph level's, filled in; None in a block), the first
    line with a view, and the first line after the scope (None at the end of the text)."""
    scope = _Scope([], {})
    count = {"input": 0, "output": 0}
    first_view = None
    line = next(lines, None)
    while line is not None and line.indent >= 2 * depth:
        if line.indent > 2 * depth:
            raise line.fail("indented more than the line before it allows (only a custom op's "
                            "block is indented, two spaces more than the op)", 0)
        read = _read_line(line, scope, views is not None)
        if read is None:
            line = next(lines, None)
            continue
        kind = read.op.kind
        if kind in count:
            if read.has_view and views is not None:
                views[kind][count[kind]] = read.view
                first_view = first_view or line
            count[kind] += 1
        if read.block is None:
            scope.ops.append(read.op)
            line = next(lines, None)
            continue
        inner, _, line = _read_scope(lines, depth + 1, None)
        grid, loop, dimx, threads = read.block
        op = read.op
        scope.ops.append(Op(op.kind, op.inputs, op.outputs, op.attrs, BlockGraph(
            grid, loop, tuple(inner.ops), inner.tensors(), dimx, threads)))
    return scope, first_view, line


def _read_line(line: _Line, scope: _Scope, graph_level: bool) -> _OpLine | None:
    """Read one line into `scope`: an `order` or `tensor` line (None), or an op."""
    first = line.peek()
    if line.at("let") and line.peek(1).kind == "ref":
        raise line.fail("a let line among the ops; let lines come right after the graph line", 0)
    keyword = first.text if first.kind == "name" and line.is_word(1) else ""
    if keyword == "order":
        if scope.order is not None:
            raise line.fail("a second order line; one order line lists every tensor", 0)
        line.next()
        names = []
        while line.peek().kind != "end":
            names.append(line.word("a tensor name"))
        scope.order, scope.order_line = tuple(names), line
        return None
    if keyword == "tensor":
        line.next()
        name = line.word("the tensor's name")
        scope.declare(line, name, line.shape())
        line.end("the tensor's shape")
        return None
    inputs: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()
    if keyword == "input":
        line.next()
        kind, outputs = "input", (_out(line, scope),)
    elif keyword == "output":
        line.next()
        kind, inputs = "output", (line.word("the output's tensor"),)
    else:
        if not line.at("(", 1):
            outs = [_out(line, scope)]
            while line.at(","):
                line.next()
                outs.append(_out(line, scope))
            outputs = tuple(outs)
            line.expect("=", "after the op's outputs")
        kind = line.word("the op's kind")
        line.expect("(", "to open the op's inputs")
        names = []
        while not line.at(")"):
            names.append(line.word("an input tensor"))
            if not line.at(")"):
                line.expect(",", "between the op's inputs")
        line.next()
        inputs = tuple(names)
    attrs: list[tuple[str, Any]] = []
    params: dict[str, Any] = {}
    read = _OpLine(Op(kind, inputs, outputs))
    while line.peek().kind != "end":
        if line.at("as") and not line.at("=", 1):
            if not graph_level:
                raise line.fail("a view ('as') in a block; views belong to the graph's inputs "
                                "and outputs")
            if kind not in ("input", "output"):
                raise line.fail(f"a view ('as') on a {kind} op; only input and output ops have "
                                "views")
            line.next()
            read.has_view, read.view = True, _view_of(line)
            line.end("the view")
            break
        bare = line.peek().kind == "name"
        key = line.word("an attribute name")
        line.expect("=", f"after {key}")
        if bare and key in BLOCK_KEYS:
            if key in params:
                raise line.fail(f"{key} is given twice")
            params[key] = line.shape() if key == "grid" else line.dim() if key == "loop" \
                else _int(line, key)
        elif any(k == key for k, _ in attrs):
            raise line.fail(f"attribute {key} is given twice")
        else:
            attrs.append((key, line.value()))
    if params:
        if "grid" not in params:
            raise line.fail(f"a block needs grid=[...] ({', '.join(params)} given)", 0)
        read.block = (params["grid"], params.get("loop", dims.const(1)),
                      params.get("dimx", 64), params.get("threads", 128))
    read.op = Op(kind, inputs, outputs, tuple(attrs))
    return read


def _out(line: _Line, scope: _Scope) -> str:
    name = line.word("an output tensor")
    if line.at("["):
        scope.declare(line, name, line.shape())
    return name


def _int(line: _Line, key: str) -> int:
    sign = -1 if line.take("-") else 1
    tok = line.next()
    if tok.kind != "number" or not tok.text.isdigit():
        raise line.fail(f"{key} should be an int, found {tok.text!r}", tok.col)
    return sign * int(tok.text)


def _view_of(line: _Line) -> View | None:
    if line.at("-"):
        line.next()
        return None
    shape = line.shape()
    if not all(d.is_const for d in shape):
        raise line.fail("a view's shape is the user's tensor's: ints only")
    perm: tuple[int, ...] = ()
    made = ""
    while line.peek().kind != "end":
        col = line.peek().col
        key = line.word("perm= or made=")
        line.expect("=", f"after {key}")
        if key == "perm":
            perm = line.ints("the view's permutation")
        elif key == "made":
            made = line.word("what the view's mask is made from")
        else:
            raise line.fail(f"a view has perm= and made=, not {key}=", col)
    return View(tuple(d.value for d in shape), perm, made)
