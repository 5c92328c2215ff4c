"""Prism Workbench: a symbolic superoptimizer for tensor programs.

The public API, flat. Importing `prism` loads the IR (numpy) only; torch, graphviz, z3 and
triton load when a function that needs them is first called.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from prism.errors import (
    DimExprError,
    GraphFormatError,
    InputError,
    MirageFormatError,
    PrismError,
    ShapeError,
    SpecError,
    TraceFormatError,
    UnknownWorkloadError,
    UnsupportedOpError,
)
from prism.frontend.builder import Block, Graph
from prism.ir import BlockGraph, KernelGraph, Map, check, interpret

if TYPE_CHECKING:
    from prism.advice import Advice
    from prism.dynamo import compile
    from prism.frontend.mirage import import_mirage
    from prism.frontend.workload import Workload, from_module, workload
    from prism.pipeline import superoptimize
    from prism.search.config import SearchConfig
    from prism.verify.equiv import Verdict, verify
    from prism.verify.randomized import random_test
    from prism.workloads import WORKLOADS, get_workload

_LAZY = {
    "import_mirage": "prism.frontend.mirage",
    "workload": "prism.frontend.workload",
    "Workload": "prism.frontend.workload",
    "from_module": "prism.frontend.workload",
    "WORKLOADS": "prism.workloads",
    "get_workload": "prism.workloads",
    "verify": "prism.verify.equiv",
    "Verdict": "prism.verify.equiv",
    "random_test": "prism.verify.randomized",
    "SearchConfig": "prism.search.config",   # the search itself: prism.search.search(...)
    "superoptimize": "prism.pipeline",
    "compile": "prism.dynamo",               # torch.compile(model, backend="prism"), with options
    "Advice": "prism.advice",                # what an advisor may say (prism.compile(advisor=))
}


_SUBPACKAGES = ("search", "instantiate", "tune", "pipeline", "cost", "verify", "expr", "trace")


def __getattr__(name: str) -> Any:
    import importlib
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    if name in _SUBPACKAGES:     # `prism.search.SearchConfig(...)` after a plain `import prism`
        return importlib.import_module(f"prism.{name}")
    raise AttributeError(f"module 'prism' has no attribute {name!r}")


__all__ = [
    "WORKLOADS", "Advice", "Block", "BlockGraph", "DimExprError", "Graph", "GraphFormatError",
    "InputError",
    "KernelGraph", "Map", "MirageFormatError", "PrismError", "SearchConfig", "ShapeError",
    "SpecError",
    "TraceFormatError", "UnknownWorkloadError", "UnsupportedOpError", "Verdict", "Workload",
    "check", "compile", "from_module", "get_workload", "import_mirage", "interpret", "random_test",
    "superoptimize", "verify", "workload",
]
