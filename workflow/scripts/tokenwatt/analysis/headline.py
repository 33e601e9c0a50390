"""The report's first number: PE's and perplexity's change from the smallest budget to the largest, per series, paired
by trial on the analysis frame (the same computation as the conditions table's changes). Part of the statistics
product's output (``stats.json``, key ``headline``), so that the summary only words it."""

from __future__ import annotations

from typing import Any

import polars as pl

from ..common.measures import scale_of
from .frame import frame
from .scale import paired_change
from .tables import series_blocks

HEADLINE_MEASURES = ("pe", "perplexity")


def headline(trials: pl.DataFrame) -> dict[str, Any]:
    """``status`` ok with ``first`` and ``last`` budget and one row per series and measure that has at least two pairs
    and an interval; ``no subject`` where no subject finished every cell; ``one budget`` where there is one."""
    budgets = sorted(trials["budget"].unique().to_list()) if trials.height else []
    analysed = frame(trials)
    if not analysed.height:
        return {"status": "no subject", "budgets": budgets}
    if len(budgets) < 2:
        return {"status": "one budget", "budgets": budgets}
    first, last = budgets[0], budgets[-1]
    rows = [
        {"series": series, "measure": measure, **got}
        for series, block in series_blocks(analysed)
        for measure in HEADLINE_MEASURES
        if (got := _paired_change(block, measure, first, last))
    ]
    return {"status": "ok", "budgets": budgets, "first": first, "last": last, "changes": rows}


def _paired_change(trials: pl.DataFrame, measure: str, first: int, last: int) -> dict[str, Any] | None:
    """The per-trial change of ``measure`` from budget ``first`` to ``last`` on its scale, or None without two pairs."""
    if measure not in trials.columns:
        return None
    wide = trials.filter(pl.col("budget").is_in([first, last])).pivot(on="budget", index="trial", values=measure)
    if str(first) not in wide.columns or str(last) not in wide.columns:
        return None
    pairs = wide.drop_nulls([str(first), str(last)])
    got = paired_change(pairs[str(first)].to_numpy(), pairs[str(last)].to_numpy(), scale_of(measure))
    return got if got["change_n"] >= 2 and got["change_ci95_low"] is not None else None
