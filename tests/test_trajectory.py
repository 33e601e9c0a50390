"""Trajectory statistics: backslides, spikes, volatility, each run's best point and the ANOVA over points, checked
by hand and against statsmodels."""

import math

import numpy as np
import polars as pl
import pytest
from curve_study import curves_table, run_rows
from statsmodels.stats.anova import AnovaRM
from tokenwatt.analysis.curves.trajectory import trajectory

# Changes: −2, −1, −0.4, +0.1, −0.3, +1.1, −1.2, +0.05; median |change| = (0.4 + 1.0) / 2 = 0.7.
BUMPY = [8.0, 6.0, 5.0, 4.6, 4.7, 4.4, 5.5, 4.3, 4.35]


def _bumpy(trial=1, losses=BUMPY):
    tokens = np.geomspace(1e4, 1e6, len(losses))
    return run_rows(1_000_000, trial, tokens, losses, (tokens * 1e-3).tolist())


def test_backslides_and_spikes_are_counted_on_a_constructed_trajectory():
    got = trajectory(curves_table(_bumpy()), window=3, spike_k=1.5)
    points = got.points
    assert points.filter(pl.col("backslide"))["point"].to_list() == [5, 7, 9]
    assert points.filter(pl.col("spike"))["point"].to_list() == [7]  # +1.1 > 1.5 · 0.7; +0.1 and +0.05 are not
    trial = got.trials.row(0, named=True)
    assert (trial["n_backslides"], trial["n_spikes"], trial["median_abs_change"]) == (3, 1, pytest.approx(0.7))


def test_rolling_volatility_is_the_sd_of_the_last_window_changes():
    vol = trajectory(curves_table(_bumpy()), window=3).points["volatility"].to_list()
    assert vol[:3] == [None, None, None]
    assert vol[3] == pytest.approx(np.std([-2.0, -1.0, -0.4], ddof=1))
    assert vol[8] == pytest.approx(np.std([1.1, -1.2, 0.05], ddof=1))


def test_per_interval_counts_and_spread_are_across_trials():
    other = [8.1, 6.2, 5.1, 4.5, 4.4, 4.5, 4.2, 4.25, 4.1]  # backslides at points 6 and 8
    intervals = trajectory(curves_table(_bumpy(1), _bumpy(2, other))).intervals
    assert intervals["n_backslides"].to_list() == [0, 0, 0, 0, 1, 1, 1, 1, 1]
    assert intervals["loss_sd"].to_list() == pytest.approx([np.std([a, b], ddof=1) for a, b in zip(BUMPY, other)])
    assert intervals["loss_max"].to_list()[6] == 5.5 and intervals["loss_min"].to_list()[6] == 4.2


def test_each_trials_best_point_gives_its_energy_and_tokens_and_how_far_the_end_rose():
    # The follow-up study's shape: lowest in the middle, higher at the end.
    losses = [8.36, 5.1, 3.6, 2.8, 3.1, 3.5, 3.9]
    tokens = [2e5, 1e6, 2e6, 4e6, 8e6, 1.4e7, 2e7]
    energies = [140.0, 700.0, 1400.0, 2800.0, 5600.0, 9800.0, 14000.0]
    trial = trajectory(curves_table(run_rows(20_000_000, 1, tokens, losses, energies))).trials.row(0, named=True)
    assert (trial["best_point"], trial["best_loss"], trial["best_real_tokens"], trial["best_energy_j"]) == (
        4,
        2.8,
        4e6,
        2800.0,
    )
    assert trial["best_perplexity"] == pytest.approx(math.exp(2.8)) and trial["final_minus_best_loss"] == pytest.approx(
        1.1
    )


def _seeds(n=6, points=6, seed=1):
    """Seeds × intervals of a loss that falls and then rises, each seed with its own level and noise."""
    rng = np.random.default_rng(seed)
    shape = np.array([6.0, 4.2, 3.3, 2.9, 3.1, 3.4])[:points]
    tokens = np.geomspace(1e5, 2e7, points)
    return [
        run_rows(
            20_000_000,
            t,
            tokens,
            shape + rng.normal(0, 0.1) + rng.normal(0, 0.05 * (1 + np.arange(points))),
            (tokens * 7e-4 * rng.lognormal(0, 0.1)).tolist(),
        )
        for t in range(1, n + 1)
    ]


def test_the_rm_anova_over_intervals_matches_statsmodels_on_the_same_block():
    runs = _seeds()
    (ours,) = trajectory(curves_table(*runs)).anova
    theirs = (
        AnovaRM(
            curves_table(*runs).select("trial", "point", "eval_loss").to_pandas(),
            depvar="eval_loss",
            subject="trial",
            within=["point"],
        )
        .fit()
        .anova_table
    )
    assert ours["status"] == "ok" and ours["points"] == [1, 2, 3, 4, 5, 6] and ours["n_trials"] == 6
    assert ours["F"] == pytest.approx(theirs["F Value"].iloc[0], rel=1e-8)
    assert ours["p"] == pytest.approx(theirs["Pr > F"].iloc[0], rel=1e-6)
    assert (ours["df1"], ours["df2"]) == (theirs["Num DF"].iloc[0], theirs["Den DF"].iloc[0])


def test_a_run_with_fewer_points_is_left_out_of_the_interval_anova_and_named():
    runs = _seeds()
    short = _seeds(n=7)[6][:4]
    (full,) = trajectory(curves_table(*runs)).anova
    (ours,) = trajectory(curves_table(*runs, short)).anova
    assert ours["dropped_trials"] == [7] and ours["n_trials"] == 6 and ours["F"] == pytest.approx(full["F"])


def test_the_report_shows_the_trajectory_table_unless_every_row_would_read_zero():
    from tokenwatt.presentation.sections.curves import _trajectory

    smooth = {
        "series": "",
        "budget": 1000,
        "n_backslides": 0,
        "n_spikes": 0,
        "best_point": 3,
        "final_minus_best_loss": 0.0,
    }
    assert _trajectory([smooth, smooth]) is None  # said in one sentence instead
    assert _trajectory([smooth, {**smooth, "n_spikes": 1}]) is not None
    assert _trajectory([smooth, {**smooth, "final_minus_best_loss": None}]) is not None  # a diverged trial's row shows
