"""The glossary, `notebooks/GLOSSARY.md`: every notebook links it from its first cell, every
required term has an entry, and each entry says truly where the term is first used.

An entry is an anchor `<a id="slug"></a>`, the bold term and its definition, and a last line
`First used in: [NN](NN_name.ipynb).` or `First used in: none.` (`NN` is how the notebook's file
name starts: `04`, or `04b` for the second notebook of a topic split in two). The slug is the
term in lower case with every run of characters other than letters, digits and `_` replaced by
`-`.

The oracle for "first used in" is the notebooks' own sources, read without running them. A
notebook *mentions* a term when its `.py` source (markdown and code, with the `# ` of wrapped
lines joined) contains the term, its slug or one of its `ALIASES`, case-insensitive, as a whole
word (a plural `s` or `es` allowed; `red` is not mentioned by `red_ld_rms`). The notebook an
entry names must mention the term and no earlier notebook may; `none` says that no notebook
mentions it. For the `COMMON_WORDS`, ordinary English words that earlier notebooks use in
their everyday sense ("part of the project"), only the named notebook is checked.

Coverage (issue 23's "the glossary covers every term the notebooks and widgets use"): besides the
hand list `REQUIRED`, every term a notebook introduces in **bold** in its markdown has an entry
(under its own name or the one `BOLD_ALIASES` gives; `NOT_TERMS` is bold used for emphasis), and
every term a widget shows with hover text has one: the literal terms in the widgets' source
(`abbr("...")`, `_hover(shown, "...")`, `definition("...")`), every pruning rule (the explorer
wraps each rule it shows), every accumulator and every map kind (the sGraph view wraps each block
op and map it shows). The other block ops the sGraph view shows (`matmul`, `exp`, ...) are the op
table's vocabulary, each documented by its `OPS[kind].doc` and listed in notebook 08.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
GLOSSARY = NOTEBOOKS / "GLOSSARY.md"
SOURCES = sorted(NOTEBOOKS.glob("[0-9][0-9]*_*.py"))       # in reading order: 04, 04b, 05
NUMBERS = {p.stem.split("_")[0]: i for i, p in enumerate(SOURCES)}   # "04b" -> its index

# The terms a newcomer needs (issue 23), as the glossary spells them.
REQUIRED = (
    "superoptimizer", "kernel", "fused kernel", "kernel graph", "block graph", "thread block",
    "grid", "for-loop", "loop range", "tile", "imap", "fmap", "omap", "sGraph", "family",
    "member", "instantiation", "assignment", "level 1", "level 2", "kernel level", "block level",
    "block_ops", "vocabulary", "accumulator", "nored", "red_ld_sum", "red_ld_mean", "red_ld_rms",
    "mred", "nored_rescale", "pre-defined kernel", "custom kernel", "abstract expression",
    "part", "rep", "comb", "red", "e-graph", "e-class", "e-node", "saturation", "axiom",
    "evidence", "proof", "verdict", "unknown", "counterexample", "pruning rule", "claim",
    "cannot_close", "dead_end_inputs", "dead_end_output", "abstract_expression", "hardware",
    "out_of_reach", "cost_bound", "branch and bound", "incumbent", "z3", "unsat core", "shared memory",
    "roofline bound", "cost model", "modeled", "interpreted", "measured", "launch overhead",
    "Triton", "PTX", "TRITON_INTERPRET", "autotuning", "finalist", "spec check",
    "split-key attention", "log-sum-exp split", "flash-decoding", "online softmax",
    "FlashAttention", "safe softmax", "causal mask",
)
# Other spellings the notebooks use for a term (code names, verb forms).
ALIASES = {
    "for-loop": ("forloop_range",),
    "custom kernel": ("customized",),
    "saturation": ("saturate", "saturated"),
    "split-key attention": ("split-k",),
}
COMMON_WORDS = frozenset({"part"})

ENTRY = re.compile(r'<a id="(?P<slug>[^"]+)"></a>\n\*\*(?P<term>[^*]+)\*\*: (?P<text>.+?)\n'
                   r"First used in: (?:\[(?P<nn>\d\d[a-z]?)\]\((?P<link>[^)]+)\)"
                   r"|(?P<none>none))\.\n", re.S)
WIDGETS = NOTEBOOKS.parent / "widgets"
# Bold that is emphasis, not a term (bold phrases of four words or more, or with a comma, are
# statements and checklist items, and are skipped without being listed here).
NOT_TERMS = frozenset({"proves", "one", "best"})
# Bold spellings whose glossary entry has another name.
BOLD_ALIASES = {
    "program": "kernel graph", "families": "family", "prune": "pruning rule", "prove": "proof",
    "proved": "proof", "instantiate": "instantiation", "tune": "autotuning",
    "tuning": "autotuning", "search": "SearchTree", "tree": "SearchTree",
    "symbols": "dimension expression", "grid sizes": "grid", "loop": "for-loop",
    "hbm bytes": "HBM", "l2 bytes": "L2", "sms busy": "SM", "launch": "launch overhead",
    "roofline": "roofline bound", "per-rule counts": "pruning rule",
}


def slug(term: str) -> str:
    return re.sub(r"[^a-z0-9_]+", "-", term.lower()).strip("-")


def mentions(text: str, term: str) -> bool:
    """Whether `text` (lower case, lines joined) uses `term`, in one of its spellings."""
    spellings = {term.lower(), slug(term), *ALIASES.get(term, ())}
    return any(re.search(r"(?<![\w-])" + re.escape(s) + r"(?:s|es)?(?![\w-])", text)
               for s in spellings)


def source_text(path: Path) -> str:
    """A notebook source as one lower-case line: wrapped markdown reads as it renders."""
    return re.sub(r"\s*\n#? ?\s*", " ", path.read_text()).lower()


def entries() -> list[re.Match[str]]:
    return list(ENTRY.finditer(GLOSSARY.read_text()))


# -- the link from every notebook -----------------------------------------------------------------

@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_the_first_markdown_cell_links_the_glossary(build, source):
    first = build.read_percent(source.read_text()).cells[0]
    assert first.cell_type == "markdown"
    assert "](GLOSSARY.md)" in first.source, f"{source.name}'s first cell does not link it"


# -- the entries ----------------------------------------------------------------------------------

def test_every_anchor_starts_an_entry_the_reader_can_parse():
    text = GLOSSARY.read_text()
    assert text.count("<a id=") == len(entries()) > 100


def test_every_required_term_has_an_entry():
    terms = {e["term"] for e in entries()}
    assert not [t for t in REQUIRED if t not in terms], "terms without a glossary entry"


def test_anchors_are_the_terms_slugs_and_unique():
    found = entries()
    assert [e["slug"] for e in found] == [slug(e["term"]) for e in found]
    assert len({e["slug"] for e in found}) == len(found)


def test_entries_are_in_alphabetical_order_under_their_letter():
    text = GLOSSARY.read_text()
    keys = [e["term"].lower().replace("_", " ") for e in entries()]
    assert keys == sorted(keys)
    for e in entries():
        letters = re.findall(r"^## (\w)$", text[:e.start()], re.M)
        assert letters and letters[-1] == e["term"][0].upper(), e["term"]


def test_each_definition_is_one_to_three_sentences():
    long = [e["term"] for e in entries()
            if not 1 <= len(re.findall(r"[.!?](?:\s|$)", e["text"].strip() + " ")) <= 3]
    assert not long, f"entries of more than three sentences: {long}"


# -- first used in: the oracle is the notebooks' sources ------------------------------------------

def test_the_matcher_finds_whole_words_in_every_spelling():
    assert mentions("grow an e-graph", "e-graph") and mentions("two e-graphs meet", "e-graph")
    assert mentions("the fused-kernel programs", "fused kernel")
    assert mentions("`forloop_range=4`", "for-loop")
    assert not mentions("`red_ld_rms`", "red") and mentions("`(red t g)`", "red")
    assert not mentions("an abstract expression", "abstract_expression")
    assert not mentions("a kernel graph", "graph kernel")


def test_the_named_notebook_is_the_first_that_uses_the_term():
    texts = [source_text(p) for p in SOURCES]
    wrong = []
    for e in entries():
        term = e["term"]
        users = [i for i, t in enumerate(texts) if mentions(t, term)]
        if e["none"]:
            if users:
                wrong.append(f"{term}: says none, but {SOURCES[users[0]].stem} uses it")
            continue
        named = NUMBERS[e["nn"]]
        if named not in users:
            wrong.append(f"{term}: {SOURCES[named].stem} does not use it")
        elif users[0] != named and term not in COMMON_WORDS:
            wrong.append(f"{term}: first used in {SOURCES[users[0]].stem}, not {e['nn']}")
    assert not wrong, "\n".join(wrong)


def test_first_used_in_links_the_named_notebook():
    for e in entries():
        if e["nn"]:
            assert e["link"] == SOURCES[NUMBERS[e["nn"]]].with_suffix(".ipynb").name, e["term"]
            assert (NOTEBOOKS / e["link"]).exists()


# -- coverage: the terms the notebooks introduce and the widgets show -----------------------------

def defined(phrase: str, terms: set[str]) -> bool:
    """Whether `phrase` is one of `terms` (case-insensitive), a plural `s` or `es` allowed."""
    return any(re.fullmatch(re.escape(t.lower()) + r"(?:s|es)?", phrase.lower()) for t in terms)


def bold_phrases(build) -> list[tuple[str, str]]:
    """(notebook, phrase) for every bold phrase of at most three words in a markdown cell."""
    found = []
    for source in SOURCES:
        for cell in build.read_percent(source.read_text()).cells:
            if cell.cell_type == "markdown":
                for phrase in re.findall(r"\*\*([^*]+)\*\*", " ".join(cell.source.split())):
                    if len(phrase.split()) <= 3 and "," not in phrase:
                        found.append((source.stem, phrase))
    return found


def test_every_term_a_notebook_introduces_in_bold_has_an_entry(build):
    terms = {e["term"] for e in entries()}
    assert all(defined(t, terms) for t in BOLD_ALIASES.values())       # the table is not stale
    found = bold_phrases(build)
    assert len(found) > 50 and ("08_your_own_program", "split move") in found
    missing = sorted({f"{stem}: {phrase}" for stem, phrase in found
                      if phrase.lower() not in NOT_TERMS
                      and not defined(BOLD_ALIASES.get(phrase.lower(), phrase), terms)})
    assert not missing, "bold terms without a glossary entry (or an alias):\n" + "\n".join(missing)


def hover_literals() -> set[str]:
    """The terms the widgets' source passes to the glossary by name."""
    found: set[str] = set()
    for path in WIDGETS.glob("*.py"):
        text = path.read_text()
        found |= set(re.findall(r"\b(?:abbr|definition)\(\s*['\"]([^'\"]+)['\"]\s*\)", text))
        found |= set(re.findall(r"\b_hover\(\s*['\"][^'\"]*['\"]\s*,\s*['\"]([^'\"]+)['\"]\s*\)",
                                text))
    return found


def test_every_term_the_widgets_show_with_hover_text_has_an_entry():
    from prism.ir.ops import OPS
    from prism.search import RULE_NAMES
    terms = {e["term"].lower() for e in entries()}
    literals = hover_literals()
    assert {"imap", "fmap", "omap", "tile", "grid", "for-loop"} <= literals   # the scan works
    shown = {*literals, *RULE_NAMES, "imap", "fmap", "omap",
             *(name for name, od in OPS.items() if od.category == "accum")}
    missing = sorted(t for t in shown if t.lower() not in terms)
    assert not missing, f"terms the widgets show without a glossary entry: {missing}"
