"""What the evaluator reads, as plain numbers (no torch here): a program, a family's chain of
decisions, the family itself, and a tuning configuration.

A family of the search is the chain of decisions that built it (`prism.search.generate`): open a
custom kernel on some kernel tensors, add a block op or an accumulator, close the block (store
its tiles, with k grid dims), add a pre-defined kernel op. `tokens(ctx, kernel, block)` writes
that chain from the family's state, one `Token` per decision, so the state a trace records
(`prism.steps.states.rebuild` of the family's graph) and the state the generator holds give the
same tokens, and a child's tokens are its parent's plus the decision that made it
(`tokens(child) == tokens(parent) + [last]`: the model rolls its latent state forward one
decision at a time). Nothing in a token names a tensor or a size of one workload: the op kinds,
where the operands come from (a load, a tile before the loop, one after it), whether the new
tensor's abstract expression is in the target's e-graph or is a target output, and counts.

`program(ctx, kernel)` encodes the target (its expressions' heads, its bytes); `node(ctx, kernel,
block)` the family's counts against the caps; `configuration(graph, device)` a concrete
program the tuner may try (its kernels' grids, loops and tiles).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from prism.cost import DeviceSpec, full_size_flops, roofline_us
from prism.ir.graph import BlockGraph, KernelGraph, Op
from prism.ir.ops import OPS
from prism.search.pruning import Context
from prism.search.state import BlockState, KernelState

LEVELS = ("open", "block", "close", "kernel")
# the op kinds a token may name: the op table's compute ops, and the custom kernel
KINDS = ("customized", *sorted(n for n, od in OPS.items() if od.compute))
# numbers on a token: operands that are loads, tiles before the loop, tiles after it, kernel
# tensors the program computed; the new tensor is after the loop; its expression is in the
# target's e-graph; it is a target output; the inputs a custom kernel reads (share); grid dims
# (share of 3); partial sums
TOKEN_NUMBERS = 10
NODE_NUMBERS = 8
# the heads an abstract expression may have (`prism.expr`): ops, and what ops are written as
HEADS = tuple(sorted({*KINDS[1:], "sum", "rms", "mean", "max"}))
PROGRAM_NUMBERS = len(HEADS) + 5
CONFIG_NUMBERS = 12


@dataclass(frozen=True)
class Token:
    level: int              # index in LEVELS
    kind: str               # an op kind (in KINDS, or another the model maps to "unknown")
    numbers: tuple[float, ...]


def program(ctx: Context, kernel: KernelState) -> list[float]:
    """The target, as every family of its search sees it (the search's context and the input
    tensors every state starts from): the share of each head in its abstract expressions
    (`matmul` is `sum` of `mul`, and so on), log2 of the bytes of its inputs and of its
    outputs, its inputs and outputs."""
    heads = [t.head for term in ctx.target.terms for _, t in term.subterms() if t.args]
    counts = [sum(1 for h in heads if h == head) / max(1, len(heads)) for head in HEADS]
    dtype = ctx.config.device.dtype_bytes
    read = sum(dtype * _elements(t.shape) for t in kernel.tensors[:kernel.num_inputs])
    written = sum(dtype * _elements(s) for s in ctx.target.output_shapes)
    return [*counts, math.log2(1 + read) / 40, math.log2(1 + written) / 40,
            kernel.num_inputs / 4, len(ctx.target.output_shapes) / 2, float(len(heads)) / 20]


def reference_us(ctx: Context, kernel: KernelState) -> float:
    """The scale latencies are learned against: one launch that reads every input and writes
    every output once (the memory side of the roofline), on the search's device."""
    device = ctx.config.device
    read = sum(_elements(t.shape) for t in kernel.tensors[:kernel.num_inputs])
    written = sum(_elements(s) for s in ctx.target.output_shapes)
    return device.launch_us + device.dtype_bytes * (read + written) / (device.mem_bw_gbps * 1e3)


def _elements(shape: Sequence[Any]) -> int:
    return math.prod(int(d.value) if hasattr(d, "value") else int(d) for d in shape)


def tokens(ctx: Context, kernel: KernelState, block: BlockState | None) -> list[Token]:
    """The chain of decisions that made the family (`kernel`, `block`), one token each."""
    out: list[Token] = []
    made = {t.name: t for t in kernel.tensors}
    computed = {t.name for t in kernel.tensors[kernel.num_inputs:]}
    for op in kernel.ops:
        if op.kind == "customized":
            assert op.block is not None
            out.append(_open(len(op.inputs), kernel.num_inputs))
            out += _block_tokens(op.block.ops, ctx, None)
            stored = [made[t] for t in op.outputs]
            split = any(t.split for t in stored)
            is_output = any(ctx.output_index(t) is not None for t in stored)
            out.append(Token(LEVELS.index("close"), "customized",
                             (0, 0, 0, 0, 1, 1, float(is_output), 0,
                              len(op.block.grid) / 3, float(split))))
        else:
            args = list(op.inputs)
            new = made[op.outputs[0]]
            out.append(Token(LEVELS.index("kernel"), op.kind,
                             (0, 0, 0, sum(1 for a in args if a in computed), 1,
                              float(ctx.target.lookup(new.term) is not None),
                              float(ctx.output_index(new) is not None), 0, 0, 0)))
    if block is not None:
        out.append(_open(len(block.sources), kernel.num_inputs))
        out += _block_tokens(block.ops, ctx, block)
    return out


def _open(reads: int, inputs: int) -> Token:
    return Token(LEVELS.index("open"), "customized",
                 (0, 0, 0, 0, 0, 0, 0, reads / max(1, inputs), 0, 0))


def _block_tokens(ops: Sequence[Op], ctx: Context, block: BlockState | None) -> list[Token]:
    """A block graph's ops (loads, stores and their maps aside), each with where its operands
    come from; the open block's (`block` given) also with its new tensor's expression."""
    loads: set[str] = set()
    post: set[str] = set()
    terms = {t.name: t for t in block.tensors} if block is not None else {}
    out = []
    for op in ops:
        if op.kind == "input":
            loads.add(op.outputs[0])
            continue
        if op.kind == "output":
            continue
        args = list(op.inputs)
        n_load = sum(1 for a in args if a in loads)
        n_post = sum(1 for a in args if a in post)
        after = OPS[op.kind].category == "accum" or n_post > 0
        if after:
            post.add(op.outputs[0])
        new = terms.get(op.outputs[0])
        # a closed block's inner tensors passed the abstract-expression rule when the search
        # made them (their terms are not kept): 1, as an open block's surviving ones read
        found = 1.0 if new is None else float(ctx.target.lookup(new.term) is not None)
        is_output = 0.0 if new is None else float(ctx.output_index(new) is not None)
        out.append(Token(LEVELS.index("block"), op.kind,
                         (n_load / 2, (len(args) - n_load - n_post) / 2, n_post / 2, 0,
                          float(after), found, is_output, 0, 0, 0)))
    return out


def node(ctx: Context, kernel: KernelState, block: BlockState | None) -> list[float]:
    """The family's counts against the caps: block ops used and left, tensors waiting, the
    accumulators, kernels, custom kernels, an open block."""
    cfg = ctx.config
    ops = block.compute_ops if block is not None else 0
    waiting = len(block.open_tensors) if block is not None else 0
    return [ops / cfg.max_block_ops, (cfg.max_block_ops - ops) / cfg.max_block_ops,
            waiting / 4, (block.accumulators if block is not None else 0) / 3,
            kernel.kernels / cfg.max_kernel_ops, kernel.custom / 2,
            float(block is not None),
            float(block is not None and waiting - cfg.max_block_outputs
                  > cfg.max_block_ops - ops)]


def configuration(graph: KernelGraph, device: DeviceSpec) -> list[float]:
    """A concrete program (every size and map a number), for the tuning head: per custom kernel
    summed over kernels, log2 of its blocks, loop range, tile elements loaded per iteration,
    tile elements stored, block ops and matmuls; its kernels; the program's roofline."""
    blocks = loop = loaded = stored = ops = matmuls = 0.0
    kernels = 0
    for _, bg in graph.iter_blocks():
        kernels += 1
        blocks += math.log2(max(1, math.prod(g.value for g in bg.grid)))
        loop += math.log2(max(1, bg.forloop_range.value))
        loaded += math.log2(1 + _tile_elements(bg, "input"))
        stored += math.log2(1 + _tile_elements(bg, "output"))
        ops += sum(1 for op in bg.ops if op.kind not in ("input", "output"))
        matmuls += sum(1 for op in bg.ops if op.kind == "matmul")
    return [blocks / 12, loop / 12, loaded / 20, stored / 20, ops / 10, matmuls / 3,
            kernels / 2, graph.num_kernels / 3,
            math.log2(1 + roofline_us(graph, device)) / 10,
            math.log2(1 + device.smem_bytes) / 20, float(kernels == 0),
            math.log2(1 + full_size_flops(graph)) / 40]


def _tile_elements(bg: BlockGraph, kind: str) -> int:
    shapes = dict(bg.tensors)
    names = [op.outputs[0] if kind == "input" else op.inputs[0]
             for op in bg.ops if op.kind == kind]
    total = 0
    for name in names:
        total += math.prod(d.value for d in shapes[name])
    return total
