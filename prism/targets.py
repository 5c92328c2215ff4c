"""What a command-line TARGET names: a workload, a `path.py:function` workload, or a graph file
(ours, or Mirage's list of μGraphs). One resolver for every command that takes a TARGET."""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path

from prism.errors import GraphFormatError, PrismError, UnknownWorkloadError
from prism.frontend.workload import Workload
from prism.ir.graph import KernelGraph


@dataclass(frozen=True)
class Target:
    label: str
    graph: KernelGraph
    workload: Workload | None = None   # set when torch can give the reference


def load_workload_file(spec: str) -> Workload:
    """`path.py:function` → the `@prism.workload` it names."""
    path_text, _, func = spec.rpartition(":")
    path = Path(path_text)
    if not path.is_file():
        raise PrismError(f"{path_text}: no such file; give TARGET as path.py:function")
    module_name = f"_prism_user_{path.stem}"
    mod_spec = importlib.util.spec_from_file_location(module_name, path)
    if mod_spec is None or mod_spec.loader is None:
        raise PrismError(f"{path_text}: cannot be imported as a Python module")
    module = importlib.util.module_from_spec(mod_spec)
    sys.modules[module_name] = module
    try:
        mod_spec.loader.exec_module(module)
    except PrismError:
        raise
    except Exception as e:  # the user's module failed: say so in one line, not a traceback
        raise PrismError(f"{path_text}: importing it failed with {type(e).__name__}: {e}") from None
    found = getattr(module, func, None)
    if not isinstance(found, Workload):
        raise PrismError(f"{spec}: {func!r} is not a function decorated with @prism.workload")
    return found


def resolve(target: str, index: int | None = None) -> list[Target]:
    """Every graph TARGET names (a Mirage file names many; `index` picks one)."""
    found = _resolve_all(target)
    if index is None:
        return found
    if not 0 <= index < len(found):
        raise PrismError(f"{target} holds {len(found)} graph(s); --index must be in 0.."
                         f"{len(found) - 1}")
    return [found[index]]


def _resolve_all(target: str) -> list[Target]:
    from prism.workloads import WORKLOADS, get_workload

    if target in WORKLOADS:
        w = WORKLOADS[target]
        return [Target(target, w.graph, w)]
    if ":" in target and target.rpartition(":")[0].endswith(".py"):
        w = load_workload_file(target)
        return [Target(w.name, w.graph, w)]
    path = Path(target)
    if path.suffix != ".json":
        get_workload(target)  # raises UnknownWorkloadError naming the known workloads
        raise UnknownWorkloadError(f"unknown workload {target!r}")
    if not path.is_file():
        raise GraphFormatError(f"{target}: no such file; give a workload name, path.py:function "
                               "or a graph .json file")
    from prism.ir.serialize import graph_from_json, parse_json
    doc = parse_json(path.read_text(), target)
    if isinstance(doc, list):
        from prism.frontend.mirage import import_mirage
        return [Target(g.name, g) for g in import_mirage(path)]
    return [Target(path.stem, graph_from_json(doc))]
