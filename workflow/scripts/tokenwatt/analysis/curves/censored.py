"""Censored energies: medians and paired ratios that use every trial, the ones that never got there included.

A trial that never reached a target is right-censored at the energy it stopped at (ABOVE: it needed more); one
already below the target at its first eval point is left-censored there (BELOW: it needed at most that); one a
stopping rule ended before it got there never reaches it under that rule (NEVER). Leaving any of them out conditions
on the outcome: the trials that got there are the cheap ones, so the centres of the survivors are biased low and a
test on the subjects that got there everywhere compares survivors.

Per condition: the Kaplan–Meier median (statsmodels ``SurvfuncRight``, the maintained estimator, with the
Brookmeyer–Crowley interval on the complementary log-log scale) and how many reached the target. A left-censored
energy enters it as reached at that point, an upper bound the count says; a NEVER run stays at risk past every
energy. Where the curve sits at exactly one half over a stretch, the median is the stretch's midpoint (the usual
convention; statsmodels takes its end).

Between two conditions paired by trial id: the two log energies of each trial id as one draw of a bivariate normal
(each condition its own mean and SD, their correlation the pairing), each value exact or censored in its direction,
fitted by maximum likelihood: a pair with one value censored enters through the conditional normal of that value
given the other, a pair with both censored through the bivariate normal's probability of its quadrant (Owen's T).
Every trial id measured under both conditions counts in n, censored ones included; a NEVER run has no finite energy,
so a comparison with one gives no ratio (one over the others would compare survivors) and says why. The ratio is exp of the difference of the means; its interval and p come from the
profile likelihood, calibrated to Student's t on n − 1 degrees of freedom through t² = (n − 1)(exp(LR / n) − 1),
which is exactly the paired t-test when nothing is censored. Size and coverage under informative censoring:
``benchmarks/censored_energy.py``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy import optimize, special, stats
from statsmodels.duration.survfunc import SurvfuncRight

from ...common.measures import LOG_MAX_FLOAT

# reached between points; not reached by the end (needs more); at the first point (at most); ended by a rule first
EXACT, ABOVE, BELOW, NEVER = "exact", "above", "below", "never"
_FAR = 50.0  # a log ratio beyond e^50 is taken as unbounded: no finite bound exists on these data


@dataclass(frozen=True)
class Median:
    """The Kaplan–Meier median energy of one condition and its 95 % interval (None where the curve never falls
    to 1/2, or the interval's bound is not reached: "at least ..."), with the counts it rests on."""

    n: int
    n_reached: int
    n_censored: int
    n_at_first_point: int
    median: float | None
    ci95_low: float | None
    ci95_high: float | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _finite(x: float) -> float | None:
    return float(x) if x is not None and math.isfinite(x) else None


def _median(curve: SurvfuncRight) -> float:
    """Where the Kaplan–Meier curve falls below one half; where it sits at exactly one half over a stretch, the
    midpoint of that stretch (statsmodels takes its end: for 4 uncensored values the 3rd, not the midpoint of the
    2nd and 3rd); NaN where it never falls to one half."""
    times, surv = np.asarray(curve.surv_times), np.asarray(curve.surv_prob)
    at = np.flatnonzero(surv <= 0.5 + 1e-9)
    if not at.size:
        return float("nan")
    i = int(at[0])
    if abs(surv[i] - 0.5) < 1e-9:
        return float((times[i] + times[i + 1]) / 2) if i + 1 < times.size else float("nan")
    return float(times[i])


def km_median(energy: Sequence[float], status: Sequence[str]) -> Median:
    """``energy`` per trial: where it reached the target, or where it was censored (``status`` ABOVE: the last
    point's energy; BELOW: the first point's, entered as reached there; NEVER: ended by a stopping rule first, at
    risk past every energy)."""
    energy = np.asarray(energy, float)
    status = np.asarray(status)
    n_above = int(np.isin(status, [ABOVE, NEVER]).sum())
    n_below = int((status == BELOW).sum())
    if not len(energy):
        return Median(0, 0, 0, 0, None, None, None)
    # a NEVER run is censored beyond every energy: it stays in the risk set past the last crossing
    energy = np.where(status == NEVER, 2.0 * np.nanmax(energy), energy)
    curve = SurvfuncRight(energy, (~np.isin(status, [ABOVE, NEVER])).astype(float))
    if n_above == len(energy):
        low = high = median = float("nan")
    else:
        median = _median(curve)
        with np.errstate(divide="ignore", invalid="ignore"):  # log(-log 1) at the curve's start: an unbounded side
            low, high = curve.quantile_ci(0.5, alpha=0.05, method="cloglog")
    return Median(
        len(energy),
        len(energy) - n_above,
        n_above,
        n_below,
        _finite(median),
        _finite(low),
        _finite(high),
    )


_SIGN = {EXACT: 0, ABOVE: 1, BELOW: -1}


def _log_orthant(h: np.ndarray, k: np.ndarray, rho: np.ndarray) -> np.ndarray:
    """log P(U ≤ h, V ≤ k) for standard normals of correlation ``rho`` (Owen's T form of the bivariate normal
    distribution function)."""
    root = np.sqrt(1.0 - rho**2)
    with np.errstate(divide="ignore", invalid="ignore"):
        a_h = np.where(h == 0, np.sign(k - rho * h) * np.inf, (k - rho * h) / (h * root))
        a_k = np.where(k == 0, np.sign(h - rho * k) * np.inf, (h - rho * k) / (k * root))
    a_h = np.nan_to_num(a_h, nan=0.0)
    a_k = np.nan_to_num(a_k, nan=0.0)
    beta = np.where((h * k > 0) | ((h * k == 0) & (h + k >= 0)), 0.0, 0.5)
    value = 0.5 * special.ndtr(h) + 0.5 * special.ndtr(k) - special.owens_t(h, a_h) - special.owens_t(k, a_k) - beta
    return np.log(np.clip(value, 1e-300, None))


class _Pairs:
    """The bivariate censored-normal likelihood of (log energy under a, under b) across trial ids: means, one SD
    per condition and their correlation, each value exact, known to lie above (ABOVE) or below (BELOW) a bound."""

    def __init__(self, y_a: np.ndarray, s_a: np.ndarray, y_b: np.ndarray, s_b: np.ndarray) -> None:
        self.y = (y_a, y_b)
        self.dirs = (np.array([_SIGN[x] for x in s_a]), np.array([_SIGN[x] for x in s_b]))
        da, db = self.dirs
        self.both = (da == 0) & (db == 0)
        self.a_only = (da == 0) & (db != 0)
        self.b_only = (da != 0) & (db == 0)
        self.neither = (da != 0) & (db != 0)
        exact = np.concatenate([y_a[da == 0], y_b[db == 0]])
        spread = [float(np.std(exact))] if exact.size > 1 else []
        spread += [float(np.ptp(np.concatenate([y_a, y_b]))) / 4.0] if y_a.size else []
        self.scale = max([*spread, 1e-6])  # where the optimisers start and how far they look

    def loglik(self, mu_a: float, mu_b: float, log_sa: float, log_sb: float, z: float) -> float:
        (y_a, y_b), (da, db) = self.y, self.dirs
        rho = math.tanh(z)
        root = math.sqrt(1.0 - rho * rho)
        u = (y_a - mu_a) / math.exp(log_sa)
        v = (y_b - mu_b) / math.exp(log_sb)
        total = 0.0
        m = self.both
        if m.any():
            uu, vv = u[m], v[m]
            q = (uu * uu - 2.0 * rho * uu * vv + vv * vv) / (1.0 - rho * rho)
            total += float(np.sum(-math.log(2.0 * math.pi) - log_sa - log_sb - math.log(root) - 0.5 * q))
        for exact, cens, d, m in ((u, v, db, self.a_only), (v, u, da, self.b_only)):
            if m.any():
                w = (cens[m] - rho * exact[m]) / root
                # ABOVE: the value lies above its bound, P(W > w); BELOW: P(W ≤ w).
                total += float(np.sum(-0.5 * exact[m] ** 2 - 0.5 * math.log(2.0 * math.pi)))
                total -= m.sum() * (log_sa if exact is u else log_sb)
                total += float(np.sum(special.log_ndtr(-d[m] * w)))
        m = self.neither
        if m.any():
            sa, sb = -da[m], -db[m]  # P(U > h) = P(−U < −h): flip each censored-above coordinate
            total += float(np.sum(_log_orthant(sa * u[m], sb * v[m], rho * sa * sb)))
        return total

    def profile(self, delta: float, start: np.ndarray | None = None) -> tuple[float, np.ndarray]:
        """max of the log-likelihood over everything but the difference of means ``delta`` = mu_a − mu_b, and
        where it is (mu_a, log SD_a, log SD_b, atanh rho)."""
        y_a, y_b = self.y
        if start is None:
            mu = float(np.mean(np.concatenate([y_a, y_b + delta])))
            start = np.array([mu, math.log(self.scale), math.log(self.scale), 0.5])
        low, high = math.log(self.scale) - 12.0, math.log(self.scale) + 6.0
        best = optimize.minimize(
            lambda x: -self.loglik(x[0], x[0] - delta, x[1], x[2], x[3]),
            start,
            method="L-BFGS-B",
            bounds=[(None, None), (low, high), (low, high), (-6.0, 6.0)],
        )
        return -float(best.fun), best.x


@dataclass(frozen=True)
class PairedRatio:
    """Energy under condition a over condition b, paired by trial id: ``ratio`` (geometric: exp of the difference of
    the censored-normal means of log energy), its 95 % interval (None: no bound on that side from these data) and
    p against a ratio of 1; ``n_pairs`` trial ids in both conditions, ``n_exact`` of them with both energies
    measured, ``n_censored`` with one or both censored; ``status`` "ok" or why no ratio is given. ``detectable``:
    the smallest ratio (above 1, or its inverse below) this design detects at p < .05 with 80 % power, from the
    interval's width (``detectable_ratio``), so that an interval holding 1 says how large a difference it could
    have shown."""

    n_pairs: int
    n_exact: int
    n_censored: int
    n_never: int
    ratio: float | None
    ci95_low: float | None
    ci95_high: float | None
    p: float | None
    status: str
    detectable: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


POWER = 0.80  # of the detectable ratio


def detectable_ratio(low: float | None, high: float | None, n: int) -> float | None:
    """The smallest ratio a paired design of ``n`` trial ids with this 95 % interval detects with ``POWER``: the
    standard error read off the interval's width on the log scale, times the t quantiles of the two-sided 5 % test
    and of the power (the paired t-test's normal-shift approximation); None without both bounds."""
    if low is None or high is None or n < 2 or not low < high:
        return None
    crit = stats.t.ppf(0.975, n - 1)
    se = (math.log(high) - math.log(low)) / (2.0 * crit)
    return math.exp((crit + stats.t.ppf(POWER, n - 1)) * se)


MIN_EXACT_PAIRS = 3  # a correlation and two SDs need 3 pairs measured in full; with 2 the likelihood has no maximum


def paired_ratio(
    log_a: Sequence[float], status_a: Sequence[str], log_b: Sequence[float], status_b: Sequence[str]
) -> PairedRatio:
    """``PairedRatio`` of a over b from per-trial-id log energies (reached, or the censoring bound) and their
    status (EXACT, ABOVE, BELOW, NEVER), the sequences aligned by trial id; with a NEVER run among them there is no
    finite ratio, and the status says so (``n_never`` counts them)."""
    status_a, status_b = np.asarray(status_a), np.asarray(status_b)
    finite = (status_a != NEVER) & (status_b != NEVER)
    data = _Pairs(
        np.asarray(log_a, float)[finite], status_a[finite], np.asarray(log_b, float)[finite], status_b[finite]
    )
    n, n_exact = len(data.both), int(data.both.sum())
    counts = {"n_pairs": n, "n_exact": n_exact, "n_censored": n - n_exact, "n_never": int((~finite).sum())}
    if counts["n_never"]:
        why = (
            f"{counts['n_never']} trial id(s) stopped by a rule before the target: under that rule their energy to it "
            "is unbounded, and a ratio over the others would compare survivors"
        )
        return PairedRatio(**counts, ratio=None, ci95_low=None, ci95_high=None, p=None, status=why)
    pair_diffs = (data.y[0] - data.y[1])[data.both]
    if n_exact < MIN_EXACT_PAIRS or np.ptp(pair_diffs) == 0:
        why = (
            f"{n_exact} of {n} trial ids crossed the target between eval points under both conditions; a paired ratio "
            f"needs {MIN_EXACT_PAIRS} with distinct differences (the censored ones bound it but cannot set its spread)"
        )
        return PairedRatio(**counts, ratio=None, ci95_low=None, ci95_high=None, p=None, status=why)
    d0 = float(np.mean(pair_diffs))
    top, at = data.profile(d0)
    best = optimize.minimize_scalar(
        lambda d: -data.profile(d, at)[0],
        bracket=(d0 - data.scale, d0 + data.scale),
        options={"xtol": 1e-6},
    )
    d_hat, top = float(best.x), max(top, -float(best.fun))
    _, at = data.profile(d_hat, at)
    crit = stats.t.ppf(0.975, n - 1)

    def lr(delta: float) -> float:
        return max(0.0, 2.0 * (top - data.profile(delta, at)[0]))

    # t² = (n − 1)(e^{LR/n} − 1), monotone in LR: the bounds are found on the LR scale, where a pair as far apart
    # as a diverged trial makes (an LR past exp's range) stays a finite number
    lr_crit = n * math.log1p(crit**2 / (n - 1))

    def bound(sign: int) -> float | None:
        step, near = data.scale / 4.0, d_hat
        while lr(near + sign * step) < lr_crit:
            near += sign * step
            step *= 2.0
            if abs(near - d_hat) > _FAR:
                return None
        return math.exp(optimize.brentq(lambda d: lr(d) - lr_crit, near, near + sign * step, xtol=1e-7))

    at_zero = lr(0.0) / n
    t_zero = math.sqrt((n - 1) * math.expm1(at_zero)) if at_zero < LOG_MAX_FLOAT - math.log(n) else math.inf
    p = float(2.0 * stats.t.sf(t_zero, n - 1))
    low, high = bound(-1), bound(+1)
    found = {"ratio": math.exp(d_hat), "ci95_low": low, "ci95_high": high, "p": p, "status": "ok"}
    return PairedRatio(**counts, **found, detectable=detectable_ratio(low, high, n))
