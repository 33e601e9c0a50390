"""The self-contained HTML report: the page (``templates/page.html.j2``) and its sections in order.

The head sections come first, then each analysis product's section in the products' order
(``tokenwatt.analysis.products``; a product names its section module, found here by that name), then the tail. A new
analysis with its own section is its module, its section module with a template, and one Product: nothing here.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from types import ModuleType
from typing import Any

from ..analysis.products import products_of
from ..common.measures import budget_label
from .inputs import ReportInputs
from .sections import conditions, figures, provenance, quality, reference, summary, warnings
from .templating import render_template

HEAD: tuple[ModuleType, ...] = (warnings, summary, conditions)
TAIL: tuple[ModuleType, ...] = (figures, quality, reference, provenance)
SECTIONS = f"{__package__}.sections"


def section_modules(config: Mapping[str, Any]) -> list[ModuleType]:
    """The report's sections in order. A product's section is imported by name, so the report rule's code digest
    names those modules itself (``rules/report.smk``)."""
    shown = [importlib.import_module(f"{SECTIONS}.{p.section}") for p in products_of(config)]
    return [*HEAD, *shown, *TAIL]


def render_report(inputs: ReportInputs) -> str:
    """The whole report as one HTML string."""
    study = inputs.config["study"]
    design = inputs.config.get("design") or {}
    page = render_template(
        "page.html.j2",
        config_hash=inputs.config_hash,
        interim=inputs.interim,
        study=study,
        budgets=", ".join(budget_label(b) for b in sorted(study["budgets"])),
        further="".join(f", crossed with {factor}: {', '.join(map(str, levels))}" for factor, levels in design.items()),
        sections=[module.render(inputs) for module in section_modules(inputs.config)],
    )
    return f"{page}\n"  # a text file ends in a newline
