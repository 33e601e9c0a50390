"""The trials product: the trial-table figures drawn from its own files as every product's are."""

import copy

import polars as pl
import pytest
from polars.testing import assert_frame_equal
from test_design import DEFAULT, SCHEMA
from tokenwatt.analysis.products import product
from tokenwatt.analysis.tables import read_product_table
from tokenwatt.analysis.traces import traces_of, trials_product
from tokenwatt.common.files import write_csv
from tokenwatt.measurement.traces import by_rank, training_samples
from tokenwatt.plan.config import validate_config
from tokenwatt.plan.design import Design
from tokenwatt.plan.layout import Layout, trial_of

ONE_DEVICE = pl.DataFrame(
    {
        "t_s": [10.0, 10.5, 11.0, 11.5, 12.0],
        "power_w": [4.0, 5.25, None, 6.0, 7.125],
        "window": ["idle", "train", "train", "eval", "train"],
    }
)
TWO_DEVICES = pl.DataFrame(
    {"t_s": [0.5, 0.5, 1.0, 1.0], "power_w": [30.0, 31.5, 32.0, 33.25], "rank": [1, 0, 1, 0], "window": ["train"] * 4}
)


def _drawn(trace: pl.DataFrame) -> list[pl.DataFrame]:
    """What the power figure plots of a trace: each device's training samples."""
    return [training_samples(part) for part in by_rank(trace)]


def test_the_power_figure_draws_from_the_products_table_what_it_drew_from_the_traces(tmp_path):
    traces = {("b1000", 1): ONE_DEVICE, ("b2000", 1): TWO_DEVICES}
    made = trials_product("EUR", pl.DataFrame({"meter_is_estimate": [False, True]}), traces)
    assert made.data == {
        "currency": "EUR",
        "estimated": True,  # any trial's: the measurement-quality figure shows every trial
        "traces": [{"cell": "b1000", "trial": 1}, {"cell": "b2000", "trial": 1}],
    }
    write_csv(tmp_path / "trace_samples.csv", made.tables["trace_samples"])
    back = traces_of(read_product_table(tmp_path / "trace_samples.csv", "trace_samples"), made.data["traces"])
    assert list(back) == list(traces)
    for key, trace in traces.items():
        for got, want in zip(_drawn(back[key]), _drawn(trace), strict=True):
            assert_frame_equal(got.select("t_s", "power_w"), want.select("t_s", "power_w"))


def test_each_power_trace_is_labelled_with_the_trial_its_own_path_names(tmp_path):
    # The interim twin's inputs are fixed when the plan is built, its params evaluated again later: with trial 3 of
    # model=a finished first and trial 1 after, a second list of keys would name trial 1 for trial 3's trace.
    config = {**copy.deepcopy(DEFAULT), "design": {"model": {"a": {"preset": "llama-tiny"}}}}
    design = Design(validate_config(config, SCHEMA))
    layout = Layout({**design.config, "results": str(tmp_path / "results")}, design)
    keys = [("model=a/b20000", 3), ("b10000", 12)]
    for cell, trial in keys:  # what workflow/scripts/analyse.py labels each trace with: its own path's trial
        assert trial_of(layout.trial(cell, trial).power) == (cell, trial)
    relative = Layout({**design.config, "results": "results"}, design)
    assert trial_of(relative.trial("model=a/b20000", 3).steps) == ("model=a/b20000", 3)
    nested = Layout({**design.config, "results": "trials/results"}, design)  # a results folder under one named trials
    assert trial_of(nested.trial("b10000", 2).power) == ("b10000", 2)
    for other in (layout.profile(""), layout.path("trials", "b10000", "power.parquet")):
        with pytest.raises(ValueError, match="is not a trial's file"):
            trial_of(other)


def test_no_trial_finished_yet_gives_an_empty_table_of_the_products_columns():
    made = trials_product("EUR", pl.DataFrame(), {})
    assert made.tables["trace_samples"].height == 0 and made.data["traces"] == [] and not made.data["estimated"]


def test_the_trials_products_figures_are_the_ones_its_drawing_makes_in_the_reports_order():

    tables = {
        "trials": pl.DataFrame(),
        "conditions": pl.DataFrame(),
        "changes": pl.DataFrame({"perplexity_reduction_pct": [], "pe_drop_pct": []}),
        "curves": pl.DataFrame(),
        "trace_samples": trials_product("EUR", pl.DataFrame(), {}).tables["trace_samples"],
    }
    made = product("trials").draw_figures({"currency": "EUR", "estimated": False, "traces": []}, tables, False)
    assert list(made) == list(product("trials").figures)
