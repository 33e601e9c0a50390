"""The report's templates (``templates/`` beside this module) and the one Jinja environment that fills them.

Autoescape is on, and every value a template prints passes through ``esc`` (``finalize``): the bytes of escaped text
are those ``html.escape`` gives (``&#x27;``, ``&quot;``), as in the tables' cells, rather than Jinja's own spelling;
Markup (HTML a helper built from escaped parts, or another template's output) passes as it is. The rule's code
digest covers this folder (``common/codeclosure.py``), so editing a template reruns the report.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import jinja2
import jinja2.ext
from markupsafe import Markup

from ..common.measures import fixed, si
from ..plan.design import condition_name, series_label
from .html import esc, num

TEMPLATES = Path(__file__).parent / "templates"


# A line break inside a template's prose: not after a block tag (trim_blocks removes that one), not before a line
# that opens a tag or a block, a blank line or the end.
_WRAPPED = re.compile(r"(?<![%#]})\n(?![ \t]*(?:<|\{%|\{#|\n|\Z))")


class _Prose(jinja2.ext.Extension):
    """Templates wrap their prose at 120 columns, as the code does; the page reads each paragraph as one line: a line
    break inside prose becomes the one space it stands for, so a sentence is found in the page as it is written
    (no template here holds a <pre> whose lines matter)."""

    def preprocess(self, source: str, name: str | None, filename: str | None = None) -> str:
        return _WRAPPED.sub(" ", source) if (name or "").endswith(".j2") else source


def _escaped(value: Any) -> Markup:
    return value if isinstance(value, Markup) else Markup(esc(value))


ENVIRONMENT = jinja2.Environment(
    loader=jinja2.FileSystemLoader(TEMPLATES),
    extensions=[_Prose],
    autoescape=True,
    finalize=_escaped,
    undefined=jinja2.StrictUndefined,  # a misspelt name fails the report instead of showing nothing
    trim_blocks=True,
    lstrip_blocks=True,
)
ENVIRONMENT.filters.update(fmt=format, fixed=fixed, si=si, num=num, series=series_label, condition=condition_name)


def render_template(name: str, **context: Any) -> Markup:
    """A template under ``templates/`` filled with ``context``, as HTML to place in another."""
    return Markup(ENVIRONMENT.get_template(name).render(**context))
