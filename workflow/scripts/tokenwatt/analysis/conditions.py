"""Per-condition summaries and the study's trade-off table, each measure on its own scale.

Both read the analysis frame only (complete subjects; under ``quality.exclude_flagged`` without
flagged ones), so their numbers come from the trial set the tests use.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from ..common.measures import MEASURES, scale_of
from .frame import frame
from .scale import paired_change, summary
from .tables import CHANGES_SCHEMA, CONDITIONS_SCHEMA, series_blocks


def _values(block: pl.DataFrame, budget: int, measure: str) -> dict[int, float]:
    rows = block.filter(pl.col("budget") == budget).select("trial", measure).drop_nulls().iter_rows()
    return {t: float(v) for t, v in rows}


def conditions_table(trials: pl.DataFrame) -> pl.DataFrame:
    """Long table: series × budget × measure with n, the arithmetic mean and sd, the centre on the measure's
    scale (geometric mean for log-scale measures) with its 95 % t-interval, and the change from the previous
    budget of the same series, paired by trial (a % change of the geometric mean ratio, or a mean difference
    on the raw scale) with its interval. The series: the levels of every other factor ("" in a one-factor study).

    Nulls (e.g. energy with meter none) are left out of n, never counted as zero.
    """
    trials = frame(trials)
    rows = []
    budgets = sorted(trials["budget"].unique().to_list()) if trials.height else []
    for series, mine in series_blocks(trials):
        for measure in MEASURES:
            if measure not in trials.columns:
                continue
            scale, previous = scale_of(measure), None
            for budget in budgets:
                now = _values(mine, budget, measure)
                row = {
                    "series": series,
                    "budget": budget,
                    "measure": measure,
                    **summary(np.array(list(now.values()), dtype=float), scale),
                }
                if previous is not None:
                    common = sorted(set(previous) & set(now))
                    row.update(
                        paired_change(
                            np.array([previous[t] for t in common]), np.array([now[t] for t in common]), scale
                        )
                    )
                previous = now
                rows.append(row)
    return pl.DataFrame(
        [{k: r.get(k) for k in CONDITIONS_SCHEMA} for r in rows], schema=CONDITIONS_SCHEMA, orient="row"
    )


def changes_table(conditions: pl.DataFrame) -> pl.DataFrame:
    """The study's own trade-off table: for each step between budgets (within each series), perplexity
    reduction, PE drop and the changes of power and energy, in percent of the geometric mean, paired by
    trial (positive reduction/drop = it went down)."""
    rows = []
    for series, block in series_blocks(conditions):
        wide = block.pivot(on="measure", index="budget", values="change").sort("budget")
        budgets = wide["budget"].to_list()
        get = lambda m: wide[m].to_list() if m in wide.columns else [None] * len(budgets)  # noqa: E731
        ppl, pe, power, energy = get("perplexity"), get("pe"), get("power_rms_w"), get("energy_j")
        neg = lambda x: None if x is None else -x  # noqa: E731
        rows += [
            {
                "series": series,
                "from_budget": budgets[i - 1],
                "to_budget": budgets[i],
                "perplexity_reduction_pct": neg(ppl[i]),
                "pe_drop_pct": neg(pe[i]),
                "power_change_pct": power[i],
                "energy_change_pct": energy[i],
            }
            for i in range(1, len(budgets))
        ]
    return pl.DataFrame(rows, schema=CHANGES_SCHEMA, orient="row")
