"""The teaching notebooks, all of them: one source each, the checked-in `.ipynb` current, a
parameters cell first, and a headless run under two minutes without an error.

What each notebook prints is checked against its oracle in `test_NN_name.py` beside this file
(the oracle cells are in `oracles/`; see `conftest.py`). The reader's oracle is a hand-written
percent text; the `.ipynb` files' oracle is `build.py`'s output.
"""

from __future__ import annotations

import re

import pytest

STEMS = ("00_quickstart", "01_tensor_programs_and_kernels", "02_symbolic_graphs",
         "03_search_and_pruning", "04_equivalence_proofs", "04b_axioms_and_mutants",
         "05_triton_instantiation", "06_roofline_and_cost_model", "06b_autotuning_live",
         "07_debugging_a_pruning_rule", "08_your_own_program")
MAX_SECONDS = 120

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


@pytest.mark.parametrize("stem", STEMS)
def test_each_notebook_has_an_exercise_with_a_hidden_solution_and_a_check(build, stem):
    # The reader's default is no solutions; conftest injects SHOW_SOLUTIONS = True for the run.
    code = [c for c in build.read_percent((build.HERE / f"{stem}.py").read_text()).cells
            if c.cell_type == "code"]
    assert "SHOW_SOLUTIONS = False" in code[0].source
    solutions = [i for i, c in enumerate(code) if c.source.startswith("if SHOW_SOLUTIONS:")]
    assert solutions, f"{stem} has no solution cell"
    for i in solutions:
        assert code[i].metadata.get("jupyter") == {"source_hidden": True}
        answer = code[i - 1].source.splitlines()[-1].split(" = ")[0]   # the reader's cell
        assert code[i - 1].source.splitlines()[-1].startswith(f"{answer} = None")
        check = code[i + 1].source
        assert f"if {answer} is None:" in check and "exercise passed: " in check


# -- headless runs ------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("stem", STEMS)
def test_the_notebook_runs_headless_top_to_bottom_in_under_two_minutes(run, stem, record_property):
    done = run(stem)
    assert not done.errors, "\n\n".join(done.errors)
    assert all(c.execution_count for c in done.code_cells), "a cell was not executed"
    assert re.search(r"^exercise passed: ", done.text, re.M), "no exercise's check passed"
    record_property("seconds", round(done.seconds, 1))
    print(f"{stem}: {done.seconds:.1f} s")
    assert done.seconds < MAX_SECONDS
