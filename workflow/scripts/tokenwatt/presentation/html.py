"""The report's HTML building blocks: escaping, table cells and tables.

Every string from config or data is escaped by ``esc`` (``html.escape``), in a template too (``templating``), so
escaped text has one spelling everywhere. ``Markup`` marks HTML that a helper here or a section built from escaped
parts: a table cell or a template value that is already HTML passes as it is. A table's text wraps and its numbers
do not (``table``), and a sentence that rows would repeat is a ``Footnote``: nothing a reader needs is pushed out of
sight to the right of a scroll box.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup

from ..common.measures import fixed


def esc(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def num(x: Any) -> Markup:
    """A table cell: floats in fixed notation with four significant digits, anything else as text."""
    if x is None or (isinstance(x, float) and x != x):
        return Markup("—")
    return Markup(fixed(x) if isinstance(x, float) else esc(x))


def text(value: Any) -> Markup:
    """A value shown as it reads, escaped, never formatted as a number (None shows as nothing)."""
    return Markup(esc(value))


def noted(value: Any, note: Any = None, css: str = "ci") -> Markup:
    """A value with a note in small grey type after it (an interval, a count, why it is missing)."""
    return Markup(esc(value) + (f' <span class="{css}">{esc(note)}</span>' if note else ""))


@dataclass(frozen=True)
class Footnote:
    """A cell whose full text is a sentence, such as why a ratio was refused: the cell shows ``short`` with a marker and
    the table shows ``note`` once beneath it, however many rows repeat it, so that one long reason neither widens
    its column nor hides the numbers beside it."""

    short: str
    note: str


# A text cell longer than this wraps (class "t"): numbers and short labels stay on one line, so a number never
# breaks, while a sentence takes the column's width rather than setting it.
WRAP_AFTER = 32


def _cell(c: Any, left: bool, marker: str) -> str:
    """One <td>: left-aligned text or right-aligned values; a long text wraps; a footnote's short text and marker."""
    if isinstance(c, Footnote):
        shown = Markup(f'{esc(c.short)}<sup class="fn">{marker}</sup>')
    else:
        shown = c if isinstance(c, Markup) else num(c)
    # the longest line the cell shows (a <br> ends one), without its tags and entities
    longest = max(len(html.unescape(re.sub(r"<[^>]+>", "", line))) for line in re.split(r"<br\s*/?>", shown))
    css = " ".join(k for k, on in (("l", left), ("t", longest > WRAP_AFTER)) if on)
    return f'<td class="{css}">{shown}</td>'


def table(header: list[str], rows: list[list[Any]], left: int = 1) -> Markup:
    """A table whose first ``left`` columns are text (left-aligned); a cell is Markup (shown as it is), a
    ``Footnote`` (its note once under the table, numbered in the order of first use) or a value (``num``)."""
    notes = list(dict.fromkeys(c.note for r in rows for c in r if isinstance(c, Footnote)))
    marker = {note: str(i + 1) for i, note in enumerate(notes)}
    th = "".join(f'<th class="{"l" if i < left else ""}">{esc(h)}</th>' for i, h in enumerate(header))
    body = "".join(
        "<tr>"
        + "".join(_cell(c, i < left, marker[c.note] if isinstance(c, Footnote) else "") for i, c in enumerate(r))
        + "</tr>"
        for r in rows
    )
    below = "".join(f'<p class="fn"><sup class="fn">{marker[n]}</sup> {esc(n)}</p>' for n in notes)
    # A table wider than the page scrolls inside its own box: the page itself never scrolls sideways.
    return Markup(f'<div class="wide"><table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table></div>{below}')
