"""The analysis of any study the schema accepts ends in tables and statistics, whatever its trials recorded: a loss of
1e4, an infinite or NaN loss, energy at or below idle, no energy, no training time, one budget or one trial. A value
that cannot be computed is missing (null), never inf or NaN, so that every JSON output stays readable."""

from __future__ import annotations

import json
import math

import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenwatt.analysis.aggregate import cost_summary
from tokenwatt.analysis.conditions import changes_table, conditions_table
from tokenwatt.analysis.efficiency import derived_metrics
from tokenwatt.analysis.stats import analyse_study
from tokenwatt.common.measures import MEASURES, TESTED
from trial_records import COST, aggregate, raw_record

EXTREME_LOSS = st.sampled_from([1e4, 800.0, math.inf, -math.inf, math.nan, 0.0, -3.0]) | st.floats(0.5, 12.0)
EXTREME_ENERGY = st.sampled_from([None, 0.0, -5.0, math.inf, math.nan, 1e-300]) | st.floats(0.01, 1e6)
EXTREME_TIME = st.sampled_from([0.0, 1e-12, math.inf]) | st.floats(0.001, 1e4)
EXTREME_IDLE = st.sampled_from([None, 0.0, 1e6, math.nan]) | st.floats(0.0, 500.0)


@st.composite
def extreme_record(draw, budget: int, trial: int) -> dict:
    return raw_record(
        budget,
        trial,
        eval_loss=draw(EXTREME_LOSS),
        energy_j=draw(EXTREME_ENERGY),
        train_s=draw(EXTREME_TIME),
        idle_power_w=draw(EXTREME_IDLE),
        power_rms_w=draw(EXTREME_ENERGY),
    )


@st.composite
def extreme_study(draw) -> tuple[list[dict], list[tuple[int, int]]]:
    budgets = draw(st.sampled_from([[1000], [1000, 2000]]))
    trials = range(draw(st.integers(1, 3)))
    expected = [(b, t) for b in budgets for t in trials]
    return [draw(extreme_record(b, t)) for b, t in expected], expected


def _strict_json(value) -> str:
    """As the workflow writes JSON (tokenwatt.common.files.write_json): a NaN, an inf or a value JSON has no type for
    fails."""
    return json.dumps(value, allow_nan=False)


def _finite_or_null(table: pl.DataFrame) -> None:
    """Every number of a table is finite or null: polars keeps a NaN apart from a null, and neither it nor an inf
    is finite."""
    numbers = table.select(pl.col(pl.Float64)).columns
    assert numbers, table.schema  # a table without a number would pass whatever it held
    for column in numbers:
        assert table[column].drop_nulls().is_finite().all(), (column, table[column].to_list())


@given(extreme_record(1000, 0))
def test_every_derived_measure_of_any_record_is_a_finite_number_or_missing(record):
    derived = derived_metrics(record, cs_tflops=0.15, K=1.0, tt_scale=1e6)
    assert all(v is None or isinstance(v, bool) or math.isfinite(v) for v in derived.values()), derived


def test_a_loss_beyond_exps_range_has_no_perplexity_and_a_quality_of_zero():
    derived = derived_metrics(raw_record(1000, 0, eval_loss=1e4), cs_tflops=0.15, K=1.0, tt_scale=1e6)
    assert derived["perplexity"] is None and derived["inv_ppl"] == 0.0 and derived["pe"] == 0.0


def test_no_training_time_leaves_throughput_missing_not_a_division_by_zero():
    derived = derived_metrics(raw_record(1000, 0, train_s=0.0), cs_tflops=0.15, K=1.0, tt_scale=1e6)
    assert derived["tokens_per_s"] is None and derived["achieved_tflops"] is None and derived["mfu"] is None


def test_energy_at_or_below_idle_is_a_dynamic_energy_at_or_below_zero_and_no_quality_per_energy():
    derived = derived_metrics(
        raw_record(1000, 0, energy_j=-1.0, idle_power_w=1.0, duration_s=2.0), cs_tflops=0.15, K=1.0, tt_scale=1e6
    )
    assert derived["dynamic_energy_j"] == -3.0 and derived["quality_per_kj"] is None


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(extreme_study())
def test_any_study_of_extreme_records_ends_in_tables_and_statistics_that_are_strict_json(study):
    records, expected = study
    trials, missing = aggregate(records, expected)
    conditions = conditions_table(trials)
    _finite_or_null(conditions)
    _finite_or_null(changes_table(conditions))
    _strict_json(analyse_study(trials, TESTED, exclude_flagged=False))
    _strict_json(cost_summary(trials, COST, (None, "not set")))
    _strict_json(missing)
    # The measures derived from the records: the eval loss is recorded, and an inf there is what its trial measured.
    derived = [m for m in MEASURES if m in trials.columns and m != "eval_loss"]
    assert "pe" in derived and "quality_per_kj" in derived
    _finite_or_null(trials.select(pl.col(derived).cast(pl.Float64)))
