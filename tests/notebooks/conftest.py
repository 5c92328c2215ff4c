"""Running the teaching notebooks headless, as `make test` does.

Each `notebooks/NN_name.py` is read with `notebooks/build.py`'s percent reader (the one that
writes the checked-in `.ipynb`), executed top to bottom by nbclient in a fresh `python3` kernel
whose working folder is `notebooks/`, and timed. A notebook runs once per session, however many
tests look at it.

Every notebook's parameters cell has `SHOW_SOLUTIONS = False`, for the reader; the run sets it
to `True` in an injected cell after the parameters cell, so each exercise's check cell runs on its
solution.

A notebook's *oracle cell* is `oracles/NN_name.py`, when there is one. It is appended to the
in-memory notebook (never to the files), runs after every notebook cell in the same kernel, and
prints one JSON line after `ORACLE_MARK`. Every oracle cell starts with `oracles/_preamble.py`, the
helpers they share. It recomputes what the notebook printed by another
route (the cost model on the winner's graph, torch on the interpreter's output,
`substitute_graph` for tile shapes, the audit for a pruning rule), so a test compares the
notebook's own printout with an independent answer. Each notebook's tests live in
`test_NN_name.py` and take the `run` fixture: `run("NN_name")` is the one cached execution.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
ORACLES = Path(__file__).resolve().parent / "oracles"
ORACLE_MARK = "ORACLE "
TIMEOUT_S = 600          # one cell; the whole notebook must still finish in under 120 s


def _load_build() -> ModuleType:
    """notebooks/build.py, which is a script beside the notebooks rather than a package module."""
    spec = importlib.util.spec_from_file_location("notebooks_build", NOTEBOOKS / "build.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclass
class Executed:
    """One headless run of a notebook."""

    nb: nbformat.NotebookNode
    seconds: float       # kernel start to the last cell (the oracle cell included)
    cells: int           # the notebook's own cells, before the oracle cell

    @property
    def code_cells(self) -> list[Any]:
        return [c for c in self.nb.cells[:self.cells] if c.cell_type == "code"]

    @property
    def errors(self) -> list[str]:
        return [f"cell {i}: {o.ename}: {o.evalue}\n{chr(10).join(o.traceback)}"
                for i, c in enumerate(self.nb.cells) if c.cell_type == "code"
                for o in c.outputs if o.output_type == "error"]

    @property
    def text(self) -> str:
        """Everything the notebook's own cells printed to stdout, in order."""
        return "".join(o.text for c in self.code_cells for o in c.outputs
                       if o.output_type == "stream" and o.name == "stdout")

    @property
    def oracle(self) -> dict[str, Any]:
        for c in self.nb.cells[self.cells:]:
            for o in c.outputs:
                if o.output_type == "stream" and ORACLE_MARK in o.text:
                    return json.loads(o.text.split(ORACLE_MARK, 1)[1])
        raise AssertionError(f"the oracle cell printed nothing; errors: {self.errors}")


def inject_parameters(nb: nbformat.NotebookNode, **values: Any) -> None:
    """Add a cell that sets `values` right after the cell tagged `parameters`, as papermill does
    (tagged `injected-parameters`), so that they override the notebook's defaults."""
    at = next(i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", ()))
    source = "\n".join(f"{name} = {value!r}" for name, value in values.items())
    nb.cells.insert(at + 1, nbformat.v4.new_code_cell(
        source, metadata={"tags": ["injected-parameters"]}, id="injected-parameters"))


def execute(stem: str, oracle: str = "") -> Executed:
    build = _load_build()
    nb = build.read_percent((NOTEBOOKS / f"{stem}.py").read_text())
    inject_parameters(nb, SHOW_SOLUTIONS=True)     # the exercises' checks run on the solutions
    cells = len(nb.cells)
    if oracle:
        nb.cells.append(nbformat.v4.new_code_cell(oracle))
    # allow_errors: a failed cell is reported by the tests (with its traceback), and the run is
    # still cached, so one broken notebook is executed once, not once per test.
    client = NotebookClient(nb, timeout=TIMEOUT_S, kernel_name="python3",
                            store_widget_state=True, allow_errors=True,
                            resources={"metadata": {"path": str(NOTEBOOKS)}})
    started = time.perf_counter()
    client.execute()
    return Executed(nb, time.perf_counter() - started, cells)


@pytest.fixture(scope="session")
def build() -> ModuleType:
    return _load_build()


def oracle_source(stem: str) -> str:
    """The notebook's oracle cell: the shared preamble (`oracles/_preamble.py`: `_rejects` and
    `_rejection`, the exercises' checks asked about wrong answers), then `oracles/NN_name.py`;
    "" when the notebook has none."""
    path = ORACLES / f"{stem}.py"
    return (ORACLES / "_preamble.py").read_text() + "\n\n" + path.read_text() \
        if path.exists() else ""


@functools.cache
def _execute_once(stem: str) -> Executed:
    return execute(stem, oracle_source(stem))


@pytest.fixture(scope="session")
def run() -> Any:
    """`run(stem)` → `Executed`: the notebook and its oracle cell, once per session."""
    return _execute_once
