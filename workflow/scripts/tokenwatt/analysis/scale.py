"""Each measure on its own scale: log values for ratio-scale measures, raw values for additive ones.

A summary on the log scale is a geometric mean with the back-transformed t-interval of the mean log;
a change between two budgets is the geometric mean of the per-trial ratios, as a % change with its
interval. On the raw scale they are the mean and the mean paired difference. The scale of every
measure is declared once, in ``tokenwatt.common.measures``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import special

from ..common.measures import scale_of
from .efficiency import finite


def on_scale(values: np.ndarray, scale: str) -> np.ndarray:
    """The values a test sees: log values on the log scale (a value ≤ 0 becomes NaN, which the
    tests count as a missing cell and name), the values themselves on the raw scale."""
    values = np.asarray(values, dtype=float)
    if scale == "raw":
        return values
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(values > 0, np.log(np.where(values > 0, values, 1.0)), np.nan)


def transformed(measure: str, values: np.ndarray) -> np.ndarray:
    return on_scale(values, scale_of(measure))


def _t_half(x: np.ndarray) -> float | None:
    # t's quantile from scipy.special, where scipy.stats.t.ppf gets it: the same value, without scipy.stats' import
    # (~0.45 s of every aggregate job, which needs nothing else of it)
    n = len(x)
    return float(special.stdtrit(n - 1, 0.975) * x.std(ddof=1) / math.sqrt(n)) if n > 1 else None


def summary(values: np.ndarray, scale: str) -> dict[str, Any]:
    """n, arithmetic mean and sd (the reference study reports them), and the centre on the measure's scale
    (geometric mean on log, mean on raw) with its 95 % t-interval. A log-scale cell holding a value ≤ 0
    has no geometric mean: its centre is null and ``nonpositive`` counts the values that made it so."""
    values = np.asarray(values, dtype=float)
    n = len(values)
    out: dict[str, Any] = {
        "scale": scale,
        "n": n,
        "mean": float(values.mean()) if n else None,
        "sd": float(values.std(ddof=1)) if n > 1 else None,
        "center": None,
        "ci95_low": None,
        "ci95_high": None,
        "nonpositive": 0,
    }
    # values near the largest float (a perplexity of e^700) overflow a mean, sd or interval: missing, not inf
    out = {k: finite(v) if isinstance(v, float) else v for k, v in out.items()}
    if not n:
        return out
    y = on_scale(values, scale)
    bad = int(np.isnan(y).sum())
    if bad:
        return {**out, "nonpositive": bad}
    back = np.exp if scale == "log" else (lambda v: v)
    half = _t_half(y)
    centre = float(y.mean())
    out["center"] = float(back(centre))
    if half is not None:
        out["ci95_low"], out["ci95_high"] = float(back(centre - half)), float(back(centre + half))
    return {k: finite(v) if isinstance(v, float) else v for k, v in out.items()}


def paired_change(before: np.ndarray, after: np.ndarray, scale: str) -> dict[str, Any]:
    """The change from ``before`` to ``after`` paired by trial, with its 95 % t-interval: on the log scale the
    geometric mean ratio as a % change (``unit`` "%"), on the raw scale the mean difference (``unit`` "")."""
    a, b = on_scale(before, scale), on_scale(after, scale)
    keep = np.isfinite(a) & np.isfinite(b)
    d = (b - a)[keep]
    out: dict[str, Any] = {
        "change": None,
        "change_ci95_low": None,
        "change_ci95_high": None,
        "change_n": int(len(d)),
        "change_unit": "%" if scale == "log" else "",
    }
    if not len(d):
        return out
    # numpy's expm1, not math's: a ratio past e^709 is inf (then missing), not an OverflowError
    as_change = (lambda v: 100.0 * float(np.expm1(v))) if scale == "log" else (lambda v: v)
    half = _t_half(d)
    out["change"] = finite(as_change(float(d.mean())))
    if half is not None:
        out["change_ci95_low"], out["change_ci95_high"] = (
            finite(as_change(float(d.mean() - half))),
            finite(as_change(float(d.mean() + half))),
        )
    return out
