"""The named workloads: Prism's five and Mirage's four (DESIGN.md §5), in a fixed order, and
the safe variants of the three attention workloads (`VARIANTS`: attention as practitioners
write it, the row max subtracted and scaled by 1/√d), which `get_workload` finds too.

    get_workload("rmsnorm_matmul").graph      # traced on first access
    workloads_json()                          # the listing; traces nothing

Importing this package does not import torch.
"""

from __future__ import annotations

import difflib
from typing import Any

from prism.errors import UnknownWorkloadError
from prism.frontend.workload import Workload
from prism.workloads.library import (
    attention,
    attention_safe,
    gated_mlp,
    gqa,
    gqa_safe,
    lora,
    ntrans,
    qknorm_attention,
    qknorm_attention_safe,
    rmsnorm_matmul,
    rmsnorm_mlp,
    swiglu,
)

WORKLOADS: dict[str, Workload] = {w.name: w for w in (
    rmsnorm_matmul, rmsnorm_mlp, swiglu, attention, qknorm_attention,   # Prism's
    gated_mlp, lora, gqa, ntrans,                                       # Mirage's
)}

# Not among the nine (the benchmarks' rows): the safe forms of attention, qknorm_attention and gqa
VARIANTS: dict[str, Workload] = {w.name: w for w in (
    attention_safe, qknorm_attention_safe, gqa_safe)}

DEFAULT_WORKLOAD = "rmsnorm_matmul"


def get_workload(name: str) -> Workload:
    """The workload called `name`, or an `UnknownWorkloadError` listing the known names."""
    if name in WORKLOADS:
        return WORKLOADS[name]
    if name in VARIANTS:
        return VARIANTS[name]
    known = [*WORKLOADS, *VARIANTS]
    close = difflib.get_close_matches(str(name), known, n=1)
    hint = f"did you mean {close[0]}? " if close else ""
    raise UnknownWorkloadError(f"unknown workload {name!r}; {hint}known workloads: "
                               f"{', '.join(known)}")


def workloads_json() -> list[dict[str, Any]]:
    """One `Workload.to_json()` row per workload, in registry order."""
    return [w.to_json() for w in WORKLOADS.values()]


__all__ = ["DEFAULT_WORKLOAD", "VARIANTS", "WORKLOADS", "Workload", "get_workload",
           "workloads_json"]
