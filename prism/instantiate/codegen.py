"""Triton code generation: one concrete kernel graph → one readable Python module.

    program = generate(graph)          # graph: every grid size, loop range and map concrete
    program.source                     # `@triton.jit` kernels + `run(*inputs)`, the launcher
    generate(graph, dtype="bfloat16")  # the same module; its PTX signatures take bf16 tensors

The module has one `@triton.jit` function per custom kernel and a launcher `run(*inputs)` that
takes torch tensors in the graph's input order, runs each pre-defined kernel op as one torch call
(`lowering.TORCH_KERNEL`; rms_norm is three) and launches each custom kernel on its grid. Every
kernel launch `run()` makes is one of these, which is what the cost model charges
(`prism.cost.model`); allocations are `torch.empty`, never a fill. The block graph's semantics are
`prism.ir.interpret`'s, kept exactly:

- data dim d of a block input is cut, outermost first, by the grid dims mapped to it (x, y, z), then
  by the loop, then the tile: the tile at block (b_x, b_y, b_z), iteration i starts at
  ((b_p·g_q + b_q)·F + i)·tile;
- accumulators are fp32 `tl.zeros` carried through `for i in range(F)`; mean and rms divide by the
  row width × F after the loop; tiles load in the tensors' dtype, every op computes in fp32, and
  stores convert to the output's dtype (`.to(out_ptr.dtype.element_ty)`);
- a grid dim that an output's omap maps to no data dim *sums* the blocks' tiles: the kernel writes
  per-block partial tiles into an fp32 buffer [g_p for each summed grid dim p, *output shape], and
  a second Triton kernel, the output's *combine* kernel, adds them in fp32 and writes the output
  (one launch: a torch `.sum().to()` would be two, and an atomic add would need a zeroing launch
  and a conversion);
- a custom kernel with a tail (`launch="tail"` on the next custom op, `prism.ir.spec.TAIL`) is one
  `@triton.jit` function: the head's block, then a barrier and an atomic add to its group's
  counter (the group: the grid dims but the last), and in the block that brings the count to the
  last dim's size, the tail's block, whose loads of what the head wrote bypass L1
  (`cache_modifier=".cg"`). That block sets the counter back to 0; the counters are int32 zeros
  the module makes once per kernel and device (`_counters`), so a module runs one call at a time
  per device.

Tiles are padded to powers of two of at least 16 (`tl.arange` needs powers of two, `tl.dot` 16)
with masked loads (`other=0`) and stores; a dim of 1 stays 1. A padded lane that an op makes
non-zero (exp(0) = 1, 0/0) is zeroed again before any reduction reads it. Matmul uses `tl.dot`,
and a broadcast product-sum when a dim is 1. Loads and ops that do not depend on the loop are
hoisted above it.

The kernels run on whichever of float16, bfloat16 and float32 the tensors are; `dtype` (a name or
`prism.ir.dtypes.DType`, default float16) is the one the program is generated for: it types the
tensor arguments of the PTX signatures (`*fp16`, `*bf16`, `*fp32`; partial-tile buffers are
`*fp32` whatever it is), and for float32 every `tl.dot` asks for IEEE fp32
(`input_precision="ieee"`), where fp16 and bf16 programs leave Triton's default (tf32 for a tile
computed in fp32, on a GPU).

The launcher takes the user's tensors and guards them (`_prepare`): a torch tensor of the shape
the kernel was generated for, contiguous, every input of one floating dtype (float16, bfloat16,
float32) and on one device the kernels can run on (a CPU tensor only under TRITON_INTERPRET=1, and
no bfloat16 there: Triton 3.9's interpreter computes bfloat16 `tl.dot` wrong, as
`bench/bf16_interpreter.py` shows). An input that requires grad is detached with a warning: the
module is inference-only. An input with a view in the graph's interface (`prism.ir.graph.View`: a
bias `[N]` that the IR holds as `[1, N]`, a `W.T`) is seen through `as_strided`, no copy, and a
kernel reads it with the view's strides (constants: shapes are concrete); an output with a view is
returned reshaped.

Names come from the graph's tensors, made into identifiers (`Namer`); nothing from a user's
program reaches the source unchecked: comments and docstrings use the identifiers, raw names
appear only as `repr` string literals, sizes are ints and attributes numbers.
"""

from __future__ import annotations

import dataclasses
import keyword
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from prism.errors import PrismError
from prism.instantiate.lowering import POW_HELPER, RMS_NORM_HELPER
from prism.ir.dims import evaluate
from prism.ir.dtypes import DEFAULT_DTYPE, DType, get_dtype
from prism.ir.graph import MASKED, BlockGraph, KernelGraph, Map, Op
from prism.ir.ops import OPS, RESCALED, with_defaults
from prism.ir.spec import check, is_tail, substitute_graph

NUM_WARPS = 4          # Prism's and Mirage's 128-thread block: the default of the tuner's knob
MIN_DOT = 16           # tl.dot's smallest dim; tiles are padded to at least this
NEG_INF = "float('-inf')"
COMBINE_BLOCK = 256    # output elements one block of a combine kernel adds (2 a thread)


class CodegenError(PrismError):
    """A graph the code generator cannot lower (says which op and why)."""


@dataclass(frozen=True)
class KernelSource:
    """One `@triton.jit` function of a program: its name, launch grid and argument types (for
    offline compilation: the program's dtype for tensors, `*fp16` by default; `*fp32` for
    partial-sum buffers)."""

    name: str
    grid: tuple[int, ...]
    signature: tuple[tuple[str, str], ...]
    block_op: str        # the custom op's first output, which names it in the graph


@dataclass(frozen=True)
class TritonProgram:
    """A generated module: `kernels` has one entry per custom kernel of the graph, in launch
    order; `combines` the kernels that add a custom kernel's partial tiles (one per summed
    output, launched right after its custom kernel)."""

    source: str
    kernels: tuple[KernelSource, ...]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    name: str = ""
    combines: tuple[KernelSource, ...] = ()
    # Triton's launch knobs, the same for every kernel of the program (the tuner's `knobs`):
    # warps per block, and software-pipelining stages of a loop (None: Triton's default)
    num_warps: int = NUM_WARPS
    num_stages: int | None = None

    @property
    def triton_kernels(self) -> tuple[KernelSource, ...]:
        """Every `@triton.jit` kernel the launcher launches: the custom kernels, then the
        combines."""
        return self.kernels + self.combines


def generate(graph: KernelGraph, assignment: Mapping[str, int] | None = None,
             name: str = "", dtype: DType | Any = DEFAULT_DTYPE, num_warps: int = NUM_WARPS,
             num_stages: int | None = None) -> TritonProgram:
    """The Triton module for `graph` (symbolic graphs need an `assignment` of every variable),
    generated for tensors of `dtype` (its PTX signatures; IEEE fp32 dots for float32), its
    kernels launched with `num_warps` warps and `num_stages` pipelining stages (None: Triton's
    default)."""
    if num_warps not in (1, 2, 4, 8, 16, 32) or (num_stages is not None and num_stages < 1):
        raise CodegenError(f"num_warps must be a power of two up to 32 and num_stages ≥ 1, "
                           f"got {num_warps} and {num_stages}")
    if assignment:
        graph = substitute_graph(graph, assignment)
    if graph.free_vars():
        raise CodegenError(f"graph {graph.name or name!r} still has symbolic sizes "
                           f"{sorted(graph.free_vars())}; pass an assignment (grid sizes, loop "
                           "ranges and map bits) to generate code for one member of the family")
    check(graph)
    module = _Module(graph, name or graph.name, get_dtype(dtype))
    module.launch = f"num_warps={num_warps}" + \
        (f", num_stages={num_stages}" if num_stages is not None else "")
    return dataclasses.replace(module.build(), num_warps=num_warps, num_stages=num_stages)


# -- names -----------------------------------------------------------------------------------------

_RESERVED = frozenset({"tl", "triton", "torch", "math", "i", "pid0", "pid1", "pid2", "run",
                       "dtype", "device", "_pow", "_alloc", "_rms_norm", "_prepare", "range",
                       "_INPUTS", "_DTYPES", "_interpreting", "warnings",
                       "float", "int", "len", "min", "max", "tuple", "isinstance", "type",
                       "TypeError", "ValueError", "print"})


class Namer:
    """Identifiers for graph names: non-identifier characters become `_`, a leading digit gets a
    `t` in front, keywords and the generator's own names get a trailing `_`, and clashes a
    numeric suffix. The same name always gets the same identifier."""

    def __init__(self, taken: Iterable[str] = ()):
        self.taken = set(taken) | _RESERVED
        self.given: dict[str, str] = {}

    def __call__(self, name: str) -> str:
        if name in self.given:
            return self.given[name]
        base = re.sub(r"\W", "_", name, flags=re.ASCII) or "t"
        if base[0].isdigit():
            base = "t" + base
        if keyword.iskeyword(base) or base in _RESERVED:
            base += "_"
        ident, k = base, 2
        while ident in self.taken:
            ident, k = f"{base}_{k}", k + 1
        self.taken.add(ident)
        self.given[name] = ident
        return ident

    def fresh(self, base: str) -> str:
        """A new identifier that no graph name maps to (a kernel's index variables)."""
        ident, k = base, 2
        while ident in self.taken:
            ident, k = f"{base}_{k}", k + 1
        self.taken.add(ident)
        return ident


# -- the module ------------------------------------------------------------------------------------

_HEADER = '''\
"""{title}

Generated by Prism Workbench from a verified kernel graph. `run(*inputs)` takes torch tensors in
the order {inputs} and returns {returns}: contiguous, of one dtype (float16, bfloat16 or float32),
on a GPU, or on the CPU under TRITON_INTERPRET=1. It is inference-only (no gradients).
"""

import warnings

import torch
import triton
import triton.language as tl
'''

COUNTERS_HELPER = '''

_COUNTERS = {}


def _counters(kernel, groups, device):
    """The per-group counters of a kernel with a tail: int32 zeros, made once per kernel, size
    and device (the one fill this module makes, at the first run); each run leaves them at 0."""
    key = (kernel, groups, str(device))
    if key not in _COUNTERS:
        _COUNTERS[key] = torch.zeros(groups, dtype=torch.int32, device=device)
    return _COUNTERS[key]
'''

_RUNTIME = '''

def _alloc(shape, dtype, device):
    """Device memory for an intermediate or an output (every element is written before use)."""
    return torch.empty(shape, dtype=dtype, device=device)


_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


def _interpreting():
    return bool(triton.knobs.runtime.interpret)


def _prepare(tensors, specs):
    """The inputs checked (see the module's docstring) and seen as the tensors the kernels read:
    `specs` has, per input, its name, the shape the caller passes and its IR view (shape and
    strides for `as_strided`) or None."""
    out, grad, first = [], [], None
    for t, (name, shape, view) in zip(tensors, specs):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch tensor, got {type(t).__name__}")
        if tuple(t.shape) != shape:
            raise ValueError(f"{name} has shape {tuple(t.shape)}; this kernel was generated for "
                             f"{shape} (optimize again for other shapes)")
        if t.dtype not in _DTYPES:
            raise TypeError(f"{name} has dtype {t.dtype}; this kernel takes float16, bfloat16 or "
                            f"float32 tensors: convert it, e.g. {name}.half()")
        if first is None:
            first = (name, t)
        elif (t.dtype, t.device) != (first[1].dtype, first[1].device):
            raise TypeError(f"{name} is {t.dtype} on {t.device} but {first[0]} is "
                            f"{first[1].dtype} on {first[1].device}; pass every input in one "
                            "dtype, on one device")
        if not t.is_contiguous():
            raise ValueError(f"{name} is not contiguous (strides {t.stride()}); pass "
                             f"{name}.contiguous()")
        if t.requires_grad:
            grad.append(name)
            t = t.detach()
        out.append(t if view is None else t.as_strided(*view))
    if first is not None:
        name, t = first
        if t.device.type == "cpu" and not _interpreting():
            raise ValueError(f"{name} is a CPU tensor; Triton kernels run on a GPU: pass CUDA "
                             "tensors, or set TRITON_INTERPRET=1 before triton is imported to run "
                             "them on the CPU in Triton's interpreter")
        if t.dtype == torch.bfloat16 and _interpreting():
            raise TypeError(f"{name} is bfloat16, which this kernel refuses under "
                            "TRITON_INTERPRET=1: Triton 3.9's interpreter computes bfloat16 tl.dot "
                            "wrong; run it on a GPU, or pass float16 or float32 tensors")
    if grad:
        warnings.warn(f"run() is inference-only: {', '.join(grad)} require(s) grad; the kernel "
                      "runs on detached inputs (as under torch.no_grad) and its outputs carry no "
                      "gradient", stacklevel=3)
    return out
'''


# A softmax's mask input (`prism.ir.graph.View.made`): what run() does with the tensor given
MASK_HELPER = '''_MASKED = {masked!r}   # a masked key's additive value: a finite −∞


def _mask(t, made, shape, like):
    """A mask input as the kernels read it, additive in `like`'s dtype: is_causal's mask made
    from its shape when none is given (key j ≤ query i kept); a boolean mask converted (True
    keeps a key for "keep" and "causal", drops it for "drop"); an additive mask as it is."""
    if t is None and made == "causal":
        t = torch.ones(shape, dtype=torch.bool, device=like.device).tril()
    if isinstance(t, torch.Tensor) and t.dtype == torch.bool:
        keep = t if made != "drop" else ~t
        dtype = like.dtype if isinstance(like, torch.Tensor) else torch.float32
        t = torch.where(keep, torch.zeros((), dtype=dtype, device=t.device),
                        torch.full((), _MASKED, dtype=dtype, device=t.device))
    return t
'''


class _Module:
    def __init__(self, graph: KernelGraph, name: str, dtype: DType):
        self.graph = graph
        self.name = name
        self.dtype = dtype
        self.names = Namer()
        self.launch = f"num_warps={NUM_WARPS}"      # the kernels' launch knobs
        self.shapes = {t: tuple(d.value for d in s) for t, s in graph.tensors}
        # Every tensor the kernels read is contiguous, except inputs seen through a view (a
        # dim of size 1 keeps its contiguous stride: it is never stepped over)
        self.strides = {t: _contiguous(shape) for t, shape in self.shapes.items()}
        for i, t in enumerate(graph.inputs):
            view = graph.input_view(i)
            strides = view.strides(self.shapes[t]) if view is not None else None
            if strides is not None:      # None never: KernelGraph checks its interface
                self.strides[t] = tuple(c if n == 1 else s for n, s, c in zip(
                    self.shapes[t], strides, self.strides[t], strict=True))
        # ...and what a pre-defined op computes from a permuted input: torch may keep the
        # input's layout (an elementwise op does), so a custom kernel reads a contiguous copy
        self.permuted = {t for t in graph.inputs if self.strides[t] != _contiguous(self.shapes[t])}

    def build(self) -> TritonProgram:
        g = self.graph
        params = [self.names(t) for t in g.inputs]
        kernels: list[KernelSource] = []
        combines: list[KernelSource] = []
        bodies: list[str] = []
        launch: list[str] = []
        ops = list(g.ops)
        for i, op in enumerate(ops):
            if op.kind in ("input", "output") or is_tail(op):
                continue      # a tail is emitted with its head, in its launch
            if op.kind == "customized":
                assert op.block is not None
                tail = ops[i + 1] if i + 1 < len(ops) and is_tail(ops[i + 1]) else None
                ks, sums, body, lines = self._custom(op, op.block, len(kernels), tail)
                kernels.append(ks)
                combines += sums
                bodies.append(body)
                launch += lines
            else:
                launch += self._predefined(op)
        outs = [self.names(t) for t in g.outputs]
        returns = outs[0] if len(outs) == 1 else "(" + ", ".join(outs) + ",)"
        user = g.user_input_shapes()
        sig = ", ".join(f"{p} {list(shape)}" for p, shape in zip(params, user, strict=True))
        label = _label(self.name)
        tails = sum(map(is_tail, g.ops))
        counts = [(len(kernels), "custom kernel"), (tails, "tail kernel"),
                  (len(combines), "combine kernel"),
                  (g.num_kernels - len(kernels) - tails, "pre-defined op")]
        title = f"{label}: " + (", ".join(f"{n} {what}" + "s" * (n > 1) for n, what in counts
                                          if n) or "no kernels") + "."
        parts = [_HEADER.format(title=title, inputs=", ".join(params) or "()",
                                returns=" and ".join(outs))]
        if "_pow(" in "".join(bodies):
            parts.append("\n" + POW_HELPER)
        parts += ["\n\n" + b for b in bodies]
        parts.append(_RUNTIME)
        if "_rms_norm(" in "".join(launch):
            parts.append("\n\n" + RMS_NORM_HELPER)
        if "_counters(" in "".join(launch):
            parts.append(COUNTERS_HELPER)
        specs, made = [], []
        for i, t in enumerate(g.inputs):
            view = g.input_view(i)
            specs.append((t, user[i], (self.shapes[t], self.strides[t]) if view else None))
            if view is not None and view.made:
                made.append((self.names(t), view.made, view.shape))
        if made:
            parts.append("\n\n" + MASK_HELPER.format(masked=MASKED))
        parts.append("\n\n# per input: its name, the shape run() takes, the view (shape, strides) "
                     "the kernels read\n_INPUTS = (" + "".join(f"\n    {spec!r}," for spec in specs)
                     + "\n)\n")
        optional = {p for p, kind, _ in made if kind == "causal"}   # the tail: made inputs
        run = [f"\n\ndef run({', '.join(p + '=None' * (p in optional) for p in params)}):",
               f'    """{label}({sig}) -> {returns}"""']
        like = next((p for p in params if p not in {q for q, _, _ in made}), None)
        for p, kind, shape in made:
            run.append(f"    {p} = _mask({p}, {kind!r}, {shape!r}, {like})")
        if params:
            run.append(f"    {', '.join(params)}, = _prepare(({', '.join(params)},), _INPUTS)")
        first = params[0] if params else "None"
        if re.search(r"\b(dtype|device)\)", "\n".join(launch)):
            run.append(f"    dtype, device = {first}.dtype, {first}.device")
        run += ["    " + line for line in launch]
        for i, var in enumerate(outs):
            view = g.output_view(i)
            if view is not None:
                run.append(f"    {var} = {var}.reshape({view.shape!r})  # as the traced function "
                           "returns it")
        run.append(f"    return {returns}")
        parts.append("\n".join(run) + "\n")
        return TritonProgram("".join(parts), tuple(kernels), tuple(g.inputs), tuple(g.outputs),
                             self.name, tuple(combines))

    def _predefined(self, op: Op) -> list[str]:
        template = OPS[op.kind].torch
        if template is None:
            raise CodegenError(f"kernel op {op.kind!r} has no torch lowering")
        args = [self.names(t) for t in op.inputs]
        expr = template.format(*args, **_attrs(op))
        out = self.names(op.outputs[0])
        if any(t in self.permuted for t in op.inputs):
            self.permuted.add(op.outputs[0])
        return [f"# {out} = {op.kind}({', '.join(args)}): pre-defined, in torch",
                f"{out} = {expr}"]

    def _custom(self, op: Op, bg: BlockGraph, index: int, tail: Op | None = None
                ) -> tuple[KernelSource, list[KernelSource], str, list[str]]:
        grid = tuple(evaluate(d, {}) for d in bg.grid)
        label = self.names(op.outputs[0])
        kname = self.names.fresh(f"kernel{index}_{label}")
        emitter = _Kernel(self, bg, op, kname, grid)
        after: _Kernel | None = None
        if tail is not None:
            assert tail.block is not None
            after = _Kernel(self, tail.block, tail, kname, grid[:-1])
        body = emitter.emit(after)
        lines = [f"# kernel {index}: custom kernel on grid {grid}, for-loop range "
                 f"{evaluate(bg.forloop_range, {})}"]
        if after is not None:
            lines[0] += (f"; its tail ({self.names(after.op.outputs[0])}) runs in the same launch, "
                         f"in the last block of each of the {math.prod(after.grid)} groups")
        args = []
        for t in op.inputs:
            args.append(self.names(t))
            if t in self.permuted and t not in self.graph.inputs:
                lines.append(f"{args[-1]} = {args[-1]}.contiguous()  # torch kept a permuted "
                             "input's layout; the kernel reads it contiguous")
                self.permuted.discard(t)
        buffers: dict[int, str] = {}
        for j, t in enumerate(op.outputs):
            var = self.names(t)
            parts = emitter.summed_grid(j)
            if parts:
                buffers[j] = self.names.fresh(f"{var}_parts")
                lines.append(f"{buffers[j]} = _alloc({(*parts, *self.shapes[t])!r}, "
                             "torch.float32, device)")
                args.append(buffers[j])
            else:
                lines.append(f"{var} = _alloc({self.shapes[t]!r}, dtype, device)")
                args.append(var)
        if after is not None:
            assert tail is not None
            for t in after.extra_inputs:
                args.append(self.names(t))
            for t in tail.outputs:
                var = self.names(t)
                lines.append(f"{var} = _alloc({self.shapes[t]!r}, dtype, device)")
                args.append(var)
            counters = self.names.fresh(f"{kname}_counters")
            lines.append(f"{counters} = _counters({kname}, {math.prod(after.grid)}, device)")
            args.append(counters)
        lines.append(f"{kname}[{grid!r}]({', '.join(args)}, {self.launch})")
        combines: list[KernelSource] = []
        for j, t in enumerate(op.outputs):
            if j not in buffers:
                continue
            var = self.names(t)
            cs, source = self._combine(index, t, emitter.summed(j), kname)
            combines.append(cs)
            body += "\n\n" + source
            lines += [f"# {var}: the sum of {kname}'s partial tiles, added by {cs.name}",
                      f"{var} = _alloc({self.shapes[t]!r}, dtype, device)",
                      f"{cs.name}[{cs.grid!r}]({buffers[j]}, {var}, {self.launch})"]
        sig = tuple(zip(emitter.arg_names, emitter.arg_types, strict=True))
        return KernelSource(kname, grid, sig, op.outputs[0]), combines, body, lines

    def _combine(self, index: int, target: str, summed: dict[int, int], producer: str
                 ) -> tuple[KernelSource, str]:
        """The kernel that adds `target`'s partial tiles (the fp32 buffer [*summed sizes,
        *shape] that `producer` writes) in fp32 and writes `target`: COMBINE_BLOCK elements a
        block, masked when they do not divide the output."""
        var = self.names(target)
        name = self.names.fresh(f"combine{index}_{var}")
        local = Namer(("offs", "acc", "p"))
        parts_ptr, out_ptr = local.fresh(f"{var}_parts_ptr"), local.fresh(f"{var}_ptr")
        shape = self.shapes[target]
        size, count = math.prod(shape), math.prod(summed.values())
        block = min(COMBINE_BLOCK, _pad(size))
        grid = (-(-size // block),)
        mask = f", mask=offs < {size}" if size % block else ""
        other = f"{mask}, other=0.0" if mask else ""
        dims = ", ".join("xyz"[p] for p in summed)
        source = "\n".join([
            "@triton.jit",
            f"def {name}({parts_ptr}, {out_ptr}):",
            f'    """{var} {list(shape)}: the sum of the {count} partial tiles {producer} writes '
            f'(blocks along grid dims {dims}), {block} elements a block, added in fp32."""',
            f"    offs = tl.program_id(0) * {block} + tl.arange(0, {block})",
            f"    acc = tl.zeros(({block},), dtype=tl.float32)",
            f"    for p in range({count}):",
            f"        acc += tl.load({parts_ptr} + p * {size} + offs{other})",
            f"    tl.store({out_ptr} + offs, acc.to({out_ptr}.dtype.element_ty){mask})",
        ]) + "\n"
        sig = ((parts_ptr, "*fp32"), (out_ptr, self.dtype.triton))
        return KernelSource(name, grid, sig, target), source


def _label(name: str) -> str:
    """A graph name fit for a docstring: word characters, dots and dashes only."""
    return re.sub(r"[^\w.\-\[\]=,]", "_", name, flags=re.ASCII)[:80] or "kernel"


def _attrs(op: Op) -> dict[str, Any]:
    """The op's attributes as its lowerings read them: its own (defaults filled in), ints for
    dims, floats for constants (the maps and sizes of io ops are not attributes here)."""
    od = OPS[op.kind]
    known = (*od.attrs, *od.optional)
    out: dict[str, Any] = {}
    for k, v in with_defaults(op.kind, op.attr).items():
        if k not in known:
            continue
        out[k] = int(v) if k in ("dim", "dimx") else None if v is None else float(v)
    return out


def _contiguous(shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(math.prod(shape[d + 1:]) for d in range(len(shape)))


def _pad(n: int) -> int:
    """A tile dim's padded size: a power of two (tl.arange needs one), at least MIN_DOT so that
    tl.dot applies to every matmul whose dims are not 1; a dim of 1 stays 1 (it broadcasts)."""
    return 1 if n == 1 else max(MIN_DOT, 1 << (n - 1).bit_length())


def _stretches_into_padding(xs: Sequence[_Val], shape: tuple[int, ...]) -> bool:
    """Whether an operand of size 1 along a dim broadcasts into that dim's padded lanes: a
    bias row [1, n] added to a tile of 8 rows padded to 16 puts the bias in rows 8..15, so
    f(0, b) = 0 no longer keeps them 0 (a sum over the rows would count them)."""
    return any(x.shape[d] == 1 and n != 1 and _pad(n) != n
               for x in xs for d, n in enumerate(shape) if d < len(x.shape))


def _bcast(rank: int, d: int) -> str:
    if rank == 1:
        return ""
    return "[" + ", ".join(":" if k == d else "None" for k in range(rank)) + "]"


def _rows(m: Map) -> list[int]:
    return [next((d for d, e in enumerate(row) if e.value == 1), -1) for row in m.rows]


@dataclass
class _Val:
    var: str
    shape: tuple[int, ...]          # true tile shape
    padded: tuple[int, ...]
    native: bool = False            # still in the input's dtype (a loaded tile), not fp32
    clean: bool = True              # padded lanes hold 0
    invariant: bool = False         # the same in every loop iteration

    @property
    def f32(self) -> str:
        return f"{self.var}.to(tl.float32)" if self.native else self.var


@dataclass
class _Kernel:
    module: _Module
    bg: BlockGraph
    op: Op
    name: str
    grid: tuple[int, ...]
    names: Namer = field(init=False)
    vals: dict[str, _Val] = field(default_factory=dict)
    arg_names: list[str] = field(default_factory=list)
    arg_types: list[str] = field(default_factory=list)
    extra_inputs: list[str] = field(default_factory=list)   # a tail's inputs its head does not
    fresh_from: set[str] = field(default_factory=set)        # write, and those it wrote

    def __post_init__(self) -> None:
        self.names = Namer()
        self.loops = evaluate(self.bg.forloop_range, {})
        self.tiles = {t: tuple(d.value for d in s) for t, s in self.bg.tensors}

    # data and partial sums
    def summed(self, j: int) -> dict[int, int]:
        """The grid dims (and their sizes) whose blocks' tiles output j sums: size > 1, and
        mapped by its omap to no data dim."""
        omap = _rows(self.bg.output_ops[j].attr["omap"])
        return {p: g for p, g in enumerate(self.grid) if omap[p] < 0 and g > 1}

    def summed_grid(self, j: int) -> tuple[int, ...]:
        """The sizes of `summed(j)`: the leading dims of output j's partial-tile buffer."""
        return tuple(self.summed(j).values())

    def emit(self, tail: _Kernel | None = None) -> str:
        """The `@triton.jit` function, with `tail`'s block run after this kernel's by the last
        block of each group to finish (a tail kernel: `prism.ir.spec.TAIL`)."""
        bg, op = self.bg, self.op
        # one parameter per operand, even when one tensor is read twice (fresh names)
        in_ptr = [self.names.fresh(f"{self.module.names(t)}_ptr") for t in op.inputs]
        out_ptr = []
        for j, t in enumerate(op.outputs):
            suffix = "_parts_ptr" if self.summed_grid(j) else "_ptr"
            out_ptr.append(self.names.fresh(f"{self.module.names(t)}{suffix}"))
        self.arg_names = in_ptr + out_ptr
        # tensors of the program's dtype, except the fp32 buffers of partial tiles
        tensor = self.module.dtype.triton
        self.arg_types = [tensor] * len(in_ptr) + [
            "*fp32" if self.summed_grid(j) else tensor for j in range(len(out_ptr))]
        doc = (f"block graph of {self.module.names(op.outputs[0])}: grid {self.grid}, for-loop "
               f"range {self.loops}; " + "; ".join(f"{self.names(t)} tile {list(self.tiles[t])}"
                                                   for t in bg.inputs + bg.outputs))
        head = ["@triton.jit", f"def {self.name}({', '.join(in_ptr + out_ptr)}):",
                f'    """{doc}"""']
        head += [f"    pid{p} = tl.program_id({p})" for p in range(len(self.grid))
                 if self.grid[p] > 1]
        body = self._body(in_ptr, out_ptr)
        if tail is not None:     # after this kernel's body: the tail's names avoid all of it
            body += tail.emit_tail(self, out_ptr)
            head[1] = f"def {self.name}({', '.join(self.arg_names)}):"
        return "\n".join(head + body) + "\n"

    def emit_tail(self, head: _Kernel, head_out: list[str]) -> list[str]:
        """This kernel as the tail of `head` (its grid is head's without the last dim): head's
        arguments grow by this kernel's other inputs, its outputs and the counters; the lines
        count this block in its group and, in the group's last block, run this kernel's block
        (every part of the group stored; the counter left at 0 for the next run)."""
        self.names = Namer(head.names.taken)   # one function: no name of head's reused
        written = dict(zip(head.op.outputs, head_out, strict=True))
        in_ptr, self.extra_inputs = [], []
        for t in self.op.inputs:
            if t in written:
                in_ptr.append(written[t])
                self.fresh_from.add(t)
            else:
                in_ptr.append(self.names.fresh(f"{self.module.names(t)}_ptr"))
                self.extra_inputs.append(t)
                head.arg_names.append(in_ptr[-1])
                head.arg_types.append(self.module.dtype.triton)
        out_ptr = [self.names.fresh(f"{self.module.names(t)}_ptr") for t in self.op.outputs]
        counters = self.names.fresh("counters_ptr")
        head.arg_names += [*out_ptr, counters]
        head.arg_types += [self.module.dtype.triton] * len(out_ptr) + ["*i32"]
        index = ""             # the group's number: its grid dims, row-major
        for p, size in enumerate(self.grid):
            if size > 1:
                index = f"pid{p}" if not index else f"({index}) * {size} + pid{p}"
        group = self.names.fresh("group")
        pos = [f"{group} = {index}"] if index else []
        at = f"{counters} + {group}" if index else counters
        parts, done = head.grid[-1], self.names.fresh("arrived")
        label = self.module.names(self.op.outputs[0])
        dims = ", ".join("xyz"[p] for p in range(len(self.grid)))
        return _indent([
            f"# the tail: {label}'s block graph, run by the last of the {parts} blocks of this "
            f"group (grid dims {dims}) to finish",
            "tl.debug_barrier()  # every thread's stores above are issued",
            *pos,
            f"{done} = tl.atomic_add({at}, 1)  # acq_rel, gpu scope: the stores are visible "
            "before the count",
            f"if {done} == {parts - 1}:",
            "    tl.debug_barrier()",
            f"    tl.store({at}, 0)  # every block of the group has counted: 0 for the next run",
        ], 1) + _indent(self._body(in_ptr, out_ptr), 1)

    def _body(self, in_ptr: list[str], out_ptr: list[str]) -> list[str]:
        """The block's lines: loads and ops above the loop, the loop, what follows it."""
        bg, op = self.bg, self.op
        post = bg.after_accum
        pre: list[str] = []       # hoisted above the loop
        loop: list[str] = []
        after: list[str] = []
        for bop in bg.ops:
            if bop.kind == "input":
                j = bg.input_ops.index(bop)
                lines, val = self._load(bop, in_ptr[j], op.inputs[j])
                (pre if val.invariant else loop).extend(lines)
            elif bop.kind == "output":
                j = bg.output_ops.index(bop)
                after += self._store(bop, out_ptr[j], op.outputs[j], j)
            elif OPS[bop.kind].category == "accum":
                init, step, finish = self._accumulate(bop)
                pre += init
                loop += step
                after += finish
            else:
                lines, val = self._compute(bop)
                if bop.outputs[0] in post:
                    after += lines
                elif val.invariant:
                    pre += lines
                else:
                    loop += lines
        body = _indent(pre, 1)
        if self.loops > 1:
            body += [f"    for i in range({self.loops}):", *_indent(loop, 2)]
        else:
            body += _indent(loop, 1)
        return body + _indent(after, 1)

    # loads and stores
    def _position(self, rows: list[int], d: int, loop: bool) -> str:
        """Which part of data dim d this block (and iteration) holds, as an expression."""
        pos = ""
        for p, dd in enumerate(rows):
            if dd != d or self.grid[p] == 1:
                continue
            pos = f"pid{p}" if not pos else f"({pos}) * {self.grid[p]} + pid{p}"
        if loop and self.loops > 1:
            pos = "i" if not pos else f"({pos}) * {self.loops} + i"
        return pos

    def _offsets(self, var: str, strides: tuple[int, ...], tile: tuple[int, ...],
                 positions: list[str]) -> tuple[list[str], str, str | None]:
        """The tile's element offsets (tensor dim d steps `strides[d]` elements) and mask."""
        rank = len(tile)
        padded = tuple(_pad(n) for n in tile)
        lines, terms, masks = [], [], []
        for d in range(rank):
            lane = f"tl.arange(0, {padded[d]})"
            offs = f"({positions[d]}) * {tile[d]} + {lane}" if positions[d] else lane
            idx = self.names.fresh(f"{var}_{d}")
            lines.append(f"{idx} = {offs}")
            terms.append(f"{idx}{_bcast(rank, d)}" + (f" * {strides[d]}" if strides[d] != 1
                                                      else ""))
            if padded[d] != tile[d]:
                masks.append(f"({lane} < {tile[d]}){_bcast(rank, d)}")
        return lines, " + ".join(terms), " & ".join(masks) or None

    def _load(self, bop: Op, ptr: str, source: str) -> tuple[list[str], _Val]:
        name = bop.outputs[0]
        var = self.names(name)
        tile = self.tiles[name]
        data = self.module.shapes[source]
        imap, fmap = _rows(bop.attr["imap"]), _rows(bop.attr["fmap"])[0]
        positions = [self._position(imap, d, fmap == d) for d in range(len(tile))]
        lines, addr, mask = self._offsets(var, self.module.strides[source], tile, positions)
        masked = f", mask={mask}, other=0.0" if mask else ""
        lines.insert(0, f"# {var}: tile {list(tile)} of {self.module.names(source)} "
                        f"{list(data)}, imap {bop.attr['imap']}, fmap {bop.attr['fmap']}")
        # a tail reads what other blocks of its launch wrote: from L2, past this SM's L1
        cached = ', cache_modifier=".cg"' if source in self.fresh_from else ""
        lines.append(f"{var} = tl.load({ptr} + {addr}{masked}{cached})")
        val = _Val(var, tile, tuple(_pad(n) for n in tile), native=True,
                   invariant=fmap < 0 or self.loops == 1)
        self.vals[name] = val
        return lines, val

    def _store(self, bop: Op, ptr: str, target: str, j: int) -> list[str]:
        name = bop.inputs[0]
        val = self.vals[name]
        data = self.module.shapes[target]
        omap = _rows(bop.attr["omap"])
        positions = [self._position(omap, d, False) for d in range(len(val.shape))]
        var = self.names.fresh(f"{self.module.names(target)}_out")
        lines, addr, mask = self._offsets(var, _contiguous(data), val.shape, positions)
        summed = list(self.summed(j))
        if summed:
            # Partial tiles go to buffer [g_p for each summed p, *data]; the combine adds them.
            size, lead = math.prod(data), ""
            for k, p in enumerate(summed):
                stride = size * math.prod(self.grid[q] for q in summed[k + 1:])
                lead += f"pid{p} * {stride} + "
            addr = lead + addr
        masked = f", mask={mask}" if mask else ""
        head = (f"# store {val.var} into {self.module.names(target)} {list(data)}, "
                f"omap {bop.attr['omap']}")
        if summed:
            head += " (partial tiles: the blocks along grid dims " \
                    f"{', '.join('xyz'[p] for p in summed)} are summed by a combine kernel)"
        return [head, *lines,
                f"tl.store({ptr} + {addr}, {val.f32}.to({ptr}.dtype.element_ty){masked})"]

    # compute
    def _zeroed(self, val: _Val, keep_native: bool = False) -> str:
        """`val` with every padded lane 0 (fp32, or as loaded when `keep_native` and no lane
        needs zeroing)."""
        if val.clean or val.padded == val.shape:
            return val.var if keep_native else val.f32
        return self._filled(val, val.f32, "0.0")

    def _filled(self, val: _Val, expr: str, fill: str) -> str:
        """`expr`, an fp32 function of `val`'s lanes, with `val`'s padded lanes `fill` (0 before
        a sum, −inf before a max, so padding never counts)."""
        if val.padded == val.shape:
            return expr
        rank = len(val.shape)
        mask = " & ".join(f"(tl.arange(0, {p}) < {n}){_bcast(rank, d)}"
                          for d, (n, p) in enumerate(zip(val.shape, val.padded, strict=True))
                          if n != p)
        return f"tl.where({mask}, {expr}, {fill})"

    def _new(self, name: str, operands: Sequence[_Val], clean: bool) -> _Val:
        shape = self.tiles[name]
        return _Val(self.names(name), shape, tuple(_pad(n) for n in shape),
                    clean=clean, invariant=all(v.invariant for v in operands))

    def _compute(self, bop: Op) -> tuple[list[str], _Val]:
        xs = [self.vals[t] for t in bop.inputs]
        name = bop.outputs[0]
        comment = (f"# {self.names(name)} = {bop.kind}({', '.join(v.var for v in xs)})"
                   + (f" {_attrs(bop)}" if _attrs(bop) else ""))
        od, attrs = OPS[bop.kind], _attrs(bop)
        clean = (od.zero_preserving(attrs) and all(v.clean for v in xs)
                 and not _stretches_into_padding(xs, self.tiles[name]))
        if bop.kind == "matmul":
            return self._matmul(bop, xs, comment)
        if bop.kind in ("sum", "mean", "rms_norm", "layer_norm"):
            clean = True
        val = self._new(name, xs, clean)
        kind, rank = bop.kind, len(xs[0].shape)
        if od.triton is not None:
            expr = od.triton_expr([v.f32 for v in xs], attrs)
        elif kind in ("sum", "mean"):
            d = int(bop.attr["dim"])
            expr = f"tl.sum({self._zeroed(xs[0])}, axis={d}, keep_dims=True)"
            if kind == "mean":
                expr += f" / {xs[0].shape[d]}.0"
        elif kind in ("max", "min"):
            d = int(bop.attr["dim"])
            fill = NEG_INF if kind == "max" else "float('inf')"
            expr = f"tl.{kind}({self._filled(xs[0], xs[0].f32, fill)}, axis={d}, keep_dims=True)"
        elif kind == "logsumexp":
            # ln Σ e^x with the max subtracted first, so no e^x overflows
            d = int(bop.attr["dim"])
            top = self.names.fresh(f"{val.var}_max")
            x = xs[0].f32
            exps = self._filled(xs[0], f"tl.exp({x} - {top})", "0.0")
            lines = [comment, f"{top} = tl.max({self._filled(xs[0], x, NEG_INF)}, axis={d}, "
                     "keep_dims=True)",
                     f"{val.var} = tl.log(tl.sum({exps}, axis={d}, keep_dims=True)) + {top}"]
            self.vals[name] = val
            return lines, val
        elif kind == "rms_norm":
            z = self._zeroed(xs[0])
            ms = f"tl.sum({z} * {z}, axis={rank - 1}, keep_dims=True) / {xs[0].shape[-1]}.0"
            eps = float(attrs["eps"])
            expr = f"{xs[0].f32} / tl.sqrt({ms}{f' + {eps!r}' if eps else ''})"
            val.clean = False        # a padded row is 0/0
        elif kind == "layer_norm":
            n, z = xs[0].shape[-1], self._zeroed(xs[0])
            mu = self.names.fresh(f"{val.var}_mean")
            c = self.names.fresh(f"{val.var}_centred")
            eps = float(attrs["eps"])
            lines = [comment,
                     f"{mu} = tl.sum({z}, axis={rank - 1}, keep_dims=True) / {n}.0",
                     f"{c} = {self._filled(xs[0], f'{xs[0].f32} - {mu}', '0.0')}",
                     f"{val.var} = {c} / tl.sqrt(tl.sum({c} * {c}, axis={rank - 1}, "
                     f"keep_dims=True) / {n}.0 + {eps!r})"]
            val.clean = eps > 0      # a padded row is 0 / sqrt(eps), or 0/0 without one
            self.vals[name] = val
            return lines, val
        else:
            raise CodegenError(f"block op {kind!r} has no Triton lowering")
        self.vals[name] = val
        return [comment, f"{val.var} = {expr}"], val

    def _matmul(self, bop: Op, xs: list[_Val], comment: str) -> tuple[list[str], _Val]:
        a, b = xs
        val = self._new(bop.outputs[0], xs, clean=True)
        rank = len(a.shape)
        pm, pk, pn = a.padded[-2], a.padded[-1], b.padded[-1]
        batch = a.padded[:-2]
        za, zb = self._zeroed(a, keep_native=True), self._zeroed(b, keep_native=True)
        # loaded fp16/bf16 tiles go to tl.dot as they are (fp16/bf16 MMA, fp32 accumulation);
        # computed fp32 tiles stay fp32 (tf32 on a GPU), except in a float32 program, where
        # every dot is IEEE fp32
        both_native = a.native and b.native and za == a.var and zb == b.var
        ieee = ", input_precision=\"ieee\"" if not self.module.dtype.tensor_cores else ""
        if min(pm, pk, pn) >= MIN_DOT:
            if not both_native:
                za, zb = _as_f32(za), _as_f32(zb)
            nb = math.prod(batch)
            if rank == 2 or (rank == 3 and nb > 1):
                expr = f"tl.dot({za}, {zb}{ieee})"
            else:
                lead = (nb,) if nb > 1 else ()
                expr = (f"tl.reshape(tl.dot(tl.reshape({za}, {(*lead, pm, pk)!r}), "
                        f"tl.reshape({zb}, {(*lead, pk, pn)!r}){ieee}), {val.padded!r})")
        else:
            # Σ_k a[..., m, k] · b[..., k, n] as a broadcast product and a sum (dims < 16).
            expr = (f"tl.sum(tl.expand_dims({_as_f32(za)}, {rank}) * "
                    f"tl.expand_dims({_as_f32(zb)}, {rank - 2}), axis={rank - 1})")
        self.vals[bop.outputs[0]] = val
        return [comment, f"{val.var} = {expr}"], val

    def _rescale(self, bop: Op) -> tuple[list[str], list[str], list[str]]:
        """`nored_rescale(x, m)`: FlashAttention's recurrence. The sum is kept under the running
        row max M (−inf before the first iteration): M' = max(M, m), then
        total · e^(M − M') + x · e^(m − M'), so no term is ever e^(a large number)."""
        x, m = (self.vals[t] for t in bop.inputs)
        name = bop.outputs[0]
        val = self._new(name, [x], clean=x.clean)
        val.invariant = False
        run, new = self.names.fresh(f"{val.var}_max"), self.names.fresh(f"{val.var}_max_new")
        init = [f"# {val.var} = nored_rescale({x.var}, {m.var}): fp32 sum over the for-loop, "
                f"kept under the running max {run} of {m.var}",
                f"{val.var} = tl.zeros({val.padded!r}, dtype=tl.float32)",
                f"{run} = tl.full({m.padded!r}, {NEG_INF}, tl.float32)"]
        step = [f"{new} = tl.maximum({run}, {m.f32})",
                f"{val.var} = {val.var} * tl.exp({run} - {new}) + {x.f32} * tl.exp({m.f32} - "
                f"{new})",
                f"{run} = {new}"]
        self.vals[name] = val
        return init, step, []

    def _accumulate(self, bop: Op) -> tuple[list[str], list[str], list[str]]:
        if bop.kind in RESCALED:
            return self._rescale(bop)
        (x,) = [self.vals[t] for t in bop.inputs]
        name = bop.outputs[0]
        val = self._new(name, [x], clean=True)
        val.invariant = False
        kind, rank = bop.kind, len(x.shape)
        init = [f"# {val.var} = {kind}({x.var}): fp32 accumulator over the for-loop",
                f"{val.var} = tl.zeros({val.padded!r}, dtype=tl.float32)"]
        if kind == "nored":
            step = x.f32
            val.clean = x.clean
        elif kind in ("red_ld_sum", "red_ld_mean"):
            step = f"tl.sum({self._zeroed(x)}, axis={rank - 1}, keep_dims=True)"
        elif kind == "red_ld_rms":
            z = self._zeroed(x)
            step = f"tl.sum({z} * {z}, axis={rank - 1}, keep_dims=True)"
        elif kind == "redtox_ld_sum":
            dimx = int(bop.attr["dimx"])
            width = x.shape[-1]
            if x.padded[-1] != width or _pad(dimx) != dimx:
                raise CodegenError(f"redtox_ld_sum of {x.var} needs power-of-two widths "
                                   f"(tile width {width}, dimx {dimx}); choose other tile sizes")
            chunks = (*x.padded[:-1], width // dimx, dimx)
            step = f"tl.sum(tl.reshape({self._zeroed(x)}, {chunks!r}), axis={rank - 1})"
        else:
            raise CodegenError(f"accumulator {kind!r} has no Triton lowering")
        width = x.shape[-1] * self.loops
        finish: list[str] = []
        if kind == "red_ld_mean":
            finish = [f"{val.var} = {val.var} / {width}.0  # mean over {width} elements a row"]
        elif kind == "red_ld_rms":
            eps = float(_attrs(bop).get("eps") or 0.0)
            finish = [f"{val.var} = tl.sqrt({val.var} / {width}.0{f' + {eps!r}' if eps else ''})"
                      f"  # rms over {width} elements a row"]
        self.vals[name] = val
        return init, [f"{val.var} += {step}"], finish


def _as_f32(expr: str) -> str:
    return expr if expr.endswith(".to(tl.float32)") or expr.startswith("tl.where") \
        else f"{expr}.to(tl.float32)"


def _indent(lines: list[str], level: int) -> list[str]:
    pad = "    " * level
    return [pad + line for line in lines]
