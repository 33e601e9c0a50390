"""A paired signed-rank test of energy to a target that assumes no law for the energies and no independence of a
run's censoring bound from its energy.

Why beside the censored-normal ratio (``censored.paired_ratio``): that ratio extrapolates a censored run's energy
through a normal tail, and it takes a run's bound (its energy at its last point, its J/token × its tokens) as
independent of the energy it needed (its J/token × its tokens to target), though the two share the run's J/token. With skewed run
effects or a bound that shares the run's rate its test rejects a true ratio of 1 too often at 20–50 trial ids
(``benchmarks/censored_energy.py``); this test keeps its size there.

How: each trial id's two runs are censored again on the token axis, where the bounds are set by the budgets and the
eval grid and not by the run: the window both runs observed runs from the later of their first eval points to the
earlier of their last points. A run that crossed the target inside the window keeps its measured energy; one that
crossed after the window's end, or never, needed more than its own energy at the end's tokens; one that crossed
before the window's start, at most its own energy at the start's tokens (each read off the run's own curve, log
energy linear in log tokens between its eval points, as the crossing is: a run's energy is not its average J/token ×
its tokens where it pays a fixed cost, and a longer run's average would set its bounds too low). Each trial id then
gives an interval for the difference of log energies (b − a), exact where both crossed inside the window. Where the
two runs of a trial id are exchangeable (the null: one law of the whole run, tokens to the target and energy along
the tokens, under both conditions), swapping them reflects that interval about 0, so the distribution of any
statistic over sign flips is exact. A rejection says the two conditions' runs differ in law; the report reads it as
a difference in energy to the target, which is what the statistic's sign ranks. The statistic is the
signed rank's count over Walsh pairs with Gehan's scoring: each pair of trial ids (i ≤ j) scores +1 where
``d_i + d_j`` is surely above 0, −1 where surely below and 0 where the intervals leave it open; without censoring it is
Wilcoxon's signed-rank test. p: exact over every sign flip up to ``EXACT_UP_TO`` informative trial ids, else over
``FLIPS`` seeded random flips (the same data give the same p).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from .censored import ABOVE, EXACT, NEVER

EXACT_UP_TO = 14  # 2^14 sign flips enumerated
FLIPS = 20_000  # random sign flips past that: p to about ±0.003 at p = .05
_SEED = 20_261_205
_CHUNK = 2_000  # flips scored at once (memory: chunk × pairs of trial ids)


@dataclass(frozen=True)
class RunsToTarget:
    """One condition's runs, one per trial id in the pairing's order: ``status`` (EXACT, ABOVE, BELOW, NEVER),
    ``energy_j`` and ``tokens`` at the crossing (or at the bound the status names), and each run's curve: its eval
    points' real tokens and cumulative training energy, ascending, both above 0."""

    status: np.ndarray
    energy_j: np.ndarray
    tokens: np.ndarray
    curves: tuple[tuple[np.ndarray, np.ndarray], ...]

    @property
    def first_tokens(self) -> np.ndarray:
        return np.array([t[0] if t.size else np.nan for t, _ in self.curves])

    @property
    def last_tokens(self) -> np.ndarray:
        return np.array([t[-1] if t.size else np.nan for t, _ in self.curves])

    def log_energy_at(self, tokens: np.ndarray) -> np.ndarray:
        """Each run's log energy at its own ``tokens`` (inside its curve), log-log linear between its points; NaN
        for a run without a curve."""
        return np.array(
            [
                np.interp(math.log(x), np.log(t), np.log(e)) if t.size and x > 0 else np.nan
                for x, (t, e) in zip(tokens, self.curves)
            ]
        )


@dataclass(frozen=True)
class RankTest:
    """The paired signed-rank test of energy b against a: ``p`` (two-sided, None with the reason in ``status``),
    ``n_pairs`` trial ids, ``n_informative`` of them whose interval is not the whole line, ``n_exact`` with both
    runs crossing inside the common window, ``statistic`` (the Walsh count; positive: b needed more),
    ``exact`` whether p enumerated every sign flip, and ``min_p`` the smallest p these trial ids could give (with 5
    of them 2/32 = 0.0625: no result of 5 trial ids is significant at .05 by this test)."""

    n_pairs: int
    n_informative: int
    n_exact: int
    statistic: float | None
    p: float | None
    exact: bool
    status: str
    min_p: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {f"rank_{k}": v for k, v in asdict(self).items()}


def _log_bounds(runs: RunsToTarget, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each run's log energy to the target as an interval, censored to the window [start, end] in real tokens, at the
    run's own energy at the window's bounds."""
    status, tokens = runs.status, runs.tokens
    exact = (status == EXACT) & (tokens >= start) & (tokens <= end)
    late = (status == ABOVE) | ((status == EXACT) & (tokens > end))
    with np.errstate(divide="ignore", invalid="ignore"):
        log_e = np.log(runs.energy_j)
    low = np.where(exact, log_e, np.where(late, runs.log_energy_at(end), -np.inf))
    high = np.where(exact, log_e, np.where(late, np.inf, runs.log_energy_at(start)))
    return low, high


def _walsh_counts(low: np.ndarray, high: np.ndarray, signs: np.ndarray) -> np.ndarray:
    """The Walsh count of the intervals [low, high] under each row of ``signs`` (±1 per trial id: −1 reflects the
    interval to [−high, −low])."""
    i, j = np.triu_indices(low.size)
    lo = np.where(signs > 0, low, -high)
    hi = np.where(signs > 0, high, -low)
    above = (lo[:, i] + lo[:, j]) > 0
    below = (hi[:, i] + hi[:, j]) < 0
    return above.sum(axis=1).astype(float) - below.sum(axis=1)


def _flip_p(low: np.ndarray, high: np.ndarray, observed: float) -> tuple[float, bool, float]:
    """Two-sided p of ``observed`` over the sign-flip distribution, whether every flip was enumerated, and the
    smallest p any arrangement of these intervals could give: every flip, or seeded random ones counting the
    observed arrangement (so p is never 0; the smallest p is then 1 / (flips + 1))."""
    n = low.size
    if n <= EXACT_UP_TO:
        codes = np.arange(2**n)[:, None] >> np.arange(n)[None, :] & 1
        stats = np.abs(_walsh_counts(low, high, 1 - 2 * codes))
        return float(np.mean(stats >= abs(observed) - 1e-9)), True, float(np.mean(stats >= stats.max() - 1e-9))
    rng = np.random.default_rng(_SEED)
    hits = 0
    for size in [_CHUNK] * (FLIPS // _CHUNK) + [FLIPS % _CHUNK] * bool(FLIPS % _CHUNK):
        stats = _walsh_counts(low, high, rng.choice((-1, 1), size=(size, n)))
        hits += int(np.sum(np.abs(stats) >= abs(observed) - 1e-9))
    return (1 + hits) / (1 + FLIPS), False, 1 / (1 + FLIPS)


def paired_rank_test(a: RunsToTarget, b: RunsToTarget) -> RankTest:
    """``RankTest`` of energy to the target under b against a, the runs aligned by trial id. A pair with a NEVER run
    (stopped by a rule before the target) gives no test, as it gives no ratio."""
    n = int(a.status.size)
    if np.any(a.status == NEVER) or np.any(b.status == NEVER):
        never = int(np.sum((a.status == NEVER) | (b.status == NEVER)))
        return RankTest(n, 0, 0, None, None, False, f"{never} trial id(s) stopped by a rule before the target")
    start = np.maximum(a.first_tokens, b.first_tokens)
    end = np.minimum(a.last_tokens, b.last_tokens)
    lo_a, hi_a = _log_bounds(a, start, end)
    lo_b, hi_b = _log_bounds(b, start, end)
    with np.errstate(invalid="ignore"):
        low, high = lo_b - hi_a, hi_b - lo_a
    unknown = np.isnan(low) | np.isnan(high)  # a run without a curve: its bound at the window is not known
    informative = ~unknown & (np.isfinite(low) | np.isfinite(high))
    n_exact = int(np.sum(np.isfinite(low) & (low == high)))
    if not informative.any():
        why = "no trial id has a run that crossed the target inside the window both runs observed"
        return RankTest(n, 0, 0, None, None, False, why)
    low, high = low[informative], high[informative]
    observed = float(_walsh_counts(low, high, np.ones((1, low.size)))[0])
    p, exact, min_p = _flip_p(low, high, observed)
    status = f"ok; {int(unknown.sum())} trial id(s) left out: a run without eval points" if unknown.any() else "ok"
    return RankTest(n, int(informative.sum()), n_exact, observed, min(1.0, p), exact, status, min_p)


def runs_to_target(status: Any, energy_j: Any, tokens: Any, curve_tokens: Any, curve_energy_j: Any) -> RunsToTarget:
    """``RunsToTarget`` from columns (lists, Series or arrays; the curves one list per run), as floats; a missing
    value becomes NaN, a missing curve an empty one."""
    as_float = lambda x: np.array([math.nan if v is None else float(v) for v in x], float)  # noqa: E731
    curves = tuple(
        (as_float([] if t is None else t), as_float([] if e is None else e))
        for t, e in zip(curve_tokens, curve_energy_j)
    )
    return RunsToTarget(
        np.asarray(list(status), dtype=object).astype(str), as_float(energy_j), as_float(tokens), curves
    )
