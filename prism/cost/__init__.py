"""The analytic cost model (DESIGN.md §6): device specifications, and the modeled latency,
roofline and lower bound of a kernel graph. Imports only `prism.ir`: no torch, triton or z3.

    from prism.cost import get_device, modeled
    cost = modeled(known_best("rmsnorm_matmul", shapes), get_device("h100"))
    cost.latency_us, cost.roofline_us, cost.kernels
"""

from prism.cost.devices import DEFAULT_DEVICE, DEVICES, DeviceSpec, default_device, get_device
from prism.cost.model import (
    BYTES_PER_ELEMENT,
    KernelCost,
    ModeledCost,
    eager_us,
    full_size_flops,
    lower_bound_us,
    memory_floor_us,
    modeled,
    next_kernel_us,
    op_flops,
    roofline_us,
)

__all__ = [
    "BYTES_PER_ELEMENT",
    "DEFAULT_DEVICE",
    "DEVICES",
    "DeviceSpec",
    "KernelCost",
    "ModeledCost",
    "default_device",
    "eager_us",
    "full_size_flops",
    "get_device",
    "lower_bound_us",
    "memory_floor_us",
    "modeled",
    "next_kernel_us",
    "op_flops",
    "roofline_us",
]
