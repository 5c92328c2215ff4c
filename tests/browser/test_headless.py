"""Widget state survives headless execution: a notebook with the workbench's views, run by
nbclient with `store_widget_state=True`, keeps their models (and what they show) in its
metadata."""

from __future__ import annotations

import json

import nbformat
from nbclient import NotebookClient

CELLS = [
    """import prism, widgets
from prism.workloads.known_best import known_best
from widgets.sgraph import SGraphView
w = prism.get_workload("rmsnorm_matmul").with_shapes(X=(8, 64), W=(64, 64))
SGraphView(known_best("rmsnorm_matmul", w.shapes, grid=4, loop=2))""",
    """from prism.trace import Instantiated, Measured
events = [Instantiated("a", "c1", {"gx": 2}), Measured("a", "c1", {"gx": 2}, 7.5, "modeled"),
          Instantiated("b", "c1", {"gx": 4}), Measured("b", "c1", {"gx": 4}, 5.25, "modeled")]
widgets.TuningMonitor.from_events(events).widget""",
]


def test_widget_state_is_stored_by_nbclient(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in CELLS]
    client = NotebookClient(nb, timeout=300, kernel_name="python3", store_widget_state=True,
                            resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    state = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    models = list(state.values())
    text = json.dumps(models)
    assert len(models) > 10
    assert "custom kernel 0: grid (4)" in text or "custom kernel 0: grid 4" in text
    assert "feasible" in text                              # the assignment's verdict line
    # the tuning monitor's figure holds its two points, labelled modeled
    assert "modeled" in text and "7.5" in text and "5.25" in text
    for cell in nb.cells:
        assert any("application/vnd.jupyter.widget-view+json" in o.get("data", {})
                   for o in cell.outputs), cell.source
