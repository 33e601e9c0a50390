"""Intervals that count the design's units (trial ids, model sizes), and the law's lack of fit.

Studies are at the project's scale: 5 model sizes of 5e4–5e6 parameters, budgets to 1e7 tokens, losses of
2–4 nats, 3 trial ids whose seed effect every cell shares, each size off the law by its own amount."""

import numpy as np
import pytest
from tokenwatt.analysis.scaling.law import Law, fit_law
from tokenwatt.analysis.scaling.units import (
    SIZE,
    TRIAL,
    Jackknife,
    interval_refusal,
    lack_of_fit,
    law_uncertainty,
    leave_one_out,
    stack,
)

TRUTH = Law(E=1.8, A=120.0, B=40.0, alpha=0.34, beta=0.28)
SIZES = np.geomspace(5e4, 5e6, 5)
BUDGETS = (1e5, 5e5, 2e6, 1e7)


def study(rng, law=TRUTH, sizes=SIZES, trials=3, evals=4, size_sd=0.01, trial_sd=0.005, run_sd=0.005, point_sd=0.003):
    """(N, D, loss, trial id, cell) of a study: each (size, budget, trial id) evaluated at ``evals`` points up to its
    budget, each trial's token counts a few tokens off the others' (a subset overshoots its budget by part of a
    chunk, as real ones do); loss × exp(size deviation + trial-id effect + run effect + point noise). A cell is
    (size, budget, point index)."""
    size_dev = dict(zip(sizes, rng.normal(0, size_sd, len(sizes)), strict=True))
    trial_dev = rng.normal(0, trial_sd, trials)
    rows = []
    for n in sizes:
        for b in BUDGETS:
            for t in range(trials):
                run = rng.normal(0, run_sd)
                for k, d in enumerate(b * np.arange(1, evals + 1) / evals):
                    d = d + rng.integers(0, 16)
                    shift = size_dev[n] + trial_dev[t] + run + rng.normal(0, point_sd)
                    rows.append((n, d, float(law.loss(n, d)) * np.exp(shift), t + 1, f"{n:g}/{b:g}/{k}"))
    N, D, loss, trial, cell = (np.array(c) for c in zip(*rows, strict=True))
    return N.astype(float), D.astype(float), loss.astype(float), trial.astype(int), cell


def test_a_jackknife_interval_adds_the_dimensions_variances_with_satterthwaite_degrees_of_freedom():
    """Replicates by hand: trial ids 3 (values 1, 2, 3), sizes 5 (0, 0, 0, 0, 5)."""
    jack = Jackknife(
        ("x",),
        np.array([2.0]),
        np.array([False]),
        {TRIAL: np.array([[1.0], [2.0], [3.0]]), SIZE: np.array([[0.0], [0.0], [0.0], [0.0], [5.0]])},
    )
    v_t, v_n = 2 / 3 * 2.0, 4 / 5 * (4 * 1.0**2 + 4.0**2)
    iv = jack.interval(0)
    assert iv["se"] == pytest.approx(np.sqrt(v_t + v_n))
    assert iv["df"] == pytest.approx((v_t + v_n) ** 2 / (v_t**2 / 2 + v_n**2 / 4))
    from scipy import stats

    half = stats.t.ppf(0.975, iv["df"]) * iv["se"]
    assert (iv["ci_low"], iv["ci_high"]) == pytest.approx((2.0 - half, 2.0 + half))


def test_a_positive_quantitys_interval_is_taken_on_the_log_scale():
    jack = Jackknife(("E",), np.array([2.0]), np.array([True]), {SIZE: np.array([[1.0], [2.0], [4.0], [2.0]])})
    iv = jack.interval(0)
    assert iv["scale"] == "log" and iv["ci_low"] * iv["ci_high"] == pytest.approx(4.0)


def test_a_refit_without_a_value_is_counted_and_the_interval_withheld_not_computed_over_the_rest():
    jack = stack(("N*",), [1e6], [True], {TRIAL: [[1e6], [1.1e6], None], SIZE: [[1e6]] * 4})
    iv = jack.interval(0)
    assert iv["ci_low"] is None and iv["why"] == "refits without a value: 1 of 3 without one trial id"


def test_fewer_than_four_model_sizes_give_no_interval_and_say_why():
    assert "3 model sizes" in interval_refusal({TRIAL: 3, SIZE: 3})
    assert interval_refusal({TRIAL: 3, SIZE: 4}) is None


def test_leave_one_out_passes_each_unit_and_skips_a_dimension_with_too_few_units():
    ids = {TRIAL: np.array([1, 1, 2, 2]), SIZE: np.array([5.0, 6.0, 5.0, 6.0])}
    got = leave_one_out(ids, lambda dim, unit, keep: (dim, unit, keep.tolist()))
    assert list(got) == [TRIAL]  # 2 sizes are too few to leave one out
    assert [u for u, _ in got[TRIAL]] == [1, 2] and got[TRIAL][0][1][2] == [False, False, True, True]


def test_law_intervals_name_their_units_and_count_sizes_and_trial_ids():
    N, D, loss, trial, cell = study(np.random.default_rng(1))
    fit = fit_law(N, D, loss)
    u = law_uncertainty(N, D, loss, {TRIAL: trial, SIZE: N}, fit)
    assert u.counts == {TRIAL: 3, SIZE: 5} and u.method == "jackknife over 3 trial ids and 5 model sizes"
    assert [len(r) for r in u.refits.values()] == [3, 5]
    iv = u.intervals(fit)["alpha"]
    assert iv["ci_low"] < fit.alpha < iv["ci_high"] and 1 < iv["df"] <= 6


def test_law_intervals_cover_the_true_exponents_when_sizes_sit_off_the_law_and_trial_ids_share_noise():
    """20 studies whose sizes sit 1 % off the law and whose trial ids share a 0.5 % effect: a bootstrap over the
    3 trial ids covered alpha 4 times in 30 in such studies; these intervals must cover at their nominal rate
    (at least 17 of 20: 19 expected, a binomial sd of 1)."""
    covered = {"alpha": 0, "beta": 0}
    for seed in range(20):
        N, D, loss, trial, cell = study(np.random.default_rng(100 + seed))
        fit = fit_law(N, D, loss)
        intervals = law_uncertainty(N, D, loss, {TRIAL: trial, SIZE: N}, fit).intervals(fit)
        for k in covered:
            covered[k] += intervals[k]["ci_low"] <= getattr(TRUTH, k) <= intervals[k]["ci_high"]
    assert covered["alpha"] >= 17 and covered["beta"] >= 17, covered


def test_a_parameter_that_is_not_identified_gets_no_interval_but_the_reason():
    N, D, loss, trial, cell = study(np.random.default_rng(2))
    fit = fit_law(N, D, loss)
    fit = type(fit)(**{**fit.__dict__, "not_identified": {"E": "equally good fits differ in E by a factor of 3"}})
    iv = law_uncertainty(N, D, loss, {TRIAL: trial, SIZE: N}, fit).intervals(fit)["E"]
    assert iv["ci_low"] is None and iv["why"].startswith("not identified: equally good fits")


def test_no_misfit_is_detected_when_the_points_follow_the_law_though_each_trials_tokens_differ():
    """Cells are (size, budget, point), not exact token counts: trials' counts differ by a few tokens. A screen at
    p = 0.05 rejects a true law in about 1 study of 20; of 8 here, at most 2 may be rejected."""
    rejected = 0
    for seed in range(8):
        N, D, loss, trial, cell = study(np.random.default_rng(300 + seed), size_sd=0.0)
        got = lack_of_fit(N, D, loss, cell, trial, fit_law(N, D, loss))
        assert got["cells"] == 5 * 4 * 4 and got["trials_per_cell"] == [3, 3] and got["df"] == [75, N.size - 82]
        rejected += got["fits"] is False
    assert rejected <= 2


def test_a_law_that_misses_each_sizes_level_is_caught_even_when_trial_ids_share_a_large_effect():
    """Sizes 1 % off the law and a trial-id effect of 4 % that every cell shares: the shared effect cancels out of
    the cell means, so it must not widen the noise the misfit is judged against."""
    N, D, loss, trial, cell = study(np.random.default_rng(7), size_sd=0.01, trial_sd=0.04, run_sd=0.002, point_sd=0.002)
    got = lack_of_fit(N, D, loss, cell, trial, fit_law(N, D, loss))
    assert got["fits"] is False and got["noise_sd_log"] < 0.01


def test_a_law_that_misses_the_curves_shape_is_said_not_to_fit_within_noise():
    """Loss with a bend in log D that no power law has, and 0.3 % noise: the residuals exceed the trials' spread."""
    N, D, loss, trial, cell = study(np.random.default_rng(4), size_sd=0.0, trial_sd=0.0, run_sd=0.002, point_sd=0.002)
    bent = loss * np.exp(0.03 * np.sin(np.log(D)))
    got = lack_of_fit(N, D, bent, cell, trial, fit_law(N, D, bent))
    assert got["fits"] is False and got["p"] < 0.05 and "does NOT fit within noise" in got["verdict"]


def test_a_least_squares_refit_that_is_not_finite_leaves_the_law_not_judged_rather_than_rejected(monkeypatch):
    # the tiny scaling study's five sizes gave a refit whose residuals were NaN: an F of NaN read as "does NOT fit"
    import tokenwatt.analysis.scaling.units as units

    N, D, loss, trial, cell = study(np.random.default_rng(4), size_sd=0.0, trial_sd=0.0, run_sd=0.002, point_sd=0.002)
    fit = fit_law(N, D, loss)
    broken = Law(E=float("nan"), A=fit.A, B=fit.B, alpha=fit.alpha, beta=fit.beta)
    monkeypatch.setattr(units, "_least_squares_law", lambda *args: broken)
    got = lack_of_fit(N, D, loss, cell, trial, fit)
    assert got["fits"] is None and got["F"] is None and "refit to the cell means is not finite" in got["verdict"]
    assert got["rms_residual_log"] is not None  # the study's own fit's residuals, which are finite


def test_with_one_trial_per_cell_the_lack_of_fit_is_not_judged_and_says_why():
    N, D, loss, trial, cell = study(np.random.default_rng(5), trials=1, evals=2)
    got = lack_of_fit(N, D, loss, cell, trial, fit_law(N, D, loss))
    assert got["fits"] is None and "one trial per cell" in got["verdict"]


def test_with_one_trial_id_the_interval_counts_the_sizes_and_says_seed_noise_enters_only_through_them():
    N, D, loss, trial, cell = study(np.random.default_rng(6), trials=1, evals=2)
    fit = fit_law(N, D, loss)
    u = law_uncertainty(N, D, loss, {TRIAL: trial, SIZE: N}, fit)
    assert (
        u.method == "jackknife over 5 model sizes (one trial id, so seed noise enters only through each size's points)"
    )
    assert list(u.refits) == [SIZE]


def _runs(N, D, trial, cell):
    """Each (size, budget, trial id)'s run id: its points share the run's deviation."""
    return np.array([f"{c.rsplit('/', 1)[0]}#{t}" for c, t in zip(cell, trial, strict=True)])


def test_the_screen_judges_the_least_squares_law_at_the_cell_means_not_the_huber_fit():
    """The F reference assumes the law that minimises Σ n_c r_c²; the study's Huber fit (nearly L1) leaves larger
    residuals. F is rebuilt by hand: scipy's least squares of the law on the cell means (every cell has 3 trials)."""
    from scipy import optimize

    N, D, loss, trial, cell = study(np.random.default_rng(300), size_sd=0.0, evals=1)
    huber = fit_law(N, D, loss)
    got = lack_of_fit(N, D, loss, cell, trial, huber)
    cells = np.unique(cell)
    means = np.array([np.log(loss[cell == c]).mean() for c in cells])  # balanced: trial effects cancel
    N_c = np.array([N[cell == c].mean() for c in cells])
    D_c = np.array([np.exp(np.log(D[cell == c]).mean()) for c in cells])

    def resid(theta):
        return means - np.log(Law(*theta).loss(N_c, D_c))

    best = optimize.least_squares(resid, huber.theta, x_scale="jac", xtol=1e-14, ftol=1e-14, gtol=1e-14)
    F_ls = 3 * (resid(best.x) ** 2).sum() / (cells.size - 5) / got["noise_sd_log"] ** 2
    assert got["F"] == pytest.approx(F_ls, rel=1e-3)
    F_huber = 3 * (resid(huber.theta) ** 2).sum() / (cells.size - 5) / got["noise_sd_log"] ** 2
    assert got["F"] < F_huber


def test_runs_with_several_points_are_screened_by_a_bootstrap_that_keeps_their_correlation():
    """Each run's 4 points share its deviation (0.5 % against 0.3 % point noise), so the cell means' errors are
    correlated and the F table would reject a true law too often: the p comes from the wild cluster bootstrap. Of 8
    true-law studies at most 2 may be rejected at p < .05 (0.4 expected)."""
    rejected = 0
    for seed in range(8):
        N, D, loss, trial, cell = study(np.random.default_rng(400 + seed), size_sd=0.0, run_sd=0.01)
        got = lack_of_fit(N, D, loss, cell, trial, fit_law(N, D, loss), run=_runs(N, D, trial, cell), replicates=99)
        assert got["reference"].startswith("wild cluster bootstrap over 60 runs")
        rejected += got["fits"] is False
    assert rejected <= 2


def test_the_bootstrap_screen_still_catches_a_law_that_misses_the_curves_shape():
    N, D, loss, trial, cell = study(np.random.default_rng(4), size_sd=0.0, trial_sd=0.0, run_sd=0.002, point_sd=0.002)
    bent = loss * np.exp(0.03 * np.sin(np.log(D)))
    got = lack_of_fit(N, D, bent, cell, trial, fit_law(N, D, bent), run=_runs(N, D, trial, cell), replicates=99)
    assert got["fits"] is False and got["p"] == pytest.approx(1 / 100)


def test_trial_ids_nested_in_the_cells_leave_the_raw_cell_means_and_df_from_the_rank():
    """--group given run ids (each run its own id): no effect is shared across cells, the cell means are the raw
    ones and s² the within-cell spread on n − K df."""
    N, D, loss, trial, cell = study(np.random.default_rng(14), size_sd=0.0)
    runs = _runs(N, D, trial, cell)
    got = lack_of_fit(N, D, loss, cell, runs, fit_law(N, D, loss))
    assert got["df"] == [got["cells"] - 5, N.size - got["cells"]] and got["rms_residual_log"] < 0.02
