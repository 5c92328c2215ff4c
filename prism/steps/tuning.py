"""Pipeline steps: a proved candidate's sizes assigned, and a configuration measured.

    instantiate   before: the candidate's sGraph (sizes symbolic); action: {"kind":
                  "instantiate", "config": id, "params": {variable: value}}; after: the
                  concrete program; evidence: its modeled latency (kind `modeled`) on the
                  device the tuner screened it for (every field of it), or the model's error
    measure       before = after: the concrete program; action: {"kind": "measure", "config":
                  id, "knobs": {...}}; evidence: the latency with its kind, the device

Both come from the tuner's `Instantiated` and `Measured` events (an `Instantiated` must carry
its device: traces written before it did are skipped, by reason). The input program (candidate
`input`) is the check stage's recorded target.

Replay: `instantiate` substitutes the params again (`prism.ir.spec.substitute_graph`) and
compares with `after`, which must be well-formed (`spec.problems`) and within the device's
limits (`prism.search.audit.within_limits`); its modeled latency is computed again
(`prism.cost.modeled`) and must equal the recorded one exactly. `measure` of kind `modeled` is
recomputed the same way; an `interpreted` or `measured` latency cannot be re-measured here: the
record is checked to be labelled and consistent (a known kind, a positive finite latency or an
error, the device of its instantiation) and is counted as *not re-measured*, never as checked.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from prism.cost.devices import DeviceSpec
from prism.errors import PrismError
from prism.ir.graph import KernelGraph
from prism.ir.text import from_text, to_text
from prism.steps.states import StepError
from prism.trace.events import MEASURE_KINDS, Instantiated, Measured

KNOBS = ("num_warps", "num_stages")     # launch knobs in a Measured's params, not sizes
NOT_REMEASURED = "latency not re-measured (kind {kind}): checked labelled and consistent only"


def device_from_json(doc: dict[str, Any]) -> DeviceSpec:
    """The device an `Instantiated` recorded (`prism.tune.tuner.device_json`)."""
    from prism.ir.dtypes import get_dtype
    try:
        return DeviceSpec(**{k: v for k, v in doc.items() if k != "dtype"},
                          dtype=get_dtype(doc["dtype"]))
    except (KeyError, TypeError) as err:
        raise StepError(f"the recorded device does not read ({err}); export the steps from a "
                        "trace of this version of prism") from None


def concrete(symbolic: KernelGraph, params: dict[str, int]) -> KernelGraph:
    from prism.ir.spec import substitute_graph
    return substitute_graph(symbolic, params) if params else symbolic


def modeled_us(program: KernelGraph, device: DeviceSpec) -> float | None:
    """The modeled latency, or None where the model refuses the program (as the tuner's
    screen then scores it inf)."""
    from prism.cost import modeled
    try:
        return modeled(program, device).latency_us
    except PrismError:
        return None


def latency_json(latency: float) -> float | None:
    return latency if math.isfinite(latency) else None


class Pipeline:
    """The instantiate and measure records of a trace's tuning, as `export` meets its events."""

    def __init__(self, graphs: dict[str, KernelGraph], target: KernelGraph | None):
        self.graphs = graphs        # candidate id → its sGraph (unnamed)
        self.target = target
        self.made: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {}   # → (text, device)
        self.pending: dict[str, tuple[Instantiated, str, str]] = {}   # id → (event, before, after)

    def symbolic(self, candidate: str | None) -> KernelGraph | None:
        if candidate == "input":
            return self.target
        graph = self.graphs.get(candidate or "")
        if graph is not None and self.target is not None:   # the tuner's member takes the
            graph = replace(graph, interface=self.target.interface)   # program's interface
        return graph

    def instantiated(self, e: Instantiated) -> str | None:
        """Remember `e` until its modeled screen; None, or why it cannot be a record."""
        if e.device is None:
            return "instantiation without its device (a trace of an older prism)"
        symbolic = self.symbolic(e.candidate)
        if symbolic is None:
            return "instantiation of a candidate whose graph is not on the trace"
        params = {k: int(v) for k, v in e.params.items()}
        after = to_text(concrete(symbolic, params))
        self.pending[e.id] = (e, to_text(symbolic), after)
        self.made[(str(e.candidate), _params_key(params))] = (after, e.device)
        return None

    def screened(self, e: Measured) -> dict[str, Any] | None:
        """The instantiate record `e` (its modeled screen) completes, as (kind, fields)."""
        found = self.pending.pop(e.id, None)
        if found is None or e.kind != "modeled":
            if found is not None:
                self.pending[e.id] = found
            return None
        inst, before, after = found
        evidence = {"modeled_us": latency_json(e.latency_us), "kind": "modeled",
                    "device": inst.device,
                    **({"error": e.params["error"]} if "error" in e.params else {})}
        return {"source": inst.id, "parent": inst.candidate, "before": before,
                "action": {"kind": "instantiate", "config": inst.id, "params": inst.params},
                "after": after, "evidence": evidence,
                "rationale": {"device": inst.device.get("name") if inst.device else None,
                              "modeled_us": evidence["modeled_us"]}}

    def measured(self, e: Measured) -> dict[str, Any] | str:
        """The measure record of `e`, or why there is none."""
        sizes = {k: int(v) for k, v in e.params.items() if k not in KNOBS and k != "error"}
        made = self.made.get((str(e.candidate), _params_key(sizes)))
        if made is None:
            return "measurement of a configuration not instantiated on the trace"
        text, device = made
        knobs = {k: e.params[k] for k in KNOBS if k in e.params}
        evidence = {"latency_us": latency_json(e.latency_us), "kind": e.kind,
                    "device": device, "measured_on": e.device,
                    **({"error": e.params["error"]} if "error" in e.params else {})}
        return {"source": e.id, "parent": e.candidate, "before": text,
                "action": {"kind": "measure", "config": e.id, "knobs": knobs}, "after": text,
                "evidence": evidence,
                "rationale": {"kind": e.kind, "latency_us": evidence["latency_us"],
                              "failed": "error" in e.params}}


def _params_key(params: dict[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(params.items()))


# -- replay -----------------------------------------------------------------------------------

def check_instantiate(r: dict[str, Any]) -> str | None:
    from prism.ir.spec import problems
    from prism.search.audit import within_limits
    action, ev = r["action"], r.get("evidence", {})
    params = action.get("params")
    if not isinstance(params, dict) or not all(isinstance(v, int) for v in params.values()):
        return f"the action's params {params!r} are no assignment of sizes to integers"
    symbolic = from_text(r["before"])
    unknown = sorted(set(params) - symbolic.free_vars())
    if unknown:
        return f"the params assign {unknown}, which the candidate does not have"
    program = concrete(symbolic, params)
    got = to_text(program)
    if got != r.get("after"):
        from prism.steps.check import diff
        return f"the assignment gives another program: {diff(got, str(r.get('after')))}"
    if program.free_vars():
        return f"the program still has symbolic sizes {sorted(program.free_vars())}"
    wrong = problems(program)
    if wrong:
        return f"the program is not well-formed (prism.ir.spec): {wrong[0]}"
    device = device_from_json(ev.get("device") or {})
    if not within_limits(program, {}, device):
        return f"the program does not fit {device.name}'s limits (blocks, shared memory, " \
               "matmul tiles)"
    return _same_latency(program, device, ev.get("modeled_us"), ev.get("kind"))


def check_measure(r: dict[str, Any]) -> tuple[str | None, str | None]:
    """(what fails or None, what was not re-checked or None)."""
    action, ev = r["action"], r.get("evidence", {})
    if r.get("after") != r["before"]:
        return "a measurement changes no program, but the record's after differs", None
    kind, latency = ev.get("kind"), ev.get("latency_us")
    if kind not in MEASURE_KINDS:
        return f"the latency's kind is {kind!r}, not one of {', '.join(MEASURE_KINDS)}", None
    if latency is None and "error" not in ev:
        return "no latency and no error: an unlabelled failure", None
    if latency is not None and (not isinstance(latency, int | float) or
                                not math.isfinite(latency) or latency <= 0):
        return f"the latency {latency!r} is no positive finite number of µs", None
    device = device_from_json(ev.get("device") or {})
    if ev.get("measured_on") not in (None, device.name):
        return f"measured on {ev.get('measured_on')}, instantiated for {device.name}", None
    if not isinstance(action.get("knobs", {}), dict):
        return "the action's knobs are not an object", None
    if kind != "modeled":
        return None, NOT_REMEASURED.format(kind=kind)
    # a refused program (an error, no latency) must be refused again
    return _same_latency(from_text(r["before"]), device, latency, kind), None


def _same_latency(program: KernelGraph, device: DeviceSpec, recorded: Any, kind: Any
                  ) -> str | None:
    if kind != "modeled":
        return f"the latency's kind is {kind!r}: an instantiation's evidence is modeled"
    got = modeled_us(program, device)
    if got is None or recorded is None:
        return None if got is recorded else \
            f"the model gives {got!r} µs on {device.name}, the record {recorded!r}"
    if got != recorded:
        return f"the model gives {got!r} µs on {device.name}, the record {recorded!r}"
    return None
