"""What `prism optimize --out DIR` writes: the kernel module, its PTX, the result JSON and a
self-contained HTML report (the sGraph picture, the proof, the tuning plot and the table of
latencies, each with its kind). The trace (`trace.jsonl`) is written as events happen.

The report is static HTML: it opens without a running kernel or a network (plotly's script is
embedded).
"""

from __future__ import annotations

import html
import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prism.instantiate.triton_backend import strip_locations

if TYPE_CHECKING:
    from prism.pipeline import OptimizeResult


def write_outputs(result: OptimizeResult, folder: Path) -> dict[str, str]:
    files = {"kernel": folder / "kernel.py", "ptx": folder / "kernel.ptx",
             "trace": folder / "trace.jsonl", "report": folder / "report.html",
             "result": folder / "result.json"}
    best = result.best
    if best is not None:
        files["kernel"].write_text(best.triton_source)
        if best.ptx:
            files["ptx"].write_text("\n".join(f"// kernel {name} (sm_90)\n{strip_locations(p)}"
                                              for name, p in best.ptx.items()))
        else:
            files["ptx"].write_text("// no Triton kernel: every op of this program runs as a "
                                    "pre-defined torch op\n")
    else:
        for key in ("kernel", "ptx"):
            files.pop(key)
    files["report"].write_text(report_html(result))
    return {k: str(v) for k, v in files.items()}


def write_result_json(result: OptimizeResult, folder: Path) -> None:
    (folder / "result.json").write_text(json.dumps(result.to_json(), indent=2))


def table_rows(result: OptimizeResult) -> list[tuple[str, str, str]]:
    """(what, latency, kind) rows: the best kernel, its roofline bound, the eager baseline."""
    rows = []
    b = result.best
    if b is not None:
        rows.append((f"best: {b.config} ({b.num_kernels} kernel(s))",
                     f"{b.latency_us:.2f} µs", b.latency_kind))
        if b.latency_kind != "modeled":
            rows.append(("best, by the cost model", f"{b.modeled_us:.2f} µs", "modeled"))
    rows.append(("roofline bound of the program", f"{result.roofline_us:.2f} µs", "modeled"))
    rows.append(("eager (one kernel per operator)", f"{result.eager_us:.2f} µs", "modeled"))
    return rows


def check_text(check: dict[str, Any]) -> str:
    """The winner's check in words."""
    if not check.get("checked"):
        return f"not run: {check.get('reason', '')}"
    if not check.get("passed"):
        return f"FAILED: {check.get('error', check)}"
    where = check.get("instance", "the winning kernel itself")
    err = check.get("max_rel_err_vs_torch", check.get("max_rel_err_vs_interpreter"))
    against = "torch" if "max_rel_err_vs_torch" in check else "the float64 interpreter"
    return (f"passed in the {check.get('where')} on {where}: max relative error {err:.1e} "
            f"against {against} (fp16 tolerance 2e-2), outputs poisoned with NaN first")


def report_html(result: OptimizeResult) -> str:
    parts = [f"<h1>Prism Workbench: {_e(result.target)} on {_e(result.device)}</h1>",
             _table(result), _picture(result), _proof(result), _plot(result), _search(result)]
    return ("<!doctype html><html><head><meta charset='utf-8'><title>Prism: "
            f"{_e(result.target)}</title><style>{_CSS}</style></head><body>"
            + "\n".join(parts) + "</body></html>")


_CSS = ("body{font-family:system-ui,sans-serif;margin:2em;max-width:1100px}"
        "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 8px;"
        "text-align:left}code,pre{font-size:12px}.kind{color:#555;font-style:italic}"
        "ol li{margin-bottom:6px}")


def _e(text: Any) -> str:
    return html.escape(str(text))


def _table(result: OptimizeResult) -> str:
    rows = "".join(f"<tr><td>{_e(w)}</td><td>{_e(v)}</td><td class='kind'>{_e(k)}</td></tr>"
                   for w, v, k in table_rows(result))
    extra = ""
    if result.best is not None:
        speed = result.eager_us / result.best.modeled_us
        extra = (f"<p>Modeled speed-up over eager: <b>{speed:.2f}×</b>; modeled latency / "
                 f"roofline: {result.best.modeled_us / result.roofline_us:.2f}×. Parameters: "
                 f"<code>{_e(result.best.params)}</code>.</p><p>Check: "
                 f"{_e(check_text(result.best.check))}</p>")
    else:
        extra = "<p><b>No kernel came out of tuning</b>; see the trials below.</p>"
    return f"<h2>Result</h2><table><tr><th>what</th><th>latency</th><th>kind</th></tr>" \
           f"{rows}</table>{extra}"


def _picture(result: OptimizeResult) -> str:
    if result.best is None:
        return ""
    try:
        from prism.ir.render import to_svg
        svg = to_svg(result.best.graph)
    except Exception as e:  # graphviz missing or failing: the report still has everything else
        return f"<h2>sGraph</h2><p>(no picture: {_e(e)})</p>"
    return f"<h2>The kernel graph (sGraph member)</h2>{svg}"


def _proof(result: OptimizeResult) -> str:
    best = result.best
    if best is None:
        return ""
    if best.verdict is None:
        return ("<h2>Equivalence</h2><p>The best kernel is the input program itself "
                "(equivalent by identity).</p>")
    v = best.verdict
    from prism.verify.equiv import step_json
    items = []
    for k, proof in enumerate(v.steps):
        steps = "".join(
            f"<li><b>{_e(s['axiom'])}</b> ({_e(s['direction'])}): <code>{_e(s['rewrote'])}"
            f"</code> → <code>{_e(s['into'])}</code><br><span class='kind'>"
            f"{_e(s['statement'])} — {_e(s['evidence'])}</span></li>"
            for s in map(step_json, proof))
        items.append(f"<h3>output {k}</h3><ol>{steps}</ol>")
    return (f"<h2>Equivalence proof</h2><p>{_e(v.verdict)} by {_e(v.method)}, "
            f"{v.proof_steps} rewrite steps, {_e(v.sizes or 'concrete')} sizes.</p>"
            + "".join(items))


def _plot(result: OptimizeResult) -> str:
    if result.tuning is None:
        return ""
    import plotly.graph_objects as go
    fig = go.Figure()
    screened = [t for t in result.tuning.screened if math.isfinite(t.modeled_us)]
    fig.add_trace(go.Scatter(x=list(range(len(screened))), y=[t.modeled_us for t in screened],
                             mode="markers", name="configuration (modeled)",
                             text=[t.config.id for t in screened]))
    best, curve = math.inf, []
    for t in screened:
        best = min(best, t.modeled_us)
        curve.append(best)
    fig.add_trace(go.Scatter(x=list(range(len(curve))), y=curve, mode="lines",
                             name="best so far (modeled)"))
    fin = [t for t in result.tuning.finalists if t.ok and t.kind != "modeled"]
    if fin:
        fig.add_trace(go.Scatter(x=[screened.index(t) for t in fin if t in screened],
                                 y=[t.latency_us for t in fin], mode="markers",
                                 name=f"finalist ({fin[0].kind})",
                                 text=[t.config.id for t in fin]))
    span = [0, max(1, len(screened) - 1)]
    for y, label, dash in ((result.roofline_us, "roofline bound", "dash"),
                           (result.eager_us, "eager", "dot")):
        fig.add_trace(go.Scatter(x=span, y=[y, y], mode="lines", line={"dash": dash},
                                 name=f"{label} {y:.2f} µs (modeled)"))
    values = sorted(t.modeled_us for t in screened) or [result.roofline_us]
    top = max(result.eager_us, values[int(0.9 * (len(values) - 1))]) * 1.5
    low = min(result.roofline_us, values[0]) / 1.5
    fig.update_layout(title="Tuning: every configuration modeled, the finalists measured",
                      xaxis_title="configuration (in the order screened)",
                      yaxis_title="latency (µs, log)", yaxis_type="log", height=420,
                      yaxis_range=[math.log10(low), math.log10(top)])
    trials = "".join(
        f"<tr><td>{_e(t.config.id)}</td><td>{t.modeled_us:.2f}</td><td>"
        f"{'inf' if not math.isfinite(t.latency_us) else f'{t.latency_us:.2f}'}</td>"
        f"<td class='kind'>{_e(t.kind)}</td><td>{_e(t.error or '')}</td></tr>"
        for t in result.tuning.finalists)
    return ("<h2>Tuning</h2>" + fig.to_html(include_plotlyjs=True, full_html=False) +
            "<table><tr><th>finalist</th><th>modeled µs</th><th>latency µs</th><th>kind</th>"
            f"<th>error</th></tr>{trials}</table>")


def _search(result: OptimizeResult) -> str:
    if result.search is None:
        return ""
    return f"<h2>Search</h2><pre>{_e(json.dumps(result.search.summary(), indent=2))}</pre>"
