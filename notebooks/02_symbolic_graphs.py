# %% [markdown]
# # 02 · Symbolic graphs: one sGraph, many kernels
#
# In notebook `01` the fused kernel had a fixed grid size and loop range. Change either number
# and you get another kernel. It has the same structure, computes the same function,
# and is correct for the same reason, but it runs at a different speed. A search that treated every
# number as a new program would build, check and prove the same idea over and over.
#
# Prism keeps those numbers as **symbols**. A *symbolic graph* (**sGraph**) is a kernel graph whose
# block graphs leave three things open:
#
# - the **grid sizes** (`gx`, and `gy`, `gz` for more grid dims);
# - the **loop range** (`F`);
# - every **map** entry, as a 0/1 variable meaning "this parallel dim splits this data dim".
#
# Tile shapes then become *dimension expressions* in those symbols. One sGraph stands for a whole
# family of concrete kernels. The search generates, prunes and proves sGraphs, and it picks numbers
# only at the end. This notebook builds one sGraph by hand, looks inside it, and instantiates it.
#
# If a word is new to you, look it up in the [glossary](GLOSSARY.md).

# %% tags=["parameters"]
SHAPES = {"X": (8, 64), "W": (64, 64)}
ASSIGNMENTS = ({"gx": 4, "F": 2}, {"gx": 2, "F": 4})   # two members to look at closely
TOO_BIG = {"gx": 64, "F": 64}                           # a member that breaks a device limit
DEVICE = "h100"
SEARCH = {"grid_dims": (1,), "max_block_ops": 4, "block_ops": ("matmul", "div", "rms_norm"),
          "accumulators": ("nored", "red_ld_rms"), "budget_s": 120}
SEED = 0
SHOW_SOLUTIONS = False                                  # True: run the exercise's solution

# %% [markdown]
# ## 1. Symbolic sizes
#
# This is the fused RMSNorm + MatMul kernel of `01`, except that the grid size and the loop range
# are names instead of numbers. The builder accepts a name wherever it takes a size. Look at the
# printed tile shapes: a dim that the grid splits is divided by `gx`, and one that the loop walks
# is divided by `F`.

# %%
import prism
from _tables import table

k = prism.Graph("fused_symbolic")
X = k.input("X", SHAPES["X"])
W = k.input("W", SHAPES["W"])
tb = prism.Block(grid=("gx",), forloop_range="F")
x = tb.input(X, imap=(-1,), fmap=1)
w = tb.input(W, imap=(1,), fmap=0)
y = tb.div(tb.accum(tb.matmul(x, w), "nored"), tb.accum(x, "red_ld_rms"))
tb.output(y, omap=(1,))
(out,) = k.customized(tb)
k.output(out)
sgraph = k.build()

for handle in (x, w, y):
    print(handle)
print("free variables:", sorted(sgraph.free_vars()))
sgraph

# %% [markdown]
# ## 2. Symbolic maps
#
# The search does not know the maps in advance either. Ask the builder for a `"symbolic"` imap and
# every entry becomes a 0/1 variable, named `<tile>_im_d<data dim>_p<parallel dim>`. Data dim `d`
# of a tensor is then cut into `(1 - m + m·gx)` parts: one part if `m = 0` (replicated) and `gx`
# parts if `m = 1` (split). The printed tile shape is that rule, written out for both dims of `W`:

# %%
from prism.ir.dims import evaluate

fam = prism.Graph("family")
W_ = fam.input("W", SHAPES["W"])
w_sym = prism.Block(grid=("gx",)).input(W_, imap="symbolic")
print(w_sym)

# %% [markdown]
# Each choice of the bits is one concrete map. The table evaluates the expression at one grid
# size. The row with both bits set splits two data dims along the same grid dim, which the sGraph
# constraints forbid: a parallel dim splits at most one data dim of a tensor.

# %%
bits = sorted(n for d in w_sym.shape for n in d.free_vars() if n != "gx")
GX = ASSIGNMENTS[0]["gx"]
table([(b0, b1, str([evaluate(d, {bits[0]: b0, bits[1]: b1, "gx": GX}) for d in w_sym.shape]))
       for b0 in (0, 1) for b1 in (0, 1)], [*bits, f"W tile at gx={GX}"])

# %% [markdown]
# Together with `fmap` bits, which work the same way with `F`, the search's families carry
# expressions like these for every tile. *Map instantiation* then enumerates the 0/1 values that
# agree with the shapes the family needs, and each result is a **candidate**: concrete maps,
# symbolic sizes. Our hand-built `sgraph` is such a candidate.
#
# ## 3. One proof for every member
#
# The verifier proves `sgraph` equivalent to the unfused program while `gx` and `F` stay symbols.
# Read the last printed field: `sizes` says whether the proof holds for every grid size and loop
# range (`symbolic`) or only for one instance (`concrete`).

# %%
from prism.verify.equiv import verify

workload = prism.get_workload("rmsnorm_matmul").with_shapes(**SHAPES)
verdict = verify(workload.graph, sgraph)
print(f"{verdict.verdict} by {verdict.method}: {verdict.proof_steps} steps, sizes {verdict.sizes}")

# %% [markdown]
# ## 4. Instantiation: many kernels
#
# Which numbers may `gx` and `F` take? `prism.instantiate.params` follows Prism's auto-tuner. Each
# variable gets candidate values that divide the dims it splits. Then every combination is kept
# only if every tile divides evenly and the kernel fits the device: the number of blocks, the
# shared memory, and the smallest matmul tile. The table lists the members that survive. For each
# one it shows the block count, the tiles, the cost model's latency, and the interpreter's error
# against torch. The error column shows that every member computes the same function, which is
# what the symbolic proof promised.

# %%
from prism.check import max_rel_err
from prism.cost import get_device, modeled
from prism.instantiate.params import assignments, variables
from prism.ir.spec import substitute_graph

device = get_device(DEVICE)
for v in variables(sgraph):
    print(f"{v.name} ({v.role}): candidates {v.candidates()}")
members = assignments(sgraph)
print(f"{len(members)} feasible members\n")

arrays = workload.random_inputs(SEED)
expected = workload.reference(*arrays)
rows = []
for env in members:
    member = substitute_graph(sgraph, env)
    ((_, block),) = member.iter_blocks()
    tiles = [str([d.value for d in block.shape(t)]) for t in block.inputs]
    rows.append((str(env), modeled(member, device).kernels[0].blocks, *tiles,
                 modeled(member, device).latency_us,
                 max_rel_err(prism.interpret(sgraph, *arrays, assignment=env), expected)))
table(rows, ["assignment", "blocks", "X tile", "W tile", ("latency µs", ".2f"),
             ("error vs torch", ".1e")], note="latency modeled")

# %% [markdown]
# ## 5. Two members up close
#
# `widgets.sgraph.SGraphState` is the model behind the sGraph widget. At an assignment it
# evaluates every tile expression and names the first device limit that fails, if any. These are
# the two members chosen in the parameters cell, tile by tile:

# %%
from widgets.sgraph import SGraphState

state = SGraphState(sgraph)
kernel = state.custom[0]
for env in ASSIGNMENTS:
    inst = state.at(env)
    print(f"assignment {env}: {inst.verdict}")
    for tensor in kernel.tensors:
        tile = list(inst.kernels[0].tiles[tensor.name])
        print(f"  {tensor.name:<12} [{', '.join(tensor.shape)}] → {tile}")

# %% [markdown]
# Not every member fits. Push the grid and the loop to their largest candidates and the tiles
# become too thin for a tensor-core matmul. The state names the limit, and z3 (the search's
# *hardware* rule) can still say whether *some* assignment fits:

# %%
print(f"assignment {TOO_BIG}: {state.at(TOO_BIG).verdict}")
print("is any member feasible?", state.hardware().reason)

# %% [markdown]
# ## 6. The same sGraph at the paper's shapes
#
# The sGraph does not change with the data; only the set of good numbers does.
# `known_best(..., grid="gx", loop="F")` builds this same sGraph at any shapes. At the workload's
# default shapes there are many more members, and the cost model ranks them. Compare the fastest
# with notebook `01`'s grid sweep. A grid the sweep liked may be missing here because it breaks
# the matmul tile limit, and the check below names it.

# %%
from prism.workloads.known_best import known_best

default = prism.get_workload("rmsnorm_matmul")
big = known_best("rmsnorm_matmul", default.shapes, grid="gx", loop="F")
ranked = sorted(assignments(big, limit=1000),
                key=lambda env: modeled(substitute_graph(big, env), device).latency_us)
print(f"{len(ranked)} feasible members at {default.shapes}; the five fastest:")
for env in ranked[:5]:
    print(f"  {env!s:<22} {modeled(substitute_graph(big, env), device)}")
widest = {"gx": max(variables(big)[0].candidates()), "F": ranked[0]["F"]}
print(f"\n{widest}: {SGraphState(big).at(widest).verdict}")

# %% [markdown]
# ## 7. Instantiation with a slider
#
# The sGraph widget puts all of this in one view: the picture, the block graph's ops, tensors and
# map matrices, and a selector for each size variable. Pick values and the tile table and the
# feasibility line update. The tensor selector shows each tensor's *abstract expression*, the
# coarse formula the search uses to prune families that can never be completed (see `00`'s
# pruning counts).

# %%
from widgets.sgraph import SGraphView

SGraphView(sgraph)

# %% [markdown]
# Or drive it yourself: a slider over the grid size's candidates (the loop range held at the first
# assignment's), printing the tile shapes `SGraphState.at` gives.

# %%
import ipywidgets

F = ASSIGNMENTS[0]["F"]


def show_tiles(gx):
    inst = state.at({"gx": gx, "F": F})
    print(f"gx={gx}, F={F}: {inst.verdict}; {inst.kernels[0].blocks} blocks")
    for name, tile in inst.kernels[0].tiles.items():
        print(f"  {name:<12} {list(tile)}")


ipywidgets.interactive(show_tiles, gx=ipywidgets.SelectionSlider(
    options=variables(sgraph)[0].candidates(), value=ASSIGNMENTS[0]["gx"]))

# %% [markdown]
# ## 8. Where sGraphs come from
#
# The search builds sGraphs like ours operator by operator. It prunes families whose expressions
# cannot lead to the target or that cannot fit the device, instantiates the maps of each complete
# family, and proves every candidate with its sizes symbolic. Each row below is one verified
# candidate: its block ops, its maps, its free size variables, and the modeled latency of the one
# member that z3 found feasible (tuning tries the others later). Rows with the same maps can come
# from different families: compare their block ops. Maps of `(-)` everywhere split nothing, so
# that candidate has no free sizes: it stands for exactly one kernel. One row has the block ops
# and maps of our hand-built `sgraph`; can you find it?

# %%
from prism.search import SearchConfig, search

found = search(workload.graph, SearchConfig(**SEARCH))
summary = found.summary()
print(f"{summary['families']['generated']} families generated, {summary['families']['complete']} "
      f"complete, {len(found.candidates)} candidates, {len(found.equivalent)} proved equivalent\n")
rows = []
for cand in found.equivalent:
    ((_, block),) = cand.graph.iter_blocks()
    io = [op.attr for op in block.ops if op.kind in ("input", "output")]
    rows.append((cand.id, ",".join(op.kind for op in block.ops
                                   if op.kind not in ("input", "output")),
                 *(f"{a['imap']}/{a['fmap']}" for a in io[:2]), str(io[2]["omap"]),
                 ",".join(sorted(cand.graph.free_vars())) or None,
                 None if cand.modeled_us is None else
                 f"{cand.assignment}: {cand.modeled_us:.2f} µs modeled"))
table(rows, ["candidate", "block ops", "X imap/fmap", "W imap/fmap", "omap", "free", "member"])

# %% [markdown]
# ## 9. Exercise: the first member that fails a limit
#
# Hold the loop range at `F = ASSIGNMENTS[0]["F"]` and make the grid finer, one candidate of
# `gx` at a time (`variables(sgraph)[0].candidates()`). Which is the smallest `gx` whose member
# fails a device limit? Find it with `state.at(...)` and write it as `first_failing_gx`. The
# check works it out two other ways: by hand, since the `W` tile of a member is
# `SHAPES["W"][1] // gx` columns wide and must be at least the device's smallest matmul tile;
# and from section 4's list of feasible members, `assignments(sgraph)`.

# %%
first_failing_gx = None     # your answer: a grid size

# %% jupyter={"source_hidden":true}
if SHOW_SOLUTIONS:
    first_failing_gx = next(gx for gx in sorted(variables(sgraph)[0].candidates())
                            if not state.at({"gx": gx, "F": ASSIGNMENTS[0]["F"]}).feasible)


# %%
def check_first_failing_gx(gx):
    """Oracles: the W tile's width by hand against the device's limit, and the feasible members
    that instantiation lists."""
    feasible = [env["gx"] for env in members if env["F"] == ASSIGNMENTS[0]["F"]]
    smaller = [g for g in variables(sgraph)[0].candidates() if g < gx]
    assert SHAPES["W"][1] // gx < device.min_matmul_tile, f"at gx={gx} the W tile is wide enough"
    assert gx not in feasible, f"gx={gx} is a feasible member"
    assert all(g in feasible for g in smaller), f"a smaller grid than {gx} already fails"
    return SHAPES["W"][1] // gx


if first_failing_gx is None:
    print("exercise: write first_failing_gx above, or set SHOW_SOLUTIONS = True")
else:
    print(f"exercise passed: gx = {first_failing_gx} is the first to fail: its W tile is "
          f"{check_first_failing_gx(first_failing_gx)} columns wide, under the "
          f"{device.min_matmul_tile} a matmul needs")

# %% [markdown]
# ## What to remember
#
# - An sGraph keeps grid sizes, loop ranges and maps as symbols. Tile shapes are expressions in
#   them, and one sGraph is a whole family of kernels.
# - One proof with symbolic sizes covers every member, so the search proves a family once.
# - Instantiation picks the numbers last: the members that divide evenly and fit the device, then
#   ranked by the cost model (or a GPU). The best numbers depend on the shapes; the sGraph does
#   not.
