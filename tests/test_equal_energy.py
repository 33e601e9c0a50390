"""Quality at equal energy: each run's loss at the same training joules and the budgets compared there, checked by
hand."""

import math

import numpy as np
import polars as pl
import pytest
from curve_study import budget_study, curves_table, run_rows
from scipy import stats as sps
from tokenwatt.analysis.curves.equal_energy import (
    energy_grid,
    quality_at_energy,
    quality_at_energy_comparison,
    quality_at_energy_summary,
)


def test_quality_at_equal_energy_is_linear_in_log_energy_and_never_extrapolated():
    curves = curves_table(run_rows(100_000, 1, [1e4, 1e5, 1e6], [4.0, 3.5, 3.2], [10.0, 100.0, 1000.0]))
    at = quality_at_energy(curves, energies=[5.0, 10**1.5, 300.0, 2000.0])
    assert at["in_range"].to_list() == [False, True, True, False]
    assert at["eval_loss"].to_list()[0] is None and at["eval_loss"].to_list()[3] is None
    # 10^1.5 J is half way from 10 to 100 J on log energy; 300 J is log10(3) of the way from 100 to 1000 J.
    assert at["eval_loss"].to_list()[1:3] == pytest.approx([3.75, 3.5 - 0.3 * math.log10(3)])
    assert quality_at_energy_summary(at)["n_outside"].to_list() == [1, 0, 0, 1]


def test_the_common_energy_grid_spans_only_the_energies_every_run_reached():
    curves = curves_table(
        run_rows(100_000, 1, [1e4, 1e5], [4.0, 3.5], [10.0, 1000.0]),
        run_rows(200_000, 1, [2e4, 2e5], [3.9, 3.3], [20.0, 500.0]),
    )
    grid = energy_grid(curves, n=5)["energy_j"].to_list()
    assert grid == pytest.approx(np.geomspace(20.0, 500.0, 5)) and grid[0] == 20.0 and grid[-1] == 500.0
    at = quality_at_energy(curves, n=5)
    assert at["in_range"].all() and at["eval_loss"].null_count() == 0


def test_the_equal_energy_comparison_pairs_each_trial_across_budgets():
    at = quality_at_energy(budget_study(), n=4)
    energy = at["energy_j"].unique().sort()[2]
    one = at.filter(pl.col("energy_j") == energy)
    a, b = (one.filter(pl.col("budget") == x).sort("trial")["eval_loss"].to_numpy() for x in (100_000, 400_000))
    d = b - a
    half = sps.t.ppf(0.975, len(d) - 1) * d.std(ddof=1) / math.sqrt(len(d))
    row = (
        quality_at_energy_comparison(at)
        .filter((pl.col("energy_j") == energy) & (pl.col("budget_a") == 100_000) & (pl.col("budget_b") == 400_000))
        .row(0, named=True)
    )
    assert row["n"] == 8 and row["loss_change"] == pytest.approx(d.mean())
    assert (row["loss_change_ci95_low"], row["loss_change_ci95_high"]) == pytest.approx(
        (d.mean() - half, d.mean() + half)
    )
    assert row["ppl_change_pct"] == pytest.approx(100 * math.expm1(d.mean()))
