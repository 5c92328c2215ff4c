"""The evaluator learns a known rule, saves and loads, and refuses bad weights (issue 21,
item 3). Oracle: synthetic families and configurations labelled by a rule written here."""

from __future__ import annotations

import math
import pickle
import random

import pytest

from prism.errors import PrismError
from prism.learn import features
from prism.learn.data import ConfigExample, FamilyExample

torch = pytest.importorskip("torch")
from prism.learn import learned_order  # noqa: E402  (after the skip: needs torch)
from prism.learn.model import (  # noqa: E402
    Evaluator,
    EvaluatorError,
    LearnedOrder,
    load,
    save,
    train,
)

KINDS = ("matmul", "exp", "add", "nored", "red_ld_sum", "mul")


def _family(rng: random.Random) -> FamilyExample:
    """A chain of 1-6 block ops; the rule: a candidate is reachable iff the chain holds an
    accumulator, and the best below is 0.3 per matmul."""
    chain = [features.Token(1, rng.choice(KINDS), tuple(rng.random() for _ in range(
        features.TOKEN_NUMBERS))) for _ in range(rng.randint(1, 6))]
    reach = any(t.kind in ("nored", "red_ld_sum") for t in chain)
    ratio = 0.3 * sum(1 for t in chain if t.kind == "matmul")
    return FamilyExample("synthetic", [0.0] * features.PROGRAM_NUMBERS, chain,
                         [0.0] * features.NODE_NUMBERS, reach, ratio if reach else math.nan)


def _config(rng: random.Random) -> ConfigExample:
    x = [rng.random() for _ in range(features.CONFIG_NUMBERS)]
    return ConfigExample("synthetic", x, 2 * x[0] - x[1])


def test_the_evaluator_learns_a_known_rule():
    rng = random.Random(0)
    fams = [_family(rng) for _ in range(1500)]
    cfgs = [_config(rng) for _ in range(600)]
    model, report = train(fams, cfgs, epochs=15, seed=0)
    assert report.losses[-1] < report.losses[0]
    held = [_family(rng) for _ in range(300)]
    with torch.no_grad():
        out = model.families(held)
    correct = sum((float(o[0]) > 0) == e.reach for o, e in zip(out, held, strict=True))
    assert correct / len(held) > 0.95
    errors = [abs(float(o[1]) - e.log_ratio) for o, e in zip(out, held, strict=True) if e.reach]
    assert sum(errors) / len(errors) < 0.15
    test = [_config(rng) for _ in range(200)]
    with torch.no_grad():
        pred = model.configs([c.numbers for c in test]).tolist()
    assert sum(abs(p - c.log_ratio) for p, c in zip(pred, test, strict=True)) / 200 < 0.15


def test_weights_save_and_load(tmp_path):
    torch.manual_seed(0)
    model = Evaluator()
    path = tmp_path / "w.pt"
    save(model, path, {"trained_on": ["synthetic"]})
    again, meta = load(path)
    assert meta == {"trained_on": ["synthetic"]}
    rng = random.Random(1)
    fams = [_family(rng) for _ in range(20)]
    with torch.no_grad():
        a, b = model.families(fams), again.families(fams)
    assert torch.allclose(a, b, atol=2e-2)          # stored in half precision
    assert path.stat().st_size < 1_000_000
    order = learned_order(path)
    twin = pickle.loads(pickle.dumps(order))        # as a worker process receives it
    assert isinstance(twin, LearnedOrder) and twin.name == "learned"
    with torch.no_grad():
        assert torch.equal(twin.model.families(fams), order.model.families(fams))


def test_missing_or_foreign_weights_say_how_to_train(tmp_path):
    with pytest.raises(EvaluatorError, match=r"python -m prism\.learn\.train"):
        learned_order(tmp_path / "none.pt")
    bad = tmp_path / "bad.pt"
    bad.write_text("not weights")
    with pytest.raises(PrismError, match=r"python -m prism\.learn\.train"):
        load(bad)
    torch.save({"format": "something else"}, str(tmp_path / "other.pt"))
    with pytest.raises(EvaluatorError, match=r"python -m prism\.learn\.train"):
        load(tmp_path / "other.pt")


def test_the_committed_weights_load_and_never_saw_the_held_out_workloads():
    from prism.learn import WEIGHTS
    from prism.learn.train import HELD_OUT, TRAIN
    order = learned_order()
    assert WEIGHTS.stat().st_size < 1_000_000
    assert order.meta["trained_on"] == [c.label for c in TRAIN]
    assert not {c.workload for c in TRAIN} & {c.workload for c in HELD_OUT}
