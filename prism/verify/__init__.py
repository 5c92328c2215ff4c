"""Verification: random testing in float64 and in Mirage's modular arithmetic (the independent
cross-check of the equivalence proofs)."""

import sys
import types
from typing import Any

from prism.verify.modular import MODULAR
from prism.verify.randomized import (
    Counterexample,
    RandomTestResult,
    float_inputs,
    modular_test,
    random_test,
    valid_assignments,
)

__all__ = [
    "MODULAR", "Counterexample", "RandomTestResult", "float_inputs", "modular_test", "random_test",
    "valid_assignments",
]


class _CallablePackage(types.ModuleType):
    """`prism.verify` is both this package and the flat API's `verify` function: importing any
    `prism.verify.*` module makes Python set the package as the attribute `prism.verify`, which
    would hide the function; calling the package calls the function instead."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from prism.verify.equiv import verify
        return verify(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
