"""Advice: what an advisor (a heuristic, a person, an LLM) may say about a region before the
engine optimizes it, and the only things it can change.

    def my_advisor(summary: str) -> prism.Advice:     # summary: the region as text
        return prism.Advice(label="norm + matmul", params={"gx": (64,)})
    prism.compile(model, advisor=my_advisor)
    prism.superoptimize("rmsnorm_matmul", advice=prism.Advice(block_ops=("matmul", "div")))

An advisor is any callable from a region's summary (`summary_text`: its program in the text form
of `prism.ir.text`, its shapes and dtype, its modeled eager time and roofline bound) to an
`Advice` (or a mapping of its fields, as an LLM's JSON would give). Advice can only **reorder or
narrow** the engine's queues:

- `skip`: leave the region as the graph had it (torch runs it; `prism.compile` only);
- `priority`: the order `prism.compile` optimizes a graph's regions in (higher first);
- `block_ops`, `max_block_ops`: a smaller search space (the intersection with what the engine
  would search; an op the engine would not search is ignored, and the log says so);
- `params`: parameter hints (a size variable → values): tuning measures the configurations that
  take the hinted values first (they join the finalists), then the rest in the model's order;
- `kernels`: prefer candidates of this many kernels in the same way;
- `label` and `risks`: words for the report and the views, nothing more.

It never bypasses verification or the final check: every candidate is still proved and the
winner still checked against torch, and the winner is still the best by measured (or modeled)
latency among the finalists. What was advised and what it did are logged (`Advised.to_json`: the
`advice` stage of the trace, and the compile report).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from prism.errors import PrismError

Advisor = Callable[[str], Any]      # a region's summary text → Advice or a mapping of its fields


class AdviceError(PrismError):
    """Advice that does not follow the schema (names the field and what it takes)."""


@dataclass(frozen=True)
class Advice:
    label: str = ""                                  # what the region is, in words
    priority: float = 0.0                            # prism.compile: higher is optimized first
    skip: bool = False                               # prism.compile: leave it to torch
    block_ops: tuple[str, ...] | None = None         # narrow the block vocabulary
    max_block_ops: int | None = None                 # narrow the block-op cap
    params: Mapping[str, tuple[int, ...]] = field(default_factory=dict)  # tuning hints
    kernels: int | None = None                       # prefer candidates of this many kernels
    risks: tuple[str, ...] = ()                      # notes for a reader
    source: str = "user"                             # who gave it: heuristic | user | ...

    @classmethod
    def of(cls, given: Any, source: str = "user") -> Advice:
        """`given` (an Advice, a mapping of its fields, or None) checked against the schema."""
        if given is None:
            return cls(source=source)
        if isinstance(given, Advice):
            return given
        if not isinstance(given, Mapping):
            raise AdviceError(f"advice is a {type(given).__name__}; an advisor returns a "
                              "prism.Advice or a mapping of its fields (label, priority, skip, "
                              "block_ops, max_block_ops, params, kernels, risks)")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(given) - known)
        if unknown:
            raise AdviceError(f"advice has fields {', '.join(unknown)}, which the schema does "
                              f"not have; it takes {', '.join(sorted(known))}")
        try:
            return cls(
                label=str(given.get("label", "")),
                priority=float(given.get("priority", 0.0)),
                skip=_bool(given.get("skip", False), "skip"),
                block_ops=(tuple(str(o) for o in given["block_ops"])
                           if given.get("block_ops") is not None else None),
                max_block_ops=(_positive(given["max_block_ops"], "max_block_ops")
                               if given.get("max_block_ops") is not None else None),
                params={str(k): tuple(_positive(v, f"params[{k!r}]") for v in
                                      (vs if isinstance(vs, Sequence) else [vs]))
                        for k, vs in dict(given.get("params") or {}).items()},
                kernels=(_positive(given["kernels"], "kernels")
                         if given.get("kernels") is not None else None),
                risks=tuple(str(r) for r in given.get("risks") or ()),
                source=str(given.get("source", source)))
        except (TypeError, ValueError) as e:
            raise AdviceError(f"advice does not follow the schema: {e}") from None

    def to_json(self) -> dict[str, Any]:
        doc = asdict(self)
        doc["params"] = {k: list(v) for k, v in self.params.items()}
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in doc.items()
                if v not in (None, (), {}, "") or k in ("priority", "skip", "source")}

    @property
    def empty(self) -> bool:
        """Nothing that changes a queue."""
        return not (self.skip or self.block_ops is not None or self.max_block_ops is not None
                    or self.params or self.kernels is not None)

    def narrow(self, config: Any) -> tuple[Any, list[str]]:
        """`config` (a SearchConfig) narrowed by this advice, and what changed, in words."""
        from dataclasses import replace
        said: list[str] = []
        if self.block_ops is not None:
            kept = tuple(o for o in config.block_ops if o in self.block_ops)
            ignored = sorted(set(self.block_ops) - set(config.block_ops))
            said.append(f"block ops narrowed from {len(config.block_ops)} to {len(kept)}"
                        + (f" ({', '.join(ignored)} ignored: not in the engine's vocabulary "
                           "here; advice only narrows)" if ignored else ""))
            config = replace(config, block_ops=kept)
        if self.max_block_ops is not None and self.max_block_ops < config.max_block_ops:
            said.append(f"block-op cap narrowed from {config.max_block_ops} to "
                        f"{self.max_block_ops}")
            config = replace(config, max_block_ops=self.max_block_ops)
        return config, said

    def prefers(self, config: Any) -> bool:
        """Whether a tuning configuration takes the hinted values (and kernel count)."""
        params = dict(config.params)
        if any(params.get(k) not in vs for k, vs in self.params.items() if k in params):
            return False
        if not any(k in params for k in self.params) and self.params:
            return False
        return self.kernels is None or config.graph.num_kernels == self.kernels


def _bool(v: Any, name: str) -> bool:
    if not isinstance(v, bool):
        raise TypeError(f"{name} takes true or false, got {v!r}")
    return v


def _positive(v: Any, name: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise TypeError(f"{name} takes a positive whole number, got {v!r}")
    return v


@dataclass
class Advised:
    """What an advisor said of one region and what it did: the log entry."""

    advice: Advice
    effects: list[str] = field(default_factory=list)   # what changed in the queues
    outcome: str = ""                                  # what came of the region

    def to_json(self) -> dict[str, Any]:
        return {"advice": self.advice.to_json(), "effects": self.effects,
                "outcome": self.outcome}


def summary_text(graph: Any, dtype: str, device: Any) -> str:
    """A region as an advisor reads it: its program (`prism.ir.text`), shapes, dtype, and its
    modeled eager time and roofline bound on `device` (both `modeled`)."""
    from prism.cost import eager_us, roofline_us
    from prism.ir.text import to_text
    return (f"# dtype {dtype}; on {device.name}: eager {eager_us(graph, device):.2f} us, "
            f"roofline bound {roofline_us(graph, device):.2f} us (both modeled)\n"
            + to_text(graph))


def ask(advisor: Advisor | None, graph: Any, dtype: str, device: Any) -> Advice:
    """The advisor's advice on `graph` (none: empty advice), checked against the schema. An
    advisor that raises is an error that names it: advice is optional, a broken advisor is
    not silently ignored."""
    if advisor is None:
        return Advice(source="none")
    source = "heuristic" if advisor is heuristic else getattr(advisor, "__name__", "user")
    try:
        given = advisor(summary_text(graph, dtype, device))
    except PrismError:
        raise
    except Exception as e:
        raise AdviceError(f"the advisor {source} raised {type(e).__name__}: {e}; fix it or "
                          "pass advisor=None") from e
    return Advice.of(given, source)


SKIP_SHARE = 0.05     # the heuristic skips a region that fusion could speed up by less than 5%

# what each op is, for the heuristic's labels
_KINDS = {"rms_norm": "norm", "rms": "norm", "mean": "norm", "matmul": "matmul",
          "exp": "softmax", "max": "softmax", "sum": "reduction", "silu": "activation",
          "gelu": "activation", "relu": "activation", "sigmoid": "activation"}


def heuristic(summary: str) -> Advice:
    """The default advisor, from the summary text alone: a label from the ops; priority by
    the modeled time fusion could save at most (eager − roofline bound); skip a region where
    that is under SKIP_SHARE of its eager time (one large op with a small epilogue: a search
    cannot pay for itself there); a risk note for an exp whose input is not max-subtracted in
    the program (fp16 overflows above about 11)."""
    import re
    head = summary.splitlines()[0] if summary else ""
    m = re.search(r"eager ([0-9.]+) us, roofline bound ([0-9.]+) us", head)
    eager, bound = (float(m.group(1)), float(m.group(2))) if m else (0.0, 0.0)
    ops = re.findall(r"= ([a-z_0-9]+)\(", summary)
    kinds = sorted({_KINDS[o] for o in ops if o in _KINDS})
    risks = []
    if "exp" in ops and "max" not in ops:
        risks.append("exp of values that are not max-subtracted: fp16 overflows above ~11")
    saving = eager - bound
    return Advice(label=" + ".join(kinds) or "elementwise", priority=round(saving, 3),
                  skip=m is not None and saving < SKIP_SHARE * eager,
                  risks=tuple(risks), source="heuristic")
