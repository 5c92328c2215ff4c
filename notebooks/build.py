"""Build the `.ipynb` notebooks from their literate sources, the single source of truth.

Each notebook is a jupytext "percent" script (`NN_name.py`): cells start at lines beginning with
`# %%`; `# %% [markdown]` starts a markdown cell whose lines drop their leading `# `; metadata
follows as `key=JSON` pairs (`# %% tags=["parameters"]`). This is a reader of that subset, so
jupytext need not be installed. The `.ipynb` files are written unexecuted, with deterministic cell
ids, and checked in so that `prism lab` opens them; a test checks they match their sources.

    .venv/bin/python notebooks/build.py           # rewrite every NN_*.ipynb (and NNb_*)
    .venv/bin/python notebooks/build.py --check   # exit 1 if one is out of date
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import nbformat

HERE = Path(__file__).resolve().parent
CELL = re.compile(r"^# %%(?P<rest>.*)$")
KIND = re.compile(r"^\s*\[(?P<kind>\w+)\]")
META = re.compile(r"(?P<key>\w+)=(?P<value>\[[^\]]*\]|\"[^\"]*\"|\S+)")
KERNELSPEC = {"name": "python3", "display_name": "Python 3", "language": "python"}


def sources() -> list[Path]:
    """The notebooks' literate sources, in order: `NN_name.py`, and `NNb_name.py` for the second
    half of a topic split in two (it sorts right after `NN_`, since `_` sorts before `b`)."""
    return sorted(HERE.glob("[0-9][0-9]*_*.py"))


def _header(rest: str) -> tuple[str, dict[str, object]]:
    """The cell type and metadata of a `# %%` line's remainder."""
    kind = KIND.match(rest)
    if kind:
        rest = rest[kind.end():]
    meta = {m["key"]: json.loads(m["value"]) for m in META.finditer(rest)}
    return ("markdown" if kind and kind["kind"] in ("markdown", "md") else "code"), meta


def _uncomment(line: str) -> str:
    return line[2:] if line.startswith("# ") else line[1:] if line.startswith("#") else line


def read_percent(text: str) -> nbformat.NotebookNode:
    """A percent-format script as an unexecuted notebook (text before the first `# %%` is
    dropped, as jupytext keeps it only as a header)."""
    cells: list[tuple[str, dict[str, object], list[str]]] = []
    for line in text.splitlines():
        found = CELL.match(line)
        if found:
            cells.append((*_header(found["rest"]), []))
        elif cells:
            cells[-1][2].append(line)
    nb = nbformat.v4.new_notebook()
    nb.metadata = {"kernelspec": KERNELSPEC, "language_info": {"name": "python"},
                   "jupytext": {"formats": "ipynb,py:percent"}}
    for i, (kind, meta, lines) in enumerate(cells):
        if kind == "markdown":
            lines = [_uncomment(line) for line in lines]
        source = "\n".join(lines).strip("\n")
        make = nbformat.v4.new_markdown_cell if kind == "markdown" else nbformat.v4.new_code_cell
        nb.cells.append(make(source, metadata=meta, id=f"cell-{i:02d}"))
    nbformat.validate(nb)
    return nb


def notebook_text(source: Path) -> str:
    """The `.ipynb` document (JSON text) that `source` builds."""
    return nbformat.writes(read_percent(source.read_text())) + "\n"


def build(source: Path) -> Path:
    target = source.with_suffix(".ipynb")
    target.write_text(notebook_text(source))
    return target


def main(argv: list[str]) -> int:
    stale = [s for s in sources() if not s.with_suffix(".ipynb").exists()
             or s.with_suffix(".ipynb").read_text() != notebook_text(s)]
    if "--check" in argv:
        for s in stale:
            print(f"{s.with_suffix('.ipynb').name} is out of date; run notebooks/build.py")
        return 1 if stale else 0
    for s in stale:
        print(f"wrote {build(s).relative_to(HERE.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
