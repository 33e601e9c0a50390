"""Conditions: compact tables per family of measures, a row per measure and a column per budget, each cell the centre
on the measure's scale (geometric mean, or mean) with its 95 % CI and the change from the previous budget, paired by
trial; a row's power of ten in its label. With further factors, one set of tables per level of them (a series), so
that a table is as wide as the budgets, whatever the design."""

from __future__ import annotations

from typing import Any

import polars as pl
from markupsafe import Markup

from ...analysis.frame import frame_note
from ...common.measures import FAMILIES, budget_label, display_exponent, fixed, label, power_of_ten, scale_of
from ...plan.design import series_label
from ..html import esc, table
from ..inputs import ReportInputs
from ..templating import render_template


def render(inputs: ReportInputs) -> Markup:
    conditions = inputs.conditions
    budgets = sorted(conditions["budget"].unique().to_list()) if conditions.height else []
    all_series = list(dict.fromkeys(conditions["series"].to_list())) if conditions.height else []
    currency = inputs.config.get("cost", {}).get("currency", "")
    return render_template(
        "sections/conditions.html.j2",
        note=frame_note(inputs.trials, inputs.exclude_flagged),
        series=[
            (series_label(series) if len(all_series) > 1 else "", _tables(conditions, series, budgets, currency))
            for series in all_series
        ],
        heading="h4" if len(all_series) > 1 else "h3",
    )


def _tables(conditions: pl.DataFrame, series: str, budgets: list[int], currency: str) -> list[tuple[str, Markup]]:
    """One series' table per family of measures that has a measured row, with the family's name."""
    mine = conditions.filter(pl.col("series") == series)
    n_of = {b: mine.filter(pl.col("budget") == b)["n"].max() for b in budgets}
    header = ["measure", *[f"{budget_label(b)} (n = {n_of[b]})" for b in budgets]]
    out = []
    for family, measures in FAMILIES.items():
        rows = [row for m in measures if (row := _row(mine, m, budgets, n_of, currency)) is not None]
        if rows:
            out.append((family, table(header, rows)))
    return out


def _change_text(r: dict[str, Any], unit: str, scale: int) -> str:
    """The paired change from the previous budget: a % change of the geometric mean on the log scale,
    a difference in the measure's unit on the raw scale."""
    if r["scale"] == "log":
        return f"{r['change']:+.1f} %"
    return f"{'+' if r['change'] >= 0 else '−'}{fixed(abs(r['change']), scale)}{(' ' + unit) if unit else ''}"


def _row(
    conditions: pl.DataFrame, measure: str, budgets: list[int], n_of: dict[int, Any], currency: str
) -> list[Any] | None:
    """One measure of one series: its label (with the row's power of ten) and a cell per budget; None if unmeasured."""
    got = {r["budget"]: r for r in conditions.filter(pl.col("measure") == measure).iter_rows(named=True)}
    if not got or all(r["mean"] is None for r in got.values()):
        return None
    scale = display_exponent([v for r in got.values() for v in (r["center"], r["ci95_low"], r["ci95_high"])])
    kind = "geometric mean" if scale_of(measure) == "log" else "mean"
    name = Markup(esc(label(measure, currency) + power_of_ten(scale)) + f'<br><span class="ci">{kind}</span>')
    unit = label(measure, currency).rpartition("(")[2].rstrip(")") if "(" in label(measure, currency) else ""
    cells = []
    for i, b in enumerate(budgets):
        r = got.get(b)
        if r is None or r["center"] is None:
            why = f"{r['nonpositive']} value(s) ≤ 0: no geometric mean" if r is not None and r["nonpositive"] else ""
            cells.append(Markup(f"—{f' <span class=ci>({esc(why)})</span>' if why else ''}"))
            continue
        cell = f'{fixed(r["center"], scale)} <span class="ci">[{fixed(r["ci95_low"], scale)}, {fixed(r["ci95_high"], scale)}]</span>'
        if r["n"] != n_of[b]:
            cell += f' <span class="ci">(n = {r["n"]})</span>'
        if r["change"] is not None:
            change = f"{_change_text(r, unit, scale)} from {budget_label(budgets[i - 1])}"
            cell += f'<br><span class="chg">{esc(change)}</span>'
        cells.append(Markup(cell))
    return [name, *cells]
