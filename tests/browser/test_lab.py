"""The workbench in a real JupyterLab, driven by Playwright with Debian's chromium.

One notebook runs the whole pipeline live on a small RMSNorm+MatMul (interpreter backend, so
tuning takes seconds and its points arrive one by one), then shows the sGraph of the winner's
family and a proof. The test asserts what a user sees, in the browser: the sGraph SVG's
block-graph cluster with its grid and loop range; a pruned family's rule and reason after
choosing it; the proof's steps with axiom names; the tuning plot's point count growing while
tuning runs. Screenshots go to `test-output/browser/` (or $PRISM_TEST_OUTPUT/browser).
"""

from __future__ import annotations

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
    from playwright.sync_api import sync_playwright

    OUTPUT.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=lab["chromium"], args=CHROMIUM_FLAGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        try:
            run_notebook(page, lab)
        finally:
            page.screenshot(path=str(OUTPUT / "final.png"), full_page=True)
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
    from playwright.sync_api import sync_playwright

    write_notebook(lab["home"] / "controls.ipynb", CONTROL_CELLS)
    OUTPUT.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=lab["chromium"], args=CHROMIUM_FLAGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        try:
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
        finally:
            page.screenshot(path=str(OUTPUT / "controls.png"), full_page=True)
            browser.close()


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
    from playwright.sync_api import sync_playwright

    write_notebook(lab["home"] / "blocks.ipynb", BLOCK_CELLS)
    OUTPUT.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=lab["chromium"], args=CHROMIUM_FLAGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        try:
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
        finally:
            page.screenshot(path=str(OUTPUT / "blocks-final.png"), full_page=True)
            browser.close()


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
    from playwright.sync_api import sync_playwright

    write_notebook(lab["home"] / "tree.ipynb", TREE_CELLS)
    OUTPUT.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=lab["chromium"], args=CHROMIUM_FLAGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        try:
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
        finally:
            page.screenshot(path=str(OUTPUT / "tree-final.png"), full_page=True)
            browser.close()


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
    from playwright.sync_api import sync_playwright

    path = lab["home"] / "snapshot.ipynb"
    write_notebook(path, SNAPSHOT_CELLS)
    OUTPUT.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=lab["chromium"], args=CHROMIUM_FLAGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        try:
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
        finally:
            page.screenshot(path=str(OUTPUT / "snapshot-final.png"), full_page=True)
            browser.close()
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
    from playwright.sync_api import sync_playwright

    write_notebook(lab["home"] / "audit.ipynb", AUDIT_CELLS)
    OUTPUT.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=lab["chromium"], args=CHROMIUM_FLAGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        try:
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
        finally:
            page.screenshot(path=str(OUTPUT / "audit-final.png"), full_page=True)
            browser.close()
