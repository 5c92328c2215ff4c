"""What a command-line TARGET names: a workload, a `path.py:function` workload, or a graph file
(ours, or Mirage's list of μGraphs). One resolver for every command that takes a TARGET."""

from __future__ import annotations

import importlib.util
import math
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from prism.errors import (
    GraphFormatError,
    PrismError,
    TooLargeError,
    UnknownWorkloadError,
    UserModuleError,
)
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
    except SystemExit as e:  # not an Exception: without this, prism would exit with its code
        raise UserModuleError(f"{path_text}: the module called sys.exit({e.code!r}) while being "
                              "imported; keep script code under `if __name__ == \"__main__\":`"
                              ) from None
    except Exception as e:  # the user's module failed: say so in one line, not a traceback
        raise UserModuleError(f"{path_text}: importing it failed with {type(e).__name__}: {e}; "
                              "fix the module (python it alone to see the traceback)") from None
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
    from prism.workloads import VARIANTS, WORKLOADS, get_workload

    if target in WORKLOADS or target in VARIANTS:
        w = get_workload(target)
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
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as e:
        raise GraphFormatError(f"{target}: cannot read it ({e.strerror or e}); give a readable "
                               "graph .json file") from None
    except UnicodeDecodeError:
        raise GraphFormatError(f"{target}: not UTF-8 text (binary bytes), so not a graph .json "
                               "file; give a graph saved by prism or Mirage") from None
    doc = parse_json(text, target)
    if isinstance(doc, list):
        from prism.frontend.mirage import import_mirage
        return [Target(g.name, g) for g in import_mirage(path)]
    return [Target(path.stem, graph_from_json(doc))]


def memory_bytes() -> int | None:
    """This machine's physical memory, or None where the OS does not say."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def refuse_too_large(graph: KernelGraph, label: str) -> None:
    """Refuse, before any work, a program whose tensors do not fit in memory as float64 — the
    verifier's random tests and the final check allocate every kernel-level tensor that way —
    with the size they need (a dim of 2**40 would otherwise be a numpy MemoryError mid-search)."""
    total, biggest, where = 0, 0, ""
    for name, shape in graph.tensors:
        if not all(d.is_const for d in shape):
            continue            # symbolic: nothing is allocated at this shape
        size = 8 * math.prod(int(d.value) for d in shape)
        total += size
        if size > biggest:
            biggest, where = size, f"{name}{[int(d.value) for d in shape]}"
    limit = memory_bytes()
    if limit is not None and total > limit:
        raise TooLargeError(f"{label}: its tensors need {_size(total)} as float64 (the largest, "
                            f"{where}, {_size(biggest)}), more than this machine's "
                            f"{_size(limit)} of memory; give smaller shapes (--shape)")


def _size(n: float) -> str:
    units = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")
    i = 0
    while n >= 1024 and i < len(units) - 1:
        n, i = n / 1024, i + 1
    return f"{n:.1f} {units[i]}"
