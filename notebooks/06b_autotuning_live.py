# %% [markdown]
# # 06b · Autotuning live: screen by the model, measure the finalists
#
# Notebook `06` costed every member of the fused kernel's sGraph with the model and read why one
# grid size wins. Tuning does that for every verified sGraph the search found, and then checks
# the model's best few by running them. Timing every choice on a GPU takes seconds each, and
# there are dozens, so Prism tunes in two steps, as Mirage and Triton's autotuner do:
#
# 1. **screen** every configuration with the analytic cost model, which costs microseconds;
# 2. give the best few, the **finalists**, real code and run them: on a GPU they are *measured*;
#    without one they run in Triton's interpreter, which proves they compute the right thing but
#    says nothing about speed.
#
# This notebook has one idea: **the model ranks, a run confirms**. It watches the model rank
# every configuration live, follows the best-so-far curve, runs the finalists, and caches what it
# measured. Every latency carries its kind: `modeled`, `interpreted` or `measured`.
#
# If a word is new to you, look it up in the [glossary](GLOSSARY.md).

# %% tags=["parameters"]
WORKLOAD = "rmsnorm_matmul"
SEARCH_SHAPES = {"X": (8, 64), "W": (64, 64)}         # the search and the interpreter run here
PAPER_SHAPES = {"X": (8, 4096), "W": (4096, 4096)}    # one of Prism's shape sets: screened only
DEVICE = "h100"                                       # the cost model's device
SEARCH = {"grid_dims": (1,), "max_block_ops": 4, "block_ops": ("matmul", "div", "rms_norm"),
          "accumulators": ("nored", "red_ld_rms")}
BUDGET_S = 60
MAX_TRIALS = 4             # finalists: the best distinct kernels by the model
COMPILE_PTX = False        # True: also compile each finalist to sm_90 PTX (slower)
SHOW = 6                   # rows of the ranking to print from the top
SHOW_SOLUTIONS = False     # True: run the exercise's solution cell (make test does)

# %% [markdown]
# ## 1. Configurations: the search once, the numbers later
#
# The search runs once, at small shapes, where it is quick. Its candidates are symbolic,
# so a *checkpoint* of them can be re-instantiated at the paper's shapes without searching again:
# each candidate is re-bound to the new shapes and its proof re-checked. Then
# `prism.pipeline.instantiate` lists the **configurations**. Each is one candidate with one
# choice of grid size and loop range, taken from `prism.instantiate.params`: powers of two that
# divide the dims and fit the device, at most 20 per candidate, evenly spaced over the feasible
# ones. The input program itself is always one of them.

# %%
import math
import tempfile
from pathlib import Path

import prism
from _tables import table
from prism.cost import DEVICES as TABLE, eager_us, roofline_us
from prism.pipeline import instantiate
from prism.search import SearchConfig, search
from prism.search.checkpoint import load_checkpoint, reinstantiate, save_checkpoint

paper = prism.get_workload(WORKLOAD).with_shapes(**PAPER_SHAPES)
graph = paper.graph
scratch = Path(tempfile.mkdtemp(prefix="prism-06b-"))   # this run's files; nothing in the repo
config = SearchConfig(budget_s=BUDGET_S, **SEARCH)
small = prism.get_workload(WORKLOAD).with_shapes(**SEARCH_SHAPES)
found_small = search(small.graph, config)
checkpoint = save_checkpoint(found_small, small.graph, scratch / "search.json")
found = reinstantiate(load_checkpoint(checkpoint), graph, config)
configs = instantiate(graph, found)
print(f"search at {small.shapes}: {len(found_small.equivalent)} candidates proved equivalent "
      f"in {found_small.seconds:.1f} s")
print(f"re-instantiated at {paper.shapes}: {len(found.equivalent)} candidates, "
      f"{len(configs)} configurations (the input program included)")

# %% [markdown]
# ## 2. Screening, live
#
# `prism.tune.tune` is the pipeline's tuning stage on its own. Every configuration becomes an
# `Instantiated` event and a `Measured` event whose kind is `modeled`. The `TuningMonitor` widget
# listens to the same tracer, so in Jupyter its plot fills in while the cell runs. There is one
# marker per configuration, in the order it was screened, on a log scale. The staircase line is
# the *best so far*, and the dashed lines are the roofline and eager latencies
# (notebook `06`).
#
# The model backend measures nothing itself: the finalists keep their modeled numbers. Sections
# 4 and 6 run finalists for real.

# %%
from IPython.display import display

from prism.cost import get_device
from prism.trace import Tracer
from prism.tune import make_backend, tune
from widgets import TuningMonitor

device = get_device(DEVICE)
roof, eager = roofline_us(graph, device), eager_us(graph, device)
monitor = TuningMonitor()
monitor.set_bounds(roofline_us=roof, eager_us=eager)
tracer = Tracer()
monitor.attach(tracer)
display(monitor)                   # drawn now, filled in as the events arrive
screen = tune(configs, make_backend("model", device), device, tracer=tracer,
              max_trials=MAX_TRIALS, compile_ptx=COMPILE_PTX)
monitor.flush()

# %% [markdown]
# The ranking, best first. The last column divides each latency by the roofline: 1.00 would be
# a perfect kernel. Look at the top rows. Several configurations differ only in their loop range
# `F`, yet they share one latency, to the last digit: notebook `06`, section 3, says why.

# %%
ranked = sorted(screen.screened, key=lambda t: (t.modeled_us, t.config.id))
shown = [(k, t.config.id, t.modeled_us, t.modeled_us / roof) for k, t in enumerate(ranked, 1)
         if k <= SHOW or k > len(ranked) - 2]
table(shown, ["rank", "configuration", ("latency µs", ".2f"), ("× roofline", ".2f")],
      note=f"modeled on {device.name}; roofline {roof:.2f} µs, eager {eager:.2f} µs, modeled")
if len(shown) < len(ranked):
    print(f"(ranks {SHOW + 1} to {len(ranked) - 2} left out)")
print("finalists (the best distinct kernels):", ", ".join(t.config.id for t in screen.finalists))
print(f"chosen: {screen.best.config.id} at {screen.best.latency_us:.2f} µs {screen.best.kind}")

# %% [markdown]
# ## 3. Best so far: the running minimum
#
# The staircase in the plot is the running minimum of the `modeled` points: after each
# measurement, the least latency seen so far. It can only go down. The monitor's state
# (`monitor.state`, plain Python) keeps one such curve per kind and never mixes kinds. The rows
# below are the measurements where it went down. When configurations tie, the curve names the
# first one it met, while the tuner breaks ties by configuration name, so that every run
# chooses the same kernel. The two may then name different members with the same latency.

# %%
state = monitor.state
points, curve = state.points["modeled"], state.best_so_far("modeled")
steps, previous = [], math.inf
for point, low in zip(points, curve, strict=True):
    if low < previous:
        steps.append((point.n, point.config, point.latency_us, low))
    previous = low
table(steps, ["measurement", "configuration", ("latency µs", ".2f"), ("best so far µs", ".2f")],
      note="modeled")
print(f"after {len(points)} modeled measurements the best is {curve[-1]:.2f} µs modeled "
      f"({state.best('modeled').config})")

# %% [markdown]
# ## 4. The finalists, run for real in the interpreter
#
# A modeled number comes from a formula, not from running the kernel. Before a kernel is trusted,
# its generated Triton code must run. Without a GPU, `measure="interpret"` runs each finalist in
# Triton's interpreter on the CPU, with the output buffers filled with NaN first. It compares the
# result with the float64 reference interpreter, and a finalist that computes the wrong thing
# scores `inf`.
#
# The interpreter's latency is the CPU **wall time** of that run, and it is labelled
# `interpreted`. It depends on how numpy executes the tiles on this CPU and says nothing about a
# GPU, so **it is never used for ranking**: the tuner still ranks the finalists by the model. This
# runs at the small search shapes, because the interpreter is slow. The full pipeline runs
# (`prism.superoptimize`), with a fresh monitor attached and a result database in this run's
# temporary folder. The plot shows both kinds, each with its own marker and best-so-far line.

# %%
from prism.instantiate.triton_backend import interpreting
from prism.report import check_text
from prism.tune import ResultDB

db_path = scratch / "results.jsonl"
first = None
if interpreting():
    live = TuningMonitor()
    live_tracer = Tracer()
    live.attach(live_tracer)
    display(live)
    first = prism.superoptimize(small, device=DEVICE, measure="interpret", budget_s=BUDGET_S,
                                search_config=config, max_trials=MAX_TRIALS,
                                compile_ptx=COMPILE_PTX, tracer=live_tracer,
                                db=ResultDB(db_path))
    live.flush()
    print(f"{'finalist':<18} {'modeled µs':>10} {'interpreted µs':>15}  result   "
          "(interpreted: CPU wall time, correctness only)")
    for t in first.tuning.finalists:
        verdict = "ok" if t.ok else f"failed: {t.error}"
        print(f"{t.config.id:<18} {t.modeled_us:>10.2f} {t.latency_us:>15.0f}  {verdict}")
    fastest = min((t for t in first.tuning.finalists if t.ok), key=lambda t: t.latency_us)
    print(f"chosen by the model: {first.tuning.best.config.id}; fastest on this CPU: "
          f"{fastest.config.id} (CPU wall times rank nothing)")
    print("check:", check_text(first.best.check))
else:
    print("This kernel runs Triton compiled for the GPU, so Triton's interpreter cannot run in "
          "it; section 6 measures the finalists on the GPU instead.")

# %% [markdown]
# The `interpreted µs` column times numpy running one tile at a time on this CPU. It is not a
# GPU latency, large or small. Compare the fastest on this CPU with the model's choice: they
# often differ, and the model's choice stands.
#
# ## 5. The result database: the second run is instant
#
# Every measurement goes into a `ResultDB`, a JSON Lines file, one record per measurement. Its
# key is a hash of everything that could change the number: the concrete kernel graph, the
# generated source, the backend and device, and the versions it ran under. Those versions are
# Triton's, torch's, the GPU's name, and a hash of the cost model's and the code generator's own
# source files. Change any of them and the old record no longer matches. Run the same tuning
# again with the same database, and every finalist is a hit:

# %%
if first is not None:
    again = prism.superoptimize(small, device=DEVICE, measure="interpret", budget_s=BUDGET_S,
                                search_config=config, max_trials=MAX_TRIALS,
                                compile_ptx=COMPILE_PTX, db=ResultDB(db_path))
    before = {t.config.id: t for t in first.tuning.finalists}
    print(f"{'finalist':<18} {'cached':>6} {'interpreted µs':>15} {'as in run 1':>11}")
    for t in again.tuning.finalists:
        same = t.config.id in before and before[t.config.id].latency_us == t.latency_us
        print(f"{t.config.id:<18} {t.cached!s:>6} {t.latency_us:>15.0f} {same!s:>11}")
    print(f"tuning took {first.tuning.seconds:.2f} s the first time and "
          f"{again.tuning.seconds:.2f} s the second (wall time on this CPU, not a latency)")
    print(f"{db_path.name}: {len(ResultDB(db_path))} records")
else:
    print("no interpreter run above, so nothing to repeat from the database")

# %% [markdown]
# ## 6. Measured against modeled
#
# The model is a formula, and on a GPU it can be checked. When this kernel sees a CUDA GPU, the
# cell below times the paper-shape finalists with `measure="cuda"`: CUDA events around the
# kernel (`triton.testing.do_bench`), each checked against the float64 reference first. It puts
# each measured latency beside the modeled one. The model's device is the GPU's own entry in
# the table when there is one. Without a GPU the cell says so and makes no measurement. It never
# prints a measured number that was not measured.

# %%
import torch

if torch.cuda.is_available():
    gpu = torch.cuda.get_device_name()
    spec = next((d for d in TABLE.values() if d.name in gpu.lower()), device)
    timed = tune(configs, make_backend("cuda", spec), spec, max_trials=MAX_TRIALS,
                 compile_ptx=False)
    print(f"{gpu}; cost model: {spec.name}")
    print(f"{'finalist':<22} {'modeled µs':>10} {'measured µs':>11} {'measured / modeled':>18}")
    for t in timed.finalists:
        ratio = t.latency_us / t.modeled_us if t.ok else math.inf
        print(f"{t.config.id:<22} {t.modeled_us:>10.2f} {t.latency_us:>11.2f} {ratio:>18.2f}"
              + ("" if t.ok else f"  failed: {t.error}"))
    fastest = timed.best
    print(f"fastest measured: {fastest.config.id if fastest else 'none'}; the model's choice: "
          f"{screen.best.config.id}")
else:
    print("No GPU: torch.cuda.is_available() is False in this kernel, so no measurement was "
          "made. Every latency in this notebook is modeled or interpreted; none is measured.")


# %% [markdown]
# ## 7. Exercise: pick the finalists yourself
#
# Screening ranked every configuration by its modeled latency (ties broken by the
# configuration's name, so that every run picks the same). The finalists are the first
# `MAX_TRIALS` of that ranking whose concrete kernels differ: two candidates from different
# families can instantiate to the same program, and running it twice would tell nothing. Pick
# them from `screen.screened`: each is a trial with `.modeled_us` and `.config`, whose
# `.config.concrete()` is the concrete kernel graph (a value: two equal programs compare equal
# once their names are blanked, `dataclasses.replace(graph, name="")`). Write their
# configuration ids, best first, as `my_finalists`. The check compares them with the tuner's.

# %%
my_finalists = None         # your answer: a list of configuration ids

# %% jupyter={"source_hidden":true}
if SHOW_SOLUTIONS:
    import dataclasses

    seen, my_finalists = set(), []
    for trial in sorted(screen.screened, key=lambda t: (t.modeled_us, t.config.id)):
        program = dataclasses.replace(trial.config.concrete(), name="")
        if math.isfinite(trial.modeled_us) and program not in seen:
            seen.add(program)
            my_finalists.append(trial.config.id)
    my_finalists = my_finalists[:MAX_TRIALS]


# %%
def check_finalists(ids):
    """The oracle: the finalists `prism.tune.tune` chose while screening."""
    tuner = [t.config.id for t in screen.finalists]
    assert list(ids) == tuner, f"{list(ids)} ≠ the tuner's {tuner}"
    return tuner


if my_finalists is None:
    print("exercise: write my_finalists above, or set SHOW_SOLUTIONS = True")
else:
    print(f"exercise passed: {len(check_finalists(my_finalists))} finalists, "
          f"{', '.join(my_finalists)}, as the tuner chose them")

# %% [markdown]
# ## What to remember
#
# - The cost model **screens** every configuration in microseconds; the best-so-far curve only
#   goes down, and ties go to the first name, so every run chooses the same kernel.
# - **Finalists** are the best few distinct kernels by the model, and they run for real. The
#   interpreter proves them correct, but its `interpreted` wall times are CPU times and rank
#   nothing. A GPU gives `measured` times.
# - The `ResultDB` keeps every measurement under a key of everything that could change it, so a
#   second run is instant.
