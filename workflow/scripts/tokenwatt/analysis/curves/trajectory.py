"""Trajectory statistics: how the eval loss moved between points, with the energy beside it.

The follow-up study's statistics (arXiv:2606.13370): per point the change from the previous one, backslides
(a rise), spikes (a rise large against the run's median change) and the rolling volatility; per cell and point the
spread across trials; per run its best point (tokens, energy and time there) and how far its end rose above it; and
per cell the repeated-measures ANOVA of the loss over the points.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from ...common.measures import exp_of_loss
from ..frame import MIN_SUBJECTS
from ..stats import anova_effects, complete_block
from .runs import RUN_SCHEMA, CurvesError, Run, nullable, rows_table, runs_of

POINT_SCHEMA = {
    **RUN_SCHEMA,
    "point": pl.Int64,
    "real_tokens": pl.Float64,
    "train_energy_j": pl.Float64,
    "train_s": pl.Float64,
    "eval_loss": pl.Float64,
    "perplexity": pl.Float64,
    "delta_loss": pl.Float64,
    "backslide": pl.Boolean,
    "spike": pl.Boolean,
    "volatility": pl.Float64,
}
INTERVAL_SCHEMA = {
    "cell": pl.String,
    "series": pl.String,
    "budget": pl.Int64,
    "point": pl.Int64,
    "n": pl.Int64,
    "real_tokens_mean": pl.Float64,
    "train_energy_mean_j": pl.Float64,
    "loss_mean": pl.Float64,
    "loss_sd": pl.Float64,
    "loss_min": pl.Float64,
    "loss_max": pl.Float64,
    "ppl_mean": pl.Float64,
    "ppl_sd": pl.Float64,
    "volatility_mean": pl.Float64,
    "n_backslides": pl.Int64,
    "n_spikes": pl.Int64,
}
TRAJECTORY_TRIAL_SCHEMA = {
    **RUN_SCHEMA,
    "n_points": pl.Int64,
    "n_backslides": pl.Int64,
    "n_spikes": pl.Int64,
    "median_abs_change": pl.Float64,
    "best_point": pl.Int64,
    "best_loss": pl.Float64,
    "best_perplexity": pl.Float64,
    "best_real_tokens": pl.Float64,
    "best_energy_j": pl.Float64,
    "best_train_s": pl.Float64,
    "final_loss": pl.Float64,
    "final_minus_best_loss": pl.Float64,
}


@dataclass(frozen=True)
class Trajectory:
    """The trajectory statistics: ``points`` (every point with its change from the previous one, backslide, spike
    and rolling volatility), ``intervals`` (per cell and point, across trials), ``trials`` (per run: counts and
    its best point) and ``anova`` (per cell, the RM-ANOVA of the loss over points)."""

    window: int
    spike_k: float
    points: pl.DataFrame
    intervals: pl.DataFrame
    trials: pl.DataFrame
    anova: list[dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        return {
            "window": self.window,
            "spike_k": self.spike_k,
            "points": self.points.to_dicts(),
            "intervals": self.intervals.to_dicts(),
            "trials": self.trials.to_dicts(),
            "anova": self.anova,
        }


def _trajectory_points(run: Run, window: int, spike_k: float) -> tuple[list[dict[str, Any]], float | None]:
    """The run's points with their derived columns, and its median absolute change (the spike scale)."""
    delta = np.concatenate([[np.nan], np.diff(run.loss)])
    scale = float(np.nanmedian(np.abs(delta[1:]))) if np.isfinite(delta[1:]).any() else None
    rows = []
    for j in range(len(run.loss)):
        recent = delta[j - window + 1 : j + 1] if j >= window else np.array([])
        rows.append(
            {
                **run.key(),
                "point": int(run.point[j]),
                "real_tokens": nullable(run.tokens[j]),
                "train_energy_j": nullable(run.energy[j]),
                "train_s": nullable(run.seconds[j]),
                "eval_loss": nullable(run.loss[j]),
                "perplexity": exp_of_loss(nullable(run.loss[j])),
                "delta_loss": nullable(delta[j]),
                "backslide": bool(delta[j] > 0),
                "spike": bool(scale is not None and delta[j] > spike_k * scale),
                "volatility": nullable(float(np.std(recent, ddof=1))) if recent.size else None,
            }
        )
    return rows, scale


def _best(run: Run) -> dict[str, Any]:
    """The run's lowest-loss point (the first of equals) and how far its end is above it."""
    b = int(np.nanargmin(run.loss))
    return {
        "best_point": int(run.point[b]),
        "best_loss": float(run.loss[b]),
        "best_perplexity": exp_of_loss(float(run.loss[b])),
        "best_real_tokens": nullable(run.tokens[b]),
        "best_energy_j": nullable(run.energy[b]),
        "best_train_s": nullable(run.seconds[b]),
        "final_loss": nullable(run.loss[-1]),
        "final_minus_best_loss": nullable(run.loss[-1] - run.loss[b]),
    }


def _interval_anova(points: pl.DataFrame) -> list[dict[str, Any]]:
    """Per cell, the RM-ANOVA of the raw eval loss with the point (interval) as the within factor and the trial as
    the subject (GG ε and Mauchly's W from ``stats.anova_effects``), on the trials with every point (a stopped
    run, with fewer, is named in ``dropped_trials``). The perplexity's ANOVA on its log scale is this one: ln ppl
    is the loss."""
    out = []
    for (cell,), block in points.partition_by("cell", as_dict=True, maintain_order=True).items():
        y, factors, levels, kept, dropped = complete_block(block.sort("point"), "eval_loss", ["point"])
        row: dict[str, Any] = {
            "cell": cell,
            "series": block["series"][0],
            "budget": block["budget"][0],
            "dv": "eval_loss",
            "scale": "raw",
            "points": levels[0] if levels else [],
            "n_trials": len(kept),
            "dropped_trials": dropped,
        }
        if not factors:
            out.append(
                {**row, "status": "not tested", "message": f"{cell}: one evaluation point, no interval to compare"}
            )
        elif len(kept) < MIN_SUBJECTS:
            out.append(
                {
                    **row,
                    "status": "not tested",
                    "message": f"{cell}: only {len(kept)} trials have every point; "
                    f"the analysis needs at least {MIN_SUBJECTS}",
                }
            )
        else:
            effect = anova_effects(y, factors)[0]
            out.append({**row, **{k: v for k, v in effect.items() if k not in ("effect", "factors")}})
    return out


def trajectory(curves: pl.DataFrame, window: int = 3, spike_k: float = 3.0) -> Trajectory:
    """The follow-up study's trajectory statistics (arXiv:2606.13370), with energy beside them. Definitions:
    the change at a point is its loss minus the previous point's; a *backslide* is a point whose loss is higher
    than the previous point's (change > 0); a *spike* is a rise larger than ``spike_k`` times the trial's median
    absolute change over all its points (a scale robust to the large early falls; a run whose median change is
    0 calls any rise a spike); the *rolling volatility* at a point is the sd of the last ``window`` changes
    ending there (null before ``window`` changes exist). Between-seed spread: per point the sd and range of the
    loss across trials. Points are aligned by index (the schedule gives every trial of a cell the same tokens)."""
    if isinstance(window, bool) or not isinstance(window, int) or window < 2:
        raise CurvesError(f"window {window!r}: a rolling sd needs a whole number of changes ≥ 2")
    if not (isinstance(spike_k, (int, float)) and math.isfinite(spike_k) and spike_k > 0):
        raise CurvesError(f"spike_k {spike_k!r}: a spike is a rise above a positive multiple of the median change")
    rows, trials = [], []
    for run in runs_of(curves):
        mine, scale = _trajectory_points(run, window, spike_k)
        rows += mine
        trials.append(
            {
                **run.key(),
                "n_points": len(mine),
                "n_backslides": sum(r["backslide"] for r in mine),
                "n_spikes": sum(r["spike"] for r in mine),
                "median_abs_change": scale,
                **_best(run),
            }
        )
    points = rows_table(rows, POINT_SCHEMA)
    intervals = points.group_by("cell", "point", maintain_order=True).agg(
        pl.col("series").first(),
        pl.col("budget").first(),
        pl.len().cast(pl.Int64).alias("n"),
        pl.col("real_tokens").mean().alias("real_tokens_mean"),
        pl.col("train_energy_j").mean().alias("train_energy_mean_j"),
        pl.col("eval_loss").mean().alias("loss_mean"),
        pl.col("eval_loss").std().alias("loss_sd"),
        pl.col("eval_loss").min().alias("loss_min"),
        pl.col("eval_loss").max().alias("loss_max"),
        pl.col("perplexity").mean().alias("ppl_mean"),
        pl.col("perplexity").std().alias("ppl_sd"),
        pl.col("volatility").mean().alias("volatility_mean"),
        pl.col("backslide").sum().cast(pl.Int64).alias("n_backslides"),
        pl.col("spike").sum().cast(pl.Int64).alias("n_spikes"),
    )
    order = {c: i for i, c in enumerate(dict.fromkeys(points["cell"].to_list()))}
    intervals = (
        intervals.sort(pl.col("cell").replace_strict(order), "point")
        .select(list(INTERVAL_SCHEMA))
        .cast(INTERVAL_SCHEMA)
    )
    return Trajectory(
        window, float(spike_k), points, intervals, rows_table(trials, TRAJECTORY_TRIAL_SCHEMA), _interval_anova(points)
    )
