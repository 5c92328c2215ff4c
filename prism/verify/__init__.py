"""Verification: random testing in float64 and in Mirage's modular arithmetic (the independent
cross-check of the equivalence proofs)."""

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
