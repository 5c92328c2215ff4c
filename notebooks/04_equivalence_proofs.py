# %% [markdown]
# # 04 · Equivalence proofs: why a fused kernel is right
#
# A superoptimizer proposes thousands of programs, and most of them are wrong. Testing a candidate
# on random inputs can show that it is wrong, but never that it is right for every input, every
# grid size and every loop range. Prism therefore **proves** each candidate it keeps. It writes
# both programs as algebraic terms in which data movement is explicit, and it rewrites one into
# the other with *axioms*: small identities of tensor algebra and of splitting and combining
# tensors. The chain of rewrites is the proof.
#
# This notebook takes the fused RMSNorm + MatMul kernel of notebooks `01` and `02` apart, proof
# first. It turns both programs into terms, grows an **e-graph** (the data structure that finds
# the chain) one iteration at a time, and reads the proof step by step. Then it checks the proof
# with a separate checker, looks at how one axiom is itself proved by the SMT solver z3, and ends
# with a wrong kernel that the verifier refutes with a counterexample.
#
# If a word is new to you, look it up in the [glossary](GLOSSARY.md).

# %% tags=["parameters"]
SHAPES = {"X": (8, 64), "W": (64, 64)}
AXIOM = "matmul-k-partial-sums"            # the axiom whose own proof section 5 shows
SMT_TIMEOUT_MS = 5000                       # per z3 query
MUTANT = "accumulator red_ld_rms → red_ld_mean"   # the wrong kernel section 6 looks at
CHECK_AT = {"gx": 4, "F": 2}                # one member, to test the mutant at a real split
MAX_ITERATIONS = 30
SEED = 0
SHOW_SOLUTIONS = False                      # True: run the exercise's solution cell (make test does)

# %% [markdown]
# ## 1. Programs as terms
#
# The target is the unfused program, `rms_norm(X) @ W`. The candidate is the fused kernel with
# its grid size `gx` and loop range `F` left as symbols (notebook `02`), so that one proof covers
# every member. `prism.verify.translate` turns each into a term, one per output.
#
# In the candidate's term, the block graph's data movement becomes explicit:
#
# - `(part T d g)` splits data dim `d` of `T` into `g` pieces, one per block (or per loop
#   iteration); `(rep T g)` gives every block the whole of `T`. These are the imap and fmap.
# - `(red T g)` sums the pieces along `g`, `(mred T g)` averages them. These are the loop
#   accumulators.
# - `(comb T d g)` concatenates the blocks' pieces along dim `d`. This is the omap.
#
# Compute ops (`matmul`, `div`, `sqrt`, `mean`, `square`) keep their meaning. Read the tree below
# from the leaves up: `X` is replicated over the grid and split over the loop along its dim 1;
# `W` is split by columns over the grid and by rows over the loop.

# %%
import prism
from prism.verify.translate import translate
from prism.workloads.known_best import known_best

workload = prism.get_workload("rmsnorm_matmul").with_shapes(**SHAPES)
unfused = workload.graph
fused = known_best("rmsnorm_matmul", SHAPES, grid="gx", loop="F")
target = translate(unfused)
candidate = translate(fused, input_names=target.inputs)   # the fused kernel over X and W
(unfused_term,), (fused_term,) = target.terms, candidate.terms
print("target:   ", unfused_term)
print("candidate:", fused_term)


def tree(term, depth=0):
    """Print a term as an indented tree; short subterms stay on one line."""
    if len(str(term)) <= 28:
        print("  " * depth + str(term))
        return
    atoms = " ".join(a.head for a in term.args if a.is_leaf)
    print("  " * depth + term.head + (f"   [{atoms}]" if atoms else ""))
    for a in term.args:
        if not a.is_leaf:
            tree(a, depth + 1)


print()
tree(fused_term)

# %% [markdown]
# ## 2. An e-graph, one iteration at a time
#
# An **e-graph** stores many equal terms at once. Its nodes are grouped into *e-classes*, and
# every node in one class stands for the same value. We add both terms, each in its own classes,
# and apply every axiom everywhere it matches. Each match adds the rewritten term and merges its
# class with the original's. Nothing is ever deleted, so no rewrite can lead the search astray.
# We stop when the two terms' classes meet.
#
# First a toy, to see the machinery: an e-graph for `(a*2)/2` and the one rewrite
# `(x*2)/2 → x`. It needs three things:
#
# - **union-find**: every e-class is a number, and `parent` links merged classes; `find` follows
#   the links to the class's representative, so merging two classes is one assignment;
# - a **hashcons**: a table from each e-node, an op over its children's classes, to its class, so
#   that the same node added twice is stored once (`add` looks there first);
# - the rewrite: find every match first, then merge each match's class with the class of what
#   it rewrites to.
#
# Terms are a leaf name or a tuple `(op, *operands)`.

# %%
class ToyEGraph:
    """Union-find over e-class ids, a hashcons of e-nodes, and each class's nodes."""

    def __init__(self):
        self.parent = []         # union-find: a class id's parent; a representative is its own
        self.hashcons = {}       # e-node (op, child classes) -> the class it was added to
        self.nodes = {}          # representative -> its e-nodes

    def find(self, c):
        while self.parent[c] != c:
            c = self.parent[c]
        return c

    def add(self, term):
        op, args = (term, ()) if isinstance(term, str) else (term[0], term[1:])
        node = (op, tuple(self.add(a) for a in args))
        if node not in self.hashcons:                 # a new node gets a new class
            self.parent.append(len(self.parent))
            self.hashcons[node] = self.parent[-1]
            self.nodes[self.parent[-1]] = [node]
        return self.find(self.hashcons[node])

    def union(self, a, b):
        a, b = self.find(a), self.find(b)
        if a != b:                                     # b's class joins a's; nothing is deleted
            self.parent[b] = a
            self.nodes[a] += self.nodes.pop(b)


def cancel_times_two(eg):
    """The rewrite (x*2)/2 → x wherever it matches; returns how many merges it made."""
    two, matches = eg.add("2"), []
    for c, nodes in eg.nodes.items():                 # find every match first ...
        for op, kids in nodes:
            if op == "div" and eg.find(kids[1]) == two:
                for op2, kids2 in eg.nodes[eg.find(kids[0])]:
                    if op2 == "mul" and eg.find(kids2[1]) == two:
                        matches.append((c, kids2[0]))
    merges = 0
    for c, x in matches:                              # ... then merge
        merges += eg.find(c) != eg.find(x)
        eg.union(c, x)
    return merges


toy = ToyEGraph()
expr, a_class = toy.add(("div", ("mul", "a", "2"), "2")), toy.add("a")
print(f"before: {sum(map(len, toy.nodes.values()))} e-nodes in {len(toy.nodes)} e-classes; "
      f"(a*2)/2 and a in one class: {toy.find(expr) == toy.find(a_class)}")
print(f"the rewrite merged {cancel_times_two(toy)} pair(s) of classes")
toy_verdict = toy.find(expr) == toy.find(a_class)
print(f"after:  {sum(map(len, toy.nodes.values()))} e-nodes in {len(toy.nodes)} e-classes; "
      f"(a*2)/2 and a in one class: {toy_verdict}")
for c, nodes in toy.nodes.items():
    print(f"  class {c}: " + ", ".join(f"{op}({', '.join(f'class {toy.find(k)}' for k in kids)})"
                                       if kids else op for op, kids in nodes))

# %% [markdown]
# After the merge, class of `a` holds two e-nodes, the leaf `a` and the division, and the
# product `a*2` is still there: the e-graph has *added* an equality, not replaced a term. A real
# e-graph does more (after a merge it restores *congruence*: two nodes with the same op over
# equal classes must share a class, which the toy skips because one rewrite at the root never
# breaks it), but it concludes the same. Prism's `EGraph`, given the same rewrite as a `Rule`:

# %%
from prism.expr import EGraph
from prism.expr.rules import Rule
from prism.expr.terms import parse

engine = EGraph()
top, leaf = engine.add(parse("(div (mul a 2) 2)")), engine.add(parse("a"))
print(engine.run([Rule("times-two-cancels", "(div (mul ?x 2) 2)", "?x")]))
engine_verdict = engine.find(top) == engine.find(leaf)
same = (toy_verdict, sum(map(len, toy.nodes.values())), len(toy.nodes)) == \
    (engine_verdict, engine.num_nodes, engine.num_classes)
assert same, "the toy and the engine disagree"      # the oracle: the engine's e-graph
print(f"engine: (a*2)/2 and a in one class: {engine_verdict}; the toy agrees: {same}")

# %% [markdown]
# Now the real thing, on the two programs.
#
# `EGraph.run(..., iter_limit=1)` runs one round of matching and merging and returns a report.
# The table shows each round: the e-graph's size, and the axioms whose rewrites merged two classes
# (with how many merges each). Watch the order. The axioms that undo the loop
# (`matmul-k-partial-sums`, `mean-of-chunk-means`) and the grid (`matmul-cols`, the `-rep` rules)
# fire in the first rounds, each once an earlier rewrite has made its pattern appear.
# `comb-part`, which undoes the output's concatenation, fires last, and the terms meet.

# %%
from prism.expr.axioms import AXIOMS, AXIOMS_BY_NAME, rules
from prism.expr.tensor_terms import TensorAnalysis

table = rules()        # every axiom of the table, as an e-graph rewrite rule
analysis = TensorAnalysis({t: unfused.shape(t) for t in unfused.inputs})   # shapes of X and W
egraph = EGraph(analysis)
a, b = egraph.add(fused_term), egraph.add(unfused_term)
print(f"{len(table)} axioms; the two terms start with {egraph.num_nodes} e-nodes in "
      f"{egraph.num_classes} e-classes\n")
print(f"{'iteration':>9} {'e-nodes':>7} {'e-classes':>9}  met?  merges by axiom")
met, iteration = False, 0
while not met and iteration < MAX_ITERATIONS:
    report = egraph.run(table, iter_limit=1)
    iteration += 1
    met = egraph.find(a) == egraph.find(b)
    fired = ", ".join(f"{name} ×{n}" if n > 1 else name
                      for name, n in report.applied.items() if n)
    print(f"{iteration:>9} {report.nodes:>7} {report.classes:>9}  {'yes' if met else 'no ':<4}"
          f"  {fired or '(nothing new)'}")
print(f"\nthe terms met after {iteration} iterations" if met else "\nthe terms did not meet")

# %% [markdown]
# The e-graph stays small: a few dozen nodes. The axioms carry conditions on shapes, which the
# tensor analysis checks. `matmul-cols` applies only when it is `B`'s *last* dim that is split,
# and that keeps most rewrites from firing at all.
#
# The class where the two terms met now holds both programs and the ones in between. Its nodes
# are listed below, each as a head over child classes. `extract` picks the smallest term in the
# class, which is the unfused program.

# %%
root = egraph.find(b)
print(f"class {root}:")
for node in egraph.nodes(root):
    print(f"  {node.head}({', '.join(f'class {egraph.find(c)}' for c in node.children)})")
print("smallest term in the class:", egraph.extract(root))

# %% [markdown]
# ## 3. Reading the proof
#
# The e-graph remembers why it merged each pair of classes. `explain` turns that record into a
# flat proof: a list of whole terms from the candidate to the target, each obtained from the last
# by **one** axiom applied at **one** subterm. Each line below names the axiom (`→` forward, `←`
# right to left) and shows the subterm it rewrote and what that became.
#
# Read it as a story. Steps 1 and 2 remove the loop from the matmul (the partial products over
# the loop's chunks of `d` add up to the whole product) and then the grid (each block's columns
# are the product's columns). The next steps do the same for the row RMS, which ends up
# computed once, replicated to every block. Then the division moves inside the split, the
# algebra turns `(X W) / rms` into `rms_norm(X) W`, and `comb-part` undoes the split of the
# output.

# %%
from prism.verify.equiv import show_proof, verify

steps = egraph.explain(fused_term, unfused_term)
print(show_proof(tuple(steps)))

# %% [markdown]
# One step, in full. A step is a value: the axiom, its direction, the *path* to the rewritten
# subterm (argument indices from the root of the whole term), and the substitution that
# instantiates the axiom's pattern variables (`?a`, `?g`, ...). In the whole term, the rewritten
# subterm is wrapped in `(Rewrite=> ...)`.

# %%
first = steps[0]
axiom = AXIOMS_BY_NAME[first.rule]
print(f"axiom:      {axiom.name}: {axiom.lhs}  =  {axiom.rhs}")
print(f"            {axiom.statement}; condition {axiom.condition}")
print(f"path:       {first.path}")
print(f"rewrote:    {first.before.at(first.path)}")
print(f"into:       {first.after.at(first.path)}")
print("binding:    " + ", ".join(f"{var} ↦ {t}" for var, t in first.subst.items()))
print(f"marked:     {first}")

# %% [markdown]
# `prism.verify` does all of the above in one call: translate, saturate with limits, explain.
# It also reports whether the sizes stayed symbolic, which means the proof holds for every grid
# size and loop range. Its proof is the one we just built by hand:

# %%
verdict = verify(unfused, fused)
print(f"{verdict.verdict} by {verdict.method}: {verdict.proof_steps} steps, "
      f"sizes {verdict.sizes}")
print("e-graph:", verdict.report)
print("same steps as ours:", [s.rule for s in verdict.steps[0]] == [s.rule for s in steps])

# %% [markdown]
# ## 4. Checking the proof without the e-graph
#
# Why trust the e-graph? We do not have to. `check_explanation` is a separate checker of about
# a hundred lines. It uses only terms and the axiom table, never the e-graph. For every step it
# checks that the axiom's side, instantiated with the step's substitution, *is* the subterm at the
# path. It also checks that replacing it gives the next term, that the axiom's condition holds,
# and that the chain runs from the candidate to the target. The verifier runs it on every proof
# before returning it.
#
# A checker must also reject bad proofs. Below, one step is swapped for a plausible neighbour:
# `sum-of-chunk-sums` instead of `mean-of-chunk-means`. Then one step is dropped altogether.
# Each message names the step that fails; the checker counts steps from 0, the proof above
# from 1.

# %%
from dataclasses import replace

from prism.errors import ProofCheckError
from prism.expr import check_explanation

check_explanation(steps, table, fused_term, unfused_term, analysis)
print(f"the {len(steps)}-step proof checks")
swapped = next(i for i, s in enumerate(steps) if s.rule == "mean-of-chunk-means")
tampered = {
    f"step {swapped + 1} claims sum-of-chunk-sums":
        [*steps[:swapped], replace(steps[swapped], rule="sum-of-chunk-sums"),
         *steps[swapped + 1:]],
    f"step {swapped + 1} dropped": [*steps[:swapped], *steps[swapped + 1:]],
}
for what, bad in tampered.items():
    try:
        check_explanation(bad, table, fused_term, unfused_term, analysis)
        print(f"{what}: accepted (this would be a bug in the checker)")
    except ProofCheckError as e:
        print(f"{what}: rejected: {e}")

# %% [markdown]
# ## 5. Where an axiom's soundness comes from
#
# A proof is only as good as its axioms. Every axiom in the table records the kind of its
# evidence: `smt` means that z3 proved it over unbounded tensors, with every size symbolic.
# Tensors are functions from integer indices to the reals, and sums obey the laws of finite sums
# (see `prism/smt.py`). `random` would mean a float64 check only. The table today:

# %%
from collections import Counter

groups = Counter(ax.group for ax in AXIOMS)
print(f"{len(AXIOMS)} axioms, evidence {dict(Counter(ax.evidence for ax in AXIOMS))}; by group: "
      + ", ".join(f"{g} {n}" for g, n in groups.items()))

# %% [markdown]
# Take the axiom that undid the loop in step 1. An axiom is a pattern over *any* tensors, so z3
# cannot check it once. Instead `generic_instances` enumerates every shape situation that the
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
# ## 6. A wrong kernel and its counterexample
#
# Now the other direction: a candidate that is *not* equivalent. `prism.verify.mutate` makes
# every one-edit mutant of the fused kernel: a wrong map entry, a wrong accumulator, swapped
# operands, an extra op. The verifier's answer for each is below. The wrong maps, and one wrong
# accumulator, change the output's shape, so the spec check calls them `invalid` before any proof
# is tried. The others are well formed but compute something else.

# %%
from prism.verify.mutate import mutants

judged = [(m, verify(unfused, m.graph)) for m in mutants(fused)]
print(f"{'where':<11} {'edit':<38} {'verdict':<15} how")
for m, v in judged:
    where, edit = m.description.split(": ", 1)
    how = v.reason if v.verdict == "invalid" else v.method
    print(f"{'block op ' + where.split()[2]:<11} {edit:<38} {v.verdict:<15} {how}")

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
# ## 7. The proof widget
#
# `widgets.proof.ProofView` shows the same proof as the workbench's candidates tab does. Each
# step's rewritten subterm is marked in the term before and after it, with the axiom's statement
# and evidence. Below the steps is a picture of the e-graph around the class where the programs
# met. Given the mutant's verdict, the view shows its counterexample instead.

# %%
from widgets.proof import ProofView

ProofView(verdict.to_json())

# %%
ProofView(refuted.to_json())

# %% [markdown]
# ## 8. Two kernels: regrouping axioms, an `unknown`'s gap, and discovery
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
# ## 9. Exercise: predict z3's counterexample
#
# The toy rewrite `(x*2)/2 → x` is sound. Its generalisation `(x*y)/y → x` is not, and z3 will
# say so. Before asking it, predict: over the real numbers, at which value of `y` does
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
# - The verifier writes both programs as terms in which every split, copy, sum and
#   concatenation is explicit. Grid and loop sizes stay symbols, so one proof covers every
#   member of an sGraph.
# - An e-graph applies every axiom everywhere, keeps all results, and stops when the two terms
#   share a class. The proof is the chain of rewrites it recorded, and a separate checker replays
#   it with terms alone.
# - Each axiom carries its own evidence: z3 proves it for all shapes and values, and it refutes
#   a plausible wrong one.
# - A candidate without a proof is not assumed wrong. Random testing looks for a counterexample
#   that anyone can reproduce from its seed and sizes.
# - An `unknown` names its gap, the two subterms no axiom joined; discovery proposes identities,
#   z3 decides them, and the corpus shows which graphs each one proves.
