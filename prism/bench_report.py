"""What `prism bench` leaves behind: the history files, the comparison of two runs, and the
README's workload table, all made from a bench document (`prism.bench.run_bench`) alone.

    write_history(doc, Path("bench/results"))   # <date>-<commit>.json, .md, .svg, .html
    compare(a, b)                               # per workload, each figure that changed: b / a
    rewrite_readme(Path("README.md"), doc, results_path)

The chart is a hand-written SVG (no plotting library: kaleido is not installed, and the engine
imports no plotly, tests/test_architecture.py) and an HTML page that shows that SVG and, where
the page can load plotly.js from its CDN, the same figures as interactive plotly charts; the
page's figures are plotly's JSON schema written as plain data. A `--quick` run's files end in
`-quick`, so CI runs never stand for the latest results.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from prism.errors import PrismError

README_BEGIN = "<!-- prism bench: workload table (rewritten by `prism bench --readme`) -->"
README_END = "<!-- /prism bench -->"
PLOTLY_CDN = "https://cdn.plot.ly/plotly-4.1.1.min.js"   # the plotly.js plotly==7.1.0 bundles
# the figures `compare` sets side by side: every number of a row that a change could move
COMPARED = ("search_seconds", "families_generated", "families_per_second", "families_kept",
            "candidates_checked", "candidates_verified", "proof_seconds_median",
            "proof_seconds_max", "tuning_seconds", "total_seconds", "peak_rss_mb",
            "best_latency_us", "roofline_us", "eager_latency_us", "best_over_roofline",
            "speedup_vs_eager")


class ResultsError(PrismError):
    """A results file that is missing or not a `prism bench` document."""


def stem(doc: Mapping[str, Any]) -> str:
    """`<date>-<commit>` (`-ablation` for a run of the ablation alone, `-quick` for a quick
    run): the name of a run's files."""
    commit = str(doc.get("commit", "unknown"))[:9]
    dirty = "-dirty" if doc.get("dirty") else ""
    ablation = "-ablation" if doc.get("ablation") and not doc.get("rows") else ""
    quick = "-quick" if doc.get("settings", {}).get("quick") else ""
    return f"{str(doc['date'])[:10]}-{commit}{dirty}{ablation}{quick}"


def write_history(doc: Mapping[str, Any], folder: Path) -> dict[str, str]:
    """The run's JSON, markdown table, SVG chart and HTML page into `folder`."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ResultsError(f"the results folder {folder} could not be made: {e.strerror or e}; "
                           "choose another (--out)") from e
    base = folder / stem(doc)
    files = {"json": base.with_suffix(".json"), "markdown": base.with_suffix(".md"),
             "svg": base.with_suffix(".svg"), "html": base.with_suffix(".html")}
    files["json"].write_text(json.dumps(doc, indent=1) + "\n")
    files["markdown"].write_text(markdown(doc))
    files["svg"].write_text(svg_chart(doc))
    files["html"].write_text(html_page(doc))
    return {k: str(v) for k, v in files.items()}


def load_results(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    try:
        doc = json.loads(p.read_text())
    except OSError as e:
        raise ResultsError(f"{p}: {e.strerror or e}; give a bench/results/*.json file") from e
    except ValueError as e:
        raise ResultsError(f"{p} is not JSON ({e}); give a file `prism bench` wrote") from e
    if not isinstance(doc, dict) or "rows" not in doc or "date" not in doc:
        raise ResultsError(f"{p} is not a `prism bench` results file (no rows or date); give "
                           "a bench/results/*.json file")
    return doc


def latest_results(folder: Path, covering: Sequence[str] = ()) -> Path:
    """The newest full (not `--quick`) run in `folder`, by the date it records; with
    `covering`, the newest of those that ran every one of those workloads (a run of a few
    named workloads does not stand for the whole table), else the newest."""
    found, whole = [], []
    for p in sorted(folder.glob("*.json")):
        try:
            doc = load_results(p)
        except ResultsError:
            continue
        if not doc.get("settings", {}).get("quick") and doc["rows"]:   # not an ablation run
            found.append((str(doc["date"]), p))
            if set(covering) <= {r.get("workload") for r in doc["rows"]}:
                whole.append((str(doc["date"]), p))
    if not found:
        raise ResultsError(f"{folder} holds no full `prism bench` run; run `prism bench` "
                           "(without --quick) first")
    return max(whole or found)[1]


# -- text ------------------------------------------------------------------------------------

def _num(x: Any, fmt: str = ".2f") -> str:
    return "n/a" if x is None else format(x, fmt)


def _pruned(row: Mapping[str, Any]) -> str:
    parts = [f"{k} {v}" for k, v in row["families_pruned"].items() if v]
    parts += [f"{k} {v} set aside" for k, v in row.get("families_set_aside", {}).items()]
    return ", ".join(parts) or "none"


def _best(row: Mapping[str, Any]) -> str:
    if row.get("best_latency_us") is None:
        return f"no kernel ({row.get('no_kernel', '')})"
    b = row["best"]
    what = "the input program" if b["input_program"] else f"{b['num_kernels']} kernel(s)" + (
        f" in {b['num_kernels'] - b['num_tails']} launch(es)" if b.get("num_tails") else "")
    return f"{row['best_latency_us']:.2f} µs {row['latency_kind']}, {what}"


def row_lines(rows: Sequence[Mapping[str, Any]]) -> Iterator[str]:
    """The full table: search cost, then kernel quality on each modeled device."""
    yield ("| workload | search s | families | per s | pruned | kept | verified / checked | "
           "proof s median / max | tune s | peak RSS MB | best (H100) | roofline | best / "
           "roofline | eager (modeled) | eager / best | best (H200, modeled) | H200 best / "
           "roofline | H200 eager / best | check | search |")
    yield "|" + "---|" * 20
    for r in rows:
        if "error" in r:
            yield f"| {r['workload']} | {r['error']} |" + " |" * 18
            continue
        h200 = r["modeled"].get("h200", {})
        yield (f"| {r['workload']} | {r['search_seconds']:.1f} | {r['families_generated']} | "
               f"{_num(r['families_per_second'], '.0f')} | {_pruned(r)} | {r['families_kept']} "
               f"| {r['candidates_verified']} / {r['candidates_checked']} | "
               f"{_num(r['proof_seconds_median'], '.3f')} / {_num(r['proof_seconds_max'], '.3f')}"
               f" | {r['tuning_seconds']:.1f} | {r['peak_rss_mb']:.0f} | {_best(r)} | "
               f"{r['roofline_us']:.2f} µs | {_num(r['best_over_roofline'])}× | "
               f"{r['eager_latency_us']:.2f} µs | {_num(r['speedup_vs_eager'])}× | "
               f"{_num(h200.get('best_latency_us'))} µs | {_num(h200.get('best_over_roofline'))}"
               f"× | {_num(h200.get('speedup_vs_eager'))}× | "
               f"{_check_cell(r)} | {r['search_state']} |")


def _header(doc: Mapping[str, Any]) -> str:
    s, m = doc["settings"], doc["machine"]
    if doc.get("ablation") and not doc["rows"]:
        return (f"`{doc.get('command') or 'prism bench --ablation'}` on {doc['date']}, commit "
                f"{str(doc['commit'])[:9]}"
                f"{' (uncommitted changes)' if doc.get('dirty') else ''}, {m['cpus']} CPUs "
                f"({m['platform']}); the ablation alone: {len(doc['ablation'])} workload(s), "
                f"budget {s['budget_s']:g} s per symbolic search and "
                f"{s.get('concrete_budget_s') or s['budget_s']:g} s per concrete one, "
                f"device {s['device']}, "
                f"{doc['seconds']:.0f} s in all. Timings are wall clock on this machine.")
    caps = (f"block-op cap {s['max_block_ops']}" if s.get("max_block_ops")
            else "the pipeline's default caps")
    return (f"`{doc.get('command') or 'prism bench'}` on {doc['date']}, commit "
            f"{str(doc['commit'])[:9]}{' (uncommitted changes)' if doc.get('dirty') else ''}, "
            f"{m['cpus']} CPUs ({m['platform']}); device {s['device']}, measure model, "
            f"budget {s['budget_s']:g} s per workload, {caps}"
            f"{', quick' if s.get('quick') else ''}"
            f"{_where(s)}. Every latency is modeled by the cost "
            "model (no GPU measured these); the H200 columns model the H100 run's winner.")


def _where(settings: Mapping[str, Any]) -> str:
    name = settings.get("executor") or "local"
    if name == "local":
        return ""
    workers = settings.get("workers")
    return f", search on {name}" + (f" with {workers} workers" if workers else "")


def markdown(doc: Mapping[str, Any]) -> str:
    out = [f"# prism bench {stem(doc)}", "", _header(doc), ""]
    if doc["rows"] or not doc.get("ablation"):
        out += [*row_lines(doc["rows"]), ""]
    scaling = doc.get("scaling")
    if scaling:
        out += ["## Scaling: the search against the block-op cap", "",
                f"Memory: {scaling['memory']}.", "",
                "| workload | cap | search s | families | kept | verified | peak RSS MB | "
                "search |", "|---|---|---|---|---|---|---|---|"]
        for name, part in scaling["workloads"].items():
            for p in part["points"]:
                if "error" in p:        # its process died: the row says how
                    out.append(f"| {name} | {p['cap']} | — | — | — | — | — | {p['error']} |")
                    continue
                out.append(f"| {name} | {p['cap']} | {p['search_seconds']:.2f} | "
                           f"{p['families_generated']} | {p['families_kept']} | "
                           f"{p['candidates_verified']} | {p['peak_rss_mb']:.0f} | "
                           f"{p['search_state']} |")
        out.append("")
        for name, part in scaling["workloads"].items():
            out.append(f"- {name}: {fit_text(part['fit'])}")
        out.append("")
    measured = doc.get("measured")
    if measured is not None:
        out += [*measured_lines(measured), ""]
    out += ["## Ablation: symbolic against concrete parameters", "",
            doc.get("ablation_note") or "", ""]
    if doc.get("ablation"):
        out += [*ablation_lines(doc), ""]
    return "\n".join(out)


def measured_lines(measured: Mapping[str, Any]) -> Iterator[str]:
    """The GPU's rows (`prism.bench.measured_section`), each latency labelled measured, beside
    the model's number and the model's error; or the note that no GPU run is committed."""
    yield "## Measured on a GPU"
    yield ""
    yield str(measured.get("note", ""))
    rows = measured.get("rows") or []
    if rows:
        yield ""
        yield ("| workload | prism µs (measured) | eager µs (measured) | torch.compile µs "
               "(measured) | prism µs (modeled) | measured / modeled | GPU | prism / eager / "
               "torch.compile µs (graph replay) |")
        yield "|---|---|---|---|---|---|---|---|"
        notes = []
        for r in rows:
            # the optimize run's budget, where the row records it: a winner is what it found
            label = r["workload"] + (f" ({r['budget_s']:g} s)" if r.get("budget_s") else "")
            if r.get("note"):
                notes.append(f"- {r['workload']}: {r['note']}")
            if "error" in r:
                yield f"| {label} | error: {r['error']} | | | | | | |"
                continue
            graph = " / ".join(_num(r.get(f"{k}_graph_us")) for k in ("prism", "eager",
                                                                      "compile"))
            yield (f"| {label} | {_num(r.get('prism_us'))} | {_num(r.get('eager_us'))} "
                   f"| {_num(r.get('compile_us'))} | {_num(r.get('modeled_us'))} | "
                   f"{_num(r.get('model_error'), '.3f')} | {r.get('gpu') or ''} | {graph} |")
        for what, key in (("Measured columns", "cache"), ("Graph replay", "graph_regime")):
            regimes = sorted({r[key] for r in rows if r.get(key)})
            if regimes:
                yield ""
                yield f"{what}: {'; '.join(regimes)}."
        if notes:
            yield ""
            yield from notes
    for c in measured.get("calibration") or []:
        yield ""
        yield f"Calibration of {c['device']} on {c.get('gpu') or 'a GPU'} ({c.get('date')}):"
        for name, f in c["figures"].items():
            yield (f"- {name}: {f['value']} (measured) against the model's {f['model']} "
                   f"({f.get('measured_over_model')}x)")


def ablation_lines(doc: Mapping[str, Any]) -> Iterator[str]:
    """The ablation's rows, each shape of each side, the per-flag rows, and every ratio quoted
    with the command that produced it."""
    yield ("| workload | shapes | symbolic s | concrete s | ratio | ratio is | search ratio | "
           "same best | why not |")
    yield "|---|---|---|---|---|---|---|---|---|"
    for r in doc["ablation"]:
        yield (f"| {r['workload']} | {r['shapes']} | {r['symbolic_seconds']:.1f} | "
               f"{r['concrete_seconds']:.1f} | {_num(r['ratio'])}× | {r['ratio_kind']} | "
               f"{_num(r['search_ratio'])}× | {'yes' if r['same_best'] else 'no'} | "
               f"{r.get('why', '')} |")
    yield ""
    yield ("| workload | shape | side | search s | tune s | families | accepted / checked "
           "(by) | check s | best µs (modeled) | search |")
    yield "|---|---|---|---|---|---|---|---|---|---|"
    for r in doc["ablation"]:
        for side in ("symbolic", "concrete"):
            for e in r[side]["shapes"]:
                yield _shape_line(r["workload"], side, e)
    flags = doc.get("ablation_flags") or []
    if flags:
        yield ""
        yield ("| workload | shape | concrete | seconds | symbolic s | ratio | search ratio | "
               "families | accepted (by) | best µs | same best | search |")
        yield "|---|---|---|---|---|---|---|---|---|---|---|---|"
        for f in flags:
            e = f["side"]["shapes"][0]
            yield (f"| {f['workload']} | {_shape_text(f['shape'])} | {f['label']} | "
                   f"{f['seconds']:.1f} | {f['symbolic_seconds']:.1f} | {_num(f['ratio'])}× | "
                   f"{_num(f['search_ratio'])}× | {e['families_generated']} | "
                   f"{e['candidates_accepted']} ({_by(e)}) | {_best_us(e)} | "
                   f"{'yes' if f['same_best'] else 'no: ' + f.get('why', '')} | "
                   f"{e['search_state']} |")
    command = doc.get("command") or "prism bench --ablation"
    yield ""
    for r in doc["ablation"]:
        yield (f"- {r['workload']}: concrete / symbolic = {_num(r['ratio'])}× "
               f"({r['ratio_kind']}; searches alone {_num(r['search_ratio'])}×), "
               f"same best: {'yes' if r['same_best'] else 'no'}; `{command}`")
    for f in flags:
        yield (f"- {f['workload']} with {f['label']}: {_num(f['ratio'])}× the symbolic side at "
               f"{_shape_text(f['shape'])} ({f['ratio_kind']}); `{command}`")


def _shape_text(shape: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}{tuple(v)}" for k, v in shape.items())


def _by(e: Mapping[str, Any]) -> str:
    return ", ".join(f"{n} {m}" for m, n in e["accepted_by"].items()) or "none"


def _best_us(e: Mapping[str, Any]) -> str:
    b = e["best"]
    return "none" if b is None else f"{b['modeled_us']:.3f} ({b['config']})"


def _shape_line(workload: str, side: str, e: Mapping[str, Any]) -> str:
    return (f"| {workload} | {_shape_text(e['shape'])} | {side} | {e['search_seconds']:.1f} | "
            f"{e['tune_seconds']:.2f} | {e['families_generated']} | {e['candidates_accepted']} "
            f"/ {e['candidates_checked']} ({_by(e)}) | {e['check_seconds']:.1f} | "
            f"{_best_us(e)} | {e['search_state']} |")


def fit_text(fit: Mapping[str, Any]) -> str:
    parts = []
    for what, label in (("families_generated", "families"), ("search_seconds", "seconds")):
        f = fit.get(what)
        if not f:
            parts.append(f"{label}: too few completed points to fit")
        elif f["better"] is None:
            parts.append(f"{label} {f['statement']}")
        else:
            parts.append(f"{label} {f['statement']} ({f['better']} fits better; the other: "
                         f"{_other(f)})")
    left = fit.get("caps_left_out")
    used = f"caps {fit.get('caps_used')}" + (f", {left} left out (stopped by the budget)"
                                             if left else "")
    return "; ".join(parts) + f"; over {used}"


def _other(f: Mapping[str, Any]) -> str:
    if f["better"] == "power":
        e = f["exponential"]
        return f"{e['scale']}·{e['base']}^cap, R² {e['r2']}"
    p = f["power"]
    return f"{p['scale']}·cap^{p['exponent']}, R² {p['r2']}"


def readme_section(doc: Mapping[str, Any], results: str) -> str:
    """The README's workload table: kernel quality and search seconds from one run."""
    lines = [f"`prism bench` on each workload ({_header(doc)} The whole run, with the search "
             f"counts, proofs, memory and scaling, is [{results}]({results}); its chart "
             f"[{Path(results).with_suffix('.svg').name}]"
             f"({Path(results).with_suffix('.svg')})):", "",
             "| workload | best | roofline bound | best / roofline | eager | speed-up vs eager "
             "| best on H200 | check | search s |", "|---|---|---|---|---|---|---|---|---|"]
    for r in doc["rows"]:
        if "error" in r or r.get("best_latency_us") is None:
            lines.append(f"| {r['workload']} | {r.get('error') or _best(r)} |" + " |" * 7)
            continue
        state = "" if r["search_state"] == "exhaustive" else f" ({r['search_state']})"
        h200 = r["modeled"].get("h200", {})
        lines.append(f"| {r['workload']} | {_best(r)} | {r['roofline_us']:.2f} µs | "
                     f"{_num(r['best_over_roofline'])}× | {r['eager_latency_us']:.2f} µs | "
                     f"{_num(r['speedup_vs_eager'])}× | {_num(h200.get('best_latency_us'))} µs "
                     f"modeled | {r['best']['check']} | {r['search_seconds']:.0f}{state} |")
    measured = doc.get("measured")
    if measured is not None and not measured.get("rows"):
        lines += ["", f"Measured on a GPU: {measured['note']}."]
    elif measured is not None:
        lines += ["", *measured_lines(measured)]
    return "\n".join(lines)


def rewrite_readme(readme: Path, doc: Mapping[str, Any], results: str) -> bool:
    """Replace the marked section of `readme`; False when it already said the same."""
    text = readme.read_text()
    start, end = text.find(README_BEGIN), text.find(README_END)
    if start < 0 or end < start:
        raise ResultsError(f"{readme} has no section marked {README_BEGIN} … {README_END}; "
                           "put the two markers where the table goes")
    new = (text[:start + len(README_BEGIN)] + "\n" + readme_section(doc, results) + "\n"
           + text[end:])
    if new == text:
        return False
    readme.write_text(new)
    return True


# -- comparing two runs ----------------------------------------------------------------------

def compare(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    """Per workload in both runs, each compared figure that differs, as b / a."""
    rows_a = {r["workload"]: r for r in a["rows"]}
    rows_b = {r["workload"]: r for r in b["rows"]}
    rows = []
    for name in [w for w in rows_a if w in rows_b]:
        ra, rb = rows_a[name], rows_b[name]
        changes = {}
        for key in COMPARED:
            va, vb = ra.get(key), rb.get(key)
            if va != vb:
                changes[key] = {"a": va, "b": vb, "ratio": _ratio(vb, va)}
        if ra.get("search_state") != rb.get("search_state"):
            changes["search_state"] = {"a": ra.get("search_state"), "b": rb.get("search_state"),
                                       "ratio": None}
        rows.append({"workload": name, "changes": changes})
    return {"a": {"date": a["date"], "commit": a["commit"]},
            "b": {"date": b["date"], "commit": b["commit"]}, "rows": rows,
            "only_in_a": [w for w in rows_a if w not in rows_b],
            "only_in_b": [w for w in rows_b if w not in rows_a]}


def _ratio(b: Any, a: Any) -> float | None:
    if not all(isinstance(x, int | float) and not isinstance(x, bool) for x in (a, b)):
        return None
    return round(b / a, 3) if a != 0 and math.isfinite(a) and math.isfinite(b) else None


def compare_text(diff: Mapping[str, Any]) -> str:
    a, b = diff["a"], diff["b"]
    out = [f"B / A: A = {a['commit'][:9]} ({a['date']}), B = {b['commit'][:9]} ({b['date']})"]
    for r in diff["rows"]:
        if not r["changes"]:
            out.append(f"{r['workload']}: unchanged")
            continue
        parts = [f"{k} {v['a']} → {v['b']}" + (f" ({v['ratio']:.2f}×)" if v["ratio"]
                                                is not None else "")
                 for k, v in r["changes"].items()]
        out.append(f"{r['workload']}: " + "; ".join(parts))
    for side in ("a", "b"):
        if diff[f"only_in_{side}"]:
            out.append(f"only in {side.upper()}: {', '.join(diff[f'only_in_{side}'])}")
    return "\n".join(out)


# -- the chart -------------------------------------------------------------------------------

SERIES = (("best_latency_us", "best kernel", "#3b6ea8"), ("roofline_us", "roofline bound",
          "#8fb35a"), ("eager_latency_us", "eager", "#c8553d"))


def svg_chart(doc: Mapping[str, Any]) -> str:
    """Grouped horizontal bars: best, roofline and eager per workload (µs, modeled); for a run
    of the ablation alone, each workload's symbolic and concrete seconds."""
    if doc.get("ablation") and not doc["rows"]:
        return ablation_svg(doc)
    rows = [r for r in doc["rows"] if "error" not in r]
    width, left, bar, gap = 720, 150, 9, 12
    top = 40
    height = top + len(rows) * (3 * bar + gap) + 40
    top_value = max([r.get(k) or 0.0 for r in rows for k, _, _ in SERIES] + [1e-9])
    scale = (width - left - 80) / top_value
    device = str(doc["settings"]["device"]).upper()
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="11">',
           f'<text x="10" y="18" font-size="13">Modeled latency on {device}, µs '
           f'({html.escape(stem(doc))})</text>']
    for i, (_, label, color) in enumerate(SERIES):
        out.append(f'<rect x="{left + i * 130}" y="26" width="10" height="10" fill="{color}"/>'
                   f'<text x="{left + i * 130 + 14}" y="35">{label}</text>')
    y = top + 8
    for r in rows:
        out.append(f'<text x="{left - 6}" y="{y + 1.5 * bar + 4}" text-anchor="end">'
                   f'{html.escape(r["workload"])}</text>')
        for key, _, color in SERIES:
            value = r.get(key)
            if value is not None:
                w = max(1.0, value * scale)
                out.append(f'<rect x="{left}" y="{y}" width="{w:.1f}" height="{bar - 1}" '
                           f'fill="{color}"/><text x="{left + w + 4:.1f}" y="{y + bar - 1}">'
                           f'{value:.2f}</text>')
            y += bar
        y += gap
    out.append("</svg>")
    return "\n".join(out) + "\n"


ABLATION_SERIES = (("symbolic_seconds", "symbolic (one search, checkpoint re-instantiated)",
                    "#3b6ea8"), ("concrete_seconds", "concrete (a search per shape)", "#c8553d"))


def ablation_svg(doc: Mapping[str, Any]) -> str:
    """Per workload, the two sides' seconds over its shapes, on a log scale (they differ by
    orders of magnitude); a side stopped by its budget is marked ≥."""
    rows = doc["ablation"]
    width, left, bar, gap, top = 760, 150, 12, 14, 44
    height = top + len(rows) * (2 * bar + gap) + 40
    values = [r[k] for r in rows for k, _, _ in ABLATION_SERIES if r[k] and r[k] > 0]
    lo = math.floor(math.log10(min([*values, 1.0])))
    hi = math.ceil(math.log10(max([*values, 10.0])))
    scale = (width - left - 110) / max(1, hi - lo)

    def x(v: float) -> float:
        return left + (math.log10(max(v, 10.0 ** lo)) - lo) * scale
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="11">',
           f'<text x="10" y="18" font-size="13">Optimization seconds over each workload\'s '
           f'shapes, log scale ({html.escape(stem(doc))})</text>']
    for i, (_, label, color) in enumerate(ABLATION_SERIES):
        out.append(f'<rect x="{left + i * 290}" y="26" width="10" height="10" fill="{color}"/>'
                   f'<text x="{left + i * 290 + 14}" y="35">{html.escape(label)}</text>')
    y = top + 8
    for r in rows:
        out.append(f'<text x="{left - 6}" y="{y + bar + 4}" text-anchor="end">'
                   f'{html.escape(r["workload"])}</text>')
        for key, _, color in ABLATION_SERIES:
            side = r["symbolic" if key.startswith("symbolic") else "concrete"]
            at_least = "" if side["complete"] else "≥ "
            w = max(1.0, x(r[key]) - left)
            out.append(f'<rect x="{left}" y="{y}" width="{w:.1f}" height="{bar - 1}" '
                       f'fill="{color}"/><text x="{left + w + 4:.1f}" y="{y + bar - 2}">'
                       f'{at_least}{r[key]:.1f} s</text>')
            y += bar
        bound = {"lower": "≥ ", "upper": "≤ "}.get(r["ratio_kind"].split()[0], "")
        out.append(f'<text x="{width - 4}" y="{y - 2}" text-anchor="end">'
                   f'{bound}{_num(r["ratio"])}×</text>')
        y += gap
    out.append("</svg>")
    return "\n".join(out) + "\n"


def figures(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The page's plotly figures as plain data: latencies per workload, and the scaling."""
    rows = [r for r in doc["rows"] if "error" not in r]
    names = [r["workload"] for r in rows]
    latency = {"data": [{"type": "bar", "name": label, "x": names, "y": [r.get(k) for r in rows],
                         "marker": {"color": color}} for k, label, color in SERIES],
               "layout": {"title": {"text": "Modeled latency (µs)"}, "barmode": "group",
                          "yaxis": {"title": {"text": "µs, modeled"}}}}
    out = [latency] if rows or not doc.get("ablation") else []
    scaling = doc.get("scaling")
    if scaling:
        data = []
        for name, part in scaling["workloads"].items():
            pts = [p for p in part["points"] if "error" not in p]
            data.append({"type": "scatter", "mode": "lines+markers", "name": f"{name} families",
                         "x": [p["cap"] for p in pts], "y": [p["families_generated"] for p in pts]})
            data.append({"type": "scatter", "mode": "lines+markers", "name": f"{name} seconds",
                         "x": [p["cap"] for p in pts], "y": [p["search_seconds"] for p in pts],
                         "yaxis": "y2"})
        out.append({"data": data, "layout": {
            "title": {"text": "Search against the block-op cap"},
            "xaxis": {"title": {"text": "max block ops"}},
            "yaxis": {"title": {"text": "families generated"}, "type": "log"},
            "yaxis2": {"title": {"text": "search seconds"}, "type": "log", "overlaying": "y",
                       "side": "right"}}})
    ablation = doc.get("ablation")
    if ablation:
        names = [r["workload"] for r in ablation]
        out.append({"data": [{"type": "bar", "name": label, "x": names,
                              "y": [r[k] for r in ablation], "marker": {"color": color}}
                             for k, label, color in ABLATION_SERIES],
                    "layout": {"title": {"text": "Ablation: optimization seconds over the "
                                                 "shapes"}, "barmode": "group",
                               "yaxis": {"title": {"text": "seconds"}, "type": "log"}}})
    return out


def html_page(doc: Mapping[str, Any]) -> str:
    figs = json.dumps(figures(doc))
    divs = "".join(f'<div id="fig{i}" style="height:420px"></div>'
                   for i in range(len(figures(doc))))
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>prism bench {html.escape(stem(doc))}</title></head>
<body style="font-family:sans-serif">
<h1>prism bench {html.escape(stem(doc))}</h1>
<p>{html.escape(_header(doc))}</p>
{svg_chart(doc)}
{divs}
<script src="{PLOTLY_CDN}"></script>
<script>
const figures = {figs};
if (window.Plotly) figures.forEach((f, i) => Plotly.newPlot("fig" + i, f.data, f.layout));
</script>
</body></html>
"""


def _check_cell(row: Mapping[str, Any]) -> str:
    """The winner's check, and why it did not run (or failed) where it says."""
    best = row.get("best")
    if not best:
        return "n/a"
    reason = best.get("check_reason")
    return f"{best['check']} ({reason})" if reason else str(best["check"])
