"""Text that fits a terminal: tables with a header row and wrapped sentences, at most ``WIDTH`` columns.

``table(head, rows)``   lines of a table: header, dashes, rows; numbers right-aligned, the last
                        text column wrapped under itself when the table would pass ``WIDTH``
``wrap(text)``          one paragraph wrapped at ``WIDTH``, continuation lines indented further
``wrap_lines(text)``    every line of ``text`` wrapped as :func:`wrap` does, keeping its indent

Words are never split: a single word longer than a line (a long path) stays whole on its own line.
Imports nothing of ringlab, so every layer (calculators, readers, commands) can use it.
"""

from __future__ import annotations

import re
import textwrap

WIDTH = 100  # columns: every line the command line prints fits this
_GAP = "  "
_NUMERIC = re.compile(r"[-+~]?[0-9.,]+(?:e[-+]?[0-9]+)?%?(?: \([^)]*\))?|-|n/a|ok|FAIL", re.ASCII)


def wrap(text: str, indent: str = "", hang: str = "    ", width: int = WIDTH, first_line_only: bool = False) -> str:
    """``text`` as lines of at most ``width`` columns: the first starts with ``indent``, the others with
    ``indent + hang``, or with as many spaces as ``indent`` is long when ``first_line_only`` (a label that
    starts the first line: ``"  cost   "``). Breaks only at spaces (paths and numbers stay whole)."""
    after = " " * len(indent) if first_line_only else indent + hang
    return "\n".join(textwrap.wrap(text, width, initial_indent=indent, subsequent_indent=after,
                                   break_long_words=False, break_on_hyphens=False)) or indent.rstrip()


def wrap_lines(text: str, hang: str = "    ", width: int = WIDTH) -> str:
    """Each line of ``text`` wrapped by :func:`wrap` with its own leading spaces as the indent."""
    out = []
    for line in text.split("\n"):
        if len(line) <= width:
            out.append(line)
            continue
        body = line.lstrip(" ")
        out.append(wrap(body, line[:len(line) - len(body)], hang, width))
    return "\n".join(out)


def table(head: list[str], rows: list[list[str]], align: str | None = None, width: int = WIDTH,
          indent: str = "") -> list[str]:
    """The lines of a table: ``head``, a row of dashes, then ``rows`` (cells are strings).

    ``align`` has one letter per column, ``l`` or ``r``; by default a column is right-aligned when every
    cell of it reads as a number. When the table is wider than ``width``, the last column is wrapped
    under itself (it should be the free text) if that leaves it at least 12 columns; otherwise the
    rows stay whole and wide (numbers are never cut: the tests of each command check the width).
    """
    cols = len(head)
    if any(len(r) != cols for r in rows):
        raise ValueError(f"every row needs {cols} cells")
    if align is None:
        align = "".join("r" if rows and all(_NUMERIC.fullmatch(r[i]) for r in rows) else "l" for i in range(cols))
    widths = [max([len(head[i])] + [len(r[i]) for r in rows]) for i in range(cols)]
    room = width - len(indent) - sum(widths[:-1]) - len(_GAP) * (cols - 1)
    if widths[-1] > room >= max(12, len(head[-1])):
        widths[-1] = room

    def line(cells: list[str]) -> list[str]:
        last = textwrap.wrap(cells[-1], widths[-1], break_long_words=False, break_on_hyphens=False) or [""]
        lead = [c.rjust(w) if a == "r" else c.ljust(w) for c, w, a in zip(cells[:-1], widths, align)]
        blank = [" " * w for w in widths[:-1]]
        end = (lambda t: t.rjust(widths[-1])) if align[-1] == "r" else (lambda t: t)
        return [(indent + _GAP.join((lead if k == 0 else blank) + [end(t)])).rstrip() for k, t in enumerate(last)]

    out = line(head) + [indent + _GAP.join("-" * w for w in widths)]
    for r in rows:
        out += line(r)
    return out
