"""The glossary the views' hover text comes from: `notebooks/GLOSSARY.md`, read once.

Each entry there is `<a id="slug"></a>`, then `**term**: definition` (one to three sentences),
then `First used in: ...`. `definition(term)` is the definition as plain text (markdown marks and
links dropped), `abbr(term)` the term as HTML with its definition as hover text (a plain
`<abbr title=...>`, which every browser shows and a static snapshot keeps). A term the glossary
lacks, or a checkout without the file, gives the term as it is: hover text is help, never a
condition for a view to draw.
"""

from __future__ import annotations

import functools
import html
import re
from pathlib import Path

GLOSSARY = Path(__file__).resolve().parents[1] / "notebooks" / "GLOSSARY.md"
_ENTRY = re.compile(r"^\*\*(?P<term>[^*]+)\*\*: (?P<text>.*?)(?:\nFirst used in:.*)?$", re.S)


@functools.cache
def entries() -> dict[str, str]:
    """Term (lower case) → its definition, plain text; {} without the glossary file."""
    try:
        text = GLOSSARY.read_text(encoding="utf-8")
    except OSError:
        return {}
    out: dict[str, str] = {}
    for block in re.split(r"\n\s*\n", text):
        block = re.sub(r"^<a id=\"[^\"]*\"></a>\n", "", block.strip())
        found = _ENTRY.match(block)
        if found:
            out[found["term"].strip().lower()] = _plain(found["text"])
    return out


def definition(term: str) -> str | None:
    """The glossary's definition of `term` (case-insensitive); for an op the glossary does not
    define (`matmul`, `exp`), the op table's own description; else None."""
    found = entries().get(term.strip().lower())
    if found is not None:
        return found
    from prism.ir.ops import OPS
    op = OPS.get(term.strip())
    return f"{term.strip()}: {op.doc} (an op of the op table)" if op is not None and op.doc \
        else None


def abbr(term: str) -> str:
    """`term`, HTML-escaped, with its definition as hover text when the glossary has one."""
    shown = html.escape(term)
    meaning = definition(term)
    if meaning is None:
        return shown
    return f"<abbr title=\"{html.escape(meaning, quote=True)}\">{shown}</abbr>"


def _plain(text: str) -> str:
    """Markdown to plain text: links to their words, code and emphasis marks dropped, one line."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"[`*]", "", text)
    return " ".join(text.split())
