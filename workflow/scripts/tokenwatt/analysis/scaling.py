"""Scaling-law fits: the loss law L(N, D), energy per token e(N), and the allocations they imply.

The loss law is ``L(N, D) = E + A / N^α + B / D^β``, fitted as Hoffmann et al. 2022 do in their
"approach 3": in the parameters e = log E, a = log A, b = log B, α, β the predicted log-loss is
``LSE(a − α log N, b − β log D, e)``, and the fit minimises the sum over points of the Huber loss
(δ = 1e-3) of (predicted − observed log-loss) with L-BFGS-B and an analytic gradient, from the best
of a grid of starts. Besiroglu et al. 2024 showed that the published fit had stopped early (their
refit moves β from 0.28 to 0.37), so the tolerances here are tight and every fit says whether scipy
reports convergence, with the gradient at the optimum and the objective.

The grid (α, β ∈ {0, 0.5, 1, 1.5, 2}, e ∈ {−1, −0.5, 0, 0.5, 1}, a, b ∈ {0, 5, …, 25}: 4 500 starts)
is screened first: the objective at every start in one vectorised pass (~10 ms for 600 points), then
L-BFGS-B from the ``refine`` best of them, keeping the lowest optimum. On 9 synthetic studies (108 to
600 points, exponents 0.2–0.6, 1–3 % noise), refining every one of the 4 500 starts (15–50 s) found no
lower optimum than the best-screened start alone, to 1.4e-11 relative; 50–66 % of all starts reach that
optimum, and the rest stop in worse local minima. REFINE = 10 keeps a margin for ~40 ms
(``benchmarks/scaling_fit.py --exhaustive`` repeats the comparison). The answer is always an L-BFGS-B
optimum, never a grid point.

Uncertainty is a bootstrap over subjects (the trials: the eval points of one trial share its seed and
are not independent): subject ids are drawn with replacement, each keeps all its points, and each
resample is refitted from the full-data optimum. The exponents of the compute-optimal allocation,
a = β/(α+β) and b = α/(α+β) (N_opt ∝ C^a, D_opt ∝ C^b), are carried through the same resamples.
A resample whose subjects do not span what the law needs (3 model sizes, 3 token counts, 5 distinct
points) is counted as skipped; one whose L-BFGS-B does not report convergence is counted too; the SEs
and percentile intervals are over the converged ones.

Energy per token is ``e(N) = c · N^γ``, a least-squares line of log(J/token) on log N. Under an
energy budget J = e(N) · D the best N solves d L / d log N = 0 along D = J / (c N^γ):
``α A N^−α = γ β B (J/c)^−β N^{γβ}``, so ``N* = (α A / (γ β B))^{1/(α+γβ)} · (J/c)^{β/(α+γβ)}``,
a unique minimum because L along the curve is a sum of two exponentials in log N, convex, when
α, β, γ > 0. (With γ ≤ 0 a larger model costs no more energy per token, and L falls without limit
in N: there is no energy-optimal size.) The FLOPs budget C = 6 N D is the same problem with
c = 6, γ = 1, which gives Hoffmann's N_opt = G (C/6)^a with G = (α A / (β B))^{1/(α+β)}.

Which N: this module takes N as given. Kaplan et al. 2020 counted non-embedding parameters and
Hoffmann et al. 2022 total parameters, and much of the gap between their exponents comes from that
choice alone (Pearce & Song 2024), so the workflow fits the law with each count.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy import optimize
from scipy import stats as sps
from threadpoolctl import threadpool_limits

HUBER_DELTA = 1e-3
GRID_ALPHA = GRID_BETA = (0.0, 0.5, 1.0, 1.5, 2.0)
GRID_E = (-1.0, -0.5, 0.0, 0.5, 1.0)
GRID_LOG_AB = (0.0, 5.0, 10.0, 15.0, 20.0, 25.0)
REFINE = 10
# ftol is relative to max(|f|, 1) and the objective is ~1e-2, so 1e-12 stops only when f has stopped moving.
LBFGSB_OPTIONS = {"ftol": 1e-12, "gtol": 1e-12, "maxiter": 20_000, "maxfun": 40_000}
# L-BFGS-B's LAPACK calls are on matrices of at most 2·maxcor rows: OpenBLAS threads only add waiting, and
# on a shared 2-core machine they made each fit 5–10 times slower. Fits run with one BLAS thread.
ONE_BLAS_THREAD = {"limits": 1, "user_api": "blas"}
LAW_PARAMS = ("E", "A", "B", "alpha", "beta")
LAW_SUMMARY = (*LAW_PARAMS, "a", "b")
ENERGY_PARAMS = ("c", "gamma")
LEVEL = 0.95


class ScalingInputError(ValueError):
    """Input that no fit can use (non-positive values, too few points or levels); the message says which."""


@dataclass(frozen=True)
class Law:
    """``L(N, D) = E + A / N^alpha + B / D^beta``."""

    E: float
    A: float
    B: float
    alpha: float
    beta: float

    @property
    def a(self) -> float:
        """Exponent of the compute-optimal model size, N_opt ∝ C^a."""
        return self.beta / (self.alpha + self.beta)

    @property
    def b(self) -> float:
        """Exponent of the compute-optimal data size, D_opt ∝ C^b."""
        return self.alpha / (self.alpha + self.beta)

    @property
    def theta(self) -> np.ndarray:
        """(log E, log A, log B, alpha, beta): the parameters the objective is minimised in."""
        return np.array([np.log(self.E), np.log(self.A), np.log(self.B), self.alpha, self.beta])

    def loss(self, N: ArrayLike, D: ArrayLike) -> np.ndarray:
        N, D = np.asarray(N, float), np.asarray(D, float)
        return self.E + self.A / N**self.alpha + self.B / D**self.beta

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "a": self.a, "b": self.b}


@dataclass(frozen=True)
class PublishedLaw(Law):
    """A published fit, to show beside ours; ``a_published`` is the exponent as the paper rounds it."""

    source: str
    a_published: float


HOFFMANN_2022 = PublishedLaw(1.69, 406.4, 410.7, 0.34, 0.28, "Hoffmann et al. 2022, approach 3", 0.46)
BESIROGLU_2024 = PublishedLaw(
    1.82, 482.0, 2085.4, 0.348, 0.366, "Besiroglu et al. 2024, replication of approach 3", 0.513
)
PUBLISHED = (HOFFMANN_2022, BESIROGLU_2024)


@dataclass(frozen=True)
class LawFit(Law):
    """A fitted law with what the optimiser said: ``success`` and ``message`` are scipy's, ``grad_norm``
    the largest absolute gradient component at the optimum; ``start`` the start it was reached from."""

    objective: float
    success: bool
    message: str
    grad_norm: float
    n_iter: int
    n_points: int
    n_starts: int
    start: tuple[float, ...]
    N_range: tuple[float, float]
    D_range: tuple[float, float]
    delta: float


def law_objective(
    theta: ArrayLike, log_N: np.ndarray, log_D: np.ndarray, log_loss: np.ndarray, delta: float = HUBER_DELTA
) -> tuple[float, np.ndarray]:
    """Sum of Huber losses of the predicted minus observed log-loss, and its gradient in
    theta = (log E, log A, log B, alpha, beta). The log-sum-exp is shifted by its largest term so that
    no step of the line search overflows."""
    e, a, b, alpha, beta = theta
    u1 = a - alpha * log_N
    u2 = b - beta * log_D
    m = np.maximum(np.maximum(u1, u2), e)
    w1, w2, w3 = np.exp(u1 - m), np.exp(u2 - m), np.exp(e - m)
    s = w1 + w2 + w3
    r = m + np.log(s) - log_loss
    ar = np.abs(r)
    q = np.minimum(ar, delta)  # Huber: r²/2 inside ±delta, delta·(|r| − delta/2) outside, = q·(|r| − q/2)
    psi = np.copysign(q, r) / s  # Huber'(r) times the 1/s of the log-sum-exp's softmax weights
    p1, p2 = psi * w1, psi * w2
    grad = np.array([psi @ w3, p1.sum(), p2.sum(), -(p1 @ log_N), -(p2 @ log_D)])
    return float(q @ (ar - 0.5 * q)), grad


def _grid() -> np.ndarray:
    """The 4 500 starts (log E, log A, log B, alpha, beta), in the order ``_screen`` scores them."""
    alpha, a, beta, b, e = np.meshgrid(GRID_ALPHA, GRID_LOG_AB, GRID_BETA, GRID_LOG_AB, GRID_E, indexing="ij")
    return np.stack([e, a, b, alpha, beta], axis=-1).reshape(-1, 5)


def _screen(log_N: np.ndarray, log_D: np.ndarray, log_loss: np.ndarray, delta: float) -> np.ndarray:
    """The objective at every grid start, in ``_grid`` order. Each term of the log-sum-exp depends on two
    grid axes only, so its exponentials are taken once per pair (30 × points), and the 4 500 sums are formed
    one (alpha, a) pair at a time, 150 × points in memory. No shift is needed: with N, D ≥ 1 every exponent
    on the grid is at most 25."""
    t1 = np.exp(np.add.outer(GRID_LOG_AB, -np.multiply.outer(GRID_ALPHA, log_N)).transpose(1, 0, 2).reshape(30, -1))
    t2 = np.exp(np.add.outer(GRID_LOG_AB, -np.multiply.outer(GRID_BETA, log_D)).transpose(1, 0, 2).reshape(30, -1))
    t23 = t2[:, None, :] + np.exp(np.array(GRID_E))[None, :, None]
    out = np.empty((30, 30, len(GRID_E)))
    for i, term in enumerate(t1):
        ar = np.abs(np.log(t23 + term) - log_loss)
        q = np.minimum(ar, delta)
        out[i] = (q * (ar - 0.5 * q)).sum(-1)
    return out.reshape(-1)


def _minimise(
    theta0: np.ndarray, log_N: np.ndarray, log_D: np.ndarray, log_loss: np.ndarray, delta: float
) -> optimize.OptimizeResult:
    """L-BFGS-B from ``theta0``; the result's ``x`` and ``jac`` are in theta.

    It runs in centred logs: with a' = a − alpha·mean(log N) the term is a' − alpha·(log N − mean), and the
    same for b. That is the same objective, but log N (~11–15) no longer ties a to alpha, and the optimiser
    reaches the optimum in fewer steps instead of stopping early on a long narrow valley."""
    xm, ym = log_N.mean(), log_D.mean()
    e, a, b, alpha, beta = theta0
    r = optimize.minimize(
        law_objective,
        np.array([e, a - alpha * xm, b - beta * ym, alpha, beta]),
        args=(log_N - xm, log_D - ym, log_loss, delta),
        jac=True,
        method="L-BFGS-B",
        options=LBFGSB_OPTIONS,
    )
    e, a, b, alpha, beta = r.x
    g = r.jac
    r.x = np.array([e, a + alpha * xm, b + beta * ym, alpha, beta])
    r.jac = np.array([g[0], g[1], g[2], g[3] - xm * g[1], g[4] - ym * g[2]])  # the chain rule back to theta
    return r


def check_positive(values: ArrayLike, name: str) -> np.ndarray:
    """``values`` as a float array, or a ScalingInputError naming ``name`` and how many rows are not
    positive finite numbers (logs of them are taken)."""
    x = np.asarray(values, dtype=float).ravel()
    bad = int((~(np.isfinite(x) & (x > 0))).sum())
    if bad:
        raise ScalingInputError(f"{name}: {bad} of {x.size} rows are not positive finite numbers")
    return x


def _unidentified(N: np.ndarray, D: np.ndarray) -> str | None:
    """Why points at these (N, D) cannot identify the law, or None. E, A and alpha are separated only by
    three or more model sizes, E, B and beta by three or more data sizes, and there are five parameters."""
    n_N, n_D, n_points = np.unique(N).size, np.unique(D).size, np.unique(N + 1j * D).size  # complex: (N, D) pairs
    if n_points < 5 or n_N < 3 or n_D < 3:
        return (
            f"{n_points} distinct (N, D) points, {n_N} distinct N and {n_D} distinct D: the law's 5 parameters "
            "need at least 5 points, 3 distinct N and 3 distinct D"
        )
    return None


def fit_law(
    N: ArrayLike,
    D: ArrayLike,
    loss: ArrayLike,
    *,
    start: Law | None = None,
    refine: int = REFINE,
    delta: float = HUBER_DELTA,
) -> LawFit:
    """Fit ``L(N, D)`` to points (N parameters, D tokens, loss in nats).

    From ``start`` (a law, e.g. the full-data fit for a bootstrap resample) one L-BFGS-B run; otherwise
    the grid is screened and the ``refine`` best starts are refined (``refine=4500`` refines all).
    """
    if not 1 <= refine <= len(GRID_ALPHA) * len(GRID_BETA) * len(GRID_E) * len(GRID_LOG_AB) ** 2:
        raise ValueError(f"refine = {refine}: between 1 and the 4 500 grid starts")
    N, D, loss = check_positive(N, "N"), check_positive(D, "D"), check_positive(loss, "loss")
    if not N.size == D.size == loss.size:
        raise ScalingInputError(f"N, D and loss differ in length: {N.size}, {D.size}, {loss.size}")
    if N.size < 5:
        raise ScalingInputError(f"{N.size} points, fewer than the law's 5 parameters")
    if reason := _unidentified(N, D):
        raise ScalingInputError(reason)
    log_N, log_D, log_loss = np.log(N), np.log(D), np.log(loss)
    if start is None:
        starts = _grid()[np.argsort(_screen(log_N, log_D, log_loss, delta), kind="stable")[:refine]]
    else:
        starts = start.theta[None, :]
    with threadpool_limits(**ONE_BLAS_THREAD):
        results = [_minimise(s, log_N, log_D, log_loss, delta) for s in starts]
    best = min(range(len(results)), key=lambda i: results[i].fun)
    r = results[best]
    e, a, b, alpha, beta = r.x
    return LawFit(
        E=float(np.exp(e)),
        A=float(np.exp(a)),
        B=float(np.exp(b)),
        alpha=float(alpha),
        beta=float(beta),
        objective=float(r.fun),
        success=bool(r.success),
        message=str(r.message),
        grad_norm=float(np.abs(r.jac).max()),
        n_iter=int(r.nit),
        n_points=int(N.size),
        n_starts=len(starts),
        start=tuple(float(v) for v in starts[best]),
        N_range=(float(N.min()), float(N.max())),
        D_range=(float(D.min()), float(D.max())),
        delta=delta,
    )


@dataclass(frozen=True)
class EnergyFit:
    """``e(N) = c · N^gamma`` joules per token, from the line log e = log c + gamma log N. The intervals are
    t-based; c's is the exponential of log c's (so not symmetric) and ``se_c`` its delta-method SE."""

    c: float
    gamma: float
    se_log_c: float
    se_c: float
    se_gamma: float
    ci_c: tuple[float, float]
    ci_gamma: tuple[float, float]
    r2: float
    n_points: int
    n_sizes: int
    N_range: tuple[float, float]

    def per_token(self, N: ArrayLike) -> np.ndarray:
        return self.c * np.asarray(N, float) ** self.gamma

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _energy_line(log_N: np.ndarray, log_e: np.ndarray) -> tuple[float, float]:
    """Least-squares (intercept, slope) of log e on log N."""
    dx = log_N - log_N.mean()
    slope = float(dx @ (log_e - log_e.mean()) / (dx @ dx))
    return float(log_e.mean() - slope * log_N.mean()), slope


def _energy_sizes(N: np.ndarray) -> str | None:
    """Why these model sizes cannot give e(N), or None: a line through two sizes cannot show whether a power
    law fits."""
    n = np.unique(N).size
    return None if n >= 3 else f"{n} distinct N: e(N) = c·N^gamma needs at least 3 model sizes"


def fit_energy(N: ArrayLike, joules_per_token: ArrayLike) -> EnergyFit:
    """Fit ``e(N) = c · N^gamma`` to one point per trial (its N and measured J/token)."""
    N, e = check_positive(N, "N"), check_positive(joules_per_token, "joules_per_token")
    if N.size != e.size:
        raise ScalingInputError(f"N and joules_per_token differ in length: {N.size}, {e.size}")
    if reason := _energy_sizes(N):
        raise ScalingInputError(reason)
    x, y = np.log(N), np.log(e)
    log_c, gamma = _energy_line(x, y)
    rss = float(((y - log_c - gamma * x) ** 2).sum())
    tss = float(((y - y.mean()) ** 2).sum())
    df = N.size - 2
    s2, sxx = rss / df, float(((x - x.mean()) ** 2).sum())
    se_gamma = float(np.sqrt(s2 / sxx))
    se_log_c = float(np.sqrt(s2 * (1 / N.size + x.mean() ** 2 / sxx)))
    t = float(sps.t.ppf(0.5 + LEVEL / 2, df))
    c = float(np.exp(log_c))
    return EnergyFit(
        c=c,
        gamma=gamma,
        se_log_c=se_log_c,
        se_c=c * se_log_c,
        se_gamma=se_gamma,
        ci_c=(float(np.exp(log_c - t * se_log_c)), float(np.exp(log_c + t * se_log_c))),
        ci_gamma=(gamma - t * se_gamma, gamma + t * se_gamma),
        r2=1 - rss / tss if tss > 0 else float("nan"),
        n_points=int(N.size),
        n_sizes=int(np.unique(N).size),
        N_range=(float(N.min()), float(N.max())),
    )


@dataclass(frozen=True, eq=False)
class BootstrapResult:
    """Resamples over subjects. ``samples`` has a row per resample (NaN where it was skipped: its subjects
    did not span the levels a fit needs) and ``converged`` says which rows the summary uses. Where the
    loss law and e(N) were resampled together, ``energy`` holds e(N)'s resamples, row for row the same
    subject draws."""

    names: tuple[str, ...]
    estimate: tuple[float, ...]
    samples: np.ndarray
    converged: np.ndarray
    n_skipped: int
    n_subjects: int
    seed: int
    energy: BootstrapResult | None = None

    @property
    def n_resamples(self) -> int:
        return int(self.converged.size)

    @property
    def n_converged(self) -> int:
        return int(self.converged.sum())

    def summary(self) -> dict[str, dict[str, float]]:
        """Per parameter: the full-data estimate, the SE (SD over converged resamples) and the percentile interval."""
        kept = self.samples[self.converged]
        if kept.shape[0] < 2:
            se = lo = hi = np.full(len(self.names), np.nan)
        else:
            se = kept.std(axis=0, ddof=1)
            lo, hi = np.percentile(kept, [50 * (1 - LEVEL), 50 * (1 + LEVEL)], axis=0)
        return {
            n: {"estimate": float(v), "se": float(s), "ci_low": float(a), "ci_high": float(b)}
            for n, v, s, a, b in zip(self.names, self.estimate, se, lo, hi, strict=True)
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "n_resamples": self.n_resamples,
            "n_converged": self.n_converged,
            "n_skipped": self.n_skipped,
            "n_not_converged": self.n_resamples - self.n_converged - self.n_skipped,
            "n_subjects": self.n_subjects,
            "seed": self.seed,
            "level": LEVEL,
            "parameters": self.summary(),
            "energy": None if self.energy is None else self.energy.to_dict(),
        }


def _subject_draws(n_subjects: int, n_resamples: int, seed: int) -> Iterator[np.ndarray]:
    """How many times each subject is drawn, resample after resample, from numpy's default_rng(seed)."""
    rng = np.random.default_rng(seed)
    for _ in range(n_resamples):
        yield np.bincount(rng.integers(0, n_subjects, n_subjects), minlength=n_subjects)


def _law_row(law: Law) -> list[float]:
    return [law.E, law.A, law.B, law.alpha, law.beta, law.a, law.b]


class _EnergyResampler:
    """e(N)'s part of a bootstrap: the points, their subjects' codes, and the rows filled resample by resample."""

    def __init__(self, N: ArrayLike, joules_per_token: ArrayLike, codes: np.ndarray, n_resamples: int):
        self.fit = fit_energy(N, joules_per_token)
        self.N = check_positive(N, "N")
        if codes.size != self.N.size:
            raise ScalingInputError(f"{codes.size} subjects for {self.N.size} energy points")
        self.x, self.y = np.log(self.N), np.log(check_positive(joules_per_token, "joules_per_token"))
        self.codes = codes
        self.samples = np.full((n_resamples, 2), np.nan)
        self.skipped = 0

    def draw(self, i: int, multiplicity: np.ndarray) -> None:
        drawn = multiplicity[self.codes]
        if _energy_sizes(self.N[drawn > 0]):
            self.skipped += 1
            return
        rows = np.repeat(np.arange(self.N.size), drawn)
        log_c, gamma = _energy_line(self.x[rows], self.y[rows])
        self.samples[i] = np.exp(log_c), gamma

    def result(self, n_subjects: int, seed: int) -> BootstrapResult:
        return BootstrapResult(
            ENERGY_PARAMS,
            (self.fit.c, self.fit.gamma),
            self.samples,
            np.isfinite(self.samples[:, 0]),
            self.skipped,
            n_subjects,
            seed,
        )


def _subject_codes(*subjects: np.ndarray) -> tuple[int, list[np.ndarray]]:
    """The number of distinct subjects over all the tables, and each table's subjects as codes into them."""
    ids, codes = np.unique(np.concatenate([np.asarray(s).ravel() for s in subjects]), return_inverse=True)
    cuts = np.cumsum([np.asarray(s).size for s in subjects])[:-1]
    return ids.size, np.split(codes, cuts)


def bootstrap(
    N: ArrayLike,
    D: ArrayLike,
    loss: ArrayLike,
    subjects: ArrayLike | None = None,
    *,
    fit: LawFit | None = None,
    energy: tuple[ArrayLike, ArrayLike, ArrayLike] | None = None,
    n_resamples: int = 1000,
    seed: int = 0,
) -> BootstrapResult:
    """Bootstrap the loss law over subjects (``subjects[i]`` is point i's; default: each point its own).

    Each resample is refitted from ``fit`` (default: the full-data fit). ``energy``, as (N, J/token,
    subjects) with one row per trial, resamples e(N) in the same subject draws, so that an allocation can
    pair each law with the e(N) of the same draw; its subjects share the loss points' ids.
    """
    N, D, loss = check_positive(N, "N"), check_positive(D, "D"), check_positive(loss, "loss")
    fit = fit if fit is not None else fit_law(N, D, loss)
    subjects = np.arange(N.size) if subjects is None else np.asarray(subjects).ravel()
    if subjects.size != N.size:
        raise ScalingInputError(f"{subjects.size} subjects for {N.size} points")
    n_subjects, (codes, *energy_codes) = _subject_codes(subjects, *([energy[2]] if energy else []))
    resampler = _EnergyResampler(energy[0], energy[1], energy_codes[0], n_resamples) if energy else None
    log_N, log_D, log_loss = np.log(N), np.log(D), np.log(loss)
    samples = np.full((n_resamples, len(LAW_SUMMARY)), np.nan)
    converged = np.zeros(n_resamples, bool)
    skipped = 0
    with threadpool_limits(**ONE_BLAS_THREAD):
        for i, multiplicity in enumerate(_subject_draws(n_subjects, n_resamples, seed)):
            if resampler:
                resampler.draw(i, multiplicity)
            drawn = multiplicity[codes]
            if _unidentified(N[drawn > 0], D[drawn > 0]):
                skipped += 1
                continue
            rows = np.repeat(np.arange(N.size), drawn)
            r = _minimise(fit.theta, log_N[rows], log_D[rows], log_loss[rows], fit.delta)
            e, a, b, alpha, beta = r.x
            samples[i] = _law_row(Law(np.exp(e), np.exp(a), np.exp(b), alpha, beta))
            converged[i] = r.success
    return BootstrapResult(
        LAW_SUMMARY,
        tuple(_law_row(fit)),
        samples,
        converged,
        skipped,
        n_subjects,
        seed,
        resampler.result(n_subjects, seed) if resampler else None,
    )


def bootstrap_energy(
    N: ArrayLike,
    joules_per_token: ArrayLike,
    subjects: ArrayLike | None = None,
    *,
    n_resamples: int = 1000,
    seed: int = 0,
) -> BootstrapResult:
    """Bootstrap e(N) alone over subjects (default: each trial its own), beside ``fit_energy``'s t intervals."""
    subjects = np.arange(np.size(N)) if subjects is None else subjects
    n_subjects, (codes,) = _subject_codes(subjects)
    resampler = _EnergyResampler(N, joules_per_token, codes, n_resamples)
    for i, multiplicity in enumerate(_subject_draws(n_subjects, n_resamples, seed)):
        resampler.draw(i, multiplicity)
    return resampler.result(n_subjects, seed)


@dataclass(frozen=True, eq=False)
class Allocation:
    """The loss-optimal (N*, D*) for each budget, and L* there. ``extrapolated`` marks budgets whose N* or D*
    lies outside the measured range (None where the law has none, e.g. a published one); the bands are the
    2.5 and 97.5 percentiles over the ``n_resamples`` bootstrap resamples that have an optimum (None without
    a bootstrap, or where none has), and ``n_without_optimum`` counts the others."""

    constraint: str
    budget: np.ndarray
    N: np.ndarray
    D: np.ndarray
    loss: np.ndarray
    extrapolated: np.ndarray | None
    N_band: np.ndarray | None = None
    D_band: np.ndarray | None = None
    loss_band: np.ndarray | None = None
    n_resamples: int = 0
    n_without_optimum: int = 0

    @property
    def tokens_per_parameter(self) -> np.ndarray:
        return self.D / self.N

    def to_dict(self) -> dict[str, Any]:
        plain = {k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in asdict(self).items()}
        return {**plain, "tokens_per_parameter": self.tokens_per_parameter.tolist()}


def _optimum(
    law: np.ndarray, c: np.ndarray, gamma: np.ndarray, budget: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """N*, D*, L* (laws × budgets) minimising L subject to c·N^gamma·D = budget, for laws as rows of
    (E, A, B, alpha, beta) and per-law c, gamma; NaN where no finite optimum exists (alpha, beta or gamma ≤ 0)."""
    E, A, B, alpha, beta = (law[:, i : i + 1] for i in range(5))
    c, gamma = c[:, None], gamma[:, None]
    with np.errstate(invalid="ignore", divide="ignore"):
        p = alpha + gamma * beta
        N = (alpha * A / (gamma * beta * B)) ** (1 / p) * (budget / c) ** (beta / p)
        N = np.where((alpha > 0) & (beta > 0) & (gamma > 0), N, np.nan)
        D = budget / (c * N**gamma)
        return N, D, E + A / N**alpha + B / D**beta


def _allocate(
    constraint: str,
    law: Law,
    c: float,
    gamma: float,
    budget: ArrayLike,
    draws: np.ndarray | None,
    ranges: tuple[tuple[float, float], tuple[float, float]] | None,
) -> Allocation:
    budget = np.atleast_1d(np.asarray(budget, float))
    check_positive(budget, "budget")
    point = np.array([[law.E, law.A, law.B, law.alpha, law.beta]])
    N, D, L = (v[0] for v in _optimum(point, np.array([c]), np.array([gamma]), budget))
    if np.isnan(N).any():
        raise ValueError(
            f"no finite {constraint}-optimal allocation: it needs alpha, beta and gamma > 0 "
            f"(alpha = {law.alpha:.3g}, beta = {law.beta:.3g}, gamma = {gamma:.3g})"
        )
    extrapolated = None
    if ranges:
        (n_lo, n_hi), (d_lo, d_hi) = ranges
        extrapolated = (N < n_lo) | (N > n_hi) | (D < d_lo) | (D > d_hi)
    bands: dict[str, Any] = {}
    if draws is not None:
        Nb, Db, Lb = _optimum(draws[:, :5], draws[:, 5], draws[:, 6], budget)
        ok = np.isfinite(Nb).all(axis=1)
        bands = {"n_resamples": int(ok.sum()), "n_without_optimum": int((~ok).sum())}
        if ok.any():
            q = [50 * (1 - LEVEL), 50 * (1 + LEVEL)]
            bands.update(
                N_band=np.percentile(Nb[ok], q, axis=0),
                D_band=np.percentile(Db[ok], q, axis=0),
                loss_band=np.percentile(Lb[ok], q, axis=0),
            )
    return Allocation(constraint, budget, N, D, L, extrapolated, **bands)


def _law_ranges(law: Law) -> tuple[tuple[float, float], tuple[float, float]] | None:
    return (law.N_range, law.D_range) if isinstance(law, LawFit) else None


def allocate_energy(
    law: Law, energy: EnergyFit, joules: ArrayLike, *, boot: BootstrapResult | None = None
) -> Allocation:
    """Minimise L(N, D) subject to e(N)·D = J for each energy budget J (joules), in closed form (module docstring).

    With ``boot`` (from ``bootstrap``), bands over its converged resamples, each law paired with the e(N) of
    the same subject draw where ``boot.energy`` holds them, else with ``energy``. N* is extrapolated outside
    the sizes both fits measured, D* outside the law's tokens.
    """
    ranges = _law_ranges(law)
    if ranges:
        ranges = ((max(ranges[0][0], energy.N_range[0]), min(ranges[0][1], energy.N_range[1])), ranges[1])
    draws = None
    if boot is not None:
        if boot.energy is not None:
            ok = boot.converged & boot.energy.converged
            ce = boot.energy.samples[ok]
        else:
            ok = boot.converged
            ce = np.tile([energy.c, energy.gamma], (int(ok.sum()), 1))
        draws = np.column_stack([boot.samples[ok, :5], ce])
    return _allocate("energy", law, energy.c, energy.gamma, joules, draws, ranges)


def allocate_flops(law: Law, flops: ArrayLike, *, boot: BootstrapResult | None = None) -> Allocation:
    """Minimise L(N, D) subject to 6·N·D = C for each compute budget C (FLOPs): N* = G·(C/6)^a, D* = (C/6)/N*."""
    draws = None
    if boot is not None:
        law_draws = boot.samples[boot.converged, :5]
        draws = np.column_stack([law_draws, np.full(len(law_draws), 6.0), np.ones(len(law_draws))])
    return _allocate("flops", law, 6.0, 1.0, flops, draws, _law_ranges(law))
