"""`prism bench`: what a search costs and how good its kernels are, per workload (DESIGN.md §6).

    doc = run_bench(["rmsnorm_matmul", "swiglu"], QUICK)       # one JSON document
    doc["rows"][0]["families_generated"], doc["scaling"], doc["ablation"]

**Rows.** Each target runs the whole pipeline (`prism.pipeline.superoptimize`, as `prism optimize`
does: the pipeline's caps from `search_config_for`, the cost model for the run's device, a fresh
result database so no trial comes from a cache) in a fresh process of its own, so that its peak
memory is its own: `peak_rss_mb` is `resource.getrusage(RUSAGE_SELF).ru_maxrss` of that process
(the interpreter, torch and z3 included; not tracemalloc, which would slow the search it
measures). A row holds the search's counts (families generated, per second, pruned per rule, set
aside unproven, kept; candidates checked and verified; the median and max seconds of a proof),
the tuning seconds, and the best kernel's latency on the run's device with its kind, beside the
program's roofline bound and modeled eager baseline, and the same three figures on each device of
`MODELED_ON` (H100, H200) from the cost model (the run's winner modeled there, not re-tuned).
`search_state` says whether the search was exhaustive, complete but not exhaustive, or stopped
by its budget; the counts of a stopped search are its partial figures.

**Scaling.** The search alone (no tuning) at each block-op cap, each point in a fresh process
(search seconds, families generated, peak RSS; each search gets the run's per-workload budget),
and a fitted growth of families and seconds against the cap: least squares of ln(y) on ln(cap)
(a power law, y ∝ cap^k) and of ln(y) on cap (an exponential, y ∝ b^cap), each with its R²; only
points whose search completed enter the fit, since a search the budget stopped reports fewer
families than its cap allows.

**Ablation** (`prism bench --ablation`, `prism.bench_ablation`): the symbolic search against
the same engine with grid sizes, loop range and maps concrete (`SearchConfig.concrete`), over
each Prism workload's shapes, the symbolic side searching once and re-instantiating its
checkpoint; a ratio per workload and whether both found the same best kernel (or why not), and
Prism's per-flag ablation. A run with `--ablation` holds that section alone (no rows).
"""

from __future__ import annotations

import json
import math
import multiprocessing
import os
import platform
import statistics
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prism.errors import PrismError

if TYPE_CHECKING:
    from prism.pipeline import OptimizeResult

SCHEMA = 1
NINE = ("rmsnorm_matmul", "rmsnorm_mlp", "swiglu", "attention", "qknorm_attention", "gated_mlp",
        "lora", "gqa", "ntrans")
MODELED_ON = ("h100", "h200")      # every row's winner is also modeled on these
SCALING_TARGETS = ("rmsnorm_matmul", "attention")
SCALING_CAPS = (5, 6, 7, 8, 9, 10, 11)
QUICK_SCALING_CAPS = (4, 5)
RSS_KIND = "peak RSS of a fresh process that ran only this (getrusage ru_maxrss)"
ABLATION_NOTE = "not run in this run: `prism bench --ablation` runs it"
VERSIONED = ("prism-workbench", "torch", "triton", "z3-solver", "egglog", "numpy")


class BenchError(PrismError):
    """A bench setting that cannot work (a budget ≤ 0, a cap < 1)."""


@dataclass(frozen=True)
class BenchSettings:
    """How one bench run searches. `max_block_ops` None: the pipeline's own caps."""

    device: str = "h100"
    budget_s: float = 900.0            # per workload, as bench/optimize_report.py
    max_block_ops: int | None = None
    compile_ptx: bool = True
    quick: bool = False
    runs: str | None = None            # keep each workload's optimize outputs in runs/<workload>
    executor: str = "local"            # where the search's tasks run (prism.search.executors)
    workers: int | None = None
    ray_address: str | None = None
    ablation_shapes: int | None = None  # the ablation: the first N shapes of each workload
    concrete_budget_s: float | None = None   # the ablation's concrete searches (None: budget_s)
    # the block vocabulary: "prism" is the pipeline's own (Prism's plus the program's ops);
    # "program" only the program's ops plus div and mul (`pipeline.program_block_ops`), quick
    vocabulary: str = "prism"

    def search_config(self, graph: Any, budget_s: float, **fields: Any) -> Any:
        """The pipeline's search config for `graph` (`pipeline.search_config_for`) with this
        run's block-op cap and vocabulary, and `fields` replaced."""
        from prism.pipeline import program_block_ops, search_config_for
        config = replace(search_config_for(graph, budget_s, self.device), **fields)
        if self.max_block_ops is not None:
            config = replace(config, max_block_ops=self.max_block_ops)
        if self.vocabulary == "program":
            config = replace(config, block_ops=program_block_ops(graph))
        return config

    @property
    def where(self) -> Any:
        from prism.search.executors import Executor
        return Executor(self.executor, self.workers, self.ray_address)

    def __post_init__(self) -> None:
        if not self.budget_s > 0:
            raise BenchError(f"the budget is {self.budget_s} s; give a positive time, e.g. "
                             "--budget 120")
        if self.max_block_ops is not None and self.max_block_ops < 1:
            raise BenchError(f"the block-op cap is {self.max_block_ops}; give at least 1")
        if self.concrete_budget_s is not None and not self.concrete_budget_s > 0:
            raise BenchError(f"the concrete searches' budget is {self.concrete_budget_s} s; "
                             "give a positive time")
        if self.ablation_shapes is not None and self.ablation_shapes < 1:
            raise BenchError(f"the ablation's shape count is {self.ablation_shapes}; give at "
                             "least 1")
        if self.vocabulary not in ("prism", "program"):
            raise BenchError(f"the vocabulary is {self.vocabulary!r}; give 'prism' or "
                             "'program'")


FULL = BenchSettings()
# CI: small enough that two small workloads run in about a minute on two cores
QUICK = BenchSettings(budget_s=120.0, max_block_ops=5, compile_ptx=False, quick=True,
                      vocabulary="program")
# the ablation: a budget per search; the concrete side searches every shape, so a full run of
# Prism's five workloads is 24 concrete searches of up to `budget_s` each
ABLATION = BenchSettings(budget_s=60.0, max_block_ops=4, compile_ptx=False)
# CI: the symbolic search completes; each concrete one stops at its budget (partial figures)
QUICK_ABLATION = BenchSettings(budget_s=60.0, max_block_ops=4, compile_ptx=False, quick=True,
                               ablation_shapes=2, concrete_budget_s=5.0, vocabulary="program")


def run_bench(targets: Sequence[str], settings: BenchSettings = FULL, *,
              scaling_caps: Sequence[int] | None = None,
              scaling_targets: Sequence[str] = SCALING_TARGETS,
              ablation: Sequence[str] = (), ablation_flags: bool = True,
              progress: Callable[[str, dict[str, Any]], None] | None = None,
              command: str = "") -> dict[str, Any]:
    """The bench document: one row per target, the scaling section when `scaling_caps` is
    given, the ablation of the workloads in `ablation` (with Prism's per-flag rows when
    `ablation_flags`), and the machine, versions, commit and date. `progress` is called with
    ("row" | "scaling" | "ablation" | "flag", the row or point) as each one finishes."""
    from prism.targets import resolve
    for target in (*targets, *(scaling_targets if scaling_caps else ()), *ablation):
        if len(resolve(target)) != 1:   # fail before minutes of work, with resolve's message
            raise BenchError(f"{target} holds several graphs; bench one program per target")
    started = time.perf_counter()
    rows = []
    for target in targets:
        row = _in_fresh_process(bench_row, target, settings, dead={"workload": target})
        rows.append(row)
        if progress:
            progress("row", row)
    scaling = None
    if scaling_caps:
        parts: dict[str, Any] = {}
        scaling = {"caps": list(scaling_caps), "memory": RSS_KIND, "workloads": parts}
        for target in scaling_targets:
            points = []
            for cap in scaling_caps:
                point = _in_fresh_process(scaling_point, target, cap, settings,
                                          dead={"workload": target, "cap": cap, "complete": False})
                points.append(point)
                if progress:
                    progress("scaling", point)
            parts[target] = {"points": points, "fit": scaling_fit(points)}
    section: dict[str, Any] = {"rows": [], "flags": [], "note": ABLATION_NOTE}
    if ablation:
        from prism.bench_ablation import run_ablation
        section = run_ablation(ablation, settings, flags=ablation_flags, progress=progress)
    return {"schema": SCHEMA, **provenance(), "command": command,
            "settings": asdict(settings), "rows": rows, "scaling": scaling,
            "ablation": section["rows"], "ablation_flags": section["flags"],
            "ablation_note": section["note"],
            "seconds": round(time.perf_counter() - started, 2)}


def _in_fresh_process(fn: Callable[..., dict[str, Any]], *args: Any,
                      dead: dict[str, Any] | None = None) -> dict[str, Any]:
    """`fn(*args)` in a spawned process of its own, so its peak RSS is its own. A process that
    dies (the kernel's out-of-memory killer, a crash) gives `dead` with an `error` that says
    how it died, so the rest of the bench still runs and is kept; an exception `fn` raises is
    raised here. The process is not daemonic, because its search may start a pool of its own
    (`--executor processes`), which a daemonic process may not; the parent ends it instead when
    it is interrupted while waiting."""
    ctx = multiprocessing.get_context("spawn")
    here, there = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_child, args=(there, fn, args), daemon=False)
    child.start()
    there.close()
    try:
        status, value = here.recv()
    except EOFError:                    # it died before it could answer
        child.join()
        return {**(dead or {}), "error": _died(child.exitcode), "peak_rss_mb": None}
    except BaseException:               # Ctrl-C here: the child goes too
        child.terminate()
        child.join()
        raise
    finally:
        here.close()
    child.join()
    if status == "raised":
        raise value
    return value


def _child(conn: Any, fn: Callable[..., dict[str, Any]], args: tuple[Any, ...]) -> None:
    try:
        out: tuple[str, Any] = ("ok", fn(*args))
    except BaseException as e:  # handed to the parent, which raises it
        out = ("raised", e)
    try:
        conn.send(out)
    except Exception as e:  # an exception that does not pickle: its text, as a BenchError
        conn.send(("raised", BenchError(f"{type(out[1]).__name__}: {out[1]} ({e})")))
    conn.close()


def _died(exitcode: int | None) -> str:
    """How a bench process died, in words, with the fix."""
    import signal
    if exitcode is not None and exitcode < 0 and -exitcode == signal.SIGKILL:
        return ("its process was killed (SIGKILL), most likely by the out-of-memory killer: "
                f"it used more than this machine's {_memory_gib():.0f} GiB; rerun it alone "
                "with a smaller --budget or --max-block-ops")
    how = f"signal {-exitcode}" if exitcode is not None and exitcode < 0 else \
        f"exit code {exitcode}"
    return f"its process died ({how}) before it returned a result; rerun it alone"


def _memory_gib() -> float:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2 ** 30
    except (ValueError, OSError, AttributeError):
        return float("nan")


def bench_row(target: str, settings: BenchSettings) -> dict[str, Any]:
    """One workload through the pipeline; a user error (an unsupported program) is the row's
    `error`, so the table still has the row."""
    from prism.pipeline import superoptimize
    from prism.targets import resolve
    from prism.tune import ResultDB
    try:
        (found,) = resolve(target)
        config = settings.search_config(found.graph, settings.budget_s)
        out = Path(settings.runs) / _file_label(found.label) if settings.runs else None
        with tempfile.TemporaryDirectory() as tmp:
            result = superoptimize(found.workload or found.graph, device=settings.device,
                                   measure="model", budget_s=settings.budget_s, out=out,
                                   search_config=config, compile_ptx=settings.compile_ptx,
                                   db=ResultDB(Path(tmp) / "results.jsonl"), label=found.label,
                                   executor=settings.where)
    except PrismError as e:
        return {"workload": target, "error": f"{type(e).__name__}: {e}",
                "peak_rss_mb": peak_rss_mb()}
    return {**result_row(result), "peak_rss_mb": peak_rss_mb(), "peak_rss_kind": RSS_KIND}


def result_row(result: OptimizeResult) -> dict[str, Any]:
    """The row of one pipeline run, from its result alone. Its search figures add up every
    search the run made: the fusion search and, when it proved no program that fits, the
    partial-fusion one (`partial_fusion` says so, with that search's own figures)."""
    from prism.cost import eager_us, get_device, modeled, roofline_us
    from prism.pipeline import outside_ops
    search, tuning, best = result.search, result.tuning, result.best
    assert search is not None and tuning is not None   # superoptimize always runs both
    searches = result.searches
    stopped = next((s.stop_reason for s in searches if not s.complete), search.stop_reason)
    pruned: Counter[str] = Counter()
    set_aside: Counter[str] = Counter()
    for s in searches:
        pruned.update(s.pruned)
        set_aside.update(s.set_aside)
    generated = sum(s.generated for s in searches)
    seconds = sum(s.seconds for s in searches)
    proofs = [c.verdict.seconds for s in searches for c in s.equivalent]
    row: dict[str, Any] = {
        "workload": result.target, "device": result.device,
        "search_seconds": round(seconds, 3),
        "executor": search.executor or {"name": "local", "workers": 1},
        "families_generated": generated,
        "families_per_second": round(generated / seconds, 1) if seconds > 0 else None,
        "families_pruned": {r: pruned.get(r, 0) for r in search.config.rule_names},
        # branch and bound's part: the cost-bound rule's share of the proven prunes
        "cost_bound_share": (round(pruned.get("cost_bound", 0) / sum(pruned.values()), 6)
                             if sum(pruned.values()) else None),
        "families_set_aside": dict(set_aside),
        "families_kept": sum(s.kept for s in searches),
        "candidates_checked": sum(len(s.candidates) for s in searches),
        "candidates_verified": sum(len(s.equivalent) for s in searches),
        "partial_fusion": ({"families_generated": search.generated,
                            "search_seconds": round(search.seconds, 3),
                            "exhaustive": search.exhaustive,
                            "outside": [o["op"] for o in outside_ops(best.graph)] if best
                            else []} if len(searches) > 1 or (
                                result.fusion is not None and "not_run" in
                                result.fusion.fusion_search) else None),
        "proof_seconds_median": round(statistics.median(proofs), 4) if proofs else None,
        "proof_seconds_max": round(max(proofs), 4) if proofs else None,
        "tuning_seconds": round(tuning.seconds, 3),
        "total_seconds": round(result.seconds, 3),
        "search_state": search_state(all(s.complete for s in searches),
                                     all(s.exhaustive for s in searches), stopped),
        "exhaustive": all(s.exhaustive for s in searches), "stop_reason": stopped,
        "max_block_ops": search.config.max_block_ops,
        "best_latency_us": round(best.latency_us, 4) if best else None,
        "latency_kind": best.latency_kind if best else None,
        "roofline_us": round(result.roofline_us, 4),
        "eager_latency_us": round(result.eager_us, 4), "eager_latency_kind": "modeled",
        "best_over_roofline": _ratio(best.latency_us, result.roofline_us) if best else None,
        "speedup_vs_eager": _ratio(result.eager_us, best.modeled_us) if best else None,
        "best": ({"config": best.config, "candidate": best.candidate,
                  "num_kernels": best.num_kernels, "num_tails": best.num_tails,
                  "input_program": best.is_input_program,
                  "check": best.check.status,
                  **({"check_reason": best.check.reason} if best.check.reason else {})}
                 if best else None),
        "modeled": {},
    }
    for name in MODELED_ON:
        # the run's winner on each device: the same kernel, not one tuned there
        spec = get_device(name)
        lat = modeled(best.graph, spec).latency_us if best else None
        roof, eager = roofline_us(result.graph, spec), eager_us(result.graph, spec)
        row["modeled"][name] = {
            "best_latency_us": round(lat, 4) if lat is not None else None,
            "roofline_us": round(roof, 4), "eager_latency_us": round(eager, 4),
            "best_over_roofline": _ratio(lat, roof) if lat is not None else None,
            "speedup_vs_eager": _ratio(eager, lat) if lat is not None else None}
    if best is None:
        row["no_kernel"] = "; ".join(result.notes) or "the pipeline left no kernel"
    if result.notes:
        row["notes"] = result.notes
    return row


def search_state(complete: bool, exhaustive: bool, stop_reason: str) -> str:
    if exhaustive:
        return "exhaustive"
    return "complete, not exhaustive" if complete else f"stopped: {stop_reason}"


def scaling_point(target: str, cap: int, settings: BenchSettings) -> dict[str, Any]:
    """The search alone at block-op cap `cap` (the pipeline's other caps), in this process."""
    from prism.search import search
    from prism.targets import resolve
    (found,) = resolve(target)
    config = replace(settings.search_config(found.graph, settings.budget_s), max_block_ops=cap)
    result = search(found.graph, config, label=found.label, executor=settings.where)
    return {"workload": found.label, "cap": cap, "executor": result.executor,
            "search_seconds": round(result.seconds, 3),
            "families_generated": result.generated, "families_kept": result.kept,
            "candidates_verified": len(result.equivalent), "complete": result.complete,
            "search_state": search_state(result.complete, result.exhaustive,
                                         result.stop_reason),
            "peak_rss_mb": peak_rss_mb()}


def scaling_fit(points: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The growth of families and of seconds with the cap, over the completed points."""
    used = [p for p in points if p["complete"]]
    out: dict[str, Any] = {"caps_used": [p["cap"] for p in used],
                           "caps_left_out": [p["cap"] for p in points if not p["complete"]]}
    for what in ("families_generated", "search_seconds"):
        out[what] = fit_growth([p["cap"] for p in used], [p[what] for p in used])
    return out


def fit_growth(xs: Sequence[float], ys: Sequence[float]) -> dict[str, Any] | None:
    """y ∝ x^k (least squares of ln y on ln x) and y ∝ b^x (ln y on x), each with its R²;
    `better` is the one with the larger R² (None from two points, which both fit exactly).
    None with fewer than two distinct x (y > 0)."""
    pts = [(x, y) for x, y in zip(xs, ys, strict=True) if y > 0 and x > 0]
    if len({x for x, _ in pts}) < 2:
        return None
    lny = [math.log(y) for _, y in pts]
    k, lna, r2_power = _least_squares([math.log(x) for x, _ in pts], lny)
    s, lnc, r2_exp = _least_squares([x for x, _ in pts], lny)
    power = {"exponent": round(k, 3), "scale": _sig(math.exp(lna)), "r2": round(r2_power, 4)}
    expo = {"base": round(math.exp(s), 3), "scale": _sig(math.exp(lnc)), "r2": round(r2_exp, 4)}
    as_power = f"≈ {power['scale']}·cap^{power['exponent']} (R² {power['r2']})"
    as_exp = f"≈ {expo['scale']}·{expo['base']}^cap (R² {expo['r2']})"
    if len(pts) < 3:    # two points: both two-parameter curves pass through them exactly
        return {"power": power, "exponential": expo, "better": None, "points": len(pts),
                "statement": f"{as_power} or {as_exp}: two points cannot tell them apart"}
    better = "power" if r2_power >= r2_exp else "exponential"
    return {"power": power, "exponential": expo, "better": better, "points": len(pts),
            "statement": as_power if better == "power" else as_exp}


def _least_squares(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float, float]:
    """Slope, intercept and R² of the line through (xs, ys) that minimizes squared error."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    intercept = my - slope * mx
    ss_tot = sum((y - my) ** 2 for y in ys)
    ss_res = sum((y - intercept - slope * x) ** 2 for x, y in zip(xs, ys, strict=True))
    return slope, intercept, 1.0 - ss_res / ss_tot if ss_tot > 0 else 1.0


def peak_rss_mb() -> float:
    import resource
    # ru_maxrss is in KiB on Linux
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def provenance() -> dict[str, Any]:
    """The date, git commit (and whether the tree had uncommitted changes), machine, versions."""
    root = Path(__file__).resolve().parents[1]

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True,
                                  timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no")
    versions: dict[str, str | None] = {}
    for name in VERSIONED:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return {"date": datetime.now(UTC).isoformat(timespec="seconds"),
            "commit": commit or "unknown", "dirty": bool(status) if status is not None else None,
            "machine": {"platform": platform.platform(), "processor": platform.machine(),
                        "cpus": os.cpu_count(), "python": platform.python_version()},
            "versions": versions}


def _ratio(a: float, b: float) -> float | None:
    return round(a / b, 3) if b > 0 and math.isfinite(a) and math.isfinite(b) else None


def _sig(x: float) -> float:
    return float(f"{x:.3g}")


def _file_label(label: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in label)


def measured_section(results: Path) -> dict[str, Any]:
    """What a GPU measured, from the files `bench/gpu_check.sh` writes under `results`
    (`gpu_check/gpu_check.json`: each workload's winner, eager and torch.compile timed side by
    side with the model's error; `calibration/calibration-<device>-measured.json`: the
    microbenchmarks beside the model's numbers). Only figures of kind `measured` are taken; an
    interpreted calibration (a CPU run) says nothing about a device and is left out. Without
    the files the section says no GPU run is committed."""
    check = results / "gpu_check" / "gpu_check.json"
    rows: list[dict[str, Any]] = []
    if check.is_file():
        try:
            loaded = json.loads(check.read_text())
        except ValueError as e:
            raise BenchError(f"{check}: not JSON ({e}); rerun bench/gpu_check.sh or remove "
                             "it") from None
        if not isinstance(loaded, list):
            raise BenchError(f"{check}: expected a list of rows as bench/gpu_check.py writes")
        for r in loaded:
            if isinstance(r, dict) and "prism_us" in r:
                rows.append({"workload": r.get("workload"), "kind": "measured",
                             **{k: r.get(k) for k in ("prism_us", "eager_us", "compile_us",
                                                      "modeled_us", "model_error", "gpu",
                                                      "cache", "params", "prism_graph_us",
                                                      "eager_graph_us", "compile_graph_us",
                                                      "graph_regime", "budget_s", "note")}})
            elif isinstance(r, dict):
                rows.append({"workload": r.get("workload"), "kind": "measured",
                             "error": r.get("error", "no timing"),
                             **{k: r[k] for k in ("budget_s", "note") if k in r}})
    calibration = []
    for path in sorted((results / "calibration").glob("calibration-*-measured.json")):
        try:
            doc = json.loads(path.read_text())
        except ValueError as e:
            raise BenchError(f"{path}: not JSON ({e})") from None
        figures = {name: f for name, f in doc.get("figures", {}).items()
                   if isinstance(f, dict) and f.get("kind") == "measured"}
        calibration.append({"device": doc.get("device"), "gpu": doc.get("gpu"),
                            "date": doc.get("date"), "file": str(path), "figures": figures})
    note = ("measured on a GPU by bench/gpu_check.sh" if rows or calibration else
            "no GPU run is committed: every latency above is modeled; bench/gpu_check.sh on a "
            "CUDA machine writes the measured rows this section shows")
    return {"rows": rows, "calibration": calibration,
            "source": str(check) if rows else None, "note": note}
