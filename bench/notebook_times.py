"""How long a reader waits (issue 20): each notebook run as a reader runs it, Run All in a real
JupyterLab driven by Playwright with Debian's chromium, timed from the click to the first
picture (an SVG, an image, a plot or a widget box drawn in an output) and to finished.

Finished is the first moment, sampled every 0.25 s, that the server says the notebook's kernel
is idle *and* the notebook, saved from the page right then, has an execution count on every
code cell (or an error, which stops Run All): a kernel is idle for a moment between two cells,
so idle alone would stop the clock early, and the page's prompts are no witness either
(JupyterLab draws only the cells in view). A save is asked only at an idle sample. A benchmark,
not a test: timings on a shared machine vary, so nothing here passes or fails on a number (the
reverted test e7ca650 did, and flaked). The notebooks are copies in a temporary folder; the
saved copy is read back to count errors.

    .venv/bin/python bench/notebook_times.py [STEM ...] [--json OUT.json]

STEM defaults to 00_quickstart and 03_search_and_pruning.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ("00_quickstart", "03_search_and_pruning")
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync"]
PICTURES = ", ".join(f".jp-OutputArea-output {kind}" for kind in (
    "svg", "img", ".js-plotly-plot", ".widget-box"))
LIMIT_S = 900            # a notebook still running after this is reported as not finished
# A picture drawn: one with a box on the page (one folded inside a snapshot has none).
DRAWN = f"() => [...document.querySelectorAll({json.dumps(PICTURES)})]" \
        ".some(e => e.getClientRects().length > 0)"


def start_lab(home: Path) -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(home / "config"),
           "JUPYTERLAB_WORKSPACES_DIR": str(home / "workspaces"),
           "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    cmd = [sys.executable, "-m", "jupyter", "lab", "--no-browser", f"--port={port}",
           "--ip=127.0.0.1", "--ServerApp.token=", "--ServerApp.password=",
           f"--ServerApp.root_dir={home}", "--LabApp.news_url=None",
           "--LabApp.extension_manager=readonly"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")       # Jupyter refuses to run as root without it
    log = (home / "lab.log").open("wb")
    server = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=home)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while True:
        try:
            urllib.request.urlopen(f"{url}/api/status", timeout=2).close()
            return server, url
        except OSError:
            if time.monotonic() > deadline or server.poll() is not None:
                server.kill()
                raise SystemExit("JupyterLab did not start:\n" +
                                 (home / "lab.log").read_text()[-2000:]) from None
            time.sleep(0.5)


def kernel_idle(url: str, path: str) -> bool:
    """Whether the server's kernel of the notebook at `path` says it is idle."""
    with urllib.request.urlopen(f"{url}/api/sessions", timeout=5) as r:
        sessions = json.load(r)
    states = [s["kernel"]["execution_state"] for s in sessions if s.get("path") == path]
    return bool(states) and all(state == "idle" for state in states)


def _ran_all(page: Any, saved: Path) -> bool:
    """Save the notebook from the page and read it back: every code cell has an execution
    count, or one holds an error (Run All stops there)."""
    import nbformat
    before = saved.stat().st_mtime_ns
    page.keyboard.press("Control+s")    # no click first: it might land on a widget's button
    deadline = time.monotonic() + 30
    while saved.stat().st_mtime_ns == before and time.monotonic() < deadline:
        time.sleep(0.1)
    while True:                         # the server may still be writing it
        try:
            nb = nbformat.read(saved, as_version=4)
            break
        except nbformat.reader.NotJSONError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    code = [c for c in nb.cells if c.cell_type == "code"]
    failed = any(o.output_type == "error" for c in code for o in c.outputs)
    return failed or all(c.execution_count for c in code)


def time_notebook(page: Any, url: str, home: Path, stem: str) -> dict[str, Any]:
    import nbformat
    relative = f"notebooks/{stem}.ipynb"
    page.goto(f"{url}/lab/workspaces/times-{stem}/tree/{relative}?reset")
    page.get_by_text("Python 3 (ipykernel) | Idle").first.wait_for(timeout=120_000)
    busy = page.get_by_text("Python 3 (ipykernel) | Busy").first
    started = time.monotonic()
    for _ in range(3):          # a Run All sent before the kernel connects is dropped: again
        page.locator(".jp-Notebook").first.click()
        page.get_by_role("menuitem", name="Run", exact=True).click()
        started = time.monotonic()
        page.get_by_role("menuitem", name="Run All Cells", exact=True).click()
        try:
            busy.wait_for(timeout=10_000)
            break
        except Exception:
            continue
    first = finished = None
    saved = home / relative
    while time.monotonic() - started < LIMIT_S:
        now = time.monotonic() - started
        if first is None and page.evaluate(DRAWN):
            first = now
        if kernel_idle(url, relative) and _ran_all(page, saved):
            finished = now
            break
        time.sleep(0.25)
    nb = nbformat.read(saved, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    errors = [o.get("ename", "?") for c in code for o in c.outputs if o.output_type == "error"]
    return {"notebook": stem, "code_cells": len(code),
            "first_picture_s": None if first is None else round(first, 1),
            "finished_s": None if finished is None else round(finished, 1),
            "ran": sum(1 for c in code if c.execution_count), "errors": errors}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("stems", nargs="*", default=list(DEFAULT), metavar="STEM")
    parser.add_argument("--json", metavar="OUT.json", help="also write the rows here")
    args = parser.parse_args(argv)
    chromium = shutil.which("chromium")
    if chromium is None:
        raise SystemExit("Debian's chromium is not installed (apt-get install chromium)")
    for stem in args.stems:
        if not (ROOT / "notebooks" / f"{stem}.ipynb").is_file():
            raise SystemExit(f"no notebook notebooks/{stem}.ipynb; build it with "
                             "`python notebooks/build.py`")
    from playwright.sync_api import sync_playwright
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        home = Path(folder)
        shutil.copytree(ROOT / "notebooks", home / "notebooks")
        server, url = start_lab(home)
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_FLAGS)
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                for stem in args.stems:
                    rows.append(time_notebook(page, url, home, stem))
                    print(json.dumps(rows[-1]), flush=True)
                browser.close()
        finally:
            server.terminate()
            try:
                server.wait(20)
            except subprocess.TimeoutExpired:
                server.kill()
    print("\n| notebook | first picture (s) | finished (s) | cells ran | errors |")
    print("|---|---:|---:|---:|---|")
    for r in rows:
        print(f"| {r['notebook']} | {r['first_picture_s']} | {r['finished_s']} | "
              f"{r['ran']}/{r['code_cells']} | {', '.join(r['errors']) or 'none'} |")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows}, indent=1) + "\n")
    return 0 if all(r["finished_s"] is not None and not r["errors"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
