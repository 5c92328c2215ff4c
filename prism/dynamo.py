"""`torch.compile(model, backend="prism")` and `prism.compile(model)`: a model's graph cut into
regions the engine supports, each region superoptimized, everything else left as it was.

TorchDynamo hands the backend an FX graph of the model's forward (its parameters lifted to
inputs) and example inputs. The backend:

1. **cuts** the graph into regions: maximal runs of nodes whose op the frontend lowers
   (`prism.frontend.fx`'s tables), in the graph's order; every other node is *outside*.
2. **optimizes** each region as a workload of its own (`prism.superoptimize`, the cost model's
   device, no GPU needed), and takes its best kernel only when it is proved (or is the region's
   own program) and passed its check against torch. A region the frontend refuses, or whose
   optimization finds nothing it can claim, runs as the graph had it, and the report says why.
3. **remembers** each region's kernel in a cache keyed by the region's program (its traced
   graph at its shapes), the dtype, the device and the engine's version: a second compile of
   the same model (another process, the next day) loads the kernels without a search. A region
   seen at other shapes (a new batch size) re-instantiates its symbolic checkpoint, stored by
   the region's program *without* its shapes, and tunes only its sizes: no new search.
4. **hands the rest to Inductor**: each fused region becomes a call of the operator
   `prism::region_kernel` (its fake implementation gives the outputs' shapes), and the graph
   around them, outside nodes and regions that fell back, is compiled by Inductor
   (`rest="inductor"`, the default), or runs eagerly where Inductor cannot compile here (no C++
   compiler, say: the report's `rest` says why) or `rest="eager"` asks.
5. **asks an advisor** (`prism.advice`; the heuristic by default, any callable as an option)
   about each region before it is optimized: advice orders the regions, may leave one to torch,
   narrow its search or reorder its tuning, and never bypasses the proof or the check.
6. **reports** (`report=PATH`, JSON, and `Compiled.report`): per region its ops, whether it was
   fused or fell back and why, its kernel's modeled latency against the region's eager ops
   (both `modeled`; on a GPU also both `measured`, `_measured`), whether the kernel came from
   the cache or the checkpoint, the advice and what came of it, and what ran the rest.

The kernels run where Triton runs them: on a GPU, or on the CPU in Triton's interpreter
(`TRITON_INTERPRET=1` set before triton is imported). Without either, every region falls back,
and the report says so: the compiled model still runs, as eager.

Registered as a torch backend by entry point (`torch_dynamo_backends`: `prism`), so
`torch.compile(model, backend="prism")` finds it once the package is installed;
`prism.compile(model, **options)` is the same with this module's options (budget, device, cache,
report).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prism.errors import PrismError

ENGINE_VERSION = "prism-compile-2"   # part of every cache key: a new engine, a new entry
# (2: superoptimize searches Prism's whole block vocabulary, not only the program's ops)
# what a region's size does not count: casts, views and reshapes compute nothing
FREE_OPS = frozenset({"to", "float", "half", "bfloat16", "contiguous", "view", "reshape",
                      "unsqueeze", "squeeze", "flatten", "getattr"})


@dataclass
class Region:
    """One region of the model's graph and what became of it."""

    index: int
    ops: list[str]                       # the FX nodes' targets, in order
    status: str = "outside"              # fused | fallback | outside
    reason: str = ""                     # fallback/outside: why; fused: how it was found
    kernel_us: float | None = None       # modeled latency of the kernel
    eager_us: float | None = None        # modeled latency of the region's ops as eager kernels
    measured: dict[str, float] | None = None   # on a GPU: kernel_us and eager_us, measured
    source: str = ""                     # cache | checkpoint | search | ""
    seconds: float = 0.0                 # what obtaining the kernel took
    advised: Any = None                  # prism.advice.Advised: the advice, what it did

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"index": self.index, "ops": self.ops, "status": self.status,
                               "reason": self.reason, "seconds": round(self.seconds, 3)}
        if self.kernel_us is not None:
            out.update(kernel_us=round(self.kernel_us, 4), latency_kind="modeled",
                       eager_us=round(self.eager_us or 0.0, 4), eager_kind="modeled",
                       source=self.source)
        if self.measured is not None:
            out["measured"] = {**{k: round(v, 4) for k, v in self.measured.items()},
                               "latency_kind": "measured"}
        if self.advised is not None:
            out["advice"] = self.advised.to_json()
        return out


@dataclass
class Options:
    budget_s: float = 60.0               # each region's optimization
    device: str = "h100"                 # the cost model's device
    cache_dir: Path | None = None        # default: $PRISM_CACHE_DIR/compile or ~/.cache/...
    report: Path | None = None
    search_config: Any = None            # a SearchConfig for every region (tests: small caps)
    max_region_ops: int = 6              # ops a region computes at most (what searches fast)
    advisor: Any = "heuristic"           # prism.advice: "heuristic", a callable, or None
    rest: str = "inductor"               # what runs the rest: "inductor" (eager if it fails)
    out: Path | None = None              # each searched region's outputs, for the workbench


@dataclass
class CompileReport:
    """Every graph the backend was handed (one per Dynamo compile: a recompile for new shapes
    adds one), and its regions."""

    graphs: list[list[Region]] = field(default_factory=list)
    rest: list[str] = field(default_factory=list)   # per graph: what ran the rest, and why

    def to_json(self) -> dict[str, Any]:
        return {"graphs": [[r.to_json() for r in regions] for regions in self.graphs],
                "rest": self.rest,
                "fused": sum(r.status == "fused" for g in self.graphs for r in g),
                "fallback": sum(r.status == "fallback" for g in self.graphs for r in g)}

    def write(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_json(), indent=2) + "\n", encoding="utf-8")


def backend(gm: Any, example_inputs: Sequence[Any], **options: Any) -> Callable[..., Any]:
    """The torch.compile backend (`backend="prism"`, or `prism.compile` with options)."""
    return _Backend(Options(**options), CompileReport())(gm, example_inputs)


def compile(model: Any, *, budget_s: float = 60.0, device: str = "h100",
            cache_dir: str | Path | None = None, report: str | Path | None = None,
            search_config: Any = None, max_region_ops: int = 6,
            advisor: Any = "heuristic", rest: str = "inductor",
            out: str | Path | None = None) -> Any:
    """`torch.compile(model, backend=...)` with the prism backend and these options; the
    result's `prism_report` is the `CompileReport` (also written to `report` when given).
    `advisor` (`prism.advice`): the default heuristic, any callable from a region's summary
    text to advice (an LLM, say), or None; advice only reorders or narrows. `rest`: what runs
    everything but the fused regions, "inductor" (eager where Inductor cannot compile here)
    or "eager". `out`: a folder where each region optimized (not served from the cache) leaves
    `prism optimize`'s outputs, `graph<G>-region<K>/` (kernel.py, trace.jsonl.gz with the advice
    stages, report.html, result.json), which `widgets.Workbench.from_trace` replays."""
    import torch

    opts = Options(budget_s, device, Path(cache_dir) if cache_dir is not None else None,
                   Path(report) if report is not None else None, search_config, max_region_ops,
                   advisor, rest, Path(out) if out is not None else None)
    be = _Backend(opts, CompileReport())
    # static shapes: a new shape is a new graph (guarded by Dynamo), whose regions meet their
    # checkpoints; dynamic shapes would hand regions symbolic sizes, which fall back
    compiled = torch.compile(model, backend=be, dynamic=False)
    setattr(compiled, "prism_report", be.report)  # noqa: B010 (not a declared attribute)
    return compiled


class _Backend:
    def __init__(self, options: Options, report: CompileReport):
        self.options = options
        self.report = report

    def __call__(self, gm: Any, example_inputs: Sequence[Any]) -> Callable[..., Any]:
        from prism.errors import UnsupportedOpError

        calls = [n for n in gm.graph.nodes if n.op in ("call_function", "call_method")]
        if not calls:                        # nothing to cut: the graph as it is
            self.report.graphs.append([])
            return self._rest(gm, example_inputs)
        supported = _supported_targets()
        why: dict[Any, str] = {n: "ops the frontend does not lower: left to the rest of the "
                               "graph (the report's `rest`: Inductor, or eager)"
                               for n in calls if _key(n) not in supported}
        # Cut, trace each region, and where the frontend refuses a node (a transpose of a
        # computed tensor, an index) put that node outside and cut again: the regions are
        # what the engine takes, found by asking it
        while True:
            split, members = _split(gm, calls, set(why), self.options.max_region_ops)
            shapes, outputs = _input_shapes(split, example_inputs)
            refused = False
            for name, nodes in members.items():
                if nodes[0] in why or len(nodes) < 2:
                    continue
                sub = getattr(split, name)
                try:
                    _traced(_region_workload(sub, shapes[name], "float32"))
                except UnsupportedOpError as e:
                    at = getattr(e, "call_index", None)
                    bad = nodes[at] if isinstance(at, int) and at < len(nodes) else nodes[0]
                    why[bad] = f"the frontend refuses it: {_after_workload(str(e))}"
                    refused = True
                    break
                except PrismError:
                    continue                 # said again below, when the region is optimized
            if not refused:
                break
        regions: list[Region] = []
        todo: list[tuple[str, Region]] = []
        for name, nodes in members.items():
            k = int(name.removeprefix("submod_"))
            region = Region(k, [_op_name(n) for n in nodes])
            regions.append(region)
            if nodes[0] in why:
                region.reason = why[nodes[0]]
                continue
            if len(nodes) < 2:
                region.reason = "a region of one op: nothing to fuse, torch runs it"
                continue
            region.advised = self._advise(getattr(split, name), shapes[name])
            todo.append((name, region))
        # the advisor's priorities order the regions (higher first; stable otherwise)
        todo.sort(key=lambda nr: -(nr[1].advised.advice.priority if nr[1].advised else 0.0))
        for name, region in todo:
            kernel = self._region_kernel(getattr(split, name), shapes[name], region,
                                         example_inputs)
            if kernel is not None:
                setattr(split, name, _KernelModule(kernel, getattr(split, name),
                                                   outputs[name]))
        self.report.graphs.append(sorted(regions, key=lambda r: r.index))
        return self._rest(split, example_inputs)

    def _rest(self, gm: Any, example_inputs: Sequence[Any]) -> Callable[..., Any]:
        """The graph (its fused regions calls of `prism::region_kernel`) compiled by Inductor,
        or run eagerly where that is not asked or Inductor cannot compile here (said)."""
        how = "eager (asked)"
        compiled: Callable[..., Any] = gm.forward
        if self.options.rest == "inductor":
            try:
                from torch._inductor.compile_fx import compile_fx
                compiled = compile_fx(gm, list(example_inputs))  # type: ignore[assignment]
                how = "inductor"
            except Exception as e:                  # no C++ compiler, an unsupported op, ...
                first = (str(e).splitlines() or [""])[0][:200]
                how = f"eager: Inductor could not compile it here ({type(e).__name__}: {first})"
        elif self.options.rest != "eager":
            raise PrismError(f"rest={self.options.rest!r}; give 'inductor' or 'eager'")
        self.report.rest.append(how)
        self._write()
        return compiled

    def _advise(self, sub: Any, shapes: list[tuple[tuple[int, ...], Any]]) -> Any:
        """The advisor's advice on a region (None: no advisor, or a region that does not
        trace, which optimizing it will say)."""
        from prism.advice import Advised, ask, heuristic
        advisor = heuristic if self.options.advisor == "heuristic" else self.options.advisor
        if advisor is None or any(dt is None for _, dt in shapes):
            return None
        dtype = str(shapes[0][1]).removeprefix("torch.")
        try:
            graph = _region_workload(sub, shapes, dtype).graph
        except PrismError:
            return None
        from prism.cost import get_device
        return Advised(ask(advisor, graph, dtype, get_device(self.options.device)))

    def _write(self) -> None:
        if self.options.report is not None:
            self.report.write(self.options.report)

    def _region_kernel(self, sub: Any, shapes: list[tuple[tuple[int, ...], Any]],
                       region: Region, examples: Sequence[Any]) -> Any:
        """The region's kernel as a module to call in its place, or None (fallback, said)."""
        import torch

        from prism.instantiate.triton_backend import interpreting
        started = time.perf_counter()
        region.status = "fallback"
        device_type = next((t.device.type for t in examples if isinstance(t, torch.Tensor)),
                           "cpu")
        if device_type == "cpu" and not interpreting():
            region.reason = ("Triton runs kernels on a GPU, or on the CPU only under "
                             "TRITON_INTERPRET=1 (set before triton is imported)")
            return None
        if any(dt is None for _, dt in shapes):
            region.reason = ("an input that is not a tensor of static shape (Dynamo's dynamic "
                             "shapes): compile with dynamic=False, as prism.compile does")
            return None
        advised = region.advised
        if advised is not None and advised.advice.skip:
            who = advised.advice.source
            region.reason = (f"the advisor ({who}) advised leaving it to torch"
                             + (": fusion could save under 5% of its modeled eager time "
                                "(eager - roofline bound)" if who == "heuristic" else ""))
            advised.effects.append("skipped: no search")
            advised.outcome = "left to torch, as advised"
            return None
        dtypes = {str(dt).removeprefix("torch.") for _, dt in shapes}
        if len(dtypes) != 1 or next(iter(dtypes)) not in ("float16", "bfloat16", "float32"):
            region.reason = f"inputs of dtypes {sorted(dtypes)}: a kernel takes one of " \
                            "float16, bfloat16, float32"
            return None
        try:
            found = self._kernel(sub, [s for s, _ in shapes], next(iter(dtypes)), region)
        except PrismError as e:
            region.reason = f"{type(e).__name__}: {str(e).splitlines()[0]}"
            return None
        finally:
            region.seconds = time.perf_counter() - started
        if found is None:
            if region.advised is not None:
                region.advised.outcome = f"fell back: {region.reason}"
            return None
        region.status = "fused"
        if region.advised is not None:
            region.advised.outcome = f"fused ({region.source})"
        if device_type == "cuda":
            region.measured = _measured(found, sub, shapes, examples)
        return found

    def _kernel(self, sub: Any, shapes: list[tuple[int, ...]], dtype: str,
                region: Region) -> Any:
        """The region's generated module: from the cache, else from its checkpoint at new
        shapes, else by a search; None when nothing passed."""
        from prism.instantiate.triton_backend import load
        from prism.pipeline import superoptimize

        work = _region_workload(sub, [(s, dtype) for s in shapes], dtype)
        graph = work.graph                     # refused by the frontend: a PrismError
        # by the program, not its names: two norms of one layer are one entry
        # advice that narrows the search or reorders tuning is part of the key: another advice,
        # another kernel (label, priority and risks change nothing)
        advice = region.advised.advice if region.advised is not None else None
        steer = [] if advice is None or advice.empty else [
            advice.block_ops, advice.max_block_ops, sorted(advice.params.items()),
            advice.kernels]
        key = _digest([_structure(graph, shapes=True), dtype, self.options.device,
                       ENGINE_VERSION, *steer])
        form = _digest([_structure(graph), dtype, self.options.device, ENGINE_VERSION,
                        *steer])
        root = self._cache_root()
        entry = root / f"{key}.json"
        if entry.exists():
            saved = json.loads(entry.read_text(encoding="utf-8"))
            region.source, region.reason = "cache", "the cached kernel of this region"
            region.kernel_us, region.eager_us = saved["kernel_us"], saved["eager_us"]
            return load(saved["source"])
        checkpoint = root / f"{form}.ck.json"
        from_checkpoint = checkpoint.exists()
        result = superoptimize(work, device=self.options.device, measure="model",
                               budget_s=self.options.budget_s, compile_ptx=False,
                               checkpoint=checkpoint, max_trials=4,
                               search_config=self.options.search_config, advice=advice,
                               out=(self.options.out / f"graph{len(self.report.graphs)}-"
                                    f"region{region.index}") if self.options.out else None)
        if region.advised is not None and result.advised is not None:
            region.advised.effects += result.advised.effects
        best = result.best
        if best is None or not best.proved or not best.check.passed:
            why = ("no kernel" if best is None else "not proved" if not best.proved
                   else f"its check {best.check.status}: {best.check.reason}")
            region.reason = f"the optimization found no kernel it can claim ({why})"
            return None
        if best.is_input_program:
            region.reason = (f"no fused program beat the region's own {best.num_kernels} "
                             f"op(s) within {self.options.budget_s:g} s: torch runs them")
            return None
        region.source = "checkpoint" if from_checkpoint and \
            result.search is not None and result.search.stop_reason == "checkpoint" else "search"
        region.reason = (f"{best.candidate}, {best.kernels_text}, proved and checked "
                         f"against torch ({best.check.to_json().get('where', '')})")
        region.kernel_us, region.eager_us = best.modeled_us, result.eager_us
        root.mkdir(parents=True, exist_ok=True)
        entry.write_text(json.dumps({"source": best.triton_source, "kernel_us": best.modeled_us,
                                     "eager_us": result.eager_us, "candidate": best.candidate}),
                         encoding="utf-8")
        return load(best.triton_source)

    def _cache_root(self) -> Path:
        if self.options.cache_dir is not None:
            return self.options.cache_dir
        base = os.environ.get("PRISM_CACHE_DIR")
        return (Path(base) if base else Path.home() / ".cache" / "prism") / "compile"


def _measured(module: Any, sub: Any, shapes: list[tuple[tuple[int, ...], Any]],
              examples: Sequence[Any]) -> dict[str, float]:
    """On a GPU: the region's kernel and its ops as torch runs them, timed on random inputs of
    its shapes (`bench_cuda`: CUDA events, medians, L2 flushed before each call)."""
    import torch

    from prism.instantiate.triton_backend import bench_cuda
    device = next(t.device for t in examples if isinstance(t, torch.Tensor))
    xs = [torch.randn(s, dtype=dt, device=device) for s, dt in shapes]
    with torch.no_grad():
        return {"kernel_us": bench_cuda(lambda: module.run(*xs)),
                "eager_us": bench_cuda(lambda: sub(*xs))}


# the generated modules `prism::region_kernel` runs, by key, and their outputs' (shape, dtype)
_KERNELS: dict[str, tuple[Any, list[tuple[tuple[int, ...], Any]]]] = {}


def _region_op() -> Any:
    """`torch.ops.prism.region_kernel(key, args)`: a generated module's `run()` as a torch
    operator, so Inductor compiles the graph around it and calls it (its fake implementation
    gives the outputs' shapes and dtypes, recorded when the kernel was made)."""
    import torch
    if hasattr(torch.ops.prism, "region_kernel"):
        return torch.ops.prism.region_kernel

    # the schema written out: this module's annotations are strings (`from __future__`)
    @torch.library.custom_op("prism::region_kernel", mutates_args=(),
                             schema="(str key, Tensor[] args) -> Tensor[]")
    def region_kernel(key: str, args: list[torch.Tensor]) -> list[torch.Tensor]:
        module, _ = _KERNELS[key]
        got = module.run(*[a.detach().contiguous() for a in args])
        return list(got) if isinstance(got, tuple) else [got]

    @region_kernel.register_fake
    def _(key: str, args: list[torch.Tensor]) -> list[torch.Tensor]:
        _, outs = _KERNELS[key]
        device = args[0].device if args else torch.device("cpu")
        return [torch.empty(shape, dtype=dtype, device=device) for shape, dtype in outs]

    return torch.ops.prism.region_kernel


def _KernelModule(module: Any, sub: Any, meta: Any) -> Any:
    """A module to stand where the region's submodule stood: the generated `run()` on the same
    inputs (through `prism::region_kernel`), its outputs as the submodule returned them (one
    tensor, or a tuple)."""
    as_tuple = not hasattr(meta, "shape")        # TensorMetadata is itself a named tuple
    outs = [(tuple(m.shape), m.dtype) for m in (meta if as_tuple else [meta])]
    key = hashlib.sha256(module.__file__.encode()).hexdigest()[:16] + f"_{len(_KERNELS)}"
    _KERNELS[key] = (module, outs)
    _region_op()
    return _kernel_class()(key, sub, as_tuple)


def _kernel_class() -> Any:
    """The module class of a fused region, made once torch is imported, and a name of this
    module (Inductor's cache pickles the graph's modules by qualified name)."""
    made = globals().get("_Kernel")
    if made is not None:
        return made
    import torch

    class _Kernel(torch.nn.Module):
        def __init__(self, key: str, sub: Any, as_tuple: bool):
            super().__init__()
            self.key, self.sub, self.as_tuple = key, sub, as_tuple

        def forward(self, *args: Any) -> Any:
            if torch.is_grad_enabled() and any(getattr(a, "requires_grad", False)
                                               for a in args):
                return self.sub(*args)  # the kernel is inference-only: autograd needs torch's
            got = torch.ops.prism.region_kernel(self.key, list(args))
            return tuple(got) if self.as_tuple else got[0]

    _Kernel.__qualname__ = "_Kernel"
    globals()["_Kernel"] = _Kernel
    return _Kernel


def _split(gm: Any, calls: list[Any], outside: set[Any], max_ops: int = 6
           ) -> tuple[Any, dict[str, list[Any]]]:
    """`gm` split into runs of call nodes, a run ending where a node's side (outside or not)
    changes, at its first value handed on, or at `max_ops` ops that compute (casts, views and
    reshapes are free): each outside node alone. The split module and each part's nodes."""
    from torch.fx.passes.split_module import split_module

    part: dict[Any, int] = {}
    index, last, ended, size = -1, None, False, 0
    for node in calls:
        inside = node not in outside
        computes = _op_name(node) not in FREE_OPS
        if inside != last or not inside or ended or (computes and size >= max_ops):
            index, last, size = index + 1, inside, 0
        part[node] = index
        size += computes
        # a region ends at the first value it hands on (to torch, or to the graph's output):
        # one output a region, the programs the search fuses (a norm and the projection after
        # it, not the norm and three projections)
        ended = any(u in outside or u.op == "output" for u in node.users)
    split = split_module(gm, gm, lambda n: part[n], keep_original_order=True)
    members: dict[str, list[Any]] = {}
    for node in calls:
        members.setdefault(f"submod_{part[node]}", []).append(node)
    return split, members


def _region_workload(sub: Any, shapes: list[tuple[tuple[int, ...], Any]], dtype: str) -> Any:
    from prism.frontend.workload import Workload

    params = [n.target for n in sub.graph.nodes if n.op == "placeholder"]
    return Workload(_as_function(sub, params),
                    dict(zip(params, [s for s, _ in shapes], strict=True)), dtype=dtype,
                    description="a region of a torch.compile graph")


def _traced(work: Any) -> Any:
    """The workload's graph: the frontend's trace (its refusals raise)."""
    return work.graph


def _op_name(node: Any) -> str:
    target = node.target
    return target if isinstance(target, str) else getattr(target, "__name__", str(target))


def _after_workload(message: str) -> str:
    """A frontend message without its "workload region: " prefix, first line."""
    first = message.splitlines()[0] if message else ""
    return first.split(": ", 1)[1] if first.startswith("workload ") and ": " in first else first


def _as_function(sub: Any, params: list[str]) -> Callable[..., Any]:
    """The submodule as a function with its placeholders as named parameters (a workload's
    signature, which fx traces): `def region(a, b): return sub(a, b)`."""
    if not all(p.isidentifier() for p in params):
        raise PrismError(f"region inputs {params} are not identifiers")
    getattr(sub, "real_recompile", sub.recompile)()   # its forward as code, not a lazy stub
    scope: dict[str, Any] = {"sub": sub}
    args = ", ".join(params)
    exec(f"def region({args}):\n    return sub.forward({args})\n", scope)   # fx reads names
    return scope["region"]


def _input_shapes(split: Any, examples: Sequence[Any]
                  ) -> tuple[dict[str, list[tuple[tuple[int, ...], Any]]], dict[str, Any]]:
    """Each submodule's inputs' (shape, dtype), and its output's tensor metadata (one, or a
    tuple), from a run of the split graph's shape propagation on the example inputs."""
    from torch.fx.passes.shape_prop import ShapeProp

    ShapeProp(split).propagate(*examples)
    out: dict[str, list[tuple[tuple[int, ...], Any]]] = {}
    outputs: dict[str, Any] = {}
    for node in split.graph.nodes:
        if node.op == "call_module":
            metas = [a.meta.get("tensor_meta") for a in node.args]
            out[str(node.target)] = [(tuple(m.shape), m.dtype) if m is not None else ((), None)
                                     for m in metas]
            outputs[str(node.target)] = node.meta.get("tensor_meta")
    return out, outputs


def _supported_targets() -> set[Any]:
    from prism.frontend.fx import _functions, _methods
    return set(_functions()) | set(_methods())


def _key(node: Any) -> Any:
    return node.target


def _structure(graph: Any, shapes: bool = False) -> list[Any]:
    """A graph's program with its tensors named by first appearance (t0, t1, ...), its ops'
    attributes, and with `shapes` its tensors' shapes and views: what a cached kernel must
    match (with shapes), or a checkpoint at other shapes (without)."""
    names: dict[str, str] = {}

    def name(t: str) -> str:
        return names.setdefault(t, f"t{len(names)}")
    out: list[Any] = [[op.kind, [name(t) for t in op.inputs], [name(t) for t in op.outputs],
                       [[k, str(v)] for k, v in op.attrs]] for op in graph.ops]
    if shapes:
        out.append([[name(t), [str(d) for d in shape]] for t, shape in graph.tensors
                    if t in names])
        out.append(str(graph.interface))
    return out


def _digest(parts: Any) -> str:
    text = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:24]
