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
from prism.pipeline import best_summary
from prism.report import check_text, result_rows

for what, latency, kind in result_rows(best_summary(result)):
    print(f"{what:<40} {latency:>10.2f} µs  {kind}")
print(f"{'speed-up over eager':<40} {result.eager_us / result.best.modeled_us:>9.2f}x  modeled")
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
for rule, count in families["pruned"].items():
    print(f"  pruned by {rule:<20} {count}")
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
