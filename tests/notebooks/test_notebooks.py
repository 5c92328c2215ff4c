"""The teaching notebooks: one source each, headless runs under two minutes, and what they print
checked against an oracle.

Oracles: a hand-written percent text for the reader; `build.py`'s output for the checked-in
`.ipynb`; and, per notebook, an oracle cell run after the notebook in its own kernel (see
`conftest.py`): 00's printed best latency against the cost model on the winner's graph and the
winner's interpreter output against torch; 01's printed interpreter errors against torch, and the
fused kernel's output recomputed with torch directly; 02's printed tile shapes against
`substitute_graph`.
"""

from __future__ import annotations

import ast
import json
import re

import pytest

STEMS = ("00_quickstart", "01_tensor_programs_and_kernels", "02_symbolic_graphs")
MAX_SECONDS = 120

ORACLES = {
    "00_quickstart": """
import json
from prism.check import max_rel_err
from prism.cost import get_device, modeled
print("ORACLE " + json.dumps({
    "latency_us": result.best.latency_us, "kind": result.best.latency_kind,
    "modeled_us": modeled(result.best.graph, get_device(DEVICE)).latency_us,
    "err_vs_torch": max_rel_err(prism.interpret(result.best.graph, *workload.random_inputs(1)),
                                workload.reference(*workload.random_inputs(1))),
    "bench_winner": bench.winner["best"], "winner": result.best.config}))
""",
    "01_tensor_programs_and_kernels": """
import json, numpy as np, torch
from prism.check import max_rel_err
rng = np.random.default_rng(12345)
xs = [rng.standard_normal(SHAPES[p]) for p in ("X", "W")]
X_t, W_t = (torch.from_numpy(a) for a in xs)
want = (torch.nn.functional.rms_norm(X_t, (X_t.shape[-1],)) @ W_t).numpy()
print("ORACLE " + json.dumps({"fused_vs_torch": max_rel_err(prism.interpret(fused, *xs), [want]),
                              "sweep": len(SWEEP) ** 2}))
""",
    "02_symbolic_graphs": """
import json
from prism.instantiate.params import assignments
from prism.ir.spec import substitute_graph
((_, symbolic),) = sgraph.iter_blocks()
out = {"members": len(assignments(sgraph)), "assignments": {}}
for env in ASSIGNMENTS:
    ((_, concrete),) = substitute_graph(sgraph, env).iter_blocks()
    out["assignments"][json.dumps(env)] = {
        name: {"symbolic": ", ".join(str(d) for d in symbolic.shape(name)),
               "tile": [d.value for d in shape]} for name, shape in concrete.tensors}
print("ORACLE " + json.dumps(out))
""",
}


@pytest.fixture
def run(run_notebook):
    return lambda stem: run_notebook(stem, ORACLES[stem])


# -- one source of truth ----------------------------------------------------------------------

def test_the_reader_splits_cells_strips_markdown_and_keeps_tags(build):
    text = "\n".join([
        "# a header jupytext would keep",
        "# %% [markdown]",
        "# # Title",
        "#",
        "# Some *prose*.",
        "",
        '# %% tags=["parameters"]',
        "N = 3",
        "",
        "# %%",
        "# a comment stays code",
        "print(N)",
        "",
        "",
    ])
    nb = build.read_percent(text)
    assert [(c.cell_type, c.source, dict(c.metadata)) for c in nb.cells] == [
        ("markdown", "# Title\n\nSome *prose*.", {}),
        ("code", "N = 3", {"tags": ["parameters"]}),
        ("code", "# a comment stays code\nprint(N)", {}),
    ]
    assert [c.id for c in nb.cells] == ["cell-00", "cell-01", "cell-02"]
    assert nb.metadata["kernelspec"]["name"] == "python3"


@pytest.mark.parametrize("stem", STEMS)
def test_the_checked_in_ipynb_is_what_build_makes_from_the_source(build, stem):
    source = build.HERE / f"{stem}.py"
    ipynb = source.with_suffix(".ipynb")
    assert ipynb.exists(), f"{ipynb.name} is missing: run .venv/bin/python notebooks/build.py"
    assert ipynb.read_text() == build.notebook_text(source), \
        f"{ipynb.name} differs from {source.name}: run .venv/bin/python notebooks/build.py"


def test_build_check_finds_every_notebook_current(build):
    assert [s.stem for s in build.sources()] == list(STEMS)
    assert build.main(["--check"]) == 0


@pytest.mark.parametrize("stem", STEMS)
def test_the_first_code_cell_is_the_tagged_parameters_cell(build, stem):
    nb = build.read_percent((build.HERE / f"{stem}.py").read_text())
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code[0].metadata.get("tags") == ["parameters"]
    assert "import" not in code[0].source     # plain values only, so a runner can replace them
    assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# ")


# -- headless runs ------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("stem", STEMS)
def test_the_notebook_runs_headless_top_to_bottom_in_under_two_minutes(run, stem, record_property):
    done = run(stem)
    assert not done.errors, "\n\n".join(done.errors)
    assert all(c.execution_count for c in done.code_cells), "a cell was not executed"
    record_property("seconds", round(done.seconds, 1))
    print(f"{stem}: {done.seconds:.1f} s")
    assert done.seconds < MAX_SECONDS


@pytest.mark.slow
def test_00_prints_the_best_latency_with_its_kind_and_the_workbench_agrees(run):
    done = run("00_quickstart")
    oracle = done.oracle
    found = re.search(r"^best kernel: ([0-9.]+) µs (\w+)$", done.text, re.M)
    assert found, done.text
    assert found[1] == f"{oracle['latency_us']:.2f}" and found[2] == oracle["kind"] == "modeled"
    assert oracle["modeled_us"] == pytest.approx(oracle["latency_us"], rel=1e-12)
    assert oracle["err_vs_torch"] < 1e-9             # the winner computes the workload
    assert oracle["bench_winner"] == oracle["winner"]
    assert "same winner as prism.superoptimize: True" in done.text
    assert re.search(rf"^workbench best: {found[1]} µs modeled", done.text, re.M)
    state = done.nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    assert len(state) > 10                            # the workbench's models were kept


@pytest.mark.slow
def test_01_interprets_the_fused_kernel_to_torch_s_answer(run):
    done = run("01_tensor_programs_and_kernels")
    errors = dict(re.findall(r"^(.*?)\s*max relative error vs torch ([0-9.e+-]+)$", done.text,
                             re.M))
    fused = [float(v) for k, v in errors.items() if k.startswith("fused (grid")]
    unfused = [float(v) for k, v in errors.items() if k.startswith("unfused")]
    wrong = [float(v) for k, v in errors.items() if "instead of" in k]
    assert len(fused) == len(unfused) == len(wrong) == 1, errors
    assert fused[0] < 1e-9 and unfused[0] < 1e-9
    assert wrong[0] > 1e-2                            # the interpreter catches the wrong kernel
    sweep = re.findall(r"^\s+\d+\s+\d+\s+([0-9.e+-]+)$", done.text, re.M)
    assert len(sweep) == done.oracle["sweep"] and all(float(e) < 1e-9 for e in sweep)
    assert done.oracle["fused_vs_torch"] < 1e-9


@pytest.mark.slow
def test_02_prints_the_tile_shapes_substitute_graph_gives(run):
    done = run("02_symbolic_graphs")
    oracle = done.oracle
    printed: dict[str, dict[str, dict[str, object]]] = {}
    current = None
    for line in done.text.splitlines():
        head = re.match(r"^assignment (\{.*?\}): (.*)$", line)
        if head:
            current = printed.setdefault(head[1], {})
            continue
        row = re.match(r"^  (\S+)\s+\[(.*)\] → \[(.*)\]$", line)
        if row and current is not None:
            current[row[1]] = {"symbolic": row[2], "tile": [int(n) for n in row[3].split(",")]}
        elif not line.startswith("  "):
            current = None
    for env, tensors in oracle["assignments"].items():
        key = str(json.loads(env))
        assert key in printed, f"assignment {key} was not printed"
        assert printed[key] == tensors
    assert len(oracle["assignments"]) == 2
    # the members table: assignment, blocks, tiles, latency, error vs torch
    members = re.findall(r"^(\{'gx'.*?\})\s.*\s[0-9.]+\s+([0-9.e+-]+)$", done.text, re.M)
    assert len(members) == oracle["members"]
    assert all(float(err) < 1e-9 for _, err in members)
    assert all(ast.literal_eval(env) for env, _ in members)
