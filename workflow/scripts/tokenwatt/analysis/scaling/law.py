"""Scaling-law fits: the loss law L(N, D), energy per token e(N), and the allocations they imply.

The loss law is ``L(N, D) = E + A / N^α + B / D^β``, fitted as Hoffmann et al. 2022 do in their
"approach 3": in the parameters e = log E, a = log A, b = log B, α, β the predicted log-loss is
``LSE(a − α log N, b − β log D, e)``, and the fit minimises the sum over points of the Huber loss
(δ = 1e-3) of (predicted − observed log-loss) with L-BFGS-B and an analytic gradient. Besiroglu et al.
2024 showed that the published fit had stopped early (their refit moves β from 0.28 to 0.37), so the
tolerances here are tight and every fit says whether scipy reports convergence, with the gradient at the
optimum and the objective.

Where L-BFGS-B starts is found by variable projection (the Open-Athena analysis of approach 3, 2026): for
fixed exponents the law is linear in E, A and B, so only α and β are searched, on a grid (0 to 2.5 in steps
of 0.05: 2 601 pairs), and at each pair E, A, B ≥ 0 are solved exactly, by non-negative least squares of the
relative residual (E + A/N^α + B/D^β)/L − 1 (to first order the log-loss residual). Every pair is solved in one
vectorised pass (the 3 × 3 normal equations of each of the 7 supports, the best feasible one kept: ~25 ms for
600 points), and L-BFGS-B refines from ``refine`` pairs, the best and then the best at least 0.3 apart from
those taken (``spread_starts``), keeping the lowest optimum. Unlike a grid of
starts in all five parameters (the 4 500 of Hoffmann's own method, which this replaces), no start sits in a
basin that E, A or B chosen apart from the exponents put it in; ``benchmarks/scaling_fit.py --exhaustive`` refines
those 4 500 starts too and prints whether any reaches a lower optimum. The answer is always an L-BFGS-B optimum of
Hoffmann's objective, never a grid point.

Identification: a parameter the points do not pin is named, never given a number that looks measured.
Every fit within ``NEAR`` (relative) of the best objective is an equally good answer; where such answers
differ on a parameter by more than ``SPREAD`` (5 % in E, A or B, 0.01 in an exponent), that parameter is not
identified. Two ways find them: the refined starts that end within ``NEAR`` disagree, or the objective's
curvature at the optimum lets the parameter move that far within ``NEAR`` (``near_widths``; a converged
optimiser stops at one point of a flat valley, so the first alone would miss it) (as β → 0, B/D^β flattens into a constant and E trades
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
# The exponents variable projection searches; E, A and B are solved at each pair.
PROFILE_EXPONENTS = np.round(np.linspace(0.0, 2.5, 51), 10)
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
FLAT_WIDTH = 10.0  # a width (in log E, A, B or an exponent) beyond which "by how much" means nothing


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


def profile(N: np.ndarray, D: np.ndarray, loss: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Variable projection: at every (alpha, beta) of ``PROFILE_EXPONENTS`` squared, the E, A, B ≥ 0 that minimise
    the sum of squared relative residuals (E + A/N^alpha + B/D^beta)/loss − 1, and that sum. Returns ``starts``
    (pairs × 5, in theta's order, with a coefficient solved to 0 floored at a negligible positive value so that its
    log exists) and ``sse`` (pairs), alpha-major.

    Each pair's least squares has 3 unknowns, so its 3 × 3 normal equations are formed for all pairs at once (the
    cross term of the two exponents is one matrix product) and solved on each of the 7 supports; the non-negative
    least-squares optimum is the feasible support solution with the least sum (it is the unconstrained optimum on
    its own support). Columns are scaled to unit norm first: N^-alpha spans many decades across the grid."""
    w = 1.0 / loss
    U = np.exp(-np.multiply.outer(PROFILE_EXPONENTS, np.log(N))) * w  # alpha × points
    V = np.exp(-np.multiply.outer(PROFILE_EXPONENTS, np.log(D))) * w  # beta × points
    k = PROFILE_EXPONENTS.size
    su, sv, s0 = np.sqrt((U**2).sum(1)), np.sqrt((V**2).sum(1)), np.sqrt(w @ w)
    U, V, w0 = U / su[:, None], V / sv[:, None], w / s0
    G = np.empty((k, k, 3, 3))
    G[..., 0, 0] = 1.0
    G[..., 1, 1] = 1.0
    G[..., 2, 2] = 1.0
    G[..., 0, 1] = G[..., 1, 0] = (U @ w0)[:, None]
    G[..., 0, 2] = G[..., 2, 0] = (V @ w0)[None, :]
    G[..., 1, 2] = G[..., 2, 1] = U @ V.T
    r = np.empty((k, k, 3))
    r[..., 0] = w0.sum()
    r[..., 1] = U.sum(1)[:, None]
    r[..., 2] = V.sum(1)[None, :]
    best_sse, best_x = np.full((k, k), float(N.size)), np.zeros((k, k, 3))  # the empty support: every residual −1
    for support in ([0], [1], [2], [0, 1], [0, 2], [1, 2], [0, 1, 2]):
        idx = np.array(support)
        # unit-norm columns: a ridge of 1e-14 leaves a regular system's solution alone and gives a singular one
        # (alpha = 0: N^-alpha is the constant column) a solution of the same fit, where solve alone would fail
        x_s = np.linalg.solve(G[..., idx[:, None], idx] + 1e-14 * np.eye(idx.size), r[..., idx, None])[..., 0]
        sse = N.size - (x_s * r[..., idx]).sum(-1)
        better = (x_s >= 0).all(-1) & (sse < best_sse)
        best_sse = np.where(better, sse, best_sse)
        x = np.zeros((k, k, 3))
        x[..., idx] = x_s
        best_x = np.where(better[..., None], x, best_x)
    coef = best_x / np.stack(np.broadcast_arrays(s0, su[:, None], sv[None, :]), -1)  # back to E, A, B
    # A coefficient solved to 0 starts where its term is 1e-8 of a typical loss: present, but negligible.
    tiny = 1e-8 * np.median(loss)
    typical = np.exp(np.multiply.outer(PROFILE_EXPONENTS, [np.log(N).mean(), np.log(D).mean()]))
    floor = tiny * np.stack(np.broadcast_arrays(1.0, typical[:, None, 0], typical[None, :, 1]), -1)
    alpha, beta = np.meshgrid(PROFILE_EXPONENTS, PROFILE_EXPONENTS, indexing="ij")
    starts = np.concatenate([np.log(np.maximum(coef, floor)), alpha[..., None], beta[..., None]], -1)
    return starts.reshape(-1, 5), np.maximum(best_sse, 0.0).reshape(-1)


def spread_starts(exponents: np.ndarray, sse: np.ndarray, count: int, apart: float = 0.3) -> np.ndarray:
    """Indices of ``count`` exponent pairs to refine: the best of the profile, then the next best that lie at least
    ``apart`` (in alpha or beta) from every pair already taken, then, if the grid runs out, the best of the rest.

    Ten neighbouring pairs of one basin would all refine to one optimum; spread (0.3 is six grid steps: a valley of the
    profile contributes a start every 0.3 along it, not its ten best neighbours), they try the other basins the
    profile shows (a second valley of the exponents, a term dropped at one end of the grid), and where refined
    optima within ``NEAR`` still disagree the parameter is named as not identified (a flat valley a converged
    optimiser crosses to one point is found by ``near_widths`` instead)."""
    order = np.argsort(sse, kind="stable")
    taken: list[int] = []
    for i in order:
        if len(taken) == count:
            break
        if all(np.abs(exponents[i] - exponents[j]).max() >= apart - 1e-9 for j in taken):
            taken.append(int(i))
    rest = [int(i) for i in order if i not in set(taken)]
    return np.array(taken + rest[: count - len(taken)])


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


def near_widths(theta: np.ndarray, log_N: np.ndarray, log_D: np.ndarray, log_loss: np.ndarray) -> np.ndarray:
    """How far each parameter (in theta) can move from the optimum ``theta`` while a fit stays within ``NEAR``
    (relative) of its objective: along theta_i, sqrt(2·NEAR·f·(JᵀJ)⁻¹_ii), with J the Jacobian of the predicted
    log-loss and f = ½Σr² the least-squares objective of the same residuals (Gauss–Newton). The least-squares
    curvature, not Huber's: with δ = 1e-3 most residuals lie in Huber's linear part, whose second derivative is zero,
    so its Hessian is set by the few residuals inside ±δ and says little. A direction of no curvature (a valley the
    residuals do not change along) gives a width beyond any ``SPREAD`` to every parameter that moves along it.
    Unlike the spread of optima refined from different starts, this does not depend on where the optimiser happened
    to stop in a valley. The curvature is taken at the Huber optimum, not the least-squares one (close where Huber
    is), and f grows with the law's misfit, so a law that fits badly has wider widths: what the points pin depends
    on how well the law describes them. A and B are judged at the data's centre (``centred``): the width of log A itself would
    carry alpha's uncertainty times log N (10–23), and hold alpha to a fraction of its own 0.01."""
    e, a, b, alpha, beta = theta
    terms = np.stack([np.full(log_N.size, e), a - alpha * log_N, b - beta * log_D])
    top = terms.max(axis=0)
    weights = np.exp(terms - top)
    share = weights / weights.sum(axis=0)  # d(predicted log-loss)/d(e, a, b): the log-sum-exp's softmax
    r = top + np.log(weights.sum(axis=0)) - log_loss
    # in (e, a', b', alpha, beta), a' = a − alpha·mean(log N): the term is a' − alpha·(log N − mean)
    J = np.stack(
        [share[0], share[1], share[2], -share[1] * (log_N - log_N.mean()), -share[2] * (log_D - log_D.mean())], axis=1
    )
    lam, vec = np.linalg.eigh(J.T @ J)
    floor = 1e-12 * max(lam.max(), 1e-300)  # at or below: a flat direction
    return np.sqrt(2 * NEAR * 0.5 * (r @ r) * (vec**2 / np.maximum(lam, floor)).sum(axis=1))


def centred(thetas: np.ndarray, log_N: np.ndarray, log_D: np.ndarray) -> np.ndarray:
    """Rows of theta with log A and log B taken at the data's centre (a − alpha·mean log N, b − beta·mean log D):
    what the points pin of each term, without its exponent's lever arm out to N = 1 and D = 1."""
    out = np.array(thetas, float, copy=True, ndmin=2)
    out[:, 1] -= out[:, 3] * log_N.mean()
    out[:, 2] -= out[:, 4] * log_D.mean()
    return out


def _not_identified(
    thetas: np.ndarray, best: np.ndarray, spans: tuple[float, float], widths: np.ndarray
) -> dict[str, str]:
    """Which parameters sit at or below zero in ``best`` (an exponent), or are not pinned: the equally good optima
    ``thetas`` (rows in theta, A and B at the data's centre: ``centred``) disagree on them, or a fit within ``NEAR`` of the best moves them by more than
    ``SPREAD`` (``widths``, from the curvature). ``spans`` are the ranges of log N and log D; the derived exponents a
    and b go with alpha and beta."""
    out = {}
    spread = thetas.max(axis=0) - thetas.min(axis=0)
    for name, apart, width, limit, value in zip(LAW_PARAMS, spread, widths, SPREAD, best, strict=True):
        shown = (lambda x: f"a factor of {np.exp(x):.3g}") if name in ("E", "A", "B") else (lambda x: f"{x:.3g}")
        name_at = f"{name} (its term at the data's centre)" if name in ("A", "B") else name
        if name in ("alpha", "beta") and value <= 0:
            out[name] = f"{name} = {value:.3g} ≤ 0: the points show no {'size' if name == 'alpha' else 'data'} effect"
        elif apart > limit:
            out[name] = (
                f"equally good fits (objective within {NEAR:g} of the best) differ in {name_at} by "
                f"{'more than any figure means' if apart > FLAT_WIDTH else shown(apart)}"
            )
        elif width > limit:
            out[name] = (
                f"a fit within {NEAR:g} of the best objective moves {name_at} by "
                f"{'any amount (the objective is flat along it)' if width > FLAT_WIDTH else shown(width)}"
            )
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

    L-BFGS-B starts from the ``refine`` best exponent pairs of the variable projection (``profile``), and from
    ``also_from`` (a law, e.g. the full-data fit when refitting part of the points) too: the best optimum of all of
    them is the fit, so a refit can leave the basin of the law it started beside.
    """
    if not 1 <= refine <= PROFILE_EXPONENTS.size**2:
        raise ValueError(f"refine = {refine}: between 1 and the {PROFILE_EXPONENTS.size**2:,} exponent pairs")
    N, D, loss = check_positive(N, "N"), check_positive(D, "D"), check_positive(loss, "loss")
    if not N.size == D.size == loss.size:
        raise ScalingInputError(f"N, D and loss differ in length: {N.size}, {D.size}, {loss.size}")
    if N.size < 5:
        raise ScalingInputError(f"{N.size} points, fewer than the law's 5 parameters")
    if reason := _unidentified(N, D):
        raise ScalingInputError(reason)
    log_N, log_D, log_loss = np.log(N), np.log(D), np.log(loss)
    pairs, sse = profile(N, D, loss)
    starts = pairs[spread_starts(pairs[:, 3:], sse, refine)]
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
        not_identified=_not_identified(
            centred(near, log_N, log_D),
            r.x,
            (float(np.ptp(log_N)), float(np.ptp(log_D))),
            near_widths(r.x, log_N, log_D, log_loss),
        ),
    )
