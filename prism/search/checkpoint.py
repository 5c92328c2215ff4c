"""The symbolic checkpoint: a search's result, shape-generic, saved as JSON and reused.

The complete families (symbolic grid, loop and maps) and the verified map instantiations
(concrete maps, symbolic grid sizes and loop ranges) do not depend on the input shapes beyond
ranks and which dims match. Re-instantiating at new shapes rebinds each candidate's inputs,
re-derives every tile and tensor shape, and re-checks the symbolic proof (a fraction of a second
per candidate) and the device limits — no search (REFERENCE §1.8).

A path ending in `.gz` is written gzip-compressed; either is read.

    {"format": "prism.search_checkpoint", "version": 1, "target": label,
     "target_graph": <graph JSON at the search's shapes>, "search_seconds": s,
     "config": {...}, "families": [{"id", "graph"}], "candidates": [{"id", "family", "graph"}]}
"""

from __future__ import annotations

import gzip
import json
import os
import time
import zlib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from prism.errors import GraphFormatError, PrismError
from prism.ir.graph import KernelGraph
from prism.ir.infer import infer_shapes
from prism.ir.serialize import graph_from_json, graph_to_json, parse_json
from prism.search.audit import descended
from prism.search.config import SearchConfig
from prism.search.driver import Candidate, SearchResult, _Run
from prism.trace import Tracer
from prism.verify.translate import translate

FORMAT = "prism.search_checkpoint"
VERSION = 1


class CheckpointError(GraphFormatError):
    """A checkpoint file that cannot be used: unreadable, or made for another program."""


@dataclass(frozen=True)
class Checkpoint:
    target: str
    target_graph: KernelGraph
    search_seconds: float
    candidates: tuple[tuple[str, str, KernelGraph], ...]     # (id, family, graph)
    families: tuple[tuple[str, dict[str, Any]], ...]   # (id, sGraph JSON), kept as written
    # the candidates the search modeled by descending (split programs: `Candidate.descend`)
    descend: frozenset[str] = frozenset()


def save_checkpoint(result: SearchResult, target: KernelGraph, path: str | Path) -> Path:
    doc = {"format": FORMAT, "version": VERSION, "target": result.target,
           "target_graph": graph_to_json(target), "search_seconds": round(result.seconds, 3),
           "complete": result.complete, "config": result.config.to_json(),
           "families": [{"id": f.id, "graph": graph_to_json(f.graph)} for f in result.families],
           "candidates": [{"id": c.id, "family": c.family, "graph": graph_to_json(c.graph),
                           **({"descend": True} if c.descend else {})}
                          for c in result.equivalent]}
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    # written beside it and renamed: a run killed mid-write leaves the old file or the new one
    staging = out.with_name(f"{out.name}.partial-{os.getpid()}")
    text = json.dumps(doc, indent=1)
    if out.suffix == ".gz":     # a path ending in .gz is compressed (tens of MB become a few)
        with gzip.open(staging, "wt", encoding="utf-8") as f:
            f.write(text)
    else:
        staging.write_text(text)
    os.replace(staging, out)
    return out


def load_checkpoint(path: str | Path) -> Checkpoint:
    p = Path(path)
    if p.is_dir():
        raise CheckpointError(f"{p}: a folder, not a checkpoint file; give an existing "
                              "checkpoint or a new file path to write one")
    try:
        raw = p.read_bytes()
        # gzip's magic bytes: written to a path ending in .gz (`save_checkpoint`)
        text = (gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw).decode("utf-8")
    except (EOFError, gzip.BadGzipFile, zlib.error):
        raise CheckpointError(f"{p}: a damaged gzip file; search again to write a new "
                              "one") from None
    except OSError as e:
        raise CheckpointError(f"{p}: cannot read it ({e.strerror or e}); give an existing "
                              "checkpoint or a new path to write one") from None
    except UnicodeDecodeError:
        raise CheckpointError(f"{p}: not UTF-8 text (binary bytes), so not a checkpoint; "
                              "search again to write a new one") from None
    doc = parse_json(text, str(p), error=CheckpointError)
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise CheckpointError(f"{p}: not a search checkpoint (format {FORMAT!r}); write one "
                              "with `prism search TARGET --checkpoint FILE`")
    if doc.get("version") != VERSION:
        raise CheckpointError(f"{p}: checkpoint version {doc.get('version')!r}, this prism "
                              f"reads version {VERSION}; search again to write a new one")
    try:
        target = graph_from_json(doc["target_graph"])
        cands = tuple((str(c["id"]), str(c["family"]), graph_from_json(c["graph"]))
                      for c in doc["candidates"])
        descend = frozenset(str(c["id"]) for c in doc["candidates"] if c.get("descend"))
        fams = tuple((str(f["id"]), dict(f["graph"])) for f in doc["families"])
        seconds = float(doc["search_seconds"])
    except (KeyError, TypeError, ValueError, PrismError) as e:
        raise CheckpointError(f"{p}: damaged checkpoint ({e}); search again to write a new "
                              "one") from None
    return Checkpoint(str(doc.get("target", "")), target, seconds, cands, fams, descend)


def rebind(graph: KernelGraph, target: KernelGraph) -> KernelGraph:
    """The graph with the target's input shapes, every other shape re-derived."""
    shapes = dict(graph.tensors)
    for mine, theirs in zip(graph.inputs, target.inputs, strict=True):
        shapes[mine] = target.shape(theirs)
    return infer_shapes(replace(graph, tensors=tuple(shapes.items())))


def reinstantiate(checkpoint: Checkpoint, target: KernelGraph, config: SearchConfig | None = None,
                  *, tracer: Tracer | None = None, label: str | None = None) -> SearchResult:
    """The checkpoint's candidates at the target's shapes, each re-verified and re-modeled."""
    _same_program(checkpoint, target)
    config = config or SearchConfig()
    run = _Run(target, label or checkpoint.target, config, tracer or Tracer(keep=False), None)
    start = time.perf_counter()
    for cid, family, graph in checkpoint.candidates:
        try:
            member = rebind(graph, target)
        except PrismError as e:
            run.result.candidates.append(_unfit(cid, family, graph, str(e)))
            continue
        # proved before: prove again, under the name the search gave it
        found = run.check(member, family, refute_first=False, cid=cid)
        if cid in checkpoint.descend:
            # modeled as the search modeled it: descending from its best enumerated assignment
            found.descend = True
            if found.modeled_us is not None and found.assignment is not None:
                run._model(found, descended(member, config.device,
                                            (found.modeled_us, found.assignment)))
    run.result.seconds = time.perf_counter() - start
    run.result.stop_reason = "checkpoint"
    return run.result


def _same_program(checkpoint: Checkpoint, target: KernelGraph) -> None:
    old, new = checkpoint.target_graph, target
    if len(old.inputs) != len(new.inputs) or any(
            len(old.shape(a)) != len(new.shape(b))
            for a, b in zip(old.inputs, new.inputs, strict=True)):
        raise CheckpointError(f"the checkpoint was made for {checkpoint.target} with inputs "
                              f"{old.inputs}; this target's inputs differ in number or rank")
    if translate(old).terms != translate(new, input_names=translate(old).inputs).terms:
        raise CheckpointError(f"the checkpoint was made for another program "
                              f"({checkpoint.target}); search this target again")


def _unfit(cid: str, family: str, graph: KernelGraph, why: str) -> Candidate:
    from prism.verify.equiv import Verdict
    return Candidate(cid, family, graph, Verdict("invalid", "shapes", 0.0,
                                                 reason=f"does not fit the new shapes: {why}"))

