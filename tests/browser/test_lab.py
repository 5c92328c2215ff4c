"""The workbench in a real JupyterLab, driven by Playwright with Debian's chromium.

One notebook runs the whole pipeline live on a small RMSNorm+MatMul (interpreter backend, so
tuning takes seconds and its points arrive one by one), then shows the sGraph of the winner's
family and a proof. The test asserts what a user sees, in the browser: the sGraph SVG's
block-graph cluster with its grid and loop range; a pruned family's rule and reason after
choosing it; the proof's steps with axiom names; the tuning plot's point count growing while
tuning runs. Screenshots go to `test-output/browser/` (or $PRISM_TEST_OUTPUT/browser).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest

from prism.expr.axioms import AXIOMS_BY_NAME
from prism.search import RULE_NAMES

ROOT = Path(__file__).resolve().parents[2]
OUTPUT = Path(os.environ.get("PRISM_TEST_OUTPUT", ROOT / "test-output")) / "browser"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync"]
NO_NEWS = {"@jupyterlab/apputils-extension:notification": {"fetchNews": "false",
                                                           "checkForUpdates": False},
           "@jupyterlab/extensionmanager-extension:plugin": {"enabled": False}}

CELLS = [
    # 0: a workbench, ready to run: the test presses its run button in the browser
    """import prism, widgets
from prism.search import SearchConfig
w = prism.get_workload("rmsnorm_matmul").with_shapes(X=(8, 64), W=(64, 64))
cfg = SearchConfig(grid_dims=(1,), max_block_ops=4, block_ops=("matmul", "div", "rms_norm"),
                   accumulators=("nored", "red_ld_rms"), budget_s=120)
bench = widgets.Workbench(w, search_config=cfg, measure="interpret", max_trials=6,
                          compile_ptx=False)
bench.explorer.widget""",
    "bench.tuning.widget",
    # 2-4: a finished run of the same program, its winner's family and a proof
    """result = prism.superoptimize(w, search_config=cfg, max_trials=2, compile_ptx=False)
print('best', result.best.config)""",
    """from widgets.sgraph import SGraphView
SGraphView(result.best.symbolic)""",
    """proved = [e for e in result.trace if e.type == 'CandidateVerified'
          and e.proof['proof_steps'] > 0]
widgets.ProofView(proved[0]).widget""",
]


def write_notebook(path: Path, cells: list[str]) -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nbformat.write(nb, path)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.fail("Debian's chromium is not installed; `make test` installs it "
                    "(apt-get install chromium)")
    home = tmp_path_factory.mktemp("lab")
    settings = Path(sys.prefix) / "share/jupyter/lab/settings"
    settings.mkdir(parents=True, exist_ok=True)
    (settings / "overrides.json").write_text(json.dumps(NO_NEWS))
    write_notebook(home / "workbench.ipynb", CELLS)
    port = free_port()
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(home / "config"),
           "JUPYTERLAB_WORKSPACES_DIR": str(home / "workspaces"),
           "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    cmd = [sys.executable, "-m", "jupyter", "lab", "--no-browser", f"--port={port}",
           "--ip=127.0.0.1", "--ServerApp.token=", "--ServerApp.password=",
           f"--ServerApp.root_dir={home}", "--LabApp.news_url=None",
           "--LabApp.extension_manager=readonly"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")
    log = (home / "lab.log").open("w")
    server = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=home)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while True:
        try:
            urllib.request.urlopen(f"{url}/api/status", timeout=2)
            break
        except OSError:
            if time.monotonic() > deadline or server.poll() is not None:
                server.kill()
                pytest.fail(f"JupyterLab did not start: {(home / 'lab.log').read_text()[-2000:]}")
            time.sleep(0.5)
    yield {"url": url, "chromium": chromium, "home": home}
    server.terminate()
    try:
        server.wait(20)
    except subprocess.TimeoutExpired:
        server.kill()
    log.close()


def test_the_workbench_in_a_real_browser(lab):
    with browser_page(lab, "final.png") as page:
        run_notebook(page, lab)


@contextlib.contextmanager
def browser_page(lab, final: str):
    """A Chromium page for the lab; on the way out, whatever happened, a full-page screenshot
    `final` (what the page showed when a test failed) and the browser closed."""
    from playwright.sync_api import sync_playwright

    OUTPUT.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=lab["chromium"], args=CHROMIUM_FLAGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        try:
            yield page
        finally:
            page.screenshot(path=str(OUTPUT / final), full_page=True)
            browser.close()


def shot(page, element, name: str) -> None:
    """A screenshot of the page with `element` scrolled into view (Lab draws only what is in
    view, so element screenshots of long outputs come out clipped)."""
    element.scroll_into_view_if_needed()
    page.wait_for_timeout(300)
    page.screenshot(path=str(OUTPUT / name))


def outputs(page, index: int):
    """The output area of code cell `index`."""
    return page.locator(".jp-Notebook .jp-Cell").nth(index).locator(".jp-OutputArea-output")


def open_and_run_all(page, lab, workspace: str, notebook: str) -> None:
    """Open `notebook` in a fresh workspace, wait for its kernel, and Run All Cells until the
    first cell shows an output."""
    page.goto(f"{lab['url']}/lab/workspaces/{workspace}/tree/{notebook}?reset")
    page.wait_for_selector(".jp-Notebook", timeout=60_000)
    page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']",
                           timeout=60_000)
    page.get_by_text("Python 3 (ipykernel) | Idle").first.wait_for(timeout=60_000)
    for _ in range(3):     # a Run All sent before the kernel connects is dropped: send again
        page.locator(".jp-Notebook").first.click()
        page.get_by_role("menuitem", name="Run", exact=True).click()
        page.get_by_role("menuitem", name="Run All Cells", exact=True).click()
        try:
            outputs(page, 0).first.wait_for(timeout=30_000)
            break
        except Exception:
            continue


def run_notebook(page, lab) -> None:
    open_and_run_all(page, lab, "test", "workbench.ipynb")
    outputs(page, 2).filter(has_text="best").first.wait_for(timeout=300_000)
    plot = outputs(page, 1).locator(".js-plotly-plot")
    plot.first.wait_for(timeout=60_000)
    assert plot.first.locator(".scatterlayer .point").count() == 0    # nothing run yet

    # press run in the explorer: the live run fills the tuning plot, point by point. Every
    # count the page shows is recorded as it changes (a fast run can draw many points between
    # two samples of the loop below).
    outputs(page, 1).first.evaluate(
        """(area) => { window.prismCounts = [];
             new MutationObserver(() => window.prismCounts.push(
                 area.querySelectorAll('.scatterlayer .point').length))
               .observe(area, {childList: true, subtree: true}); }""")
    outputs(page, 0).get_by_role("button", name="run").click()
    counts: list[int] = []
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        counts.append(plot.first.locator(".scatterlayer .point").count())
        # 20 s without a new point: done (the interpreted finalists follow the modeled
        # screening after a compile that takes seconds on a loaded 2-core machine)
        if counts[-1] and len(counts) > 100 and counts[-1] == counts[-100]:
            break
        time.sleep(0.2)
    page.screenshot(path=str(OUTPUT / "tuning.png"), full_page=True)
    grown = sorted(set(counts) | set(page.evaluate("window.prismCounts")))
    assert len(grown) >= 3 and grown[-1] > grown[1] > 0, \
        f"the plot's points should grow while tuning runs; counts seen: {grown}"

    # the sGraph: the block-graph cluster with its grid and loop range, drawn as SVG
    svg = outputs(page, 3).locator("svg").first
    svg.wait_for(timeout=120_000)
    cluster = svg.locator("text", has_text="custom kernel 0: grid")
    assert cluster.count() >= 1, "no block-graph cluster label in the sGraph SVG"
    label = " ".join(t.text_content() or "" for t in cluster.all())
    assert "forloop range" in label and "block 128 threads" in label, label
    shot(page, cluster.first, "sgraph.png")

    # a pruned family: filter by status, choose the first row, see its rule and reason
    explorer = outputs(page, 0)
    explorer.locator("select").nth(1).select_option("pruned")      # the status filter
    page.wait_for_timeout(500)
    rows = explorer.locator("select").nth(2)                         # the row chooser
    first = rows.locator("option").nth(0).get_attribute("value")
    rows.select_option(index=0)
    detail = explorer.locator(".widget-html-content").filter(has_text="pruned by")
    detail.first.wait_for(timeout=30_000)
    text = detail.first.inner_text()
    rule = next((r for r in RULE_NAMES
                 if f"pruned by {r}:" in text), None)
    assert rule is not None, text                       # the rule ...
    reason = text.split(f"pruned by {rule}:", 1)[1].strip()
    assert len(reason) > 10, text                       # ... and its reason, in words
    shot(page, detail.first, "explorer.png")
    assert first is not None

    # the proof: numbered steps, each naming its axiom
    proof = outputs(page, 4)
    proof.locator("li").first.wait_for(timeout=60_000)
    names = [b.text_content() for b in proof.locator("li > div:first-child > b").all()]
    assert names and all(n in AXIOMS_BY_NAME for n in names), names     # the axiom table's
    assert proof.locator("li mark").count() >= len(names)        # the rewritten subterms
    assert proof.locator("svg text", has_text="class").count() >= 2   # the e-graph picture
    # the picture fits the output's width (it was clipped on the right), and folds away
    fold = proof.locator("details.prism-fitted").first
    picture, area = fold.locator("svg").first.bounding_box(), fold.bounding_box()
    assert picture and area and picture["x"] + picture["width"] <= area["x"] + area["width"] + 1
    fold.locator("summary").click()
    assert not fold.locator("svg").first.is_visible()
    fold.locator("summary").click()
    shot(page, proof.first, "proof.png")


# A run started paused; the next cell awaits it. The kernel is busy in that cell, so the cell
# can only end if the run button, clicked in the browser, acts while it waits.
CONTROL_CELLS = [
    """import prism, widgets
from prism.search import SearchConfig
w = prism.get_workload("rmsnorm_matmul").with_shapes(X=(8, 64), W=(64, 64))
cfg = SearchConfig(grid_dims=(1,), max_block_ops=4, block_ops=("matmul", "div", "rms_norm"),
                   accumulators=("nored", "red_ld_rms"), budget_s=120)
bench = widgets.Workbench(w, search_config=cfg, max_trials=2, compile_ptx=False)
bench.run(paused=True)
bench.explorer.widget""",
    """result = await bench.wait()
print("ended:", result.search.stop_reason, "· best", result.best.config)""",
]


def test_the_buttons_act_while_a_later_cell_awaits_the_run(lab):
    write_notebook(lab["home"] / "controls.ipynb", CONTROL_CELLS)
    with browser_page(lab, "controls.png") as page:
        open_and_run_all(page, lab, "controls", "controls.ipynb")
        explorer = outputs(page, 0)
        # held at its first event, and the view says the pause took effect
        explorer.get_by_text("took effect after 0 families").first.wait_for(
            timeout=60_000)
        assert "the budget clock is stopped" in (explorer.first.text_content() or "")
        page.wait_for_timeout(1000)
        assert outputs(page, 1).count() == 0            # the awaiting cell is still busy
        shot(page, explorer.first, "controls-paused.png")
        explorer.get_by_role("button", name="run").click()
        ended = outputs(page, 1).filter(has_text="ended:")
        ended.first.wait_for(timeout=300_000)
        assert "ended: exhausted" in (ended.first.text_content() or "")
        explorer.get_by_text("finished").first.wait_for(timeout=30_000)
        assert "s paused, not counted" in (explorer.first.text_content() or "")


# The per-block view of the known-best RMSNorm+MatMul: grid 4 over W's 64 columns (16 a block),
# loop 2 over d = 64 (32 an iteration), X replicated.
BLOCK_CELLS = [
    """import widgets
from prism.workloads.known_best import known_best
view = widgets.BlockView(known_best("rmsnorm_matmul", {"X": (8, 64), "W": (64, 64)},
                                    grid=4, loop=2))
view""",
]


def test_the_per_block_view_follows_its_controls(lab):
    write_notebook(lab["home"] / "blocks.ipynb", BLOCK_CELLS)
    with browser_page(lab, "blocks-final.png") as page:
        open_and_run_all(page, lab, "blocks", "blocks.ipynb")
        view = outputs(page, 0).first       # the live view (its snapshot follows it)
        line = view.locator(".prism-block-line")
        line.first.wait_for(timeout=60_000)
        read = view.locator("rect.prism-tile-read")

        def shown() -> tuple[str, list[str | None]]:
            return (line.first.inner_text(),
                    [r.get_attribute("data-range") for r in read.all()])

        def until(text: str) -> None:
            view.locator(".prism-block-line", has_text=text).first.wait_for(timeout=30_000)

        text, ranges = shown()
        assert "block (0,) iteration 0 reads X[0:8, 0:32] and W[0:32, 0:16]" in text, text
        assert ranges == ["0:8,0:32", "0:32,0:16"], ranges
        w_left = read.nth(1).bounding_box()
        assert w_left is not None

        # the block slider, moved with the keyboard as a user does: two blocks to the right
        handles = view.locator(".widget-slider .noUi-handle")
        handles.nth(0).focus()
        page.keyboard.press("ArrowRight")
        page.keyboard.press("ArrowRight")
        until("block (2,) iteration 0")
        text, ranges = shown()
        assert "reads X[0:8, 0:32] and W[0:32, 32:48]" in text, text
        assert ranges == ["0:8,0:32", "0:32,32:48"], ranges
        moved = read.nth(1).bounding_box()
        assert moved is not None and moved["x"] > w_left["x"] + 10    # W's tile went right

        # the iteration slider: the loop walks X's columns and W's rows, the block stays
        handles.nth(1).focus()
        page.keyboard.press("ArrowRight")
        until("block (2,) iteration 1")
        text, ranges = shown()
        out = "writes custom[0:8, 32:48] after the loop"
        assert "reads X[0:8, 32:64] and W[32:64, 32:48]; " + out in text, text
        assert ranges == ["0:8,32:64", "32:64,32:48"], ranges
        down = read.nth(1).bounding_box()
        assert down is not None and down["y"] > moved["y"] + 10      # W's tile went down
        written = view.locator("rect.prism-tile-write")
        assert [r.get_attribute("data-range") for r in written.all()] == ["0:8,32:48"]
        assert view.locator("abbr", has_text="imap").count() >= 2     # glossary hover
        shot(page, view.first, "blocks.png")

        # step: past the last iteration, on to the next block
        view.get_by_role("button", name="step").click()
        until("block (3,) iteration 0")
        text, ranges = shown()
        assert "reads X[0:8, 0:32] and W[0:32, 48:64]" in text, text
        assert ranges == ["0:8,0:32", "0:32,48:64"], ranges


# A finished run that kept every family's partial sGraph, replayed into a workbench: its search
# tab opens on the tree. The cell prints what the test looks for: the top family, the groups its
# children form (as the tree labels them), a deep pruned family, two candidates.
TREE_CELLS = [
    """import dataclasses, prism, widgets
from prism.search import SearchConfig
from widgets.tree import group_text
w = prism.get_workload("rmsnorm_matmul").with_shapes(X=(8, 64), W=(64, 64))
cfg = SearchConfig(grid_dims=(1,), max_block_ops=4, block_ops=("matmul", "div", "rms_norm"),
                   accumulators=("nored", "red_ld_rms"), budget_s=120, record_graphs=True)
result = prism.superoptimize(w, search_config=cfg, max_trials=2, compile_ptx=False)
bench = widgets.Workbench.from_trace(result.trace)
state = bench.explorer.state
top = max(state.children(None), key=lambda f: len(state.children(f)))
deep = max(state.filter(status="pruned", page_size=10**6), key=lambda n: len(state.ancestors(n.id)))
pair = [n.id for n in state.filter(status="verified", page_size=2)]
print("top", top, "deep", deep.id, "pair", *pair)
for g in state.groups(top):
    print("group", group_text(g))
bench""",
]


def test_the_search_as_a_tree(lab):
    write_notebook(lab["home"] / "tree.ipynb", TREE_CELLS)
    with browser_page(lab, "tree-final.png") as page:
        open_and_run_all(page, lab, "tree", "tree.ipynb")
        out = outputs(page, 0)
        tree = out.locator(".prism-tree")
        tree.first.wait_for(timeout=120_000)
        printed = out.filter(has_text="deep").first.inner_text()
        words = printed.split("\n")[0].split()
        top, deep, first, second = words[1], words[3], words[5], words[6]
        groups = [line.split("group ", 1)[1] for line in printed.split("\n")
                  if line.startswith("group ")]
        assert groups, printed
        root = tree.locator(".prism-tree-node").first
        assert "families" in root.inner_text() and "pruned (" in root.inner_text()

        # expand the top family: its children, grouped by rule and reason, with counts
        node = tree.locator(f".prism-tree-node[data-id='{top}']")
        node.locator(".prism-tree-toggle").click()
        drawn = tree.locator(".prism-tree-group")
        drawn.nth(len(groups)).wait_for(timeout=30_000)     # the root's groups, then these
        shown = [drawn.nth(i).inner_text().strip(" ▸▾\u00a0") for i in range(drawn.count())]
        for label in groups:
            assert label in shown, (label, shown)
        assert any(" children — " in label for label in groups), groups
        shot(page, tree.first, "tree.png")

        # jump to a deep family: the tree opens down to it and selects it
        box = out.get_by_placeholder("f123 or c45, then enter")
        box.fill(deep)
        box.press("Enter")
        chosen = tree.locator(f".prism-tree-node.selected[data-id='{deep}']")
        chosen.wait_for(timeout=30_000)
        detail = out.locator(".widget-html-content").filter(has_text=f"{deep} — pruned")
        detail.first.wait_for(timeout=30_000)
        assert "pruned by" in detail.first.inner_text()
        assert out.locator(".widget-html-content svg").count() >= 1     # its partial sGraph

        # click another row: its decision replaces the first
        other = tree.locator(".prism-tree-node[data-id]:not(.selected)").last
        other_id = other.get_attribute("data-id")
        other.click()
        tree.locator(f".prism-tree-node.selected[data-id='{other_id}']").wait_for(
            timeout=30_000)
        out.locator(".widget-html-content").filter(
            has_text=f"{other_id} — ").first.wait_for(timeout=30_000)
        shot(page, chosen.first if chosen.count() else tree.first, "tree-selected.png")

        # two candidates side by side: graphs, proofs, the structural diff
        for placeholder, cid in (("c1", first), ("c2", second)):
            field = out.get_by_placeholder(placeholder, exact=True)
            field.fill(cid)
            field.press("Enter")
        compare = out.locator(".widget-html-content").filter(has_text="structural diff")
        compare.first.wait_for(timeout=30_000)
        assert compare.first.locator("table.prism-compare svg").count() >= 2
        text = compare.first.inner_text()
        assert f"--- {first}" in text and f"+++ {second}" in text
        assert compare.first.locator("li").count() >= 1 or "proof" in text.lower()
        shot(page, compare.first, "tree-compare.png")


# A live workbench and, in the next cell, its end awaited (the quickstart's pattern): the first
# cell's output is the widget, then its static snapshot, which the finished run rewrites.
SNAPSHOT_CELLS = [
    """import prism, widgets
from prism.search import SearchConfig
w = prism.get_workload("rmsnorm_matmul").with_shapes(X=(8, 64), W=(64, 64))
cfg = SearchConfig(grid_dims=(1,), max_block_ops=4, block_ops=("matmul", "div", "rms_norm"),
                   accumulators=("nored", "red_ld_rms"), budget_s=120)
bench = widgets.Workbench(w, search_config=cfg, max_trials=2, compile_ptx=False)
bench.run()""",
    """result = await bench.wait()
print("best", result.best.config, repr(result.best.latency_us), result.best.latency_kind)""",
]


def kernel_ids(url: str) -> list[str]:
    with urllib.request.urlopen(f"{url}/api/kernels", timeout=10) as r:
        return [k["id"] for k in json.load(r)]


def shut_down_kernels(page) -> int:
    """Shut every kernel down through the server's REST API, from the page (whose `_xsrf`
    cookie the server asks of a DELETE); returns how many there were."""
    return int(page.evaluate("""async () => {
        const xsrf = decodeURIComponent((document.cookie.match(/_xsrf=([^;]+)/) || [])[1] || "");
        const kernels = await (await fetch("/api/kernels")).json();
        for (const k of kernels) {
          const r = await fetch(`/api/kernels/${k.id}`,
                                {method: "DELETE", headers: {"X-XSRFToken": xsrf}});
          if (!r.ok) throw new Error(`DELETE kernel ${k.id}: ${r.status}`);
        }
        return kernels.length; }"""))


def test_a_saved_workbench_still_shows_its_snapshot_with_the_kernel_gone_and_exported(lab):
    """Run, save, shut the kernel down, reload the page: the widget's model is gone, and the
    snapshot below it still names the best kernel with its latency and kind (the values the
    engine printed: the oracle). The saved file and its nbconvert HTML hold the same."""
    path = lab["home"] / "snapshot.ipynb"
    write_notebook(path, SNAPSHOT_CELLS)
    with browser_page(lab, "snapshot-final.png") as page:
        open_and_run_all(page, lab, "snapshot", "snapshot.ipynb")
        printed = outputs(page, 1).filter(has_text="best ")
        printed.first.wait_for(timeout=300_000)
        _, best, latency, kind = printed.first.inner_text().split()[:4]
        summary = outputs(page, 0).locator(".prism-snapshot summary")
        summary.filter(has_text=f"best kernel {best}").first.wait_for(timeout=30_000)
        page.locator(".jp-Notebook").first.click()
        page.keyboard.press("Control+s")
        deadline = time.monotonic() + 60
        while best not in path.read_text():           # saved, with the finished snapshot
            assert time.monotonic() < deadline, "the notebook was not saved"
            time.sleep(0.5)
        assert shut_down_kernels(page) >= 1 and kernel_ids(lab["url"]) == []
        page.goto(f"{lab['url']}/lab/workspaces/snapshot2/tree/snapshot.ipynb?reset")
        page.wait_for_selector(".jp-Notebook", timeout=60_000)
        shown = outputs(page, 0).locator(".prism-snapshot summary")
        shown.first.wait_for(timeout=60_000)
        text = shown.first.inner_text()
        found = re.search(r"best kernel (\S+): ([0-9.e+-]+) µs \((\w+)\)", text)
        assert found, text
        assert found.group(1) == best and found.group(3) == kind
        assert math.isclose(float(found.group(2)), float(latency), rel_tol=1e-3)
        shown.first.click()                            # unfolded: the run's page
        body = outputs(page, 0).locator(".prism-snapshot-body")
        body.locator("svg").first.wait_for(timeout=30_000)
        assert best in body.first.inner_text()
        shot(page, shown.first, "snapshot-reopened.png")
    saved = nbformat.read(path, as_version=4)
    kinds = [[sorted(o.get("data", {})) for o in cell.outputs] for cell in saved.cells]
    assert "application/vnd.jupyter.widget-view+json" in kinds[0][0]   # the widget, then ...
    assert kinds[0][1] == ["text/html"]                                 # ... its snapshot
    exported = subprocess.run([sys.executable, "-m", "jupyter", "nbconvert", "--to", "html",
                               "--stdout", str(path)], capture_output=True, text=True,
                              timeout=300, check=True).stdout
    snapshot = exported.split("prism-snapshot-summary", 1)[1]
    assert f"best kernel <code>{best}</code>" in snapshot and f"({kind})" in snapshot


# A deliberately unsound rule (notebook 07's: no RMS inside the loop), audited for real; the
# tree over the audit's own trace (its families numbered as the report's) marks the findings.
AUDIT_CELLS = [
    """import dataclasses, prism, widgets
from prism.cost import get_device
from prism.search import SearchConfig, audit
from prism.search.pruning import Pruned
from prism.trace import Tracer
RULE = "rms_needs_whole_rows"
def rms_needs_whole_rows(ctx, family):
    if family.level != "block" or family.kind not in ("rms_norm", "red_ld_rms"):
        return None
    tile = family.block.tensors[family.operands[0]]
    if tile.post:
        return None
    return Pruned(RULE, f"{family.kind}({tile.name}) takes an RMS inside the loop",
                  {"claim": "no_equivalent", "tensor": tile.name})
w = prism.get_workload("rmsnorm_matmul").with_shapes(X=(8, 64), W=(64, 64))
device = dataclasses.replace(get_device("h100"), smem_bytes=1536)
cfg = SearchConfig(grid_dims=(1,), max_block_ops=4, block_ops=("matmul", "div", "rms_norm"),
                   accumulators=("nored", "red_ld_rms"), kernel_ops=("matmul", "rms_norm"),
                   max_kernel_ops=2, budget_s=120, device=device,
                   rules=((RULE, rms_needs_whole_rows),))
seen = Tracer()
report = audit(w.graph, RULE, cfg, tracer=seen)
tree = widgets.SearchTree.from_events(seen.events)
tree.show_audit(report)
wrong = report.wrong[0]["family"]
tree.jump_to(wrong)
print("audit sound", report.sound, "findings", len(report.wrong), "family", wrong)
tree""",
]


def test_a_real_audit_of_an_unsound_rule_is_marked_in_the_tree(lab):
    write_notebook(lab["home"] / "audit.ipynb", AUDIT_CELLS)
    with browser_page(lab, "audit-final.png") as page:
        open_and_run_all(page, lab, "audit", "audit.ipynb")
        out = outputs(page, 0)
        printed = out.filter(has_text="audit sound")
        printed.first.wait_for(timeout=300_000)
        words = printed.first.inner_text().split()
        assert words[2] == "False" and int(words[4]) >= 1, words   # the audit found it
        family = words[6]
        row = out.locator(f".prism-tree .prism-tree-node[data-id='{family}']")
        row.first.wait_for(timeout=60_000)
        mark = row.first.locator(".prism-tree-mark")
        assert "audit: wrongly pruned" in mark.inner_text()
        root = out.locator(".prism-tree .prism-tree-node").first
        assert "audit finding" in root.inner_text()           # counted up to the root
        shot(page, row.first, "tree-audit.png")


# A live workbench writing into a folder (`out=`), and in the next cell its result, printed: the
# oracle of what the candidates tab shows. The cell prints the winner's id, latency and kind,
# its block graph's compute ops (kind and output), its proof's axioms and its PTX's kernels.
WINNER_CELLS = [
    """import prism, widgets
from prism.search import SearchConfig
w = prism.get_workload("rmsnorm_matmul").with_shapes(X=(8, 64), W=(64, 64))
cfg = SearchConfig(grid_dims=(1,), max_block_ops=4, block_ops=("matmul", "div", "rms_norm"),
                   accumulators=("nored", "red_ld_rms"), budget_s=120)
bench = widgets.Workbench(w, search_config=cfg, max_trials=2, out="winner-out")
bench.run()""",
    """result = await bench.wait()
b = result.best
print("best", b.config, repr(b.latency_us), b.latency_kind, b.candidate)
print("ops", *(f"{op.kind}:{op.outputs[0]}" for k in b.graph.ops if k.block is not None
              for op in k.block.ops if op.kind not in ("input", "output")))
print("steps", *(s.rule for out in b.verdict.steps for s in out))
print("ptx", *sorted(b.ptx))""",
]

# The exported kernel.py, imported as a user would, run under Triton's interpreter on the
# workload's inputs and held to the float64 interpreter of the input program (fp16 tolerance).
RUN_EXPORTED = """
import importlib.util, sys
import numpy as np, torch, prism
from prism.ir.interpret import interpret
from prism.tune.backends import random_inputs
spec = importlib.util.spec_from_file_location("exported", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
program = prism.get_workload("rmsnorm_matmul").with_shapes(X=(8, 64), W=(64, 64)).graph
inputs = random_inputs(program)
want = interpret(program, *(x.astype(np.float64) for x in inputs))
with np.errstate(all="ignore"):     # padded rows are 0/0 in the interpreter's numpy
    got = module.run(*(torch.tensor(x, dtype=torch.float16) for x in inputs))
got = got if isinstance(got, (tuple, list)) else (got,)
for g, w in zip(got, want, strict=True):
    np.testing.assert_allclose(g.float().numpy(), w, rtol=2e-2, atol=2e-2)
print("matches", len(want))
"""


def printed_lines(area) -> dict[str, list[str]]:
    """A cell's printed lines, each as its first word → the words after it."""
    return {line.split()[0]: line.split()[1:]
            for line in area.inner_text().split("\n") if line.strip()}


def test_the_winner_is_shown_lit_by_op_and_exported(lab):
    """After a run, the candidates tab opens on the winner: its id, latency and kind as the
    result says, its proof's axioms as its verdict has them, its Triton source as the run wrote
    it, each block-graph op's lines lit on choosing the op; the export button writes kernel.py,
    the PTX and the report, and the kernel computes the program."""
    write_notebook(lab["home"] / "winner.ipynb", WINNER_CELLS)
    folder = lab["home"] / "winner-out"
    with browser_page(lab, "winner-final.png") as page:
        open_and_run_all(page, lab, "winner", "winner.ipynb")
        printed = outputs(page, 1).filter(has_text="steps")
        printed.first.wait_for(timeout=300_000)
        said = printed_lines(printed.first)
        best, latency, kind, candidate = said["best"]
        ops = [op.split(":") for op in said["ops"]]
        assert ops and said["steps"] and said["ptx"], said
        # the run's own files (out=): the oracle of the source shown, then set aside so
        # that the export button has to write them again
        written = (folder / "kernel.py").read_text()
        for name in ("kernel.py", "kernel.ptx", "report.html"):
            (folder / name).unlink()

        out = outputs(page, 0)
        out.get_by_role("tab", name="candidates").click()
        head = out.locator(".widget-html-content h4", has_text="best kernel")
        head.first.wait_for(timeout=60_000)
        chooser = out.locator("select").filter(has_text="best kernel").first
        shown = chooser.evaluate("s => s.options[s.selectedIndex].text")
        assert shown.replace("\xa0", " ") == "best kernel"    # by default
        assert head.first.inner_text() == f"best kernel {best} (candidate {candidate})"
        numbers = head.first.locator("xpath=following-sibling::p").first.inner_text()
        found = re.match(r"([0-9.e+-]+) µs \((\w+)\)", numbers)
        assert found, numbers
        assert math.isclose(float(found.group(1)), float(latency), rel_tol=1e-3), numbers
        assert found.group(2) == kind, numbers
        detail = out.locator(".widget-vbox",
                             has=page.locator("h4", has_text="best kernel")).last
        axioms = [b.text_content() for b in detail.locator("li > div:first-child > b").all()]
        assert axioms == said["steps"], axioms                # the verdict's proof, in order
        source = detail.locator("pre.prism-source").first
        assert (source.text_content() or "").rstrip("\n") == written.rstrip("\n")
        shot(page, head.first, "winner.png")

        # each compute op of the winner's block graph: choosing it lights its lines, which
        # open with the generator's comment naming the op and assign its output
        kernels = re.findall(r"@triton\.jit\ndef (\w+)\(", written)
        assert len(kernels) == 1, kernels
        op_choice = detail.locator("select").filter(
            has_text="(choose an op to light its lines)").first
        for op_kind, name in ops:
            key = f"{kernels[0]}/{name}"
            op_choice.select_option(label=key)
            lit = source.locator("span[data-op][style*='background']")
            source.locator(f"span[data-op='{key}'][style*='background']").first.wait_for(
                timeout=30_000)
            assert {s.get_attribute("data-op") for s in lit.all()} == {key}
            text = "\n".join(s.text_content() or "" for s in lit.all())
            assert text.lstrip().startswith(f"# {name} = {op_kind}("), text
            assert re.search(rf"^\s+{name} (\+)?= ", text, re.M), text
            assert all(line in written for line in text.split("\n")), text
            others = [n for _, n in ops if n != name]
            assert not any(re.search(rf"^\s+{n} = ", text, re.M) for n in others), text
        shot(page, lit.first, "winner-source.png")
        # and back: a click on another op's lines chooses it in the chooser and lights it
        first_key = f"{kernels[0]}/{ops[0][1]}"
        source.locator(f"span[data-op='{first_key}']").first.click()
        source.locator(f"span[data-op='{first_key}'][style*='background']").first.wait_for(
            timeout=30_000)
        assert op_choice.input_value() != "" and \
            op_choice.locator("option:checked").text_content() == first_key

        # export: kernel.py (the run's own), the PTX of each of its kernels, the report
        out.get_by_role("button", name="export the best kernel").click()
        wrote = out.locator(".widget-html-content", has_text="wrote")
        wrote.first.wait_for(timeout=60_000)
        for name in ("kernel.py", "kernel.ptx", "report.html"):
            assert (folder / name).is_file(), name
            assert name in wrote.first.inner_text()
        assert (folder / "kernel.py").read_text() == written
        ptx = (folder / "kernel.ptx").read_text()
        assert said["ptx"] == kernels and all(f".entry {k}(" in ptx for k in kernels)
        assert best in (folder / "report.html").read_text()
        shot(page, wrote.first, "winner-exported.png")
    ran = subprocess.run([sys.executable, "-c", RUN_EXPORTED, str(folder / "kernel.py")],
                         capture_output=True, text=True, timeout=300,
                         env={**os.environ, "TRITON_INTERPRET": "1",
                              "PYTHONPATH": str(ROOT)})
    assert ran.returncode == 0 and "matches 1" in ran.stdout, ran.stderr[-3000:]


# A live run with the interpreter backend, held just after tuning's first interpreted
# measurement (the events of a run of this program come in the same order every time, so a
# first run says how many to step through), cancelled from the browser there; the next cell
# prints the result, the last replays the run's trace.
CANCEL_CELLS = [
    """import prism, widgets
from prism.search import SearchConfig
from prism.trace import Measured
w = prism.get_workload("rmsnorm_matmul").with_shapes(X=(8, 64), W=(64, 64))
cfg = SearchConfig(grid_dims=(1,), max_block_ops=4, block_ops=("matmul", "div", "rms_norm"),
                   accumulators=("nored", "red_ld_rms"), budget_s=120)
dry = prism.superoptimize(w, search_config=cfg, measure="interpret", max_trials=6,
                          compile_ptx=False)
first = next(i for i, e in enumerate(dry.trace)
             if isinstance(e, Measured) and e.kind == "interpreted")
bench = widgets.Workbench(w, search_config=cfg, measure="interpret", max_trials=6,
                          compile_ptx=False, out="cancel-out")
bench.run(paused=True)
bench.explorer.step(first + 1)
print("held", first + 1)
bench""",
    """result = await bench.wait()
finalists = result.tuning.finalists
print("best", result.best.config, repr(result.best.latency_us), result.best.latency_kind)
print("finalists", len(finalists), "measured", sum(t.ok for t in finalists),
      "not_measured", sum(t.not_measured == "cancelled" for t in finalists),
      "failed", sum(t.failed for t in finalists), "stopped", result.tuning.stopped)
print("measurements", sum(e.type == "Measured" for e in result.trace))
print("families", result.search.generated)
print("search_complete", result.search.complete)""",
    """replay = widgets.Workbench.from_trace(result.files["trace"])
replay""",
]

CONTROLS = ("run", "pause", "step", "cancel")


def controls_shown(area) -> list[str]:
    """The live run's buttons that `area` shows (a hidden button is not shown)."""
    names = [b.inner_text().strip() for b in
             area.locator("button.widget-button").filter(visible=True).all()]
    return [n for n in names if n in CONTROLS]


def test_a_cancelled_run_keeps_its_best_and_what_it_measured(lab):
    """Cancel from the browser during tuning: the page says the cancel took effect; the best
    shown is `result.best`; the finalists never run are "not measured (cancelled)", not
    failures; one word, "best"; the run's replay shows no live controls."""
    write_notebook(lab["home"] / "cancel.ipynb", CANCEL_CELLS)
    with browser_page(lab, "cancelled-final.png") as page:
        open_and_run_all(page, lab, "cancel", "cancel.ipynb")
        out = outputs(page, 0)
        held = out.filter(has_text=re.compile(r"held \d+")).first
        held.wait_for(timeout=300_000)
        events = int(printed_lines(held)["held"][0])
        # held where the cell stepped it: paused, that many events in
        progress = out.locator(".widget-html-content", has_text=f"· {events} events ·")
        progress.first.wait_for(timeout=300_000)
        assert progress.first.inner_text().startswith("paused"), progress.first.inner_text()
        assert controls_shown(out) == list(CONTROLS)
        out.locator("button.widget-button", has_text="cancel").first.click()

        printed = outputs(page, 1).filter(has_text="measurements")
        printed.first.wait_for(timeout=300_000)
        said = printed_lines(printed.first)
        best, latency, kind = said["best"]
        counts = dict(zip(said["finalists"][1::2], said["finalists"][2::2], strict=True))
        assert said["finalists"][0] == str(sum(int(counts[k]) for k in
                                               ("measured", "not_measured")))
        assert int(counts["measured"]) >= 1 and int(counts["not_measured"]) >= 1, said
        assert counts["failed"] == "0" and counts["stopped"] == "cancelled", said
        # the explorer says the cancel took effect, and that the search had finished (the
        # result's search is complete: tuning is what the cancel stopped)
        progress = out.locator(".widget-html-content", has_text="after the click").first
        progress.wait_for(timeout=30_000)
        assert said["search_complete"] == ["True"], said
        assert "cancelled after the search finished" in (progress.inner_text() or "")

        # the tuning tab: what was measured, the rest not measured (cancelled) and not
        # failed, and the best as the result has it
        out.get_by_role("tab", name="tuning").click()
        header = out.locator(".widget-html-content", has_text="measurements,").first
        header.wait_for(timeout=30_000)
        text = header.inner_text()
        assert f"{said['measurements'][0]} measurements, 0 failed" in text, text
        assert f"{counts['not_measured']} not measured (cancelled)" in text, text
        found = re.search(r"best (\S+): ([0-9.e+-]+) µs \((\w+)\)", text)
        assert found and found.group(1) == best and found.group(3) == kind, text
        assert math.isclose(float(found.group(2)), float(latency), rel_tol=1e-3), text
        assert out.locator(".widget-html-content", has_text="no failed configurations").first \
            .is_visible()
        shot(page, header, "cancelled.png")

        # the candidates tab: the same best, its check not run (and saying why)
        out.get_by_role("tab", name="candidates").click()
        head = out.locator(".widget-html-content h4", has_text="best kernel").first
        head.wait_for(timeout=60_000)
        assert head.inner_text().startswith(f"best kernel {best} ")
        numbers = head.locator("xpath=following-sibling::p").first.inner_text()
        assert numbers.startswith(f"{float(latency):.4g} µs ({kind})"), numbers
        assert "check: not run: the run was cancelled" in numbers, numbers
        shot(page, head, "cancelled-best.png")
        everything = " ".join(o.text_content() or "" for o in out.all())
        assert not re.search(r"\bchosen\b", everything, re.I)      # one word: "best"

        # the replay: the same best, and its search tab (where a live run's controls are)
        # shows the run's progress and no controls
        replay = outputs(page, 2)
        replay.get_by_role("tab", name="candidates").wait_for(timeout=60_000)
        replay.get_by_role("tab", name="candidates").click()
        replay.locator(".widget-html-content h4", has_text=f"best kernel {best} ").first \
            .wait_for(timeout=60_000)
        replay.get_by_role("tab", name="search").click()
        shown = replay.locator(".widget-html-content", has_text=" events · ").first
        shown.wait_for(state="visible", timeout=30_000)
        assert f"· {said['families'][0]} families (" in shown.inner_text()
        assert controls_shown(replay) == []
        shot(page, replay.first, "cancelled-replay.png")
