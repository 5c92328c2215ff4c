# %% [markdown]
# # 04b · Axioms and mutants: what a proof rests on, and what it refuses
#
# Notebook `04` proved the fused RMSNorm + MatMul kernel equal to its program: a chain of
# rewrites, each one an **axiom** applied at one subterm, re-checked by a separate checker. Such a
# proof is only as good as two things: the axioms it uses must be true, and a wrong kernel must
# fail to get one. This notebook tests both. It proves one axiom with the SMT solver z3 for every
# shape the IR allows and has z3 refute a plausible wrong one; then it makes every one-edit
# mutant of the kernel, lets the verifier judge each, and reproduces one counterexample by hand.
# It ends with a program of two kernels whose proof needs a *regrouping* axiom, what the verifier
# says when that axiom is missing, and how axiom discovery finds it again.
#
# If a word is new to you, look it up in the [glossary](GLOSSARY.md).

# %% tags=["parameters"]
SHAPES = {"X": (8, 64), "W": (64, 64)}
AXIOM = "matmul-k-partial-sums"            # the axiom whose own proof section 1 shows
SMT_TIMEOUT_MS = 5000                       # per z3 query
MUTANT = "accumulator red_ld_rms → red_ld_mean"   # the wrong kernel section 2 looks at
CHECK_AT = {"gx": 4, "F": 2}                # one member, to test the mutant at a real split
SHOW_SOLUTIONS = False                      # True: run the exercise's solution cell (make test does)

# %% [markdown]
# The program and the fused kernel of notebook `04`, with the kernel's grid size `gx` and loop
# range `F` left symbolic:

# %%
from collections import Counter
from dataclasses import replace

import prism
from prism.expr.axioms import AXIOMS, AXIOMS_BY_NAME
from prism.verify.equiv import verify
from prism.workloads.known_best import known_best

workload = prism.get_workload("rmsnorm_matmul").with_shapes(**SHAPES)
unfused = workload.graph
fused = known_best("rmsnorm_matmul", SHAPES, grid="gx", loop="F")
print(f"target {workload.program}; candidate {fused.num_kernels} custom kernel, sizes symbolic")

# %% [markdown]
# ## 1. Where an axiom's soundness comes from
#
# A proof is only as good as its axioms. Every axiom in the table records the kind of its
# evidence: `smt` means that z3 proved it over unbounded tensors, with every size symbolic.
# Tensors are functions from integer indices to the reals, and sums obey the laws of finite sums
# (see `prism/smt.py`). `random` would mean a float64 check only. The table today:

# %%
groups = Counter(ax.group for ax in AXIOMS)
print(f"{len(AXIOMS)} axioms, evidence {dict(Counter(ax.evidence for ax in AXIOMS))}; by group: "
      + ", ".join(f"{g} {n}" for g, n in groups.items()))

# %% [markdown]
# Take the axiom that undid the loop in the first step of notebook `04`'s proof. An axiom is a
# pattern over *any* tensors, so z3 cannot check it once. Instead `generic_instances` enumerates every shape situation that the
# condition admits: every rank the IR allows (1 to 4, `prism.ir.graph.MAX_RANK`; a matmul needs
# at least 2), every dim index, each dim either literally 1 or a symbolic size. Dims that play the
# same part are taken in one order only, since another order states the same identity. z3 proves
# the identity for each situation, for all values and all sizes. The first lines below show a few
# of those situations, and which ranks they cover.

# %%
from prism.expr.instances import generic_instances
from prism.smt import prove_axiom

axiom = AXIOMS_BY_NAME[AXIOM]
print(f"{axiom.name}: {axiom.lhs} = {axiom.rhs}")
print(f"  {axiom.statement}; condition {axiom.condition}; table evidence {axiom.evidence}")
instances = list(generic_instances(axiom))
for inst in instances[:4]:
    print("  e.g.", inst.describe())
print("  ranks of the instances' tensors:",
      sorted({len(info.shape) for inst in instances for info in inst.leaves.values()}))
smt = prove_axiom(axiom, timeout_ms=SMT_TIMEOUT_MS)
print(f"z3: {smt.status}, {smt.instances} of {len(instances)} instances: {smt.detail}")

# %% [markdown]
# Proving the axioms also catches wrong ones, and a wrong axiom would make every proof that uses
# it worthless. Here is a slip that is easy to make when writing the RMS accumulator's rule: use
# the *sum* of the chunks' means where their *mean* belongs. z3 refutes it, and because sums are
# uninterpreted in its encoding, the refutation is confirmed by a float64 counterexample at the
# sizes z3 suggested. The left side comes out `ga` times the right, as it must.

# %%
wrong = replace(AXIOMS_BY_NAME["mean-of-chunk-means"], name="mean-of-chunk-sums",
                lhs="(mean (red (part ?t ?d ?g) ?g) ?d)")
wrong_smt = prove_axiom(wrong, timeout_ms=SMT_TIMEOUT_MS)
print(f"{wrong.name}: {wrong.lhs} = {wrong.rhs}")
print(f"z3: {wrong_smt.status}: {wrong_smt.detail}")
print(f"counterexample: {wrong_smt.model}")

# %% [markdown]
# ## 2. A wrong kernel and its counterexample
#
# Now the other direction: a candidate that is *not* equivalent. `prism.verify.mutate` makes
# every one-edit mutant of the fused kernel: a wrong map entry, a wrong accumulator, swapped
# operands, an extra op. The verifier's answer for each is below. The wrong maps, and one wrong
# accumulator, change the output's shape, so the spec check calls them `invalid` before any proof
# is tried. The others are well formed but compute something else.

# %%
from _tables import table
from prism.verify.mutate import mutants

judged = [(m, verify(unfused, m.graph)) for m in mutants(fused)]
rows = []
for m, v in judged:
    where, edit = m.description.split(": ", 1)
    rows.append(("block op " + where.split()[2], edit, v.verdict,
                 v.reason if v.verdict == "invalid" else v.method))
table(rows, ["where", "edit", "verdict", "how"])

# %% [markdown]
# Take the wrong accumulator, the slip notebook `01` caught by comparing with torch by hand.
# The verifier finds it without being told what to expect. First it tries to prove the mutant:
# the e-graph *saturates* (no axiom adds anything new) without the terms meeting. That alone is
# not proof of a bug, since the axioms might simply be too weak. So random testing decides. The
# mutant and the target run in the float64 interpreter on the same random inputs, and the first
# element that differs is the counterexample.

# %%
mutant, refuted = next((m, v) for m, v in judged if MUTANT in m.description)
print(f"{mutant.description}: {refuted.verdict} ({refuted.method})")
print("why:", refuted.reason)
cex = refuted.counterexample
for key, value in cex.items():
    print(f"  {key:<13} {f'{value:.6g}' if isinstance(value, float) else value}")

# %% [markdown]
# A counterexample should be reproducible by anyone. It records the assignment of the sizes, the
# seed of the inputs and the index of the differing element. We redraw the inputs from the seed
# and run both graphs in the interpreter, and torch as well. Then we test the mutant once more at
# a member that really splits the work (`CHECK_AT`), since `gx = F = 1` means one block and one
# iteration.

# %%
from prism.verify import float_inputs, random_test

shapes = [tuple(d.value for d in unfused.shape(t)) for t in unfused.inputs]
arrays = float_inputs(shapes, cex["seed"])
index = (cex["output"], *cex["index"])
expected = prism.interpret(unfused, *arrays)
got = prism.interpret(mutant.graph, *arrays, assignment=cex["assignment"])
torch_value = workload.reference(*arrays)[index[0]][index[1:]]
print(f"inputs: X{list(arrays[0].shape)}, W{list(arrays[1].shape)} standard normal, seed "
      f"{cex['seed']}; X[0, :4] = {arrays[0][0, :4].round(4)}")
print(f"output {index[0]} at {list(index[1:])}: target {expected[index[0]][index[1:]]:.6f} "
      f"(torch {torch_value:.6f}), mutant {got[index[0]][index[1:]]:.6f}")
again = random_test(unfused, mutant.graph, assignments=[CHECK_AT])
print(f"random testing at {CHECK_AT}: equal {again.equal}, "
      f"{again.counterexample.mismatches if again.counterexample else 0} elements differ")


# %% [markdown]
# The proof view of notebook `04`, given the mutant's verdict instead of a proof, shows its
# counterexample:

# %%
from widgets.proof import ProofView

ProofView(refuted.to_json())

# %% [markdown]
# ## 3. Two kernels: regrouping axioms, an `unknown`'s gap, and discovery
#
# Mirage's own split-key attention programs (`shared/external/mirage_mugraphs/gqa_bs1.json`)
# are two kernels. Kernel 1 splits the keys over 8 blocks and writes one partial numerator and
# denominator per block, concatenated. Kernel 2 sums them, but in its own grouping: in graph 1
# it loops 4 times over chunks of 2 partials, then sums the 2. Relating the two groupings takes
# a *regrouping* axiom: a concatenation of |g| = |f|·|k| chunks, split into |f| parts that are
# summed and then into |k| chunks that are summed, sums the |g| chunks. Its condition ties the
# axes' sizes, so it holds where the graph fixes them (a concrete proof).

# %%
from prism.workloads import mirage_corpus

folder = mirage_corpus.default_folder()
if folder is None:
    print("Mirage's corpus is not beside the repository: this section needs "
          "shared/external/mirage_mugraphs (or $PRISM_MIRAGE_CORPUS)")
else:
    gqa = {name: (t, g) for name, t, g in mirage_corpus.pairs(folder) if name.startswith("gqa")}
    gqa_target, two_kernels = gqa["gqa_bs1[1]"]
    proved = verify(gqa_target, two_kernels)
    regroup = [s for s in proved.steps[0] if AXIOMS_BY_NAME[s.rule].group == "regrouping"]
    print(f"gqa_bs1[1]: {proved.verdict}, {proved.proof_steps} steps, sizes {proved.sizes}")
    for s in regroup:
        print(f"  {s.rule}: {s.before.at(s.path)}")
        print(f"    ⇒ {s.after.at(s.path)}")
    print("discovered axioms in the table:",
          ", ".join(a.name for a in AXIOMS if a.origin == "discovered"))

# %% [markdown]
# What if that axiom were missing? The e-graph saturates without the terms meeting, so the
# verdict is `unknown`. It also says *where* the terms came closest: following the two e-classes
# down while some e-node of each has the same head and all children equal but one pair (of the
# same shape), it reaches the pair no axiom joined. That pair is the identity to write.

# %%
if folder is not None:
    without = [a.rule() for a in AXIOMS if a.name != "red-regroup"]
    stuck = verify(gqa_target, two_kernels, table=without)
    print(f"without red-regroup: {stuck.verdict}")
    print(f"  candidate side: {stuck.gap['candidate']}")
    print(f"  target side:    {stuck.gap['target']}")

# %% [markdown]
# Axiom discovery (`prism axioms discover`, after Axon) proposes identities from templates: each
# op through each data-movement head, ops through each other, reductions over a dim of size 1,
# and regroupings of split data under each relation of the axes' sizes. z3 decides each one, a
# refuted one keeps its counterexample, and every new one is tried on the graphs the table
# leaves unproven. Run against the table without its regrouping group, it finds that group again,
# and the graph above with it.

# %%
if folder is not None:
    from prism.expr.discover import discover

    report = discover(prove_axiom, ("sum",), templates=("regrouping",),
                      without=("regrouping",), corpus=[("gqa_bs1[1]", gqa_target, two_kernels)],
                      check=lambda t, g, table: verify(t, g, table=table).verdict ==
                      "equivalent")
    print(report.text())

# %% [markdown]
# ## 4. Exercise: predict z3's counterexample
#
# Notebook `04`'s toy rewrite `(x*2)/2 → x` is sound. Its generalisation `(x*y)/y → x` is not,
# and z3 will say so. Before asking it, predict: over the real numbers, at which value of `y` does
# `(x*y)/y = x` fail? Write it as `y_counter`. The check asks z3 for a counterexample (with
# `x` and `y` real), compares z3's `y` with yours, asks z3 whether any counterexample has another
# `y`, and evaluates both sides in float64 numpy at your `y`.

# %%
y_counter = None     # your prediction: a number

# %% jupyter={"source_hidden":true}
if SHOW_SOLUTIONS:
    y_counter = 0.0   # x/y is defined for every y but 0; z3 leaves x/0 unconstrained


# %%
import numpy as np
import z3


def check_y_counter(y_value):
    """The oracles: z3 over the reals, and float64 numpy."""
    x, y = z3.Reals("x y")
    solver = z3.Solver()
    solver.add((x * y) / y != x)
    assert solver.check() == z3.sat, "z3 found no counterexample at all"
    z3_y = solver.model()[y].as_fraction()
    solver.add(y != z3.RealVal(str(y_value)))
    assert solver.check() == z3.unsat, f"z3 finds a counterexample with y ≠ {y_value}"
    with np.errstate(all="ignore"):
        xs = np.array([1.5, -3.0, 7.25])
        assert not np.array_equal(xs * y_value / y_value, xs), f"float64 agrees at y = {y_value}"
    return z3_y


if y_counter is None:
    print("exercise: write y_counter above, or set SHOW_SOLUTIONS = True")
else:
    print(f"exercise passed: y = {y_counter}; z3's counterexample has y = "
          f"{check_y_counter(y_counter)}, and no other y has one")

# %% [markdown]
# ## What to remember
#
# - Each axiom carries its own evidence: z3 proves it for all shapes and values, and it refutes
#   a plausible wrong one.
# - A candidate without a proof is not assumed wrong. Random testing looks for a counterexample
#   that anyone can reproduce from its seed and sizes.
# - An `unknown` names its gap, the two subterms no axiom joined; discovery proposes identities,
#   z3 decides them, and the corpus shows which graphs each one proves.
