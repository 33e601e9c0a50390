import math

import polars as pl
import pytest
from tokenwatt.analysis.aggregate import cs_tflops_of
from tokenwatt.analysis.conditions import changes_table, conditions_table
from tokenwatt.common.measures import budget_label
from trial_records import aggregate, raw_record, steady_steps


def test_missing_failed_and_unreadable_trials_are_named_not_averaged():
    expected = [(1000, 1), (1000, 2), (2000, 1), (2000, 2), (2000, 3)]
    recs = [
        raw_record(1000, 1),
        None,
        raw_record(2000, 1),
        raw_record(2000, 2, status="failed"),
        "results/trials/b2000/t3/metrics.json is not readable JSON",
    ]
    trials, missing = aggregate(recs, expected)
    assert trials.height == 2
    assert missing == [
        "budget 1000 trial 2: no metrics",
        "budget 2000 trial 2: status failed",
        "budget 2000 trial 3: results/trials/b2000/t3/metrics.json is not readable JSON",
    ]
    assert trials["versions_torch"].to_list() == ["2.13", "2.13"]


def test_a_diverged_trial_is_named_with_its_step_and_left_out_of_the_table():
    recs = [
        raw_record(1000, 1),
        raw_record(1000, 2, status="diverged", diverged_at_step=17, diverged_in_epoch=1, eval_loss=None),
    ]
    trials, missing = aggregate(recs, [(1000, 1), (1000, 2)])
    assert trials["trial"].to_list() == [1]
    assert missing == [
        "budget 1000 trial 2: diverged at step 17 (non-finite training loss); its subject is left out of the repeated-measures "
        "tests"
    ]


def test_pe_is_derived_in_the_analysis_from_recorded_values_by_the_formula():
    rec = raw_record(1000, 1, eval_loss=2.0, power_rms_w=40.0)
    trials, _ = aggregate([rec], [(1000, 1)], cs_tflops=0.2, metric={"K": 3.0, "tt_scale": 1e6, "cs_tflops": "measure"})
    row = trials.row(0, named=True)
    assert row["pe"] == pytest.approx(
        3.0 * math.exp(-2.0) * 0.2 * 1e6 / (rec["params"] * rec["real_tokens"] * 40.0), rel=1e-12
    )
    assert row["cs_tflops"] == 0.2 and row["flops_is_estimate"]
    assert row["idle_energy_j"] == pytest.approx(rec["idle_power_w"] * rec["duration_s"])


def test_changing_a_metric_constant_changes_pe_in_proportion():
    expected = [(1000, 1)]
    low = aggregate([raw_record(1000, 1)], expected, metric={"K": 1.0, "tt_scale": 1e6, "cs_tflops": "measure"})[0]
    high = aggregate([raw_record(1000, 1)], expected, metric={"K": 2.5, "tt_scale": 1e6, "cs_tflops": "measure"})[0]
    assert high["pe"][0] == pytest.approx(2.5 * low["pe"][0])


def test_cs_tflops_comes_from_the_profile_or_the_config_and_says_which():
    profile = {"cs_tflops": 0.14, "windows": 30, "iqr_tflops": 0.002, "dtype": "float32", "device_name": "Test CPU"}
    value, source = cs_tflops_of({"cs_tflops": "measure"}, profile)
    assert value == 0.14 and "device profile, median of 30 windows" in source
    assert cs_tflops_of({"cs_tflops": 125.0}, None) == (125.0, "configured (metric.cs_tflops)")


def test_every_trial_carries_a_quality_verdict_and_its_place_in_the_run_order():
    expected = [(1000, 1), (1000, 2), (1000, 3)]
    recs = [
        raw_record(1000, 1, started_at_unix_s=30.0),
        raw_record(1000, 2, started_at_unix_s=10.0),
        raw_record(1000, 3, started_at_unix_s=20.0),
    ]
    slow = steady_steps().with_columns(pl.col("elapsed_s") * 2)
    trials, _ = aggregate(recs, expected, steps=[steady_steps(), steady_steps(), slow])
    assert trials["run_position"].to_list() == [3, 1, 2]
    assert trials["quality"].to_list() == ["ok", "ok", "flagged"]
    assert "throughput" in trials["quality_reasons"][2]


def test_a_log_scale_measure_is_summarised_by_its_geometric_mean_and_a_back_transformed_interval():
    recs = [raw_record(1000, t, power_rms_w=p) for t, p in enumerate([1.0, 2.0, 4.0], 1)]
    cond = conditions_table(aggregate(recs, [(1000, t) for t in (1, 2, 3)])[0])
    row = cond.filter(pl.col("measure") == "power_rms_w").row(0, named=True)
    assert (row["scale"], row["n"], row["mean"]) == ("log", 3, pytest.approx(7 / 3))
    assert row["center"] == pytest.approx(2.0)  # (1 · 2 · 4)^(1/3)
    half = 4.302653 * math.log(2) / 3**0.5  # t(.975, 2) × sd of the logs (ln 2) / √3
    assert (row["ci95_low"], row["ci95_high"]) == pytest.approx((2 * math.exp(-half), 2 * math.exp(half)), rel=1e-6)


def test_a_raw_scale_measure_is_summarised_by_its_mean_and_a_t_interval():
    recs = [raw_record(1000, t, eval_loss=v) for t, v in enumerate([1.0, 2.0, 3.0], 1)]
    row = (
        conditions_table(aggregate(recs, [(1000, t) for t in (1, 2, 3)])[0])
        .filter(pl.col("measure") == "eval_loss")
        .row(0, named=True)
    )
    assert (row["scale"], row["n"], row["mean"], row["sd"], row["center"]) == ("raw", 3, 2.0, 1.0, 2.0)
    assert row["ci95_high"] - row["center"] == pytest.approx(4.302653 / 3**0.5, rel=1e-6)


def test_the_change_between_budgets_is_the_geometric_mean_of_the_paired_ratios():
    # trial 1 halves, trial 2 quarters its PE: the paired change is −(1 − √(1/8)) = −64.6 %,
    # while the change of the arithmetic means would be misleading in level-weighted ways.
    trials = pl.DataFrame(
        {"series": [""] * 4, "budget": [1, 2, 1, 2], "trial": [1, 1, 2, 2], "pe": [4e-8, 2e-8, 1e-8, 0.25e-8]}
    )
    row = conditions_table(trials).filter((pl.col("measure") == "pe") & (pl.col("budget") == 2)).row(0, named=True)
    assert row["change"] == pytest.approx(100 * (math.sqrt(0.5 * 0.25) - 1))
    assert (row["change_n"], row["change_unit"]) == (2, "%")


def test_null_energy_is_left_out_not_counted_as_zero():
    recs = [raw_record(1000, 1, energy_j=None)]
    cond = conditions_table(aggregate(recs, [(1000, 1)])[0])
    energy = cond.filter(pl.col("measure") == "energy_j").row(0, named=True)
    assert energy["n"] == 0 and energy["mean"] is None and energy["center"] is None


def test_changes_table_reports_the_studys_percentages():
    trials = pl.DataFrame(
        {
            "series": ["", ""],
            "budget": [500_000, 1_000_000],
            "trial": [1, 1],
            "pe": [0.85, 0.62],
            "perplexity": [10.0, 9.58],
            "power_rms_w": [145.2, 167.8],
        }
    )
    changes = changes_table(conditions_table(trials)).row(0, named=True)
    assert changes["pe_drop_pct"] == pytest.approx(27.06, abs=0.01)
    assert changes["perplexity_reduction_pct"] == pytest.approx(4.2)
    assert changes["power_change_pct"] == pytest.approx(15.56, abs=0.01)


@pytest.mark.parametrize(
    "tokens,text", [(500_000, "500K"), (1_000_000, "1M"), (2_500, "2.5K"), (12_345, "12345"), (40, "40")]
)
def test_budget_labels(tokens, text):
    assert budget_label(tokens) == text


def test_a_trial_diverged_to_a_finite_loss_is_named_with_that_loss():
    recs = [
        raw_record(1000, 1),
        raw_record(
            1000, 2, status="diverged", diverged_at_step=9, diverged_in_epoch=1, diverged_loss=11745.7, eval_loss=None
        ),
    ]
    _, missing = aggregate(recs, [(1000, 1), (1000, 2)])
    assert missing == [
        "budget 1000 trial 2: diverged at step 9 (training loss 1.175e+04 nats); its subject is left out of the "
        "repeated-measures tests"
    ]
