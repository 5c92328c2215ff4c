"""The learned trajectory evaluator, used only to order work (issue 21, items 3 and 4).

    from prism.learn import learned_order
    config = SearchConfig(order=learned_order())          # the committed weights
    prism search swiglu --order learned [--order-model evaluator.pt]

`features` and `data` turn a search's families (their chain of decisions, read from the states
a trace records) and the tuner's configurations into numbers and labels; `model` (the only
module here that imports torch) rolls a family's decisions forward in a latent space and
predicts whether a proven candidate is reachable below it and the best modeled latency there,
and a configuration's modeled latency. `train` (`python -m prism.learn.train`) makes the
committed weights, `WEIGHTS`, from searches of the workloads in `TRAIN`; `HELD_OUT` are the
workloads it never saw, which `bench/order.py` measures on. Importing this package does not
import torch; asking for the learned order does.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from prism.learn.model import LearnedOrder

WEIGHTS = Path(__file__).with_name("evaluator.pt")


def learned_order(path: str | Path | None = None) -> LearnedOrder:
    """The search order by the evaluator saved at `path` (default: the committed `WEIGHTS`);
    `EvaluatorError` (a PrismError) when the file is missing or was trained for other
    features, saying how to train one."""
    from prism.learn.model import LearnedOrder, load
    model, meta = load(path or WEIGHTS)
    return LearnedOrder(model, meta)


def tuning_scores(graphs: Any, device: Any, path: str | Path | None = None) -> list[float]:
    """The evaluator's predicted log(modeled µs / roofline) of each concrete program: the
    learned trial order of the tuner (lower first)."""
    from prism.learn.model import config_scores, load
    model, _ = load(path or WEIGHTS)
    return config_scores(model, list(graphs), device)


__all__ = ["WEIGHTS", "learned_order", "tuning_scores"]
