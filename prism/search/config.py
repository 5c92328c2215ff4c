"""What the search may build and for how long: caps, vocabularies, rules, budgets.

Defaults are Prism's (REFERENCE §1.3): one custom kernel (pre-defined kernel ops are off), a block
graph of at most 11 operators (loads and stores not counted) with at most 3 accumulators, 3
inputs and 1 output, 1–3 grid dims, Prism's default block vocabulary (minus clamp, which the op
set has no entry for) and the accumulators `nored`, `red_ld_sum`, `red_ld_rms`. A kernel graph
has at most 5 kernels (custom or pre-defined; inputs and outputs not counted).

`rules` adds a user's own pruning rules after the built-in ones (`prism.search.pruning.RULES`):
`(name, rule)` pairs, where `rule(ctx, family)` returns a `Pruned` or None exactly as a built-in
rule does. Each is counted, traced, switchable off and auditable by its name, like the built-ins;
this is how a new rule is tried (and debugged: notebook 07) without editing the engine.

`concrete` names the execution parameters the search decides when it opens a block graph instead
of keeping them symbolic (`prism.search.concrete`: "grid" sizes, "loop" range, "imap", "fmap",
"omap"), the ablation Prism reports; empty, the default, is the symbolic search.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from prism.cost.devices import DeviceSpec, default_device, get_device
from prism.errors import PrismError, UnknownDeviceError
from prism.ir.ops import BLOCK, KERNEL, OPS
from prism.search.abstract import AbstractLimits
from prism.search.order import Order
from prism.search.order import problem as order_problem
from prism.search.pruning import RULES
from prism.verify.equiv import Limits

BLOCK_OPS = ("matmul", "exp", "square", "sqrt", "silu", "gelu", "relu", "add", "mul", "div",
             "pow", "rms_norm")
ACCUMULATORS = ("nored", "red_ld_sum", "red_ld_rms")
KERNEL_OPS = ("matmul", "exp", "square", "sqrt", "silu", "gelu", "relu", "add", "mul", "div",
              "pow", "rms_norm")
# Every op the search can place: the op table's compute ops, in a block and as a pre-defined
# kernel op (the defaults above are Prism's vocabulary, a subset).
BLOCK_VOCABULARY = tuple(n for n, od in OPS.items() if od.compute and BLOCK in od.levels)
KERNEL_VOCABULARY = tuple(n for n, od in OPS.items() if od.compute and KERNEL in od.levels)
RULE_NAMES = tuple(RULES)
# what `SearchConfig.concrete` may name: grid sizes, the loop range, and the three maps
CONCRETE_PARAMS = ("grid", "loop", "imap", "fmap", "omap")
UserRule = tuple[str, Callable[[Any, Any], Any]]     # (name, rule(ctx, family) -> Pruned | None)


class SearchConfigError(PrismError):
    """A search setting that cannot work: a budget ≤ 0, an unknown op or rule, caps < 1."""


@dataclass(frozen=True)
class SearchConfig:
    max_kernel_ops: int = 5
    max_custom_kernels: int = 1
    max_block_ops: int = 11
    max_accumulators: int = 3
    max_block_inputs: int = 3
    max_block_outputs: int = 1                  # tensors one block graph stores; Prism's: 1
    grid_dims: tuple[int, ...] = (1, 2, 3)
    block_ops: tuple[str, ...] = BLOCK_OPS
    accumulators: tuple[str, ...] = ACCUMULATORS
    kernel_ops: tuple[str, ...] = ()            # pre-defined kernel ops; Prism's default: none
    disabled: frozenset[str] = frozenset()      # pruning rules switched off
    budget_s: float = 600.0
    max_families: int | None = None             # node budget
    seed: int = 0                               # 0: canonical order; else a shuffled one
    device: DeviceSpec = field(default_factory=default_device)   # or its name: "a100"
    abstract_limits: AbstractLimits = field(default_factory=AbstractLimits)
    verify_limits: Limits = field(default_factory=lambda: Limits(iterations=20, nodes=8000))
    record_graphs: bool = False                 # put each family's sGraph JSON on its event
    hardware_every_op: bool = False             # z3 after every tile-making op, not per block
    rules: tuple[UserRule, ...] = ()            # a user's pruning rules, after the built-ins
    # Where an executor cuts the tree into tasks: at a block graph with this many block ops.
    # Part of the result's definition (branch and bound reads the incumbent of its own task
    # and the part before the cuts), so the same whatever the executor and worker count.
    split_depth: int = 2
    # Parameters decided concretely as the block graph opens (closes, for "omap"), one family
    # per choice, as in Mirage; candidates with concrete sizes are accepted by random testing
    # (`prism.search.concrete`). Empty: every parameter symbolic (Prism's search).
    concrete: frozenset[str] = frozenset()
    # The split move (`prism.search.split`): after the depth-first search, each proved
    # one-kernel program whose loop only sums is also tried with that loop split across
    # blocks and a second custom kernel summing the parts (split-key attention), and each
    # that takes a row max over keys it holds whole with the keys split across blocks and a
    # second kernel that rescales the parts to the max of the maxes (log-sum-exp split),
    # whatever `max_custom_kernels` says; verified as every candidate is. Off in Prism's
    # defaults.
    split_loops: bool = False
    # cost_bound's bound of a complete program of one custom kernel (`pruning.family_bound_us`):
    # the best modeled member over the tuner's sizes, of the members the verifier does not
    # show not equivalent before a proof (the spec check, the quick trial, whose verdicts the
    # search then takes), or, when the split move applies to one of those, its launch and bytes
    # (what any program the move makes of it costs at least). The bound then reads the family's
    # grid, loop and maps, not only its kernel tensors, so it prunes in a one-kernel search.
    # Off in Prism's caps; on in `superoptimize`'s (`pipeline.search_config_for`).
    member_bound: bool = False
    # The order a node tries its children in (`prism.search.order`): "canonical" (the
    # generator's own), "analytic" (by the family's modeled lower bound), or an `Order`
    # (the learned one: `prism.learn.learned_order()`). Only the order: the same programs are
    # valid and proven under every order.
    order: str | Order = "canonical"

    def __post_init__(self) -> None:
        if not isinstance(self.device, DeviceSpec):
            try:        # a name is the device it names: every stage reads the one spec
                object.__setattr__(self, "device", get_device(self.device))
            except UnknownDeviceError as e:
                raise SearchConfigError(str(e)) from None
        problems = self.problems()
        if problems:
            raise SearchConfigError("; ".join(problems))

    @property
    def rule_names(self) -> tuple[str, ...]:
        """Every pruning rule this search runs (unless disabled), in order."""
        return (*RULE_NAMES, *(name for name, _ in self.rules))

    def problems(self) -> list[str]:
        out = []
        if not self.budget_s > 0:
            out.append(f"the budget is {self.budget_s} s; give a positive time, e.g. "
                       "--budget 60")
        if self.max_families is not None and self.max_families < 1:
            out.append(f"max_families is {self.max_families}; give at least 1 or None")
        for name in ("max_kernel_ops", "max_custom_kernels", "max_block_ops",
                     "max_accumulators", "max_block_inputs", "split_depth"):
            if getattr(self, name) < 1:
                out.append(f"{name} is {getattr(self, name)}; caps must be ≥ 1")
        if self.max_block_outputs < 1:
            out.append(f"max_block_outputs is {self.max_block_outputs}; caps must be ≥ 1")
        if not self.grid_dims or any(k not in (1, 2, 3) for k in self.grid_dims):
            out.append(f"grid_dims {self.grid_dims} must be a non-empty subset of 1, 2, 3")
        for what, names, allowed in (
                ("block op", self.block_ops, set(BLOCK_VOCABULARY)),
                ("accumulator", self.accumulators, {"nored", "red_ld_sum", "red_ld_mean",
                                                    "red_ld_rms", "redtox_ld_sum"}),
                ("kernel op", self.kernel_ops, set(KERNEL_VOCABULARY))):
            bad = [n for n in names if n not in allowed or n not in OPS]
            if bad:
                out.append(f"unknown {what}(s) {', '.join(bad)}; choose from "
                           f"{', '.join(sorted(allowed))}")
        for entry in self.rules:
            if not (isinstance(entry, tuple) and len(entry) == 2 and isinstance(entry[0], str)
                    and entry[0].isidentifier() and callable(entry[1])):
                out.append(f"a user rule must be a (name, function) pair with an identifier "
                           f"for its name, e.g. ('my_rule', my_rule); got {entry!r}")
        given = [entry[0] for entry in self.rules if isinstance(entry, tuple)
                 and len(entry) == 2 and isinstance(entry[0], str)]
        clash = sorted({n for n in given if n in RULE_NAMES or given.count(n) > 1})
        if clash:
            out.append(f"user rule name(s) {', '.join(clash)} are taken (built-in or given "
                       "twice); give each rule a name of its own")
        odd = sorted(set(self.concrete) - set(CONCRETE_PARAMS))
        if odd:
            out.append(f"unknown concrete parameter(s) {', '.join(odd)}; choose from "
                       f"{', '.join(CONCRETE_PARAMS)}")
        why = order_problem(self.order)
        if why:
            out.append(why)
        known = (*RULE_NAMES, *given)
        bad = sorted(set(self.disabled) - set(known))
        if bad:
            out.append(f"unknown pruning rule(s) {', '.join(bad)}; the rules are "
                       f"{', '.join(known)}")
        return out

    def to_json(self) -> dict[str, object]:
        return {"max_kernel_ops": self.max_kernel_ops,
                "max_custom_kernels": self.max_custom_kernels,
                "max_block_ops": self.max_block_ops, "max_accumulators": self.max_accumulators,
                "max_block_inputs": self.max_block_inputs,
                **({"max_block_outputs": self.max_block_outputs}
                   if self.max_block_outputs != 1 else {}),
                "grid_dims": list(self.grid_dims),
                "block_ops": list(self.block_ops), "accumulators": list(self.accumulators),
                "kernel_ops": list(self.kernel_ops), "disabled": sorted(self.disabled),
                "budget_s": self.budget_s, "max_families": self.max_families,
                "seed": self.seed, "split_depth": self.split_depth,
                "device": self.device.name,
                "device_limits": {"smem_bytes": self.device.smem_bytes,
                                  "max_blocks": self.device.max_blocks,
                                  "min_matmul_tile": self.device.min_matmul_tile,
                                  "dtype_bytes": self.device.dtype_bytes},
                **({"user_rules": [name for name, _ in self.rules]} if self.rules else {}),
                **({"concrete": sorted(self.concrete)} if self.concrete else {}),
                **({"split_loops": True} if self.split_loops else {}),
                **({"member_bound": True} if self.member_bound else {}),
                **({"order": self.order_name} if self.order_name != "canonical" else {})}

    @property
    def order_name(self) -> str:
        return self.order if isinstance(self.order, str) else self.order.name
