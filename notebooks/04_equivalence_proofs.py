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
# This notebook has one idea: **a proof is a chain of rewrites that anyone can replay**. It
# takes the fused RMSNorm + MatMul kernel of notebooks `01` and `02`, turns it and its program
# into terms, builds a toy **e-graph** (the data structure that finds the chain) and then grows
# the real one iteration by iteration, reads the proof step by step, and checks it with a
# separate checker that knows nothing of e-graphs. Notebook `04b` asks what the proof rests on:
# where the axioms' own evidence comes from, and what happens to a kernel that is wrong.
#
# If a word is new to you, look it up in the [glossary](GLOSSARY.md).

# %% tags=["parameters"]
SHAPES = {"X": (8, 64), "W": (64, 64)}
CHECK_AT = {"gx": 4, "F": 2}                # one member (the tests evaluate the proof's terms there)
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
from _tables import table
from prism.expr.axioms import AXIOMS_BY_NAME, rules
from prism.expr.tensor_terms import TensorAnalysis

axiom_rules = rules()        # every axiom of the table, as an e-graph rewrite rule
analysis = TensorAnalysis({t: unfused.shape(t) for t in unfused.inputs})   # shapes of X and W
egraph = EGraph(analysis)
a, b = egraph.add(fused_term), egraph.add(unfused_term)
print(f"{len(axiom_rules)} axioms; the two terms start with {egraph.num_nodes} e-nodes in "
      f"{egraph.num_classes} e-classes\n")
growth, met = [], False
while not met and len(growth) < MAX_ITERATIONS:
    report = egraph.run(axiom_rules, iter_limit=1)
    met = egraph.find(a) == egraph.find(b)
    fired = ", ".join(f"{name} ×{n}" if n > 1 else name
                      for name, n in report.applied.items() if n)
    growth.append((len(growth) + 1, report.nodes, report.classes, "yes" if met else "no",
                   fired or "(nothing new)"))
table(growth, ["iteration", "e-nodes", "e-classes", "met?", "merges by axiom"])
iteration = len(growth)
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

check_explanation(steps, axiom_rules, fused_term, unfused_term, analysis)
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
        check_explanation(bad, axiom_rules, fused_term, unfused_term, analysis)
        print(f"{what}: accepted (this would be a bug in the checker)")
    except ProofCheckError as e:
        print(f"{what}: rejected: {e}")

# %% [markdown]
# ## 5. The proof widget
#
# `widgets.proof.ProofView` shows the same proof as the workbench's candidates tab does. Each
# step's rewritten subterm is marked in the term before and after it, with the axiom's statement
# and evidence. Below the steps is a picture of the e-graph around the class where the programs
# met. (Given a refuted kernel's verdict, it shows the counterexample instead: notebook `04b`.)

# %%
from widgets.proof import ProofView

ProofView(verdict.to_json())


# %% [markdown]
# ## 6. Exercise: the axiom a proof is missing
#
# Back to the toy. With the one rule `(x*2)/2 → x`, the engine's e-graph cannot show that
# `((a*1)*2)/2` equals `a`: the rule turns it into `a*1`, and nothing says that `a*1` is `a`.
# Write the missing identity as a `Rule` (`Rule(name, lhs, rhs)`, patterns in the notation of
# section 2, pattern variables written `?x`) and call it `my_rule`. The check runs the engine with
# both rules and asks that the two terms meet; replays the proof that `explain` gives with
# `check_explanation`, the independent checker of section 4; and asks z3 to prove your rule over
# the real numbers, so that a rule that closes the proof by being wrong is refused.

# %%
from prism.expr.rules import Rule

my_rule = None        # your rule: Rule("name", "(pattern ...)", "(pattern ...)")

# %% jupyter={"source_hidden":true}
if SHOW_SOLUTIONS:
    my_rule = Rule("times-one", "(mul ?x 1)", "?x")       # x*1 -> x


# %%
import z3

TIMES_TWO = Rule("times-two-cancels", "(div (mul ?x 2) 2)", "?x")
EXERCISE_TERM, EXERCISE_GOAL = parse("(div (mul (mul a 1) 2) 2)"), parse("a")


def as_real(term, names):
    """A pattern's term as a z3 real expression (mul, div, add, sub; numbers; ?x a real)."""
    if term.is_leaf:
        head = term.head
        if head.lstrip("-").replace(".", "", 1).isdigit():
            return z3.RealVal(head)
        return names.setdefault(head, z3.Real(head.lstrip("?")))
    ops = {"mul": lambda x, y: x * y, "div": lambda x, y: x / y,
           "add": lambda x, y: x + y, "sub": lambda x, y: x - y}
    assert term.head in ops and len(term.args) == 2, f"the check reads only {sorted(ops)}"
    return ops[term.head](*(as_real(arg, names) for arg in term.args))


def check_my_rule(rule):
    """The oracles: the independent proof checker, and z3 on the rule's identity."""
    toy_engine = EGraph()
    start, goal = toy_engine.add(EXERCISE_TERM), toy_engine.add(EXERCISE_GOAL)
    toy_engine.run([TIMES_TWO, rule])
    assert toy_engine.find(start) == toy_engine.find(goal), "the terms did not meet"
    proof = toy_engine.explain(EXERCISE_TERM, EXERCISE_GOAL)
    check_explanation(proof, [TIMES_TWO, rule], EXERCISE_TERM, EXERCISE_GOAL)
    names = {}
    lhs, rhs = as_real(rule.lhs.term, names), as_real(rule.rhs.term, names)
    solver = z3.Solver()
    solver.add(lhs != rhs)
    assert solver.check() == z3.unsat, f"z3 refutes {rule.name}: {solver.model()}"
    return proof


if my_rule is None:
    print("exercise: write my_rule above, or set SHOW_SOLUTIONS = True")
else:
    exercise_proof = check_my_rule(my_rule)
    print(f"exercise passed: {len(exercise_proof)} steps, "
          f"{' then '.join(s.rule for s in exercise_proof)}; the checker replays them and z3 "
          f"proves {my_rule.name}")

# %% [markdown]
# ## What to remember
#
# - The verifier writes both programs as terms in which every split, copy, sum and
#   concatenation is explicit. Grid and loop sizes stay symbols, so one proof covers every
#   member of an sGraph.
# - An e-graph keeps equal terms in one class, found with union-find and a hashcons. It applies
#   every axiom everywhere, keeps all results, and stops when the two terms share a class.
# - The proof is the chain of rewrites the e-graph recorded: one axiom at one subterm per step.
#   A separate checker replays it with terms alone, and rejects a tampered one.
# - A missing identity leaves the terms apart; the identity you add must itself be proved,
#   which is what notebook `04b` does for the real axioms.
