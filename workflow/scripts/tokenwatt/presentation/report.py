"""The self-contained HTML report: the page (``templates/page.html.j2``) and its sections in order.

The answer comes first (the question, its answer in words and the figure that answers it), then the head sections,
each analysis product's section in the products' order (``tokenwatt.analysis.products``; a product names its section
module, found here by that name; the last, the trials product's, shows the figures no other section does), then the
tail. A new analysis with its own section is its module, its section module
with a template, and one Product: nothing here. Every section's heading carries an anchor (its module's name where the
template gives none) and the contents at the top link to each; the sections a reader consults rather than reads
(``FOLDED``) show their heading and fold their body.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Mapping
from types import ModuleType
from typing import Any

from markupsafe import Markup

from ..analysis.products import products_of
from ..common.measures import budget_label
from .inputs import ReportInputs
from .sections import conditions, provenance, quality, reference, summary, warnings
from .templating import render_template

HEAD: tuple[ModuleType, ...] = (summary, warnings, conditions)
TAIL: tuple[ModuleType, ...] = (quality, reference, provenance)
SECTIONS = f"{__package__}.sections"
# Sections whose body is detail to look up, not the answer: folded under their heading, one click away. Provenance
# folds its own configuration dump (its template); the rest of it is a short table at the end.
FOLDED: dict[str, str] = {
    "statistics": "Show the tests of every measure: RM-ANOVA, Friedman, residual normality and the post-hoc pairs",
    "reference": "Show the reference study's figures beside this study's",
}
HEADING = re.compile(r'<h2(?: id="([^"]+)")?>(.*?)</h2>', re.S)


def section_modules(config: Mapping[str, Any]) -> list[ModuleType]:
    """The report's sections in order. A product's section is imported by name, so the report rule's code digest
    names those modules itself (``rules/report.smk``)."""
    shown = [importlib.import_module(f"{SECTIONS}.{p.section}") for p in products_of(config)]
    return [*HEAD, *shown, *TAIL]


def anchored(html: str, name: str) -> tuple[str, tuple[str, Markup] | None]:
    """A section with an anchor on its heading, and its (anchor, title) for the contents: the heading's own id, or
    else the section wrapped in a <section> with its module's name (the heading's markup as the template wrote it,
    which tests and readers' scripts find it by); no anchor for a section without a heading (the warnings)."""
    found = HEADING.search(html)
    if found is None:
        return html, None
    if found.group(1):
        return html, (found.group(1), Markup(found.group(2)))
    return f'<section id="{name}">{html}</section>', (name, Markup(found.group(2)))


def folded(html: str, label: str) -> str:
    """A section whose body after its heading is folded in a <details> that ``label`` opens."""
    head, found, body = html.partition("</h2>")
    if not found or not body.strip():
        return html
    return f"{head}</h2>\n<details><summary>{label}</summary>{body}</details>"


def render_report(inputs: ReportInputs) -> str:
    """The whole report as one HTML string."""
    study = inputs.config["study"]
    design = inputs.config.get("design") or {}
    sections, contents = [], []
    for module in section_modules(inputs.config):
        name = module.__name__.rsplit(".", 1)[1]
        html = str(module.render(inputs))
        html, entry = anchored(folded(html, FOLDED[name]) if name in FOLDED else html, name)
        sections.append(Markup(html))
        contents += [entry] if entry else []
    page = render_template(
        "page.html.j2",
        config_hash=inputs.config_hash,
        interim=inputs.interim,
        study=study,
        budgets=", ".join(budget_label(b) for b in sorted(study["budgets"])),
        further="".join(f", crossed with {factor}: {', '.join(map(str, levels))}" for factor, levels in design.items()),
        contents=contents,
        sections=sections,
    )
    return f"{page}\n"  # a text file ends in a newline
