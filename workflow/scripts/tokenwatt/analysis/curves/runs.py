"""The eval curves as runs: the table every curve analysis reads, and what the analyses share.

Input: the long ``curves`` table, one row per (trial run, evaluation point): ``cell``, ``series``, ``budget``,
``trial`` (the subject), ``point`` (1..P), ``real_tokens``, ``train_energy_j`` (cumulative training energy,
evaluation excluded; null with meter none), ``train_s``, ``eval_loss`` (nats/token) and ``final`` (the last
point, on the whole eval set; earlier points may use a fixed subset). A run is one (cell, trial).

Conventions. Positions between points are interpolated on log axes: losses fall roughly linearly in log
tokens and log energy, and the points are log-spaced. A point with no position on the axis (an evaluation
before any training: 0 tokens or 0 J) is left out of that interpolation; it stays in the trajectory
statistics. Nothing is extrapolated beyond a run's own points. A run that never reached a target is
censored: kept and counted, never dropped or imputed. Energies are on the log scale (geometric means,
ratios), losses on the raw scale (a loss is already a log: log perplexity), as ``tokenwatt.common.measures`` declares.
Every test takes the subjects present in every cell it compares; the caller passes curves of the analysis
frame's subjects.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np
import polars as pl

from ...common.measures import exp_of_loss

REQUIRED = (
    "cell",
    "series",
    "budget",
    "trial",
    "point",
    "real_tokens",
    "train_energy_j",
    "train_s",
    "eval_loss",
    "final",
)
RUN_SCHEMA = {"cell": pl.String, "series": pl.String, "budget": pl.Int64, "trial": pl.Int64}


class CurvesError(ValueError):
    """A curves table the analysis cannot read (a column missing, a point repeated); the message says which."""


class Run(NamedTuple):
    """One trial run's points in order, nulls as NaN."""

    cell: str
    series: str
    budget: int
    trial: int
    point: np.ndarray
    tokens: np.ndarray
    energy: np.ndarray
    seconds: np.ndarray
    loss: np.ndarray
    final: np.ndarray

    def key(self) -> dict[str, Any]:
        return {"cell": self.cell, "series": self.series, "budget": self.budget, "trial": self.trial}

    def rule_points(self) -> list[dict[str, Any]]:
        """The run's points as ``tokenwatt.plan.stopping`` reads them."""
        return [{"train_energy_j": nullable(e), "eval_loss": float(v)} for e, v in zip(self.energy, self.loss)]


def floats(frame: pl.DataFrame, column: str) -> np.ndarray:
    """A column as floats, nulls as NaN."""
    return frame[column].cast(pl.Float64).fill_null(float("nan")).to_numpy()


def runs_of(curves: pl.DataFrame) -> list[Run]:
    """Every run, cells in the table's order (the design's), trials ascending, points in order."""
    missing = [c for c in REQUIRED if c not in curves.columns]
    if missing:
        raise CurvesError(f"the curves table lacks column(s) {', '.join(missing)}")
    if curves.select("cell", "trial", "point").is_duplicated().any():
        raise CurvesError("the curves table holds a (cell, trial, point) more than once")
    order = {c: i for i, c in enumerate(dict.fromkeys(curves["cell"].to_list()))}
    parts = curves.sort("point").partition_by("cell", "trial", as_dict=True, maintain_order=True)
    runs = []
    for cell, trial in sorted(parts, key=lambda k: (order[k[0]], k[1])):
        part = parts[(cell, trial)]
        runs.append(
            Run(
                cell,
                part["series"][0],
                int(part["budget"][0]),
                int(trial),
                part["point"].to_numpy(),
                floats(part, "real_tokens"),
                floats(part, "train_energy_j"),
                floats(part, "train_s"),
                floats(part, "eval_loss"),
                part["final"].to_numpy(),
            )
        )
    return runs


def nullable(x: float) -> float | None:
    """A float for a table; NaN (unmeasured, undefined) as null."""
    return float(x) if x is not None and math.isfinite(x) else None


def rows_table(rows: list[dict[str, Any]], schema: Mapping[str, Any]) -> pl.DataFrame:
    """The rows as a table of ``schema``'s columns in its order; a column a row lacks is null there."""
    return pl.DataFrame([{k: r.get(k) for k in schema} for r in rows], schema=dict(schema), orient="row")


def perplexity_change_pct(x: float | None) -> float | None:
    """A mean loss difference as the % change of the geometric mean perplexity; None where the ratio is
    missing (``exp_of_loss``: a difference past ~709 nats)."""
    return 100.0 * math.expm1(x) if exp_of_loss(x) is not None else None
