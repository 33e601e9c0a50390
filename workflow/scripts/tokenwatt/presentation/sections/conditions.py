"""Conditions: compact tables per family of measures, a row per measure and a column per budget, each cell the centre
on the measure's scale (geometric mean, or mean) with its 95 % CI and the change from the previous budget, paired by
trial; a row's unit in its label, prefixed to the size of its numbers (mJ, kJ, mEUR) or else with a ×10ⁿ. With
further factors, one set of tables per level of them (a series), so that a table is as wide as the budgets, whatever
the design."""

from __future__ import annotations

from typing import Any

import polars as pl
from markupsafe import Markup

from ...analysis.frame import frame_note
from ...common.measures import FAMILIES, MEASURES, SUMS, Display, budget_label, display, fixed, scale_of
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
        got = {m: row for m in measures if (row := _row(mine, m, budgets, n_of, currency)) is not None}
        repeats = [m for m, parts in SUMS.items() if m in got and not all(p in got for p in parts)]
        if rows := [row for m, row in got.items() if m not in repeats]:
            said = "".join(f'<p class="fn">{esc(_repeat_note(m, got))}</p>' for m in repeats)
            out.append((family, table(header, rows) + Markup(said)))
    return out


def _repeat_note(measure: str, shown: dict[str, Any]) -> str:
    """Why a sum has no row: the one part priced is its row already."""
    part = next((p for p in SUMS[measure] if p in shown), SUMS[measure][0])
    return f"{MEASURES[measure].label}: the same as {MEASURES[part].label}, the one part priced here (cost.*)."


def _change_text(r: dict[str, Any], shown: Display) -> str:
    """The paired change from the previous budget: a % change of the geometric mean on the log scale,
    a difference in the row's unit on the raw scale."""
    if r["scale"] == "log":
        return f"{r['change']:+.1f} %"
    unit = f" {shown.unit}" if shown.unit else ""
    return f"{'+' if r['change'] >= 0 else '−'}{fixed(abs(r['change']) * shown.factor)}{unit}"


def _row(
    conditions: pl.DataFrame, measure: str, budgets: list[int], n_of: dict[int, Any], currency: str
) -> list[Any] | None:
    """One measure of one series: its label (in the unit its values read in: mJ, kJ, mEUR, or a ×10ⁿ) and a cell per
    budget; None if unmeasured."""
    got = {r["budget"]: r for r in conditions.filter(pl.col("measure") == measure).iter_rows(named=True)}
    if not got or all(r["mean"] is None for r in got.values()):
        return None
    shown = display(measure, [v for r in got.values() for v in (r["center"], r["ci95_low"], r["ci95_high"])], currency)
    kind = "geometric mean" if scale_of(measure) == "log" else "mean"
    name = Markup(esc(shown.label) + f'<br><span class="ci">{kind}</span>')
    written = lambda x: fixed(None if x is None else x * shown.factor)  # noqa: E731
    cells = []
    for i, b in enumerate(budgets):
        r = got.get(b)
        if r is None or r["center"] is None:
            why = f"{r['nonpositive']} value(s) ≤ 0: no geometric mean" if r is not None and r["nonpositive"] else ""
            cells.append(Markup(f"—{f' <span class=ci>({esc(why)})</span>' if why else ''}"))
            continue
        cell = f'{written(r["center"])} <span class="ci">[{written(r["ci95_low"])}, {written(r["ci95_high"])}]</span>'
        if r["n"] != n_of[b]:
            cell += f' <span class="ci">(n = {r["n"]})</span>'
        if r["change"] is not None:
            change = f"{_change_text(r, shown)} from {budget_label(budgets[i - 1])}"
            cell += f'<br><span class="chg">{esc(change)}</span>'
        cells.append(Markup(cell))
    return [name, *cells]
