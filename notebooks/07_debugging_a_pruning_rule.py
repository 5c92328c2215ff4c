# %% [markdown]
# # 07 · Debugging a pruning rule
#
# A pruning rule makes a claim about *every* program in a family (notebook `03`). When the claim
# is false, nothing crashes. The search still finishes, still proves its candidates and still
# returns a kernel. The kernel is just worse than it should be, because the best one was in a
# family that a rule threw away. The search does not report this, and the result looks normal.
#
# This notebook teaches one method, a checklist for every pruning rule you write:
#
# 1. **Audit every new rule** before you trust a search that uses it: `audit(target, name,
#    config)` (`prism.search.audit`) re-explores everything the rule pruned, proves what it
#    finds there, and checks each prune's claim. Section 4 times it against the search.
# 2. When the audit finds a wrongly pruned program, find where the rule went wrong: the
#    **per-rule counts**, the **search explorer** filtered by the rule, and the program itself,
#    drawn, proved and run against torch.
# 3. **Fix the claim, not only the condition**, and audit the fix.
# 4. **Audit the fix again on a second workload and shape**: an audit is evidence about the
#    programs it explored, not a proof for every target.
# 5. **Know what the claim is relative to**: `not_better` means "no better *by the cost
#    model*", and no more.
#
# We make the mistake on purpose: a pruning rule of our own that sounds right, plugged into the
# search, loses the fused RMSNorm + MatMul kernel. Then we follow the checklist.
#
# If a word is new to you, look it up in the [glossary](GLOSSARY.md).

# %% tags=["parameters"]
SHAPES = {"X": (8, 64), "W": (64, 64)}
SMEM_BYTES = 1536      # the toy device's shared memory per block (section 1 says why)
SEARCH = {"grid_dims": (1,), "max_block_ops": 4, "block_ops": ("matmul", "div", "rms_norm"),
          "accumulators": ("nored", "red_ld_rms"), "kernel_ops": ("matmul", "rms_norm"),
          "max_kernel_ops": 2, "budget_s": 120}
RULE = "rms_needs_whole_rows"   # the name our rule is counted, traced and audited under
SECOND_SHAPES = {"X": (16, 128)}   # the second workload, rms_norm(X) alone, and its shape
SEED = 0
SHOW_SOLUTIONS = False          # True: run the exercise's solution cell (make test does)

# %% [markdown]
# ## 1. The kernel to protect
#
# Why does the fused kernel loop at all? At the paper's shapes (`d = 4096`), one block cannot
# hold a whole row of `X` next to a slice of `W` in shared memory. So the kernel walks `d` in a
# loop, one tile at a time, and adds up the partial results. At our toy shapes a whole row would
# fit on any real GPU, and the loop would be optional. To give the toy shapes the same squeeze,
# we use a toy device: the H100's spec (`prism.cost.get_device("h100")`) with `SMEM_BYTES` of
# shared memory per block, made with `dataclasses.replace`. The search, its hardware rule and the
# cost model all read this one value. z3 checks the hand-written fused kernel
# (`prism.workloads.known_best`) with its grid size `gx` and loop range `F` symbolic, and the
# same kernel without a loop:

# %%
import dataclasses
import time

import prism
from prism.cost import get_device
from prism.search import SearchConfig, check_hardware, search
from prism.trace import Tracer
from prism.workloads.known_best import known_best

workload = prism.get_workload("rmsnorm_matmul").with_shapes(**SHAPES)
device = dataclasses.replace(get_device("h100"), smem_bytes=SMEM_BYTES)
fused = known_best("rmsnorm_matmul", SHAPES, grid="gx", loop="F")
unlooped = known_best("rmsnorm_matmul", SHAPES, grid="gx", loop=1)
for name, graph in (("with a loop over d", fused), ("without a loop", unlooped)):
    print(f"fused kernel {name:<20} {check_hardware(graph, device).reason}")

# %% [markdown]
# Now the plain search, on that device. It may use the two pre-defined kernels too, so the
# unfused program (rms_norm, then matmul) is in its space. The `layout` helper below is only for
# display: it prints each custom kernel's block ops (sorted), and the imap/fmap of each input
# and the omap of the output. The last line compares the winner's layout with the hand-written
# kernel's.

# %%
def layout(graph):
    kernels = []
    for op, block in graph.iter_blocks():
        loads = [b for b in block.ops if b.kind == "input"]
        maps = ", ".join(f"{src} {b.attr['imap']}/{b.attr['fmap']}"
                         for src, b in zip(op.inputs, loads, strict=True))
        store = next(b for b in block.ops if b.kind == "output")
        ops = sorted(b.kind for b in block.ops if b.kind not in ("input", "output"))
        kernels.append(f"[{', '.join(ops)}] loads {maps}; stores omap {store.attr['omap']}")
    return " + ".join(kernels) or "no custom kernel"


def describe(name, found):
    s = found.summary()
    best = found.best
    print(f"{name}: {s['families']['generated']} families generated, "
          f"{len(found.candidates)} candidates, {len(found.equivalent)} proved equivalent")
    print(f"  best {best.id}: {best.num_kernels} kernel(s), {best.modeled_us:.2f} µs modeled "
          f"at {best.assignment}")
    print(f"  layout {layout(best.graph)}")


base = SearchConfig(**SEARCH, device=device)
plain_tracer = Tracer()
plain = search(workload.graph, base, tracer=plain_tracer)
describe("plain search", plain)
print(f"  hand-written kernel: {layout(fused)}")
print("  the winner is laid out as the hand-written kernel:",
      layout(plain.best.graph) == layout(fused))

# %% [markdown]
# Read the maps: `X (-)/(1)` means `X` is *replicated* across the grid (no grid dim splits it)
# and the loop walks its dim 1, which is `d`. `W (1)/(0)` means the grid splits `W`'s columns and
# the loop walks its rows. Each iteration sees part of every row of `X`.
#
# ## 2. A rule that sounds right
#
# Here is the mistake. RMSNorm divides each row by the root mean square of the *whole* row.
# Inside the loop, a block sees one tile at a time, and when the loop walks `d` a tile holds only
# part of each row. An RMS taken there is the RMS of the wrong numbers, surely? So we write a
# rule that prunes every RMS taken inside the loop, and claims that nothing equivalent can grow
# from it.
#
# A rule is a plain function `rule(ctx, family)` that returns `None` to keep the family, or a
# `Pruned(rule, reason, evidence)`. The evidence must include the `claim`. A block-level family
# tells you the op it just added (`family.kind`), its operands (`family.operands`, indices into
# `family.block.tensors`), and each tensor's symbolic shape, abstract expression and whether it
# comes after the loop (`post`). The maps are still symbols at this point.

# %%
from prism.search.pruning import Pruned


def rms_needs_whole_rows(ctx, family):
    """Prune an RMS (rms_norm or the red_ld_rms accumulator) of a tile inside the loop."""
    if family.level != "block" or family.kind not in ("rms_norm", "red_ld_rms"):
        return None
    tile = family.block.tensors[family.operands[0]]
    if tile.post:          # after the loop every tile has been accumulated: leave it
        return None
    return Pruned(RULE, f"{family.kind}({tile.name}) takes an RMS inside the loop, where a "
                  "tile may hold only part of each row", {"claim": "no_equivalent",
                                                          "tensor": tile.name})


# %% [markdown]
# `SearchConfig(rules=...)` adds it after the six built-in rules (`prism.search.RULE_NAMES`).
# Ours is counted, traced, switchable off and auditable under its name, exactly like them. Run
# the search again:

# %%
buggy = SearchConfig(**SEARCH, device=device, rules=((RULE, rms_needs_whole_rows),))
buggy_tracer = Tracer()
started = time.perf_counter()
with_rule = search(workload.graph, buggy, tracer=buggy_tracer)
search_wall_s = time.perf_counter() - started
describe("with our rule", with_rule)
slower = with_rule.best.modeled_us / plain.best.modeled_us
print(f"  {slower:.2f}x the plain search's best latency (modeled)")

# %% [markdown]
# The search finished, it proved its candidates, and it returned a kernel. Nothing in that
# printout says that anything went wrong, yet the answer got slower, and its layout has changed.
# If we had not run the plain search first, we would not know.
#
# ## 3. Which rule? The counts and the explorer
#
# The first clue is the per-rule counts. Side by side with the plain search, our rule is the only
# new line. The other counts drop as well, but only because the families under our prunes were
# never generated, so the other rules never saw them. Look at cost_bound in particular: with no
# fused kernel proved, the incumbent is a two-kernel program, about twice as slow, and no
# family's lower bound is worse than that, so branch and bound pruned nothing.

# %%
counts = {name: found.summary()["families"]["pruned"] for name, found in
          (("plain", plain), ("with rule", with_rule))}
print(f"{'rule':<22} {'plain':>6} {'with rule':>10}")
for rule in buggy.rule_names:
    print(f"{rule:<22} {counts['plain'].get(rule, 0):>6} {counts['with rule'][rule]:>10}")

# %% [markdown]
# The search explorer shows every prune of one rule, with its family and reason. Here it is on
# the run with our rule, filtered to it (`explorer.state` is its plain-Python model, so the same
# rows print here). Click a row's id in the `row` selector to see its path and evidence.

# %%
from widgets import SearchExplorer

explorer = SearchExplorer.from_events(buggy_tracer.events)
explorer.rule.value = RULE
rows = explorer.state.filter(rule=RULE)
explorer.select.value = rows[0].id
print(f"{explorer.state.count(rule=RULE)} families pruned by {RULE}:")
for node in rows:
    print(f"  {node.id:<6} {node.description}")
explorer

# %% [markdown]
# Every reason reads the same, and each one sounds plausible. The explorer shows *what* the rule
# pruned, but not whether it was right to. To find out, the search would have to look inside
# those families after all.
#
# ## 4. The audit: step 1 of the checklist
#
# That is what `audit(target, rule, config)` does. It runs the search with the rule *observed*:
# each family the rule would prune is explored anyway (the other rules still apply). Every
# program completed under it goes through map instantiation and the verifier. Then each prune's
# claim is checked against those programs. For `no_equivalent`, any program proved equivalent
# breaks the claim. Read the counts: `checked` programs were completed under our prunes and
# `equivalent` of them were proved equivalent to the target.

# %%
from prism.search import audit

started = time.perf_counter()
report = audit(workload.graph, RULE, buggy)
audit_wall_s = time.perf_counter() - started
print(f"audit of {RULE}: {report.pruned} prunes, {report.explored} families explored under "
      f"them, {report.checked} programs checked, {report.equivalent} proved equivalent")
print(f"cost: the search took {with_rule.seconds:.2f} s, its audit {report.seconds:.2f} s, "
      f"{report.seconds / with_rule.seconds:.1f}× the search (wall time on this CPU)")
print(f"sound: {report.sound}; {len(report.wrong)} wrongly pruned programs")
wrong_families = {}
for finding in report.wrong:
    wrong_families.setdefault(finding["family"], []).append(finding)
for fid, found in wrong_families.items():
    print(f"  family {fid}: {len(found)} equivalent program(s), e.g. {found[0]['candidate']}: "
          f"{found[0]['finding']}")
    print(f"    reason given: {found[0]['reason']}")

# %% [markdown]
# Read the cost line. The audit is the same search with the rule observed instead of obeyed,
# plus the programs it completes under the prunes, so its cost is that of a search without the
# rule: too much to run inside every search, cheap enough to run once for every new rule and
# every workload it is meant for.
#
# The audit numbers families the way the plain search does, because the observed rule removes
# nothing. So we can look for those families on the plain search's path to its winner. The
# plain search's explorer state rebuilds the path, and a `◀` marks each family the audit named:

# %%
plain_state = SearchExplorer.from_events(plain_tracer.events).state
winner = plain.best
for fid in [*plain_state.ancestors(winner.family), winner.family]:
    mark = f"   ◀ pruned by {RULE}" if fid in wrong_families else ""
    print(f"{'  ' * len(plain_state.ancestors(fid))}{fid:<5} "
          f"{plain_state.node(fid)['description']}{mark}")
print(f"→ {winner.id}, {winner.modeled_us:.2f} µs modeled")

# %% [markdown]
# There is the culprit: the family that takes `red_ld_rms` of the `X` tile inside the loop sits on
# the road to the best kernel.
#
# ## 5. The program the rule threw away
#
# Each finding carries the wrongly pruned program as graph JSON. Which one matters most? For each
# one, we list every assignment of its sizes that fits the device (`feasible_assignments`
# enumerates them and checks the limits tile by tile, independently of z3), and cost the fastest
# with the model. Programs that fit no assignment show `-`.

# %%
from prism.cost import modeled
from prism.ir.serialize import graph_from_json
from prism.ir.spec import substitute_graph
from prism.search.audit import feasible_assignments

ranked = []
for finding in report.wrong:
    program = graph_from_json(finding["graph"])
    costs = [(modeled(substitute_graph(program, env), buggy.device).latency_us, env)
             for env in feasible_assignments(program, device)]
    ranked.append((min(costs, key=lambda c: c[0]) if costs else (None, None), finding, program))
ranked.sort(key=lambda r: (r[0][0] is None, r[0][0] or 0.0))
print(f"{'candidate':<10} {'family':<7} {'µs (modeled)':>12}  at / layout")
for (latency, env), finding, program in ranked:
    shown = "-" if latency is None else f"{latency:.2f}"
    print(f"{finding['candidate']:<10} {finding['family']:<7} {shown:>12}  {env or ''} "
          f"{layout(program)}")

# %% [markdown]
# The fastest wrongly pruned program is the plain search's winner, laid out like the hand-written
# kernel. Here it is. The picture shows one custom kernel: `X` replicated and walked along `d`,
# `red_ld_rms` accumulating inside the loop.

# %%
(lost_us, lost_env), lost_finding, lost = ranked[0]
print(f"{lost_finding['candidate']}: {lost_us:.2f} µs modeled at {lost_env}")
print("laid out as the plain search's winner:", layout(lost) == layout(plain.best.graph))
lost

# %% [markdown]
# Is it really equivalent? The verifier proves it with the grid and loop sizes symbolic; here is
# the proof, one rewrite per line. Then the float64 reference interpreter runs it at the fitting
# assignment and compares its output with torch.

# %%
from prism.check import max_rel_err
from prism.verify.equiv import show_proof, verify

verdict = verify(workload.graph, lost)
print(f"{verdict.verdict} by {verdict.method}: {verdict.proof_steps} steps, sizes {verdict.sizes}")
print(show_proof(verdict.steps[0]))
inputs = workload.random_inputs(SEED)
err = max_rel_err(prism.interpret(lost, *inputs, assignment=lost_env),
                  workload.reference(*inputs))
print(f"interpreted at {lost_env}: max relative error vs torch {err:.1e}")

# %% [markdown]
# ## 6. What was wrong, and a fix: step 3 of the checklist
#
# The premise holds for the block op `rms_norm`, which normalizes one tile by that tile's own
# RMS. It does not hold for the accumulator `red_ld_rms`. Each iteration adds the squares of its
# part of each row. Only after the loop does the accumulator take the root of their mean, and
# that is exactly the RMS of the whole row. Partial rows are what it was built for.
#
# A first fix drops `red_ld_rms` and keeps the claim. The audit decides:

# %%
def rms_norm_in_loop(ctx, family):
    """Prune the block op rms_norm of a tile inside the loop (the accumulator is fine)."""
    if family.level != "block" or family.kind != "rms_norm":
        return None
    tile = family.block.tensors[family.operands[0]]
    if tile.post:
        return None
    return Pruned(RULE, f"rms_norm({tile.name}) inside the loop normalizes a tile, which may "
                  "hold only part of each row", {"claim": "no_equivalent", "tensor": tile.name})


narrowed = SearchConfig(**SEARCH, device=device, rules=((RULE, rms_norm_in_loop),))
second = audit(workload.graph, RULE, narrowed)
print(f"audit: {second.pruned} prunes, {second.checked} checked, {second.equivalent} proved "
      f"equivalent; sound: {second.sound}, {len(second.wrong)} wrongly pruned")
for finding in second.wrong:
    print(f"  {finding['candidate']} under {finding['family']}: "
          f"{layout(graph_from_json(finding['graph']))}")

# %% [markdown]
# Still unsound. Look at the maps of what it found, at `X`'s fmap after the slash. It is `(-)`
# in each: the loop does not walk `X` at all, so every tile holds whole rows, and `rms_norm` of
# such a tile is correct. A rule speaks for every member of its family, and when it runs the maps
# are still symbols. The family holds the members in which the loop splits the rows, which are
# wrong as the rule says. It also holds the members in which the loop leaves them whole, which
# are right. So `no_equivalent` is false.
#
# What *is* true of the members that are right? Their tiles hold whole rows, and from those same
# tiles the accumulator `red_ld_rms` with a `div` after the loop computes the same result. The
# search keeps that version. So the honest claim is `not_better`: nothing in the family is
# faster than what the search finds elsewhere. The audit checks exactly that, with the cost model
# over every fitting assignment.

# %%
def rms_norm_in_loop_not_better(ctx, family):
    """The block op rms_norm inside the loop: correct only on whole rows, and then no better
    than red_ld_rms and a div after the loop, which the search also builds."""
    pruned = rms_norm_in_loop(ctx, family)
    if pruned is None:
        return None
    return Pruned(RULE, pruned.reason + "; on whole rows red_ld_rms and a div after the loop "
                  "do the same", {**pruned.evidence, "claim": "not_better"})


fixed = SearchConfig(**SEARCH, device=device, rules=((RULE, rms_norm_in_loop_not_better),))
third = audit(workload.graph, RULE, fixed)
print(f"audit: {third.pruned} prunes, {third.checked} checked, {third.equivalent} proved "
      f"equivalent; sound: {third.sound}, {len(third.wrong)} wrongly pruned")
repaired = search(workload.graph, fixed)
describe("with the fixed rule", repaired)

# %% [markdown]
# The audit found equivalent programs under the prunes and checked the claim on each, so "sound"
# is not vacuous. And the search finds the fused kernel again. Here are the three versions side
# by side. Compare the families column too: the fixed rule still saves work.

# %%
from _tables import table

narrowed_run = search(workload.graph, narrowed)
table([(name, found.generated, len(found.equivalent), found.best.num_kernels,
        found.best.modeled_us, "-" if checked is None else
        ("sound" if checked.sound else "unsound"))
       for name, found, checked in (("plain", plain, None), ("first rule", with_rule, report),
                                    ("rms_norm only", narrowed_run, second),
                                    ("rms_norm, not_better", repaired, third))],
      ["search", "families", "proved", "kernels", ("best µs", ".2f"), "audit"], note="modeled")

# %% [markdown]
# Look at the `rms_norm only` row. That rule is unsound, yet on this workload it cost nothing:
# the best kernel was not in the families it got wrong. On another workload or another device it
# might be. The audit finds the error before it costs a kernel, which is why every built-in rule
# is audited in the tests (`tests/search/test_audit.py`), and why `prism search --audit-rule
# NAME` exists.
#
# ## 7. The fix on a second workload and shape: step 4 of the checklist
#
# One sound audit is evidence about one target: the families its search built, at its shapes,
# on its device. The rule is meant for any program with an RMS in it, so we audit it again on a
# second one: `rms_norm(X)` alone, written with `prism.Graph`, at the shapes `SECOND_SHAPES`.
# Here the block op `rms_norm` is the whole program, so the families the rule prunes hold the
# most direct way to compute the target; the claim is that the search finds one as fast
# elsewhere (`red_ld_rms` and a `div` after the loop).

# %%
g = prism.Graph("rms_norm")
g.output(g.rms_norm(g.input("X", SECOND_SHAPES["X"])))
second_target = g.build()
again = audit(second_target, RULE, fixed)
second_run = search(second_target, fixed)
print(f"audit of the fix on rms_norm(X) at {SECOND_SHAPES}: {again.pruned} prunes, "
      f"{again.checked} checked, {again.equivalent} proved equivalent; sound: {again.sound}")
print(f"  the search with the fix: best {second_run.best.num_kernels} kernel(s), "
      f"{second_run.best.modeled_us:.2f} µs modeled")

# %% [markdown]
# Sound again, and again on programs it proved equivalent, so it was not vacuous. That is
# evidence on two targets, not a proof for all: audit a rule once more whenever you point it at
# a new kind of program.
#
# ## 8. What `not_better` is relative to: step 5 of the checklist
#
# The audit checks `not_better` with the cost model: a pruned program breaks the claim if it
# *models* faster than the best the search keeps outside the prunes (at its best assignment). So
# the claim is "not better by the model", and nothing more. Below, the search with the fixed rule
# switched off (by its name, `SearchConfig(disabled=...)`) proves the programs the rule had
# pruned too; we cost the fastest of them, and the best the search keeps with the rule on.

# %%
from prism.search.audit import feasible_assignments as fitting


def best_modeled(graphs):
    """The lowest modeled latency of these programs over every assignment that fits."""
    return min(modeled(substitute_graph(graph, env), device).latency_us
               for graph in graphs for env in fitting(graph, device))


def programs(found):
    return {dataclasses.replace(c.graph, name="") for c in found.equivalent}


unfixed = search(workload.graph, dataclasses.replace(fixed, disabled=frozenset({RULE})))
under = programs(unfixed) - programs(repaired)       # proved only with the rule off
kept_us, under_us = best_modeled(programs(repaired)), best_modeled(under)
print(f"{len(under)} programs proved only with the rule off; the fastest models at "
      f"{under_us:.2f} µs, the best the search keeps at {kept_us:.2f} µs (modeled)")
print(f"not_better holds by the cost model: {under_us >= kept_us * (1 - 1e-9)}")

# %% [markdown]
# The pruned programs normalize whole-row tiles with the block op `rms_norm`; the ones the search
# keeps do it with `red_ld_rms` and a `div` after the loop. None of the pruned ones models
# faster, so the claim holds, by the model. A GPU might rank them otherwise: the programs differ
# in their ops and loops, which the model charges only by bytes and FLOPs (notebook `06`,
# section 3), and the audit measures nothing. A `not_better` rule is as sound as the cost model
# it leans on: when the model changes, audit the rule again, and where it matters, measure the
# programs it prunes (notebook `06b`).

# %% [markdown]
# ## 9. Exercise: a rule of your own, audited
#
# The fix above prunes the block op `rms_norm` only inside the loop. Go further: whenever a
# block op `rms_norm` gives the right answer, its tile holds whole rows, and `red_ld_rms` with a
# `div` after the loop computes the same, which the search also builds. So write `my_rule(ctx,
# family)`: it prunes every block-level family whose new op is `rms_norm`, inside the loop *or
# after it*, with the claim that is true of every member (`no_equivalent` or `not_better`;
# section 6 tells them apart). The check plugs it into the search as `MY_RULE` and runs the
# engine's audit on it: the audit must find it sound, it must prune something, and at least one
# program under its prunes must be proved equivalent, so that "sound" was tested on real
# programs.

# %%
MY_RULE = "rms_norm_never_needed"
my_rule = None       # your rule: a function (ctx, family) -> Pruned or None

# %% jupyter={"source_hidden":true}
if SHOW_SOLUTIONS:
    def my_rule(ctx, family):
        """Prune the block op rms_norm anywhere: red_ld_rms and a div after the loop do as well."""
        if family.level != "block" or family.kind != "rms_norm":
            return None
        tile = family.block.tensors[family.operands[0]]
        return Pruned(MY_RULE, f"rms_norm({tile.name}): red_ld_rms and a div after the loop do "
                      "the same where it is right", {"claim": "not_better", "tensor": tile.name})


# %%
def check_my_rule(rule):
    """The oracle: the engine's audit, which explores, proves and costs what the rule pruned."""
    config = SearchConfig(**SEARCH, device=device, rules=((MY_RULE, rule),))
    verdict = audit(workload.graph, MY_RULE, config)
    assert verdict.pruned > 0, "the rule pruned nothing"
    assert verdict.equivalent > 0, "nothing under its prunes was proved equivalent"
    assert verdict.sound, (f"unsound: {len(verdict.wrong)} wrongly pruned, e.g. "
                           f"{verdict.wrong[0]['candidate']}: {verdict.wrong[0]['finding']}")
    return verdict


if my_rule is None:
    print("exercise: write my_rule above, or set SHOW_SOLUTIONS = True")
else:
    mine = check_my_rule(my_rule)
    print(f"exercise passed: audit of {MY_RULE}: {mine.pruned} prunes, {mine.checked} checked, "
          f"{mine.equivalent} proved equivalent; sound: {mine.sound}")

# %% [markdown]
# ## What to remember
#
# A wrong pruning rule fails silently: the search still finishes and still returns a proved
# kernel, only a slower one. So, for every rule you add with `SearchConfig(rules=...)`:
#
# 1. Audit it (`audit(target, name, config)`); it costs a search without the rule.
# 2. If it is unsound, find where with the per-rule counts, the explorer and the program the
#    audit returns: draw it, read its proof, run it against torch.
# 3. Fix the claim, not only the condition: a rule's claim covers every member of the family,
#    and the maps are still symbols when it runs.
# 4. Audit the fix again on a second workload and shape.
# 5. Remember that `not_better` is relative to the cost model.
