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
            "last_real_tokens": 1.5e5,
            "last_energy_j": 1500.0,
        }
    )
    assert gain_falls(curves_table(GAINS), 0.05)["fall_point"].to_list() == [4]  # 0.5 ≥ 0.25; 0.05 < 0.25
    assert gain_falls(curves_table(GAINS), 0.001)["fell"].to_list() == [False]


# fell at 300 J (gains 10 then 1 per kJ, below a fifth of 10); never fell (5, 2.25, 1.375 per kJ, none below 1)
FELL_EARLY = run_rows(100_000, 2, [1e4, 3e4, 7e4, 1.5e5], [5.0, 4.0, 3.9, 3.89], [100.0, 200.0, 300.0, 1500.0])
NEVER_FELL = run_rows(100_000, 3, [1e4, 3e4, 7e4, 1.5e5], [5.0, 4.0, 3.1, 2.0], [100.0, 300.0, 700.0, 1500.0])


def test_a_run_that_never_fell_counts_as_censored_at_its_last_energy_in_the_cells_median():
    row = gain_falls_summary(gain_falls(curves_table(GAINS, FELL_EARLY, NEVER_FELL), 0.2)).row(0, named=True)
    assert (row["n"], row["n_defined"], row["n_fell"], row["n_censored"]) == (3, 3, 2, 1)
    # Kaplan–Meier: 2/3 still unfallen after 300 J, 1/3 after 700 J; the runs that fell alone would give 500 J
    assert row["fall_energy_median_j"] == pytest.approx(700.0)
    assert row["fall_real_tokens_median"] == pytest.approx(7e4)


def test_a_cell_where_fewer_than_half_fell_has_no_median_energy_where_it_fell():
    never_again = run_rows(100_000, 4, [1e4, 3e4, 7e4, 1.5e5], [5.0, 4.0, 3.1, 2.0], [100.0, 300.0, 700.0, 1500.0])
    row = gain_falls_summary(gain_falls(curves_table(GAINS, NEVER_FELL, never_again), 0.2)).row(0, named=True)
    assert (row["n_fell"], row["n_censored"]) == (1, 2) and row["fall_energy_median_j"] is None


def test_a_run_that_never_fell_is_censored_at_its_last_point_the_meter_saw_energy_at():
    unmetered_end = run_rows(100_000, 4, [1e4, 3e4, 7e4, 1.5e5], [5.0, 4.0, 3.1, 2.0], [100.0, 300.0, 700.0, None])
    falls = gain_falls(curves_table(GAINS, FELL_EARLY, unmetered_end), 0.2)
    assert falls.filter(falls["trial"] == 4)["last_energy_j"].to_list() == [700.0]
    row = gain_falls_summary(falls).row(0, named=True)
    # kept in the median, censored at 700 J: 2/3 after 300 J, and at 700 J the run that fell there
    assert row["n_censored"] == 1 and row["fall_energy_median_j"] == pytest.approx(700.0)
