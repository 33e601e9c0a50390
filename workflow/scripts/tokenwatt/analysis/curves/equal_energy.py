"""Quality at equal energy: what quality each budget had at the same training joules.

The question "repeat the data or add new data?" (Muennighoff et al. 2023) asked at a fixed cost: on a grid of
cumulative training energies that every run of a series reached, each run's eval loss there (linear in log energy
between its two points around it, never extrapolated), per cell its mean with a 95 % interval, and per pair of
budgets the loss difference paired by trial, as nats and as a % change in perplexity.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import polars as pl

from ...common.measures import exp_of_loss
from ..scale import paired_change, summary
from .runs import CurvesError, Run, perplexity_change_pct, rows_table, runs_of

GRID_SCHEMA = {"series": pl.String, "energy_j": pl.Float64}
AT_ENERGY_SCHEMA = {
    "series": pl.String,
    "energy_j": pl.Float64,
    "cell": pl.String,
    "budget": pl.Int64,
    "trial": pl.Int64,
    "in_range": pl.Boolean,
    "eval_loss": pl.Float64,
}


def _on_energy(run: Run) -> tuple[np.ndarray, np.ndarray]:
    """The run's (energy, loss) points that have a place on a log-energy axis."""
    keep = np.isfinite(run.energy) & (run.energy > 0) & np.isfinite(run.loss)
    return run.energy[keep], run.loss[keep]


def energy_grid(curves: pl.DataFrame, n: int = 8) -> pl.DataFrame:
    """Per series, ``n`` log-spaced training energies where every run with measured energy has data: from the
    largest first-point energy to the smallest last-point energy (the smallest budget's end, where "repeat the
    data or add new data" is asked). A series whose runs share no range has no grid."""
    rows = []
    by_series: dict[str, list[tuple[float, float]]] = {}
    for run in runs_of(curves):
        energy, _ = _on_energy(run)
        if energy.size:
            by_series.setdefault(run.series, []).append((energy[0], energy[-1]))
    for series, ranges in by_series.items():
        lo, hi = max(r[0] for r in ranges), min(r[1] for r in ranges)
        if lo <= hi:
            rows += [{"series": series, "energy_j": float(e)} for e in dict.fromkeys(np.geomspace(lo, hi, n).tolist())]
    return rows_table(rows, GRID_SCHEMA)


def quality_at_energy(curves: pl.DataFrame, energies: Sequence[float] | None = None, n: int = 8) -> pl.DataFrame:
    """Each run's eval loss at the same cumulative training energies: ``energies`` (J, for every series) or
    ``energy_grid(curves, n)``. The loss is linear in log energy between the two points around each energy;
    an energy outside the run's own range (or a run without measured energy) is null with ``in_range`` false,
    never extrapolated."""
    if energies is not None:
        energies = sorted(float(e) for e in energies)
        if not all(math.isfinite(e) and e > 0 for e in energies):
            raise CurvesError(f"energies {energies!r}: each is a finite number of joules > 0")
    runs = runs_of(curves)
    grid = (
        energy_grid(curves, n)
        if energies is None
        else pl.DataFrame(
            [{"series": s, "energy_j": e} for s in dict.fromkeys(r.series for r in runs) for e in energies],
            schema=GRID_SCHEMA,
        )
    )
    rows = []
    for (series,), block in grid.partition_by("series", as_dict=True, maintain_order=True).items():
        mine = [r for r in runs if r.series == series]
        for e in block["energy_j"].to_list():
            for run in mine:
                energy, loss = _on_energy(run)
                inside = bool(energy.size) and energy[0] <= e <= energy[-1]
                rows.append(
                    {
                        "series": series,
                        "energy_j": e,
                        "cell": run.cell,
                        "budget": run.budget,
                        "trial": run.trial,
                        "in_range": inside,
                        "eval_loss": float(np.interp(np.log(e), np.log(energy), loss)) if inside else None,
                    }
                )
    return rows_table(rows, AT_ENERGY_SCHEMA)


AT_ENERGY_SUMMARY_SCHEMA = {
    "series": pl.String,
    "energy_j": pl.Float64,
    "cell": pl.String,
    "budget": pl.Int64,
    "n": pl.Int64,
    "n_in_range": pl.Int64,
    "n_outside": pl.Int64,
    "loss_mean": pl.Float64,
    "loss_sd": pl.Float64,
    "loss_ci95_low": pl.Float64,
    "loss_ci95_high": pl.Float64,
    "ppl_geomean": pl.Float64,
    "ppl_ci95_low": pl.Float64,
    "ppl_ci95_high": pl.Float64,
}


def _loss_and_perplexity(
    loss: tuple[str, str, str],
    ppl: tuple[str, str, str],
    values: tuple[float | None, float | None, float | None],
    as_ppl: Callable[[float | None], float | None],
) -> dict[str, Any]:
    """A loss estimate with its 95 % interval (``values``, in the ``loss`` columns) and the same three read as
    perplexities through ``as_ppl`` (in the ``ppl`` columns): both tables give each quality on both scales."""
    return {**dict(zip(loss, values)), **dict(zip(ppl, map(as_ppl, values)))}


def quality_at_energy_summary(at: pl.DataFrame) -> pl.DataFrame:
    """Per series, energy and cell (of ``quality_at_energy``'s table): the runs in range and outside it (counted,
    not imputed), the mean loss with its 95 % t-interval on the raw scale, and the same as a perplexity
    (exp of the mean loss: the geometric mean perplexity)."""
    rows = []
    for (series, energy, cell), block in at.partition_by(
        "series", "energy_j", "cell", as_dict=True, maintain_order=True
    ).items():
        inside = block.filter(pl.col("in_range"))
        s = summary(inside["eval_loss"].to_numpy(), "raw")
        rows.append(
            {
                "series": series,
                "energy_j": energy,
                "cell": cell,
                "budget": block["budget"][0],
                "n": block.height,
                "n_in_range": inside.height,
                "n_outside": block.height - inside.height,
                "loss_sd": s["sd"],
                **_loss_and_perplexity(
                    ("loss_mean", "loss_ci95_low", "loss_ci95_high"),
                    ("ppl_geomean", "ppl_ci95_low", "ppl_ci95_high"),
                    (s["center"], s["ci95_low"], s["ci95_high"]),
                    exp_of_loss,
                ),
            }
        )
    return rows_table(rows, AT_ENERGY_SUMMARY_SCHEMA)


COMPARISON_SCHEMA = {
    "series": pl.String,
    "energy_j": pl.Float64,
    "budget_a": pl.Int64,
    "budget_b": pl.Int64,
    "n": pl.Int64,
    "loss_change": pl.Float64,
    "loss_change_ci95_low": pl.Float64,
    "loss_change_ci95_high": pl.Float64,
    "ppl_change_pct": pl.Float64,
    "ppl_change_ci95_low": pl.Float64,
    "ppl_change_ci95_high": pl.Float64,
}


def quality_at_energy_comparison(at: pl.DataFrame) -> pl.DataFrame:
    """Per series and energy, every pair of budgets a < b paired by trial on the runs in range in both: the mean
    loss difference b − a (negative: the larger budget is better at that cost) with its 95 % t-interval, and the
    same as a % change in perplexity. Intervals, not p values: one comparison per grid energy, which a p value
    would have to be corrected for."""
    rows = []
    for (series, energy), block in at.partition_by("series", "energy_j", as_dict=True, maintain_order=True).items():
        values = {
            b: dict(part.filter(pl.col("in_range")).select("trial", "eval_loss").iter_rows())
            for (b,), part in block.partition_by("budget", as_dict=True).items()
        }
        for a, b in itertools.combinations(sorted(values), 2):
            common = sorted(set(values[a]) & set(values[b]))
            c = paired_change(np.array([values[a][t] for t in common]), np.array([values[b][t] for t in common]), "raw")
            rows.append(
                {
                    "series": series,
                    "energy_j": energy,
                    "budget_a": a,
                    "budget_b": b,
                    "n": c["change_n"],
                    **_loss_and_perplexity(
                        ("loss_change", "loss_change_ci95_low", "loss_change_ci95_high"),
                        ("ppl_change_pct", "ppl_change_ci95_low", "ppl_change_ci95_high"),
                        (c["change"], c["change_ci95_low"], c["change_ci95_high"]),
                        perplexity_change_pct,
                    ),
                }
            )
    return rows_table(rows, COMPARISON_SCHEMA)
