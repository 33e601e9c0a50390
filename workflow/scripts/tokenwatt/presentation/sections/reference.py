"""Against the reference study: its published figures beside ours, matched by budget rank (1st, 2nd, 3rd budget).
The reference study is one-way, so a factorial study is compared in words only."""

from __future__ import annotations

from typing import Any

import polars as pl
from markupsafe import Markup

from ...common.measures import budget_label, display_exponent, fixed, power_of_ten
from ..html import table
from ..inputs import ReportInputs
from ..templating import render_template


def render(inputs: ReportInputs) -> Markup:
    conditions, reference = inputs.conditions, inputs.reference
    if conditions.height and conditions["series"].n_unique() > 1:
        return render_template("sections/reference.html.j2", factorial=True)
    a = inputs.product("stats")["anova"].get("pe", {})
    return render_template(
        "sections/reference.html.j2",
        factorial=False,
        reference=reference,
        conditions=_conditions(reference["conditions"], conditions),
        changes=_changes(reference["changes"], inputs.changes),
        ours=a.get("apa", a.get("message", "not tested")),
        theirs=reference["anova"],
    )


def _conditions(reference: list[dict[str, Any]], conditions: pl.DataFrame) -> Markup:
    """PE, RMS power and time per budget, the reference's and ours, the i-th budget against the i-th."""
    ours = {m: conditions.filter(pl.col("measure") == m).sort("budget") for m in ("pe", "power_rms_w", "train_s")}
    budgets = ours["pe"]["budget"].to_list()
    pe_exp = display_exponent(ours["pe"]["mean"].drop_nulls().to_list() if ours["pe"].height else [])
    rows = []
    for i, ref in enumerate(reference):
        got = lambda m, col="mean": ours[m][col][i] if i < len(budgets) and ours[m].height > i else None  # noqa: E731
        rows.append(
            [
                f"{budget_label(ref['budget'])} / {budget_label(budgets[i]) if i < len(budgets) else '—'}",
                f"{ref['pe_mean']} ({ref['pe_sd']})",
                f"{fixed(got('pe'), pe_exp)} ({fixed(got('pe', 'sd'), pe_exp)})",
                ref["power_rms_w"],
                got("power_rms_w"),
                ref["train_min"],
                None if got("train_s") is None else got("train_s") / 60,
            ]
        )
    header = [
        "budget (reference / ours)",
        "PE mean (sd), reference",
        f"PE mean (sd), ours{power_of_ten(pe_exp)}",
        "RMS power W, reference",
        "RMS power W, ours",
        "time min, reference",
        "time min, ours",
    ]
    return table(header, rows)


def _changes(reference: list[dict[str, Any]], changes: pl.DataFrame) -> Markup:
    """The changes from one budget to the next, the reference's (of the means) and ours (paired)."""
    ours = changes.sort("from_budget").to_dicts()
    rows = []
    for i, ref in enumerate(reference):
        o = ours[i] if i < len(ours) else {}
        step = f"{budget_label(ref['from_budget'])}→{budget_label(ref['to_budget'])}"
        if o:
            step += f" / {budget_label(o['from_budget'])}→{budget_label(o['to_budget'])}"
        rows.append(
            [
                step,
                ref["perplexity_reduction_pct"],
                o.get("perplexity_reduction_pct"),
                ref["pe_drop_pct"],
                o.get("pe_drop_pct"),
                ref["power_change_pct"],
                o.get("power_change_pct"),
            ]
        )
    header = [
        "step (reference / ours)",
        "perplexity reduction %, ref. (of the means)",
        "ours (paired, geometric)",
        "PE drop %, ref.",
        "ours",
        "power change %, ref.",
        "ours",
    ]
    return table(header, rows)
