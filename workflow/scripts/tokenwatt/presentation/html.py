"""The report's HTML building blocks: escaping, table cells and tables."""

from __future__ import annotations

import html
from typing import Any

from ..common.measures import fixed


def esc(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def num(x: Any) -> str:
    """A table cell: floats in fixed notation with four significant digits, anything else as text."""
    if x is None or (isinstance(x, float) and x != x):
        return "—"
    return fixed(x) if isinstance(x, float) else esc(x)


def table(header: list[str], rows: list[list[Any]], left: int = 1) -> str:
    th = "".join(f'<th class="{"l" if i < left else ""}">{esc(h)}</th>' for i, h in enumerate(header))
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="{"l" if i < left else ""}">{c if isinstance(c, Raw) else num(c)}</td>' for i, c in enumerate(r)
        )
        + "</tr>"
        for r in rows
    )
    # A table wider than the page scrolls inside its own box: the page itself never scrolls sideways.
    return f'<div class="wide"><table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table></div>'


class Raw(str):
    """Already-escaped HTML for a table cell."""
