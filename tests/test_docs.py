"""The README, the architecture page, the notebooks' README and their glossary: every relative
link and image resolves to a file in the tree, and every notebook is listed in both notebook
tables (the oracle: the notebook sources that `notebooks/build.py` finds)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = ("README.md", "docs/architecture.md", "notebooks/README.md", "notebooks/GLOSSARY.md")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def _links(page: Path) -> list[str]:
    return [t for t in LINK.findall(page.read_text())
            if not re.match(r"^[a-z]+:", t) and not t.startswith("#")]


@pytest.mark.parametrize("name", PAGES)
def test_every_relative_link_resolves(name):
    page = ROOT / name
    missing = [t for t in _links(page) if not (page.parent / t.split("#")[0]).exists()]
    assert not missing, f"{name} links to missing files: {missing}"


def test_the_readme_shows_a_screenshot_of_the_workbench():
    images = [t for t in re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", (ROOT / "README.md").read_text())]
    assert images and all((ROOT / t).suffix == ".png" and (ROOT / t).stat().st_size > 10_000
                          for t in images)


@pytest.mark.parametrize("name", ("README.md", "notebooks/README.md"))
def test_every_notebook_is_in_the_table(name):
    stems = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]*_*.py"))
    assert len(stems) == 11
    text = (ROOT / name).read_text()
    rows = re.findall(r"^\|\s*\[?`?(\d\d[a-z]?_\w+)", text, re.M)
    assert sorted(rows) == stems, f"{name}'s notebook table lists {rows}"
