"""Graph text against our JSON (issue 21, item 1): the bytes of `prism.ir.text.to_text` and of
compact JSON (`json.dumps(graph_to_json(g), separators=(",", ":"))`) for every workload's
known-best program and the graphs of the Mirage corpus, as a markdown table: a row per
corpus file (its graphs' bytes summed), or with `--all` a row per graph.

    .venv/bin/python bench/text_size.py [--all] [CORPUS_FOLDER]

The corpus folder defaults to $PRISM_MIRAGE_CORPUS, else shared/external/mirage_mugraphs beside
the repository; its rows are left out when there is none.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from prism.frontend.mirage import import_mirage
from prism.ir.graph import KernelGraph
from prism.ir.serialize import graph_to_json
from prism.ir.text import to_text
from prism.workloads import WORKLOADS, mirage_corpus
from prism.workloads.known_best import known_best


def rows(corpus: Path | None, every: bool) -> list[tuple[str, list[KernelGraph]]]:
    """(row name, graphs): the known-best programs, then the corpus by file (or by graph)."""
    out = [(f"{name} (known best)", [known_best(name, w.shapes)])
           for name, w in WORKLOADS.items()]
    for stem in mirage_corpus.FILES:
        path = (corpus or Path()) / f"{stem}.json"
        if corpus is None or not path.is_file():
            continue
        graphs = import_mirage(path)
        out += [(f"{stem}.json #{i}", [g]) for i, g in enumerate(graphs)] if every else \
            [(f"{stem}.json ({len(graphs)} graph{'s' * (len(graphs) > 1)})", graphs)]
    return out


def sizes(g: KernelGraph) -> tuple[int, int]:
    """(compact JSON bytes, text bytes)."""
    return (len(json.dumps(graph_to_json(g), separators=(",", ":")).encode()),
            len(to_text(g).encode()))


def table(rows: list[tuple[str, list[KernelGraph]]]) -> str:
    lines = ["| graph | JSON bytes | text bytes | ratio |", "|---|---:|---:|---:|"]
    total_json = total_text = 0
    for name, graphs in rows:
        j, t = (sum(col) for col in zip(*(sizes(g) for g in graphs), strict=True))
        total_json, total_text = total_json + j, total_text + t
        lines.append(f"| {name} | {j:,} | {t:,} | {t / j:.2f} |")
    lines.append(f"| **total** | {total_json:,} | {total_text:,} | "
                 f"{total_text / total_json:.2f} |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    every = "--all" in argv
    folders = [a for a in argv if a != "--all"]
    corpus = Path(folders[0]) if folders else mirage_corpus.default_folder()
    print(table(rows(corpus, every)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
