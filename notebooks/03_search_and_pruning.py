# %% [markdown]
# # 03 · Search and pruning: what the search never has to look at
#
# Notebook `02` ended with the search's candidates. This notebook opens the search itself. Even
# with the small caps below, the search could build far too many programs to check one by one
# (section 4 counts how many). It gets through them because it never looks at most of them.
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
# A rule is *sound* when its claims are true. Then pruning loses nothing: the search returns the
# same best program, only sooner. This notebook shows each of the four built-in rules at work on
# a real family. Then it switches each one off and counts what it had saved.

# %% tags=["parameters"]
SHAPES = {"X": (8, 64), "W": (64, 64)}
# One grid dim, four block ops and a small vocabulary keep a search to seconds. The two
# pre-defined kernels put the unfused program (rms_norm, then matmul) into the search space too,
# so fused and unfused programs compete.
SEARCH = {"grid_dims": (1,), "max_block_ops": 4, "block_ops": ("matmul", "div", "rms_norm"),
          "accumulators": ("nored", "red_ld_rms"), "kernel_ops": ("matmul", "rms_norm"),
          "max_kernel_ops": 2, "budget_s": 120}
SMALL_SMEM_BYTES = 1024        # a device too small for the fused kernel (section 3.3)
FIRST_EVENTS = 16              # families shown from the top of the tree
ABLATION_MAX_FAMILIES = 6000   # family budget of each search in the ablation (section 4)

# %% [markdown]
# ## 1. One search, traced
#
# `prism.search.search` runs level 1 of the search: it generates families depth first, applies
# the rules to each, instantiates the maps of every complete family and proves each member
# equivalent (or not) to the target. A `Tracer` records every decision as an event. The summary
# counts them. Read the *generated*, *pruned* and *kept* lines together: most families are pruned
# the moment they are made, and only the kept ones are extended further.

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
print(f"search: {summary['seconds']} s, complete: {summary['complete']}")
print(f"families generated {families['generated']}")
for rule, count in families["pruned"].items():
    print(f"  pruned by {rule:<20} {count}")
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
# ## 3. The four rules, each on a live example
#
# `prism.search.pruning.RULES` is the rule table, in the order the rules run (cheapest first).
# Each rule is a function from a family to `None` (keep it) or a `Pruned(rule, reason,
# evidence)`. The evidence is whatever the rule saw, and it always includes the claim. The table
# counts this search's prunes by rule and claim.

# %%
from collections import Counter

from prism.search.pruning import RULES

prunes = [e for e in tracer.events if isinstance(e, FamilyPruned)]
by_claim = Counter((e.rule, e.evidence["claim"]) for e in prunes)
print(f"{'rule':<20} {'claim':<14} {'families':>8}")
for rule in RULES:
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
# ### 3.1 structural
#
# The cheapest rule reads only the family's shape. It is really several small checks, and the
# evidence names which one fired. Two kinds of claim appear. *Dead ends* can never become a
# program of the target: the caps leave no room to finish the block, or no kernel can follow.
# These claim `no_equivalent`. *Redundancies*, such as `div(x, x)`, a tensor computed twice, or
# one accumulated twice, do have members that compute the target. But a simpler program computes
# the same thing at least as fast, so they claim `not_better`. Here is one example of each check:

# %%
examples = {}
for e in prunes:
    if e.rule == "structural":
        examples.setdefault(e.evidence["check"], []).append(e)
for check, found in examples.items():
    print(f"— {check}: {len(found)} families")
    show_prune(found[0])

# %% [markdown]
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
# ### 3.3 hardware
#
# On the default device limits (`prism.search.Device()`, whose shared memory is printed below) every
# family of this small search fits, so the hardware rule pruned nothing above. It fires on a smaller
# device. When a block graph is stored, z3 decides whether *any* assignment of the grid size, the
# loop range and the map bits satisfies every limit: tiles divide evenly, they fit in shared memory,
# and matmul tiles are at least the device's minimum matmul tile. If none does, the family is
# pruned, and the **unsat core** is the evidence. It is a set of constraints that cannot all hold
# together.
#
# The core's tile expressions are long because every map entry is still a 0/1 symbol. Their
# middles are cut below; the full text is on the event. Read the ends of each line: which
# tensor, and which limit.

# %%
from prism.search import Device

small_device = Device(smem_bytes=SMALL_SMEM_BYTES)
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
# What did the small device cost? No fused kernel fits on it, so the best program is now the
# unfused one, with its intermediate written to HBM and read back:

# %%
for name, found in (("default device", result), ("small device", small)):
    b = found.best
    print(f"{name:<15} best {b.id}: {b.num_kernels} kernel(s), {b.modeled_us:.2f} µs modeled")

# %% [markdown]
# ### 3.4 cost_bound
#
# Branch and bound. Once the search has proved a candidate, that candidate's modeled latency is
# the *incumbent*. When a block graph is stored, the rule computes a lower bound of the modeled
# latency of every member of the family. Per kernel, the bound takes the larger of two times:
# its inputs read once and its output written once at full HBM bandwidth, or its FLOPs at peak.
# Then it adds the kernel's launch. If even that bound is worse than the incumbent, nothing in
# the family can win: `not_better`. Read the description: the family stores kernel tensor `t3`,
# so another kernel came before it, and the bound charges both of them.

# %%
bounded = [e for e in prunes if e.rule == "cost_bound"]
show_prune(bounded[0])
incumbent = next(c for c in result.candidates if c.id == bounded[0].evidence["incumbent"])
print(f"the incumbent {incumbent.id}: {incumbent.num_kernels} kernel(s), "
      f"{incumbent.modeled_us:.2f} µs modeled at {incumbent.assignment}")

# %% [markdown]
# ## 4. What each rule saves: switch it off and count
#
# `SearchConfig(disabled={...})` switches rules off. For each rule, we run the same search
# without it and compare it with the searches above: the hardware rule on the small device,
# where it fires, the others on the default one. Each search with a rule off gets a family
# budget (`ABLATION_MAX_FAMILIES`), and the `done` column says whether it finished within it.
#
# Look at the three kinds of work. `families` counts the families generated. `candidates` counts the
# programs that reached the verifier, each of them proved, refuted or left undecided, which is the
# expensive part. `proved` counts the candidates proved equivalent. A rule that fires early, such as
# structural, saves families. A rule that fires only when a block is stored, such as hardware or
# cost_bound, saves few families or none. What it saves is candidates: every member of a stored
# block graph would have been instantiated and sent to the verifier. The last column compares the
# best program's modeled latency with the rule on and off.

# %%
import dataclasses

runs = {}
for rule, base, on in (("structural", config, result), ("abstract_expression", config, result),
                       ("hardware", small_config, small), ("cost_bound", config, result)):
    off_config = dataclasses.replace(base, disabled=frozenset({rule}),
                                     max_families=ABLATION_MAX_FAMILIES)
    runs[rule] = (on, search(workload.graph, off_config))


def latency(found):
    b = found.best
    return "-" if b is None or b.modeled_us is None else f"{b.modeled_us:.2f}"


print(f"{'rule off':<20} {'families':>14} {'candidates':>11} {'proved':>9} {'seconds':>12} "
      f"{'done':>9}  best µs (modeled)")
for rule, (on, off) in runs.items():
    done = "yes" if off.complete else off.stop_reason
    print(f"{rule:<20} {on.generated:>6} → {off.generated:>5} "
          f"{len(on.candidates):>4} → {len(off.candidates):>4} "
          f"{len(on.equivalent):>3} → {len(off.equivalent):>3} "
          f"{on.seconds:>5.1f} → {off.seconds:>4.1f} "
          f"{done:>9}  {latency(on)} → {latency(off)}")

# %% [markdown]
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
# The programs found only with a rule off are the ones its claim covered. The structural rule
# keeps out copies of a program in a longer form. Hardware keeps out programs that do not fit
# the device: they are proved equivalent, but no assignment makes them run, so they have no
# latency. Cost_bound keeps out slower programs. None of them is the best. Notebook `07` shows
# what happens when a claim is false, and how the audit (`prism.search.audit`) finds it.
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
# ## What to remember
#
# - A family is a partial program together with every completion of it. A prune drops all of
#   them at once, which is why the search can cover a space it could never enumerate.
# - Every prune carries its rule, its reason and its evidence, and the evidence states its claim:
#   `no_equivalent`, `no_feasible` or `not_better`.
# - Structural and abstract-expression prunes fire early and save whole subtrees. Hardware and
#   cost-bound prunes fire when a block is stored and save the verifier's work. Switched off, a
#   sound rule changes the amount of work, never the best program.
