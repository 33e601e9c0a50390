"""Energy-to-quality curves: every number the analysis derives from a trial's evaluation points, checked by hand.

Fixtures at the real scale of a small CPU study: losses in nats (2–8), cumulative training energy in J (tens to
thousands), tokens 1e3–1e6, lognormal noise on energy, cells with unequal variances.
"""

import json
import math

import numpy as np
import polars as pl
import pytest
from scipy import stats as sps
from statsmodels.stats.anova import AnovaRM
from tokenwatt.analysis.curves import (
    CurvesError,
    Target,
    default_targets,
    distinct_labels,
    energy_grid,
    energy_to_target,
    energy_to_target_summary,
    energy_to_target_tests,
    gain_falls,
    gain_falls_summary,
    marginal_gains,
    quality_at_energy,
    quality_at_energy_comparison,
    quality_at_energy_summary,
    stopping_outcomes,
    target,
    targets_from_config,
    trajectory,
)
from tokenwatt.plan.stopping import StopRule

BUDGETS = [100_000, 200_000, 400_000]


def _run(budget, trial, tokens, losses, energies, seconds=None, series=""):
    """One trial run's rows in the curve file's shape; its last point is the final one."""
    seconds = (
        seconds if seconds is not None else [e / 30.0 if e is not None else t / 5e3 for e, t in zip(energies, tokens)]
    )
    cell = f"{series}/b{budget}" if series else f"b{budget}"
    return [
        {
            "cell": cell,
            "series": series,
            "budget": budget,
            "trial": trial,
            "point": i + 1,
            "real_tokens": int(t),
            "distinct_tokens": int(min(t, budget)),
            "epoch": int(math.ceil(t / budget)),
            "train_energy_j": e,
            "train_s": s,
            "eval_loss": float(v),
            "eval_energy_j": 0.4,
            "eval_s": 0.01,
            "final": i == len(tokens) - 1,
        }
        for i, (t, v, e, s) in enumerate(zip(tokens, losses, energies, seconds))
    ]


def _curves(*runs):
    return pl.DataFrame([row for run in runs for row in run], schema_overrides={"train_energy_j": pl.Float64})


def _study(n=8, points=8, seed=0, shift=None):
    """Trials × budgets: loss 2.6 + 25 · tokens^−0.3 plus the subject's offset and noise whose sd grows with the
    budget; training energy cumulated from ~1 mJ/token, the subject's own level (lognormal) and per-segment noise
    that also grows with the budget. ``shift`` adds nats to one (budget, trial)'s whole curve."""
    rng = np.random.default_rng(seed)
    runs = []
    for t in range(1, n + 1):
        level, jpt = rng.normal(0, 0.05), 1e-3 * rng.lognormal(0, 0.15)
        for i, b in enumerate(BUDGETS):
            tokens = np.geomspace(b / 64, b, points).round()
            loss = 2.6 + 25 * tokens**-0.3 + level + rng.normal(0, 0.01 * (1 + i), points)
            loss += (shift or {}).get((b, t), 0.0)
            energy = np.cumsum(np.diff(tokens, prepend=0.0) * jpt * rng.lognormal(0, 0.05 * (1 + i), points))
            runs.append(_run(b, t, tokens, loss, energy.tolist()))
    return _curves(*runs)


# ---- energy to target ----------------------------------------------------------------------------------

HAND = _run(100_000, 1, [1e4, 1e5, 1e6], [4.0, 3.0, 2.6], [12.0, 95.0, 900.0], seconds=[0.5, 4.0, 38.0])


def test_energy_to_target_interpolates_loss_linearly_in_log_tokens_and_energy_and_time_at_the_same_instant():
    got = energy_to_target(_curves(HAND), [{"loss": 3.5}, {"loss": 3.2}]).rows(named=True)
    # 3.5 is half way from 4.0 to 3.0: log10 tokens 4.5; energy and time grow with the tokens, so they are taken half way
    # on their log scales too (the geometric mean of the two points), which puts all three at one instant.
    assert got[0]["reached"] and not got[0]["at_first_point"] and got[0]["point_reached"] == 2
    assert got[0]["real_tokens"] == pytest.approx(10**4.5) and got[0]["energy_j"] == pytest.approx((12.0 * 95.0) ** 0.5)
    assert got[0]["train_s"] == pytest.approx((0.5 * 4.0) ** 0.5)
    # 3.2 is 0.8 of the way: log10 tokens 4.8, energy 12^0.2 · 95^0.8 J.
    assert got[1]["real_tokens"] == pytest.approx(10**4.8) and got[1]["energy_j"] == pytest.approx(
        12.0**0.2 * 95.0**0.8
    )


def test_reaching_a_target_costs_its_energy_in_co2e_and_money_and_its_training_time_in_device_hours():
    cost = {"pue": 1.2, "carbon_intensity_g_per_kwh": 400.0, "electricity_price_per_kwh": 0.3, "device_hour_price": 2.0}
    never = _run(100_000, 2, [1e4, 1e5, 1e6], [4.0, 3.8, 3.7], [12.0, 95.0, 900.0])
    got = energy_to_target(_curves(HAND, never), [{"loss": 3.5}], cost).rows(named=True)
    joules, seconds = (12.0 * 95.0) ** 0.5, (0.5 * 4.0) ** 0.5
    kwh = joules * 1.2 / 3.6e6
    assert got[0]["kg_co2e"] == pytest.approx(kwh * 400.0 / 1000)
    assert got[0]["electricity_cost"] == pytest.approx(kwh * 0.3)
    assert got[0]["device_cost"] == pytest.approx(seconds / 3600 * 2.0)
    assert got[0]["total_cost"] == pytest.approx(kwh * 0.3 + seconds / 3600 * 2.0)
    assert not got[1]["reached"] and got[1]["kg_co2e"] is None  # censored: no cost, never a zero
    summary = energy_to_target_summary(energy_to_target(_curves(HAND), [{"loss": 3.5}], cost)).row(0, named=True)
    assert summary["kg_co2e_geomean"] == pytest.approx(kwh * 400.0 / 1000)


def test_a_perplexity_target_is_the_loss_ln_ppl():
    assert target({"perplexity": 30}) == Target("perplexity", 30.0) and Target(
        "perplexity", 30.0
    ).loss == pytest.approx(3.4011974)
    got = energy_to_target(_curves(HAND), [{"perplexity": 30}]).row(0, named=True)
    frac = (4.0 - math.log(30)) / (4.0 - 3.0)
    assert got["target"] == "perplexity 30" and got["target_loss"] == pytest.approx(math.log(30))
    assert got["energy_j"] == pytest.approx(12.0 ** (1 - frac) * 95.0**frac) and got["real_tokens"] == pytest.approx(
        10 ** (4 + frac)
    )


def test_a_target_already_met_at_the_first_point_carries_that_points_energy_as_an_upper_bound_and_stays_in_the_mean():
    reached = energy_to_target(_curves(HAND), [{"loss": 4.5}])
    row = reached.row(0, named=True)
    assert row["reached"] and row["at_first_point"] and row["point_reached"] == 1
    assert (row["real_tokens"], row["energy_j"]) == (1e4, 12.0) and row["train_s"] is not None
    summary = energy_to_target_summary(reached).row(0, named=True)
    assert summary["n_at_first_point"] == 1 and summary["energy_geomean_j"] == pytest.approx(12.0)


def test_a_bare_number_is_not_a_target_because_it_could_be_a_loss_or_a_perplexity():
    with pytest.raises(CurvesError, match="perplexity: value"):
        target(9.0)


def test_a_trial_that_never_reaches_the_target_is_censored_kept_in_n_and_left_out_of_centre_and_test():
    curves = _study(shift={(100_000, 3): 0.6})  # trial 3 at 100K ends near 4.0 nats, above the target
    reached = energy_to_target(curves, [{"loss": 3.6}])
    small = reached.filter(pl.col("budget") == 100_000)
    assert small.filter(pl.col("trial") == 3)["reached"].to_list() == [False]
    assert small.filter(pl.col("trial") == 3)["energy_j"].to_list() == [None]
    energies = small.filter(pl.col("reached"))["energy_j"].to_numpy()
    row = energy_to_target_summary(reached).filter(pl.col("budget") == 100_000).row(0, named=True)
    assert (row["n"], row["n_reached"], row["n_censored"]) == (8, 7, 1)
    assert row["energy_median_j"] == pytest.approx(np.median(energies))
    assert row["energy_geomean_j"] == pytest.approx(math.exp(np.log(energies).mean()))
    half = sps.t.ppf(0.975, 6) * np.log(energies).std(ddof=1) / math.sqrt(7)
    assert row["energy_ci95_low_j"] == pytest.approx(math.exp(np.log(energies).mean() - half))
    (test,) = energy_to_target_tests(reached)
    assert (test.subjects, test.used, test.left_out) == (8, 7, [3])
    assert test.anova["n_trials"] == 7 and test.anova["df2"] == 2 * (7 - 1) and test.anova["scale"] == "log"
    assert test.message.startswith("7 of 8 subjects reached loss 3.6 in every cell") and "trial 3" in test.message


def test_the_energy_to_target_test_is_the_rm_anova_of_log_energy_on_the_subjects_that_reached_it():
    reached = energy_to_target(_study(), [{"loss": 3.6}])
    (test,) = energy_to_target_tests(reached)
    logged = reached.select("trial", "budget", pl.col("energy_j").log()).to_pandas()
    theirs = AnovaRM(logged, depvar="energy_j", subject="trial", within=["budget"]).fit().anova_table
    assert test.anova["F"] == pytest.approx(theirs["F Value"].iloc[0], rel=1e-8)
    assert {(p["budget_a"], p["budget_b"]) for p in test.pairs} == {
        (100_000, 200_000),
        (100_000, 400_000),
        (200_000, 400_000),
    }


def test_default_targets_are_the_median_final_perplexity_of_each_budget():
    curves = _study()
    by_hand = [
        float(np.median(np.exp(curves.filter(pl.col("final") & (pl.col("budget") == b))["eval_loss"].to_numpy())))
        for b in BUDGETS
    ]
    got = default_targets(curves)
    assert [t.kind for t in got] == ["perplexity"] * 3 and [t.value for t in got] == pytest.approx(by_hand)


def test_configured_targets_replace_the_defaults():
    curves = _study(n=3)
    assert targets_from_config(None, curves) == targets_from_config([], curves) == default_targets(curves)
    assert targets_from_config([{"perplexity": 9}, {"loss": 2.2}], curves) == [
        Target("perplexity", 9.0),
        Target("loss", 2.2),
    ]


# ---- quality at equal energy ---------------------------------------------------------------------------


def test_quality_at_equal_energy_is_linear_in_log_energy_and_never_extrapolated():
    curves = _curves(_run(100_000, 1, [1e4, 1e5, 1e6], [4.0, 3.5, 3.2], [10.0, 100.0, 1000.0]))
    at = quality_at_energy(curves, energies=[5.0, 10**1.5, 300.0, 2000.0])
    assert at["in_range"].to_list() == [False, True, True, False]
    assert at["eval_loss"].to_list()[0] is None and at["eval_loss"].to_list()[3] is None
    # 10^1.5 J is half way from 10 to 100 J on log energy; 300 J is log10(3) of the way from 100 to 1000 J.
    assert at["eval_loss"].to_list()[1:3] == pytest.approx([3.75, 3.5 - 0.3 * math.log10(3)])
    assert quality_at_energy_summary(at)["n_outside"].to_list() == [1, 0, 0, 1]


def test_the_common_energy_grid_spans_only_the_energies_every_run_reached():
    curves = _curves(
        _run(100_000, 1, [1e4, 1e5], [4.0, 3.5], [10.0, 1000.0]),
        _run(200_000, 1, [2e4, 2e5], [3.9, 3.3], [20.0, 500.0]),
    )
    grid = energy_grid(curves, n=5)["energy_j"].to_list()
    assert grid == pytest.approx(np.geomspace(20.0, 500.0, 5)) and grid[0] == 20.0 and grid[-1] == 500.0
    at = quality_at_energy(curves, n=5)
    assert at["in_range"].all() and at["eval_loss"].null_count() == 0


def test_the_equal_energy_comparison_pairs_each_trial_across_budgets():
    at = quality_at_energy(_study(), n=4)
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


# ---- marginal quality per kJ ---------------------------------------------------------------------------

GAINS = _run(100_000, 1, [1e4, 3e4, 7e4, 1.5e5], [5.0, 4.0, 3.8, 3.76], [100.0, 300.0, 700.0, 1500.0])


def test_marginal_gain_is_the_loss_fall_per_kj_of_each_segment():
    seg = marginal_gains(_curves(GAINS))
    # 1.0 nat over 0.2 kJ, 0.2 over 0.4 kJ, 0.04 over 0.8 kJ.
    assert seg["point"].to_list() == [2, 3, 4] and seg["delta_kj"].to_list() == pytest.approx([0.2, 0.4, 0.8])
    assert seg["gain_per_kj"].to_list() == pytest.approx([5.0, 0.5, 0.05])


def test_the_fall_below_point_is_the_first_whose_segment_gained_less_than_the_fraction_of_the_first():
    assert gain_falls(_curves(GAINS), 0.2).row(0, named=True) == pytest.approx(
        {
            "cell": "b100000",
            "series": "",
            "budget": 100_000,
            "trial": 1,
            "first_gain_per_kj": 5.0,
            "threshold_per_kj": 1.0,
            "fell": True,
            "fall_point": 3,
            "fall_real_tokens": 7e4,
            "fall_energy_j": 700.0,
        }
    )
    assert gain_falls(_curves(GAINS), 0.05)["fall_point"].to_list() == [4]  # 0.5 ≥ 0.25; 0.05 < 0.25
    assert gain_falls(_curves(GAINS), 0.001)["fell"].to_list() == [False]


def test_a_cell_summary_of_falls_counts_runs_that_never_fell():
    falls = gain_falls(_curves(GAINS, _run(100_000, 2, [1e4, 3e4, 7e4], [5.0, 4.0, 3.1], [100.0, 300.0, 700.0])), 0.2)
    row = gain_falls_summary(falls).row(0, named=True)
    assert (row["n"], row["n_defined"], row["n_fell"]) == (2, 2, 1) and row["fall_energy_geomean_j"] == pytest.approx(
        700.0
    )


# ---- trajectory statistics -----------------------------------------------------------------------------

# Changes: −2, −1, −0.4, +0.1, −0.3, +1.1, −1.2, +0.05; median |change| = (0.4 + 1.0) / 2 = 0.7.
BUMPY = [8.0, 6.0, 5.0, 4.6, 4.7, 4.4, 5.5, 4.3, 4.35]


def _bumpy(trial=1, losses=BUMPY):
    tokens = np.geomspace(1e4, 1e6, len(losses))
    return _run(1_000_000, trial, tokens, losses, (tokens * 1e-3).tolist())


def test_backslides_and_spikes_are_counted_on_a_constructed_trajectory():
    got = trajectory(_curves(_bumpy()), window=3, spike_k=1.5)
    points = got.points
    assert points.filter(pl.col("backslide"))["point"].to_list() == [5, 7, 9]
    assert points.filter(pl.col("spike"))["point"].to_list() == [7]  # +1.1 > 1.5 · 0.7; +0.1 and +0.05 are not
    trial = got.trials.row(0, named=True)
    assert (trial["n_backslides"], trial["n_spikes"], trial["median_abs_change"]) == (3, 1, pytest.approx(0.7))


def test_rolling_volatility_is_the_sd_of_the_last_window_changes():
    vol = trajectory(_curves(_bumpy()), window=3).points["volatility"].to_list()
    assert vol[:3] == [None, None, None]
    assert vol[3] == pytest.approx(np.std([-2.0, -1.0, -0.4], ddof=1))
    assert vol[8] == pytest.approx(np.std([1.1, -1.2, 0.05], ddof=1))


def test_per_interval_counts_and_spread_are_across_trials():
    other = [8.1, 6.2, 5.1, 4.5, 4.4, 4.5, 4.2, 4.25, 4.1]  # backslides at points 6 and 8
    intervals = trajectory(_curves(_bumpy(1), _bumpy(2, other))).intervals
    assert intervals["n_backslides"].to_list() == [0, 0, 0, 0, 1, 1, 1, 1, 1]
    assert intervals["loss_sd"].to_list() == pytest.approx([np.std([a, b], ddof=1) for a, b in zip(BUMPY, other)])
    assert intervals["loss_max"].to_list()[6] == 5.5 and intervals["loss_min"].to_list()[6] == 4.2


def test_each_trials_best_point_gives_its_energy_and_tokens_and_how_far_the_end_rose():
    # The follow-up study's shape: lowest in the middle, higher at the end.
    losses = [8.36, 5.1, 3.6, 2.8, 3.1, 3.5, 3.9]
    tokens = [2e5, 1e6, 2e6, 4e6, 8e6, 1.4e7, 2e7]
    energies = [140.0, 700.0, 1400.0, 2800.0, 5600.0, 9800.0, 14000.0]
    trial = trajectory(_curves(_run(20_000_000, 1, tokens, losses, energies))).trials.row(0, named=True)
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
        _run(
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
    (ours,) = trajectory(_curves(*runs)).anova
    theirs = (
        AnovaRM(
            _curves(*runs).select("trial", "point", "eval_loss").to_pandas(),
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
    (full,) = trajectory(_curves(*runs)).anova
    (ours,) = trajectory(_curves(*runs, short)).anova
    assert ours["dropped_trials"] == [7] and ours["n_trials"] == 6 and ours["F"] == pytest.approx(full["F"])


# ---- stopping rules, replayed --------------------------------------------------------------------------

ENERGY = np.array([100.0, 300.0, 700.0, 1500.0, 3100.0, 6300.0])
TOKENS = [2e4, 6e4, 1.4e5, 3e5, 6.2e5, 1.26e6]
# Gains per segment at energy scale 1 (nats/kJ): slow:  5, 0.5, 0.05, 0.00625, 0.0003;
# late: 5, 1.0, 0.125, 0.00625, 0.0003; steady: 5, 1.25, 0.625, 0.3125, 0.156.
SLOW = [5.0, 4.0, 3.8, 3.76, 3.75, 3.749]
LATE = [5.0, 4.0, 3.6, 3.5, 3.49, 3.489]
STEADY = [5.0, 4.0, 3.5, 3.0, 2.5, 2.0]


def _stopping_study():
    """Four trials of one cell; with min_gain 0.1 nats/kJ and patience 1 the rule stops trial 1 at point 4 (0.05),
    trial 2 at point 5 (0.00625; 0.125 at point 4 is enough), never trial 3, and trial 4 at point 4 (energies
    × 0.9: 0.0556)."""
    return _curves(
        *(
            _run(1_000_000, t, TOKENS, losses, (ENERGY * scale).tolist())
            for t, (losses, scale) in enumerate([(SLOW, 1.0), (LATE, 1.0), (STEADY, 1.2), (SLOW, 0.9)], 1)
        )
    )


def test_stopping_outcomes_are_computed_against_the_paired_full_runs():
    out = stopping_outcomes(_stopping_study(), StopRule("marginal", 0.1, 1))
    trials = out.trials
    assert trials["stop_point"].to_list() == [4, 5, 6, 4] and trials["stopped"].to_list() == [True, True, False, True]
    assert trials["stop_eval_whole_set"].to_list() == [False, False, True, False]
    ratio = np.array([1500 / 6300, 3100 / 6300, 1.0, 1500 / 6300])
    rise = np.array([3.76 - 3.749, 3.49 - 3.489, 0.0, 3.76 - 3.749])
    assert trials["energy_saved_pct"].to_list() == pytest.approx(100 * (1 - ratio))
    assert trials["loss_increase"].to_list() == pytest.approx(rise)
    cell = out.cells.row(0, named=True)
    log_r, t = np.log(ratio), sps.t.ppf(0.975, 3)
    half = t * log_r.std(ddof=1) / 2
    assert cell["n"] == 4 and cell["n_stopped"] == 3
    assert cell["energy_saved_pct"] == pytest.approx(100 * (1 - math.exp(log_r.mean())))
    assert (cell["energy_saved_pct_ci95_low"], cell["energy_saved_pct_ci95_high"]) == pytest.approx(
        (100 * (1 - math.exp(log_r.mean() + half)), 100 * (1 - math.exp(log_r.mean() - half)))
    )
    half = t * rise.std(ddof=1) / 2
    assert (cell["loss_increase"], cell["loss_increase_ci95_low"]) == pytest.approx((rise.mean(), rise.mean() - half))
    assert cell["ppl_increase_pct"] == pytest.approx(100 * math.expm1(rise.mean()))
    assert cell["ppl_increase_pct_ci95_high"] == pytest.approx(100 * math.expm1(rise.mean() + half))


def test_stopping_outcomes_give_the_energy_to_target_of_full_and_stopped_runs():
    # Loss 3.4895: trial 2 reaches it only at its last point, after the rule would have stopped it; trial 3 at point 4.
    out = stopping_outcomes(_stopping_study(), StopRule("marginal", 0.1, 1), targets=[{"loss": 3.4895}])
    rows = {r["run"]: r for r in out.targets.rows(named=True)}
    assert (rows["full"]["n"], rows["full"]["n_reached"]) == (4, 2)
    assert (rows["stopped"]["n"], rows["stopped"]["n_reached"], rows["stopped"]["n_censored"]) == (4, 1, 3)


def test_rule_none_stops_nothing_and_saves_nothing():
    cell = stopping_outcomes(_stopping_study(), StopRule()).cells.row(0, named=True)
    assert (cell["n_stopped"], cell["energy_saved_pct"], cell["loss_increase"]) == (
        0,
        pytest.approx(0.0),
        pytest.approx(0.0),
    )


def test_every_record_serialises_to_json():
    curves = _study(n=4, points=5)
    reached = energy_to_target(curves, default_targets(curves))
    records = [
        *energy_to_target_tests(reached),
        trajectory(curves),
        stopping_outcomes(curves, StopRule("marginal", 0.01, 2)),
    ]
    assert all(json.loads(json.dumps(r.to_dict())) for r in records)


def test_a_zero_carbon_intensity_gives_zero_co2e_to_a_target_not_a_missing_one():
    cost = {"pue": 1.0, "carbon_intensity_g_per_kwh": 0.0, "electricity_price_per_kwh": None, "device_hour_price": None}
    summary = energy_to_target_summary(energy_to_target(_curves(HAND), [{"loss": 3.5}], cost)).row(0, named=True)
    assert summary["kg_co2e_geomean"] == 0.0 and summary["total_cost_geomean"] is None


def test_a_run_below_the_target_at_its_first_point_stays_out_of_the_test_between_budgets():
    """Its energy is only an upper bound, looser for a larger budget's later first point: compared, it would make a
    budget effect of its own. Its subject is named among those left out."""
    reached = energy_to_target(_study(), [{"loss": 4.5}])
    bounded = reached.filter(pl.col("at_first_point"))
    assert bounded.height > 0
    test = energy_to_target_tests(reached)[0]
    assert set(bounded["trial"].to_list()) <= set(test.left_out)
    assert "only an upper bound" in test.message


def test_two_targets_that_would_read_alike_get_labels_long_enough_to_tell_them_apart():
    got = distinct_labels([Target("perplexity", 12.31), Target("perplexity", 12.34), Target("perplexity", 5.60915)])
    assert [t.label for t in got] == ["perplexity 12.31", "perplexity 12.34", "perplexity 5.609"]
    assert [t.label for t in distinct_labels([Target("perplexity", 5.60915)])] == ["perplexity 5.61"]
