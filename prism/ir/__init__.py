"""The IR: op table, dimension expressions, kernel and block graphs, spec, interpreter, JSON,
rendering."""

from prism.ir.dims import Dim, bit, const, dim, evaluate, substitute, var
from prism.ir.graph import BlockGraph, KernelGraph, Map, Op
from prism.ir.interpret import interpret
from prism.ir.ops import OPS, OpDef
from prism.ir.semantics import FLOAT64, Semantics
from prism.ir.spec import check, problems, substitute_graph

__all__ = [
    "FLOAT64", "OPS", "BlockGraph", "Dim", "KernelGraph", "Map", "Op", "OpDef", "Semantics", "bit",
    "check", "const", "dim", "evaluate", "interpret", "problems", "substitute", "substitute_graph",
    "var",
]
