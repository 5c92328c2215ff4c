# %% [markdown]
# # 05 · From a verified sGraph to a Triton kernel
#
# A proof says that a family of programs is right; a GPU needs one concrete program, in a
# language it can compile. Prism's last step turns a verified sGraph into **Triton**, the Python
# dialect for GPU kernels, which compiles to PTX, NVIDIA's assembly. Each `@triton.jit` function
# is the code of one thread block. It reads its block index with `tl.program_id`, loads tiles
# with `tl.load`, computes on whole tiles (`tl.dot` is a tensor-core matmul) and stores its tile
# with `tl.store`.
#
# This notebook takes the fused RMSNorm + MatMul sGraph and picks one member. It reads the Triton
# module generated for that member and runs it. Without a GPU it runs in **Triton's interpreter**,
# which executes the same kernel in numpy on CPU tensors. The output is checked against torch and
# the float64 interpreter. Finally the kernel is compiled to PTX for Hopper (sm_90), which needs
# no GPU either.
#
# If a word is new to you, look it up in the [glossary](GLOSSARY.md).

# %% tags=["parameters"]
SHAPES = {"X": (8, 64), "W": (64, 64)}
MEMBER = {"gx": 4, "F": 2}      # the member whose code we read and run
OTHER = {"gx": 2, "F": 4}       # a second member, to compare its code with the first
DEVICE = "h100"                 # the cost model's device
TARGET = ("cuda", 90, 32)       # the PTX target: CUDA, compute capability 9.0 (Hopper), warp 32
SEED = 0
SHOW_SOLUTIONS = False          # True: run the exercise's solution cell (make test does)

# %% [markdown]
# ## 1. The verified sGraph and its members
#
# The sGraph is the fused kernel with its grid size `gx` and loop range `F` left symbolic, as in
# notebook `02`. The search finds it among its candidates. Here we build it with `known_best` and
# prove it once, with the sizes symbolic (notebook `04` reads that proof).
#
# *Parameter instantiation* then lists the members: the values of `gx` and `F` under which every
# tile divides evenly and the kernel fits the device. The tuner would rank them by the cost model
# or, on a GPU, by measuring. The table gives each member's blocks, tiles and modeled latency.

# %%
import prism
from _tables import table
from prism.cost import get_device, modeled
from prism.instantiate.params import assignments
from prism.ir.spec import substitute_graph
from prism.verify.equiv import verify
from prism.workloads.known_best import known_best

workload = prism.get_workload("rmsnorm_matmul").with_shapes(**SHAPES)
sgraph = known_best("rmsnorm_matmul", SHAPES, grid="gx", loop="F")
verdict = verify(workload.graph, sgraph)
print(f"{verdict.verdict} by {verdict.method}: {verdict.proof_steps} steps, sizes "
      f"{verdict.sizes}; free variables {sorted(sgraph.free_vars())}\n")

device = get_device(DEVICE)
members = assignments(sgraph)
rows = []
for env in members:
    ((_, block),) = substitute_graph(sgraph, env).iter_blocks()
    cost = modeled(substitute_graph(sgraph, env), device)
    rows.append((str(env), cost.kernels[0].blocks,
                 *(str([d.value for d in block.shape(t)]) for t in block.inputs),
                 cost.latency_us, "modeled"))
table(rows, ["member", "blocks", "X tile", "W tile", ("latency µs", ".2f"), "kind"])

# %% [markdown]
# ## 2. The generated module
#
# `prism.instantiate.codegen.generate(sgraph, MEMBER)` substitutes the sizes and writes one
# Triton module. It is ordinary, readable Python: one `@triton.jit` function per custom kernel,
# and a launcher `run(X, W)` that allocates the output and launches the kernel on its grid.

# %%
from prism.instantiate.codegen import generate

member = substitute_graph(sgraph, MEMBER)
program = generate(sgraph, MEMBER)
(kernel,) = program.kernels
print(f"kernel {kernel.name}: grid {kernel.grid}, arguments "
      f"{', '.join(f'{n}: {t}' for n, t in kernel.signature)}\n")
print(program.source)

# %% [markdown]
# Each part of the block graph is a few lines of that source. The lines below are taken from it;
# read each against the block graph.
#
# - **grid**: the launcher runs `kernel[(gx,)]`, and each block finds its place with
#   `tl.program_id(0)`. That index picks the block's columns of `W` and of the output: the imap
#   and the omap.
# - **loop**: `for i in range(F)` walks the shared dim `d`. The loop index offsets the loads of
#   both `X` and `W`: their fmaps.
# - **accumulators**: `nored` and `red_ld_rms` start as fp32 zeros before the loop and are added
#   to in every iteration. The RMS is finished *after* the loop, dividing by the full row width.
# - **masks**: `X` has 8 rows, but `tl.dot` needs tiles of at least 16. So the tile is padded to
#   16 rows, and the padding is masked out: loads read 0 there (`other=0.0`) and stores skip it.

# %%
import re

LOOK_AT = {"grid": r"program_id|\]\(X, W", "loop": r"for i in range", "accumulator":
           r"tl\.zeros|\+=|tl\.sqrt", "mask": r"mask="}
lines = program.source.splitlines()
table([(what, number, line.strip()[:100]) for what, pattern in LOOK_AT.items()
       for number, line in enumerate(lines, 1) if re.search(pattern, line)],
      ["what", "line", "source"])

# %% [markdown]
# ## 3. Save, import, run
#
# Triton reads a kernel's source with `inspect`, so the module must live in a file. We write it
# into a temporary folder and import it with `triton_backend.load`. Whether kernels run compiled
# on a GPU or in the interpreter is decided once per process, when Triton is first imported:
# `interpreting()` says which.
#
# We run the kernel on fp16 inputs, as a GPU would. Every tensor the launcher allocates is first
# filled with NaN (`poison`), so an element the kernel forgets to write shows up as NaN instead
# of passing unnoticed as a leftover zero. The output is compared with two references: the float64
# interpreter of the same member, and torch's own `rms_norm(X) @ W`. Both see the same
# fp16-rounded inputs, so what is left is the kernel's fp16 rounding.

# %%
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from prism.instantiate import triton_backend
from prism.tune.backends import TOLERANCE, poison, random_inputs, rel_err

folder = Path(tempfile.mkdtemp(prefix="prism-05-"))
path = triton_backend.write_module(program, folder / "rmsnorm_matmul_member.py")
module = triton_backend.load(program, path)
on = "cpu" if triton_backend.interpreting() else "cuda"
print(f"interpreting: {triton_backend.interpreting()}; module {path.name}, "
      f"{len(program.source.splitlines())} lines")
print(f"run: {module.run.__doc__}")

arrays = random_inputs(member, SEED)
tensors = [torch.tensor(a, dtype=torch.float16, device=on) for a in arrays]
exact = [t.double().cpu().numpy() for t in tensors]          # what the references see
poison(module)
with np.errstate(all="ignore"):          # padded lanes compute 0/0 in the interpreter's numpy
    out = module.run(*tensors)
got = out.double().cpu().numpy()
print(f"output {out.dtype} {list(out.shape)} on {out.device}, NaN elements {np.isnan(got).sum()}")
reference = prism.interpret(member, *exact)[0]
print(f"relative error vs float64 interpreter {rel_err(got, reference):.1e}")
print(f"relative error vs torch               {rel_err(got, workload.reference(*exact)[0]):.1e}"
      f"   (fp16 tolerance {TOLERANCE})")

# %% [markdown]
# Why the NaNs? Below, the launch line is edited to start one block fewer than the grid needs,
# which is an easy bug to make in a launcher. The kernel runs without complaint. Because the
# output starts as NaN, the columns that no block wrote show up at once.

# %%
launch = f"{kernel.name}[{kernel.grid!r}]"
launched = (kernel.grid[0] - 1,)
broken = triton_backend.load(program.source.replace(launch, f"{kernel.name}[{launched!r}]"),
                             folder / "rmsnorm_matmul_broken.py")
poison(broken)
with np.errstate(all="ignore"):
    broken_out = broken.run(*tensors).double().cpu().numpy()
unwritten = np.flatnonzero(np.isnan(broken_out).all(axis=0))
print(f"launched {launched} instead of {kernel.grid}: {int(np.isnan(broken_out).sum())} NaN "
      f"elements, columns {unwritten.min()}-{unwritten.max()} never written")

# %% [markdown]
# ## 4. Every member, run
#
# The proof covers every member, and the generated code should too. Each member below is
# generated, loaded and run in the same way. Look at the error and NaN columns: every member
# must pass.
#
# The `wall` column is the time of one call, and its kind says how it was taken. `interpreted`
# means CPU wall time in Triton's interpreter. It measures numpy, not a GPU, and says nothing
# about speed: compare it with the modeled column, which ranks the members very differently.

# %%
from prism.instantiate.triton_backend import bench_cuda


def wall_us(mod, inputs):
    """One call's time and its kind: CPU wall time when interpreting, CUDA events on a GPU."""
    if triton_backend.interpreting():
        started = time.perf_counter()
        mod.run(*inputs)
        return (time.perf_counter() - started) * 1e6, "interpreted"
    return bench_cuda(lambda: mod.run(*inputs)), "measured"


outputs, rows = {}, []
for env in members:
    concrete = substitute_graph(sgraph, env)
    mod = triton_backend.load(generate(sgraph, env))
    poison(mod)
    with np.errstate(all="ignore"):
        result = mod.run(*tensors).double().cpu().numpy()
        wall, kind = wall_us(mod, tensors)
    outputs[str(env)] = result
    err = rel_err(result, prism.interpret(concrete, *exact)[0])
    nans = int(np.isnan(result).sum())
    rows.append((str(env), err, nans, str(nans == 0 and err <= TOLERANCE),
                 modeled(concrete, device).latency_us, wall, kind))
table(rows, ["member", ("err vs interpreter", ".1e"), "NaN", "pass", ("modeled µs", ".2f"),
             ("wall µs", ".0f"), "kind"])

# %% [markdown]
# ## 5. Another member: the same code, other constants
#
# Members of one sGraph share their structure, so their modules should differ only in numbers:
# the grid, the loop range, tile sizes and offsets. Here is the diff between the modules for
# `MEMBER` and `OTHER`. The last line checks the claim by hiding every number in both sources and
# comparing what is left.

# %%
import difflib

other_program = generate(sgraph, OTHER)
diff = [line for line in difflib.unified_diff(program.source.splitlines(),
                                              other_program.source.splitlines(), lineterm="", n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---"))]
print(f"{MEMBER} → {OTHER}: {len(diff)} changed lines")
for line in diff:
    print(f"  {line[0]} {line[1:].strip()[:108]}")


def shape_of(source):
    return re.sub(r"\d+", "#", source)


print("differs only in constants:", shape_of(program.source) == shape_of(other_program.source))

# %% [markdown]
# ## 6. PTX for Hopper, without a GPU
#
# Triton compiles a kernel in stages: Triton IR, then LLVM IR, then PTX. The last two need no
# GPU, only a *target*: here `GPUTarget("cuda", 90, 32)`, a Hopper (sm_90) GPU with 32-thread
# warps. `compile_many` compiles both members in one subprocess, because this process has
# already imported Triton in interpreting mode.
#
# Three things in the output are worth finding. The header names the target (`.target sm_90a`).
# The `.entry` is our kernel, and `.reqntid 128` is the fixed block of 128 threads (4 warps).
# And `tl.dot` has become `mma.sync` tensor-core instructions. Location lines (`.loc`, `.file`)
# and debug sections are stripped with `strip_locations` before counting.

# %%
compiled = triton_backend.compile_many([program, other_program], TARGET)
for env, prog, result in zip((MEMBER, OTHER), (program, other_program), compiled, strict=True):
    if isinstance(result, triton_backend.CompileError):
        print(f"{env}: {result}")
        continue
    (ptx,) = result
    text = triton_backend.strip_locations(ptx.ptx)
    header = [ln.strip() for ln in text.splitlines() if ln.startswith((".version", ".target",
                                                                         ".address_size"))]
    entry = re.search(r"^\.visible \.entry (\w+)\(", text, re.M)
    threads = re.search(r"^\.reqntid (\d+)", text, re.M)
    mma = sorted({ln.split()[0] for ln in text.splitlines() if ln.strip().startswith("mma.")})
    print(f"{env}: {' | '.join(header)}")
    print(f"  entry {entry[1] if entry else '?'}, {threads[1] if threads else '?'} threads, "
          f"shared memory {ptx.shared_bytes} bytes")
    print(f"  {len(ptx.ptx)} bytes of PTX, {len(text)} without locations "
          f"({len(text.splitlines())} lines)")
    print(f"  tensor-core instructions: {', '.join(mma) or 'none'} "
          f"(×{sum(ln.strip().startswith('mma.') for ln in text.splitlines())})")

# %% [markdown]
# The second member loops over more, thinner slices of `d` with a wider `W` tile. Compare the
# two members' lines: the number of tensor-core instructions and the shared memory follow the
# tile shapes. In the first lines, the entry's parameters are the three tensor pointers, followed
# by pointers that Triton adds for its own scratch memory. On a GPU,
# `prism optimize ... --measure cuda` would time each member with CUDA events (kind `measured`)
# and keep the fastest.

# %%
print("PTX of the first member, the first lines:")
print("\n".join(triton_backend.strip_locations(compiled[0][0].ptx).splitlines()[:16]))

# %% [markdown]
# ## 7. Exercise: repair a broken mask
#
# Below, one line of the generated module has been broken: the load of `X` now masks out half of
# its rows. Run it, and the NaNs say something is wrong. Find the line, and write the repaired
# module as `repaired_source` (a string: `broken_source` with the mask fixed). The check loads
# it, runs it on the same fp16 inputs with its output poisoned, and compares it with the float64
# interpreter and with torch.

# %%
rows = SHAPES["X"][0]
source_lines = program.source.splitlines()
at = next(i for i, line in enumerate(source_lines) if "tl.load(X_ptr" in line)
source_lines[at] = source_lines[at].replace(f"< {rows})", f"< {rows // 2})")
broken_source = "\n".join(source_lines) + "\n"
mask_module = triton_backend.load(broken_source, folder / "rmsnorm_matmul_mask.py")
poison(mask_module)
with np.errstate(all="ignore"):
    masked_out = mask_module.run(*tensors).double().cpu().numpy()
print(f"broken module: {int(np.isnan(masked_out).sum())} NaN elements of {masked_out.size}")

repaired_source = None      # your repaired module source

# %% jupyter={"source_hidden":true}
if SHOW_SOLUTIONS:
    repaired_source = broken_source.replace(f"< {rows // 2})", f"< {rows})")


# %%
def check_repaired(source):
    """Oracles: the float64 interpreter of the same member, and torch, on the same inputs."""
    repaired = triton_backend.load(source, folder / "rmsnorm_matmul_repaired.py")
    poison(repaired)
    with np.errstate(all="ignore"):
        result = repaired.run(*tensors).double().cpu().numpy()
    assert not np.isnan(result).any(), f"{int(np.isnan(result).sum())} NaN elements"
    errors = (rel_err(result, prism.interpret(member, *exact)[0]),
              rel_err(result, workload.reference(*exact)[0]))
    assert max(errors) <= TOLERANCE, f"relative errors {errors} above {TOLERANCE}"
    return errors


if repaired_source is None:
    print("exercise: write repaired_source above, or set SHOW_SOLUTIONS = True")
else:
    vs_interpreter, vs_torch = check_repaired(repaired_source)
    print(f"exercise passed: the repaired kernel's relative error {vs_interpreter:.1e} vs the "
          f"float64 interpreter, {vs_torch:.1e} vs torch")

# %% [markdown]
# ## What to remember
#
# - A verified sGraph becomes code one member at a time. `generate` substitutes the grid size and
#   the loop range, and writes a readable Triton module with a kernel and its launcher.
# - The block graph maps onto the source line by line: the grid is `tl.program_id`, the loop is
#   `for i in range(F)`, accumulators are fp32 tiles, and masks hide the padding that `tl.dot`
#   needs.
# - Without a GPU, Triton's interpreter checks correctness against torch and the float64
#   interpreter. Outputs start as NaN so that unwritten elements show; its wall times mean
#   nothing for speed.
# - The same source compiles offline to PTX for Hopper. Members differ only in their constants.
