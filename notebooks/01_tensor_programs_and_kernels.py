# %% [markdown]
# # 01 · Tensor programs and kernels
#
# A GPU runs a program as a sequence of **kernels**. Each kernel launches a *grid* of **thread
# blocks**. Every block reads its inputs from device memory (HBM, large and slow), computes in
# on-chip memory (shared memory and registers, small and fast), and writes its results back. Two
# costs follow. Each launch has a fixed overhead, and every tensor that one kernel writes and the
# next reads makes a round trip through HBM.
#
# Prism describes a program at the same two levels, as Mirage did:
#
# - a **kernel graph**: a graph of kernels over device tensors;
# - a **block graph** for each *custom* kernel: what one thread block does, with which tile of
#   each tensor.
#
# This notebook builds the RMSNorm + MatMul program at both levels by hand. It runs both versions
# in the reference interpreter, the oracle that every other part of the project is tested against,
# and then asks the cost model what fusing them buys.
#
# If a word is new to you, look it up in the [glossary](GLOSSARY.md).

# %% tags=["parameters"]
SHAPES = {"X": (8, 64), "W": (64, 64)}   # small: the interpreter runs these in float64 numpy
GRID, LOOP = 4, 4                        # the hand-built kernel's grid size and loop range
SWEEP = (1, 2, 4)                        # grid sizes and loop ranges to interpret
DEVICE = "h100"                          # the cost model's device
COST_GRIDS = (8, 16, 32, 64, 128, 256)   # grid sizes to cost at the workload's default shapes
COST_LOOP = 16
SEED = 0
SHOW_SOLUTIONS = False                   # True: run the exercise's solution cell (make test does)

# %% [markdown]
# ## 1. A kernel graph
#
# The builder `prism.Graph` writes a program the way you would on paper. It checks each operator's
# shapes as it is added. In the graph, inputs and outputs are nodes too; every other node is one
# kernel.

# %%
import prism
from _tables import table

b = prism.Graph("unfused")
X = b.input("X", SHAPES["X"])
W = b.input("W", SHAPES["W"])
b.output(b.matmul(b.rms_norm(X), W))
unfused = b.build()



def with_shapes(tensors):
    return ", ".join(f"{t}{[d.value for d in unfused.shape(t)]}" for t in tensors)


table([(op.kind, with_shapes(op.inputs), with_shapes(op.outputs)) for op in unfused.ops],
      ["op", "inputs", "outputs"])
print("kernels:", unfused.num_kernels)
unfused

# %% [markdown]
# `rms_norm(X)` divides each row of `X` by its root mean square, `sqrt(mean(x²))`, taken over
# that row. Its output, the tensor `rms_norm` above, is a full-size intermediate. The first kernel
# writes it to HBM and the second reads it back.
#
# ## 2. A custom kernel: the block graph
#
# To fuse the two kernels we write the block graph ourselves. This is the kernel a GPU programmer
# would write, and notebook `02` finds it among the search's candidates. Its parts are:
#
# - `prism.Block(grid=(GRID,), forloop_range=LOOP)`: the kernel runs `GRID` blocks in parallel.
#   Each block runs a loop of `LOOP` iterations.
# - `tb.input(T, imap=..., fmap=...)` loads a **tile** of device tensor `T`. The **imap** says,
#   for each grid dim, which data dim of `T` the blocks split between them. `-1` means none: every
#   block sees the whole dim, and the tensor is *replicated*. The **fmap** says which data dim the
#   loop walks through, one slice per iteration.
# - Operators on tiles run inside the loop body. An **accumulator** closes the loop: `nored` sums
#   a tile over the iterations, and `red_ld_rms` accumulates the root mean square of each row.
#   Operators on accumulated values run once per block, after the loop.
# - `tb.output(y, omap=...)` stores a tile. The **omap** says along which data dim of the output
#   the blocks' tiles are placed side by side. A grid dim that maps to none would *sum* them.
#
# Here, `X` is replicated, so every block sees all of its rows. `W` is split by columns over the
# grid, and both walk the shared dim `d` in the loop. Each block therefore computes `X @ W` for
# its own columns, and `rms(X)` for every row, one slice of `d` at a time. Dividing after the loop
# gives `rms_norm(X) @ W`, because dividing a row of `X` by a number divides the same row of
# `X @ W`. The printed handles show each tile's shape.

# %%
k = prism.Graph("fused")
X = k.input("X", SHAPES["X"])
W = k.input("W", SHAPES["W"])
tb = prism.Block(grid=(GRID,), forloop_range=LOOP)
x = tb.input(X, imap=(-1,), fmap=1)       # replicated over the grid; the loop walks its dim 1
w = tb.input(W, imap=(1,), fmap=0)        # columns split over the grid; the loop walks its rows
xw = tb.accum(tb.matmul(x, w), "nored")   # Σ over iterations of x @ w: this block's X @ W
rms = tb.accum(x, "red_ld_rms")           # the root mean square of each row of X
y = tb.div(xw, rms)
tb.output(y, omap=(1,))                   # blocks side by side along the output's columns
(out,) = k.customized(tb)
k.output(out)
fused = k.build()

for handle in (x, w, xw, rms, y):
    print(handle)
print("kernels:", fused.num_kernels)
fused

# %% [markdown]
# In the picture, the dashed cluster is the block graph. Its label gives the grid and the loop
# range, each input shows its imap, fmap and tile shape, and the output shows its omap. The
# accumulators (shaded pink) are where the loop ends. Nothing between the loads and the store goes
# to device memory.
#
# ## 3. The reference interpreter
#
# Is the fused kernel right? `prism.interpret` runs any kernel graph in float64 numpy. For a custom
# kernel it follows the block graph literally. It runs every block of the grid, slices each input
# as its imap and fmap say, steps through the loop, accumulates, and assembles the output as the
# omap says. It knows nothing about what the kernel is *meant* to compute, which is what makes it
# an oracle.
#
# We run both programs on the same random inputs and compare each with PyTorch's own `rms_norm`
# and `@` (the workload's reference function, in float64). Look at the error column: float64
# rounding leaves errors many orders of magnitude below anything that matters.

# %%
from prism.check import max_rel_err

workload = prism.get_workload("rmsnorm_matmul").with_shapes(**SHAPES)
arrays = workload.random_inputs(SEED)
expected = workload.reference(*arrays)
for label, graph in ((f"unfused ({unfused.num_kernels} kernels)", unfused),
                     (f"fused (grid {GRID}, loop {LOOP})", fused)):
    err = max_rel_err(prism.interpret(graph, *arrays), expected)
    print(f"{label:<32} max relative error vs torch {err:.1e}")

# %% [markdown]
# ## 3a. The same kernel by hand, in numpy
#
# Nothing in a block graph is magic. Here is the fused kernel again as two plain Python loops in
# float64 numpy: the outer loop is the grid (on a GPU its iterations run in parallel, one per
# block), the inner loop is the block's loop over `d`. Each slice is what a map says: `X` is
# replicated, so every block takes all its rows; the imap of `W` and the omap give each block its
# own columns; the fmaps give each iteration its own slice of `d`. The two accumulators start at
# zero before the inner loop, and the RMS is finished after it. The function also records, for
# every element it reads or writes, which block and which iteration touched it.

# %%
import numpy as np


def fused_by_hand(x_all, w_all, grid, loop):
    """rms_norm(X) @ W computed block by block; also who touched each element: (block, iteration)."""
    rows, d = x_all.shape
    cols, step = w_all.shape[1] // grid, d // loop     # a block's columns; an iteration's slice of d
    out = np.full((rows, w_all.shape[1]), np.nan)
    touched = {"X": np.full((*x_all.shape, 2), -1), "W": np.full((*w_all.shape, 2), -1),
               "out": np.full((*out.shape, 2), -1)}
    for block in range(grid):                          # the grid: one pass per thread block
        c = slice(block * cols, (block + 1) * cols)    # W's imap (1,) and the omap (1,)
        xw = np.zeros((rows, cols))                    # the nored accumulator
        squares = np.zeros((rows, 1))                  # red_ld_rms: the sum of squares so far
        for i in range(loop):                          # the loop: one slice of d per iteration
            s = slice(i * step, (i + 1) * step)        # X's fmap 1 and W's fmap 0
            x, w = x_all[:, s], w_all[s, c]            # X's imap (-1,): every block reads all rows
            xw += x @ w
            squares += (x * x).sum(axis=1, keepdims=True)
            touched["X"][:, s], touched["W"][s, c] = (-1, i), (block, i)   # X: every block
        out[:, c] = xw / np.sqrt(squares / d)          # after the loop: rms, divide, store
        touched["out"][:, c] = (block, loop)
    return out, touched


by_hand, touched = fused_by_hand(*arrays, GRID, LOOP)
hand_vs_interpreter = max_rel_err([by_hand], prism.interpret(fused, *arrays))
assert hand_vs_interpreter < 1e-12, hand_vs_interpreter      # the oracle: the interpreter
print(f"numpy by hand vs prism.interpret: max relative error {hand_vs_interpreter:.1e}")

# %% [markdown]
# The picture colours every element by what touched it. The colour is the block, and the shade
# is the loop iteration, lighter as the loop goes on. `X` is grey because every block reads all
# of it; its shades are the slices of `d`. Each block reads one column strip of `W`, a slice of
# rows per iteration, and writes the same columns of the output once, after its loop (full
# colour).

# %%
from IPython.display import SVG

HUES = (210, 30, 130, 280, 0, 60, 180, 330)            # one hue per block (8 before they repeat)


def shade(block, i):
    """Hue: the block (grey: every block); lightness: the iteration (after the loop: full)."""
    light = 45 if i == LOOP else 30 + 50 * i / max(LOOP - 1, 1)
    return f"hsl({HUES[block % len(HUES)]},{0 if block < 0 else 70}%,{light:.0f}%)"


def tile_picture(who, px=3):
    """An SVG strip of rectangles, one per run of equally touched elements in each row."""
    parts, left = [], 0
    for name, grid in who.items():
        for r, row in enumerate(grid):
            c = 0
            while c < len(row):
                end = c + 1
                while end < len(row) and (row[end] == row[c]).all():
                    end += 1
                parts.append(f'<rect x="{left + c * px}" y="{16 + r * px}" width="{(end - c) * px}" '
                             f'height="{px}" fill="{shade(*row[c])}"/>')
                c = end
        parts.append(f'<text x="{left}" y="12" font-size="11" font-family="sans-serif">{name} '
                     f'{list(grid.shape[:2])}</text>')
        left += grid.shape[1] * px + 24
    height = 20 + max(g.shape[0] for g in who.values()) * px
    return SVG(f'<svg xmlns="http://www.w3.org/2000/svg" width="{left}" height="{height}">'
               + "".join(parts) + "</svg>")


tile_picture(touched)

# %% [markdown]
# The same block graph at other grid sizes and loop ranges splits the work differently: more
# blocks, each with fewer columns, or more iterations, each with a thinner slice of `d`. Every
# choice must give the same answer. `prism.workloads.known_best` builds this same kernel for any
# shapes, grid and loop.

# %%
from prism.workloads.known_best import known_best

table([(grid, loop, max_rel_err(prism.interpret(known_best("rmsnorm_matmul", SHAPES, grid=grid,
                                                            loop=loop), *arrays), expected))
       for grid in SWEEP for loop in SWEEP],
      ["grid", "loop", ("max relative error vs torch", ".1e")])

# %% [markdown]
# An oracle is only useful if it also catches mistakes. Here is a plausible slip: accumulate the
# row *mean* (`red_ld_mean`) where the root mean square belongs. The graph is well formed and
# every shape checks, but the interpreter's answer is far from torch's:

# %%
k = prism.Graph("fused_wrong")
X = k.input("X", SHAPES["X"])
W = k.input("W", SHAPES["W"])
tb = prism.Block(grid=(GRID,), forloop_range=LOOP)
x = tb.input(X, imap=(-1,), fmap=1)
w = tb.input(W, imap=(1,), fmap=0)
tb.output(tb.div(tb.accum(tb.matmul(x, w), "nored"), tb.accum(x, "red_ld_mean")), omap=(1,))
(out,) = k.customized(tb)
k.output(out)
wrong = k.build()
err = max_rel_err(prism.interpret(wrong, *arrays), expected)
print(f"fused with red_ld_mean instead of red_ld_rms: max relative error vs torch {err:.1e}")

# %% [markdown]
# ## 4. Fused vs. unfused: the cost model
#
# Is fusion faster? Without a GPU, Prism answers with an analytic **cost model**. It is simple and
# documented in `prism/cost/model.py`, and every number it gives is labelled `modeled`. It
# charges every kernel launch that Prism's generated code makes. Each launch costs its launch
# overhead plus the larger of two times: the bytes it moves over the bandwidth, and its FLOPs
# over peak compute. A program costs the sum over its launches.
#
# Tiny shapes would tell us little, so this section uses the workload's default shapes, which
# come from Prism's evaluation. The cost model is a formula, so any size is cheap. First the
# device's numbers:

# %%
from prism.cost import eager_us, get_device, modeled, roofline_us

device = get_device(DEVICE)
print(device)
default = prism.get_workload("rmsnorm_matmul")
print("default shapes:", default.shapes)

# %% [markdown]
# Launch by launch, the unfused program and the fused kernel (at `COST_GRIDS[3]` blocks). Compare
# the bytes each moves from HBM, then compare the latency column with the memory and compute
# columns. What is left over is the launch overhead, paid once per launch. Count the unfused
# program's rows: its two kernel ops are more than two launches, because the generated code runs
# the library's `rms_norm` in three steps (`norm`: the rows' norms with `vector_norm`, `scale`:
# those norms scaled to the root mean square with `mul_`, `divide`: the division), then the
# matmul.

# %%
programs = {"unfused": default.graph,
            "fused": known_best("rmsnorm_matmul", default.shapes, grid=COST_GRIDS[3],
                                loop=COST_LOOP)}
costs = {name: modeled(graph, device) for name, graph in programs.items()}
table([(name, f"{kc.kind}:{kc.step}" if kc.step else kc.kind, kc.blocks or None, kc.hbm_bytes,
        kc.l2_bytes, kc.flops, kc.memory_us, kc.compute_us, kc.latency_us)
       for name, cost in costs.items() for kc in cost.kernels],
      ["program", "launch", "blocks", "HBM bytes", "L2 bytes", "FLOPs", ("memory µs", ".3f"),
       ("compute µs", ".4f"), ("latency µs", ".2f")], note="modeled")
for name, cost in costs.items():
    print(f"{name} total: {cost}")
print(f"eager baseline {eager_us(default.graph, device):.2f} µs modeled; "
      f"roofline {roofline_us(default.graph, device):.2f} µs modeled")

# %% [markdown]
# The eager baseline is PyTorch run one library kernel per operator. It is modeled the same way,
# but with `torch.nn.functional.rms_norm` as one launch, which is why it costs less than the
# unfused row: launches, not bytes, dominate at these sizes.
#
# The fused kernel reads `X` once per block: it is replicated. The L2 column counts those extra
# reads, which come from the on-chip L2 cache rather than HBM. That is the price of fusion here:
# more blocks mean more copies of `X`. Fewer blocks mean idle streaming multiprocessors (SMs),
# since this GPU has `sm_count` of them, printed above. The grid size is a real trade-off.
#
# The table below sweeps it. A `W` tile is the slice of `W` one block multiplies, and its width
# is the output columns per block. Tensor-core matmuls need tiles of at least a minimum width,
# printed first (a field of the same device value, `DeviceSpec.min_matmul_tile`), so the search
# rejects members whose split tiles are narrower (its *hardware* rule; notebook `02` shows the
# check on a symbolic graph). The cost model alone does not know this rule, so it prices every
# row; the last column is the rule's own verdict on each member (`check_hardware`), and a
# rejected row's latency is one no search would ever report.

# %%
from prism.search.hardware import check_hardware

print(f"smallest matmul tile the search allows on {device.name}: {device.min_matmul_tile}")
rows = []
for grid in COST_GRIDS:
    member = known_best("rmsnorm_matmul", default.shapes, grid=grid, loop=COST_LOOP)
    ((_, block),) = member.iter_blocks()
    cost = modeled(member, device)
    rule = check_hardware(member, device)
    rows.append((grid, cost.kernels[0].blocks, str([d.value for d in block.shape(block.inputs[1])]),
                 cost.latency_us, "fits" if rule.feasible else f"rejected: {rule.core[0]}"))
table(rows, ["grid", "blocks", "W tile", ("latency µs", ".2f"), "hardware rule"],
      note=f"modeled; eager {eager_us(default.graph, device):.2f} µs modeled")

# %% [markdown]
# A fused kernel is not fast by being fused. At too few blocks it can cost *more* than the two
# library kernels; compare the first rows with the eager figure in the header. Which grid,
# which loop range, and which maps are the questions the superoptimizer answers, for every shape.
# Here is the same comparison at each of the shape sets Prism evaluated, with the kernel at
# `known_best`'s default grid and loop (printed in the table):

# %%
rows = []
for shapes in default.shape_sets:
    w = default.with_shapes(**shapes)
    member = known_best("rmsnorm_matmul", w.shapes)
    ((_, block),) = member.iter_blocks()
    rows.append((" ".join(f"{p}{list(s)}" for p, s in shapes.items()), block.grid[0].value,
                 block.forloop_range.value, eager_us(w.graph, device),
                 modeled(member, device).latency_us, roofline_us(w.graph, device)))
table(rows, ["shapes", "grid", "loop", ("eager µs", ".2f"), ("fused µs", ".2f"),
             ("roofline µs", ".2f")], note="all modeled")

# %% [markdown]
# ## 5. Exercise: let the grid split `d`
#
# Our fused kernel splits `W` by columns. Another classic layout splits the shared dim `d` over
# the grid instead: each block multiplies its own slice of `d` (of `X`'s columns and of `W`'s
# rows) and writes a full-size partial product, and an omap of `(-1,)` sums the blocks' outputs.
# One catch: the RMS needs *whole* rows, so the block loads `X` a second time, replicated, just for
# the `red_ld_rms` accumulator. Dividing each partial product by the whole row's RMS before the
# sum is fine, since dividing every part of a sum divides the sum.
#
# Build that kernel as `split_d` with `prism.Graph` and `prism.Block(grid=(GRID,),
# forloop_range=LOOP)`, as in section 2. The check below runs it in the interpreter and compares
# it with torch's answer (`expected`), and checks that `W`'s imap splits its rows and that the
# omap sums. Set `SHOW_SOLUTIONS = True` in the parameters cell to run the solution instead.

# %%
split_d = None      # your kernel graph here

# %% jupyter={"source_hidden":true}
if SHOW_SOLUTIONS:
    k = prism.Graph("split_d")
    X = k.input("X", SHAPES["X"])
    W = k.input("W", SHAPES["W"])
    tb = prism.Block(grid=(GRID,), forloop_range=LOOP)
    x_part = tb.input(X, imap=(1,), fmap=1)      # the grid splits d, and the loop splits it again
    x_rows = tb.input(X, imap=(-1,), fmap=1)     # whole rows, for the RMS
    w = tb.input(W, imap=(0,), fmap=0)           # the grid splits W's rows: the same slices of d
    partial = tb.accum(tb.matmul(x_part, w), "nored")
    tb.output(tb.div(partial, tb.accum(x_rows, "red_ld_rms")), omap=(-1,))   # blocks summed
    (out,) = k.customized(tb)
    k.output(out)
    split_d = k.build()


# %%
def check_split_d(graph):
    """The oracle is torch's float64 answer (`expected`), not another kernel of ours."""
    ((kernel_op, block),) = graph.iter_blocks()
    loads = [op.attr for op in block.ops if op.kind == "input"]
    (store,) = (op.attr for op in block.ops if op.kind == "output")
    w_imaps = {str(a["imap"]) for src, a in zip(kernel_op.inputs, loads, strict=True) if src == "W"}
    assert w_imaps == {"(0)"}, f"W's imaps are {w_imaps}: the grid should split W's rows (d)"
    assert str(store["omap"]) == "(-)", f"the omap {store['omap']} does not sum the blocks"
    err = max_rel_err(prism.interpret(graph, *arrays), expected)
    assert err < 1e-9, f"max relative error vs torch {err:.1e}"
    return err


if split_d is None:
    print("exercise: write split_d above, or set SHOW_SOLUTIONS = True")
else:
    print(f"exercise passed: split_d, max relative error vs torch {check_split_d(split_d):.1e}")

# %% [markdown]
# ## What to remember
#
# - A kernel graph says *which* kernels run. A block graph says *how* one custom kernel splits its
#   work: its grid, its loop, and the imap, fmap and omap that tie tiles to tensors.
# - The interpreter runs any of them exactly. It is the oracle: a kernel is right if it agrees
#   with the interpreter and with torch, and the interpreter caught the wrong accumulator.
# - Fusion saves launches and HBM round trips, but the grid and loop decide whether it pays.
#   Notebook `02` keeps them as *symbols*: one graph for every choice at once.
