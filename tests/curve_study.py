"""Eval curves built by hand for the curve analyses' tests: one run's rows in the curve file's shape, a table of
runs, and a study of trials × budgets whose losses and energies are known.

At the real scale of a small CPU study: losses in nats (2–8), cumulative training energy in J (tens to thousands),
tokens 1e3–1e6, lognormal noise on energy, cells with unequal variances.
"""

import math

import numpy as np
import polars as pl

BUDGETS = [100_000, 200_000, 400_000]


def run_rows(budget, trial, tokens, losses, energies, seconds=None, series=""):
    """One trial run's rows in the curve file's shape; its last point is the final one."""
    seconds = (
        seconds if seconds is not None else [e / 30.0 if e is not None else t / 5e3 for e, t in zip(energies, tokens)]
    )
    cell = f"{series}/b{budget}" if series else f"b{budget}"
    return [
        {
            "cell": cell,
            "series": series,
            "budget": budget,
            "trial": trial,
            "point": i + 1,
            "real_tokens": int(t),
            "distinct_tokens": int(min(t, budget)),
            "epoch": int(math.ceil(t / budget)),
            "train_energy_j": e,
            "train_s": s,
            "eval_loss": float(v),
            "eval_energy_j": 0.4,
            "eval_s": 0.01,
            "final": i == len(tokens) - 1,
        }
        for i, (t, v, e, s) in enumerate(zip(tokens, losses, energies, seconds))
    ]


def curves_table(*runs):
    return pl.DataFrame([row for run in runs for row in run], schema_overrides={"train_energy_j": pl.Float64})


def budget_study(n=8, points=8, seed=0, shift=None):
    """Trials × budgets: loss 2.6 + 25 · tokens^−0.3 plus the subject's offset and noise whose sd grows with the
    budget; training energy cumulated from ~1 mJ/token, the subject's own level (lognormal) and per-segment noise
    that also grows with the budget. ``shift`` adds nats to one (budget, trial)'s whole curve."""
    rng = np.random.default_rng(seed)
    runs = []
    for t in range(1, n + 1):
        level, jpt = rng.normal(0, 0.05), 1e-3 * rng.lognormal(0, 0.15)
        for i, b in enumerate(BUDGETS):
            tokens = np.geomspace(b / 64, b, points).round()
            loss = 2.6 + 25 * tokens**-0.3 + level + rng.normal(0, 0.01 * (1 + i), points)
            loss += (shift or {}).get((b, t), 0.0)
            energy = np.cumsum(np.diff(tokens, prepend=0.0) * jpt * rng.lognormal(0, 0.05 * (1 + i), points))
            runs.append(run_rows(b, t, tokens, loss, energy.tolist()))
    return curves_table(*runs)
