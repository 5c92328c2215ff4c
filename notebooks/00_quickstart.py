# %% [markdown]
# # 00 · Quickstart: a fused kernel in three lines
#
# A *superoptimizer* does not apply a fixed list of optimizations to your program. It searches a
# large space of programs that might compute the same thing, **proves** which of them really do,
# and keeps the fastest. Prism Workbench does this for small tensor programs: the building blocks
# of a transformer layer, such as RMSNorm followed by a matrix multiplication.
#
# Run as written, PyTorch evaluates `rms_norm(X) @ W` as two kernels. The first reads `X` from
# GPU memory, normalizes it and writes the result back; the second reads that result again and
# multiplies it by `W`. A *fused* kernel does both in one pass, so the intermediate never touches
# device memory. Writing such a kernel by hand means deciding how to split the work across thread
# blocks, what each block loops over, and where partial results meet. The superoptimizer makes
# those decisions for you and proves the result correct.
#
# This notebook runs the whole pipeline once, looks at what it returns, and then runs it again
# inside the **workbench**, the widget that shows each step live.
#
# If a word is new to you, look it up in the [glossary](GLOSSARY.md).

# %% tags=["parameters"]
# Small enough to run in seconds on a laptop CPU. For the real thing, set SHAPES = None (the
# workload's default shapes) and SEARCH = None (the default search caps); BUDGET_S bounds the time
# each of the two runs below may take.
WORKLOAD = "rmsnorm_matmul"
SHAPES = {"X": (8, 64), "W": (64, 64)}
DEVICE = "h100"            # the cost model's device: h100, h200 or a100
BUDGET_S = 60              # seconds for search + tuning
SEARCH = {"grid_dims": (1,), "max_block_ops": 4, "block_ops": ("matmul", "div", "rms_norm"),
          "accumulators": ("nored", "red_ld_rms")}
MAX_TRIALS = 4             # finalists that get Triton code and a measurement
COMPILE_PTX = False        # True: also compile each finalist to sm_90 PTX (slower)
SHOW_SOLUTIONS = False     # True: run the exercise's solution cell (make test does)

# %% [markdown]
# ## The big picture
#
# Before anything runs, here is the whole pipeline on one line. Each box is a stage, and the
# small text under its name is what it hands to the next one. The search has two levels. At
# **level 1** every grid size, loop range and map is still a symbol. **Level 2** makes them
# concrete: the maps first, then the sizes.

# %%
import itertools

import graphviz
from IPython.display import SVG

STAGES = {"program": "your PyTorch function", "families": "partial programs",
          "prune": "families that may still win", "prove": "candidates proved equivalent",
          "instantiate": "members: concrete kernels", "Triton": "code for the best few",
          "tune": "the best kernel"}
LEVELS = {"level 1: every size and map a symbol": ("families", "prune"),
          "level 2: maps, then sizes, made concrete": ("prove", "instantiate")}
FILL = {"program": "#dbeafe", "tune": "#dcfce7"}      # what goes in, what comes out

pipeline = graphviz.Digraph(graph_attr={"rankdir": "LR", "ranksep": "0.3", "labeljust": "l",
                                        "fontname": "Helvetica", "fontsize": "10"},
                            node_attr={"shape": "box", "style": "rounded,filled",
                                       "fontname": "Helvetica"},
                            edge_attr={"color": "#6b7280"})
for stage, hands_on in STAGES.items():
    pipeline.node(stage, f'<<B>{stage}</B><BR/><FONT POINT-SIZE="9">{hands_on}</FONT>>',
                  fillcolor=FILL.get(stage, "#fef3c7"))
for label, stages in LEVELS.items():
    with pipeline.subgraph(name=f"cluster {label}") as level:
        level.attr(label=label, style="dashed", color="#9ca3af")
        for stage in stages:
            level.node(stage)
pipeline.edges(itertools.pairwise(STAGES))
SVG(pipeline.pipe(format="svg", encoding="utf-8"))

# %% [markdown]
# One sentence per stage:
#
# - **program**: your PyTorch function and the shapes of its inputs, traced into a graph of
#   operators.
# - **families**: the search builds fused programs one operator at a time, and each partial
#   program is a *family* that stands for every program that could grow from it.
# - **prune**: rules drop a family as soon as they show that none of its programs can be correct,
#   fit the GPU, or beat the best found so far.
# - **prove**: each complete family gets its maps filled in, which gives *candidates*, and each
#   candidate is proved equivalent to your program while its sizes are still symbols.
# - **instantiate**: a proved candidate gets grid sizes and loop ranges that divide the shapes and
#   fit the GPU, and each such choice is one *member*, a concrete kernel.
# - **Triton**: the members that the cost model ranks best become Triton code.
# - **tune**: those finalists are measured, and the fastest one that passes its check is the best
#   kernel.

# %% [markdown]
# ## The program
#
# A *workload* is a PyTorch function together with the shapes of its inputs. Prism traces it with
# `torch.fx` into a **kernel graph**: one node per operator. The picture shows the graph; the
# printed line gives the program in one line.

# %%
import prism
from prism.search import SearchConfig

workload = prism.get_workload(WORKLOAD)
if SHAPES is not None:
    workload = workload.with_shapes(**SHAPES)
config = SearchConfig(budget_s=BUDGET_S, **SEARCH) if SEARCH is not None else None
print(workload, "·", workload.program)
workload.graph

# %% [markdown]
# ## Three lines
#
# `prism.superoptimize` runs the whole pipeline. It searches for fused-kernel programs, proves
# each one equivalent to the workload, chooses grid sizes and loop ranges, generates Triton code
# for the most promising, and measures them. `measure="model"` uses the analytic cost model of the
# named GPU instead of a real one. Every latency is printed with its *kind* (`modeled`,
# `interpreted` or `measured`), so a number never hides where it came from. With every default,
# `prism.superoptimize("rmsnorm_matmul")` alone would do; here the parameters keep it small.

# %%
result = prism.superoptimize(workload, device=DEVICE, measure="model", budget_s=BUDGET_S,
                             search_config=config, max_trials=MAX_TRIALS, compile_ptx=COMPILE_PTX)
print(f"best kernel: {result.best.latency_us:.2f} µs {result.best.latency_kind}")

# %% [markdown]
# ## What came back
#
# The best kernel is one number in a table. Two other rows help you read it. The **roofline
# bound** is what no program can beat: each input read once, the output written once, at full
# memory bandwidth, plus one kernel launch. **Eager** is the program run one kernel per
# operator, the way PyTorch runs it. A good kernel sits close to the roofline and below eager.
#
# The last line says how the winner was checked. Its Triton code ran in Triton's interpreter on
# random inputs, and its output was compared with PyTorch's. For a kernel too large to interpret
# quickly, a smaller member of the same family is checked instead, and the line says so.

# %%
from _tables import table
from prism.pipeline import best_summary
from prism.report import check_text, result_rows

table(result_rows(best_summary(result)), ["", ("µs", ".2f"), "kind"])
print(f"speed-up over eager: {result.eager_us / result.best.modeled_us:.2f}x modeled")
print("check:", check_text(result.best.check))

# %% [markdown]
# How much was searched? The search grows programs one operator at a time. It discards whole
# *families* of programs as soon as a rule shows that no member can be correct, can fit the GPU,
# or can beat the best found so far. Each rule's count below is a number of families it pruned.

# %%
summary = result.search.summary()
families = summary["families"]
print(f"search: {summary['seconds']} s, {families['generated']} families generated, "
      f"{families['kept']} kept, {families['complete']} complete")
table(families["pruned"].items(), ["pruned by", "families"])
print("candidates:", summary["verdicts"])

# %% [markdown]
# ## The winner
#
# The best kernel is itself a kernel graph, with one **custom kernel** in place of the two
# operators. The box in the picture shows what each thread block does. Its *grid* is how many
# blocks run in parallel, and its *loop* is how many tiles each block walks through. The maps say
# which slice of each tensor a block reads. Notebook `01` explains every label in the picture.

# %%
best = result.best
print(f"{best.config}: {best.num_kernels} kernel(s), parameters {best.params}")
best.graph

# %% [markdown]
# Why should we trust it? The candidate was **proved** equivalent to the workload by a chain of
# rewrites, each an axiom of tensor algebra or of data movement. The grid size and loop range
# stayed symbolic, so one proof covers every size that is later chosen.

# %%
from prism.verify.equiv import show_proof

if best.is_input_program:
    print("the input program itself won: it needs no proof")
else:
    print(f"proof: {best.verdict.method}, {best.verdict.proof_steps} steps, "
          f"{best.verdict.sizes} sizes")
    print(show_proof(best.verdict.steps[0]))

# %% [markdown]
# The generated Triton module is ordinary Python. Save it to a file and `run(X, W)` launches it on
# a GPU, or on CPU tensors under `TRITON_INTERPRET=1`. Here are its first lines:

# %%
print("\n".join(best.triton_source.splitlines()[:40]))

# %% [markdown]
# ## The run in three numbers
#
# Three numbers read from `result`, each with what it counts. The first two come from the
# search's own counts. The third counts what the winner's single proof is worth: its sGraph was
# proved once, with the grid size and loop range as symbols, so the proof holds for every member.
# The members are the assignments of those symbols that divide the shapes and fit the device.

# %%
from prism.cost import get_device
from prism.instantiate.params import assignments

device = get_device(DEVICE)
search = result.search
pruned = sum(search.pruned.values())
top_two = " and ".join(f"{rule} ({n})" for rule, n in search.pruned.most_common(2))
print(f"1. The search generated {search.generated} families: partial programs, each standing "
      "for every program that could grow from it.")
print(f"2. It pruned {pruned} of them ({pruned / search.generated:.0%}), most by {top_two}.")
if best.symbolic is None:
    print("3. The winner is the input program itself: it needed no proof.")
else:
    covered = assignments(best.symbolic, device, limit=1000)
    print(f"3. One proof covers {len(covered)} members: {best.candidate}'s sGraph was proved "
          f"once, and on the {device.name} its feasible assignments are "
          f"{', '.join(map(str, covered))}.")

# %% [markdown]
# The count is small because the shapes here are toy sized: a finer grid would cut a tile below a
# device limit (notebook `02` names the limit, and counts the members at the paper's shapes).
#
# ## What the two levels buy
#
# Level 1 searches families with everything symbolic, so it decides whole sets of programs at
# once. Level 2 then fills in the maps, which gives candidates, and the sizes, which gives
# members. The verifier judges each candidate once, with its sizes symbolic; a search over
# concrete kernels would have had to judge every member separately. The lines below count both.

# %%
members = {c.id: len(assignments(c.graph, device, limit=1000)) for c in search.candidates}
proved = search.equivalent
print(f"level 1: {search.generated} families generated, {len(search.families)} complete "
      "(grid sizes, loop ranges and maps all symbols)")
print(f"level 2: those {len(search.families)} complete families -> {len(search.candidates)} "
      f"candidates (maps filled in) -> {sum(members.values())} members (each candidate at "
      "each of its feasible assignments)")
print(f"verifier: {len(search.candidates)} candidates judged, {len(proved)} proved, instead of "
      f"{sum(members.values())} concrete kernels one by one "
      f"({sum(members.values()) / len(search.candidates):.1f}x fewer)")
print(f"tuning: the {len(proved)} proved candidates' {sum(members[c.id] for c in proved)} "
      "members, each ranked by the cost model with no further proof")

# %% [markdown]
# ## How much of the speed-up is launches
#
# The speed-up over eager printed above is about 2x. At these toy shapes it is mostly one kernel
# launch instead of two. The cost model charges every launch a fixed *launch overhead*
# (`DeviceSpec.launch_us`) on top of the time to move its bytes or do its arithmetic, and it
# models eager as one launch per operator. The table splits each latency into the launches and
# the rest.

# %%
from prism.cost import modeled

fused = modeled(best.graph, device)
rows = (("eager (one kernel per operator)", workload.graph.num_kernels, result.eager_us),
        (f"fused: {best.config}", fused.launches, fused.latency_us))
table([(what, launches, launches * device.launch_us, total - launches * device.launch_us, total,
        launches * device.launch_us / total) for what, launches, total in rows],
      ["program", "launches", ("launch µs", ".2f"), ("rest µs", ".3f"), ("total µs", ".2f"),
       ("launch share", ".2%")], note=f"modeled, {device.launch_us} µs a launch")
saved = result.eager_us - fused.latency_us
launches_saved = (rows[0][1] - rows[1][1]) * device.launch_us
print(f"fusion saves {saved:.2f} µs modeled; the launches saved are {launches_saved:.2f} µs of "
      f"it ({launches_saved / saved:.0%})")

# %% [markdown]
# Compare the *rest* column. Every tensor here is a few kilobytes, so moving it takes nanoseconds,
# and the launch is nearly all of each latency. When the fused kernel's rest is the larger of the
# two, as in this run, its few thread blocks leave most of the GPU idle, and the launch it saves is
# more than the whole gain. At realistic shapes the bytes dominate instead, and fusion has to win
# on memory traffic. Notebook `01` does that accounting launch by launch.

# %% [markdown]
# ## Exercise: the speed-up without launches
#
# Suppose a launch cost nothing. What would the speed-up over eager be? Work it out from the
# table above: take each program's launches out of its latency and divide what is left. Write it
# as `speedup_without_launches`. The check asks the cost model itself: it re-costs both programs
# on the same device with `launch_us` set to 0.

# %%
speedup_without_launches = None     # your answer: eager's rest ÷ the fused kernel's rest

# %% jupyter={"source_hidden":true}
if SHOW_SOLUTIONS:
    rests = [total - launches * device.launch_us for _, launches, total in rows]
    speedup_without_launches = rests[0] / rests[1]


# %%
import dataclasses

from prism.cost import eager_us


def check_speedup(speedup):
    """Checked by the cost model itself, on a device whose launches are free."""
    free = dataclasses.replace(device, launch_us=0.0)
    model = eager_us(workload.graph, free) / modeled(best.graph, free).latency_us
    assert abs(speedup - model) <= 1e-6 * model, f"{speedup:.4f}x, the cost model says {model:.4f}x"
    return model


if speedup_without_launches is None:
    print("exercise: write speedup_without_launches above, or set SHOW_SOLUTIONS = True")
else:
    print(f"exercise passed: {speedup_without_launches:.3f}x without launches by hand, "
          f"{check_speedup(speedup_without_launches):.3f}x by the cost model (modeled)")

# %% [markdown]
# ## The workbench, live
#
# The same run inside the workbench. It has three tabs. **search** shows the tree of families:
# filter by rule to see why each one was pruned. **candidates** shows every candidate's sGraph and
# its proof, plus the winner. **tuning** plots each configuration's latency as it is measured,
# with the roofline and eager lines for scale.
#
# `run()` starts the pipeline in a background thread and returns at once, so the views fill in
# while you watch. In Jupyter you can click through the tabs while it runs.

# %%
from widgets import Workbench

bench = Workbench(workload, device=DEVICE, measure="model", budget_s=BUDGET_S,
                  search_config=config, max_trials=MAX_TRIALS, compile_ptx=COMPILE_PTX)
bench.run()

# %% [markdown]
# `await bench.wait()` waits for the run to end and returns the same kind of result as
# `prism.superoptimize`. It waits without blocking the notebook's kernel, so the explorer's pause
# and cancel buttons still act while this cell runs. (Pausing stops the run's budget clock too;
# a cancelled run keeps the best kernel it found, labelled as unchecked.) The search is
# deterministic, so the workbench should arrive at the same winner as the run above. The cell
# below checks this rather than assuming it.

# %%
live = await bench.wait()
print(f"workbench best: {live.best.latency_us:.2f} µs {live.best.latency_kind} "
      f"({live.best.config})")
print("same winner as prism.superoptimize:", live.best.config == result.best.config)
print("families the explorer saw:", bench.explorer.state.generated)

# %% [markdown]
# ## Where next
#
# - `01_tensor_programs_and_kernels`: what a kernel graph, a block graph, a grid, a loop and a map
#   are. Also how the reference interpreter runs them, and why fusion pays, in the cost model's
#   own numbers.
# - `02_symbolic_graphs`: sGraphs, where one symbolic program stands for many kernels.
# - `bench.save_html("run.html")` writes this run as a static page that opens without Jupyter.
#   `prism optimize rmsnorm_matmul --out out/` does the same from the command line.
