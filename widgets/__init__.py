"""Jupyter widgets of the workbench: thin views over prism's events and IR JSON.

They import `prism.trace` and `prism.ir`, never the reverse (DESIGN.md §2). Each widget is a
plain-Python *state* that consumes events one at a time (`state.add(event)`) and answers queries,
and a thin *view* (ipywidgets and plotly, imported when a view is made) that draws the state and
redraws at most every 0.2 s, a page at a time, so a trace of 100,000 events stays responsive:

- `SearchState` / `SearchExplorer` (`widgets.explorer`): the family tree, prunes per rule with
  their evidence, the candidates; run / pause / step / cancel a live search.
- `SearchTree` (`widgets.tree`): the same state as a collapsible tree — counts per subtree,
  children grouped by rule and reason, jump to an id, follow the newest family, the selected
  family's partial sGraph beside its decision, audit findings, two candidates side by side.
- `ProofState`, `CounterexampleState` / `ProofView` (`widgets.proof`): a candidate's proof step
  by step, the rewritten subterms marked, or where it differs from the target.
- `TuningState` / `TuningMonitor` (`widgets.tuning`): latencies by kind as they are measured,
  best so far, the roofline and eager bounds, the failures.
- `SGraphState` / `SGraphView` (`widgets.sgraph`): a kernel graph's blocks, maps and symbolic
  tiles; an assignment's concrete tiles and which limit fails; abstract expressions.
- `BlockState` / `BlockView` (`widgets.blocks`): one custom kernel at one assignment, block by
  block and iteration by iteration: which tile of each input the block reads, which tile of each
  output it writes after the loop, drawn as tiles.
- `SourceState` / `SourceView` (`widgets.source`): a Triton module's lines grouped by the
  block-graph op they compute; choosing an op lights its lines.
- `Workbench` (`widgets.workbench`): all of them over one run — live (`run()`, then
  `await bench.wait()`), replayed (`from_trace`), saved as a static page (`save_html`); its
  winner taken away with `export()` or `out=`.
"""

from widgets.blocks import BlockState, BlockView
from widgets.explorer import SearchExplorer, SearchState
from widgets.proof import CounterexampleState, ProofState, ProofView
from widgets.tree import SearchTree
from widgets.tuning import TuningMonitor, TuningState
from widgets.workbench import Workbench

__all__ = [
    "BlockState",
    "BlockView",
    "CounterexampleState",
    "ProofState",
    "ProofView",
    "SearchExplorer",
    "SearchState",
    "SearchTree",
    "TuningMonitor",
    "TuningState",
    "Workbench",
]
