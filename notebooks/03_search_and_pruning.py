# %% [markdown]
# # 03 · Search and pruning: what the search never has to look at
#
# Notebook `02` ended with the search's candidates. This notebook opens the search itself, and
# its one idea is **prune families, not programs**. Even with the small caps below, the search
# could build far too many programs to check one by one: section 4 switches every rule off and
# counts how many it then sends to the verifier. It gets through them because it never looks at
# most of them.
#
# The search builds a program one decision at a time: open a custom kernel on some inputs, add a
# block op, add an accumulator, store the block's result, add a pre-defined kernel. Each partial
# program is a **family**: the partial sGraph, together with *every* program that completing it
# could give. The root family holds every program; each decision narrows it.
#
# A **pruning rule** looks at a family the moment it is made and may prove that nothing useful is
# in it. Then the whole family is dropped, and every program that would have grown from it is
# never built. Each prune states what it proved, its **claim**:
#
# - `no_equivalent`: no member computes what the target computes;
# - `no_feasible`: no member that computes it fits the device;
# - `not_better`: no member that computes it is faster than a program the search already has.
#
# A fourth word, `unproven`, is not a claim at all. A rule that needed a proof and did not get one
# sets the family aside with it: the family is counted apart from the prunes, and the search
# says that it was not exhaustive (section 3.2 shows one).
#
# A rule is *sound* when its claims are true. Then pruning loses nothing: the search returns the
# same best program, only sooner. This notebook shows each of the seven built-in rules at work on
# a real family. Then it switches them off, all together and one at a time, and counts what
# they had saved. (Notebook `07` is about rules whose claims are false.)
#
# If a word is new to you, look it up in the [glossary](GLOSSARY.md).

# %% tags=["parameters"]
SHAPES = {"X": (8, 64), "W": (64, 64)}
# One grid dim, four block ops and a small vocabulary keep a search to seconds. The two
# pre-defined kernels put the unfused program (rms_norm, then matmul) into the search space too,
# so fused and unfused programs compete.
SEARCH = {"grid_dims": (1,), "max_block_ops": 4, "block_ops": ("matmul", "div", "rms_norm"),
          "accumulators": ("nored", "red_ld_rms"), "kernel_ops": ("matmul", "rms_norm"),
          "max_kernel_ops": 2, "budget_s": 120}
SMALL_SMEM_BYTES = 1024        # a device too small for the fused kernel (section 3.4)
FIRST_EVENTS = 16              # families shown from the top of the tree
ABLATION_MAX_FAMILIES = 7000   # family budget of each search with one rule off (section 4)
UNPRUNED_MAX_FAMILIES = 2000   # family budget of the search with every rule off (section 4)
SHOW_SOLUTIONS = False         # True: run the exercise's solution cell (make test does)

# %% [markdown]
# ## 1. One search, traced
#
# `prism.search.search` runs level 1 of the search: it generates families depth first, applies
# the rules to each, instantiates the maps of every complete family and proves each member
# equivalent (or not) to the target. A `Tracer` records every decision as an event. The summary
# counts them. Read the *generated*, *pruned* and *kept* lines together: most families are pruned
# the moment they are made, and only the kept ones are extended further. *Exhaustive* says that
# every family not kept was pruned with a proven claim, so nothing was set aside.

# %%
import prism
from prism.search import SearchConfig, search
from prism.trace import Tracer

workload = prism.get_workload("rmsnorm_matmul").with_shapes(**SHAPES)
config = SearchConfig(**SEARCH)
tracer = Tracer()
result = search(workload.graph, config, tracer=tracer)

summary = result.summary()
families = summary["families"]
print(f"target: {workload.program}")
print(f"search: {summary['seconds']} s, complete: {summary['complete']}, "
      f"exhaustive: {summary['exhaustive']}")
print(f"families generated {families['generated']}")
for rule, count in families["pruned"].items():
    print(f"  pruned by {rule:<20} {count}")
print(f"  set aside (unproven)          {sum(families.get('set_aside', {}).values())}")
print(f"  kept                          {families['kept']}")
print(f"complete families {families['complete']}, candidates {len(result.candidates)}: "
      f"{summary['verdicts']}")
best = result.best
print(f"best: {best.id}, {best.num_kernels} kernel(s), {best.modeled_us:.2f} µs modeled "
      f"at {best.assignment}")

# %% [markdown]
# ## 2. A path down the tree
#
# Every `FamilyGenerated` event names its family and its parent, so the events form a tree.
# `widgets.SearchState` is the plain-Python model behind the search explorer. It rebuilds that
# tree from the events, and here it gives each family's depth. These are the first families the
# search made, in order, each indented by its depth: a family's children are the lines below it,
# indented one step further. A family marked `✗` was pruned, and nothing below it was ever
# generated.

# %%
from prism.trace import FamilyGenerated, FamilyPruned
from widgets import SearchState

state = SearchState()
for event in tracer.events:
    state.add(event)


def short(text, n=88):
    return text if len(text) <= n else text[:n - 1] + "…"


def elide(text, n=100):
    return text if len(text) <= n else f"{text[:n // 2 - 2]} … {text[2 - n // 2:]}"


shown = [e for e in tracer.events if isinstance(e, FamilyGenerated)][:FIRST_EVENTS]
for e in shown:
    node = state.node(e.id)
    mark = f"✗ {node['rule']}: {short(node['reason'], 60)}" if node["status"] == "pruned" else ""
    print(f"{'  ' * len(state.ancestors(e.id))}{e.id:<5} {short(e.description, 60):<62} {mark}")

# %% [markdown]
# The winner sits at the bottom of one such path. Follow it from the root. Each line is one
# decision: which kernel tensors a custom kernel loads, then each block op or accumulator in
# turn, then the store, and then any kernel after it. Together they are the winner's program, op
# by op, with its maps still symbolic. Map instantiation then chose its maps and the verifier
# proved it. Compare it with the hand-written kernel of notebook `01`.

# %%
for fid in [*state.ancestors(best.family), best.family]:
    print(f"{'  ' * len(state.ancestors(fid))}{fid:<5} {state.node(fid)['description']}")
print(f"→ candidate {best.id}: {best.verdict.verdict} ({best.verdict.method}), "
      f"{best.modeled_us:.2f} µs modeled")

# %% [markdown]
# ## 3. The seven rules, each on a live example
#
# `prism.search.RULE_NAMES` lists the rule table (`prism.search.pruning.RULES`) in the order the
# rules run, cheapest first. Each rule is a function from a family to `None` (keep it) or a
# `Pruned(rule, reason, evidence)`. Each makes one check and one claim. The evidence is whatever
# the rule saw, and it always includes the claim. The table counts this search's prunes by rule
# and claim.

# %%
from collections import Counter

from prism.search import RULE_NAMES

prunes = [e for e in tracer.events if isinstance(e, FamilyPruned)]
by_claim = Counter((e.rule, e.evidence["claim"]) for e in prunes)
print(f"{'rule':<20} {'claim':<14} {'families':>8}")
for rule in RULE_NAMES:
    for (r, claim), count in sorted(by_claim.items()):
        if r == rule:
            print(f"{rule:<20} {claim:<14} {count:>8}")
    if not any(r == rule for r, _ in by_claim):
        print(f"{rule:<20} {'-':<14} {0:>8}")


def show_prune(e):
    print(f"{e.id}: {state.node(e.id)['description']}")
    print(f"  pruned by {e.rule}: {e.reason}")
    for key, value in e.evidence.items():
        print(f"  {key:<16} {value}")


# %% [markdown]
# ### 3.1 Dead ends: cannot_close, dead_end_inputs, dead_end_output
#
# The three cheapest rules find families that can never become a program of the target within
# the caps. Each claims `no_equivalent`:
#
# - `cannot_close` counts the tensors of the open block graph that no op reads yet. A block graph
#   stores exactly one of them, and each further op makes one tensor and reads at most two, so it
#   lowers that count by at most one. When more tensors wait than the op cap leaves ops for, the
#   block graph can never be stored.
# - `dead_end_inputs` looks at a custom kernel as it is opened. If it is the last kernel the caps
#   allow, it must make a target output, so it must reach every input that output reads. The
#   evidence names the inputs it misses.
# - `dead_end_output` looks at a kernel tensor just made when no kernel can follow it. That
#   tensor must be a target output. Whether it is, is read in the target's e-graph of section
#   3.2: its expression must be equal to the target's under the axioms. The evidence says whether
#   that e-graph saturated, because only then is a miss a proof.
#
# These three used to be one rule, `structural`, with more checks inside it, told apart by a
# string in the evidence. As entries of their own in the rule table, each can be switched off,
# counted and audited by its name. Here is the first family each one pruned:

# %%
for rule in ("cannot_close", "dead_end_inputs", "dead_end_output"):
    found = [e for e in prunes if e.rule == rule]
    print(f"— {rule}: {len(found)} families")
    show_prune(found[0])

# %% [markdown]
# Read each example with its path in mind (the explorer in section 5 shows it). For
# `cannot_close`, count the open block graph's ops against the cap. For `dead_end_inputs`, the
# caps allow one more kernel, and what it loads does not reach every input. For
# `dead_end_output`, the kernel just made is the last one, and its expression is not the target.
#
# ### 3.2 abstract_expression
#
# This rule asks what the family's newest tensor *computes*. Every tensor carries an abstract
# expression, a coarse formula such as `(matmul (rms_norm X 1) W)`. The e-graph of the target
# holds every expression the axioms can rewrite the target's subexpressions into. If the new
# tensor's expression is not in it, no later op can turn the tensor into part of the target:
# `no_equivalent`. Compare the two expressions in the evidence.

# %%
abstract = [e for e in prunes if e.rule == "abstract_expression"]
show_prune(abstract[0])

# %% [markdown]
# The `saturated` line matters. The e-graph is grown by applying every axiom until nothing new
# appears, under a limit of iterations and e-nodes (`SearchConfig.abstract_limits`). A miss in a
# *saturated* e-graph is a proof, relative to the axioms. A miss in one that stopped at a limit
# proves nothing, since the expression might have appeared one iteration later. Then the three
# rules that read the e-graph, `abstract_expression`, `dead_end_output` and `out_of_reach`
# (section 3.3), take the same decision with the claim `unproven`: the family is set aside, and
# the search is not exhaustive.
#
# To see it, stop the target's e-graph one iteration before it saturates. By the definition of
# saturation, the last iteration added nothing, so this e-graph holds exactly the same
# expressions, and the search drops exactly the same families. What changes is what it can claim:

# %%
from prism.search.abstract import AbstractLimits, AbstractTarget

grown = AbstractTarget(workload.graph).report
print(f"the target's e-graph: {grown.stop_reason} after {grown.iterations} iterations, "
      f"{grown.nodes} e-nodes")
early = SearchConfig(**SEARCH, abstract_limits=AbstractLimits(iterations=grown.iterations - 1))
stopped = search(workload.graph, early)
stopped_summary = stopped.summary()
print(f"stopped after {grown.iterations - 1}: {stopped.generated} families generated "
      f"(saturated: {result.generated}), exhaustive: {stopped_summary['exhaustive']}")
for rule, count in stopped_summary["families"]["set_aside"].items():
    print(f"  set aside by {rule:<20} {count} (unproven)")
print("note:", stopped.notes[0])

# %% [markdown]
# ### 3.3 out_of_reach
#
# This rule reads the same e-graph, but asks how *far* a tensor is from the output. In the last
# kernel the caps allow, the one tensor the block graph stores must be the target's output (the
# argument of `dead_end_output`). Every tensor still waiting for a consumer ends up inside that
# output's expression, so in the target's e-graph it lies below the output. It
# also lies within as many ops as the cap still leaves. The rule measures the distance: the
# shortest path from the output down to the tensor's expression, one op per e-node on the
# way. An e-node costs nothing when some op of the vocabulary puts its head below the top of its
# own expression: the accumulator `red_ld_rms` computes a mean of squares, so `mean` and
# `square` are free. One op then never covers more than one counted step, and the distance is a
# lower bound on the ops the tensor still needs. When it is more than the ops left, the claim is
# `no_equivalent` (`unproven` if the e-graph did not saturate). Read the example: which tensor
# waits, how far it is from the output, and how many ops the cap leaves.

# %%
reach = [e for e in prunes if e.rule == "out_of_reach" and "distance" in e.evidence]
show_prune(reach[0])

# %% [markdown]
# The rule also counts the waiting tensors *together*. Their ways to the one stored tensor form
# a tree of ops, and each op reads at most two of them, or of the results on the way. A tensor
# at distance d has at least d ops above it. `ops_needed` counts the fewest ops such a tree can
# have. With every distance 0 that is `cannot_close`'s count, one op fewer than the tensors;
# with one tensor it is that tensor's distance. So a family can be pruned although each of its
# tensors alone is within reach. Its evidence lists every waiting tensor with its distance, and
# the ops they need together (`needed`). This small search has none. The example comes from
# nTrans at six block ops, and the step checker (`prism.steps`) rechecks it from the family's
# state alone (so the search records its graphs): each distance in a fresh saturation, then
# the count.

# %%
from prism.steps import check_records, export

together = [e for e in prunes if e.rule == "out_of_reach" and "waiting" in e.evidence]
ntrans = prism.get_workload("ntrans").with_shapes(H=(8, 64), X=(8, 64), alpha=(8, 64))
ntrans_tracer = Tracer()
search(ntrans.graph, SearchConfig(grid_dims=(1,), max_block_ops=6,
                                  block_ops=("rms_norm", "add", "mul"), record_graphs=True),
       label="ntrans", tracer=ntrans_tracer)      # graphs recorded: the checker reads states
example = next(e for e in ntrans_tracer.events if isinstance(e, FamilyPruned)
               and e.rule == "out_of_reach" and "waiting" in e.evidence)
print(f"in this search: {len(together)}; the nTrans example, {example.id}:")
print(f"  {example.reason}")
for name, expression, distance in example.evidence["waiting"]:
    print(f"  {name:<8} {distance} op(s) from the output   {expression}")
records = [r for r in export(ntrans_tracer.events, "ntrans").records
           if r["kind"] == "prune" and r["source"] == example.id]
print(f"  rechecked by the step checker: {'holds' if check_records(records).ok else 'FAILS'}")

# %% [markdown]
# A distance counts only the ops on a tensor's way to the output. Each op on that way also reads
# other operands, its *siblings*, and a sibling the block graph does not hold yet costs ops of
# its own. So the rule has a third count, the **sibling bound** (`prism.search.completion`). It
# matches every op's expression in the target's e-graph, so a step is one whole op. A class's
# *height* is the fewest ops that build it from the inputs and the classes the block graph
# already holds. On a way down from the output, an op at depth d beside a sibling of height h
# means at least d + h ops. The sibling's new tensors can share only the ops below it on the way.
# The rule takes the least such bound over every way down to the tensor. It also prunes when the
# output's own height exceeds the ops left. In nTrans, products such as `mul(H, X)` lie a few
# ops below the output, but only inside the expanded square, whose other products cost many
# ops each. The step checker recomputes the heights and the bound from the state.

# %%
beside = next(e for e in ntrans_tracer.events if isinstance(e, FamilyPruned)
              and e.rule == "out_of_reach" and e.evidence.get("siblings")
              and e.evidence["tensor"] is not None)
print(f"the nTrans sibling example, {beside.id}:")
print(f"  {beside.reason}")
records = [r for r in export(ntrans_tracer.events, "ntrans").records
           if r["kind"] == "prune" and r["source"] == beside.id]
print(f"  rechecked by the step checker: {'holds' if check_records(records).ok else 'FAILS'}")

# %% [markdown]
# ### 3.4 hardware
#
# On the default device, `config.device` (an H100: `prism.cost.get_device("h100")`, whose shared
# memory per block is printed below), every family of this small search fits, so the hardware
# rule pruned nothing above. It fires on a smaller device, a variant of the same spec made with
# `dataclasses.replace`. When a block graph is stored, z3 decides whether *any* assignment of the
# grid size, the loop range and the map bits satisfies every limit: tiles divide evenly, they fit
# in shared memory, and matmul tiles are at least the device's minimum matmul tile. If none does,
# the family is pruned, and the **unsat core** is the evidence. It is a set of constraints that
# cannot all hold together.
#
# The core's tile expressions are long because every map entry is still a 0/1 symbol. Their
# middles are cut below; the full text is on the event. Read the ends of each line: which
# tensor, and which limit.

# %%
import dataclasses

small_device = dataclasses.replace(config.device, smem_bytes=SMALL_SMEM_BYTES)
small_config = SearchConfig(**SEARCH, device=small_device)
small_tracer = Tracer()
small = search(workload.graph, small_config, tracer=small_tracer)
small_state = SearchState()
for event in small_tracer.events:
    small_state.add(event)

hardware_prunes = [e for e in small_tracer.events
                   if isinstance(e, FamilyPruned) and e.rule == "hardware"]
print(f"device with {SMALL_SMEM_BYTES} B of shared memory: "
      f"{small.pruned['hardware']} families pruned by hardware")
first = hardware_prunes[0]
print(f"{first.id}: {small_state.node(first.id)['description']}")
print(f"  claim {first.evidence['claim']}; unsat core:")
for constraint in first.evidence["unsat_core"]:
    print(f"    {elide(constraint)}")

# %% [markdown]
# The same argument is easier to read on a kernel whose maps are concrete. Take the hand-written
# fused kernel (`prism.workloads.known_best`) with its grid size `gx` and loop range `F` left
# symbolic, and ask z3 the same question on both devices:

# %%
from prism.search import check_hardware
from prism.workloads.known_best import known_best

fused = known_best("rmsnorm_matmul", SHAPES, grid="gx", loop="F")
for name, device in (("default device", config.device), ("small device", small_device)):
    print(f"{name} ({device.smem_bytes} B): {check_hardware(fused, device).reason}")

# %% [markdown]
# What did the small device cost? No fused kernel fits on it, so the best program now has two
# kernels, with an intermediate written to HBM and read back:

# %%
for name, found in (("default device", result), ("small device", small)):
    b = found.best
    print(f"{name:<15} best {b.id}: {b.num_kernels} kernel(s), {b.modeled_us:.2f} µs modeled")

# %% [markdown]
# ### 3.5 cost_bound
#
# Branch and bound. Once the search has proved a candidate, that candidate's modeled latency is
# the *incumbent*. When a block graph is stored, the rule computes a lower bound of the modeled
# latency of every member of the family. Per kernel, the bound takes the larger of two times:
# its inputs read once and its output written once at full HBM bandwidth, or its FLOPs at peak.
# Then it adds the kernel's launch. If even that bound is worse than the incumbent, nothing in
# the family can win: `not_better`. Read the description: the kernel tensor the family stores
# (its id is printed below, and differs from run to run) was made by an earlier kernel, and the
# bound charges both kernels.

# %%
bounded = [e for e in prunes if e.rule == "cost_bound"]
show_prune(bounded[0])
incumbent = next(c for c in result.candidates if c.id == bounded[0].evidence["incumbent"])
print(f"the incumbent {incumbent.id}: {incumbent.num_kernels} kernel(s), "
      f"{incumbent.modeled_us:.2f} µs modeled at {incumbent.assignment}")


# %% [markdown]
# ## 4. What the rules save: switch them off and count
#
# `SearchConfig(disabled={...})` switches rules off. First all seven at once, the count the
# introduction promised. The search without rules gets a family budget
# (`UNPRUNED_MAX_FAMILIES`), since it would not finish: every complete family it builds goes to
# the verifier.

# %%
every_rule_off = dataclasses.replace(config, disabled=frozenset(RULE_NAMES),
                                     max_families=UNPRUNED_MAX_FAMILIES)
unpruned_tracer = Tracer()
unpruned = search(workload.graph, every_rule_off, tracer=unpruned_tracer)
print(f"every rule on:  {result.generated} families, {len(result.candidates)} candidates "
      f"verified, finished: {result.complete}")
print(f"every rule off: {unpruned.generated} families, {len(unpruned.candidates)} candidates "
      f"verified, finished: {unpruned.complete} ({unpruned.stop_reason} of "
      f"{UNPRUNED_MAX_FAMILIES} families)")
print(f"without the rules, {len(unpruned.candidates) / len(result.candidates):.0f}× the "
      f"verifier's work before the search had even finished")

# %% [markdown]
# One rule at a time, now. For each rule, we run the same search
# without it and compare it with the searches above: the hardware rule on the small device,
# where it fires, the others on the default one. Each search with a rule off gets a family
# budget (`ABLATION_MAX_FAMILIES`), and the `done` column says whether it finished within it.
#
# Look at the three kinds of work. `families` counts the families generated. `candidates` counts
# the programs that reached the verifier, each of them proved, refuted or left undecided, which is
# the expensive part. `proved` counts the candidates proved equivalent. A rule that fires early,
# such as cannot_close, saves families. A rule that fires only when a block is stored, such as
# hardware or cost_bound, saves few families or none. What it saves is candidates: every member
# of a stored block graph would have been instantiated and sent to the verifier. The last column
# compares the fastest proved program with the rule on and off. The search costs each candidate
# at one assignment that fits, the first z3 finds: enough for branch and bound, but not always
# that member's best. So `fastest` below costs every proved program at every assignment of
# powers of two that fits (`feasible_assignments` lists them, checking the limits tile by tile)
# and keeps the lowest.

# %%
from _tables import table
from prism.cost import modeled
from prism.ir.spec import substitute_graph
from prism.search.audit import feasible_assignments


def fastest(graphs, device):
    """(µs, program): the lowest modeled latency of these programs over the assignments (powers
    of two) that fit the device, or None when none fits."""
    costs = [(modeled(substitute_graph(graph, env), device).latency_us, i)
             for i, graph in enumerate(graphs) for env in feasible_assignments(graph, device)]
    return None if not costs else (min(costs)[0], graphs[min(costs)[1]])


runs = {}
for rule in RULE_NAMES:
    base, on = (small_config, small) if rule == "hardware" else (config, result)
    off_config = dataclasses.replace(base, disabled=frozenset({rule}),
                                     max_families=ABLATION_MAX_FAMILIES)
    runs[rule] = (on, search(workload.graph, off_config))


def latency(found):
    best = fastest([c.graph for c in found.equivalent], found.config.device)
    return "-" if best is None else f"{best[0]:.2f}"


table([(rule, f"{on.generated} → {off.generated}",
        f"{len(on.candidates)} → {len(off.candidates)}",
        f"{len(on.equivalent)} → {len(off.equivalent)}", f"{on.seconds:.1f} → {off.seconds:.1f}",
        "yes" if off.complete else off.stop_reason, f"{latency(on)} → {latency(off)}")
       for rule, (on, off) in runs.items()],
      ["rule off", "families", "candidates", "proved", "seconds", "done", "best µs"],
      note="modeled")

# %% [markdown]
# Look at the `dead_end_output` row: with it off, the search generates *fewer* families and
# verifies more candidates. Switching off `abstract_expression` or `dead_end_output`, the two
# rules that read from the target's e-graph what a tensor computes, switches off more than the
# rule. The search then no longer asks the e-graph which tensor is the target's output either,
# so that an audit of the rule does not lean on the e-graph it audits (and `out_of_reach`, which
# needs that answer, stops too).
# Instead any kernel tensor of the output's shape completes a program and goes to the verifier,
# and the program ends there.
#
# Did the rules lose anything? A sound rule loses nothing. With it on, the search's best program
# should be the same as with it off. Candidates keep their id inside one run only, so we compare
# the graphs without their names: every program proved with the rule on should also be proved
# with the rule off. A search that stopped at its budget cannot show this, so it is marked as
# unfinished. Look at the abstract_expression row above: without the rule that reads what a
# tensor computes, the search used up its whole family budget and did not finish.

# %%
def programs(found):
    return {dataclasses.replace(c.graph, name="") for c in found.equivalent}


for rule, (on, off) in runs.items():
    if not off.complete:
        print(f"{rule:<20} unfinished with the rule off ({off.stop_reason} of "
              f"{ABLATION_MAX_FAMILIES}): nothing to compare")
        continue
    same = latency(on) == latency(off)
    kept = programs(on) <= programs(off)
    print(f"{rule:<20} same best: {same}; every program proved with it is proved "
          f"without it: {kept}; {len(programs(off) - programs(on))} more proved without it")

# %% [markdown]
# One `False` stands out: programs proved with `dead_end_output` on and not with it off. It is
# not the rule that lost them, it is the other switch. Here they are, kernel by kernel:

# %%
from prism.ir.dims import shape_str

on, off = runs["dead_end_output"]
missing = programs(on) - programs(off)
kinds = Counter(" then ".join(f"{op.kind}({', '.join(op.inputs)}) → {op.outputs[0]} "
                              f"{shape_str(graph.shape(op.outputs[0]))}"
                              for op in graph.ops if op.kind not in ("input", "output"))
                for graph in missing)
for steps, count in kinds.items():
    print(f"{count} × {steps}")
out_shape = workload.graph.shape(workload.graph.outputs[0])
print(f"the target's output has the shape {shape_str(out_shape)}")

# %% [markdown]
# Each of them first runs a custom kernel that computes `rms_norm(X)`, then the library's matmul.
# Their first kernel's output has the target's output shape, so with the e-graph out of the loop
# the search takes it for the output, the verifier refutes that one-kernel program, and the
# matmul after it is never added. An ablation is only as clean as its switch: read what a switch
# changes before you read its row.
#
# The other programs found only with a rule off are the ones its claim covered. Hardware keeps
# out programs that do not fit the device: they are proved equivalent, but no assignment makes
# them run, so they have no latency. Cost_bound keeps out slower programs. None of them is the
# best. Notebook `07` shows what happens when a claim is false, and how the audit finds it.
#
# ## 5. The explorer
#
# The **search explorer** is the widget that shows all of this for any trace. It has a bar per
# rule (click one to filter), a rule and a status filter over a page of rows, and a detail pane
# that shows a selected row's path, reason and evidence. Below it opens on this search's
# cost_bound prunes, with the first one selected. `explorer.state` is the same `SearchState` we
# used above, so what the widget shows can be checked in code:

# %%
from widgets import SearchExplorer

explorer = SearchExplorer.from_events(tracer.events)
explorer.rule.value = "cost_bound"
explorer.select.value = bounded[0].id
print("families pruned per rule:", explorer.state.rule_counts())
print("rows under the filter:", explorer.state.count(rule="cost_bound"))
explorer

# %% [markdown]
# The same search as a **tree** (`SearchTree`, the workbench's default view of a search). Each
# family shows the counts of everything under it, and its children come in groups, one per rule
# that pruned them and one for those kept. Below, the tree jumps to the same cost_bound prune:
# the path to it opens and the prune is selected. The counts it draws are the state's, so they
# can be read in code too:

# %%
from widgets import SearchTree
from widgets.tree import counts_text, group_text

tree = SearchTree.of(explorer)
tree.jump_to(bounded[0].id)
print("the whole search:", counts_text(explorer.state.subtree(None)))
top = explorer.state.path(bounded[0].id)[0]
print(f"under {top}:", counts_text(explorer.state.subtree(top)))
for group in explorer.state.groups(top):
    print("  " + group_text(group))
tree

# %% [markdown]
# ## 6. Exercise: count the prunes from the trace
#
# The summary of section 1 counted the families each rule pruned. Count them yourself from the
# trace: `tracer.events` holds one event per decision, and a prune is a
# `prism.trace.FamilyPruned` with the rule's name in `.rule`. Write the counts as
# `prunes_by_rule`, a dict from rule name to count (rules that pruned nothing left out). The
# check compares it with the counters the search kept while it ran.

# %%
prunes_by_rule = None       # your answer: {rule: families pruned}

# %% jupyter={"source_hidden":true}
if SHOW_SOLUTIONS:
    from collections import Counter

    from prism.trace import FamilyPruned

    prunes_by_rule = dict(Counter(e.rule for e in tracer.events if isinstance(e, FamilyPruned)))


# %%
def check_prunes(counts):
    """The oracle: the search's own counters (`result.summary()`), kept apart from the trace."""
    kept = {rule: n for rule, n in result.summary()["families"]["pruned"].items() if n}
    assert counts == kept, f"{counts} ≠ the search's {kept}"
    return sum(kept.values())


if prunes_by_rule is None:
    print("exercise: write prunes_by_rule above, or set SHOW_SOLUTIONS = True")
else:
    print(f"exercise passed: {check_prunes(prunes_by_rule)} prunes over {len(prunes_by_rule)} "
          "rules, as the search counted them")

# %% [markdown]
# ## What to remember
#
# - A family is a partial program together with every completion of it. A prune drops all of
#   them at once, which is why the search can cover a space it could never enumerate.
# - Every prune carries its rule, its reason and its evidence, and the evidence states its claim:
#   `no_equivalent`, `no_feasible` or `not_better`. A rule that reads an e-graph that did not
#   saturate claims nothing (`unproven`), and the search says it was not exhaustive.
# - Each rule is one check with one claim, so it can be switched off and audited by name.
#   Without any of them, the search sends thousands of programs to the verifier and does not
#   finish (section 4 counts them).
# - cannot_close, dead_end_inputs and abstract_expression fire early and save whole subtrees.
#   dead_end_output, hardware and cost_bound fire when a kernel is finished and save the
#   verifier's work. Switched off, a sound rule changes the amount of work, never the best
#   program; read what else a switch changes before you read its row.
