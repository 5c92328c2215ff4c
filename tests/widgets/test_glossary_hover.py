"""Hover text from `notebooks/GLOSSARY.md` (issue 20, item 5): the views wrap the terms they show
(pruning rules in the explorer, block ops and map kinds in the sGraph view) in `<abbr>` whose
title is the glossary's definition. Oracle: the glossary file itself, read here apart from the
module under test."""

from __future__ import annotations

import html
import re
from pathlib import Path

from widgets.explorer import SearchExplorer, detail_html, rows_html
from widgets.glossary import abbr, definition, entries
from widgets.sgraph import SGraphState, kernel_html

GLOSSARY = Path(__file__).resolve().parents[2] / "notebooks" / "GLOSSARY.md"


def glossary_text(term: str) -> str:
    """The entry's words as the file has them (markdown marks dropped), read independently."""
    text = GLOSSARY.read_text(encoding="utf-8")
    found = re.search(r"^\*\*" + re.escape(term) + r"\*\*: (.*?)\nFirst used in", text, re.S | re.M)
    assert found, term
    words = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", found[1])
    return " ".join(re.sub(r"[`*]", "", words).split())


def titles(page: str) -> dict[str, str]:
    return {html.unescape(t): html.unescape(d)
            for d, t in re.findall(r"<abbr title=\"([^\"]*)\">([^<]*)</abbr>", page)}


def test_the_glossary_is_read_whole():
    assert len(entries()) > 100
    for term in ("nored", "red_ld_rms", "imap", "fmap", "omap", "cannot_close",
                 "abstract_expression", "cost_bound"):
        assert definition(term) == glossary_text(term)
    assert abbr("no such term") == "no such term"
    assert abbr("a<b") == "a&lt;b"


def test_the_explorer_shows_each_rule_with_its_definition(recorded):
    view = SearchExplorer.from_events(recorded.events)
    pruned = [n for n in view.state.filter(status="pruned", page_size=10_000)]
    rules = {n.rule for n in pruned}
    assert {"abstract_expression", "cannot_close"} <= rules
    shown = titles(rows_html(pruned))
    for rule in rules:
        assert shown[rule] == glossary_text(rule)
    detail = detail_html(view.state, pruned[0].id)
    assert titles(detail)[pruned[0].rule] == glossary_text(pruned[0].rule)
    assert html.escape(glossary_text(pruned[0].rule)) in detail     # said in plain words too


def test_the_sgraph_view_explains_its_ops_and_maps(recorded):
    best = recorded.result.best
    state = SGraphState(best.symbolic or best.graph)
    page = "".join(kernel_html(k) for k in state.custom)
    shown = titles(page)
    assert {"imap", "omap"} <= set(shown)
    kinds = {o.kind for k in state.custom for o in k.ops}
    from prism.ir.ops import OPS
    defined = GLOSSARY.read_text(encoding="utf-8")
    for term, meaning in shown.items():
        # the glossary's words, else (an op it does not define) the op table's own
        assert meaning == (glossary_text(term) if f"**{term}**:" in defined else
                           f"{term}: {OPS[term].doc} (an op of the op table)"), term
    compute = {k for k in kinds if OPS[k].compute}
    assert compute and compute <= set(shown)     # every block op shown carries its meaning
