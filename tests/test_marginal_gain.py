"""Marginal quality per kJ: each segment's gain and where it fell below a fraction of the first, checked by hand."""

import pytest
from curve_study import curves_table, run_rows
from tokenwatt.analysis.curves.marginal_gain import gain_falls, gain_falls_summary, marginal_gains

GAINS = run_rows(100_000, 1, [1e4, 3e4, 7e4, 1.5e5], [5.0, 4.0, 3.8, 3.76], [100.0, 300.0, 700.0, 1500.0])


def test_marginal_gain_is_the_loss_fall_per_kj_of_each_segment():
    seg = marginal_gains(curves_table(GAINS))
    # 1.0 nat over 0.2 kJ, 0.2 over 0.4 kJ, 0.04 over 0.8 kJ.
    assert seg["point"].to_list() == [2, 3, 4] and seg["delta_kj"].to_list() == pytest.approx([0.2, 0.4, 0.8])
    assert seg["gain_per_kj"].to_list() == pytest.approx([5.0, 0.5, 0.05])


def test_the_fall_below_point_is_the_first_whose_segment_gained_less_than_the_fraction_of_the_first():
    assert gain_falls(curves_table(GAINS), 0.2).row(0, named=True) == pytest.approx(
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
    assert gain_falls(curves_table(GAINS), 0.05)["fall_point"].to_list() == [4]  # 0.5 ≥ 0.25; 0.05 < 0.25
    assert gain_falls(curves_table(GAINS), 0.001)["fell"].to_list() == [False]


def test_a_cell_summary_of_falls_counts_runs_that_never_fell():
    falls = gain_falls(
        curves_table(GAINS, run_rows(100_000, 2, [1e4, 3e4, 7e4], [5.0, 4.0, 3.1], [100.0, 300.0, 700.0])), 0.2
    )
    row = gain_falls_summary(falls).row(0, named=True)
    assert (row["n"], row["n_defined"], row["n_fell"]) == (2, 2, 1) and row["fall_energy_geomean_j"] == pytest.approx(
        700.0
    )
