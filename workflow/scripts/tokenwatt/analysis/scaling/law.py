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

Identification: a parameter the points do not pin is named, never given a number that looks measured.
Every refined start that ends within ``NEAR`` (relative) of the best objective is an equally good answer;
where those answers disagree on a parameter by more than ``SPREAD`` (5 % in E, A or B, 0.01 in an
exponent), that parameter is not identified (as β → 0, B/D^β flattens into a constant and E trades
against B along a valley the objective cannot tell apart). An E that is not identified takes with it the
exponent of the term it trades against, the one closer to a constant across the data; an A takes α, a B β. An exponent ≤ 0 is not identified either: the
law then has no size (or data) effect to measure, and the allocation exponents built on it are not
identified with it. Intervals, the law's lack of fit and the units they count live in ``units``;
e(N) in ``energy_per_token``; the allocations in ``allocation``.

Which N: this module takes N as given. Kaplan et al. 2020 counted non-embedding parameters and
Hoffmann et al. 2022 total parameters, and much of the gap between their exponents comes from that
choice alone (Pearce & Song 2024), so the workflow fits the law with each count.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy import optimize
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
# Refined optima within NEAR (relative) of the best objective are equally good; where they differ by more than
# SPREAD (in log E, log A, log B; then in alpha, beta) the parameter is not identified.
NEAR = 1e-4
SPREAD = (np.log(1.05),) * 3 + (0.01, 0.01)
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
    the largest absolute gradient component at the optimum; ``start`` the start it was reached from;
    ``not_identified`` each parameter the points do not pin, with why (module docstring)."""

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
    not_identified: dict[str, str] = field(default_factory=dict)


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


def _not_identified(thetas: np.ndarray, best: np.ndarray, spans: tuple[float, float]) -> dict[str, str]:
    """Which parameters the equally good optima ``thetas`` (rows in theta) disagree on, or that sit at or below
    zero in ``best``; ``spans`` are the ranges of log N and log D; the derived exponents a and b go with alpha
    and beta."""
    out = {}
    spread = thetas.max(axis=0) - thetas.min(axis=0)
    for name, width, limit, value in zip(LAW_PARAMS, spread, SPREAD, best, strict=True):
        if width > limit:
            shown = f"a factor of {np.exp(width):.3g}" if name in ("E", "A", "B") else f"{width:.3g}"
            out[name] = f"equally good fits (objective within {NEAR:g} of the best) differ in {name} by {shown}"
        elif name in ("alpha", "beta") and value <= 0:
            out[name] = f"{name} = {value:.3g} ≤ 0: the points show no {'size' if name == 'alpha' else 'data'} effect"
    # E is separated from the A/N^alpha term by the model sizes and from B/D^beta by the token counts. Where the
    # optima disagree on E, E trades against the term that is closer to a constant over the data (the smaller
    # relative change 1 − (min/max)^exponent across its variable's range), and that term's exponent moves along the
    # same valley even when the refined starts happen to agree on it: on simulated studies of the CPU scaling
    # design's shape (sizes over one decade, tokens over two), such fits put alpha at 0.13-0.16 against a true 0.35
    # with jackknife SEs of 0.01-0.07, while beta stayed within 0.01 of its truth.
    if "E" in out:
        change = {
            k: 1 - np.exp(-max(v, 0.0) * span)
            for k, v, span in (("alpha", best[3], spans[0]), ("beta", best[4], spans[1]))
        }
        flatter = min(change, key=change.get)
        out.setdefault(
            flatter,
            f"E not identified, and {flatter}'s term, which changes by {change[flatter]:.0%} across the data "
            f"(the other by {max(change.values()):.0%}), is the one E trades against",
        )
    for partner, exponent in (("A", "alpha"), ("B", "beta")):
        if partner in out:
            out.setdefault(exponent, f"{partner} not identified, and {exponent} is fitted together with it")
    if "alpha" in out or "beta" in out:
        for name in ("a", "b"):
            out[name] = "built on an exponent that is not identified"
    return out


def fit_law(
    N: ArrayLike,
    D: ArrayLike,
    loss: ArrayLike,
    *,
    also_from: Law | None = None,
    refine: int = REFINE,
    delta: float = HUBER_DELTA,
) -> LawFit:
    """Fit ``L(N, D)`` to points (N parameters, D tokens, loss in nats).

    The grid is screened and the ``refine`` best starts are refined (``refine=4500`` refines all), and
    ``also_from`` (a law, e.g. the full-data fit when refitting part of the points) is refined too: the best
    optimum of all of them is the fit, so a refit can leave the basin of the law it started beside.
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
    starts = _grid()[np.argsort(_screen(log_N, log_D, log_loss, delta), kind="stable")[:refine]]
    if also_from is not None:
        starts = np.vstack([starts, also_from.theta])
    with threadpool_limits(**ONE_BLAS_THREAD):
        results = [_minimise(s, log_N, log_D, log_loss, delta) for s in starts]
    best = min(range(len(results)), key=lambda i: results[i].fun)
    r = results[best]
    near = np.array([q.x for q in results if q.fun <= r.fun * (1 + NEAR)])
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
        not_identified=_not_identified(near, r.x, (float(np.ptp(log_N)), float(np.ptp(log_D)))),
    )
