"""Import Mirage's saved μGraphs (`benchmark/saved_mugraphs/*.json`) as Prism kernel graphs.

    graphs = import_mirage("gated_mlp.json")      # one KernelGraph per saved μGraph

The format (REFERENCE.md §2.9): a JSON list of kernel graphs, each a list of operators in
topological order whose tensors link by `guid`. Every op is rebuilt through the builder
(`prism.frontend.builder`), so every shape is re-derived by Prism's rules and compared with the
`dim` the file recorded. Op types are looked up by the op table's `mirage` spellings.

Mapping decisions:
- Graph inputs are named in0, in1, ... in the order of the file's `kn_input_op`s.
- Mirage's grids always have x, y, z. Trailing grid dims of size 1 are dropped (one is always
  kept) with their map rows: a split, a concatenation or a sum over one block is the identity.
- `data_type` 921 is fp16 as these files number it (today's Mirage says 940); nothing else is
  accepted, since Prism's semantics are those of real numbers and the files only hold fp16.

Every problem raises `MirageFormatError` with a one-line message: where (file, graph, op), what
is wrong, and what to do. Fields are read through small typed accessors that validate as they go,
so no KeyError, TypeError or IndexError escapes from a damaged file.
"""

from __future__ import annotations

import math
import re
import reprlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from prism.errors import MirageFormatError, PrismError
from prism.frontend.builder import Block, Graph, Tensor
from prism.ir.dims import shape_str
from prism.ir.graph import MAX_RANK, KernelGraph, Shape
from prism.ir.ops import OPS
from prism.ir.serialize import parse_json

FP16 = 921
DEFAULT_REDUCTION_DIMX = 64
_GRID_AXES = ("x", "y", "z")
_DAMAGED = "the file is damaged or not a Mirage μGraph dump; re-save it with Mirage"

__all__ = ["import_mirage"]


def as_mirage_defines(graph: KernelGraph) -> KernelGraph:
    """`graph` with every rms_norm's epsilon 0, as Mirage defines rms_norm (its kernels add
    none): the target to compare Mirage's own μGraphs with. A traced program has torch's
    epsilon, so a Mirage graph is not its equivalent."""
    ops = tuple(replace(op, attrs=tuple((k, v) for k, v in op.attrs if k != "eps"))
                if op.kind == "rms_norm" else op for op in graph.ops)
    return replace(graph, ops=ops)


def import_mirage(source: str | Path | list[Any]) -> list[KernelGraph]:
    """The kernel graphs of a Mirage μGraph file: `source` is a path (str or Path), the JSON text
    itself (a str starting with '['), or the already-parsed JSON list. Graph i is named
    `"{file stem}[i]"` (`"mirage[i]"` when there is no file)."""
    label, stem, doc = _load(source)
    top = _Where((label,))
    graphs = _as_list(doc, top, "the top level (a list of kernel graphs)")
    return [_import_graph(g, top.at(f"graph {i}"), f"{stem}[{i}]") for i, g in enumerate(graphs)]


# -- reading the file ----------------------------------------------------------------------------

def _load(source: Any) -> tuple[str, str, Any]:
    """(label for messages, stem for graph names, parsed JSON)."""
    if isinstance(source, list):
        return "mirage", "mirage", source
    if isinstance(source, str) and source.lstrip().startswith("["):
        return "<text>", "mirage", parse_json(source, "<text>", MirageFormatError)
    if isinstance(source, str | Path):
        path = Path(source)
        try:
            text = path.read_bytes().decode("utf-8")
        except (OSError, ValueError) as e:  # ValueError: a NUL in the path, or bad UTF-8
            raise MirageFormatError(f"{path}: cannot read the file ({e}); check the path and "
                                    "that it is a UTF-8 JSON file") from e
        return str(path), path.stem, parse_json(text, str(path), MirageFormatError)
    raise MirageFormatError(f"import_mirage takes a path, JSON text or a parsed JSON list, got "
                            f"{type(source).__name__}; pass the .json file's path")


# -- locations and typed accessors ---------------------------------------------------------------

@dataclass(frozen=True)
class _Where:
    """A location in the file for messages: ("gated_mlp.json", "graph 3", "op 5", ...)."""

    parts: tuple[str, ...]

    def at(self, part: str) -> _Where:
        return _Where((*self.parts, part))

    def error(self, problem: str, fix: str = _DAMAGED) -> MirageFormatError:
        return MirageFormatError(f"{' '.join(self.parts)}: {problem}; {fix}")


_short = reprlib.Repr()
_short.maxstring = _short.maxother = 40


def _show(value: Any) -> str:
    return f"{type(value).__name__} {_short.repr(value)}"


def _as_dict(value: Any, where: _Where, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise where.error(f"{what} is {_show(value)}, expected a JSON object")
    return value


def _as_list(value: Any, where: _Where, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise where.error(f"{what} is {_show(value)}, expected a JSON list")
    return value


def _as_int(value: Any, where: _Where, what: str, lo: int | None = None,
            hi: int | None = None) -> int:
    ok = isinstance(value, int) and not isinstance(value, bool) and \
        (lo is None or value >= lo) and (hi is None or value <= hi)
    if not ok:
        bounds = f" in {lo}..{hi}" if hi is not None else f" ≥ {lo}" if lo is not None else ""
        raise where.error(f"{what} is {_show(value)}, expected an int{bounds}")
    return int(value)


def _get(obj: dict[str, Any], key: str, where: _Where) -> Any:
    if key not in obj:
        raise where.error(f"missing field {key!r}")
    return obj[key]


def _int_field(obj: dict[str, Any], key: str, where: _Where, lo: int | None = None,
               hi: int | None = None) -> int:
    return _as_int(_get(obj, key, where), where, f"field {key!r}", lo, hi)


def _list_field(obj: dict[str, Any], key: str, where: _Where) -> list[Any]:
    return _as_list(_get(obj, key, where), where, f"field {key!r}")


def _dict_field(obj: dict[str, Any], key: str, where: _Where) -> dict[str, Any]:
    return _as_dict(_get(obj, key, where), where, f"field {key!r}")


def _str_field(obj: dict[str, Any], key: str, where: _Where) -> str:
    value = _get(obj, key, where)
    if not isinstance(value, str):
        raise where.error(f"field {key!r} is {_show(value)}, expected a string")
    return value


def _scalar_field(obj: dict[str, Any], key: str, where: _Where) -> float:
    if key not in obj:
        raise where.error(f"missing field {key!r} (the constant)",
                          "Mirage's own JSON does not save mul_scalar's constant; re-save the "
                          "graph with a Mirage that writes 'scalar', or remove that graph")
    value = obj[key]
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise where.error(f"field {key!r} is {_show(value)}, expected a finite number")
    return float(value)


# -- tensor records and the guid scope -----------------------------------------------------------

@dataclass(frozen=True)
class _Rec:
    """A tensor record: the guid that links it and the shape the file recorded."""

    guid: int
    shape: tuple[int, ...]


def _tensor_rec(value: Any, where: _Where) -> _Rec:
    rec = _as_dict(value, where, "the tensor record")
    data_type = _int_field(rec, "data_type", where)
    if data_type != FP16:
        raise where.error(f"data_type {data_type} is not supported (only {FP16}, fp16 as these "
                          "files number it)", "save the μGraph with fp16 tensors")
    num_dims = _int_field(rec, "num_dims", where, 1, MAX_RANK)
    dims = _list_field(rec, "dim", where)
    if len(dims) < num_dims:
        raise where.error(f"field 'dim' has {len(dims)} entries for num_dims {num_dims}")
    shape = tuple(_as_int(d, where, f"dim[{k}]", lo=1) for k, d in enumerate(dims[:num_dims]))
    return _Rec(_int_field(rec, "guid", where), shape)


def _recs(op: dict[str, Any], key: str, where: _Where) -> list[_Rec]:
    return [_tensor_rec(v, where.at(f"{key}[{k}]"))
            for k, v in enumerate(_list_field(op, key, where))]


def _one_rec(op: dict[str, Any], key: str, where: _Where) -> _Rec:
    recs = _recs(op, key, where)
    if len(recs) != 1:
        raise where.error(f"field {key!r} has {len(recs)} tensors, expected 1")
    return recs[0]


def _same(shape: Shape, recorded: tuple[int, ...]) -> bool:
    return len(shape) == len(recorded) and all(d == r for d, r in zip(shape, recorded,
                                                                      strict=True))


class _Scope:
    """The tensors of one graph level (kernel or block), by guid."""

    def __init__(self, level: str) -> None:
        self.level = level
        self.tensors: dict[int, Tensor] = {}

    def read(self, rec: _Rec, where: _Where) -> Tensor:
        t = self.tensors.get(rec.guid)
        if t is None:
            raise where.error(f"dangling guid {rec.guid}: no earlier {self.level}-level op "
                              "produces it", "ops must be in topological order and link by "
                              "guid; the file is damaged or was edited by hand")
        if not _same(t.shape, rec.shape):
            raise where.error(f"guid {rec.guid} is read with recorded dim {list(rec.shape)} "
                              f"but was produced with shape {shape_str(t.shape)}")
        return t

    def bind(self, rec: _Rec, t: Tensor, where: _Where) -> None:
        if rec.guid in self.tensors:
            raise where.error(f"guid {rec.guid} is produced twice")
        if not _same(t.shape, rec.shape):
            raise where.error(f"shape mismatch for guid {rec.guid}: the file records dim "
                              f"{list(rec.shape)}, Prism's shape rules give "
                              f"{shape_str(t.shape)}", "the file contradicts the op's shape "
                              "rule; report it with the file and this message")
        self.tensors[rec.guid] = t


@contextmanager
def _building(where: _Where) -> Iterator[None]:
    """Builder errors (ShapeError, SpecError, DimExprError) reported at `where`."""
    try:
        yield
    except MirageFormatError:
        raise
    except PrismError as e:
        raise MirageFormatError(f"{' '.join(where.parts)}: {e}") from e


# -- op spellings --------------------------------------------------------------------------------

_REDUCTION_DIM = re.compile(r"_reduction_(\d)_op$")


def _spellings(prefix: str) -> dict[str, tuple[str, dict[str, Any]]]:
    """Mirage op_type → (Prism op, fixed attributes), for the compute ops of one level."""
    table: dict[str, tuple[str, dict[str, Any]]] = {}
    for od in OPS.values():
        if od.category in ("io", "custom"):
            continue
        for spelling in od.mirage:
            if spelling.startswith(prefix):
                # kn_reduction_k_op sums dim k, counted from the outermost.
                m = _REDUCTION_DIM.search(spelling)
                table[spelling] = (od.name, {"dim": int(m.group(1))} if m else {})
    return table


_KERNEL_OPS = _spellings("kn_")
_BLOCK_OPS = _spellings("tb_")
_KERNEL_SUPPORTED = sorted({"kn_input_op", "kn_output_op", "kn_customized_op", *_KERNEL_OPS})
_BLOCK_SUPPORTED = sorted({"tb_input_op", "tb_output_op", *_BLOCK_OPS})


def _unknown(op_type: str, supported: list[str], where: _Where) -> MirageFormatError:
    return where.error(f"unknown Mirage op type {op_type!r}; supported: {', '.join(supported)}",
                       "update the importer or remove that graph")


def _compute(builder: Graph | Block, scope: _Scope, op: dict[str, Any], op_type: str,
             where: _Where) -> None:
    """A compute op or accumulator, at either level: look it up, read, build, bind."""
    name, attrs = (_KERNEL_OPS if isinstance(builder, Graph) else _BLOCK_OPS)[op_type]
    od = OPS[name]
    recs = _recs(op, "input_tensors", where)
    if len(recs) != od.arity:
        raise where.error(f"{op_type} has {len(recs)} input tensors, expected {od.arity}")
    xs = [scope.read(r, where.at(f"input_tensors[{k}]")) for k, r in enumerate(recs)]
    out = _one_rec(op, "output_tensors", where)
    if name == "mul_scalar":
        attrs = {"scalar": _scalar_field(op, "scalar", where)}
    with _building(where):
        if od.category == "accum":
            assert isinstance(builder, Block)
            t = builder.accum(xs[0], name)
        else:
            t = getattr(builder, name)(*xs, **attrs)
    scope.bind(out, t, where)


# -- kernel graphs -------------------------------------------------------------------------------

def _import_graph(value: Any, where: _Where, name: str) -> KernelGraph:
    g, scope = Graph(name), _Scope("kernel")
    n_inputs = 0
    for j, op_value in enumerate(_as_list(value, where, "the graph (a list of operators)")):
        at = where.at(f"op {j}")
        op = _as_dict(op_value, at, "the operator")
        op_type = _str_field(op, "op_type", at)
        if op_type == "kn_input_op":
            rec = _one_rec(op, "output_tensors", at)
            with _building(at):
                t = g.input(f"in{n_inputs}", rec.shape)
            scope.bind(rec, t, at)
            n_inputs += 1
        elif op_type == "kn_output_op":
            t = scope.read(_one_rec(op, "input_tensors", at), at)
            with _building(at):
                g.output(t)
        elif op_type == "kn_customized_op":
            _import_custom(g, scope, op, at)
        elif op_type in _KERNEL_OPS:
            _compute(g, scope, op, op_type, at)
        else:
            raise _unknown(op_type, _KERNEL_SUPPORTED, at)
    with _building(where):
        return g.build()


def _import_custom(g: Graph, scope: _Scope, op: dict[str, Any], where: _Where) -> None:
    ins = _recs(op, "input_tensors", where)
    sources = [scope.read(r, where.at(f"input_tensors[{k}]")) for k, r in enumerate(ins)]
    outs = _recs(op, "output_tensors", where)
    bgraph = _dict_field(op, "bgraph", where)
    block = _BlockImport(_new_block(bgraph, where), ins, sources, outs)
    for k, bop in enumerate(_list_field(bgraph, "operators", where)):
        block.add(bop, where.at(f"block op {k}"))
    block.check_complete(where)
    with _building(where):
        results = g.customized(block.tb)
    for k, (rec, t) in enumerate(zip(outs, results, strict=True)):
        scope.bind(rec, t, where.at(f"output_tensors[{k}]"))


def _new_block(bgraph: dict[str, Any], where: _Where) -> Block:
    grid_dim = _dict_field(bgraph, "grid_dim", where)
    sizes = [_int_field(grid_dim, axis, where.at("grid_dim"), lo=1) for axis in _GRID_AXES]
    forloop_range = _int_field(bgraph, "forloop_range", where, lo=1)
    rdx = bgraph.get("reduction_dimx", DEFAULT_REDUCTION_DIMX)
    rdx = _as_int(rdx, where, "field 'reduction_dimx'", lo=1)
    with _building(where):
        return Block(grid=sizes[:_grid_rank(sizes)], forloop_range=forloop_range,
                     reduction_dimx=rdx)


def _grid_rank(sizes: list[int]) -> int:
    """How many grid dims to keep: up to the last one > 1, at least one."""
    return max([1] + [p + 1 for p, s in enumerate(sizes) if s > 1])


# -- block graphs --------------------------------------------------------------------------------

def _expect_guid(op: dict[str, Any], expected: Sequence[_Rec], k: int, kind: str, verb: str,
                 role: str, where: _Where) -> None:
    """Block input/output k must name custom-op input/output k (Mirage keeps them in order)."""
    dtensor = _tensor_rec(_get(op, "dtensor", where), where.at("dtensor"))
    if k < len(expected) and dtensor.guid == expected[k].guid:
        return
    want = f"guid {expected[k].guid}" if k < len(expected) else "nothing"
    raise where.error(f"{kind} {k} {verb} guid {dtensor.guid}, but custom-op {role} {k} is "
                      f"{want}", f"{kind}s must {verb[:-1]} the custom op's {role}s, in order; "
                      "the file is damaged")


class _BlockImport:
    """One `bgraph`: its block ops, added in file order to a `Block` builder."""

    def __init__(self, tb: Block, ins: list[_Rec], sources: list[Tensor], outs: list[_Rec]):
        self.tb, self.ins, self.sources, self.outs = tb, ins, sources, outs
        self.scope = _Scope("block")
        self.n_in = self.n_out = 0

    def add(self, value: Any, where: _Where) -> None:
        op = _as_dict(value, where, "the block operator")
        op_type = _str_field(op, "op_type", where)
        if op_type == "tb_input_op":
            self._input(op, where)
        elif op_type == "tb_output_op":
            self._output(op, where)
        elif op_type in _BLOCK_OPS:
            _compute(self.tb, self.scope, op, op_type, where)
        else:
            raise _unknown(op_type, _BLOCK_SUPPORTED, where)

    def _map(self, op: dict[str, Any], key: str, where: _Where) -> tuple[int, ...]:
        """Mirage's {x, y, z} map cut to the kept grid dims: data dim per grid dim, or -1."""
        m = _dict_field(op, key, where)
        dims = tuple(_int_field(m, axis, where.at(key), -1, MAX_RANK - 1) for axis in _GRID_AXES)
        return dims[:len(self.tb.grid)]

    def _input(self, op: dict[str, Any], where: _Where) -> None:
        k = self.n_in
        _expect_guid(op, self.ins, k, "tb_input_op", "reads", "input", where)
        imap = self._map(op, "input_map", where)
        fmap = _int_field(op, "forloop_dim", where, -1, MAX_RANK - 1)
        out = _one_rec(op, "output_tensors", where)
        with _building(where):
            tile = self.tb.input(self.sources[k], imap=imap, fmap=fmap)
        self.scope.bind(out, tile, where)
        self.n_in += 1

    def _output(self, op: dict[str, Any], where: _Where) -> None:
        k = self.n_out
        tile = self.scope.read(_one_rec(op, "input_tensors", where), where)
        _expect_guid(op, self.outs, k, "tb_output_op", "writes", "output", where)
        omap = self._map(op, "output_map", where)
        with _building(where):
            self.tb.output(tile, omap=omap)
        self.n_out += 1

    def check_complete(self, where: _Where) -> None:
        if self.n_in != len(self.ins) or self.n_out != len(self.outs):
            raise where.error(f"the block graph has {self.n_in} tb_input_ops and {self.n_out} "
                              f"tb_output_ops for a custom op with {len(self.ins)} inputs and "
                              f"{len(self.outs)} outputs")
