"""Our graph JSON: the saved form of every kernel graph (never pickle).

    {"format": "prism.kernel_graph", "version": 1, "name": "...",
     "tensors": {"X": [8, 1024], ...},                    # dims in dims.py's JSON form
     "ops": [{"op": "input", "outputs": ["X"]},
             {"op": "customized", "inputs": [...], "outputs": [...],
              "block": {"grid": [...], "forloop_range": F, "reduction_dimx": 64,
                        "tensors": {...}, "ops": [... block ops ...]}},
             {"op": "output", "inputs": ["O"]}]}

A graph traced from torch code may add `"interface": {"inputs": [view or null, ...], "outputs":
[...]}`, a view being `{"shape": [N], "perm": [1, 0]}` (`prism.ir.graph.View`); a document
without it (every older one) has no views.

Op attributes go in `"attrs"`; a map is `{"map": [[entry, ...], ...]}` (one row per parallel dim).
Loading validates every field and then runs `spec.check`; any problem is a `GraphFormatError`
(or `SpecError`) naming where it is.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from prism.errors import DimExprError, GraphFormatError, PrismError, ShapeError
from prism.ir import dims
from prism.ir.graph import BlockGraph, Interface, KernelGraph, Map, Op, Shape, View

FORMAT = "prism.kernel_graph"
VERSION = 1


def graph_to_json(g: KernelGraph) -> dict[str, Any]:
    doc = {"format": FORMAT, "version": VERSION, "name": g.name,
           "tensors": _tensors_json(g.tensors), "ops": [_op_json(op) for op in g.ops]}
    if g.interface:
        doc["interface"] = {kind: [v.to_json() if v else None for v in views]
                            for kind, views in (("inputs", g.interface.inputs),
                                                ("outputs", g.interface.outputs))}
    return doc


def _tensors_json(tensors: tuple[tuple[str, Shape], ...]) -> dict[str, Any]:
    return {name: [dims.to_json(d) for d in shape] for name, shape in tensors}


def _op_json(op: Op) -> dict[str, Any]:
    j: dict[str, Any] = {"op": op.kind}
    if op.inputs:
        j["inputs"] = list(op.inputs)
    if op.outputs:
        j["outputs"] = list(op.outputs)
    if op.attrs:
        j["attrs"] = {k: ({"map": [[dims.to_json(e) for e in row] for row in v.rows]}
                          if isinstance(v, Map) else v) for k, v in op.attrs}
    if op.block is not None:
        b = op.block
        j["block"] = {"grid": [dims.to_json(x) for x in b.grid],
                      "forloop_range": dims.to_json(b.forloop_range),
                      "reduction_dimx": b.reduction_dimx,
                      "tensors": _tensors_json(b.tensors),
                      "ops": [_op_json(o) for o in b.ops]}
    return j


def dumps(g: KernelGraph) -> str:
    return json.dumps(graph_to_json(g), indent=1)


def save(g: KernelGraph, path: str | Path) -> None:
    Path(path).write_text(dumps(g))


def load(path: str | Path) -> KernelGraph:
    return graph_from_json(parse_json(read_text(path, "the graph file", "check the path"),
                                      str(path)))


def read_text(path: str | Path, what: str, fix: str,
              error: type[GraphFormatError] = GraphFormatError) -> str:
    """A file's text, or `error` naming the file, why it cannot be read, and the fix."""
    p = Path(path)
    try:
        return p.read_text()
    except OSError as e:
        raise error(f"{p}: cannot read {what} ({e.strerror}); {fix}") from None


def parse_json(text: str, source: str, error: type[GraphFormatError] = GraphFormatError) -> Any:
    """JSON text of a graph file (ours, or Mirage's with `error=MirageFormatError`)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise error(f"{source}: not valid JSON at line {e.lineno} column {e.colno} "
                    f"({e.msg}; truncated?); re-save or re-export the file") from None
    except RecursionError:
        raise error(f"{source}: JSON nests too deeply to be a graph file") from None


def graph_from_json(doc: Any, *, validate: bool = True) -> KernelGraph:
    """Parse and validate; raise `GraphFormatError` / `SpecError`, never anything else.

    `validate=False` leaves out `spec.check` (a search family's graph, recorded on a trace, is
    a program being built: it has no outputs yet)."""
    from prism.ir.spec import check
    r = _Reader("graph")
    if isinstance(doc, list):
        raise GraphFormatError("not a Prism graph document but a JSON list (a Mirage μGraph "
                               "file?); read it with `prism import-mirage` / prism.import_mirage")
    obj = r.obj(doc)
    if obj.get("format") != FORMAT:
        raise GraphFormatError(f"not a Prism graph document (format {obj.get('format')!r}, "
                               f"expected {FORMAT!r}); for a Mirage file use import-mirage")
    if obj.get("version") != VERSION:
        raise GraphFormatError(f"graph document version {obj.get('version')!r} is not "
                               f"{VERSION}; re-export it with this version of prism")
    name = r.field(obj, "name", str, default="")
    interface = _interface(_Reader("graph interface"), r.field(obj, "interface", dict, default={}))
    try:
        graph = KernelGraph(tuple(_ops(r, r.field(obj, "ops", list))),
                            _tensors(r, r.field(obj, "tensors", dict)), name, interface)
    except ShapeError as e:          # the views do not fit the tensors
        raise r.fail(str(e)) from None
    if validate:
        check(graph)
    return graph


def _interface(r: _Reader, obj: dict[str, Any]) -> Interface:
    def view(v: Any) -> View | None:
        if v is None:
            return None
        o = r.obj(v)
        shape, perm = r.field(o, "shape", list), r.field(o, "perm", list, default=[])
        if not all(isinstance(n, int) and not isinstance(n, bool) for n in shape + perm):
            raise r.fail("a view's shape and perm should list ints")
        made = r.field(o, "made", str, default="")
        return View(tuple(shape), tuple(perm), made)
    return Interface(tuple(view(v) for v in r.field(obj, "inputs", list, default=[])),
                     tuple(view(v) for v in r.field(obj, "outputs", list, default=[])))


class _Reader:
    """Typed field access that reports the path of whatever is wrong."""

    def __init__(self, where: str):
        self.where = where

    def fail(self, msg: str) -> GraphFormatError:
        return GraphFormatError(f"{self.where}: {msg}; fix or re-export the graph file")

    def obj(self, x: Any) -> dict[str, Any]:
        if not isinstance(x, dict):
            raise self.fail(f"expected a JSON object, got {type(x).__name__}")
        return x

    def field(self, obj: dict[str, Any], key: str, typ: type, default: Any = ...) -> Any:
        if key not in obj:
            if default is not ...:
                return default
            raise self.fail(f"missing field {key!r}")
        value = obj[key]
        if not isinstance(value, typ) or (typ is int and isinstance(value, bool)):
            raise self.fail(f"field {key!r} should be {typ.__name__}, got {type(value).__name__}")
        return value

    def dim(self, x: Any) -> dims.Dim:
        try:
            return dims.from_json(x)
        except DimExprError as e:
            raise self.fail(str(e)) from None

    def names(self, obj: dict[str, Any], key: str) -> tuple[str, ...]:
        items = self.field(obj, key, list, default=[])
        if not all(isinstance(t, str) for t in items):
            raise self.fail(f"field {key!r} should list tensor names (strings)")
        return tuple(items)


def _tensors(r: _Reader, obj: dict[str, Any]) -> tuple[tuple[str, Shape], ...]:
    out = []
    for name, shape in obj.items():
        if not isinstance(shape, list):
            raise r.fail(f"tensor {name!r} shape should be a list")
        out.append((name, tuple(r.dim(d) for d in shape)))
    return tuple(out)


def _ops(r: _Reader, items: list[Any]) -> list[Op]:
    ops = []
    for i, item in enumerate(items):
        sub = _Reader(f"{r.where} op {i}")
        obj = sub.obj(item)
        kind = sub.field(obj, "op", str)
        attrs = {k: _attr(sub, v) for k, v in sub.field(obj, "attrs", dict, default={}).items()}
        block = _block(sub, sub.obj(obj["block"])) if "block" in obj else None
        try:
            ops.append(Op.make(kind, sub.names(obj, "inputs"), sub.names(obj, "outputs"), attrs,
                               block))
        except (TypeError, PrismError) as e:  # unhashable attribute values land here
            raise sub.fail(f"bad op record ({e})") from None
    return ops


def _attr(r: _Reader, v: Any) -> Any:
    if isinstance(v, dict) and set(v) == {"map"} and isinstance(v["map"], list):
        rows = [tuple(r.dim(e) for e in row) if isinstance(row, list) else None for row in v["map"]]
        if any(row is None for row in rows):
            raise r.fail("a map row should be a list of entries")
        if len({len(row) for row in rows if row is not None}) > 1:
            raise r.fail("map rows have different lengths")
        return Map(tuple(row for row in rows if row is not None))
    if isinstance(v, bool) or not isinstance(v, int | float | str):
        raise r.fail(f"attribute value {str(v)[:40]!r} should be a number, a string or a map")
    return v


def _block(r: _Reader, obj: dict[str, Any]) -> BlockGraph:
    grid = tuple(r.dim(x) for x in r.field(obj, "grid", list))
    return BlockGraph(grid, r.dim(obj.get("forloop_range", 1)),
                      tuple(_ops(_Reader(f"{r.where} block"), r.field(obj, "ops", list))),
                      _tensors(r, r.field(obj, "tensors", dict)),
                      r.field(obj, "reduction_dimx", int, default=64))
