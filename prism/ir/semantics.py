"""The number domain the interpreter computes in: a table of what each op and accumulator does.

The interpreter (`prism.ir.interpret`) owns data movement — loading tiles by imap/fmap, walking
the loop, storing by omap — and asks a `Semantics` for the arithmetic:

- `convert(array, name, shape)`: a graph input as an array of this domain (or an `InputError`);
- `compute[op]`: each compute op, with the op table's signature `(xs, attrs, lead)`;
- `accumulate[kind]`: each for-loop accumulator's `Accumulation(step, finish)`. The interpreter
  adds the per-iteration steps with `+`; a domain whose numbers need reducing (modular
  arithmetic) does so in `finish`;
- `sum_blocks(tiles, axes)`: the sum over blocks where an omap maps a grid dim to no data dim.

`FLOAT64` is the op table's own float64 reference: the project's oracle and the default.
Other domains (the modular fingerprints of `prism.verify.modular`) live with their users.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from prism.errors import InputError
from prism.ir.ops import ACCUMULATIONS, COMPUTE_CATEGORIES, OPS, Accumulation, Reference

Convert = Callable[[Any, str, tuple[int, ...]], np.ndarray]
SumBlocks = Callable[[np.ndarray, tuple[int, ...]], np.ndarray]


@dataclass(frozen=True, eq=False)
class Semantics:
    """What the interpreter's numbers are and how each op computes on them."""

    name: str
    convert: Convert
    compute: Mapping[str, Reference]
    accumulate: Mapping[str, Accumulation]
    sum_blocks: SumBlocks

    def missing(self) -> list[str]:
        """Compute ops and accumulators of the op table this semantics has no entry for."""
        ops = [n for n, od in OPS.items() if od.category in COMPUTE_CATEGORIES]
        return [n for n in ops if n not in self.compute] + \
            [n for n in ACCUMULATIONS if n not in self.accumulate]

    def __repr__(self) -> str:
        return f"Semantics({self.name})"


def as_float64(arr: Any, name: str, shape: tuple[int, ...]) -> np.ndarray:
    """A numpy or torch array as float64 of exactly `shape`."""
    if hasattr(arr, "detach"):  # a torch tensor, without importing torch here
        arr = arr.detach().cpu().double().numpy()
    a = np.asarray(arr, dtype=np.float64)
    check_input_shape(a, name, shape)
    return a


def check_input_shape(a: np.ndarray, name: str, shape: tuple[int, ...]) -> None:
    if a.shape != shape:
        raise InputError(f"input {name} has shape {a.shape}, the graph expects {shape}; "
                         "pass arrays of the graph's input shapes in its input order")


def _float_references() -> dict[str, Reference]:
    refs = {}
    for name, od in OPS.items():
        if od.category in COMPUTE_CATEGORIES:
            assert od.reference is not None, name
            refs[name] = od.reference
    return refs


FLOAT64 = Semantics(
    name="float64",
    convert=as_float64,
    compute=_float_references(),
    accumulate=ACCUMULATIONS,
    sum_blocks=lambda tiles, axes: tiles.sum(axis=axes),
)
