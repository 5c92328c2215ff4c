"""The learned evaluator (torch, CPU): a family's chain of decisions rolled forward in a small
latent space, and the two predictions the search and the tuner order their work by.

    h0      = tanh(W_p · program)                             the target, encoded
    h_{t+1} = GRUCell(embed(token_t), h_t)                    one decision at a time
    head(h_T, node) → (logit: a candidate is reachable below, log(best µs / reference µs))

and, for tuning, an MLP from a configuration's numbers (`features.configuration`) to
log(modeled µs / the program's roofline). The search asks for the first two at each node: its
children are the parent's chain plus one decision, so the parent's latent state is rolled once
and each child takes one GRU step (`LearnedOrder.scores`).

Weights are saved with the vocabulary and sizes they were trained with, and the workloads they
were trained on; `load` refuses a file that is missing or does not match (`EvaluatorError`,
saying how to train one). Only this module imports torch.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from prism.errors import PrismError
from prism.learn import features
from prism.learn.data import ConfigExample, FamilyExample
from prism.search.order import Extension, child_family
from prism.search.pruning import Context
from prism.search.state import BlockState, KernelState

FORMAT, VERSION = "prism.learn.evaluator", 1
HIDDEN = 32
# a child's score: predicted log(best / reference) plus the surprise of reaching a candidate
# at all (−log p): unlikely children go late, likely ones by how good they look


class EvaluatorError(PrismError):
    """Evaluator weights that are missing, unreadable or trained for other features."""


class Evaluator(nn.Module):
    def __init__(self, hidden: int = HIDDEN) -> None:
        super().__init__()
        self.hidden = hidden
        self.kind = nn.Embedding(len(features.KINDS) + 1, hidden)   # the last: an unknown op
        self.level = nn.Embedding(len(features.LEVELS), hidden)
        self.numbers = nn.Linear(features.TOKEN_NUMBERS, hidden)
        self.program = nn.Linear(features.PROGRAM_NUMBERS, hidden)
        self.cell = nn.GRUCell(hidden, hidden)
        self.head = nn.Sequential(nn.Linear(hidden + features.NODE_NUMBERS, hidden), nn.ReLU(),
                                  nn.Linear(hidden, 2))
        self.tuning = nn.Sequential(nn.Linear(features.CONFIG_NUMBERS, hidden), nn.ReLU(),
                                    nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    # -- pieces --------------------------------------------------------------------------------

    def embed(self, toks: Sequence[features.Token]) -> torch.Tensor:
        kinds = torch.tensor([_kind_index(t.kind) for t in toks], dtype=torch.long)
        levels = torch.tensor([t.level for t in toks], dtype=torch.long)
        numbers = torch.tensor([t.numbers for t in toks], dtype=torch.float32)
        return self.kind(kinds) + self.level(levels) + self.numbers(numbers)

    def start(self, programs: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.program(programs))

    def roll(self, h: torch.Tensor, chains: Sequence[Sequence[features.Token]]) -> torch.Tensor:
        """`h` (one row per chain) rolled forward over each chain's tokens."""
        longest = max((len(c) for c in chains), default=0)
        if longest == 0:
            return h
        flat = [t for c in chains for t in c]
        emb = self.embed(flat)
        steps = torch.zeros(len(chains), longest, self.hidden)
        mask = torch.zeros(len(chains), longest, 1)
        k = 0
        for i, c in enumerate(chains):
            steps[i, :len(c)] = emb[k:k + len(c)]
            mask[i, :len(c)] = 1.0
            k += len(c)
        for t in range(longest):
            h = mask[:, t] * self.cell(steps[:, t], h) + (1 - mask[:, t]) * h
        return h

    def predict(self, h: torch.Tensor, nodes: torch.Tensor) -> torch.Tensor:
        """(logit of reaching a candidate, log ratio) per row."""
        return self.head(torch.cat([h, nodes], dim=1))

    def families(self, examples: Sequence[FamilyExample]) -> torch.Tensor:
        programs = torch.tensor([e.program for e in examples], dtype=torch.float32)
        nodes = torch.tensor([e.node for e in examples], dtype=torch.float32)
        return self.predict(self.roll(self.start(programs), [e.tokens for e in examples]), nodes)

    def configs(self, numbers: Sequence[Sequence[float]]) -> torch.Tensor:
        return self.tuning(torch.tensor(numbers, dtype=torch.float32)).squeeze(1)


def _kind_index(kind: str) -> int:
    try:
        return features.KINDS.index(kind)
    except ValueError:
        return len(features.KINDS)


def child_score(logit: float, log_ratio: float) -> float:
    """The order's key for a child: how good its best looks, plus the surprise of reaching a
    candidate at all (−log p)."""
    p = 1.0 / (1.0 + math.exp(-logit))
    return log_ratio - math.log(max(p, 1e-6))


# -- training ----------------------------------------------------------------------------------

@dataclass
class TrainReport:
    epochs: int
    families: int
    reach: int
    configs: int
    seconds: float
    losses: list[float] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"epochs": self.epochs, "families": self.families, "reach": self.reach,
                "configs": self.configs, "seconds": round(self.seconds, 1),
                "final_loss": round(self.losses[-1], 4) if self.losses else None}


def train(families: Sequence[FamilyExample], configs: Sequence[ConfigExample], *,
          epochs: int = 12, batch: int = 128, seed: int = 0, lr: float = 3e-3,
          hidden: int = HIDDEN, threads: int = 1) -> tuple[Evaluator, TrainReport]:
    """Fit the evaluator: a weighted cross-entropy for reaching a candidate (the classes
    balanced), a squared error on the log ratio where one is reached, and a squared error on
    each configuration's log ratio. Deterministic for a seed on `threads` CPU threads."""
    import time
    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    rng = random.Random(seed)
    model = Evaluator(hidden)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    positives = sum(1 for e in families if e.reach)
    weight = torch.tensor((len(families) - positives) / max(1, positives))
    report = TrainReport(epochs, len(families), positives, len(configs), 0.0)
    start = time.perf_counter()
    fam_order = list(range(len(families)))
    cfg_order = list(range(len(configs)))
    for _ in range(epochs):
        rng.shuffle(fam_order)
        rng.shuffle(cfg_order)
        total = 0.0
        steps = max(1, math.ceil(len(fam_order) / batch))
        cfg_batch = max(1, math.ceil(len(cfg_order) / steps))
        for s in range(steps):
            chunk = [families[i] for i in fam_order[s * batch:(s + 1) * batch]]
            loss = torch.zeros(())
            if chunk:
                out = model.families(chunk)
                reach = torch.tensor([float(e.reach) for e in chunk])
                loss = loss + nn.functional.binary_cross_entropy_with_logits(
                    out[:, 0], reach, pos_weight=weight)
                if reach.sum() > 0:
                    target = torch.tensor([e.log_ratio if e.reach else 0.0 for e in chunk])
                    loss = loss + ((out[:, 1] - target) ** 2 * reach).sum() / reach.sum()
            cfgs = [configs[i] for i in cfg_order[s * cfg_batch:(s + 1) * cfg_batch]]
            if cfgs:
                pred = model.configs([c.numbers for c in cfgs])
                target = torch.tensor([c.log_ratio for c in cfgs])
                loss = loss + ((pred - target) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += float(loss.detach())
        report.losses.append(total / steps)
    report.seconds = time.perf_counter() - start
    return model, report


# -- weights -----------------------------------------------------------------------------------

def save(model: Evaluator, path: str | Path, meta: dict[str, Any]) -> None:
    torch.save({"format": FORMAT, "version": VERSION, "hidden": model.hidden,
                "kinds": list(features.KINDS), "levels": list(features.LEVELS),
                "sizes": [features.TOKEN_NUMBERS, features.NODE_NUMBERS,
                          features.PROGRAM_NUMBERS, features.CONFIG_NUMBERS],
                "meta": meta, "state": {k: v.detach().clone().half()
                                        for k, v in model.state_dict().items()}}, str(path))


def load(path: str | Path) -> tuple[Evaluator, dict[str, Any]]:
    """The evaluator saved at `path` and what it was trained on; `EvaluatorError` otherwise."""
    fix = ("train one with `python -m prism.learn.train --out PATH` (a few minutes on a CPU), "
           "or use --order analytic")
    p = Path(path)
    if not p.is_file():
        raise EvaluatorError(f"no evaluator weights at {p}; {fix}")
    try:
        doc = torch.load(str(p), map_location="cpu", weights_only=True)
    except Exception as e:          # torch raises several kinds for a file that is not its
        raise EvaluatorError(f"{p} is not a weights file torch can read ({e}); {fix}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or \
            doc.get("version") != VERSION:
        raise EvaluatorError(f"{p} is not {FORMAT} version {VERSION}; {fix}")
    sizes = [features.TOKEN_NUMBERS, features.NODE_NUMBERS, features.PROGRAM_NUMBERS,
             features.CONFIG_NUMBERS]
    if doc["kinds"] != list(features.KINDS) or doc["levels"] != list(features.LEVELS) or \
            doc["sizes"] != sizes:
        raise EvaluatorError(f"{p} was trained for other features (op table or encoding "
                             f"changed since); {fix}")
    model = Evaluator(int(doc["hidden"]))
    model.load_state_dict({k: v.float() for k, v in doc["state"].items()})
    model.eval()
    return model, dict(doc.get("meta", {}))


# -- the orders --------------------------------------------------------------------------------

class LearnedOrder:
    """`prism.search.order.Order` by the evaluator: each child scored by `child_score`; a child
    that cannot be built scores inf (the generator skips it anyway)."""

    name = "learned"

    def __init__(self, model: Evaluator, meta: dict[str, Any] | None = None) -> None:
        self.model = model
        self.meta = meta or {}

    def scores(self, ctx: Context, kernel: KernelState, block: BlockState | None,
               children: Sequence[Extension]) -> list[float]:
        fams = [child_family(kernel, block, ext) for ext in children]
        built = [f for f in fams if f is not None]
        if not built:
            return [math.inf] * len(children)
        prog = torch.tensor([features.program(ctx, kernel)], dtype=torch.float32)
        with torch.no_grad():
            h = self.model.roll(self.model.start(prog), [features.tokens(ctx, kernel, block)])
            last = [features.tokens(ctx, f.kernel, f.block)[-1] for f in built]
            hs = self.model.cell(self.model.embed(last), h.expand(len(built), -1))
            nodes = torch.tensor([features.node(ctx, f.kernel, f.block) for f in built],
                                 dtype=torch.float32)
            out = self.model.predict(hs, nodes).tolist()
        it = iter(out)
        return [math.inf if f is None else child_score(*next(it)) for f in fams]

    def trial_scores(self, configs: Sequence[Any], device: Any) -> list[float]:
        """The tuner's trial order (`tune(order=...)`): the tuning head's score of each
        configuration's concrete program, lower first."""
        return config_scores(self.model, [c.concrete() for c in configs], device)

    def __getstate__(self) -> dict[str, Any]:      # to a worker process: the weights as data
        return {"state": self.model.state_dict(), "hidden": self.model.hidden,
                "meta": self.meta}

    def __setstate__(self, doc: dict[str, Any]) -> None:
        self.model = Evaluator(doc["hidden"])
        self.model.load_state_dict(doc["state"])
        self.model.eval()
        self.meta = doc["meta"]


def config_scores(model: Evaluator, graphs: Sequence[Any], device: Any) -> list[float]:
    """The tuning head's predicted log ratio for each concrete program (lower first)."""
    if not graphs:
        return []
    with torch.no_grad():
        return model.configs([features.configuration(g, device) for g in graphs]).tolist()
