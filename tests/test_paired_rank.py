"""The paired signed-rank test of energy to a target: Wilcoxon's test without censoring, a common token window for
each pair's censoring, exact under sign flips, and its size where the censored-normal ratio loses its own."""

import math

import numpy as np
import pytest
from scipy import stats
from tokenwatt.analysis.curves import paired_rank
from tokenwatt.analysis.curves.censored import ABOVE, BELOW, EXACT, NEVER, paired_ratio
from tokenwatt.analysis.curves.paired_rank import RunsToTarget, paired_rank_test

RATE = 0.0094  # J/token, the default's CPU estimate


def _runs(tokens, status=None, first=500.0, last=50_000.0, rate=RATE) -> RunsToTarget:
    tokens = np.asarray(tokens, float)
    n = tokens.size
    status = np.array(status if status is not None else [EXACT] * n, dtype=object).astype(str)
    rate = np.broadcast_to(np.asarray(rate, float), (n,)).copy()
    return RunsToTarget(status, rate * tokens, tokens, np.full(n, first), np.full(n, last), rate)


def test_without_censoring_it_is_wilcoxons_exact_signed_rank_test():
    rng = np.random.default_rng(3)
    a = np.exp(rng.normal(math.log(20_000), 0.1, 9))
    b = a * np.exp(rng.normal(0.06, 0.08, 9))
    got = paired_rank_test(_runs(a), _runs(b))
    assert got.exact and got.n_exact == 9
    assert got.p == pytest.approx(stats.wilcoxon(np.log(b) - np.log(a), method="exact").pvalue, rel=1e-12)


def test_a_run_that_crossed_after_the_window_both_runs_observed_counts_as_censored_at_its_end():
    # the larger budget's run crossed past the smaller's last point (50K): whether at 60K or 150K cannot be told from
    # the pair, since the smaller budget's run could not have shown the same
    a, status_a = [20_000, 30_000, 25_000, 45_000, 15_000, 50_000], [EXACT] * 5 + [ABOVE]
    near = paired_rank_test(_runs(a, status_a), _runs([21_000, 29_000, 26_000, 44_000, 16_000, 60_000], last=200_000))
    far = paired_rank_test(_runs(a, status_a), _runs([21_000, 29_000, 26_000, 44_000, 16_000, 150_000], last=200_000))
    assert near.statistic == far.statistic and near.p == far.p
    assert near.n_exact == 5 and near.n_informative == 5  # both above the window's end: the pair says nothing


def test_a_censored_runs_bound_is_its_own_joules_per_token_at_the_windows_end():
    # b needed more than 0.0120 J/token × 50K = 600 J; a crossed at 550 J: b surely needed more
    a = _runs([55_000 / 1.1] * 1 + [40_000], rate=[0.011, RATE])
    b = _runs([50_000, 40_000], [ABOVE, EXACT], last=50_000, rate=[0.012, RATE])
    lo_b, hi_b = paired_rank._log_bounds(b, np.full(2, 500.0), np.full(2, 50_000.0))
    assert math.exp(lo_b[0]) == pytest.approx(600.0) and hi_b[0] == math.inf
    # the sure pair scores alone and in its Walsh average with the tied pair (difference 0), which alone scores 0
    assert paired_rank_test(a, b).statistic == 2.0


def test_a_run_already_below_the_target_at_the_later_first_point_is_censored_below_there():
    lo, hi = paired_rank._log_bounds(_runs([800.0], [EXACT], first=500.0), np.array([1_000.0]), np.array([5e4]))
    assert lo[0] == -math.inf and math.exp(hi[0]) == pytest.approx(RATE * 1_000.0)
    lo, hi = paired_rank._log_bounds(_runs([500.0], [BELOW], first=500.0), np.array([500.0]), np.array([5e4]))
    assert lo[0] == -math.inf and math.exp(hi[0]) == pytest.approx(RATE * 500.0)


def test_a_trial_id_stopped_by_a_rule_gives_no_test_and_says_why():
    got = paired_rank_test(_runs([2e4, 3e4, 2.5e4], [EXACT, NEVER, EXACT]), _runs([2e4, 3e4, 2.5e4]))
    assert got.p is None and "stopped by a rule" in got.status


def test_with_no_run_inside_the_common_window_there_is_no_test():
    got = paired_rank_test(_runs([5e4, 5e4, 5e4], [ABOVE] * 3), _runs([6e4, 7e4, 8e4], last=2e5))
    assert got.p is None and got.n_informative == 0


def test_past_the_exact_limit_p_comes_from_seeded_flips_and_repeats_bit_for_bit():
    rng = np.random.default_rng(5)
    a = np.exp(rng.normal(math.log(2e4), 0.1, 30))
    b = a * np.exp(rng.normal(0.03, 0.1, 30))
    first, second = paired_rank_test(_runs(a), _runs(b)), paired_rank_test(_runs(a), _runs(b))
    assert not first.exact and first.p == second.p
    assert first.p == pytest.approx(stats.wilcoxon(np.log(b) - np.log(a)).pvalue, abs=0.01)


def _study(rng: np.random.Generator, m: int) -> tuple[RunsToTarget, RunsToTarget]:
    """Two budgets of one process (50K and 100K tokens), m trial ids: tokens to the target with right-skewed trial and
    run effects, half the smaller budget's runs censored; each run's J/token (SD 5 %) sets both its energy to the
    target and its censoring bound."""
    trial = 0.10 * (rng.exponential(1.0, m) - 1.0)
    out = []
    for budget in (5e4, 1e5):
        tokens = 5e4 * np.exp(trial + 0.08 * (rng.exponential(1.0, m) - 1.0) - 0.02)
        rate = RATE * np.exp(rng.normal(0.0, 0.05, m))
        status = np.where(tokens > budget, ABOVE, EXACT)
        seen = np.minimum(tokens, budget)
        out.append(RunsToTarget(status, rate * seen, seen, np.full(m, budget / 100), np.full(m, budget), rate))
    return out[0], out[1]


def test_at_50_trial_ids_with_skewed_effects_and_a_rate_dependent_bound_it_keeps_its_size(monkeypatch):
    """The censored-normal ratio's test, on the same simulated studies, rejects the true ratio of 1 far more often
    (its tail is extrapolated through a normal law); the rank test stays near its nominal 5 %."""
    monkeypatch.setattr(paired_rank, "FLIPS", 2_000)
    rng = np.random.default_rng(2026)
    rank = normal = 0
    sims = 60
    for _ in range(sims):
        small, large = _study(rng, 50)
        rank += paired_rank_test(small, large).p < 0.05
        bounded = [(np.log(r.energy_j), r.status) for r in (large, small)]
        got = paired_ratio(*bounded[0], *bounded[1])
        normal += got.p is not None and got.p < 0.05
    assert rank / sims <= 0.10
    assert normal / sims >= 2 * max(rank, 1) / sims


def test_five_trial_ids_can_give_no_p_below_one_sixteenth_and_the_test_says_so():
    a = np.array([2.0e4, 3.1e4, 2.4e4, 4.2e4, 1.6e4])
    got = paired_rank_test(_runs(a), _runs(a * 1.3))  # every trial id needed 30 % more: the most extreme arrangement
    assert got.p == pytest.approx(2 / 32) and got.min_p == pytest.approx(2 / 32)


def test_the_report_cell_says_a_rank_test_of_five_trial_ids_cannot_reject():
    from tokenwatt.presentation.sections.curves import _rank_cell

    row = {"rank_p_holm": 0.0625, "rank_min_p": 0.0625, "rank_n_informative": 5}
    assert "cannot reject with 5 trial ids" in _rank_cell(row)
    assert "cannot" not in _rank_cell({**row, "rank_min_p": 1 / 512, "rank_n_informative": 9})
