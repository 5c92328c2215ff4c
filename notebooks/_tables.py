"""The notebooks' tables: a cell says what goes in each column, this module lines the columns up.

    from _tables import table
    table([("h100", 3352.0, 4.64)], ["device", ("HBM GB/s", ".0f"), ("roofline µs", ".2f")],
          note="modeled")

prints

    device  HBM GB/s  roofline µs   (modeled)
    h100        3352         4.64

A column is a title, or a `(title, format spec)` pair; the spec formats each value (`".2f"`,
`".0%"`, `","`). Numbers are right-aligned and everything else left-aligned, each column as wide
as its widest cell; `None` prints as `-`. The notebooks run with this folder as their working
folder, so `import _tables` finds this file (the leading `_` keeps `build.py` from taking it for
a notebook). There is no engine logic here, only layout.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from numbers import Number

Column = str | tuple[str, str]


def _cell(value: object, spec: str) -> str:
    if value is None:
        return "-"
    return format(value, spec) if spec else str(value)


def rows_text(rows: Iterable[Sequence[object]], columns: Sequence[Column], note: str = "") -> str:
    """The table as text: a header line (with `note` in parentheses after it), then one line
    per row, columns two spaces apart."""
    titles = [c if isinstance(c, str) else c[0] for c in columns]
    specs = ["" if isinstance(c, str) else c[1] for c in columns]
    body = [[(_cell(v, s), isinstance(v, Number) and not isinstance(v, bool))
             for v, s in zip(row, specs, strict=True)] for row in rows]
    # a column of numbers is right-aligned, title included
    right = [bool(body) and all(r[i][1] or r[i][0] == "-" for r in body)
             for i in range(len(titles))]
    widths = [max([len(t), *(len(r[i][0]) for r in body)]) for i, t in enumerate(titles)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.rjust(w) if r else c.ljust(w)
                         for c, w, r in zip(cells, widths, right, strict=True)).rstrip()

    header = line(titles) + (f"   ({note})" if note else "")
    return "\n".join([header, *(line([c for c, _ in r]) for r in body)])


def table(rows: Iterable[Sequence[object]], columns: Sequence[Column], note: str = "") -> None:
    """Print `rows_text(rows, columns, note)`."""
    print(rows_text(rows, columns, note))
