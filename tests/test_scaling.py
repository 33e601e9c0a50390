"""Scaling-law fits: the loss law L(N, D), what it identifies, and the CLI.

Synthetic studies are at the project's scale: N from 5e4 to 5e6 parameters, D up to 1e7 tokens, losses
of ~3–8 nats, several trials per (size, budget) each with its own seed effect and eval-point noise."""

import itertools
import json

import numpy as np
import polars as pl
import pytest
from tokenwatt.analysis.scaling.law import (
    BESIROGLU_2024,
    HOFFMANN_2022,
    HUBER_DELTA,
    PROFILE_EXPONENTS,
    REFINE,
    Law,
    _minimise,
    fit_law,
    law_objective,
    profile,
)
from workflow_helpers import run_script

TRUTH = Law(E=1.8, A=120.0, B=40.0, alpha=0.34, beta=0.28)
SIZES = (5e4, 2.5e5, 1e6, 5e6)
BUDGETS = (1e5, 5e5, 2e6, 1e7)
# Hoffmann et al.'s own starts, a grid in all five parameters (theta's order): what variable projection replaced.
GRID = np.array(
    list(itertools.product((-1, -0.5, 0, 0.5, 1), *[range(0, 30, 5)] * 2, *[(0, 0.5, 1, 1.5, 2)] * 2)), dtype=float
)


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


def test_fit_is_a_refined_optimum_started_from_an_exponent_pair_of_the_variable_projection():
    N, D, loss, _ = study(np.random.default_rng(3))
    fit = fit_law(N, D, loss)
    assert fit.start[3] in PROFILE_EXPONENTS and fit.start[4] in PROFILE_EXPONENTS
    assert np.abs(np.array(fit.start) - fit.theta).max() > 0.01  # refined away from the pair it started at
    assert fit.n_iter > 0 and fit.grad_norm < 1e-5


def test_variable_projection_solves_E_A_B_exactly_at_the_true_exponents():
    """Noise-free points: at the true (alpha, beta) the non-negative least squares returns the true E, A, B with a
    residual of zero, and no pair of the grid does better."""
    truth = Law(E=1.8, A=120.0, B=40.0, alpha=0.35, beta=0.3)  # exponents on the grid
    N, D, _, _ = study(np.random.default_rng(6), law=truth, noise=0.0, trial_sd=0.0)
    starts, sse = profile(N, D, truth.loss(N, D))
    at = np.flatnonzero((starts[:, 3] == 0.35) & (starts[:, 4] == 0.3))[0]
    np.testing.assert_allclose(np.exp(starts[at, :3]), [1.8, 120.0, 40.0], rtol=1e-6)
    assert sse[at] < 1e-9 and sse.argmin() == at  # zero to the solve's precision (0.5 % noise would give ~5e-3)


def test_variable_projection_never_fits_a_negative_coefficient_where_the_points_would_want_one():
    """Losses that grow with N: unconstrained least squares would give A < 0 at every alpha > 0; the non-negative
    solution leaves the term out (A solved to 0, its start floored at 1e-8 of a typical loss)."""
    rng = np.random.default_rng(7)
    N, D, _, _ = study(rng)
    loss = (1.8 + 40.0 / D**0.28 + 1e-2 * np.log(N)) * np.exp(rng.normal(0, 0.002, N.size))
    starts, _ = profile(N, D, loss)
    positive = starts[:, 3] >= 0.5
    typical_term = np.exp(starts[positive, 1] - starts[positive, 3] * np.log(N).mean())
    np.testing.assert_allclose(typical_term, 1e-8 * np.median(loss), rtol=1e-9)


def test_a_law_of_the_chinchilla_replications_shape_is_recovered():
    """Besiroglu et al. 2024's law on a design of Chinchilla's shape (sizes 44 M to 16 B, each trained to 5 token
    counts from 5e9 to 5e11 tokens), losses with 0.5 % multiplicative noise: the fit returns its parameters."""
    rng = np.random.default_rng(8)
    N = np.repeat(np.geomspace(4.4e7, 1.6e10, 9), 5)
    D = np.tile(np.geomspace(5e9, 5e11, 5), 9)
    loss = BESIROGLU_2024.loss(N, D) * np.exp(rng.normal(0, 0.005, N.size))
    fit = fit_law(N, D, loss)
    assert fit.success and not fit.not_identified, fit.not_identified
    assert fit.alpha == pytest.approx(BESIROGLU_2024.alpha, abs=0.05)
    assert fit.beta == pytest.approx(BESIROGLU_2024.beta, abs=0.05)
    assert fit.E == pytest.approx(BESIROGLU_2024.E, rel=0.05)


def test_the_fit_is_the_best_of_lbfgsb_from_random_starts_of_a_five_parameter_grid():
    """The fit refines only the variable projection's best pairs; L-BFGS-B from 150 random starts of Hoffmann's grid
    in all five parameters finds nothing lower. (``benchmarks/scaling_fit.py --exhaustive`` tries all 4 500.)"""
    N, D, loss, _ = study(np.random.default_rng(4))
    fit = fit_law(N, D, loss)
    others = GRID[np.random.default_rng(0).choice(len(GRID), 150, replace=False)]
    best = min(_minimise(g, np.log(N), np.log(D), np.log(loss), HUBER_DELTA).fun for g in others)
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


def test_published_laws_give_their_papers_compute_exponent():
    assert HOFFMANN_2022.a == pytest.approx(HOFFMANN_2022.a_published, abs=0.01)
    assert BESIROGLU_2024.a == pytest.approx(BESIROGLU_2024.a_published, abs=0.001)


def test_the_point_estimate_does_not_move_with_the_number_of_refined_starts():
    N, D, loss, _ = study(np.random.default_rng(15))
    few, many = fit_law(N, D, loss), fit_law(N, D, loss, refine=60)
    np.testing.assert_allclose(few.theta, many.theta, rtol=1e-6, atol=1e-8)
    assert few.not_identified == {} and many.not_identified == {}


def test_a_refit_beside_a_far_law_still_finds_the_grids_optimum():
    """A refit of part of the data starts from the grid too, not only from the law it is given, so it can
    leave that law's basin."""
    N, D, loss, _ = study(np.random.default_rng(16))
    far = Law(E=0.2, A=5.0, B=1e6, alpha=1.9, beta=0.05)
    beside = fit_law(N, D, loss, also_from=far)
    assert beside.objective == pytest.approx(fit_law(N, D, loss).objective, rel=1e-9)
    assert beside.n_starts == REFINE + 1


def test_a_law_whose_data_exponent_is_near_zero_names_E_and_B_as_not_identified():
    """With beta = 0.01, B/D^beta is almost a constant: E trades against B along a valley of equal objective."""
    flat = Law(E=1.0, A=120.0, B=5.0, alpha=0.34, beta=0.01)
    N, D, loss, _ = study(np.random.default_rng(17), law=flat, noise=0.005, trial_sd=0.0)
    fit = fit_law(N, D, loss, refine=40)
    assert {"E", "B"} <= set(fit.not_identified)
    assert "within 0.0001 of the best objective moves E by a factor of" in fit.not_identified["E"]


def test_a_size_exponent_at_or_below_zero_is_not_identified_nor_are_the_allocation_exponents():
    rng = np.random.default_rng(18)
    N, D, _, _ = study(rng)
    loss = (1.8 + 40.0 / D**0.28 + 1e-3 * np.log(N)) * np.exp(rng.normal(0, 0.005, N.size))  # larger N: worse
    fit = fit_law(N, D, loss)
    assert fit.alpha <= 0 and {"alpha", "a", "b"} <= set(fit.not_identified)
    assert "no size effect" in fit.not_identified["alpha"]


def run_cli(*args):
    return run_script("fit_scaling.py", *args)


@pytest.fixture
def table(tmp_path):
    N, D, loss, subjects = study(np.random.default_rng(14))
    path = tmp_path / "points.csv"
    pl.DataFrame({"n_params": N, "tokens": D, "loss": loss, "trial": subjects}).write_csv(path)
    return path


COLUMNS = ("--params", "n_params", "--tokens", "tokens", "--loss", "loss")


def test_cli_prints_estimates_with_intervals_over_its_units_and_writes_json(table, tmp_path):
    out = tmp_path / "fit.json"
    done = run_cli(table, *COLUMNS, "--group", "trial", "--json", out)
    assert done.returncode == 0, done.stderr
    assert "objective" in done.stdout and "converged" in done.stdout
    assert "jackknife over 48 trial ids and 4 model sizes" in done.stdout
    assert all(f"\n  {k} " in done.stdout for k in ("E", "A", "B", "alpha", "beta"))
    result = json.loads(out.read_text())
    assert result["units"] == {"trial id": 48, "model size": 4}
    alpha = result["intervals"]["alpha"]
    assert alpha["ci_low"] < result["fit"]["alpha"] < alpha["ci_high"] and alpha["df"] > 0
    assert result["fit"]["success"] is True


def test_cli_with_group_screens_the_laws_lack_of_fit_and_writes_it(table, tmp_path):
    """The table's trial ids are run ids (one per size × budget × repeat): nested in the (N, D) cells, so the screen
    takes the raw cell means and the spread within each cell, on n − K degrees of freedom."""
    out = tmp_path / "fit.json"
    done = run_cli(table, *COLUMNS, "--group", "trial", "--run", "trial", "--json", out)
    assert done.returncode == 0, done.stderr
    screen = json.loads(out.read_text())["lack_of_fit"]
    cells = pl.read_csv(table).select("n_params", "tokens").n_unique()
    assert screen["cells"] == cells and screen["df"] == [cells - 5, 192 - cells] and screen["fits"] is True
    assert screen["reference"].startswith("wild cluster bootstrap over 48 runs")
    assert f"lack of fit ({cells} cell means" in done.stdout and "no misfit detected" in done.stdout


def test_cli_refuses_cell_or_run_without_group(table):
    done = run_cli(table, *COLUMNS, "--run", "trial")
    assert done.returncode == 2 and "needs --group" in done.stderr


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
