"""The symbolic search's pruning rules. `hardware`: does any assignment of a family fit?"""

from prism.search.hardware import Device, HardwareVerdict, check_hardware, hardware_constraints

__all__ = ["Device", "HardwareVerdict", "check_hardware", "hardware_constraints"]
