"""Scaling-law fits: the loss law L(N, D), its bootstrap, e(N), the allocations, and the CLI.

Synthetic studies are at the project's scale: N from 5e4 to 5e6 parameters, D up to 1e7 tokens, losses
of ~3–8 nats, several trials per (size, budget) each with its own seed effect and eval-point noise."""

import itertools
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from tokenwatt.analysis.scaling import (
    BESIROGLU_2024,
    GRID_ALPHA,
    GRID_BETA,
    GRID_E,
    GRID_LOG_AB,
    HOFFMANN_2022,
    Law,
    ScalingInputError,
    allocate_energy,
    allocate_flops,
    bootstrap,
    bootstrap_energy,
    fit_energy,
    fit_law,
    law_objective,
)

ROOT = Path(__file__).resolve().parents[1]
TRUTH = Law(E=1.8, A=120.0, B=40.0, alpha=0.34, beta=0.28)
SIZES = (5e4, 2.5e5, 1e6, 5e6)
BUDGETS = (1e5, 5e5, 2e6, 1e7)
GRID = np.array(list(itertools.product(GRID_E, GRID_LOG_AB, GRID_LOG_AB, GRID_ALPHA, GRID_BETA)))  # theta's order


def study(rng, law=TRUTH, sizes=SIZES, budgets=BUDGETS, trials=3, evals=4, noise=0.015, trial_sd=0.01):
    """Points of a study: each trial (size × budget × repeat) is evaluated at ``evals`` evenly spaced points up
    to its budget; its losses share a lognormal seed effect (``trial_sd``) on top of each point's own noise."""
    cells = [(n, b, f"n{n:g}-b{b:g}-t{t}") for n, b, t in itertools.product(sizes, budgets, range(trials))]
    N = np.repeat([c[0] for c in cells], evals)
    D = np.concatenate([b * np.arange(1, evals + 1) / evals for _, b, _ in cells])
    subjects = np.repeat([c[2] for c in cells], evals)
    effect = np.repeat(rng.normal(0, trial_sd, len(cells)), evals)
    return N, D, law.loss(N, D) * np.exp(effect + rng.normal(0, noise, N.size)), subjects


def objective_at(law, N, D, loss):
    return law_objective(law.theta, np.log(N), np.log(D), np.log(loss))[0]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fit_is_never_worse_than_the_truth_and_recovers_it(seed):
    N, D, loss, _ = study(np.random.default_rng(seed), noise=0.005, trial_sd=0.0)
    fit = fit_law(N, D, loss)
    assert fit.objective <= objective_at(TRUTH, N, D, loss)
    assert fit.success, fit.message
    assert fit.alpha == pytest.approx(TRUTH.alpha, abs=0.015) and fit.beta == pytest.approx(TRUTH.beta, abs=0.015)
    assert fit.E == pytest.approx(TRUTH.E, rel=0.05)
    assert fit.A == pytest.approx(TRUTH.A, rel=0.15) and fit.B == pytest.approx(TRUTH.B, rel=0.15)


def test_fit_is_a_refined_optimum_not_a_grid_point():
    N, D, loss, _ = study(np.random.default_rng(3))
    fit = fit_law(N, D, loss)
    assert np.abs(GRID - fit.theta).max(axis=1).min() > 0.01
    assert tuple(fit.start) in {tuple(g) for g in GRID}
    assert fit.n_iter > 0 and fit.grad_norm < 1e-5


def test_screened_grid_finds_the_best_of_lbfgsb_from_random_grid_starts():
    """The fit refines only the best-screened starts; L-BFGS-B from 150 random grid starts finds nothing lower.
    (``benchmarks/scaling_fit.py --exhaustive`` compares with all 4 500, too slow for a test.)"""
    N, D, loss, _ = study(np.random.default_rng(4))
    fit = fit_law(N, D, loss)
    others = GRID[np.random.default_rng(0).choice(len(GRID), 150, replace=False)]
    best = min(fit_law(N, D, loss, start=Law(*np.exp(g[:3]), *g[3:])).objective for g in others)
    assert fit.objective <= best * (1 + 1e-9)


@pytest.mark.parametrize("regime", ["quadratic", "linear", "mixed"])
def test_gradient_matches_central_finite_differences(regime):
    """At random parameter points whose residuals lie inside ±delta (Huber's quadratic part), outside it
    (its linear part; the points range far from the optimum) or on both sides."""
    rng = np.random.default_rng(5)
    N, D, _, _ = study(rng)
    log_N, log_D = np.log(N), np.log(D)
    noise, spread = {"quadratic": (2e-4, 1e-5), "linear": (0.05, 0.3), "mixed": (1.5e-3, 1e-4)}[regime]
    log_loss = np.log(TRUTH.loss(N, D)) + rng.normal(0, noise, N.size)
    for _ in range(4):
        theta = TRUTH.theta + rng.normal(0, spread, 5)
        residual = np.log(Law(*np.exp(theta[:3]), *theta[3:]).loss(N, D)) - log_loss
        inside = np.abs(residual) <= 1e-3
        assert {"quadratic": inside.all(), "linear": not inside.any(), "mixed": 0.2 < inside.mean() < 0.8}[regime]
        grad = law_objective(theta, log_N, log_D, log_loss)[1]
        h = 1e-7  # small enough that few residuals cross ±delta, where Huber's second derivative jumps
        fd = np.array(
            [
                (
                    law_objective(theta + h * e, log_N, log_D, log_loss)[0]
                    - law_objective(theta - h * e, log_N, log_D, log_loss)[0]
                )
                / (2 * h)
                for e in np.eye(5)
            ]
        )
        np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=1e-7 * np.abs(fd).max())


def energy_trials(rng, c=2e-9, gamma=0.8, sizes=SIZES, trials=6, noise=0.03):
    """(N, J/token) of ``trials`` trials per size: ``c · N^gamma`` with lognormal noise."""
    N = np.repeat(sizes, trials)
    return N, c * N**gamma * np.exp(rng.normal(0, noise, N.size))


def test_energy_fit_recovers_c_and_gamma():
    N, e = energy_trials(np.random.default_rng(7))
    fit = fit_energy(N, e)
    assert fit.gamma == pytest.approx(0.8, abs=0.02) and fit.c == pytest.approx(2e-9, rel=0.3)
    assert fit.ci_gamma[0] < 0.8 < fit.ci_gamma[1] and fit.ci_c[0] < 2e-9 < fit.ci_c[1]
    assert fit.r2 > 0.99 and fit.n_sizes == 4 and fit.se_c == pytest.approx(fit.c * fit.se_log_c)
    np.testing.assert_allclose(fit.per_token(N), fit.c * N**fit.gamma)


def test_energy_fit_refuses_fewer_than_three_sizes():
    with pytest.raises(ScalingInputError, match="2 distinct N.*at least 3 model sizes"):
        fit_energy([1e5, 1e5, 1e6, 1e6], [1e-5, 1.1e-5, 5e-5, 5.2e-5])


def test_energy_bootstrap_intervals_cover_the_truth():
    N, e = energy_trials(np.random.default_rng(8))
    s = bootstrap_energy(N, e, n_resamples=500, seed=1).summary()
    assert s["gamma"]["ci_low"] < 0.8 < s["gamma"]["ci_high"] and s["c"]["ci_low"] < 2e-9 < s["c"]["ci_high"]


def brute_force_on_curve(law, c, gamma, budget):
    """min L over 200 001 log-spaced N from 1e2 to 1e14, each with the D that spends the whole budget."""
    N = np.logspace(2, 14, 200_001)
    D = budget / (c * N**gamma)
    L = law.loss(N, D)
    i = L.argmin()
    assert 0 < i < N.size - 1  # an interior minimum, not the edge of the search
    return N[i], D[i], L[i]


def test_energy_allocation_matches_brute_force_along_the_budget_curve():
    N, e = energy_trials(np.random.default_rng(9), noise=0.0)
    energy = fit_energy(N, e)
    joules = np.array([1e2, 1e4, 1e6, 1e8])
    alloc = allocate_energy(TRUTH, energy, joules)
    for j, n, d, loss in zip(joules, alloc.N, alloc.D, alloc.loss, strict=True):
        bn, bd, bl = brute_force_on_curve(TRUTH, energy.c, energy.gamma, j)
        assert n == pytest.approx(bn, rel=1e-3) and d == pytest.approx(bd, rel=1e-3)
        assert loss <= bl and loss == pytest.approx(bl, rel=1e-9)
        assert energy.per_token(n) * d == pytest.approx(j)


def test_no_point_of_an_nd_grid_within_the_energy_budget_beats_the_allocation():
    """The constraint binds: over a 2000 × 2000 (N, D) grid, no point that spends at most J has a lower loss,
    and the best of them is within the grid's resolution of L*."""
    N, e = energy_trials(np.random.default_rng(9), noise=0.0)
    energy = fit_energy(N, e)
    joules = 1e5
    alloc = allocate_energy(TRUTH, energy, joules)
    gN, gD = np.meshgrid(np.logspace(3, 9, 2000), np.logspace(3, 11, 2000), indexing="ij")
    feasible = energy.per_token(gN) * gD <= joules
    best = TRUTH.loss(gN, gD)[feasible].min()
    assert alloc.loss[0] <= best < alloc.loss[0] + 5e-3


def test_flops_allocation_matches_closed_form_and_brute_force():
    flops = np.array([1e15, 1e18, 1e21])
    alloc = allocate_flops(TRUTH, flops)
    G = (TRUTH.alpha * TRUTH.A / (TRUTH.beta * TRUTH.B)) ** (1 / (TRUTH.alpha + TRUTH.beta))
    np.testing.assert_allclose(alloc.N, G * (flops / 6) ** TRUTH.a, rtol=1e-12)
    np.testing.assert_allclose(alloc.D, flops / 6 / alloc.N, rtol=1e-12)
    np.testing.assert_allclose(alloc.tokens_per_parameter, alloc.D / alloc.N)
    for C, n, loss in zip(flops, alloc.N, alloc.loss, strict=True):
        bn, _, bl = brute_force_on_curve(TRUTH, 6.0, 1.0, C)
        assert n == pytest.approx(bn, rel=1e-3) and loss == pytest.approx(bl, rel=1e-9)


def test_energy_allocation_refuses_energy_per_token_that_falls_with_size():
    N = np.array(SIZES)
    with pytest.raises(ValueError, match="gamma > 0"):
        allocate_energy(TRUTH, fit_energy(N, 1e-6 * N**-0.1), [1e6])


def test_allocation_flags_budgets_outside_the_measured_range():
    N, D, loss, _ = study(np.random.default_rng(10))
    fit = fit_law(N, D, loss)
    alloc = allocate_flops(fit, [1e8, 6 * 1e6 * 4e6, 1e20])
    assert alloc.extrapolated.tolist() == [True, False, True]
    assert allocate_flops(TRUTH, [1e18]).extrapolated is None  # a law without a measured range


def test_bootstrap_is_reproducible_from_its_seed():
    N, D, loss, subjects = study(np.random.default_rng(11))
    fit = fit_law(N, D, loss)
    a, b, c = (bootstrap(N, D, loss, subjects, fit=fit, n_resamples=20, seed=s) for s in (3, 3, 4))
    np.testing.assert_array_equal(a.samples, b.samples)
    assert not np.allclose(a.samples, c.samples)


def test_bootstrap_counts_and_skips_resamples_that_cannot_identify_the_law():
    """One trial per (size, budget): a resample often misses a size, and then it is skipped, not fitted."""
    N, D, loss, subjects = study(np.random.default_rng(12), sizes=SIZES[:3], budgets=BUDGETS[:3], trials=1)
    boot = bootstrap(N, D, loss, subjects, n_resamples=100, seed=0)
    skipped = np.isnan(boot.samples).all(axis=1)
    assert boot.n_skipped == skipped.sum() > 0
    assert not boot.converged[skipped].any() and boot.n_converged <= 100 - boot.n_skipped
    assert boot.to_dict()["n_skipped"] == boot.n_skipped


def test_joint_bootstrap_draws_energy_from_the_same_subjects_and_pairs_the_bands():
    rng = np.random.default_rng(13)
    N, D, loss, subjects = study(rng)
    trial_ids, first = np.unique(subjects, return_index=True)
    jpt = 2e-9 * N[first] ** 0.8 * np.exp(rng.normal(0, 0.03, first.size))
    fit = fit_law(N, D, loss)
    boot = bootstrap(N, D, loss, subjects, fit=fit, energy=(N[first], jpt, trial_ids), n_resamples=100, seed=2)
    alone = bootstrap_energy(N[first], jpt, trial_ids, n_resamples=100, seed=2)
    np.testing.assert_array_equal(boot.energy.samples, alone.samples)  # the same draws, row for row
    energy = fit_energy(N[first], jpt)
    alloc = allocate_energy(fit, energy, [1e3, 1e5], boot=boot)
    assert alloc.n_resamples == (boot.converged & boot.energy.converged).sum()
    assert (alloc.N_band[0] <= alloc.N).all() and (alloc.N <= alloc.N_band[1]).all()
    assert (alloc.loss_band[0] <= alloc.loss).all() and (alloc.loss <= alloc.loss_band[1]).all()
    json.dumps(alloc.to_dict())


def test_published_laws_give_their_papers_compute_exponent():
    assert HOFFMANN_2022.a == pytest.approx(HOFFMANN_2022.a_published, abs=0.01)
    assert BESIROGLU_2024.a == pytest.approx(BESIROGLU_2024.a_published, abs=0.001)


def test_bootstrap_intervals_of_the_exponents_cover_the_truth_in_90_percent_of_studies():
    """50 synthetic studies (4 sizes × 4 budgets × 3 trials × 4 eval points, 1.5 % point noise and a 1 % seed
    effect per trial), each fitted and bootstrapped over its trials with 200 resamples."""
    started = time.perf_counter()
    covered = {"alpha": 0, "beta": 0}
    for rep in range(50):
        N, D, loss, subjects = study(np.random.default_rng(1000 + rep))
        s = bootstrap(N, D, loss, subjects, n_resamples=200, seed=rep).summary()
        for k in covered:
            covered[k] += s[k]["ci_low"] <= getattr(TRUTH, k) <= s[k]["ci_high"]
    print(f"coverage of 50: {covered}; {time.perf_counter() - started:.1f} s")
    assert covered["alpha"] >= 45 and covered["beta"] >= 45


def run_cli(*args):
    return subprocess.run(
        [sys.executable, str(ROOT / "workflow" / "scripts" / "fit_scaling.py"), *map(str, args)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )


@pytest.fixture
def table(tmp_path):
    N, D, loss, subjects = study(np.random.default_rng(14))
    path = tmp_path / "points.csv"
    pl.DataFrame({"n_params": N, "tokens": D, "loss": loss, "trial": subjects}).write_csv(path)
    return path


COLUMNS = ("--params", "n_params", "--tokens", "tokens", "--loss", "loss")


def test_cli_prints_estimates_and_writes_json(table, tmp_path):
    out = tmp_path / "fit.json"
    done = run_cli(table, *COLUMNS, "--group", "trial", "--bootstrap", 30, "--json", out)
    assert done.returncode == 0, done.stderr
    assert "objective" in done.stdout and "converged" in done.stdout
    assert all(f"\n  {k} " in done.stdout for k in ("E", "A", "B", "alpha", "beta"))
    result = json.loads(out.read_text())
    assert result["bootstrap"]["n_resamples"] == 30 and result["bootstrap"]["n_subjects"] == 48
    assert set(result["bootstrap"]["parameters"]["alpha"]) == {"estimate", "se", "ci_low", "ci_high"}
    assert result["fit"]["success"] is True


def test_cli_names_a_missing_column_and_lists_those_present(table):
    done = run_cli(table, "--params", "N", "--tokens", "tokens", "--loss", "loss")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "no column 'N' (--params); columns present: n_params, tokens, loss, trial" in done.stderr


def test_cli_names_the_column_with_non_positive_values(table, tmp_path):
    bad = tmp_path / "bad.csv"
    frame = pl.read_csv(table)
    frame.with_columns(loss=pl.when(pl.int_range(pl.len()) < 3).then(0.0).otherwise(pl.col("loss"))).write_csv(bad)
    done = run_cli(bad, *COLUMNS)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "column 'loss' (--loss): 3 of 192 rows are not positive finite numbers" in done.stderr


def test_cli_refuses_fewer_points_than_parameters(table, tmp_path):
    few = tmp_path / "few.csv"
    pl.read_csv(table).head(4).write_csv(few)
    done = run_cli(few, *COLUMNS)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "4 points, fewer than the law's 5 parameters" in done.stderr


def test_cli_names_a_missing_file(tmp_path):
    done = run_cli(tmp_path / "none.csv", *COLUMNS)
    assert done.returncode == 2 and "none.csv: no such file" in done.stderr
