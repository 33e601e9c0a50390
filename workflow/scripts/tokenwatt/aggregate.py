"""Per-trial table and per-budget summaries (the study's tables), with missing trials named."""

from __future__ import annotations

from typing import Any, Iterable

import numpy as np
import polars as pl
from scipy import stats as sps

from .measures import MEASURES


def trials_table(records: Iterable[dict[str, Any] | None], expected: list[tuple[int, int]]) -> tuple[pl.DataFrame, list[str]]:
    """One row per finished trial (nested records flattened, lists dropped), and the names of missing or failed ones.

    ``records`` pairs with ``expected`` (budget, trial); None means no metrics file.
    """
    rows, missing = [], []
    for (budget, trial), rec in zip(expected, records):
        if rec is None or rec.get("status") != "ok":
            missing.append(f"budget {budget} trial {trial}: " + ("no metrics" if rec is None else f"status {rec.get('status')}"))
            continue
        flat = {}
        for key, value in rec.items():
            if isinstance(value, dict):  # e.g. versions -> versions_torch
                flat.update({f"{key}_{k}": v for k, v in value.items()})
            elif not isinstance(value, list):
                flat[key] = value
        rows.append(flat)
    if not rows:
        return pl.DataFrame(), missing
    return pl.DataFrame(rows, infer_schema_length=None).sort("budget", "trial"), missing


def _summary(values: np.ndarray) -> dict[str, float | int | None]:
    n = len(values)
    mean = float(values.mean()) if n else None
    sd = float(values.std(ddof=1)) if n > 1 else None
    sem = sd / np.sqrt(n) if sd is not None else None
    half = float(sps.t.ppf(0.975, n - 1) * sem) if sem is not None else None
    return {"n": n, "mean": mean, "sd": sd, "sem": sem,
            "ci95_low": None if half is None else mean - half, "ci95_high": None if half is None else mean + half}


def conditions_table(trials: pl.DataFrame) -> pl.DataFrame:
    """Long table: budget × measure with n, mean, sd, sem, 95 % t-interval and % change from the previous budget.

    Nulls (e.g. energy with meter none) are left out of n, never counted as zero.
    """
    rows = []
    budgets = sorted(trials["budget"].unique().to_list())
    for measure in MEASURES:
        if measure not in trials.columns:
            continue
        previous = None
        for budget in budgets:
            values = trials.filter(pl.col("budget") == budget)[measure].drop_nulls().cast(pl.Float64).to_numpy()
            row = {"budget": budget, "measure": measure, **_summary(values)}
            row["pct_change_from_previous"] = (
                None if previous is None or row["mean"] is None or not previous else 100.0 * (row["mean"] - previous) / previous
            )
            previous = row["mean"]
            rows.append(row)
    return pl.DataFrame(rows, schema={"budget": pl.Int64, "measure": pl.String, "n": pl.Int64, "mean": pl.Float64, "sd": pl.Float64,
                                      "sem": pl.Float64, "ci95_low": pl.Float64, "ci95_high": pl.Float64,
                                      "pct_change_from_previous": pl.Float64}, orient="row")


def changes_table(conditions: pl.DataFrame) -> pl.DataFrame:
    """The study's own trade-off table: for each step between budgets, perplexity reduction,
    PE drop and power change in percent (positive reduction/drop = it went down)."""
    wide = conditions.pivot(on="measure", index="budget", values="pct_change_from_previous").sort("budget")
    budgets = wide["budget"].to_list()
    get = lambda m: wide[m].to_list() if m in wide.columns else [None] * len(budgets)  # noqa: E731
    ppl, pe, power, energy = get("perplexity"), get("pe"), get("power_rms_w"), get("energy_j")
    neg = lambda x: None if x is None else -x  # noqa: E731
    return pl.DataFrame(
        [{"from_budget": budgets[i - 1], "to_budget": budgets[i], "perplexity_reduction_pct": neg(ppl[i]),
          "pe_drop_pct": neg(pe[i]), "power_change_pct": power[i], "energy_change_pct": energy[i]} for i in range(1, len(budgets))],
        schema={"from_budget": pl.Int64, "to_budget": pl.Int64, "perplexity_reduction_pct": pl.Float64,
                "pe_drop_pct": pl.Float64, "power_change_pct": pl.Float64, "energy_change_pct": pl.Float64}, orient="row",
    )
