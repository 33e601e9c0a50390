"""Energy to target: where each run first reached a quality, what it cost, and the test between budgets, checked
by hand."""

import math

import numpy as np
import polars as pl
import pytest
from curve_study import BUDGETS, budget_study, curves_table, run_rows
from scipy import stats as sps
from statsmodels.stats.anova import AnovaRM
from tokenwatt.analysis.curve_runs import CurvesError
from tokenwatt.analysis.targets import (
    Target,
    default_targets,
    distinct_labels,
    energy_to_target,
    energy_to_target_summary,
    energy_to_target_tests,
    target,
    targets_from_config,
)

HAND = run_rows(100_000, 1, [1e4, 1e5, 1e6], [4.0, 3.0, 2.6], [12.0, 95.0, 900.0], seconds=[0.5, 4.0, 38.0])


def test_energy_to_target_interpolates_loss_linearly_in_log_tokens_and_energy_and_time_at_the_same_instant():
    got = energy_to_target(curves_table(HAND), [{"loss": 3.5}, {"loss": 3.2}]).rows(named=True)
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
    never = run_rows(100_000, 2, [1e4, 1e5, 1e6], [4.0, 3.8, 3.7], [12.0, 95.0, 900.0])
    got = energy_to_target(curves_table(HAND, never), [{"loss": 3.5}], cost).rows(named=True)
    joules, seconds = (12.0 * 95.0) ** 0.5, (0.5 * 4.0) ** 0.5
    kwh = joules * 1.2 / 3.6e6
    assert got[0]["kg_co2e"] == pytest.approx(kwh * 400.0 / 1000)
    assert got[0]["electricity_cost"] == pytest.approx(kwh * 0.3)
    assert got[0]["device_cost"] == pytest.approx(seconds / 3600 * 2.0)
    assert got[0]["total_cost"] == pytest.approx(kwh * 0.3 + seconds / 3600 * 2.0)
    assert not got[1]["reached"] and got[1]["kg_co2e"] is None  # censored: no cost, never a zero
    summary = energy_to_target_summary(energy_to_target(curves_table(HAND), [{"loss": 3.5}], cost)).row(0, named=True)
    assert summary["kg_co2e_geomean"] == pytest.approx(kwh * 400.0 / 1000)


def test_a_perplexity_target_is_the_loss_ln_ppl():
    assert target({"perplexity": 30}) == Target("perplexity", 30.0) and Target(
        "perplexity", 30.0
    ).loss == pytest.approx(3.4011974)
    got = energy_to_target(curves_table(HAND), [{"perplexity": 30}]).row(0, named=True)
    frac = (4.0 - math.log(30)) / (4.0 - 3.0)
    assert got["target"] == "perplexity 30" and got["target_loss"] == pytest.approx(math.log(30))
    assert got["energy_j"] == pytest.approx(12.0 ** (1 - frac) * 95.0**frac) and got["real_tokens"] == pytest.approx(
        10 ** (4 + frac)
    )


def test_a_target_already_met_at_the_first_point_carries_that_points_energy_as_an_upper_bound_and_stays_in_the_mean():
    reached = energy_to_target(curves_table(HAND), [{"loss": 4.5}])
    row = reached.row(0, named=True)
    assert row["reached"] and row["at_first_point"] and row["point_reached"] == 1
    assert (row["real_tokens"], row["energy_j"]) == (1e4, 12.0) and row["train_s"] is not None
    summary = energy_to_target_summary(reached).row(0, named=True)
    assert summary["n_at_first_point"] == 1 and summary["energy_geomean_j"] == pytest.approx(12.0)


def test_a_bare_number_is_not_a_target_because_it_could_be_a_loss_or_a_perplexity():
    with pytest.raises(CurvesError, match="perplexity: value"):
        target(9.0)


def test_a_trial_that_never_reaches_the_target_is_censored_kept_in_n_and_left_out_of_centre_and_test():
    curves = budget_study(shift={(100_000, 3): 0.6})  # trial 3 at 100K ends near 4.0 nats, above the target
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
    reached = energy_to_target(budget_study(), [{"loss": 3.6}])
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
    curves = budget_study()
    by_hand = [
        float(np.median(np.exp(curves.filter(pl.col("final") & (pl.col("budget") == b))["eval_loss"].to_numpy())))
        for b in BUDGETS
    ]
    got = default_targets(curves)
    assert [t.kind for t in got] == ["perplexity"] * 3 and [t.value for t in got] == pytest.approx(by_hand)


def test_configured_targets_replace_the_defaults():
    curves = budget_study(n=3)
    assert targets_from_config(None, curves) == targets_from_config([], curves) == default_targets(curves)
    assert targets_from_config([{"perplexity": 9}, {"loss": 2.2}], curves) == [
        Target("perplexity", 9.0),
        Target("loss", 2.2),
    ]


def test_a_zero_carbon_intensity_gives_zero_co2e_to_a_target_not_a_missing_one():
    cost = {"pue": 1.0, "carbon_intensity_g_per_kwh": 0.0, "electricity_price_per_kwh": None, "device_hour_price": None}
    summary = energy_to_target_summary(energy_to_target(curves_table(HAND), [{"loss": 3.5}], cost)).row(0, named=True)
    assert summary["kg_co2e_geomean"] == 0.0 and summary["total_cost_geomean"] is None


def test_a_run_below_the_target_at_its_first_point_stays_out_of_the_test_between_budgets():
    """Its energy is only an upper bound, looser for a larger budget's later first point: compared, it would make a
    budget effect of its own. Its subject is named among those left out."""
    reached = energy_to_target(budget_study(), [{"loss": 4.5}])
    bounded = reached.filter(pl.col("at_first_point"))
    assert bounded.height > 0
    test = energy_to_target_tests(reached)[0]
    assert set(bounded["trial"].to_list()) <= set(test.left_out)
    assert "only an upper bound" in test.message


def test_two_targets_that_would_read_alike_get_labels_long_enough_to_tell_them_apart():
    got = distinct_labels([Target("perplexity", 12.31), Target("perplexity", 12.34), Target("perplexity", 5.60915)])
    assert [t.label for t in got] == ["perplexity 12.31", "perplexity 12.34", "perplexity 5.609"]
    assert [t.label for t in distinct_labels([Target("perplexity", 5.60915)])] == ["perplexity 5.61"]
