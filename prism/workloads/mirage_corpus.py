"""Mirage's own μGraphs (`shared/external/mirage_mugraphs`, beside the repository) with the
targets they are proven against: each file holds one workload's programs at one set of shapes."""

from __future__ import annotations

import os
from pathlib import Path

from prism.errors import PrismError
from prism.frontend.mirage import as_mirage_defines, import_mirage
from prism.ir.graph import KernelGraph
from prism.workloads import WORKLOADS

# file stem → the workload its graphs compute
FILES = {"rmsnorm_bs1": "rmsnorm_matmul", "gated_mlp": "gated_mlp", "lora": "lora",
         "single_gated_mlp": "gated_mlp", "single_lora": "lora", "gqa_bs1": "gqa"}
ENV = "PRISM_MIRAGE_CORPUS"


def default_folder() -> Path | None:
    """$PRISM_MIRAGE_CORPUS, else `shared/external/mirage_mugraphs` beside the repository;
    None when neither exists."""
    env = os.environ.get(ENV)
    if env:
        return Path(env)
    beside = Path(__file__).resolve().parents[3] / "shared/external/mirage_mugraphs"
    return beside if beside.is_dir() else None


def workload_at(name: str, graph: KernelGraph) -> KernelGraph:
    """Workload `name` at `graph`'s input shapes, as Mirage defines it (rms_norm without an
    epsilon): the target a Mirage graph of that workload is proven against."""
    w = WORKLOADS[name]
    shapes = [tuple(d.value for d in graph.shape(t)) for t in graph.inputs]
    return as_mirage_defines(w.with_shapes(**dict(zip(w.shapes, shapes, strict=True))).graph)


def target_of(stem: str, graph: KernelGraph) -> KernelGraph:
    """The workload of corpus file `stem` at `graph`'s input shapes (`workload_at`)."""
    if stem not in FILES:
        raise PrismError(f"{stem}.json is not a file of the Mirage corpus ({', '.join(FILES)})")
    return workload_at(FILES[stem], graph)


def pairs(folder: str | Path) -> list[tuple[str, KernelGraph, KernelGraph]]:
    """(name, target, graph) for every graph of every corpus file in `folder`."""
    folder = Path(folder)
    files = [folder / f"{stem}.json" for stem in FILES if (folder / f"{stem}.json").is_file()]
    if not files:
        raise PrismError(f"{folder} holds no file of the Mirage corpus ({', '.join(FILES)}); "
                         f"give the folder of mirage_mugraphs, or set ${ENV}")
    out = []
    for path in files:
        graphs = import_mirage(path)
        target = target_of(path.stem, graphs[0])
        out += [(g.name, target, g) for g in graphs]
    return out
