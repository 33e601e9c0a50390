"""e(N), joules per token against model size: fitted on the sizes (its units), in a power and an affine form."""

import numpy as np
import pytest
from tokenwatt.analysis.scaling.energy_per_token import PerToken, choose_energy, fit_energy, size_means
from tokenwatt.analysis.scaling.law import ScalingInputError

SIZES = np.geomspace(4e4, 4e5, 5)


def trials(rng, per_token, sizes=SIZES, per_size=12, size_sd=0.05, run_sd=0.03):
    """J/token of ``per_size`` trials per size: ``per_token(N)`` × a deviation shared by the size's trials ×
    each trial's own noise (both lognormal): the shape a study's trials have."""
    N = np.repeat(sizes, per_size)
    shared = np.repeat(rng.normal(0, size_sd, sizes.size), per_size)
    return N, per_token(N) * np.exp(shared + rng.normal(0, run_sd, N.size))


def test_size_means_are_the_geometric_means_of_each_sizes_trials():
    sizes, means = size_means([1e5, 1e5, 2e5, 2e5, 4e5], [1e-6, 4e-6, 3e-6, 3e-6, 5e-6])
    np.testing.assert_allclose(sizes, [1e5, 2e5, 4e5])
    np.testing.assert_allclose(means, [2e-6, 3e-6, 5e-6])


def test_the_power_fit_recovers_c_and_gamma_and_counts_sizes_not_trials():
    N, e = trials(np.random.default_rng(1), PerToken("power", 2e-9, 0.8), size_sd=0.0, run_sd=0.01)
    fit = fit_energy(N, e, "power")
    assert fit.params["gamma"] == pytest.approx(0.8, abs=0.01) and fit.params["c"] == pytest.approx(2e-9, rel=0.15)
    assert fit.n_sizes == 5 and fit.n_trials == 60 and fit.df == 3
    assert fit.ci["gamma"][0] < 0.8 < fit.ci["gamma"][1]


def test_gammas_interval_covers_the_truth_when_each_size_sits_off_the_law():
    """Per-size deviations of sd 0.05 shared by 12 trials each: an interval over the 60 trials covered the true
    gamma 36 % of the time; one over the 5 size means (t, 3 df) covers it at its nominal rate."""
    covered = 0
    for seed in range(200):
        N, e = trials(np.random.default_rng(seed), PerToken("power", 2e-9, 0.45))
        lo, hi = fit_energy(N, e, "power").ci["gamma"]
        covered += lo <= 0.45 <= hi
    assert covered >= 180  # 95 % of 200 is 190; the binomial sd is ~3


def test_energy_with_a_fixed_cost_per_token_is_found_affine_not_a_power_law():
    """e(N) = e0 + b N (per-step overhead plus a part that grows with N), over 7 sizes spanning 100×."""
    truth = PerToken("affine", 4e-5, 2e-10)
    N, e = trials(np.random.default_rng(2), truth, sizes=np.geomspace(2e4, 2e6, 7), size_sd=0.01)
    choice = choose_energy(N, e)
    assert choice.chosen == "affine" and choice.delta_aicc > 2
    affine = choice.fits["affine"]
    assert affine.params["e0"] == pytest.approx(4e-5, rel=0.1) and affine.params["b"] == pytest.approx(2e-10, rel=0.1)
    lo, hi = affine.local_slope
    assert lo < 0.2 and hi > 0.85  # the local slope runs from overhead-bound to proportional
    assert "support the affine form" in choice.reason


def test_energy_that_follows_a_power_law_is_found_a_power_law():
    N, e = trials(np.random.default_rng(3), PerToken("power", 2e-9, 0.8), sizes=np.geomspace(2e4, 2e6, 7))
    choice = choose_energy(N, e)
    assert choice.chosen == "power" and choice.model.p1 == pytest.approx(0.8, abs=0.05)


def test_with_fewer_than_five_sizes_the_choice_says_aicc_is_not_defined():
    N, e = trials(np.random.default_rng(4), PerToken("power", 2e-9, 0.8), sizes=SIZES[:4])
    choice = choose_energy(N, e)
    assert choice.delta_aicc is None and "too few for AICc" in choice.reason


def test_fewer_than_three_sizes_are_refused_by_name():
    with pytest.raises(ScalingInputError, match="2 distinct N.*at least 3 model sizes"):
        fit_energy([1e5, 1e5, 1e6, 1e6], [1e-5, 1.1e-5, 5e-5, 5.2e-5])


def test_sizes_a_few_per_cent_apart_fit_no_e_of_n():
    # three model families matched in parameters (design.architecture): their J/token differ, but not because of N
    with pytest.raises(ScalingInputError, match=r"span 11,942 to 11,955 parameters.*at least × 1.5 apart"):
        size_means([11942, 11952, 11955] * 3, [0.004, 0.02, 0.005] * 3)


def test_the_local_slope_is_gamma_for_a_power_law_and_rises_with_n_for_the_affine_form():
    np.testing.assert_allclose(PerToken("power", 1.0, 0.4).local_slope([1e3, 1e6]), [0.4, 0.4])
    np.testing.assert_allclose(PerToken("affine", 1.0, 1e-3).local_slope([1e3, 1e6]), [0.5, 1e3 / 1001])
