"""Measuring and tuning concrete kernels: the backends (model, interpret, cuda), the result
database, and the tuner. The cost model and device table are `prism.cost` (the search's branch
and bound needs them, so they sit upstream; see docs/architecture.md)."""

from prism.tune.backends import KIND, MEASURES, MeasureError, make_backend
from prism.tune.database import ResultDB
from prism.tune.tuner import Config, Trial, TuningResult, tune

__all__ = ["KIND", "MEASURES", "Config", "MeasureError", "ResultDB", "Trial", "TuningResult",
           "make_backend", "tune"]
