"""Marginal quality per kJ: where a joule stopped buying quality.

Per segment between two eval points, the loss fallen per kJ spent (``stopping.segment_gain``, the quantity an
energy-aware stopping rule judges); per run, the first point whose segment gained less than a fraction
(``analysis.gain_fraction``) of its first segment's, with that point's tokens and energy; per cell, how many runs
fell there and where.

Where a run's gain fell is right-censored data: a run whose gain never fell below the fraction would have fallen
past its last point, so it enters the cell's Kaplan–Meier median (``censored.km_median``) as censored at its last
energy and tokens. A centre over the runs that fell would leave out the costly ones: it would be biased low. A run
a stopping rule ended before its gain fell counts the same way, censored where it stopped: its fall lay beyond, but
if the rule stopped it for a low gain, probably not far beyond, so there the median leans high (the one direction
the data can bound).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from ...plan.stopping import segment_gain
from .censored import ABOVE, EXACT, km_median
from .runs import RUN_SCHEMA, CurvesError, nullable, rows_table, runs_of

SEGMENT_SCHEMA = {
    **RUN_SCHEMA,
    "point": pl.Int64,
    "real_tokens": pl.Float64,
    "train_energy_j": pl.Float64,
    "delta_loss": pl.Float64,
    "delta_kj": pl.Float64,
    "gain_per_kj": pl.Float64,
}


def marginal_gains(curves: pl.DataFrame) -> pl.DataFrame:
    """Per segment (from the point before to ``point``, whose tokens and energy are given): the loss change, the
    kJ spent and the quality gained per kJ, ``−Δ loss / Δ kJ`` (``stopping.segment_gain``, the quantity the
    stopping rule judges; null where the meter saw no energy)."""
    rows = []
    for run in runs_of(curves):
        points = run.rule_points()
        for j in range(1, len(points)):
            rows.append(
                {
                    **run.key(),
                    "point": int(run.point[j]),
                    "real_tokens": nullable(run.tokens[j]),
                    "train_energy_j": nullable(run.energy[j]),
                    "delta_loss": float(run.loss[j] - run.loss[j - 1]),
                    "delta_kj": nullable((run.energy[j] - run.energy[j - 1]) / 1000.0),
                    "gain_per_kj": segment_gain(points[j - 1], points[j]),
                }
            )
    return rows_table(rows, SEGMENT_SCHEMA)


FALL_SCHEMA = {
    **RUN_SCHEMA,
    "first_gain_per_kj": pl.Float64,
    "threshold_per_kj": pl.Float64,
    "fell": pl.Boolean,
    "fall_point": pl.Int64,
    "fall_real_tokens": pl.Float64,
    "fall_energy_j": pl.Float64,
    "last_real_tokens": pl.Float64,
    "last_energy_j": pl.Float64,
}


def _last_finite(values: np.ndarray) -> float | None:
    """The last finite value (a point the meter saw no energy at leaves the one before as the run's last known)."""
    finite = np.flatnonzero(np.isfinite(values))
    return float(values[finite[-1]]) if finite.size else None


def gain_falls(curves: pl.DataFrame, fraction: float = 0.1) -> pl.DataFrame:
    """Per run: its first segment's gain per kJ and the first later point whose segment gained less than
    ``fraction`` of it (where a joule had stopped paying), with that point's tokens and energy; ``fell`` false
    if none did, null where the first gain is not a positive number (a fraction of it means nothing). The run's
    last tokens and energy beside (its last point that has each): where a run that never fell is censored."""
    if not 0 < fraction < 1:
        raise CurvesError(
            f"fraction {fraction!r}: a fraction of the first segment's gain lies strictly between 0 and 1"
        )
    rows = []
    for run in runs_of(curves):
        points = run.rule_points()
        gains = [segment_gain(p, q) for p, q in zip(points, points[1:])]
        first = gains[0] if gains else None
        row = {
            **run.key(),
            "first_gain_per_kj": first,
            "last_real_tokens": _last_finite(run.tokens),
            "last_energy_j": _last_finite(run.energy),
        }
        if first is None or first <= 0:
            rows.append(row)
            continue
        threshold = fraction * first
        k = next((j for j in range(1, len(gains)) if gains[j] is not None and gains[j] < threshold), None)
        row |= {"threshold_per_kj": threshold, "fell": k is not None}
        if k is not None:  # segment k ends at point index k + 1
            row |= {
                "fall_point": int(run.point[k + 1]),
                "fall_real_tokens": nullable(run.tokens[k + 1]),
                "fall_energy_j": nullable(run.energy[k + 1]),
            }
        rows.append(row)
    return rows_table(rows, FALL_SCHEMA)


FALL_SUMMARY_SCHEMA = {
    "cell": pl.String,
    "series": pl.String,
    "budget": pl.Int64,
    "n": pl.Int64,
    "n_defined": pl.Int64,
    "n_fell": pl.Int64,
    "n_censored": pl.Int64,
    "first_gain_median_per_kj": pl.Float64,
    **{
        f"fall_{m}_{k}{u}": pl.Float64
        for m, u in (("energy", "_j"), ("real_tokens", ""))
        for k in ("median", "ci95_low", "ci95_high")
    },
}


def _km(runs: pl.DataFrame, quantity: str, suffix: str) -> dict[str, float | None]:
    """The Kaplan–Meier median of where the runs fell, and its 95 % interval: a run that fell exact at its fall
    point, one that never fell censored at its last point (None where the curve never falls below one half, or a
    bound is not reached)."""
    at = runs.select(
        "fell",
        pl.when(pl.col("fell"))
        .then(pl.col(f"fall_{quantity}{suffix}"))
        .otherwise(pl.col(f"last_{quantity}{suffix}"))
        .alias("at"),
    ).drop_nulls("at")  # only a run with no such value at all: a fall needs both ends' energies
    got = km_median(at["at"].to_numpy(), [EXACT if f else ABOVE for f in at["fell"]])
    return {
        f"fall_{quantity}_median{suffix}": got.median,
        f"fall_{quantity}_ci95_low{suffix}": got.ci95_low,
        f"fall_{quantity}_ci95_high{suffix}": got.ci95_high,
    }


def gain_falls_summary(falls: pl.DataFrame) -> pl.DataFrame:
    """Per cell (of ``gain_falls``' table): how many runs had a defined first gain, how many fell below the
    fraction and how many never did (censored at their last point), the median first gain, and the energy and
    tokens where the gain fell as Kaplan–Meier medians with their 95 % intervals, over every run with a defined
    first gain."""
    rows = []
    for (cell,), block in falls.partition_by("cell", as_dict=True, maintain_order=True).items():
        defined = block.filter(pl.col("fell").is_not_null())
        rows.append(
            {
                "cell": cell,
                "series": block["series"][0],
                "budget": block["budget"][0],
                "n": block.height,
                "n_defined": defined.height,
                "n_fell": int(defined["fell"].sum()),
                "n_censored": int((~defined["fell"]).sum()),
                "first_gain_median_per_kj": block["first_gain_per_kj"].median(),
                **_km(defined, "energy", "_j"),
                **_km(defined, "real_tokens", ""),
            }
        )
    return rows_table(rows, FALL_SUMMARY_SCHEMA)
