"""The report's HTML building blocks: escaping, table cells and tables.

Every string from config or data is escaped by ``esc`` (``html.escape``), in a template too (``templating``), so
escaped text has one spelling everywhere. ``Markup`` marks HTML that a helper here or a section built from escaped
parts: a table cell or a template value that is already HTML passes as it is.
"""

from __future__ import annotations

import html
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


def table(header: list[str], rows: list[list[Any]], left: int = 1) -> Markup:
    """A table whose first ``left`` columns are text (left-aligned); a cell is Markup (shown as it is) or a value
    (``num``)."""
    th = "".join(f'<th class="{"l" if i < left else ""}">{esc(h)}</th>' for i, h in enumerate(header))
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="{"l" if i < left else ""}">{c if isinstance(c, Markup) else num(c)}</td>'
            for i, c in enumerate(r)
        )
        + "</tr>"
        for r in rows
    )
    # A table wider than the page scrolls inside its own box: the page itself never scrolls sideways.
    return Markup(f'<div class="wide"><table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table></div>')
