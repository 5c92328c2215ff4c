"""What `prism optimize --out DIR` writes: the kernel module, its PTX, the result JSON and a
self-contained HTML report (the table of latencies, each with its kind, the sGraph picture, the
proof, the tuning plot, the search). The trace (`trace.jsonl.gz`) is written as events happen.

The report (`page`) is made from the run's events alone, so `widgets.Workbench.save_html` gives
the same page for a live or replayed run. It is static HTML with inline SVG: it opens without a
running kernel, a network or a script.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prism.instantiate.triton_backend import strip_locations
from prism.ir.dtypes import get_dtype
from prism.ir.graph import KernelGraph
from prism.pipeline import INPUT_PROGRAM, Check
from prism.trace import (
    TRACE_FILE,
    CandidateVerified,
    Event,
    FamilyGenerated,
    FamilyPruned,
    Measured,
    SearchFinished,
    StageFinished,
)

if TYPE_CHECKING:
    from prism.pipeline import OptimizeResult


def write_outputs(result: OptimizeResult, folder: Path,
                  final: Callable[[Path], Path] | None = None) -> dict[str, str]:
    """Write the files into `folder`; the paths returned are where `final` says each will be
    (the output folder once `prism.outputs.OutputFolder` has moved it into place)."""
    files = {"kernel": folder / "kernel.py", "ptx": folder / "kernel.ptx",
             "trace": folder / TRACE_FILE, "report": folder / "report.html",
             "result": folder / "result.json"}
    best = result.best
    if best is not None:
        carried = [s.best.triton_source for s in result.shapes if s.carried and s.best]
        if carried:                     # also_at's shapes: one module, dispatching on shapes
            from prism.instantiate.bundle import bundle
            files["kernel"].write_text(bundle([best.triton_source, *carried]))
        else:
            files["kernel"].write_text(best.triton_source)
        if (folder / "checkpoint.json").exists():   # the one also_at's shapes were served from
            files["checkpoint"] = folder / "checkpoint.json"
        if best.ptx:
            more = [s.best.ptx if s.best else {} for s in result.shapes if s.carried]
            files["ptx"].write_text(ptx_text(best.ptx) + "".join(
                f"\n// ---- shapes {i}: kernel.py's _s{i} kernels\n" + ptx_text(ptx)
                for i, ptx in enumerate(more, 1) if ptx))
        elif best.graph.custom_ops:     # superoptimize(..., compile_ptx=False) skipped it
            files["ptx"].write_text("// not compiled: this run skipped PTX (compile_ptx=False); "
                                    "kernel.py holds the Triton kernel(s)\n")
        else:
            files["ptx"].write_text("// no Triton kernel: every op of this program runs as a "
                                    "pre-defined torch op\n")
    else:
        for key in ("kernel", "ptx"):
            files.pop(key)
    files["report"].write_text(page(result.trace, result.target))
    return {k: str(final(v) if final else v) for k, v in files.items()}


def ptx_text(ptx: dict[str, str]) -> str:
    """A winner's PTX as `kernel.ptx` holds it: each kernel under its name, locations stripped."""
    return "\n".join(f"// kernel {name} (sm_90)\n{strip_locations(p)}" for name, p in ptx.items())


def write_result_json(result: OptimizeResult, folder: Path) -> None:
    (folder / "result.json").write_text(json.dumps(result.to_json(), indent=2))


def result_rows(summary: dict[str, Any]) -> list[tuple[str, float, str]]:
    """(what, µs, kind) rows from the check stage's summary (`pipeline.best_summary`): the
    winner (and its modeled latency when another kind measured it), the program's roofline bound
    and its eager baseline. The CLI's table and the page's both read them."""
    rows = []
    if summary.get("best"):
        kernels = summary.get("kernels_text", f"{summary['num_kernels']} kernel(s)")
        rows.append((f"best: {summary['best']} ({kernels})",
                     summary["latency_us"], summary["latency_kind"]))
        if summary["latency_kind"] != "modeled":
            rows.append(("best, by the cost model", summary["modeled_us"], "modeled"))
    rows += [("roofline bound of the program", summary["roofline_us"], "modeled"),
             ("eager (one kernel per operator)", summary["eager_us"], "modeled")]
    return rows


def check_text(check: Check | Mapping[str, Any] | None) -> str:
    """The winner's check in words: `passed` only for a check that ran and passed."""
    c = check if isinstance(check, Check) else Check.from_json(check)
    if c.status == "not run":
        return f"not run ({c.reason})"
    if c.status == "failed":
        return f"FAILED: {c.reason}"
    where = c.instance or "the winning kernel itself"
    err = c.max_rel_err_vs_interpreter if c.max_rel_err_vs_torch is None else \
        c.max_rel_err_vs_torch
    against = "the float64 interpreter" if c.max_rel_err_vs_torch is None else "torch"
    measured = f": max relative error {err:.1e} against {against}" if err is not None else ""
    # a check recorded before dtypes ran in fp16
    tolerance = get_dtype(c.dtype or "float16").tolerance_text
    return (f"passed in the {c.where} on {where}{measured} ({tolerance}), outputs "
            "poisoned with NaN first")


def page(events: Sequence[Event], title: str | None = None) -> str:
    """The static page of a run, from its events alone, so that the same page comes from a
    finished `superoptimize` and from a replayed trace (`widgets.Workbench.save_html`): the
    winner with its latency, roofline and eager (each with its kind), its sGraph picture, its
    proof, the tuning plot, and the search's counts with an example of each rule's reason."""
    check = next((e.summary for e in events if isinstance(e, StageFinished)
                  and e.stage == "check" and e.summary.get("best")), None)
    searches = [e.summary for e in events if isinstance(e, SearchFinished)]
    search = searches[0] if searches else None
    device = next((e.device for e in events if isinstance(e, Measured) and e.device), None)
    name = title or (search or {}).get("target") or "a run"
    heading = f"Prism Workbench: {name}" + (f" on {device}" if device else "")
    parts = [f"<h1>{_e(heading)}</h1>", _result(check), _picture(check),
             _proof(check, events), _plot(events, check),
             *(_search(s, events, _is_partial(events, searches, k))
               for k, s in enumerate(searches))]
    return ("<!doctype html><html><head><meta charset='utf-8'><title>Prism: "
            f"{_e(name)}</title><style>{_CSS}</style></head><body>"
            + "\n".join(parts) + "</body></html>")


_CSS = ("body{font-family:system-ui,sans-serif;margin:2em;max-width:1100px}"
        "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 8px;"
        "text-align:left}code,pre{font-size:12px}.kind{color:#555;font-style:italic}"
        "ol li{margin-bottom:6px}")


def _e(text: Any) -> str:
    return html.escape(str(text))


def _result(check: dict[str, Any] | None) -> str:
    if check is None:
        return "<h2>Result</h2><p><b>No kernel came out of this run</b> (or it has not ended).</p>"
    body = "".join(f"<tr><td>{_e(w)}</td><td>{v:.2f} µs</td><td class='kind'>{_e(k)}</td></tr>"
                   for w, v, k in result_rows(check))
    return ("<h2>Result</h2><table><tr><th>what</th><th>latency</th><th>kind</th></tr>"
            f"{body}</table><p>Modeled speed-up over eager: "
            f"<b>{check['eager_us'] / check['modeled_us']:.2f}×</b>; modeled latency / roofline: "
            f"{check['modeled_us'] / check['roofline_us']:.2f}×. Parameters: "
            f"<code>{_e(check['params'])}</code>.</p>"
            f"<p>Check: {_e(check_text(check.get('check') or {}))}</p>{_outside(check)}")


def _outside(check: dict[str, Any]) -> str:
    """The ops the winner runs as pre-defined kernels, outside its custom kernels, and why."""
    outside = check.get("outside") or []
    if not outside:
        return ""
    ops = ", ".join(f"<code>{_e(o['op'])}</code> ({_e(o['tensor'])})" for o in outside)
    return f"<p>Outside custom kernels: {ops}. Why: {_e(outside[0]['why'])}.</p>"


def _picture(check: dict[str, Any] | None) -> str:
    if check is None:
        return ""
    try:
        from prism.ir.render import to_svg
        svg = to_svg(KernelGraph.from_json(check["graph"]))
    except Exception as e:  # graphviz missing or failing: the page still has everything else
        return f"<h2>The kernel graph</h2><p>(no picture: {_e(e)})</p>"
    return f"<h2>The kernel graph (sGraph member)</h2>{svg}"


def _proof(check: dict[str, Any] | None, events: Sequence[Event]) -> str:
    if check is None:
        return ""
    if check.get("candidate") == INPUT_PROGRAM:
        return ("<h2>Equivalence</h2><p>The best kernel is the input program itself "
                "(equivalent by identity).</p>")
    proved = next((e for e in events if isinstance(e, CandidateVerified)
                   and e.id == check.get("candidate")), None)
    if proved is None:
        return (f"<h2>Equivalence</h2><p><b>Unknown</b>: no proof of {_e(check.get('candidate'))}"
                " is on this trace, so this page cannot show that it is equivalent.</p>")
    doc = proved.proof if isinstance(proved.proof, dict) else {"proof": proved.proof}
    items = []
    for k, steps in enumerate(doc.get("proof") or []):
        lines = "".join(
            f"<li><b>{_e(s['axiom'])}</b> ({_e(s['direction'])}): <code>{_e(s['rewrote'])}"
            f"</code> → <code>{_e(s['into'])}</code><br><span class='kind'>"
            f"{_e(s['statement'])} — {_e(s['evidence'])}</span></li>" for s in steps)
        items.append(f"<h3>output {k}</h3><ol>{lines}</ol>")
    return (f"<h2>Equivalence proof</h2><p>{_e(doc.get('verdict', 'equivalent'))} by "
            f"{_e(doc.get('method', proved.method))}, {doc.get('proof_steps', 0)} rewrite "
            f"steps, {_e(doc.get('sizes') or 'concrete')} sizes.</p>" + "".join(items))


def _plot(events: Sequence[Event], check: dict[str, Any] | None) -> str:
    measured = [e for e in events if isinstance(e, Measured)]
    if not measured:
        return ""
    bounds = [] if check is None else [(check["roofline_us"], "roofline bound"),
                                       (check["eager_us"], "eager")]
    failed = [e for e in measured if not math.isfinite(e.latency_us)]
    rows = "".join(f"<tr><td>{_e(e.id)}</td><td class='kind'>{_e(e.kind)}</td><td>"
                   f"{_e(e.params.get('error', ''))}</td></tr>" for e in failed)
    table = (f"<table><tr><th>failed configuration</th><th>kind</th><th>error</th></tr>{rows}"
             "</table>") if failed else "<p>No configuration failed.</p>"
    tune = next((e.summary for e in events if isinstance(e, StageFinished)
                 and e.stage == "tune"), {})
    if tune.get("not_measured"):        # tuning stopped before them: not failures
        table += (f"<p>{tune['not_measured']} finalist(s) not measured: tuning stopped "
                  f"({_e(tune.get('stopped', '?'))}).</p>")
    return "<h2>Tuning</h2>" + tuning_svg(measured, bounds) + table + _database(events)


def _database(events: Sequence[Event]) -> str:
    """The result database's counts from the tune stage: records read, and the bad ones
    skipped (each a reason), so an edited or damaged cache never passes unseen."""
    db = next((e.summary.get("database") for e in events if isinstance(e, StageFinished)
               and e.stage == "tune" and e.summary.get("database")), None)
    if db is None:
        return ""
    problems = "".join(f"<li>{_e(p)}</li>" for p in db.get("problems", []))
    return (f"<p>Result database <code>{_e(db['path'])}</code>: {db['records']} record(s) "
            f"read, <b>{db['skipped']} bad record(s) skipped</b>, {db.get('write_failures', 0)} "
            f"write(s) failed.</p>" + (f"<ul>{problems}</ul>" if problems else ""))


_KIND_COLOURS = {"modeled": "#1f77b4", "interpreted": "#d62728", "measured": "#2ca02c"}
_W, _H, _LEFT, _BOTTOM = 760, 320, 64, 40


def tuning_svg(measured: Sequence[Measured], bounds: Sequence[tuple[float, str]]) -> str:
    """Every measurement as a point (x: its place in the run, y: latency on a log scale, colour:
    its kind, hover: config and number), a best-so-far line per kind and the modeled bounds as
    dashed lines — a static SVG, so the engine needs no plotting library and the page no script."""
    finite = [(i, e) for i, e in enumerate(measured) if math.isfinite(e.latency_us)]
    values = sorted(e.latency_us for _, e in finite) or [1.0]
    top = max([values[-1], *(y for y, _ in bounds)]) * 1.5     # log scale: every kind fits
    low = min([values[0], *(y for y, _ in bounds)]) / 1.5
    lo, hi = math.log10(low), math.log10(top)
    span = max(1, len(measured) - 1)

    def x(i: float) -> float:
        return _LEFT + (_W - _LEFT - 10) * i / span

    def y(v: float) -> float:
        v = min(max(v, low), top)                        # off-scale points sit on the edge
        return 10 + (_H - _BOTTOM - 10) * (hi - math.log10(v)) / (hi - lo)

    out = [f"<svg class='prism-tuning' xmlns='http://www.w3.org/2000/svg' width='{_W}' "
           f"height='{_H}' font-family='sans-serif' font-size='11'>",
           f"<line x1='{_LEFT}' y1='{_H - _BOTTOM}' x2='{_W - 10}' y2='{_H - _BOTTOM}' "
           "stroke='#888'/>",
           f"<line x1='{_LEFT}' y1='10' x2='{_LEFT}' y2='{_H - _BOTTOM}' stroke='#888'/>",
           f"<text x='{_W / 2}' y='{_H - 8}' text-anchor='middle'>measurement</text>",
           f"<text x='12' y='{_H / 2}' transform='rotate(-90 12 {_H / 2})' "
           "text-anchor='middle'>latency (µs, log)</text>"]
    ticks = [m * 10.0 ** k for k in range(math.floor(lo), math.ceil(hi) + 1) for m in (1, 2, 5)]
    ticks = [t for t in ticks if low <= t <= top]
    if len([t for t in ticks if math.log10(t).is_integer()]) >= 3:
        ticks = [t for t in ticks if math.log10(t).is_integer()]   # decades suffice
    for t in ticks:
        out.append(f"<text x='{_LEFT - 6}' y='{y(t) + 4:.1f}' text-anchor='end'>{t:g}</text>")
    for v, label in bounds:
        out.append(f"<line x1='{_LEFT}' y1='{y(v):.1f}' x2='{_W - 10}' y2='{y(v):.1f}' "
                   "stroke='#444' stroke-dasharray='5,4'/>"
                   f"<text x='{_W - 12}' y='{y(v) - 4:.1f}' text-anchor='end'>"
                   f"{_e(label)} {v:.2f} µs (modeled)</text>")
    for n, kind in enumerate(sorted({e.kind for _, e in finite})):
        colour = _KIND_COLOURS.get(kind, "#555")
        mine = [(i, e) for i, e in finite if e.kind == kind]
        best, curve = math.inf, []
        for i, e in mine:
            best = min(best, e.latency_us)
            curve.append(f"{x(i):.1f},{y(best):.1f}")
        out.append(f"<polyline class='best' fill='none' stroke='{colour}' "
                   f"points='{' '.join(curve)}'/>")
        out += [f"<circle class='point' cx='{x(i):.1f}' cy='{y(e.latency_us):.1f}' r='3' "
                f"fill='{colour}'><title>{_e(e.id)}: {e.latency_us:.4g} µs ({_e(kind)})"
                "</title></circle>" for i, e in mine]
        out.append(f"<text x='{_LEFT + 10}' y='{24 + 14 * n}' fill='{colour}'>● {_e(kind)} "
                   "(line: best so far)</text>")
    out.append("</svg>")
    return "".join(out)


def _is_partial(events: Sequence[Event], searches: Sequence[Any], k: int) -> bool:
    """Whether search `k` of the run is the partial-fusion search (family ids `pf…`): the
    second of two, or the only one when the fusion search could not run."""
    return k == 1 or (len(searches) == 1 and any(
        isinstance(e, FamilyPruned | FamilyGenerated) and e.id.startswith("pf") for e in events))


def _search(search: dict[str, Any], events: Sequence[Event], partial: bool = False) -> str:
    """A search's counts and an example of each rule's reason; `partial`: the partial-fusion
    search's, whose family ids start with `pf`."""
    fam = search["families"]
    rows = "".join(f"<tr><td>{_e(rule)}</td><td>{n}</td></tr>"
                   for rule, n in fam["pruned"].items())
    examples: dict[str, FamilyPruned] = {}
    for e in events:
        if isinstance(e, FamilyPruned) and e.id.startswith("pf") == partial:
            examples.setdefault(e.rule, e)
    listed = "".join(f"<li><b>{_e(rule)}</b> {_e(e.id)}: {_e(e.reason)}</li>"
                     for rule, e in examples.items())
    state = "complete" if search.get("complete") else f"stopped: {search.get('stop_reason')}"
    title = "Partial-fusion search (pre-defined kernel ops allowed)" if partial else "Search"
    return (f"<h2>{title}</h2><p>{fam['generated']} families generated, {fam['kept']} kept, "
            f"{fam.get('complete', 0)} complete; verdicts {_e(search.get('verdicts', {}))}; "
            f"{_e(state)}</p><table><tr><th>rule</th><th>pruned</th></tr>{rows}</table><ul>{listed}</ul>")
