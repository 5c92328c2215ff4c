# %% [markdown]
# # 08 · Your own program: from a torch function to a fused kernel file
#
# The earlier notebooks optimize Prism's named workloads. This one optimizes a program of yours.
# You write an ordinary PyTorch function, tell Prism the shapes of its inputs, and get back a
# Triton module: one fused kernel, proved equal to your function and checked against it, saved
# to a file you can import.
#
# The example is a step that transformer code is full of but that none of the nine workloads
# covers: a projection, its GELU activation, and a residual connection,
# `H + gelu(X @ W)`. PyTorch runs it as three kernels: the matmul writes `X @ W` to device
# memory, GELU reads it and writes its result, and the add reads that back with `H`. A fused
# kernel reads `X`, `W` and `H` once and writes the answer once.
#
# Replace the function with your own. The sections say what to check at each step.
#
# If a word is new to you, look it up in the [glossary](GLOSSARY.md).

# %% tags=["parameters"]
SHAPES = {"X": (8, 64), "W": (64, 64), "H": (8, 64)}   # small: searched and checked in seconds
DEVICE = "h100"            # the cost model's device: h100, h200 or a100
BUDGET_S = 60              # seconds for search + tuning
SEARCH = {"grid_dims": (1,), "max_block_ops": 4, "accumulators": ("nored",)}   # block_ops: section 3
MAX_TRIALS = 2             # finalists that get Triton code
COMPILE_PTX = True         # also compile the finalists for sm_90 (Hopper) PTX, without a GPU
DECODE = {"Q": (1, 8, 16), "K": (1, 4096, 16), "V": (1, 4096, 16)}   # section 9: 4,096 keys
SEED = 0
SHOW_SOLUTIONS = False     # True: run the exercise's solution cell (make test does)

# %% [markdown]
# ## 1. Write it as a workload
#
# `@prism.workload(...)` takes one shape per parameter. The function stays a torch function:
# calling it runs PyTorch as before. Prism traces it with `torch.fx` into a **kernel graph**, one
# node per operator, the first time you ask for `.graph`. Check the picture: it should show
# exactly the operators you wrote, in order.

# %%
import torch

import prism
from _tables import table


@prism.workload(**SHAPES)
def gelu_residual(X, W, H):
    """H + gelu(X @ W): a projection, its activation and a residual connection."""
    return H + torch.nn.functional.gelu(X @ W)


graph = gelu_residual.graph
print(gelu_residual, "·", gelu_residual.description)

def shape(tensor):
    return [d.value for d in graph.shape(tensor)]


table([(op.kind, ", ".join(str(shape(t)) for t in op.inputs), str(shape(op.outputs[0])))
       for op in graph.ops if op.kind not in ("input", "output")], ["op", "inputs", "output"])
print("kernels as traced:", graph.num_kernels)
graph

# %% [markdown]
# ## 2. Check the trace before optimizing
#
# A traced graph is only useful if it computes what your function computes. Run it in the float64
# reference interpreter (`prism.interpret`) and compare with your own function in float64
# (`.reference`). Both use the same random inputs, drawn by `.random_inputs`. The error should be
# at the level of float64 rounding. A large error here means the trace is wrong, and nothing
# after it can be right.

# %%
from prism.check import max_rel_err

arrays = gelu_residual.random_inputs(SEED)
err = max_rel_err(prism.interpret(graph, *arrays), gelu_residual.reference(*arrays))
print(f"traced graph vs your torch function (float64): max relative error {err:.1e}")

# %% [markdown]
# ## 3. Exercise: the block vocabulary from the trace
#
# The search below is kept to seconds by caps, and the tightest cap is the *vocabulary*: which
# ops a block may use (`block_ops`). A fused kernel of your program needs the ops your program
# uses, so derive them from the traced graph: the `kind` of every op in `graph.ops` except the
# graph's `input` and `output` nodes, each once, in the order they first appear. Write the tuple
# as `block_ops`; the search below uses it, so when you replace the function with your own, the
# search follows. The check compares it with the narrow vocabulary the engine offers for a
# quick search (`prism.pipeline.program_block_ops`), which adds `div` and `mul` to your
# program's ops. Without an answer, the search gets the engine's whole vocabulary, which takes
# longer.

# %%
block_ops = None        # your answer: a tuple of op names

# %% jupyter={"source_hidden":true}
if SHOW_SOLUTIONS:
    block_ops = tuple(dict.fromkeys(op.kind for op in graph.ops
                                    if op.kind not in ("input", "output")))


# %%
from prism.pipeline import program_block_ops


def check_block_ops(ops):
    """The oracle: the narrow vocabulary the engine derives from the graph."""
    engine = set(program_block_ops(graph))
    assert len(set(ops)) == len(ops), f"{ops} names an op twice"
    assert set(ops) <= engine and set(ops) | {"div", "mul"} == engine, \
        f"{sorted(ops)}: the engine's vocabulary is {sorted(engine)} (with div and mul)"
    return sorted(engine)


if block_ops is None:
    print("exercise: write block_ops above, or set SHOW_SOLUTIONS = True")
else:
    print(f"exercise passed: block_ops {block_ops}; the engine's narrow vocabulary "
          f"{check_block_ops(block_ops)}")

# %% [markdown]
# ## 4. Optimize it
#
# One call does the whole pipeline, as in notebook `00`: search, prove, tune, check, and with
# `out=` write the files. The search caps in the parameters cell and your `block_ops` keep this
# to seconds. By default the block vocabulary is Prism's twelve block ops plus any operator your
# program uses beyond them, at Prism's full caps, which is the setting for a real run.

# %%
import tempfile
from pathlib import Path

from prism.pipeline import best_summary
from prism.report import check_text, result_rows
from prism.search import SearchConfig

out = Path(tempfile.mkdtemp(prefix="prism-08-")) / "gelu_residual"   # nothing goes in the repo
result = prism.superoptimize(gelu_residual, device=DEVICE, measure="model", budget_s=BUDGET_S,
                             search_config=SearchConfig(budget_s=BUDGET_S, **SEARCH, **(
                                 {"block_ops": block_ops} if block_ops else {})),
                             max_trials=MAX_TRIALS, compile_ptx=COMPILE_PTX, out=out)
table(result_rows(best_summary(result)), ["", ("µs", ".2f"), "kind"])
print(f"speed-up over eager: {result.eager_us / result.best.modeled_us:.2f}x modeled")
print("check:", check_text(result.best.check))

# %% [markdown]
# How to read it:
#
# - **best** names the winning configuration: a candidate and its grid size. There should be one
#   kernel where eager has one per operator.
# - The **roofline** is the floor: every input read once, the output written once, one launch.
#   At these small shapes the launch dominates, so a fused kernel sits near it and eager pays
#   the launch once per operator.
# - The **check** ran the generated Triton code on random inputs and compared it with *your*
#   function: the workload's torch reference is the code in the cell above.
#
# The winner's graph: one custom kernel. The box is the block graph, and its labels give the
# grid, the loop and the maps (notebook `01` explains each). The proof line says how the
# candidate was shown equal to your program, and the `sizes` field says whether the proof covers
# every grid size (notebook `02`).

# %%
best = result.best
print(f"{best.config}: {best.num_kernels} kernel(s), parameters {best.params}")
if best.verdict is None:
    print("your program itself won: it needs no proof")
else:
    print(f"proof: {best.verdict.method}, {best.verdict.proof_steps} steps, "
          f"sizes {best.verdict.sizes}")
best.graph

# %% [markdown]
# ## 5. What was written
#
# `out=` wrote five files: the kernel module, its PTX for Hopper GPUs (compiled here without a
# GPU), the run's trace of every event, a static HTML report, and the result as JSON. From a
# shell, the same run is
#
# ```sh
# prism optimize my_program.py:gelu_residual --out out/ --max-block-ops 4 --grid-dims 1 \
#     --block-ops matmul,gelu,add --accumulators nored --max-trials 2
# ```
#
# where `my_program.py` holds the decorated function. Drop the caps for a full search.

# %%
import json

table([(key, Path(path).name, Path(path).stat().st_size) for key, path in result.files.items()],
      ["file", "name", "bytes"])
doc = json.loads((out / "result.json").read_text())
print(f"result.json: best {doc['best']['config']} at {doc['best']['latency_us']} µs "
      f"{doc['best']['latency_kind']}, verdict {doc['best']['verdict']}")
ptx = (out / "kernel.ptx").read_text().splitlines()
print("kernel.ptx:", next((line.strip() for line in ptx if line.startswith(".target")),
                          "no .target line"))

# %% [markdown]
# `kernel.py` is plain Python: a docstring that names the configuration and the inputs' order,
# the Triton kernel (`@triton.jit`, one tile per block, as notebook `05` shows), and a `run`
# function that checks the shapes, allocates the output and launches the grid. Here are the
# docstring and `run`:

# %%
source = (out / "kernel.py").read_text().splitlines()
print("\n".join(source[:source.index('"""', 1) + 1]))
print("...")
print("\n".join(source[next(i for i, line in enumerate(source) if line.startswith("def run(")):]))

# %% [markdown]
# ## 6. Use the kernel
#
# Import the file as any module and call `run` with fp16 tensors. On a GPU they are CUDA
# tensors, and Triton compiles the kernel for it. Without one, Prism set `TRITON_INTERPRET=1`
# before Triton was imported, so the same code runs in Triton's interpreter on CPU tensors.
# Either way, compare with your function. Rounding to fp16 allows a relative error of about
# 1e-3. Prism's tolerance for fp16 kernels is 2e-2, and anything near 1 would mean a wrong
# kernel.

# %%
import importlib.util

spec = importlib.util.spec_from_file_location("gelu_residual_kernel", out / "kernel.py")
kernel = importlib.util.module_from_spec(spec)
spec.loader.exec_module(kernel)

where = "cuda" if torch.cuda.is_available() else "cpu"
inputs = [torch.tensor(a, dtype=torch.float16, device=where)
          for a in gelu_residual.random_inputs(SEED + 1)]
got = kernel.run(*inputs)
want = gelu_residual(*[t.double() for t in inputs])      # your function, in float64
rel = max_rel_err([got.double().cpu().numpy()], [want.cpu().numpy()])
print(f"kernel.run on {where} ({'GPU' if where == 'cuda' else 'Triton interpreter'}): "
      f"{got.dtype}, shape {tuple(got.shape)}")
print(f"exported kernel vs your torch function: max relative error {rel:.1e}")

# %% [markdown]
# The module was generated for these shapes, and `run` refuses others, saying so. To get a kernel
# for another size, optimize the workload at that size:
# `gelu_residual.with_shapes(X=(16, 4096), W=(4096, 4096), H=(16, 4096))`.

# %%
try:
    kernel.run(*[torch.cat([t, t]) for t in inputs])
except ValueError as e:
    print(f"{type(e).__name__}: {e}")

# %% [markdown]
# ## 7. When Prism cannot take your program
#
# Every mistake Prism can diagnose is a `PrismError` whose message says what is wrong and what
# to do. These three come up most often: an operator outside the vocabulary, shapes that do not
# fit, and a parameter without a shape. Shapes are checked when you decorate; operators and their
# shapes when the function is traced.

# %%
from prism.errors import PrismError


def with_cumsum(X, W, H):
    return H + torch.cumsum(X @ W, dim=-1)    # a running sum is not in the op table


def gelu_residual_again(X, W, H):
    return H + torch.nn.functional.gelu(X @ W)


attempts = {
    "an operator outside the vocabulary": lambda: prism.workload(with_cumsum, **SHAPES).graph,
    "shapes that do not fit": lambda: prism.workload(
        gelu_residual_again, **{**SHAPES, "X": (8, 32)}).graph,     # X's 32 columns, W's 64 rows
    "a parameter without a shape": lambda: prism.workload(
        gelu_residual_again, X=SHAPES["X"], W=SHAPES["W"]),
}
for what, attempt in attempts.items():
    try:
        attempt()
        print(f"{what}: no error")
    except PrismError as e:
        print(f"{what}:\n  {type(e).__name__}: {e}")

# %% [markdown]
# ## 8. Programs as people write them
#
# Model code rarely spells out its ops one by one. It uses `nn.Linear`, whose bias is one more
# input, scales by a constant, and calls `F.scaled_dot_product_attention` with a mask, or writes
# the same attention by hand with `masked_fill` and `torch.softmax`. Prism traces each of these
# into an ordinary kernel graph: the module's weight and bias become inputs, the scale an op
# attribute, the softmax the numerically safe one (the row's max subtracted first), and a
# boolean mask an additive mask input. Two spellings of one computation trace to one program, so
# the search sees one program whatever you wrote. Each trace is checked here against your torch
# code in float64, as in section 2.

# %%
import math

import torch.nn.functional as F


class ScaledProjection(torch.nn.Module):
    """0.5 · gelu(x Wᵀ + b): a Linear layer with its bias, an activation, a constant."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(64, 32)

    def forward(self, x):
        return 0.5 * F.gelu(self.proj(x))


torch.manual_seed(SEED)
projection = prism.from_module(ScaledProjection().eval(), torch.randn(8, 64))
ops = [op.kind for op in projection.graph.ops if op.kind not in ("input", "output")]
drawn = projection.random_inputs(SEED)
err = max_rel_err(prism.interpret(projection.graph, *projection.graph.to_ir(drawn)),
                  projection.reference(*drawn))
print(f"Linear + bias + scale: inputs {list(projection.graph.inputs)}, ops {ops}")
print(f"  traced graph vs the module (float64): max relative error {err:.1e}")

ATTENTION = {"Q": (1, 4, 16), "K": (1, 6, 16), "V": (1, 6, 16), "mask": (4, 6)}


@prism.workload(bool_inputs=("mask",), **ATTENTION)
def sdpa(Q, K, V, mask):
    """Attention as a library call: mask True where a query may attend."""
    return F.scaled_dot_product_attention(Q, K, V, attn_mask=mask)


@prism.workload(bool_inputs=("mask",), **ATTENTION)
def by_hand(Q, K, V, mask):
    """The same attention written out: scores, masked, softmax, values."""
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    return torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1) @ V


rows = []
for w in (sdpa, by_hand):
    drawn = w.random_inputs(SEED)
    err = max_rel_err(prism.interpret(w.graph, *w.graph.to_ir(drawn)), w.reference(*drawn))
    rows.append((w.name, str([op.kind for op in w.graph.ops if op.kind not in ("input", "output")]),
                 err))
table(rows, ["program", "ops", ("max relative error vs torch", ".1e")], note="float64")
print("one program:", [op.kind for op in sdpa.graph.ops] == [op.kind for op in by_hand.graph.ops])

# %% [markdown]
# ## 9. Attention over many keys: two kernels, and a safe softmax
#
# A decoder that generates text runs attention with a few query rows against a long cache of
# keys: here 8 queries against 4,096 keys with a head dim of 16 (`DECODE`; small, so it runs in
# seconds). A fused kernel that gives each block some query rows and lets it walk every key
# has at most 8 blocks, and most of the GPU sits idle (notebook `06`'s *SMs busy* column).
#
# The search fixes this without being told about attention. Its **split move**
# (`SearchConfig.split_loops`, on in a full run) takes every proved one-kernel program whose loop
# only sums and builds it again with the keys split across blocks: each block of a first kernel
# stores its partial sums, and a second kernel adds them up and divides. That is **split-key
# attention**, known as flash-decoding. A softmax that subtracts the row max first, the **safe
# softmax**, cannot be summed that way, since each part has its own max. Its split stores each
# part's max with the sums under it, and the second kernel rescales every part to the max of the
# maxes before adding: the **log-sum-exp split**.
#
# Here is one attention written two ways: the plain form, exp of the scores over their sum, as
# Prism's `attention` workload writes it; and `F.scaled_dot_product_attention`, which Prism traces
# into the safe softmax, as in section 8. The 1/√d scale is folded into `Q` (`scale=1.0`), as
# many decoders fold it into the query projection; the named workload `attention_safe` keeps it.
# Each is optimized with its vocabulary taken from its trace, as in section 3.

# %%
from prism.search import SearchConfig


@prism.workload(**DECODE)
def plain_decode(Q, K, V):
    """Attention as the paper's workloads write it: exp of the scores over their sum."""
    E = (Q @ K.transpose(-2, -1)).exp()
    return (E / E.sum(-1, keepdim=True)) @ V


@prism.workload(**DECODE)
def safe_decode(Q, K, V):
    """The same attention as a library call, with 1/√d already folded into Q."""
    return F.scaled_dot_product_attention(Q, K, V, scale=1.0)


def decode_config(w, max_block_ops, accumulators):
    """The program's own ops as the vocabulary (section 3), one grid dim, the split move on."""
    vocabulary = tuple(dict.fromkeys(op.kind for op in w.graph.ops
                                     if op.kind not in ("input", "output")))
    return SearchConfig(budget_s=BUDGET_S, block_ops=vocabulary, max_block_ops=max_block_ops,
                        accumulators=accumulators, max_accumulators=2, grid_dims=(1,),
                        split_loops=True)


decoded, one_kernel = {}, {}
for w, config in ((plain_decode, decode_config(plain_decode, 6, ("nored", "red_ld_sum"))),
                  (safe_decode, decode_config(safe_decode, 8, ("nored",)))):
    decoded[w.name] = opt = prism.superoptimize(w, device=DEVICE, measure="model",
                                                budget_s=BUDGET_S, search_config=config,
                                                max_trials=1, compile_ptx=False)
    found = opt.search.best
    one_kernel[w.name] = min((c for c in opt.search.equivalent
                              if c.num_kernels == 1 and c.modeled_us is not None),
                             key=lambda c: c.modeled_us)
    print(f"{w.name}: ops {list(config.block_ops)}")
    print(f"  the search's best: {found.id}, {found.num_kernels} kernels, "
          f"{found.modeled_us:.2f} µs modeled, proved for {found.verdict.sizes} sizes")
    print(f"  the best one-kernel program: {one_kernel[w.name].id}, "
          f"{one_kernel[w.name].modeled_us:.2f} µs modeled")
    if opt.best is None:
        print("  no kernel passed its check:", *opt.notes, sep="\n    ")
    else:
        print(f"  winner: {opt.best.config}, {opt.best.graph.num_kernels} kernels; "
              f"check: {check_text(opt.best.check)}")
print(f"attention_safe, the named workload: {prism.get_workload('attention_safe').program}")

# %% [markdown]
# For both forms the search's best program has two kernels, and it beats the best single kernel.
# They run in one launch: the second kernel is the first one's *tail*, run by the last block of
# each group of query rows to finish its part (a counter per group), so it pays a sync instead of
# a second launch.
# The plain form's is proved for every size (`symbolic`): its sums are split as they are. The
# safe form's is proved for the sizes the model chose (`concrete`): the rescaling meets the
# parts only once the number of parts is fixed, so the member is proved on its own.
#
# Why the split beats one kernel: the cost model's breakdown (notebook `06`), kernel by kernel, for
# the safe form's winner and its best single kernel at that kernel's best sizes.

# %%
from prism.cost import get_device, modeled as modeled_cost
from prism.ir.spec import substitute_graph

h100 = get_device(DEVICE)
alone = one_kernel["safe_decode"]
rows = []
for what, program in (("one kernel", substitute_graph(alone.graph, alone.assignment)),
                      ("split", decoded["safe_decode"].best.graph)):
    for k in modeled_cost(program, h100).kernels:
        rows.append((what, k.name, k.blocks, min(1, k.blocks / h100.sm_count), k.memory_us,
                     0.0 if k.kind == "tail" else h100.launch_us, k.latency_us))
table(rows, ["program", "kernel", "blocks", ("SMs busy", ".0%"), ("memory µs", ".3f"),
             ("launch µs", ".1f"), ("latency µs", ".3f")], note=f"modeled, {h100.name}")

# %% [markdown]
# The single kernel's few blocks stream all of `K` and `V` with a small share of the SMs, so its
# memory time is long. The split's first kernel has many more blocks and streams the same bytes
# in a fraction of the time; its second kernel, the tail, reads only the parts, in the same
# launch: no launch of its own (0 in the launch column), one sync instead (`sync_us`, in its
# latency). Together they finish first.
#
# The plain form's kernel failed its check, and so did the program itself run as PyTorch's
# kernels. The check ran them in fp16 on the inputs `.random_inputs(0)` draws. The plain form
# takes `exp` of the raw scores, and fp16 holds nothing above 65,504, whose log is about 11:

# %%
import numpy as np

checked = plain_decode.random_inputs(0)               # the inputs the check ran on
logits = checked[0] @ np.swapaxes(checked[1], -1, -2)
fp16_limit = math.log(torch.finfo(torch.float16).max)
print(f"largest score on the check's inputs: {logits.max():.2f}; "
      f"fp16's exp overflows above {fp16_limit:.2f}")
print(f"exp({logits.max():.2f}) in fp16:", torch.tensor(logits.max()).half().exp().item())

# %% [markdown]
# The safe form subtracts each row's max before `exp`, so every exponent is at most 0 and every
# `exp` at most 1, whatever the scores. That is why the frontend traces every softmax this way,
# and why its winner passed on the very inputs that broke the plain form. The proof of the plain
# form's split is still right: it is a proof about real numbers, and fp16 is not. The check is
# what catches the difference.

# %% [markdown]
# ## 10. What you can write
#
# Prism's vocabulary is its op table (`prism.ir.ops.OPS`): every op below can be fused into a
# custom kernel or run as a pre-defined kernel op, and each has axioms proved by z3, a Triton
# lowering and a torch one. The frontend accepts the spellings model code uses for them:
# `@`, `matmul`, `F.linear`, `addmm`; `+ - * /` with tensors or Python scalars on either side,
# `torch.add(alpha=)`, `rsub`; `torch.sigmoid`, `tanh`, `abs`, `log`, `exp`, `sqrt`, `rsqrt`,
# `F.silu`, `relu`, `gelu` (exact and `approximate="tanh"`), `leaky_relu`, `softplus`,
# `clamp` / `hardtanh` / `relu6`, `maximum`, `minimum`; `sum`, `mean`, `amax`, `amin`,
# `max(dim)`, `logsumexp` over a dim, a tuple of dims or all, `keepdim` either way;
# `F.rms_norm` / `F.layer_norm` with weight, bias and eps, `torch.norm`; `softmax` (with the row
# max subtracted) and `log_softmax`; `.T`, `.transpose`, `.permute` of an input, and `reshape` /
# `unsqueeze` / `view` that add or drop dims of 1. `prism.workload.from_module(module, x)` traces
# an `nn.Module`. Anything else is an `UnsupportedOpError` naming the op, your line and the
# nearest spelling.
#
# Your program runs in its own dtype: `@prism.workload(dtype="bfloat16", ...)` (float16, the
# default, bfloat16 or float32), or a module's own with `from_module`. Every stage counts that
# dtype's bytes, the kernel's PTX takes it, and the check holds the kernel to that dtype's
# tolerance (`prism.ir.dtypes`). An op that no block can hold at your shapes (a row of logits
# longer than a block's shared memory) runs as a pre-defined kernel while the ops around it are
# still fused: `result.to_json()["fusion"]["outside"]` names each such op and why.

# %%
from prism.ir.ops import BLOCK, OPS

table([(name, "kernel or block" if BLOCK in od.levels else "kernel",
        ",".join((*od.attrs, *od.optional)) or None, od.doc)
       for name, od in OPS.items() if od.compute], ["op", "where", "attributes", "computes"])

# %% [markdown]
# ## What to remember
#
# - `@prism.workload(X=..., ...)` turns a torch function into a program Prism can optimize. It
#   stays callable, `.graph` is its trace, and `.reference` is your function in float64, the
#   oracle for everything after.
# - Check the trace against your function before optimizing; then one `prism.superoptimize(...,
#   out=DIR)` (or `prism optimize file.py:function --out DIR`) gives a proved, checked fused
#   kernel as `kernel.py`, with PTX, the trace, a report and the result.
# - The exported module is ordinary Python: import it, call `run`, and compare it with your
#   function. On a CPU it runs in Triton's interpreter, and on a GPU it compiles.
# - What Prism cannot take, it names: an unsupported operator, shapes that do not fit, a missing
#   shape.
# - For attention over many keys the search's split move finds two kernels: split-key attention
#   for the plain form, the log-sum-exp split for the safe softmax. Only the safe form survives
#   fp16 scores above about 11.
