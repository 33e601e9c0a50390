"""Figures, the trials product's section: its figures of the trials table, embedded as PNG with their captions, but
the one that answers the question, which stands under the answer (another product's figures are in its section: the
scaling figures in Scaling)."""

from __future__ import annotations

import base64
from collections.abc import Mapping

from markupsafe import Markup

from ...analysis.products import product
from ..inputs import ReportInputs
from ..templating import render_template

# Quality against the joules spent answers the study's question: it stands under the answer (sections/summary.py).
ANSWER_FIGURE = "quality_vs_energy"


def render(inputs: ReportInputs) -> Markup:
    return render_template(
        "sections/figures.html.j2",
        figures=figures_html(
            {k: v for k, v in inputs.figures.items() if k in product("trials").figures and k != ANSWER_FIGURE}
        ),
    )


def figures_html(figures: Mapping[str, tuple[bytes, str]]) -> Markup:
    """Figures embedded in the page (name → PNG bytes, caption), so that the report is one self-contained file."""
    shown = [(name, base64.b64encode(png).decode(), caption) for name, (png, caption) in figures.items()]
    return render_template("figures.html.j2", shown=shown)
