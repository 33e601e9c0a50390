"""Energy to target: where each run first reached a quality, what it cost, and the test between budgets, checked
by hand."""

import math

import numpy as np
import polars as pl
import pytest
from curve_study import BUDGETS, budget_study, curves_table, run_rows
from scipy import stats as sps
from statsmodels.duration.survfunc import SurvfuncRight
from tokenwatt.analysis.curves.runs import CurvesError
from tokenwatt.analysis.curves.targets import (
    Target,
    default_targets,
    distinct_labels,
    energy_to_target,
    energy_to_target_comparisons,
    energy_to_target_level_comparisons,
    energy_to_target_summary,
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
    # censored: the cost of what it spent, a lower bound of what reaching the target would have cost
    assert not got[1]["reached"] and got[1]["kg_co2e"] == pytest.approx(900.0 * 1.2 / 3.6e6 * 400.0 / 1000)
    summary = energy_to_target_summary(energy_to_target(curves_table(HAND), [{"loss": 3.5}], cost)).row(0, named=True)
    assert summary["kg_co2e_median"] == pytest.approx(kwh * 400.0 / 1000)


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


def test_a_target_already_met_at_the_first_point_carries_that_points_energy_as_an_upper_bound_and_stays_in_the_median():
    reached = energy_to_target(curves_table(HAND), [{"loss": 4.5}])
    row = reached.row(0, named=True)
    assert row["reached"] and row["at_first_point"] and row["point_reached"] == 1
    assert (row["real_tokens"], row["energy_j"]) == (1e4, 12.0) and row["train_s"] is not None
    summary = energy_to_target_summary(reached).row(0, named=True)
    assert summary["n_at_first_point"] == 1 and summary["energy_median_j"] == pytest.approx(12.0)


def test_a_bare_number_is_not_a_target_because_it_could_be_a_loss_or_a_perplexity():
    with pytest.raises(CurvesError, match="perplexity: value"):
        target(9.0)


def test_a_trial_that_never_reaches_the_target_is_censored_at_the_energy_it_stopped_at():
    curves = budget_study(shift={(100_000, 3): 0.6})  # trial 3 at 100K ends near 4.0 nats, above the target
    reached = energy_to_target(curves, [{"loss": 3.6}])
    censored = reached.filter((pl.col("budget") == 100_000) & (pl.col("trial") == 3)).row(0, named=True)
    last = curves.filter((pl.col("budget") == 100_000) & (pl.col("trial") == 3) & pl.col("final")).row(0, named=True)
    assert not censored["reached"] and censored["energy_j"] == pytest.approx(last["train_energy_j"])
    row = energy_to_target_summary(reached).filter(pl.col("budget") == 100_000).row(0, named=True)
    assert (row["n"], row["n_reached"], row["n_censored"]) == (8, 7, 1)


def _cell(energies, reached):
    """One cell of runs whose crossing (or last point, when not reached) is at ``energies``."""
    runs = []
    for t, (e, got) in enumerate(zip(energies, reached), start=1):
        runs.append(run_rows(100_000, t, [1e4, 1e5], [4.0, 3.0 if got else 3.9], [e / 2, e]))
    return curves_table(*runs)


def test_the_median_energy_to_target_counts_the_trials_that_never_got_there_as_needing_more():
    """Three of five trials got there at 10, 11 and 12 J; two stopped at 13 and 14 J without: they needed more
    than that, so at most 2 of 5 needed ≤ 11 J and the median is 12 J, not the survivors' 11 J."""
    reached = energy_to_target(_cell([10.0, 11.0, 12.0, 13.0, 14.0], [True, True, True, False, False]), [{"loss": 3.0}])
    row = energy_to_target_summary(reached).row(0, named=True)
    assert row["energy_median_j"] == pytest.approx(12.0)


def test_the_median_energy_and_its_interval_are_statsmodels_kaplan_meier_on_every_run():
    energies = [10.0, 10.5, 11.0, 12.0, 12.5, 13.0, 14.0, 15.0]
    got = [True, True, False, True, True, False, True, False]
    row = energy_to_target_summary(energy_to_target(_cell(energies, got), [{"loss": 3.0}])).row(0, named=True)
    theirs = SurvfuncRight(np.array(energies), np.array(got, float))
    assert row["energy_median_j"] == pytest.approx(theirs.quantile(0.5))
    low, high = theirs.quantile_ci(0.5, alpha=0.05, method="cloglog")
    assert row["energy_ci95_low_j"] == pytest.approx(low)
    assert row["energy_ci95_high_j"] == (pytest.approx(high) if math.isfinite(high) else None)


def test_with_no_trial_censored_the_energy_ratio_is_the_paired_t_test_on_log_energy():
    reached = energy_to_target(budget_study(), [{"loss": 3.6}])
    assert reached["reached"].all() and not reached["at_first_point"].any()
    pair = next(
        c.paired for c in energy_to_target_comparisons(reached) if (c.budget_a, c.budget_b) == (100_000, 400_000)
    )
    by = {b: reached.filter(pl.col("budget") == b).sort("trial")["energy_j"].log().to_numpy() for b in BUDGETS}
    theirs = sps.ttest_rel(by[400_000], by[100_000])
    assert pair.p == pytest.approx(theirs.pvalue, rel=1e-6)
    assert pair.ratio == pytest.approx(math.exp(np.mean(by[400_000] - by[100_000])), rel=1e-6)
    interval = theirs.confidence_interval()
    assert (pair.ci95_low, pair.ci95_high) == pytest.approx((math.exp(interval.low), math.exp(interval.high)), rel=1e-5)
    assert (pair.n_pairs, pair.n_exact, pair.n_censored) == (8, 8, 0)


def test_the_energy_ratio_keeps_every_trial_id_a_censored_one_included():
    curves = budget_study(shift={(100_000, 3): 0.6})
    comparisons = energy_to_target_comparisons(energy_to_target(curves, [{"loss": 3.6}]))
    pair = next(c.paired for c in comparisons if (c.budget_a, c.budget_b) == (100_000, 200_000))
    assert (pair.n_pairs, pair.n_exact, pair.n_censored) == (8, 7, 1) and pair.status == "ok"
    assert [c.p_holm for c in comparisons] == pytest.approx(
        [min(1.0, x) for x in _holm_by_hand([c.paired.p for c in comparisons])]
    )


def _holm_by_hand(p):
    order = sorted(range(len(p)), key=p.__getitem__)
    out, running = [0.0] * len(p), 0.0
    for rank, i in enumerate(order):
        running = max(running, (len(p) - rank) * p[i])
        out[i] = running
    return out


def test_a_trial_that_needed_more_than_it_spent_raises_the_ratio_the_survivors_alone_would_give():
    """Trial ids 1–6 need 1.2× the energy under the larger budget; under the smaller one, trial ids 5 and 6 ran out
    at 80 % of what they would have needed. Left out, the two costliest pairs go; censored, they pull the ratio of
    larger over smaller down, since the smaller budget's true energies are larger than their bounds."""
    runs = []
    for t, base in enumerate([10.0, 11.0, 12.5, 13.0, 15.0, 16.0], start=1):
        small_reached = t <= 4
        runs.append(run_rows(100_000, t, [1e4, 1e5], [4.0, 3.0 if small_reached else 3.9], [base / 2, base]))
        big = base * 1.2 * (1.0 + 0.02 * (-1) ** t)
        runs.append(run_rows(200_000, t, [1e4, 1e5], [4.0, 3.0], [big / 2, big]))
    (pair,) = (c.paired for c in energy_to_target_comparisons(energy_to_target(curves_table(*runs), [{"loss": 3.0}])))
    survivors = math.exp(
        np.mean(
            np.log(
                [
                    base * 1.2 * (1.0 + 0.02 * (-1) ** t) / base
                    for t, base in enumerate([10.0, 11.0, 12.5, 13.0], start=1)
                ]
            )
        )
    )
    assert pair.n_pairs == 6 and pair.n_censored == 2
    assert pair.ratio < survivors


def test_a_run_below_the_target_at_its_first_point_enters_the_ratio_as_an_upper_bound():
    reached = energy_to_target(budget_study(), [{"loss": 4.5}])
    bounded = reached.filter(pl.col("at_first_point"))
    assert bounded.height > 0
    budget = bounded["budget"][0]
    pair = next(c.paired for c in energy_to_target_comparisons(reached) if budget in (c.budget_a, c.budget_b))
    assert pair.n_pairs == 8 and pair.n_exact < 8


def test_default_targets_are_the_perplexity_four_in_five_of_each_budgets_trials_reached():
    """Not the median: at a budget's median final perplexity half its trials get there only at their last point, so
    its median energy to the target would be its total energy by construction."""
    curves = budget_study()
    by_hand = [
        float(
            np.quantile(np.exp(curves.filter(pl.col("final") & (pl.col("budget") == b))["eval_loss"].to_numpy()), 0.8)
        )
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
    assert summary["kg_co2e_median"] == 0.0 and summary["total_cost_median"] is None


def test_two_targets_that_would_read_alike_get_labels_long_enough_to_tell_them_apart():
    got = distinct_labels([Target("perplexity", 12.31), Target("perplexity", 12.34), Target("perplexity", 5.60915)])
    assert [t.label for t in got] == ["perplexity 12.31", "perplexity 12.34", "perplexity 5.609"]
    assert [t.label for t in distinct_labels([Target("perplexity", 5.60915)])] == ["perplexity 5.61"]


def test_a_run_a_stopping_rule_ended_before_the_target_never_reaches_it_under_that_rule():
    """Three of five runs stopped by a rule at 5 J short of the target: not "would have got there later", as a run
    that ran out of tokens is taken to, but never. Two of five reached it: no median."""
    curves = _cell([5.0, 5.0, 5.0, 10.0, 12.0], [False, False, False, True, True])
    ruled = curves.with_columns(stopped_by_rule=pl.col("trial") <= 3)
    row = energy_to_target_summary(energy_to_target(ruled, [{"loss": 3.0}])).row(0, named=True)
    assert row["energy_median_j"] is None and (row["n_reached"], row["n_censored"]) == (2, 3)
    ran_out = energy_to_target_summary(energy_to_target(curves, [{"loss": 3.0}])).row(0, named=True)
    assert ran_out["energy_median_j"] == pytest.approx(11.0)  # censored at 5 J: they may get there later


def test_the_median_of_an_even_number_of_uncensored_energies_is_the_midpoint_of_the_middle_two():
    reached = energy_to_target(_cell([10.0, 11.0, 13.0, 14.0], [True] * 4), [{"loss": 3.0}])
    assert energy_to_target_summary(reached).row(0, named=True)["energy_median_j"] == pytest.approx(12.0)


def test_two_levels_of_another_factor_are_compared_at_each_budget_paired_by_trial_id():
    """Two data-selection levels: the second needs 0.8 × the first's energy in every trial id (±2 %); with nothing
    censored their ratio is the paired t-test of log energy at that budget."""
    runs = []
    for t, base in enumerate([10.0, 11.0, 12.5, 13.0, 15.0], start=1):
        for series, factor in (("selection=raw", 1.0), ("selection=clean", 0.8 * (1 + 0.02 * (-1) ** t))):
            runs.append(run_rows(100_000, t, [1e4, 1e5], [4.0, 3.0], [base * factor / 2, base * factor], series=series))
    reached = energy_to_target(curves_table(*runs), [{"loss": 3.0}])
    (level,) = energy_to_target_level_comparisons(reached)
    pair = level.paired
    assert (level.series_a, level.series_b, level.budget, pair.n_pairs) == (
        "selection=raw",
        "selection=clean",
        100_000,
        5,
    )
    raw = reached.filter(pl.col("series") == "selection=raw").sort("trial")["energy_j"].log().to_numpy()
    clean = reached.filter(pl.col("series") == "selection=clean").sort("trial")["energy_j"].log().to_numpy()
    assert pair.ratio == pytest.approx(math.exp(np.mean(clean - raw)), rel=1e-6)
    assert pair.p == pytest.approx(sps.ttest_rel(clean, raw).pvalue, rel=1e-5)


def test_levels_are_compared_only_where_they_differ_in_one_factor():
    runs = []
    for t, base in enumerate([10.0, 11.0, 12.5, 13.0], start=1):
        for series, factor in (
            ("model=s/selection=raw", 1.0),
            ("model=s/selection=clean", 0.8),
            ("model=l/selection=raw", 1.5),
            ("model=l/selection=clean", 1.2),
        ):
            energy = base * factor * (1 + 0.01 * t)
            runs.append(run_rows(100_000, t, [1e4, 1e5], [4.0, 3.0], [energy / 2, energy], series=series))
    pairs = energy_to_target_level_comparisons(energy_to_target(curves_table(*runs), [{"loss": 3.0}]))
    assert {(p.series_a, p.series_b) for p in pairs} == {
        ("model=s/selection=raw", "model=s/selection=clean"),
        ("model=s/selection=raw", "model=l/selection=raw"),
        ("model=s/selection=clean", "model=l/selection=clean"),
        ("model=l/selection=raw", "model=l/selection=clean"),
    }


def test_a_comparison_with_a_run_a_rule_stopped_short_of_the_target_gives_no_ratio_over_the_survivors():
    curves = budget_study(shift={(200_000, 3): 0.6})
    ruled = curves.with_columns(stopped_by_rule=(pl.col("budget") == 200_000) & (pl.col("trial") == 3))
    pair = next(
        c.paired
        for c in energy_to_target_comparisons(energy_to_target(ruled, [{"loss": 3.6}]))
        if (c.budget_a, c.budget_b) == (100_000, 200_000)
    )
    assert pair.ratio is None and pair.n_never == 1 and "stopped by a rule" in pair.status


def _same_process_study(grid_of) -> pl.DataFrame:
    """Two budgets of one process: each trial id's loss 2.6 + 25 · tokens^−0.3 (convex in log tokens) plus its own
    offset, and its own J/token, the same at both budgets up to the smaller's end; evaluated where ``grid_of(budget)``
    says, and at its end."""
    rng = np.random.default_rng(3)
    runs = []
    for trial in range(1, 6):
        offset, joules_per_token = rng.normal(0, 0.02), 1e-3 * rng.lognormal(0, 0.2)
        for budget in (50_000, 200_000):
            tokens = np.array([*grid_of(budget), budget], dtype=float)
            loss = 2.6 + 25 * tokens**-0.3 + offset
            runs.append(run_rows(budget, trial, tokens, loss, (joules_per_token * tokens).tolist()))
    return curves_table(*runs)


def test_a_shared_eval_grid_makes_no_energy_to_target_difference_between_two_budgets_of_one_process():
    import yaml
    from tokenwatt.plan.config import load_schema, validate_config
    from tokenwatt.plan.design import Design
    from tokenwatt.training.evalplan import EvalSchedule, eval_thresholds
    from workflow_helpers import ROOT

    config = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    config["study"]["budgets"], config["eval"] = [50_000, 200_000], {"points": 8, "first_fraction": 0.01}
    design = Design(validate_config(config, load_schema(ROOT / "workflow/schemas/config.schema.yaml")))
    grids = {
        # each budget's points log-spaced over its own tokens, as every trial had them before the study's grid
        "own": lambda b: eval_thresholds(b, EvalSchedule(points=8, first_fraction=0.01)),
        "shared": lambda b: eval_thresholds(b, EvalSchedule(**design.eval_config(design.cell(f"b{b}")))),
    }
    # qualities crossed early, mid-way and in the smaller budget's last segment, before its end
    targets = [{"loss": 2.6 + 25 * t**-0.3} for t in (2_000, 10_000, 25_000, 40_000)]
    ratios = {}
    for name, grid_of in grids.items():
        got = energy_to_target(_same_process_study(grid_of), targets).filter(pl.col("reached"))
        energy = got.pivot(on="budget", index=["target", "trial"], values="energy_j")
        ratios[name] = (energy["200000"] / energy["50000"]).to_list()
    # the same curve interpolated over each budget's own segments: the grid alone makes a difference
    assert len(ratios["own"]) == 20 and max(abs(r - 1) for r in ratios["own"]) > 1e-3
    # over the same segments the crossing is the same: exactly, every trial id and target
    assert len(ratios["shared"]) == 20 and ratios["shared"] == [1.0] * 20


@pytest.mark.parametrize("kind", ["constant", "cosine"])
def test_the_report_says_a_budget_comparison_of_one_process_tests_only_the_meter_and_the_grid(kind):
    from tokenwatt.analysis.curves.summary import analyse_curves
    from tokenwatt.presentation.inputs import ReportInputs
    from tokenwatt.presentation.sections.curves import render, target_sentence

    config = {"study": {"budgets": BUDGETS}, "train": {"epochs": 1, "schedule": {"kind": kind, "warmup_fraction": 0}}}
    curves = analyse_curves(budget_study(n=4, points=5), {"targets": [], "gain_fraction": 0.1, "stopping": {}})
    page = render(ReportInputs(config=config, trials=pl.DataFrame(), products={"curves": curves}))
    summary = target_sentence(curves, same_process=kind == "constant")
    said = "tests only the meter and the eval grid, not the budget"
    assert (said in page) == (kind == "constant") and ("train.schedule.kind cosine" in page) == (kind == "constant")
    assert ("a ratio between them tests the meter and the eval grid, not the budget" in summary) == (kind == "constant")


def test_a_ratio_whose_interval_holds_one_says_the_smallest_ratio_the_design_would_detect():
    from tokenwatt.analysis.curves.censored import detectable_ratio, paired_ratio
    from tokenwatt.presentation.sections.curves import ratio_text

    rng = np.random.default_rng(11)
    a = rng.normal(math.log(300.0), 0.1, 20)
    b = a + rng.normal(0.0, 0.05, 20)
    got = paired_ratio(b, ["exact"] * 20, a, ["exact"] * 20)
    assert got.ci95_low < 1 < got.ci95_high
    # the paired t design: SE from the interval, (t.975 + t.80) SEs
    se = (math.log(got.ci95_high) - math.log(got.ci95_low)) / (2 * sps.t.ppf(0.975, 19))
    assert got.detectable == pytest.approx(math.exp((sps.t.ppf(0.975, 19) + sps.t.ppf(0.8, 19)) * se))
    assert f"×{got.detectable:.2f} detectable at 80 % power" in ratio_text(got.to_dict())
    assert detectable_ratio(None, 1.2, 20) is None
