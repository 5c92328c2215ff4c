"""`prism calibrate`: measure the device numbers the cost model assumes (`prism.cost.devices`).

    doc = calibrate("h100")          # on a GPU: measured; on a CPU: the interpreter's check only

Five Triton microbenchmarks, each a few lines of kernel source below, loaded like generated
code (`prism.instantiate.triton_backend.load`):

- **launch**: `touch` (one block stores one value) launched back to back, host wall time per
  launch after a synchronize: the gap the model charges every kernel (`launch_us`);
- **hbm**: `copy` of a buffer far larger than L2 by a full grid, L2 flushed before each call
  (`bench_cuda`): bytes read and written over the median time (`mem_bw_gbps`);
- **l2**: the same `copy` of a buffer that fits in L2, timed warm with CUDA events over repeated
  calls (`l2_bw_gbps`);
- **one_sm**: the same `copy` with 1, 2, 4, ... blocks (each block walks the buffer in strides):
  the bandwidth a few blocks get, which the model's occupancy rule (`max_blocks_per_sm`,
  `sm_count`) assumes scales with the blocks;
- **sync**: `arrive` against `plain` on the same grid of groups × parts: each block stores a
  value, and in `arrive` also fences and adds one to its group's counter, the block that brings
  it to the part count summing the group's values (a tail, `prism.ir.spec.TAIL`) and setting the
  counter back to 0; the difference of their warm times is what a tail's sync costs
  (`sync_us`). In the interpreter the groups' sums and the counters' zeros are checked.

Every figure is labelled with its kind: `measured` on a GPU; on a CPU the same kernels run in
Triton's interpreter on small buffers, where their *results* are checked (the copy equals its
source, the touched value is written) and their times are `interpreted`, which says nothing
about a GPU, so no device number is derived from them. The winners of the workloads against
eager and `torch.compile` are `bench/gpu_check.py`'s (run after this by `bench/gpu_check.sh`);
`prism bench` reads both files' measured rows beside its modeled ones.
"""

from __future__ import annotations

import json
import math
import statistics
import time
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any

from prism.cost import DeviceSpec, get_device
from prism.errors import PrismError

KERNELS = '''
import triton
import triton.language as tl


@triton.jit
def touch(dst):
    """One block stores one value: a launch and nearly nothing else."""
    tl.store(dst, 1.0)


@triton.jit
def copy(src, dst, n, BLOCK: tl.constexpr):
    """dst[i] = src[i]; block p copies chunks p, p + P, p + 2P, ... (P blocks in all)."""
    step = tl.num_programs(0) * BLOCK
    for start in range(tl.program_id(0) * BLOCK, n, step):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(dst + offs, tl.load(src + offs, mask=mask), mask=mask)


@triton.jit
def plain(parts, sums, PARTS: tl.constexpr):
    """Block (g, p) stores 1 as part p of group g; the last part's block stores the group's 1."""
    g, p = tl.program_id(0), tl.program_id(1)
    tl.store(parts + g * PARTS + p, 1.0)
    if p == PARTS - 1:
        tl.store(sums + g, 1.0)


@triton.jit
def arrive(parts, sums, counters, PARTS: tl.constexpr):
    """`plain` with a tail: each block counts itself on its group's counter, and the block that
    brings it to PARTS sums the group's parts and sets the counter back to 0."""
    g, p = tl.program_id(0), tl.program_id(1)
    tl.store(parts + g * PARTS + p, 1.0)
    tl.debug_barrier()
    arrived = tl.atomic_add(counters + g, 1)
    if arrived == PARTS - 1:
        tl.debug_barrier()
        tl.store(counters + g, 0)
        got = tl.load(parts + g * PARTS + tl.arange(0, PARTS), cache_modifier=".cg")
        tl.store(sums + g, tl.sum(got, axis=0))
'''
BLOCK = 1024                      # elements a block copies per step (fp16: 2 KiB)
GPU_SIZES = {"hbm": 512 << 20, "l2": 8 << 20, "one_sm": 64 << 20}   # bytes per buffer
CPU_SIZES = {"hbm": 64 << 10, "l2": 16 << 10, "one_sm": 16 << 10}   # the interpreter's
ONE_SM_BLOCKS = (1, 2, 4, 8, 16)
LAUNCHES = 2000
SYNC_PARTS = 8                    # parts a group of `arrive` counts


class CalibrationError(PrismError):
    """A microbenchmark whose kernel computed the wrong thing, or a device that cannot run."""


def calibrate(device: str | DeviceSpec = "h100", *, quick: bool = False) -> dict[str, Any]:
    """Run the microbenchmarks (module docstring) and return the document `prism calibrate`
    writes: each figure with its kind, and the cost model's own number beside it."""
    import torch

    from prism.instantiate import triton_backend
    spec = get_device(device)
    on_gpu = not triton_backend.interpreting()
    where = "cuda" if on_gpu else "cpu"
    kind = "measured" if on_gpu else "interpreted"
    kernels = triton_backend.load(KERNELS)
    sizes = GPU_SIZES if on_gpu else CPU_SIZES
    if quick:
        sizes = {k: max(v // 8, 4 * BLOCK * 2) for k, v in sizes.items()}
    sync = torch.cuda.synchronize if on_gpu else (lambda: None)

    def buffers(nbytes: int) -> tuple[Any, Any]:
        n = nbytes // 2
        src = torch.arange(n, device=where, dtype=torch.float32).remainder(2039).half()
        return src, torch.full((n,), float("nan"), device=where, dtype=torch.float16)

    def copy(src: Any, dst: Any, blocks: int) -> Callable[[], Any]:
        return lambda: kernels.copy[(blocks,)](src, dst, src.numel(), BLOCK=BLOCK)

    def checked(src: Any, dst: Any, what: str) -> None:
        sync()
        if not torch.equal(src, dst):
            raise CalibrationError(f"the {what} copy kernel did not copy its source: "
                                   "this Triton build runs it wrong")

    # launch: back-to-back launches of `touch`, host time per launch
    flag = torch.zeros(1, device=where, dtype=torch.float32)
    launches = LAUNCHES if on_gpu else 20
    kernels.touch[(1,)](flag)
    sync()
    if float(flag.item()) != 1.0:
        raise CalibrationError("the touch kernel did not write its value")
    start = time.perf_counter()
    for _ in range(launches):
        kernels.touch[(1,)](flag)
    sync()
    launch_us = (time.perf_counter() - start) / launches * 1e6

    rows: dict[str, Any] = {"launch_us": _figure(launch_us, kind, spec.launch_us,
                                                 f"{launches} launches of one block")}
    grid = spec.sm_count * spec.max_blocks_per_sm * 4

    def bandwidth(what: str, cold: bool, model: float) -> dict[str, Any]:
        """A full grid copying a `sizes[what]`-byte buffer: bytes read and written over time."""
        src, dst = buffers(sizes[what])
        us = _time(copy(src, dst, grid), on_gpu, cold=cold)
        checked(src, dst, what)
        return _figure(_gbps(2 * sizes[what], us), kind, model,
                       f"copy of {sizes[what]:,} B, {grid} blocks, "
                       f"{'L2 flushed' if cold else 'warm'}")

    rows["mem_bw_gbps"] = bandwidth("hbm", True, spec.mem_bw_gbps)     # far larger than L2
    rows["l2_bw_gbps"] = bandwidth("l2", False, spec.l2_bw_gbps)       # fits in L2
    # one_sm: few blocks
    src, dst = buffers(sizes["one_sm"])
    few = []
    for blocks in ONE_SM_BLOCKS if not quick else ONE_SM_BLOCKS[:3]:
        dst.fill_(float("nan"))
        us = _time(copy(src, dst, blocks), on_gpu, cold=True)
        checked(src, dst, f"{blocks}-block")
        few.append({"blocks": blocks, "gbps": round(_gbps(2 * sizes["one_sm"], us), 3),
                    "kind": kind})
    rows["few_blocks"] = few
    # sync: the same grid with and without the counters
    groups = spec.sm_count * spec.max_blocks_per_sm // SYNC_PARTS if on_gpu else 4
    parts = torch.full((groups * SYNC_PARTS,), float("nan"), device=where, dtype=torch.float32)
    sums = torch.zeros(groups, device=where, dtype=torch.float32)
    counters = torch.zeros(groups, device=where, dtype=torch.int32)
    grid2 = (groups, SYNC_PARTS)
    base = _time(lambda: kernels.plain[grid2](parts, sums, PARTS=SYNC_PARTS), on_gpu, cold=False)
    sums.zero_()
    counted = _time(lambda: kernels.arrive[grid2](parts, sums, counters, PARTS=SYNC_PARTS),
                    on_gpu, cold=False)
    sync()
    if not (torch.all(sums == SYNC_PARTS) and torch.all(counters == 0)):
        raise CalibrationError("the arrive kernel's last block of a group did not sum its "
                               "parts, or left its counter set")
    rows["sync_us"] = _figure(max(counted - base, 0.0), kind, spec.sync_us,
                              f"{groups} groups of {SYNC_PARTS} blocks, with the counters "
                              "less without (warm)")
    return {"device": spec.name, "where": where, "kind": kind, "date": date.today().isoformat(),
            "gpu": torch.cuda.get_device_name() if on_gpu else None,
            "versions": triton_backend.versions(), "figures": rows,
            "note": ("measured on the GPU: each figure beside the cost model's own number" if
                     on_gpu else "Triton's interpreter on the CPU: the kernels' results were "
                     "checked; their times are interpreted and say nothing about a GPU, so no "
                     "device number comes from them")}


def _figure(value: float, kind: str, modeled: float, how: str) -> dict[str, Any]:
    """One figure, its kind, and the cost model's number with the ratio (measured only)."""
    out: dict[str, Any] = {"value": round(value, 3), "kind": kind, "how": how,
                           "model": modeled}
    if kind == "measured":
        out["measured_over_model"] = round(value / modeled, 3)
    return out


def _gbps(nbytes: float, us: float) -> float:
    return nbytes / (us * 1e-6) / 1e9 if us > 0 else math.inf


def _time(fn: Callable[[], Any], on_gpu: bool, cold: bool) -> float:
    """Median µs of `fn()`: on a GPU with L2 flushed (`bench_cuda`) or warm (CUDA events over
    back-to-back calls); in the interpreter, host wall time (interpreted)."""
    if on_gpu and cold:
        from prism.instantiate.triton_backend import bench_cuda
        return bench_cuda(fn)
    if on_gpu:
        import torch
        fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(5):
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
            for _ in range(20):
                fn()
            end.record()
            torch.cuda.synchronize()
            times.append(begin.elapsed_time(end) * 1e3 / 20)
        return statistics.median(times)
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1e6


def write(doc: dict[str, Any], out: Path) -> Path:
    """`out/calibration-<device>-<kind>.json` (the latest per device and kind)."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"calibration-{doc['device']}-{doc['kind']}.json"
    path.write_text(json.dumps(doc, indent=1) + "\n")
    return path


def text(doc: dict[str, Any]) -> str:
    """The figures as the CLI prints them, each with its kind."""
    lines = [f"calibration of {doc['device']} ({doc['where']}, {doc['kind']}): {doc['note']}"]
    for name, f in doc["figures"].items():
        if name == "few_blocks":
            got = ", ".join(f"{r['blocks']}: {r['gbps']:.3g} GB/s" for r in f)
            lines.append(f"  few blocks ({f[0]['kind']}): {got}")
            continue
        ratio = (f"  ({f['measured_over_model']:.2f}x the model's {f['model']:g})"
                 if "measured_over_model" in f else f"  (the model's: {f['model']:g})")
        lines.append(f"  {name:<12} {f['value']:>12.3f}  {f['kind']}{ratio}; {f['how']}")
    return "\n".join(lines)
