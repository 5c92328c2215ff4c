"""The devices the cost model knows: public specification numbers, one frozen value each.

    get_device("H100").mem_bw_gbps      # 3350.0

Where each number comes from:
- SMs, HBM bandwidth, L2 size, dense fp16 tensor-core peak (bf16's is the same), fp32 peak
  without tensor cores, shared memory per block: NVIDIA's datasheets and architecture
  whitepapers (A100 SXM4 80GB, H100 SXM5, H200 SXM).
- L2 bandwidth: NVIDIA does not publish it; the values are approximate, from public
  microbenchmarks (e.g. Chips and Cheese, 2023), and are the first thing to calibrate on a GPU.
- Launch overhead: the typical gap between back-to-back kernels launched from Python (PyTorch,
  Triton), a few microseconds; a measured habit, not a datasheet number.
- Sync: a block of a kernel with a tail fences its stores and adds to a counter in global memory
  before it knows whether it runs the tail; about a microsecond (a global atomic's round trip is
  hundreds of nanoseconds), an estimate until a GPU calibrates it.
- Blocks per SM: how many blocks of the typical tile budget (about 96 KiB of shared memory,
  Mirage's cap) fit next to one another on an SM: 164 KiB per SM on A100 fits one, 228 KiB on
  H100/H200 fits two. Our 128-thread blocks are never limited by threads or registers first.
- The search's limits (the hardware rule, parameter candidates, the audit) are the same value's
  fields: `smem_bytes` per block, `max_blocks` per kernel, `min_matmul_tile`, `dtype_bytes`.
  One device is chosen per run and every stage reads it (`--device`); a variant with other
  limits is `dataclasses.replace(get_device("h100"), smem_bytes=2048)`.
- The run's dtype (`prism.ir.dtypes`) is the device value's too: `get_device("h100")` runs
  float16, `.for_dtype("float32")` the same GPU running float32, whose `dtype_bytes` (4) every
  stage counts and whose `peak_tflops` (the fp32 peak) the cost model divides FLOPs by.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from prism.errors import UnknownDeviceError
from prism.ir.dtypes import DEFAULT_DTYPE, DType, get_dtype


@dataclass(frozen=True)
class DeviceSpec:
    """One GPU: what the cost model, the search's hardware rule and the tuner know of it."""

    name: str
    sm_count: int
    mem_bw_gbps: float            # HBM bandwidth, GB/s (10^9 bytes per second)
    l2_bw_gbps: float             # L2 bandwidth, GB/s
    l2_bytes: int                 # L2 capacity
    fp16_tflops: float            # dense fp16 (and bf16) tensor-core peak, TFLOP/s (no sparsity)
    fp32_tflops: float            # fp32 peak without tensor cores (IEEE fp32 FMA), TFLOP/s
    smem_bytes: int               # the largest shared-memory allocation of one block (opt-in):
                                  # the hardware rule's limit
    max_blocks: int = 4096        # the search's cap on blocks per kernel (DESIGN.md §1)
    min_matmul_tile: int = 16     # a matmul operand tile's last two dims: at least this (the
                                  # tensor-core fragment), or a whole unsplit dim (padded)
    launch_us: float = 4.0        # per-kernel launch overhead
    sync_us: float = 1.0          # a block's fence and counter add before a tail (an estimate
                                  # of a global atomic's round trip; not yet calibrated)
    max_blocks_per_sm: int = 2    # blocks resident on one SM at once (occupancy cap)
    dtype: DType = DEFAULT_DTYPE  # the element type of the run's tensors

    @property
    def dtype_bytes(self) -> int:
        """The bytes of one element of the run's tensors (fp32 partial tiles aside)."""
        return self.dtype.bytes

    @property
    def peak_tflops(self) -> float:
        """The arithmetic peak the cost model charges FLOPs at: the tensor-core peak for fp16
        and bf16, the fp32 one for fp32 (its kernels ask tl.dot for IEEE fp32)."""
        return self.fp16_tflops if self.dtype.tensor_cores else self.fp32_tflops

    def for_dtype(self, dtype: Any) -> DeviceSpec:
        """This device running programs in `dtype` (a name, a torch dtype or a `DType`)."""
        return replace(self, dtype=get_dtype(dtype))


_MB = 1024 * 1024
_KB = 1024

DEVICES: dict[str, DeviceSpec] = {d.name: d for d in (
    # A100 SXM4 80GB datasheet: 108 SMs, 2039 GB/s HBM2e, 312 TF fp16 dense, 19.5 TF fp32,
    # 40 MB L2; CUDA guide: 163 KiB shared memory per block (opt-in).
    DeviceSpec("a100", sm_count=108, mem_bw_gbps=2039.0, l2_bw_gbps=5000.0, l2_bytes=40 * _MB,
               fp16_tflops=312.0, fp32_tflops=19.5, smem_bytes=163 * _KB, max_blocks_per_sm=1),
    # H100 SXM5 datasheet: 132 SMs, 3350 GB/s HBM3, 989 TF fp16 dense, 67 TF fp32; whitepaper:
    # 50 MB L2; CUDA guide: 227 KiB shared memory per block (opt-in).
    DeviceSpec("h100", sm_count=132, mem_bw_gbps=3350.0, l2_bw_gbps=7000.0, l2_bytes=50 * _MB,
               fp16_tflops=989.0, fp32_tflops=67.0, smem_bytes=227 * _KB),
    # H200 SXM datasheet: the H100 chip (132 SMs, 989 TF fp16, 67 TF fp32, 50 MB L2) with
    # 4800 GB/s HBM3e.
    DeviceSpec("h200", sm_count=132, mem_bw_gbps=4800.0, l2_bw_gbps=7000.0, l2_bytes=50 * _MB,
               fp16_tflops=989.0, fp32_tflops=67.0, smem_bytes=227 * _KB),
)}


def get_device(name: str | DeviceSpec) -> DeviceSpec:
    """The device called `name` (any case), or an `UnknownDeviceError` naming the known ones;
    a `DeviceSpec` is its own answer (so a stage takes a name or a spec alike)."""
    if isinstance(name, DeviceSpec):
        return name
    spec = DEVICES.get(str(name).lower())
    if spec is None:
        raise UnknownDeviceError(f"unknown device {name!r}; known devices: {', '.join(DEVICES)}")
    return spec


DEFAULT_DEVICE = "h100"


def default_device() -> DeviceSpec:
    """The device a run targets when none is named."""
    return DEVICES[DEFAULT_DEVICE]
