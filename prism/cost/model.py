"""The analytic cost model (DESIGN.md §6): modeled latency, roofline and lower bound of a program.

Every tensor element is the run's dtype (`DeviceSpec.dtype_bytes`: 2 bytes for fp16 and bf16, 4
for fp32), except the fp32 (4-byte) partial tiles of a summed output and the row norms of
rms_norm. The model charges every kernel launch the generated module's `run()` makes
(`prism.instantiate.codegen`) and nothing else: each launch costs max(memory time, compute time)
+ one launch overhead, and a program costs the sum over its launches (they run one after
another). `ModeledCost.kernels` has one entry per launch, in launch order:

- a custom kernel: one launch of its `@triton.jit` kernel, then one launch of a *combine* kernel
  per output whose omap sums blocks (a grid dim of size > 1 that maps to no data dim);
- a predefined op (matmul, add, sum, ...): one torch call, one launch, except rms_norm, which is
  three (the rows' norms, their scaling to the root mean square, the division), six with an
  epsilon (its scaling is four in-place launches);
- nothing for allocations (`torch.empty`) and for `.contiguous()` of a contiguous input (inputs
  are assumed contiguous: a strided input costs a copy the model does not see).

A predefined launch is a library kernel assumed to fill the device:
    memory   its distinct inputs read once + its output written once, at HBM bandwidth
    compute  `op_flops` of the op at full size, at the dtype's peak (`DeviceSpec.peak_tflops`:
             the tensor-core one for fp16 and bf16, the fp32 one for fp32)

A custom kernel with blocks = Π grid and a loop of range F:
    loads    each input tile once per loop iteration: blocks · F · tile bytes per input (once per
             block, blocks · tile bytes, for a tile the loop does not walk: it is hoisted). The
             input's own size comes from HBM; the excess (replicated reads) comes from L2 at L2
             bandwidth when the input fits in L2, else from HBM again.
    stores   blocks · tile bytes per output: its own size to HBM, any excess to L2 (or HBM when
             it does not fit). A summed output's blocks write fp32 partial tiles instead:
             P · N · 4 bytes for N output elements and P = Π summed grid sizes, to L2 when they
             fit there (else HBM).
    flops    blocks · (F · loop-body flops + post-loop flops); intermediates stay on chip.
    idle SMs a busy SM streams its 1/SMs share of the bandwidth, so memory time is divided by
             min(1, blocks / SMs); the busiest SM runs ⌈blocks / SMs⌉ blocks on its 1/SMs share
             of the peak, so compute time is divided by blocks / (SMs · ⌈blocks / SMs⌉) (wave
             quantization). `waves` reports ⌈blocks / (SMs · blocks per SM)⌉ rounds of resident
             blocks; co-resident blocks share one SM, so the per-SM load is what costs time.
A tail (a custom kernel with `launch="tail"`, `prism.ir.spec.TAIL`) runs in the launch of the
custom kernel before it: the last block of each group to finish runs the tail's block for that
group (`prism.instantiate.codegen`). Its entry in `kernels` (kind "tail") is costed as a custom
kernel of its own, memory and compute as above, but with no launch overhead: instead one
`DeviceSpec.sync_us`, the fence and counter a block takes to learn it is its group's last. Its
work is added after the head kernel's, as if the tails overlapped none of the parts (they
start while other groups' parts still run): an upper estimate of what the launch saves.
A combine kernel runs ⌈N / 256⌉ blocks that read the P · N · 4 partial bytes back (from L2 when
they fit there, as they were written), add them (P · N flops) and write the N-element output to
HBM; its idle SMs are counted as a custom kernel's.

Cache regime: the model predicts a run that starts with a cold L2, which is what
`triton.testing.do_bench` times (it zeroes a 256 MB buffer before every call of the function it
times, evicting every input). Each graph input is read from HBM at least once per run; only
re-reads within one launch (replicated tiles) and partial tiles read back by their combine come
from L2, and a tensor one launch writes and the next reads is charged at HBM bandwidth both
times. A warm-L2 timing (back-to-back calls on the same inputs, no flush) of a program whose
tensors fit in L2 would come out faster than this model. `bench/gpu_check.py` and the cuda
backend time the same regime (`prism.instantiate.triton_backend.bench_cuda`). The launch
overhead is `DeviceSpec.launch_us`, the gap between kernels launched back to back.

The roofline is max(graph inputs + outputs over HBM bandwidth, full-size flops over peak) plus one
launch: no program launches less. `lower_bound_us` is the same per kernel op, summed: what every
assignment of a symbolic family costs at least, which the search's cost-bound rule prunes with.
The eager baseline, `eager_us`, models PyTorch eager as one library kernel per operator (rms_norm
one launch too), not the generated launcher.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from prism.cost.devices import DeviceSpec
from prism.errors import PrismError, ShapeError
from prism.ir.dims import dim, evaluate, shape_str
from prism.ir.dtypes import DEFAULT_DTYPE
from prism.ir.graph import BlockGraph, KernelGraph, Map, Op, Shape
from prism.ir.ops import OPS, infer_shape, op_def, with_defaults
from prism.ir.spec import is_tail

BYTES_PER_ELEMENT = DEFAULT_DTYPE.bytes   # fp16's; a run counts `DeviceSpec.dtype_bytes`
FP32_BYTES = 4          # a partial tile's and a row norm's elements
IO_KINDS = frozenset({"input", "output"})
CACHE_REGIME = "cold L2: flushed before each run, as triton.testing.do_bench times"
# Output elements one block of a combine kernel adds: `prism.instantiate.codegen.COMBINE_BLOCK`
# (tests/instantiate/test_launches.py checks every launch's grid against the model's blocks).
COMBINE_BLOCK = 256

Ints = tuple[int, ...]
FlopRule = Callable[[Sequence[Ints], Ints], int]

# FLOPs of one op from its input and output shapes, by op category (elements, not bytes).
_FLOPS: dict[str, FlopRule] = {
    "matmul": lambda ins, out: 2 * math.prod(out) * ins[0][-1],   # a multiply-add per (m, n, k)
    "unary": lambda ins, out: math.prod(out),                      # one per output element
    "binary": lambda ins, out: math.prod(out),
    "scalar": lambda ins, out: math.prod(out),
    "reduce": lambda ins, out: math.prod(ins[0]),                  # an add per element read
    "norm": lambda ins, out: 3 * math.prod(out),                   # square, sum, divide
    "accum": lambda ins, out: math.prod(ins[0]),                   # fold a tile into the sum
    "io": lambda ins, out: 0,
    "custom": lambda ins, out: 0,                                  # its block ops count instead
}


@dataclass(frozen=True)
class KernelCost:
    """The modeled cost of one launch. `blocks` and `waves` are None for a predefined op's."""

    name: str            # the kernel op's first output tensor (its kind when it has none)
    kind: str            # "customized", "combine" or the predefined op
    blocks: int | None
    waves: int | None
    hbm_bytes: int
    l2_bytes: int
    flops: int
    memory_us: float
    compute_us: float
    latency_us: float    # max(memory_us, compute_us) + launch (a tail: + sync, no launch)
    step: str = ""       # which launch of a predefined op that makes several (rms_norm)

    @property
    def bound(self) -> str:
        """Which of memory and compute sets the latency."""
        return "memory" if self.memory_us >= self.compute_us else "compute"


@dataclass(frozen=True)
class ModeledCost:
    """The modeled latency of a concrete program, its roofline, and every launch's share (one
    `KernelCost` per kernel launch of the generated `run()`, in order), in the `cache` regime."""

    device: str
    latency_us: float
    roofline_us: float
    kernels: tuple[KernelCost, ...]
    cache: str = CACHE_REGIME

    @property
    def launches(self) -> int:
        """How many kernels the generated `run()` launches (a tail runs in its head's launch)."""
        return sum(k.kind != "tail" for k in self.kernels)

    def __str__(self) -> str:
        return (f"{self.latency_us:.2f} µs modeled on {self.device} (roofline "
                f"{self.roofline_us:.2f} µs, {self.launches} launch(es))")


# -- FLOPs -----------------------------------------------------------------------------------------

def op_flops(kind: str, inputs: Sequence[Ints], output: Ints) -> int:
    """The FLOPs of one op (kernel or block level) on inputs and an output of these shapes."""
    od = op_def(kind)
    return _FLOPS[od.category](inputs, output) * od.flops


def full_size_flops(graph: KernelGraph) -> float:
    """The program's arithmetic at full size: each predefined kernel's natural count, and each
    custom kernel's block ops at the trivial instantiation (one block, one loop iteration: every
    grid size and the loop range 1, so every map factor is 1), i.e. what one block computing the
    whole tensors would do. Works for symbolic families: only kernel-graph shapes are read.

    Replicated work (a tile every block loads and computes on) is not counted, so a program's
    modeled FLOPs are at least these. The exception is a loop that leaves a dim split for a
    post-loop reduction (`nored` of walked tiles, then `sum`): its epilogue is smaller than at
    full size, but only linear ops can follow there, whose memory time dwarfs their FLOPs.
    """
    sizes = _Sizes(graph)
    return float(sum(_full_kernel_flops(sizes, op) for op in _kernels(graph)))


def _full_kernel_flops(sizes: _Sizes, op: Op) -> int:
    if op.kind != "customized":
        return op_flops(op.kind, [sizes.shape(t) for t in op.inputs], sizes.shape(op.outputs[0]))
    block = _block_of(op)
    try:
        shapes = _trivial_shapes(sizes, op, block)
    except ShapeError:
        # A concrete program whose tiles agree only at its own sizes (a hand-built one: the
        # search never makes such): count its own arithmetic instead.
        if block.free_vars():
            raise
        return _block_flops(block, _tile_shapes(block), *_sizes(block))
    return _block_flops(block, shapes, 1, 1)


def _trivial_shapes(sizes: _Sizes, op: Op, block: BlockGraph) -> dict[str, Ints]:
    """Every block tensor's shape with one block and one iteration: an input tile is the whole
    kernel tensor it loads, and the op table's shape rules give the rest."""
    shapes: dict[str, Shape] = {
        tile.outputs[0]: tuple(dim(n) for n in sizes.shape(t))
        for tile, t in zip(block.input_ops, op.inputs, strict=False)}
    for bop in block.ops:
        if bop.kind not in IO_KINDS:
            shapes[bop.outputs[0]] = infer_shape(bop.kind, [shapes[t] for t in bop.inputs],
                                                 bop.attr)
    return {t: tuple(d.value for d in s) for t, s in shapes.items()}


def _block_flops(block: BlockGraph, shapes: Mapping[str, Ints], blocks: int, loop: int) -> int:
    """blocks · (loop · loop-body flops + post-loop flops)."""
    body = post = 0
    for bop in block.ops:
        if bop.kind in IO_KINDS:
            continue
        flops = op_flops(bop.kind, [shapes[t] for t in bop.inputs], shapes[bop.outputs[0]])
        if OPS[bop.kind].category != "accum" and bop.outputs[0] in block.after_accum:
            post += flops
        else:
            body += flops
    return blocks * (loop * body + post)


# -- bounds ----------------------------------------------------------------------------------------

def roofline_us(graph: KernelGraph, device: DeviceSpec) -> float:
    """max(minimum bytes / HBM bandwidth, full-size FLOPs / peak) + one launch, where the
    minimum bytes read each graph input a kernel consumes once and write each graph output a
    kernel produces once."""
    inputs = set(graph.inputs)
    read = {t for op in _kernels(graph) for t in op.inputs if t in inputs}
    written = {t for t in graph.outputs if t in graph.producers
               and graph.producers[t].kind not in IO_KINDS}
    sizes = _Sizes(graph, device.dtype_bytes)
    moved = sum(sizes.nbytes(t) for t in read | written)
    launch = device.launch_us if graph.num_kernels else 0.0
    return max(_memory_us(moved, device.mem_bw_gbps),
               _compute_us(full_size_flops(graph), device)) + launch


def lower_bound_us(graph: KernelGraph, device: DeviceSpec) -> float:
    """A lower bound of the modeled latency of every assignment of a (symbolic) family:
    Σ over kernels of max(its distinct inputs and its outputs once over HBM bandwidth, its
    full-size FLOPs over peak) + its launch (none for a tail). Only kernel-graph shapes are
    read, so grid sizes, loop ranges and maps may be symbolic. The model of any member moves
    at least these bytes (each kernel tensor once from HBM) and computes at least these FLOPs
    (a member that splits a tile dim k ways runs it in k blocks or iterations; see
    `full_size_flops` for the one exception, which never binds)."""
    sizes = _Sizes(graph, device.dtype_bytes)
    return sum(max(_memory_us(_kernel_io_bytes(sizes, op), device.mem_bw_gbps),
                   _compute_us(_full_kernel_flops(sizes, op), device)) + _launch_us(op, device)
               for op in _kernels(graph))


def memory_floor_us(graph: KernelGraph, device: DeviceSpec) -> float:
    """`lower_bound_us` without its FLOPs: one launch and the kernel tensors each kernel reads
    and writes once over HBM bandwidth. Below the modeled latency of any program that reads
    these inputs and writes these outputs in at least as many launches, however its kernels
    split the work (each launch moves its share of those tensors at most at full bandwidth)."""
    sizes = _Sizes(graph, device.dtype_bytes)
    return sum(_memory_us(_kernel_io_bytes(sizes, op), device.mem_bw_gbps)
               + _launch_us(op, device) for op in _kernels(graph))


def next_kernel_us(written: Sequence[Sequence[int]], device: DeviceSpec) -> float:
    """A lower bound of what the kernels a partial program still needs add to its latency,
    when they must write tensors of these shapes (outputs nothing has computed yet): at least
    one more launch, and each of those tensors written once over HBM bandwidth (`lower_bound_us`
    counts a kernel's outputs in its bytes; a tensor is written by one kernel)."""
    if not written:
        return 0.0
    return device.launch_us + _memory_us(
        sum(device.dtype_bytes * math.prod(s) for s in written), device.mem_bw_gbps)


# -- the model -------------------------------------------------------------------------------------

def modeled(graph: KernelGraph, device: DeviceSpec) -> ModeledCost:
    """The modeled cost of a concrete program (grid sizes, loop ranges and maps all concrete):
    one `KernelCost` per launch of its generated `run()`."""
    _require_concrete(graph)
    sizes = _Sizes(graph, device.dtype_bytes)
    kernels = tuple(k for op in _kernels(graph)
                    for k in (_custom_costs(sizes, op, device) if op.kind == "customized"
                              else _predefined_costs(sizes, op, device)))
    return ModeledCost(device.name, sum(k.latency_us for k in kernels),
                       roofline_us(graph, device), kernels)


def eager_us(graph: KernelGraph, device: DeviceSpec) -> float:
    """The unfused baseline (DESIGN.md §6): every op of a graph of predefined ops (a traced
    workload) as one library kernel, a launch that moves its inputs and output once, rms_norm
    included; custom kernels, if any, as modeled. It models PyTorch eager at one kernel per
    operator, not the generated launcher, whose `_rms_norm` is three launches (`modeled`)."""
    _require_concrete(graph)
    sizes = _Sizes(graph, device.dtype_bytes)
    return sum(k.latency_us for op in _kernels(graph)
               for k in (_custom_costs(sizes, op, device) if op.kind == "customized"
                         else [_library(_kernel_name(op), op.kind, _kernel_io_bytes(sizes, op),
                                        _full_kernel_flops(sizes, op), device)]))


def _launch_us(op: Op, device: DeviceSpec) -> float:
    """The launch overhead a kernel op pays: none for a tail (it runs in its head's launch)."""
    return 0.0 if is_tail(op) else device.launch_us


def _predefined_costs(sizes: _Sizes, op: Op, device: DeviceSpec) -> list[KernelCost]:
    name = _kernel_name(op)
    if op.kind != "rms_norm":
        return [_library(name, op.kind, _kernel_io_bytes(sizes, op),
                         _full_kernel_flops(sizes, op), device)]
    # The launcher's `_rms_norm`: torch's vector_norm over the rows (x read, the norms written
    # in fp32), their scaling to the root mean square, the division (x and the norms read).
    (x,) = op.inputs
    n, x_bytes = math.prod(sizes.shape(x)), sizes.nbytes(x)
    rows = n // sizes.shape(x)[-1]
    norms = rows * FP32_BYTES
    # With an epsilon the scaling is four in-place launches on the norms: square, scale, add
    # eps, square root.
    scale = ["scale"] if not with_defaults(op.kind, op.attr)["eps"] else \
        ["square", "scale", "add_eps", "sqrt"]
    return [_library(name, op.kind, x_bytes + norms, 2 * n, device, "norm"),      # square, add
            *(_library(name, op.kind, 2 * norms, rows, device, step) for step in scale),
            _library(name, op.kind, 2 * x_bytes + norms, n, device, "divide")]


def _library(name: str, kind: str, moved: int, flops: int, device: DeviceSpec,
             step: str = "") -> KernelCost:
    """A library launch: `moved` bytes at HBM bandwidth, `flops` at peak, the device full."""
    memory, compute = _memory_us(moved, device.mem_bw_gbps), _compute_us(flops, device)
    return KernelCost(name, kind, None, None, moved, 0, flops, memory, compute,
                      max(memory, compute) + device.launch_us, step)


def _custom_costs(sizes: _Sizes, op: Op, device: DeviceSpec) -> list[KernelCost]:
    """The custom kernel's launch, then one combine launch per output whose blocks it sums."""
    block = _block_of(op)
    blocks, loop = _sizes(block)
    grid = [g.value for g in block.grid]
    tiles = _tile_shapes(block)
    traffic: dict[str, int] = {}   # kernel tensor → bytes the blocks move for it
    partial: dict[str, int] = {}   # summed output → its fp32 partial tiles' bytes
    for bop, src in zip(block.input_ops, op.inputs, strict=False):
        loads = loop if _walks(bop.attr["fmap"]) else 1     # a tile the loop does not walk is
        traffic[src] = traffic.get(src, 0) + blocks * loads * sizes.bytes(tiles[bop.outputs[0]])
    for bop, dst in zip(block.output_ops, op.outputs, strict=False):
        summed = _summed_blocks(bop.attr["omap"], grid)
        if summed > 1:
            partial[dst] = summed * math.prod(sizes.shape(dst)) * FP32_BYTES
        else:
            traffic[dst] = blocks * sizes.bytes(tiles[bop.inputs[0]])
    hbm = l2 = 0
    handed = _handed(sizes.graph, op)
    for name, moved in traffic.items():
        if name in handed:      # a part a tail reads back, as a combine reads partial tiles
            hbm, l2 = (hbm, l2 + moved) if sizes.nbytes(name) <= device.l2_bytes else \
                (hbm + moved, l2)
            continue
        from_hbm, from_l2 = _split_traffic(sizes.nbytes(name), moved, device)
        hbm, l2 = hbm + from_hbm, l2 + from_l2
    for nbytes in partial.values():
        hbm, l2 = (hbm, l2 + nbytes) if nbytes <= device.l2_bytes else (hbm + nbytes, l2)
    flops = _block_flops(block, tiles, blocks, loop)
    # a tail pays no launch of its own, one sync instead (the module doc)
    kind, overhead = ("tail", device.sync_us) if is_tail(op) else (op.kind, device.launch_us)
    kernel = _blocks_cost(_kernel_name(op), kind, blocks, hbm, l2, flops, device, overhead)
    return [kernel] + [_combine_cost(sizes, dst, nbytes, device)
                       for dst, nbytes in partial.items()]


def _handed(graph: KernelGraph, op: Op) -> set[str]:
    """The tensors a kernel and its tail hand over within their one launch (written by the head,
    read by the tail and by nothing else, no graph output): what a tail reads back is charged
    as a combine's partial tiles are, to and from L2 when it fits there."""
    for head, tail in itertools.pairwise(graph.ops):
        if is_tail(tail) and (op is head or op is tail):
            outputs = set(graph.outputs)
            return {t for t in head.outputs if t not in outputs
                    and all(c is tail for c in graph.consumers.get(t, []))}
    return set()


def _combine_cost(sizes: _Sizes, output: str, partial: int, device: DeviceSpec) -> KernelCost:
    """The combine launch of a summed output: its partial tiles read back (from L2 when they fit
    there, where their kernel wrote them), the output written to HBM, an add per partial
    element."""
    n = math.prod(sizes.shape(output))
    hbm, l2 = (sizes.nbytes(output), partial) if partial <= device.l2_bytes \
        else (sizes.nbytes(output) + partial, 0)
    return _blocks_cost(output, "combine", math.ceil(n / COMBINE_BLOCK), hbm, l2,
                        partial // FP32_BYTES, device)


def _blocks_cost(name: str, kind: str, blocks: int, hbm: int, l2: int, flops: int,
                 device: DeviceSpec, overhead: float | None = None) -> KernelCost:
    """A launch of `blocks` blocks moving `hbm` and `l2` bytes and computing `flops`: memory and
    compute time over the SMs the blocks keep busy (the module doc's idle-SM rule), plus
    `overhead` (the device's launch overhead unless said: a tail's is its sync)."""
    busy = min(1.0, blocks / device.sm_count)
    balance = blocks / (device.sm_count * math.ceil(blocks / device.sm_count))
    memory = (_memory_us(hbm, device.mem_bw_gbps) + _memory_us(l2, device.l2_bw_gbps)) / busy
    compute = _compute_us(flops, device) / balance
    waves = math.ceil(blocks / (device.sm_count * device.max_blocks_per_sm))
    overhead = device.launch_us if overhead is None else overhead
    return KernelCost(name, kind, blocks, waves, hbm, l2, flops, memory, compute,
                      max(memory, compute) + overhead)


def _walks(fmap: Map) -> bool:
    """Whether the for-loop walks a data dim of this input (else its tile is loaded once, above
    the loop, as the code generator does)."""
    return any(e != 0 for row in fmap.rows for e in row)


def _summed_blocks(omap: Map, grid: Sequence[int]) -> int:
    """How many blocks' tiles each output element sums: the product of the grid dims of size > 1
    that the omap maps to no data dim (1 when there are none)."""
    return math.prod(size for size, row in zip(grid, omap.rows, strict=True)
                     if size > 1 and all(e == 0 for e in row))


def _split_traffic(unique: int, moved: int, device: DeviceSpec) -> tuple[int, int]:
    """(HBM bytes, L2 bytes): the tensor once from HBM, the excess from L2 if it fits there."""
    excess = max(0, moved - unique)
    return (unique, excess) if unique <= device.l2_bytes else (unique + excess, 0)


# -- helpers ---------------------------------------------------------------------------------------

def _memory_us(nbytes: float, gbps: float) -> float:
    return nbytes / (gbps * 1e3)          # bytes / (GB/s) = 1e-9 s = 1e-3 µs


def _compute_us(flops: float, device: DeviceSpec) -> float:
    return flops / (device.peak_tflops * 1e6)   # flops / (TFLOP/s) = 1e-12 s = 1e-6 µs


def _kernels(graph: KernelGraph) -> list[Op]:
    return [op for op in graph.ops if op.kind not in IO_KINDS]


def _kernel_name(op: Op) -> str:
    return op.outputs[0] if op.outputs else op.kind


def _block_of(op: Op) -> BlockGraph:
    if op.block is None:
        raise PrismError(f"custom kernel {_kernel_name(op)} has no block graph; build it with one")
    return op.block


def _kernel_io_bytes(sizes: _Sizes, op: Op) -> int:
    """A kernel's distinct inputs read once and its outputs written once."""
    return sum(sizes.nbytes(t) for t in {*op.inputs, *op.outputs})


class _Sizes:
    """Kernel-graph tensor shapes as ints. In a symbolic family a custom kernel's output shape
    may still hold its block parameters (grid sizes, loop range, map bits); they are read at the
    trivial instantiation (sizes 1, bits 0): the data dims every member that computes the program
    produces. Any other variable is a symbolic data dim, which the model refuses. A tensor (or
    tile) counts `element_bytes` an element: the run's dtype's (`DeviceSpec.dtype_bytes`)."""

    def __init__(self, graph: KernelGraph, element_bytes: int = BYTES_PER_ELEMENT):
        self.graph = graph
        self.element_bytes = element_bytes
        self.env: dict[str, int] = {}
        for _, block in graph.iter_blocks():
            for size in (*block.grid, block.forloop_range):
                self.env.update(dict.fromkeys(size.free_vars(), 1))
            for bop in block.ops:
                for m in (bop.attr.get(k) for k in ("imap", "fmap", "omap")):
                    if isinstance(m, Map):
                        self.env.update({n: 0 for row in m.rows for e in row
                                         for n in e.free_vars()})

    def shape(self, name: str) -> Ints:
        shape = self.graph.shape(name)
        if not all(d.free_vars() <= self.env.keys() for d in shape):
            raise PrismError(f"tensor {name} has shape {shape_str(shape)}; the cost model needs "
                             "concrete kernel-graph shapes (instantiate the shapes first)")
        return tuple(evaluate(d, self.env) for d in shape)

    def nbytes(self, name: str) -> int:
        return self.bytes(self.shape(name))

    def bytes(self, shape: Ints) -> int:
        return self.element_bytes * math.prod(shape)


def _tile_shapes(block: BlockGraph) -> dict[str, Ints]:
    """Every tile's size; `evaluate` says which one has a size that does not divide."""
    return {t: tuple(evaluate(d) for d in s) for t, s in block.tensors}


def _sizes(block: BlockGraph) -> tuple[int, int]:
    """(blocks, loop range) of a concrete block graph."""
    return math.prod(g.value for g in block.grid), block.forloop_range.value


def _require_concrete(graph: KernelGraph) -> None:
    symbolic = set(graph.free_vars())
    for _, block in graph.iter_blocks():
        for bop in block.ops:
            symbolic |= {f"a map of {(bop.outputs or bop.inputs)[0]}"
                         for key in ("imap", "fmap", "omap")
                         if isinstance(bop.attr.get(key), Map) and not bop.attr[key].is_concrete}
    if symbolic:
        raise PrismError(f"modeled() needs a concrete program, but {graph.name or 'the graph'} "
                         f"has symbolic {', '.join(sorted(symbolic))}; instantiate grid, loop "
                         "and maps first")
