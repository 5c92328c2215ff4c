# %% [markdown]
# # 06 · Autotuning live: the cost model, the roofline, and the measurements
#
# The search of notebooks `02` and `03` ends with a handful of *verified sGraphs*: fused kernels
# proved equal to the program, with their grid sizes and loop ranges still symbols. Someone must
# still pick the numbers. Each choice is a different kernel, and they are all correct, so the
# only question left is speed. Answering it is **autotuning**.
#
# Timing every choice on a GPU takes seconds each, and there are dozens. Prism therefore tunes in
# two steps, as Mirage and Triton's autotuner do:
#
# 1. **screen** every configuration with the analytic cost model, which costs microseconds;
# 2. give the best few, the **finalists**, real code and run them: on a GPU they are *measured*;
#    without one they run in Triton's interpreter, which proves they compute the right thing but
#    says nothing about speed.
#
# This notebook opens both steps. It starts with the number no kernel can beat (the roofline),
# watches the model rank every configuration, takes one ranking apart to see *why* one grid size
# wins, runs the finalists, and caches what it measured. Every latency carries its kind:
# `modeled`, `interpreted` or `measured`.
#
# If a word is new to you, look it up in the [glossary](GLOSSARY.md).

# %% tags=["parameters"]
WORKLOAD = "rmsnorm_matmul"
SEARCH_SHAPES = {"X": (8, 64), "W": (64, 64)}         # the search and the interpreter run here
PAPER_SHAPES = {"X": (8, 4096), "W": (4096, 4096)}    # one of Prism's shape sets: screened only
DEVICE = "h100"                                       # the cost model's device
DEVICES = ("a100", "h100", "h200")                    # the roofline on each
SEARCH = {"grid_dims": (1,), "max_block_ops": 4, "block_ops": ("matmul", "div", "rms_norm"),
          "accumulators": ("nored", "red_ld_rms")}
BUDGET_S = 60
MAX_TRIALS = 4             # finalists: the best distinct kernels by the model
COMPILE_PTX = False        # True: also compile each finalist to sm_90 PTX (slower)
SHOW = 6                   # rows of the ranking to print from the top
SHOW_SOLUTIONS = False     # True: run the exercise's solution cell (make test does)

# %% [markdown]
# ## 1. The roofline: the bound no kernel beats
#
# Any kernel that computes `rms_norm(X) @ W` must at least read `X` and `W` from device memory
# once and write the output once. It must also do the arithmetic. A GPU moves bytes at its HBM
# bandwidth and does fp16 arithmetic at its tensor-core peak, and it can overlap the two. The
# program therefore takes at least the larger of two times, *bytes ÷ bandwidth* and
# *FLOPs ÷ peak*, plus one kernel launch. That is the **roofline bound**.
#
# The first table lists the bytes and FLOPs, computed here from the shapes at one of Prism's
# shape sets, with `W` a 4096 × 4096 matrix.

# %%
import math

import prism
from prism.cost import BYTES_PER_ELEMENT, DEVICES as TABLE, eager_us, full_size_flops, roofline_us

paper = prism.get_workload(WORKLOAD).with_shapes(**PAPER_SHAPES)
graph = paper.graph
sizes = {t: [d.value for d in graph.shape(t)] for t in (*graph.inputs, *graph.outputs)}
moved = {t: BYTES_PER_ELEMENT * math.prod(shape) for t, shape in sizes.items()}
total = sum(moved.values())
flops = full_size_flops(graph)
print(paper, "·", paper.program)
for t, shape in sizes.items():
    role = "read once" if t in graph.inputs else "written once"
    print(f"  {t:<8} {shape!s:<14} {moved[t] / 1e6:>8.3f} MB  {role}")
print(f"minimum traffic {total / 1e6:.3f} MB, {flops / 1e6:.1f} MFLOP at full size: "
      f"{flops / total:.2f} FLOP per byte")

# %% [markdown]
# Now the same program on each device in the cost model's table. The **ridge point** is
# peak ÷ bandwidth: the FLOPs per byte a program needs before compute, not memory, limits it.
# Compare our program's FLOPs per byte, printed above, with the ridge column: it is far below
# every ridge, so the program is *memory bound*. Its roofline is the time to stream `W` once,
# plus a launch. Compare the H100 and H200 rows: the same chip with faster memory, and the bound
# falls with the bandwidth.
#
# The `memory µs` and `compute µs` columns are computed in this cell from the numbers above. The
# `roofline µs` column is the engine's own `roofline_us`, so they can be checked against each
# other: roofline = max(memory, compute) + launch.

# %%
print(f"{'device':<6} {'HBM GB/s':>9} {'TFLOP/s':>8} {'ridge FLOP/B':>12} {'memory µs':>10} "
      f"{'compute µs':>10} {'launch µs':>9} {'roofline µs':>11} {'eager µs':>9}   (modeled)")
for name in DEVICES:
    spec = TABLE[name]
    memory_us = total / (spec.mem_bw_gbps * 1e3)        # bytes / (GB/s) = ns; / 1e3 = µs
    compute_us = flops / (spec.fp16_tflops * 1e6)       # flops / (TFLOP/s) = ps; / 1e6 = µs
    print(f"{name:<6} {spec.mem_bw_gbps:>9.0f} {spec.fp16_tflops:>8.0f} "
          f"{spec.fp16_tflops * 1e3 / spec.mem_bw_gbps:>12.0f} {memory_us:>10.3f} "
          f"{compute_us:>10.4f} {spec.launch_us:>9.1f} {roofline_us(graph, spec):>11.3f} "
          f"{eager_us(graph, spec):>9.3f}")

# %% [markdown]
# The last column is **eager**: PyTorch's two kernels, modeled the same way. The first kernel
# writes `rms_norm(X)` to HBM and the second reads it back, and there are two launches. A tuned
# fused kernel should land between the two columns, as close to the roofline as it can.
#
# ## 2. Configurations: the search once, the numbers later
#
# The search runs once, at small shapes, where it is quick. Its candidates are symbolic,
# so a *checkpoint* of them can be re-instantiated at the paper's shapes without searching again:
# each candidate is re-bound to the new shapes and its proof re-checked. Then
# `prism.pipeline.instantiate` lists the **configurations**. Each is one candidate with one
# choice of grid size and loop range, taken from `prism.instantiate.params`: powers of two that
# divide the dims and fit the device, at most 20 per candidate, evenly spaced over the feasible
# ones. The input program itself is always one of them.

# %%
import tempfile
from pathlib import Path

from prism.pipeline import instantiate
from prism.search import SearchConfig, search
from prism.search.checkpoint import load_checkpoint, reinstantiate, save_checkpoint

scratch = Path(tempfile.mkdtemp(prefix="prism-06-"))    # this run's files; nothing in the repo
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
# ## 3. Screening, live
#
# `prism.tune.tune` is the pipeline's tuning stage on its own. Every configuration becomes an
# `Instantiated` event and a `Measured` event whose kind is `modeled`. The `TuningMonitor` widget
# listens to the same tracer, so in Jupyter its plot fills in while the cell runs. There is one
# marker per configuration, in the order it was screened, on a log scale. The staircase line is
# the *best so far*, and the dashed lines are the roofline and eager latencies from section 1.
#
# The model backend measures nothing itself: the finalists keep their modeled numbers. Sections
# 6 and 8 run finalists for real.

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
# `F`, yet they share one latency, to the last digit. Section 4 explains why.

# %%
ranked = sorted(screen.screened, key=lambda t: (t.modeled_us, t.config.id))
print(f"{'rank':>4}  {'configuration':<22} {'latency µs':>10} {'× roofline':>10}   "
      f"(modeled on {device.name}; roofline {roof:.2f} µs, eager {eager:.2f} µs, modeled)")
for k, t in enumerate(ranked, 1):
    if k <= SHOW or k > len(ranked) - 2:
        print(f"{k:>4}  {t.config.id:<22} {t.modeled_us:>10.2f} {t.modeled_us / roof:>10.2f}")
    elif k == SHOW + 1:
        print(f"{'...':>4}")
print("finalists (the best distinct kernels):", ", ".join(t.config.id for t in screen.finalists))
print(f"chosen: {screen.best.config.id} at {screen.best.latency_us:.2f} µs {screen.best.kind}")

# %% [markdown]
# ## 4. Why this grid size: the model's breakdown
#
# Take the winner's sGraph and cost each of its members. The winner keeps `X` whole in every
# block (it is *replicated*) and splits `W` by columns over the grid. The model charges each part
# of the work (see `prism/cost/model.py`):
#
# - **HBM bytes**: every tensor once. This is the same for every member.
# - **L2 bytes**: the replicated `X` is read again by every extra block. Those copies come from
#   the L2 cache, which is faster than HBM but not free. This grows with the grid.
# - **SMs busy**: a GPU has `sm_count` streaming multiprocessors (132 on an H100). With fewer
#   blocks than SMs, some sit idle, and memory time is divided by the busy fraction. **waves**
#   counts rounds of resident blocks (`max_blocks_per_sm` fit on one SM at once).
# - **launch**: a fixed few microseconds per kernel, whatever it does.
#
# The table lists every feasible member, not only the 20 that became configurations. There is
# one row per grid size; the members at one grid size differ only in `F`, and the `F` column
# lists them.

# %%
from prism.cost import modeled
from prism.instantiate.params import assignments
from prism.ir.spec import substitute_graph

best = screen.best
family = best.config.graph                         # the winner's sGraph, sizes symbolic
by_grid: dict[int, list[dict[str, int]]] = {}
for env in assignments(family, limit=1000):
    by_grid.setdefault(env["gx"], []).append(env)
print(f"{best.config.candidate}: {sum(map(len, by_grid.values()))} members; "
      f"{device.name} has {device.sm_count} SMs")
print(f"{'gx':>4} {'F':<17} {'blocks':>6} {'SMs busy':>8} {'waves':>5} {'HBM MB':>7} "
      f"{'L2 MB':>6} {'memory µs':>9} {'compute µs':>10} {'launch µs':>9} {'latency µs':>10}"
      "   (modeled)")
for gx, envs in sorted(by_grid.items()):
    (k,) = modeled(substitute_graph(family, envs[0]), device).kernels
    loops = ",".join(str(env.get("F", 1)) for env in envs)
    print(f"{gx:>4} {loops:<17} {k.blocks:>6} {min(1, k.blocks / device.sm_count):>8.0%} "
          f"{k.waves:>5} {k.hbm_bytes / 1e6:>7.2f} {k.l2_bytes / 1e6:>6.2f} {k.memory_us:>9.3f} "
          f"{k.compute_us:>10.4f} {device.launch_us:>9.1f} {k.latency_us:>10.3f}")

# %% [markdown]
# Read the `memory µs` column from the top. Doubling the grid halves the time as long as SMs sit
# idle: twice the blocks stream twice the bandwidth. Once there are more blocks than SMs, every
# SM is already busy, so more blocks only add L2 re-reads of `X`, and the latency goes back up.
# The best grid is near the SM count: enough blocks to keep nearly every SM streaming, and no
# more re-reads of `X` than that needs. `waves` stays 1, since even the largest grid fits in one
# round of resident blocks. Compute
# is a few percent of memory time on every row, so this kernel is memory bound like its program.
# The launch is a fixed floor under every row. It is why the roofline, with one launch of
# its own, is so far above the bytes alone.
#
# Now the loop range at the winner's grid size. Each member moves the same bytes, in `F` smaller
# tiles instead of fewer larger ones:

# %%
gx = dict(best.config.params)["gx"]
print(f"{'member':<22} {'latency µs':>10} {'compute µs':>10}   (modeled)")
for env in by_grid[gx]:
    cost = modeled(substitute_graph(family, env), device)
    print(f"{env!s:<22} {cost.latency_us:>10.3f} {cost.kernels[0].compute_us:>10.4f}")

# %% [markdown]
# The model cannot tell these members apart. It charges bytes and FLOPs, and the loop range
# changes neither (only a little arithmetic in the accumulators). A real GPU pays a small cost
# for every loop iteration and overlaps loads with compute across them, and the model sees
# neither effect. This is why the tuner keeps several finalists rather than one, and why a GPU
# has the last word.
#
# ## 5. Best so far: the running minimum
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
print(f"{'measurement':>11}  {'configuration':<22} {'latency µs':>10} {'best so far µs':>14}"
      "   (modeled)")
previous = math.inf
for point, low in zip(points, curve, strict=True):
    if low < previous:
        print(f"{point.n:>11}  {point.config:<22} {point.latency_us:>10.2f} {low:>14.2f}")
    previous = low
print(f"after {len(points)} modeled measurements the best is {curve[-1]:.2f} µs modeled "
      f"({state.best('modeled').config})")

# %% [markdown]
# ## 6. The finalists, run for real in the interpreter
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
          "it; section 8 measures the finalists on the GPU instead.")

# %% [markdown]
# The `interpreted µs` column times numpy running one tile at a time on this CPU. It is not a
# GPU latency, large or small. Compare the fastest on this CPU with the model's choice: they
# often differ, and the model's choice stands.
#
# ## 7. The result database: the second run is instant
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
# ## 8. Measured against modeled
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
# ## 9. Exercise: a roofline by hand
#
# Section 1's roofline was at the paper's shapes. Work it out by hand at the search's small
# shapes, `SEARCH_SHAPES`, on the A100 (`TABLE["a100"]`): the bytes of `X` and `W` read once and
# of the output written once (`BYTES_PER_ELEMENT` each), the FLOPs of the matmul (2 per
# multiply-add; the RMS adds a few more, too few to matter here), then the larger of the two
# times plus one launch. Write it as `my_roofline_us`. The check compares it with the engine's
# `roofline_us`.

# %%
my_roofline_us = None       # your answer, in µs

# %% jupyter={"source_hidden":true}
if SHOW_SOLUTIONS:
    (n, d), (_, m) = SEARCH_SHAPES["X"], SEARCH_SHAPES["W"]
    a100 = TABLE["a100"]
    traffic = BYTES_PER_ELEMENT * (n * d + d * m + n * m)
    my_roofline_us = max(traffic / (a100.mem_bw_gbps * 1e3),
                         2 * n * d * m / (a100.fp16_tflops * 1e6)) + a100.launch_us


# %%
def check_roofline(latency_us):
    """The oracle: the engine's roofline_us on the program at those shapes."""
    engine = roofline_us(small.graph, TABLE["a100"])
    assert abs(latency_us - engine) <= 1e-3, f"{latency_us:.4f} µs, the engine says {engine:.4f}"
    return engine


if my_roofline_us is None:
    print("exercise: write my_roofline_us above, or set SHOW_SOLUTIONS = True")
else:
    print(f"exercise passed: {my_roofline_us:.4f} µs by hand, {check_roofline(my_roofline_us):.4f} "
          "µs by roofline_us (modeled)")

# %% [markdown]
# ## What to remember
#
# - The **roofline** is bytes ÷ bandwidth or FLOPs ÷ peak, whichever is larger, plus one launch.
#   Programs like this one do single-digit FLOPs per byte (section 1 prints the figure), far
#   below the 150–300 a GPU's fp16 peak needs, so they are memory bound on every GPU in the
#   table.
# - The cost model **screens** every configuration in microseconds. Its breakdown says why a grid
#   size wins: enough blocks to keep every SM busy, and no more, since each extra block re-reads
#   the replicated tensor from L2. Where it cannot tell members apart (the loop range here),
#   the finalists are measured.
# - **Finalists** run for real. The interpreter proves them correct, but its `interpreted` wall
#   times are CPU times and rank nothing. A GPU gives `measured` times, and the `ResultDB` keeps
#   every measurement under a key of everything that could change it, so a second run is
#   instant.
