"""The units a scaling study's uncertainty comes from, intervals that count them, and the law's lack of fit.

Two kinds of unit vary independently in a scaling design, and neither is the eval point:

- the **trial id**: trial t of every cell shares its seed and its data subset (the repeated-measures design),
  so a lucky seed lowers every cell's loss together; a study with ``trials: 3`` has 3 such units, however
  many points each carries;
- the **model size**: each size sits off any smooth law by its own amount (its shape, what its kernels cost),
  shared by all its trials and budgets; 5 sizes are 5 units about α, however many trials each has.

A bootstrap over trial ids alone has 10 distinct resamples at 3 ids and an interval that is the min–max of
single-trial fits (in simulations of the shipped designs it covered the truth 20 of 30 times with run noise,
and 4 of 30 for α with 1 % size deviations); it cannot see the sizes at all. Here the interval is a delete-one
jackknife along each dimension: the law is refitted without each trial id, and without each model size
(from its variable projection's starts and from the full fit, so a refit can leave the full fit's basin), and the two
jackknife variances are added (the cross-classified, or "multiway", variance of Cameron, Gelbach & Miller
2011, without the subtracted intersection term: a conservative choice). The interval is t-based with
Welch–Satterthwaite degrees of freedom from the two variances and their units (G − 1 each), so 3 trial ids
and 5 sizes buy at most 6 df and usually fewer, and the interval is wide where the units are few.
Positive quantities (E, A, B, N*, D*, ratios) take their interval on the log scale.

A dimension needs enough units to leave one out: 2 trial ids (one left to fit), 4 sizes (3 left, the law's
minimum). With fewer sizes there is no interval at all, and the output says why instead of showing one; with
one trial per cell the size jackknife carries the seed noise along with each size's points, which is said too.
``benchmarks/scaling_coverage.py`` measures the intervals' coverage on simulations of the shipped designs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import polars as pl
from scipy import stats as sps

from .law import LAW_SUMMARY, LEVEL, Law, LawFit, ScalingInputError, fit_law

TRIAL, SIZE = "trial id", "model size"
MIN_UNITS = {TRIAL: 2, SIZE: 4}
LACK_OF_FIT_P = 0.05

T = TypeVar("T")


def unit_counts(ids: Mapping[str, np.ndarray]) -> dict[str, int]:
    """Distinct units per dimension."""
    return {dim: int(np.unique(v).size) for dim, v in ids.items()}


def interval_refusal(counts: Mapping[str, int]) -> str | None:
    """Why these units give no interval, or None."""
    if counts.get(SIZE, 0) < MIN_UNITS[SIZE]:
        return (
            f"{counts.get(SIZE, 0)} model sizes: an interval that counts the sizes as its units needs at least "
            f"{MIN_UNITS[SIZE]} (the fit is repeated without each, and the law needs 3); the estimates stand without "
            "intervals"
        )
    return None


def interval_units_note(counts: Mapping[str, int]) -> str:
    """The units an interval counts, in words, for the report and the JSON."""
    if counts.get(TRIAL, 0) >= MIN_UNITS[TRIAL]:
        return f"jackknife over {counts[TRIAL]} trial ids and {counts[SIZE]} model sizes"
    return (
        f"jackknife over {counts[SIZE]} model sizes (one trial id, so seed noise enters only through each size's "
        "points)"
    )


def leave_one_out(
    ids: Mapping[str, np.ndarray], fit: Callable[[str, Any, np.ndarray], T | None]
) -> dict[str, list[tuple[Any, T | None]]]:
    """``fit(dimension, unit, keep)`` for each unit of each dimension that has enough units, ``keep`` the rows
    without that unit; None where the rows left cannot be fitted. Units in sorted order."""
    out: dict[str, list[tuple[Any, T | None]]] = {}
    for dim, values in ids.items():
        units = np.unique(values)
        if units.size >= MIN_UNITS[dim]:
            out[dim] = [(u, fit(dim, u, values != u)) for u in units]
    return out


@dataclass(frozen=True)
class Jackknife:
    """A vector of named quantities, its full-data ``estimate``, and its delete-one-unit ``replicates`` per
    dimension (rows: units; NaN where a refit has no value). ``log`` marks the positive quantities whose interval
    is taken on the log scale."""

    names: tuple[str, ...]
    estimate: np.ndarray
    log: np.ndarray
    replicates: dict[str, np.ndarray]

    def interval(self, j: int) -> dict[str, Any]:
        """The t interval of quantity j: estimate, SE (on the interval's scale), Satterthwaite df, bounds; or
        the bounds None and ``why``."""
        est = float(self.estimate[j])
        out: dict[str, Any] = {"estimate": est, "scale": "log" if self.log[j] else "linear"}
        # A replicate without a value (NaN), or a positive quantity that underflowed to 0, has no place on the scale.
        missing = {
            d: int((~(np.isfinite(r[:, j]) & ((r[:, j] > 0) if self.log[j] else True))).sum())
            for d, r in self.replicates.items()
        }
        if not np.isfinite(est) or (self.log[j] and est <= 0):
            return {**out, "se": None, "df": None, "ci_low": None, "ci_high": None, "why": "no estimate"}
        if any(missing.values()):
            lost = ", ".join(f"{n} of {self.replicates[d].shape[0]} without one {d}" for d, n in missing.items() if n)
            return {
                **out,
                "se": None,
                "df": None,
                "ci_low": None,
                "ci_high": None,
                "why": f"refits without a value: {lost}",
            }
        if not self.replicates:
            return {**out, "se": None, "df": None, "ci_low": None, "ci_high": None, "why": "no units to leave out"}
        centre = np.log(est) if self.log[j] else est
        parts = []
        for reps in self.replicates.values():
            x = np.log(reps[:, j]) if self.log[j] else reps[:, j]
            g = x.size
            parts.append(((g - 1) / g * ((x - x.mean()) ** 2).sum(), g - 1))
        var = sum(v for v, _ in parts)
        df = var**2 / sum(v**2 / d for v, d in parts) if var > 0 else float(sum(d for _, d in parts))
        half = float(sps.t.ppf(0.5 + LEVEL / 2, df)) * np.sqrt(var)
        lo, hi = centre - half, centre + half
        if self.log[j]:
            with np.errstate(over="ignore", under="ignore"):
                lo, hi = np.exp(lo), np.exp(hi)
        if not (np.isfinite(lo) and np.isfinite(hi) and lo > 0 if self.log[j] else np.isfinite(lo) and np.isfinite(hi)):
            why = f"the interval spans more than a float holds (SE {np.sqrt(var):.3g} on the {out['scale']} scale)"
            return {**out, "se": float(np.sqrt(var)), "df": float(df), "ci_low": None, "ci_high": None, "why": why}
        return {
            **out,
            "se": float(np.sqrt(var)),
            "df": float(df),
            "ci_low": float(lo),
            "ci_high": float(hi),
            "why": None,
        }

    def intervals(self) -> dict[str, dict[str, Any]]:
        return {n: self.interval(j) for j, n in enumerate(self.names)}


def stack(names: tuple[str, ...], estimate: np.ndarray, log: np.ndarray, replicates: Mapping[str, list]) -> Jackknife:
    """A Jackknife from per-dimension lists of replicate vectors (None: a refit that failed, all NaN)."""
    k = len(names)
    rows = {
        d: np.array([np.full(k, np.nan) if r is None else np.asarray(r, float) for r in reps]).reshape(-1, k)
        for d, reps in replicates.items()
    }
    return Jackknife(names, np.asarray(estimate, float), np.asarray(log, bool), rows)


LACK_OF_FIT_REPLICATES = 199  # bootstrap replicates of the screen where a run gives several points


def _cell_means(y: np.ndarray, codes: np.ndarray, t_codes: np.ndarray, K: int, T: int) -> tuple[np.ndarray, float, int]:
    """Cell means of y with the trial-id effect every cell shares taken out (y = cell + trial id + error by least
    squares), the residual sum of squares and its df (n − rank: trial ids nested in cells, e.g. one id per run,
    leave the raw cell means and the within-cell spread)."""
    X = np.zeros((y.size, K + T - 1))
    X[np.arange(y.size), codes] = 1.0
    later = t_codes > 0
    X[np.flatnonzero(later), K + t_codes[later] - 1] = 1.0
    coef, _, rank, _ = np.linalg.lstsq(X, y, rcond=None)
    if rank < K + T - 1:  # the trial ids do not cross the cells: no shared effect to take out
        n = np.bincount(codes, minlength=K)
        means = np.bincount(codes, y, minlength=K) / n
        return means, float(((y - means[codes]) ** 2).sum()), int(y.size - K)
    trial_effects = np.concatenate([[0.0], coef[K:]])
    return coef[:K] + trial_effects.mean(), float(((y - X @ coef) ** 2).sum()), int(y.size - rank)


def _least_squares_law(
    N_c: np.ndarray, D_c: np.ndarray, means: np.ndarray, n: np.ndarray, start: Law, refine: int
) -> Law:
    """The law fitted by least squares to the cell means (each weighted by its trials): the fit the F reference
    assumes (a Huber fit, nearly L1 on these residuals, leaves them larger than least squares would)."""
    return fit_law(
        np.repeat(N_c, n), np.repeat(D_c, n), np.exp(np.repeat(means, n)), delta=np.inf, also_from=start, refine=refine
    )


def lack_of_fit(
    N: np.ndarray,
    D: np.ndarray,
    loss: np.ndarray,
    cell: np.ndarray,
    trial: np.ndarray,
    law: Law,
    run: np.ndarray | None = None,
    replicates: int = LACK_OF_FIT_REPLICATES,
    seed: int = 0,
) -> dict[str, Any]:
    """Does the law's form fit the cell means within the noise? A cell is one eval point of one condition (``cell``:
    the same model size, budget and point index for every trial id; its trials' token counts differ by part of a
    chunk, so its D is their geometric mean). On log loss, y = cell + trial id + error is fitted by least squares:
    the trial-id effect, which every cell shares, cancels out of the cell means, so it must leave the error term
    too, and s² is the trial × cell interaction. The law is refitted by least squares to the cell means (``law``,
    the study's Huber fit, is a start), r_c is a cell's mean minus it, and F = (Σ n_c r_c² / (K − 5)) / s².

    Where each ``run`` (one condition × trial id) gives one point, F is referred to F(K − 5, df of s²). Where a run
    gives several (its eval points), they share the run's deviation, the cell means' errors are correlated, and the
    F table would reject a true law far too often: p is then a wild cluster bootstrap (``replicates`` refits, each
    run's residuals flipped in sign together about the least-squares law, the trial-id effects kept). Calibration:
    ``benchmarks/scaling_coverage.py``. A law it does not reject is one whose misfit it did not detect."""
    y = np.log(loss)
    cells, codes = np.unique(np.asarray(cell), return_inverse=True)
    trials, t_codes = np.unique(np.asarray(trial), return_inverse=True)
    codes, t_codes = codes.ravel(), t_codes.ravel()
    K, T = cells.size, trials.size
    n = np.bincount(codes, minlength=K)
    N_c = np.bincount(codes, N, minlength=K) / n
    D_c = np.exp(np.bincount(codes, np.log(D), minlength=K) / n)
    means, rss, df2 = _cell_means(y, codes, t_codes, K, T)
    df1 = K - 5
    out: dict[str, Any] = {"cells": int(K), "trials_per_cell": [int(n.min()), int(n.max())]}
    s2 = rss / df2 if df2 > 0 else 0.0
    not_judged = _unjudgeable(df1, df2, s2)
    fitted = None
    try:
        fitted = _least_squares_law(N_c, D_c, means, n, law, REFINE_SCREEN) if not not_judged else None
    except ScalingInputError as e:
        not_judged = f"the cell means admit no least-squares law ({e})"
    resid = means - np.log((fitted or law).loss(N_c, D_c))
    if fitted is not None and not np.isfinite(resid).all():  # a NaN F would read as "does not fit"
        not_judged = "the law's least-squares refit to the cell means is not finite at every cell"
        resid = means - np.log(law.loss(N_c, D_c))
    finite = np.isfinite(resid).all()
    out |= {
        "rms_residual_log": float(np.sqrt(np.mean(resid**2))) if finite else None,
        "max_abs_residual_log": float(np.abs(resid).max()) if finite else None,
    }
    if not_judged:
        none = dict.fromkeys(("noise_sd_log", "F", "df", "p", "fits", "reference"))
        return {**out, **none, "verdict": f"not judged ({not_judged})"}
    F = float((n * resid**2).sum() / df1 / s2)
    runs = np.unique(np.asarray(run), return_inverse=True)[1].ravel() if run is not None else None
    if runs is None or np.bincount(runs).max() == 1:
        p, reference = float(sps.f.sf(F, df1, df2)), f"F({df1}, {df2})"
    else:
        p = _bootstrap_p(F, y, codes, t_codes, runs, K, T, N_c, D_c, n, fitted, replicates, seed)
        reference = f"wild cluster bootstrap over {runs.max() + 1} runs, {replicates} replicates"
        if not np.isfinite(p):
            none = dict.fromkeys(("F", "df", "p", "fits", "reference"))
            return {
                **out,
                "noise_sd_log": float(np.sqrt(s2)),
                **none,
                "verdict": "not judged (no bootstrap replicate "
                "of the law could be refitted, so its misfit was not tested)",
            }
    return {**out, **_screen_verdict(F, p, [df1, df2], reference, float(np.sqrt(s2)), out["rms_residual_log"])}


def _unjudgeable(df1: int, df2: int, s2: float) -> str | None:
    """Why the screen cannot judge the law (no degrees of freedom for the misfit or for the noise), or None."""
    if df1 <= 0:
        return "no more cells than parameters"
    if df2 <= 0:
        return "one trial per cell: no trial × cell noise to judge it by"
    if s2 <= 1e-300:
        return "the trials of every cell agree up to a shift: no trial × cell noise to judge it by"
    return None


def _screen_verdict(F: float, p: float, df: list[int], reference: str, noise_sd: float, rms: float) -> dict[str, Any]:
    """The screen's judged entries: F against its reference, and whether the law fits within the noise, in words."""
    fits = p >= LACK_OF_FIT_P
    verdict = (
        f"no misfit detected: the law's residuals at the cell means are within the trial × cell noise (F = {F:.3g}, "
        f"p = {p:.2g})"
        if fits
        else f"the law does NOT fit within noise: its residuals at the cell means (RMS {rms:.3g} in log loss) are "
        f"larger than the trial × cell noise (SD {noise_sd:.3g}) allows (F = {F:.3g}, p = {p:.2g}); what it allocates "
        "describes a law these points do not follow"
    )
    return {
        "noise_sd_log": noise_sd,
        "F": F,
        "df": df,
        "p": p,
        "reference": reference,
        "fits": fits,
        "verdict": verdict,
    }


REFINE_SCREEN = 4  # starts the screen's least-squares refits refine, beside the law they start from


def _bootstrap_p(
    F: float,
    y: np.ndarray,
    codes: np.ndarray,
    t_codes: np.ndarray,
    runs: np.ndarray,
    K: int,
    T: int,
    N_c: np.ndarray,
    D_c: np.ndarray,
    n: np.ndarray,
    fitted: Law,
    replicates: int,
    seed: int,
) -> float:
    """P(F* ≥ F) under the least-squares law, F* from data rebuilt as that law at each cell plus the trial-id
    effects plus each run's residual vector times a random sign (Rademacher, one per run): the runs keep their
    points' correlation, and the law holds exactly."""
    means, _, df2 = _cell_means(y, codes, t_codes, K, T)
    shared = y - means[codes]  # the trial-id effect and the run × point error around the cell means
    if df2 == y.size - K:  # trial ids nested in the cells: no shared effect, all of it is error
        trial_part = np.zeros_like(y)
    else:
        X_t = np.zeros((y.size, T))
        X_t[np.arange(y.size), t_codes] = 1.0
        trial_part = X_t @ np.linalg.lstsq(X_t, shared, rcond=None)[0]
    error = shared - trial_part
    base = np.log(fitted.loss(N_c, D_c))[codes] + trial_part
    rng = np.random.default_rng(seed)
    exceed = done = 0
    for _ in range(replicates):
        signs = rng.choice([-1.0, 1.0], size=runs.max() + 1)
        y_star = base + signs[runs] * error
        m_star, rss_star, df2 = _cell_means(y_star, codes, t_codes, K, T)
        try:
            refit = fit_law(
                np.repeat(N_c, n),
                np.repeat(D_c, n),
                np.exp(np.repeat(m_star, n)),
                delta=np.inf,
                also_from=fitted,
                refine=1,
            )
        except ScalingInputError:
            continue  # a replicate no law fits counts in neither tally
        r = m_star - np.log(refit.loss(N_c, D_c))
        if not np.isfinite(r).all():
            continue  # nor a refit that is not finite: its NaN F* would count as not exceeding F
        exceed += (n * r**2).sum() / (K - 5) / (rss_star / df2) >= F
        done += 1
    return float((1 + exceed) / (done + 1)) if done else float("nan")  # no replicate refitted: nothing tested


LOG_LAW = (True, True, True, False, False, False, False)  # E, A, B are positive: their intervals on the log scale


def _law_row(law: Law) -> list[float]:
    return [law.E, law.A, law.B, law.alpha, law.beta, law.a, law.b]


@dataclass(frozen=True)
class LawUncertainty:
    """The units of a law's points, the law refitted without each (``refits``: per dimension, (unit, fit or
    None)), and the jackknife they give; ``refused`` says why there is no interval at all."""

    counts: dict[str, int]
    refused: str | None
    refits: dict[str, list[tuple[Any, LawFit | None]]]
    jackknife: Jackknife | None

    @property
    def method(self) -> str:
        return self.refused or interval_units_note(self.counts)

    def intervals(self, fit: LawFit) -> dict[str, dict[str, Any]]:
        """Each parameter's interval, or why there is none: not identified (the fit says which), or no units."""
        out = {}
        for j, name in enumerate(LAW_SUMMARY):
            if name in fit.not_identified:
                out[name] = {"ci_low": None, "ci_high": None, "why": f"not identified: {fit.not_identified[name]}"}
            elif self.jackknife is None:
                out[name] = {"ci_low": None, "ci_high": None, "why": self.refused}
            else:
                out[name] = self.jackknife.interval(j)
        return out


Points = tuple[np.ndarray, np.ndarray, np.ndarray]


def law_uncertainty(
    N: np.ndarray,
    D: np.ndarray,
    loss: np.ndarray,
    ids: Mapping[str, np.ndarray],
    fit: LawFit,
    rows: Callable[[str, Any], Points] | None = None,
) -> LawUncertainty:
    """Refit the law without each trial id and each model size (``ids``: per dimension, one unit per point). With
    ``rows``, a refit fits ``rows(dimension, unit)`` (N, D, loss) instead of the points less that unit's: the points
    chosen again without it, where choosing them looked at the data (a learning rate tuned per size and budget)."""
    for dim, v in ids.items():
        if np.size(v) != N.size:
            raise ScalingInputError(f"{np.size(v)} {dim} ids for {N.size} points")
    counts = unit_counts(ids)
    refused = interval_refusal(counts)

    def refit(dim: str, unit: Any, keep: np.ndarray) -> LawFit | None:
        try:
            return fit_law(*(rows(dim, unit) if rows else (N[keep], D[keep], loss[keep])), also_from=fit)
        except ScalingInputError:  # without this unit too few sizes, budgets or points are left to fit
            return None

    refits = {} if refused else leave_one_out(ids, refit)
    rows = {d: [None if f is None else _law_row(f) for _, f in reps] for d, reps in refits.items()}
    jack = stack(LAW_SUMMARY, _law_row(fit), LOG_LAW, rows) if rows else None
    return LawUncertainty(counts, refused, refits, jack)


def without(table: pl.DataFrame, dim: str, unit: Any) -> pl.DataFrame:
    """A table's rows without one unit of the design: a trial id (``TRIAL``) or a model size (``SIZE``)."""
    return table.filter(pl.col("trial" if dim == TRIAL else "params") != unit)
