# %% [markdown]
# # 06 · The roofline and the cost model: what a kernel could cost, and why one grid size wins
#
# The search of notebooks `02` and `03` ends with a handful of *verified sGraphs*: fused kernels
# proved equal to the program, with their grid sizes and loop ranges still symbols. Every choice
# of those numbers is a correct kernel, so the only question left is speed, and Prism answers it
# first with a formula: the **cost model**, which charges a kernel for the bytes it moves, the
# arithmetic it does and its launch.
#
# This notebook has one idea: **a latency you can explain**. It starts with the number no kernel
# can beat, the **roofline bound**, on three GPUs; then it costs every member of the fused
# kernel's sGraph and reads the model's breakdown to see *why* one grid size wins, and what the
# model cannot tell apart. Notebook `06b` uses the model to tune: it screens every
# configuration, runs the finalists and caches what it measured. Every latency here is
# `modeled`.
#
# If a word is new to you, look it up in the [glossary](GLOSSARY.md).

# %% tags=["parameters"]
WORKLOAD = "rmsnorm_matmul"
PAPER_SHAPES = {"X": (8, 4096), "W": (4096, 4096)}    # one of Prism's shape sets
SMALL_SHAPES = {"X": (8, 64), "W": (64, 64)}          # the exercise's shapes
DEVICE = "h100"                                       # the breakdown's device
DEVICES = ("a100", "h100", "h200")                    # the roofline on each
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
# shape sets, with `W` a 4096 × 4096 matrix. The last line divides one by the other: the
# program's *arithmetic intensity*, in FLOPs per byte.

# %%
import math

import prism
from _tables import table
from prism.cost import BYTES_PER_ELEMENT, DEVICES as TABLE, eager_us, full_size_flops, roofline_us

paper = prism.get_workload(WORKLOAD).with_shapes(**PAPER_SHAPES)
graph = paper.graph
sizes = {t: [d.value for d in graph.shape(t)] for t in (*graph.inputs, *graph.outputs)}
moved = {t: BYTES_PER_ELEMENT * math.prod(shape) for t, shape in sizes.items()}
total = sum(moved.values())
flops = full_size_flops(graph)
intensity = flops / total
print(paper, "·", paper.program)
table([(t, str(shape), moved[t] / 1e6, "read once" if t in graph.inputs else "written once")
       for t, shape in sizes.items()], ["tensor", "shape", ("MB", ".3f"), "traffic"])
print(f"minimum traffic {total / 1e6:.3f} MB, {flops / 1e6:.1f} MFLOP at full size: "
      f"{intensity:.2f} FLOP per byte")

# %% [markdown]
# Now the same program on each device in the cost model's table. The **ridge point** is
# peak ÷ bandwidth: the FLOPs per byte a program needs before compute, not memory, limits it.
# Compare the program's intensity, printed above, with the ridge column: it is far below every
# ridge, so the program is *memory bound*. Its roofline is the time to stream `W` once, plus a
# launch. Compare the H100 and H200 rows: the same chip with faster memory, and the bound falls
# with the bandwidth.
#
# The `memory µs` and `compute µs` columns are computed in this cell from the numbers above. The
# `roofline µs` column is the engine's own `roofline_us`, so they can be checked against each
# other: roofline = max(memory, compute) + launch. The last column is **eager**: PyTorch's two
# kernels, modeled the same way. The first writes `rms_norm(X)` to HBM and the second reads it
# back, and there are two launches.

# %%
rows = []
for name in DEVICES:
    spec = TABLE[name]
    rows.append((name, spec.mem_bw_gbps, spec.fp16_tflops,
                 spec.fp16_tflops * 1e3 / spec.mem_bw_gbps,
                 total / (spec.mem_bw_gbps * 1e3),        # bytes / (GB/s) = ns; / 1e3 = µs
                 flops / (spec.fp16_tflops * 1e6),        # flops / (TFLOP/s) = ps; / 1e6 = µs
                 spec.launch_us, roofline_us(graph, spec), eager_us(graph, spec)))
table(rows, ["device", ("HBM GB/s", ".0f"), ("TFLOP/s", ".0f"), ("ridge FLOP/B", ".0f"),
             ("memory µs", ".3f"), ("compute µs", ".4f"), ("launch µs", ".1f"),
             ("roofline µs", ".3f"), ("eager µs", ".3f")], note="modeled")
ridges = {name: TABLE[name].fp16_tflops * 1e3 / TABLE[name].mem_bw_gbps for name in DEVICES}
print(f"intensity {intensity:.2f} FLOP/B; the lowest ridge {min(ridges.values()):.0f} FLOP/B "
      f"({min(ridges, key=ridges.get)}): {min(ridges.values()) / intensity:.0f}× higher")

# %% [markdown]
# A tuned fused kernel should land between the roofline and eager columns, as close to the
# roofline as it can. How close depends on its grid size and loop range.
#
# ## 2. Why this grid size: the model's breakdown
#
# Take the fused kernel of notebook `01` as an sGraph (`prism.workloads.known_best` with the grid
# size `gx` and the loop range `F` left symbolic), at the paper's shapes, and cost each of its
# members. The kernel keeps `X` whole in every block (it is *replicated*) and splits `W` by
# columns over the grid. The model charges each part of the work (see `prism/cost/model.py`):
#
# - **HBM bytes**: every tensor once. This is the same for every member.
# - **L2 bytes**: the replicated `X` is read again by every extra block. Those copies come from
#   the L2 cache, which is faster than HBM but not free. This grows with the grid.
# - **SMs busy**: a GPU has `sm_count` streaming multiprocessors. With fewer blocks than SMs,
#   some sit idle, and memory time is divided by the busy fraction. **waves** counts rounds of
#   resident blocks (`max_blocks_per_sm` fit on one SM at once).
# - **launch**: a fixed few microseconds per kernel, whatever it does.
#
# The table lists every feasible member (`prism.instantiate.params.assignments`), one row per
# grid size; the members at one grid size differ only in `F`, and the `F` column lists them.

# %%
from prism.cost import get_device, modeled
from prism.instantiate.params import assignments
from prism.ir.spec import substitute_graph
from prism.workloads.known_best import known_best

device = get_device(DEVICE)
family = known_best(WORKLOAD, PAPER_SHAPES, grid="gx", loop="F")   # sizes symbolic
by_grid: dict[int, list[dict[str, int]]] = {}
for env in assignments(family, limit=1000):
    by_grid.setdefault(env["gx"], []).append(env)
print(f"the fused kernel's sGraph: {sum(map(len, by_grid.values()))} members; "
      f"{device.name} has {device.sm_count} SMs")
rows, latency = [], {}
for gx, envs in sorted(by_grid.items()):
    (k,) = modeled(substitute_graph(family, envs[0]), device).kernels
    latency[gx] = k.latency_us
    rows.append((gx, ",".join(str(env.get("F", 1)) for env in envs), k.blocks,
                 min(1, k.blocks / device.sm_count), k.waves, k.hbm_bytes / 1e6,
                 k.l2_bytes / 1e6, k.memory_us, k.compute_us, device.launch_us, k.latency_us))
table(rows, ["gx", "F", "blocks", ("SMs busy", ".0%"), "waves", ("HBM MB", ".2f"),
             ("L2 MB", ".2f"), ("memory µs", ".3f"), ("compute µs", ".4f"),
             ("launch µs", ".1f"), ("latency µs", ".3f")], note="modeled")
best_gx = min(latency, key=latency.get)
print(f"best grid size: gx = {best_gx}, {latency[best_gx]:.3f} µs modeled, "
      f"{latency[best_gx] / roofline_us(graph, device):.2f}× the roofline bound")

# %% [markdown]
# Read the `memory µs` column from the top. Doubling the grid halves the time as long as SMs sit
# idle: twice the blocks stream twice the bandwidth. Once there are more blocks than SMs, every
# SM is already busy, so more blocks only add L2 re-reads of `X`, and the latency goes back up.
# The best grid is near the SM count: enough blocks to keep nearly every SM streaming, and no
# more re-reads of `X` than that needs. `waves` stays 1, since even the largest grid fits in one
# round of resident blocks. Compute is a few percent of memory time on every row, so this kernel
# is memory bound like its program. The launch is a fixed floor under every row, and it is why
# the roofline, with one launch of its own, is so far above the bytes alone.
#
# ## 3. What the model cannot tell apart
#
# Now the loop range at the best grid size. Each member moves the same bytes, in `F` smaller
# tiles instead of fewer larger ones:

# %%
members = [(str(env), modeled(substitute_graph(family, env), device).latency_us,
            modeled(substitute_graph(family, env), device).kernels[0].compute_us)
           for env in by_grid[best_gx]]
table(members, ["member", ("latency µs", ".3f"), ("compute µs", ".4f")], note="modeled")
print(f"{len(members)} members at gx = {best_gx}, "
      f"{len({round(us, 9) for _, us, _ in members})} distinct latency")

# %% [markdown]
# The model cannot tell these members apart. It charges bytes and FLOPs, and the loop range
# changes neither (only a little arithmetic in the accumulators). A real GPU pays a small cost
# for every loop iteration and overlaps loads with compute across them, and the model sees
# neither effect. This is why the tuner of notebook `06b` keeps several finalists rather than
# one, and why a GPU has the last word.
#
# ## 4. Exercise: a roofline by hand
#
# Section 1's roofline was at the paper's shapes. Work it out by hand at small shapes,
# `SMALL_SHAPES`, on the A100 (`TABLE["a100"]`): the bytes of `X` and `W` read once and of the
# output written once (`BYTES_PER_ELEMENT` each), the FLOPs of the matmul (2 per multiply-add;
# the RMS adds a few more, too few to matter here), then the larger of the two times plus one
# launch. Write it as `my_roofline_us`. The check compares it with the engine's `roofline_us`.

# %%
my_roofline_us = None       # your answer, in µs

# %% jupyter={"source_hidden":true}
if SHOW_SOLUTIONS:
    (n, d), (_, m) = SMALL_SHAPES["X"], SMALL_SHAPES["W"]
    a100 = TABLE["a100"]
    traffic = BYTES_PER_ELEMENT * (n * d + d * m + n * m)
    my_roofline_us = max(traffic / (a100.mem_bw_gbps * 1e3),
                         2 * n * d * m / (a100.fp16_tflops * 1e6)) + a100.launch_us


# %%
small = prism.get_workload(WORKLOAD).with_shapes(**SMALL_SHAPES)


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
#   This program does single-digit FLOPs per byte (section 1 prints the figure and how far below
#   the lowest ridge it is), so it is memory bound on every GPU in the table.
# - The cost model's breakdown says why a grid size wins: enough blocks to keep every SM busy,
#   and no more, since each extra block re-reads the replicated tensor from L2.
# - Where the model charges the same bytes and FLOPs (the loop range here), it cannot choose;
#   the tuner measures finalists instead (notebook `06b`).
