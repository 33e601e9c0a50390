"""The allocation a law implies: for each budget, the (N*, D*) that minimise L(N, D) subject to e(N) · D = budget.

For an energy budget J, e(N) is joules per token (``energy_per_token``); for a compute budget C, e(N) = 6N
FLOPs per token. Along the budget D = J / e(N), and in u = log N

    L(u) = E + A e^(−αu) + B J^(−β) e(e^u)^β.

The first term is convex in u; so is the second for both forms of e(N) (log e is linear in u for a power law,
and log(e₀ + b e^u) is convex), and the exponential of a convex function is convex: L has one minimum when
α, β > 0 and e grows with N, and none otherwise (a larger model then costs no more per token and L falls
without limit in N). It is found on a grid of u (N from 1 to 10¹⁶) and refined by Brent's root search for dL/du = 0
between the grid neighbours of the best point (a root, not a minimum, because the loss is flat at its
minimum and a search on it stops at ~1e-7 relative in N). For a power law the closed form of ``scaling``'s docstring gives the
same N* (the tests hold the two to each other).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy import optimize

from .energy_per_token import PerToken
from .law import Law, check_positive

U_GRID = np.linspace(0.0, np.log(1e16), 1601)


def _loss_along(law: Law, cost: PerToken, budget: float, u: np.ndarray) -> np.ndarray:
    N = np.exp(u)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        return law.A * np.exp(-law.alpha * u) + law.B * (cost(N) / budget) ** law.beta


def _slope_along(law: Law, cost: PerToken, budget: float, u: float) -> float:
    """dL/du along the budget: −αA e^(−αu) + βB (e/J)^β · d log e / d log N."""
    N = np.exp(u)
    return float(
        -law.alpha * law.A * np.exp(-law.alpha * u)
        + law.beta * law.B * (cost(N) / budget) ** law.beta * cost.local_slope(N)
    )


def optimum(law: Law, cost: PerToken, budget: float) -> tuple[float, float, float]:
    """(N*, D*, L*) for one budget, or NaNs where the law has no finite optimum along it."""
    if not (law.alpha > 0 and law.beta > 0 and cost.grows):
        return np.nan, np.nan, np.nan
    values = _loss_along(law, cost, budget, U_GRID)
    i = int(np.nanargmin(values))
    if i in (0, U_GRID.size - 1):  # the minimum is not inside the grid's range of sizes: none that is finite
        return np.nan, np.nan, np.nan
    u = optimize.brentq(lambda u: _slope_along(law, cost, budget, u), U_GRID[i - 1], U_GRID[i + 1], xtol=1e-14)
    N = float(np.exp(u))
    D = float(budget / cost(N))
    return N, D, float(law.loss(N, D))


@dataclass(frozen=True, eq=False)
class Allocation:
    """N*, D*, L* per budget (``constraint``: energy in J, or flops), and which budgets lie outside the measured
    N or D (``extrapolated``; None for a law without measured ranges)."""

    constraint: str
    budget: np.ndarray
    N: np.ndarray
    D: np.ndarray
    loss: np.ndarray
    extrapolated: np.ndarray | None

    @property
    def tokens_per_parameter(self) -> np.ndarray:
        return self.D / self.N

    def to_dict(self) -> dict[str, Any]:
        """JSON's form: a budget without an optimum holds null, never NaN."""

        def values(x: np.ndarray) -> list[float | None]:
            return [float(v) if np.isfinite(v) else None for v in x]

        return {
            "constraint": self.constraint,
            "budget": values(self.budget),
            "N": values(self.N),
            "D": values(self.D),
            "loss": values(self.loss),
            "extrapolated": None if self.extrapolated is None else self.extrapolated.tolist(),
            "tokens_per_parameter": values(self.tokens_per_parameter),
        }


def allocate(
    law: Law,
    cost: PerToken,
    budgets: ArrayLike,
    constraint: str = "energy",
    ranges: tuple[tuple[float, float], tuple[float, float]] | None = None,
) -> Allocation:
    """The optimum for each budget (NaN where there is none); ``ranges`` ((N lo, hi), (D lo, hi)) marks
    extrapolations."""
    budget = check_positive(np.atleast_1d(np.asarray(budgets, float)), "budget")
    N, D, L = (np.array(v) for v in zip(*(optimum(law, cost, float(b)) for b in budget), strict=True))
    extrapolated = None
    if ranges:
        (n_lo, n_hi), (d_lo, d_hi) = ranges
        extrapolated = (N < n_lo) | (N > n_hi) | (D < d_lo) | (D > d_hi)
    return Allocation(constraint, budget, N, D, L, extrapolated)
