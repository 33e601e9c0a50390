"""Figures: every figure that no other section shows beside its numbers (a product's own figures are in its section:
the scaling figures in Scaling; the one that answers the question under the answer), embedded as PNG with its
caption."""

from __future__ import annotations

import base64
from collections.abc import Mapping

from markupsafe import Markup

from ...analysis.products import PRODUCTS, product_figures
from ..inputs import ReportInputs
from ..templating import render_template

# Quality against the joules spent answers the study's question: it stands under the answer (sections/summary.py).
ANSWER_FIGURE = "quality_vs_energy"


def render(inputs: ReportInputs) -> Markup:
    return render_template(
        "sections/figures.html.j2",
        figures=figures_html(
            {k: v for k, v in inputs.figures.items() if k not in product_figures(PRODUCTS) and k != ANSWER_FIGURE}
        ),
    )


def figures_html(figures: Mapping[str, tuple[bytes, str]]) -> Markup:
    """Figures embedded in the page (name → PNG bytes, caption), so that the report is one self-contained file."""
    shown = [(name, base64.b64encode(png).decode(), caption) for name, (png, caption) in figures.items()]
    return render_template("figures.html.j2", shown=shown)
