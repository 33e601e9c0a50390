"""Benchmark: the scaling-law fit plus its intervals, on a table the size of a study, against a 60 s target.

The synthetic study has 5 model sizes (5e4–5e6 parameters) × 5 token budgets (1e5–1e7) × 3 trial ids, each
trial evaluated at 8 points up to its budget and every point used: 600 rows. Losses follow
L = 1.8 + 120/N^0.34 + 40/D^0.28 nats with a 1 % effect per trial id and 1.5 % noise per point. Prints
the time of the fit (variable projection over 2 601 exponent pairs, then L-BFGS-B from 10 of them), of the
intervals (the law refitted without each of the 3 trial ids and each of the 5 sizes), their sum and its ratio to
the target. With ``--exhaustive`` it also refines all 4 500 starts of a grid in all five parameters, as the
original approach 3 does, and prints how much lower (if at all) the best of those optima is than the fit's, and
what it cost.

With ``--results FOLDER`` (a finished study, e.g. results-scaling from config/scaling.yaml) it times the
workflow's whole scaling analysis instead (the rule's own function: both counts of N, each with its intervals,
e(N) and the allocations) on that study's trials and eval curves.

Usage: .venv/bin/python benchmarks/scaling_fit.py [--repeats 3] [--exhaustive] [--results DIR]
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workflow" / "scripts"))

import numpy as np  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402
from tokenwatt.analysis.scaling.law import HUBER_DELTA, ONE_BLAS_THREAD, Law, _minimise, fit_law  # noqa: E402
from tokenwatt.analysis.scaling.units import SIZE, TRIAL, law_uncertainty  # noqa: E402

TARGET_S = 60.0
TRUTH = Law(E=1.8, A=120.0, B=40.0, alpha=0.34, beta=0.28)


def study(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    cells = list(itertools.product(np.geomspace(5e4, 5e6, 5), np.geomspace(1e5, 1e7, 5), range(3)))
    N = np.repeat([n for n, _, _ in cells], 8)
    D = np.concatenate([b * np.arange(1, 9) / 8 for _, b, _ in cells])
    trial_ids = np.repeat([t for _, _, t in cells], 8)
    loss = TRUTH.loss(N, D) * np.exp(rng.normal(0, 0.01, 3)[trial_ids] + rng.normal(0, 0.015, N.size))
    return N, D, loss, trial_ids


def study_analysis(results: Path, repeats: int) -> None:
    """The scaling rule's analysis of a finished study, timed as the rule runs it (its inputs already read)."""
    import polars as pl
    from tokenwatt.analysis.frame import frame, in_frame
    from tokenwatt.analysis.scaling.study import analyse_scaling

    trials = pl.read_parquet(results / "analysis" / "trials.parquet")
    curves = in_frame(pl.read_parquet(results / "analysis" / "curves.parquet"), trials)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        got = analyse_scaling(curves, frame(trials), {"points": "first_epoch"})
        times.append(time.perf_counter() - t0)
    law = got.get("law_total", {})
    print(
        f"{results}: {trials.height} trials, {law.get('n_points')} points (first_epoch), intervals over "
        f"{got.get('units')}, median of {repeats} repeats: {statistics.median(times):.2f} s "
        f"= {statistics.median(times) / TARGET_S:.3f} × the {TARGET_S:.0f} s target ({got['status']})"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--exhaustive", action="store_true", help="also refine all 4 500 five-parameter grid starts")
    ap.add_argument("--results", type=Path, help="time the scaling analysis of this finished study instead")
    args = ap.parse_args()
    if args.results:
        return study_analysis(args.results, args.repeats)
    N, D, loss, trial_ids = study(0)
    print(f"synthetic study: {N.size} rows, 3 trial ids, 5 model sizes, median of {args.repeats} repeats")
    fits, boots = [], []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        fit = fit_law(N, D, loss)
        t1 = time.perf_counter()
        uncertainty = law_uncertainty(N, D, loss, {TRIAL: trial_ids, SIZE: N}, fit)
        fits.append(t1 - t0)
        boots.append(time.perf_counter() - t1)
    fit_s, boot_s = statistics.median(fits), statistics.median(boots)
    total = fit_s + boot_s
    row = "  {:<42} {:8.3f} s   {}"
    print(
        row.format(
            f"fit (2 601 exponent pairs, refine {fit.n_starts})",
            fit_s,
            f"objective {fit.objective:.10g}, {'converged' if fit.success else 'NOT converged'}, "
            f"max |gradient| {fit.grad_norm:.1e}",
        )
    )
    refits = sum(len(r) for r in uncertainty.refits.values())
    print(row.format(f"intervals ({refits} refits)", boot_s, f"{1e3 * boot_s / refits:.0f} ms each"))
    print(row.format("fit + intervals", total, f"= {total / TARGET_S:.3f} × the {TARGET_S:.0f} s target"))
    alpha = uncertainty.intervals(fit)["alpha"]
    print(
        f"  alpha = {fit.alpha:.4f} (truth {TRUTH.alpha}), "
        f"95 % interval [{alpha['ci_low']:.4f}, {alpha['ci_high']:.4f}]"
    )
    if args.exhaustive:
        grid = np.array(
            list(itertools.product((-1, -0.5, 0, 0.5, 1), *[range(0, 30, 5)] * 2, *[(0, 0.5, 1, 1.5, 2)] * 2)),
            dtype=float,
        )  # Hoffmann et al.'s starts in (log E, log A, log B, alpha, beta)
        t0 = time.perf_counter()
        with threadpool_limits(**ONE_BLAS_THREAD):
            best = min(_minimise(g, np.log(N), np.log(D), np.log(loss), HUBER_DELTA).fun for g in grid)
        full_s = time.perf_counter() - t0
        print(
            row.format(
                "all 4 500 five-parameter starts refined",
                full_s,
                f"best objective {best:.10g}, {(fit.objective - best) / best:.1e} relative below the fit's",
            )
        )


if __name__ == "__main__":
    main()
