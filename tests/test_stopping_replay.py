"""Stopping rules, replayed: where a rule would have stopped each full run and what that saved and lost, checked by
hand."""

import math

import numpy as np
import pytest
from curve_study import curves_table, run_rows
from scipy import stats as sps
from tokenwatt.analysis.curves.stopping_replay import stopping_outcomes
from tokenwatt.plan.stopping import StopRule

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
    return curves_table(
        *(
            run_rows(1_000_000, t, TOKENS, losses, (ENERGY * scale).tolist())
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
