"""Energy per token as a function of model size, e(N), fitted where its noise lives: across model sizes.

Each trial measures one joules-per-token figure, but the trials of one size share everything that makes
that size cost what it does (its kernels, its memory traffic, the per-step overhead around them), so a
size's deviation from any smooth e(N) is shared by all its trials. Sixty trials of five sizes are five
independent points about e(N), not sixty: a fit over the trials gives intervals as if the size-level
deviations averaged out, and in simulations with a per-size deviation of sd 0.05 its 95 % interval covered
the true exponent 36 % of the time. Here every size is first reduced to the geometric mean of its trials,
and the fits run on those means with the degrees of freedom of the sizes (t with n_sizes − 2).

Two forms are fitted, both with two parameters and multiplicative error (least squares on log e):

- ``power``: e(N) = c · N^γ, the form the closed-form energy-optimal allocation assumes;
- ``affine``: e(N) = e₀ + b · N, a fixed cost per token (per-step overhead: the optimiser, the launch of
  each kernel, the host's share) plus a part proportional to the parameters. Its local slope
  d log e / d log N = b N / (e₀ + b N) rises from 0 towards 1 with N, which a power law cannot show.

They are compared by AICc on the size means (both have two parameters and the same error model, so the
difference is n · log(RSS₁ / RSS₂)); with fewer than 5 sizes AICc is not defined and the fit with the
smaller residual is taken, said as such. The allocation uses the supported form and the report shows both.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy import optimize
from scipy import stats as sps

from .law import LEVEL, ScalingInputError, check_positive

FORMS = ("power", "affine")
MIN_SIZES = 3
# The largest size over the smallest that e(N) needs: sizes a few per cent apart (model families matched in
# parameters, design.architecture) say nothing about how e grows with N, and a slope through them is their noise
# magnified (a γ of −795 across 0.1 % of N in the tiny study's three families).
MIN_SPAN = 1.5
MIN_SIZES_AICC = 5  # AICc with k = 3 (two parameters and the variance) needs n > k + 1
NO_PREFERENCE = 2.0  # |ΔAICc| below this: the data do not prefer either form (Burnham & Anderson)


@dataclass(frozen=True)
class PerToken:
    """A cost per token as a function of N: ``power`` c·N^p (c = p0, γ = p1), ``affine`` e₀ + b·N (e₀ = p0,
    b = p1). FLOPs per training token are ``PerToken("power", 6.0, 1.0)``."""

    form: str
    p0: float
    p1: float

    def __call__(self, N: ArrayLike) -> np.ndarray:
        N = np.asarray(N, float)
        return self.p0 * N**self.p1 if self.form == "power" else self.p0 + self.p1 * N

    def local_slope(self, N: ArrayLike) -> np.ndarray:
        """d log e / d log N at N: γ everywhere for a power law, b N / (e₀ + b N) for the affine form."""
        N = np.asarray(N, float)
        return np.full(N.shape, self.p1) if self.form == "power" else self.p1 * N / (self.p0 + self.p1 * N)

    @property
    def grows(self) -> bool:
        """Whether a larger model costs more per token: without that there is no energy-optimal size."""
        return self.p1 > 0


FLOPS_PER_TOKEN = PerToken("power", 6.0, 1.0)


@dataclass(frozen=True)
class EnergyFit:
    """One form of e(N) fitted to the size means, with t intervals (df = n_sizes − 2) on the parameters:
    for ``power`` (c, γ), c's from log c's; for ``affine`` (e₀, b) from the Jacobian at the optimum."""

    form: str
    params: dict[str, float]
    se: dict[str, float]
    ci: dict[str, tuple[float, float]]
    rss_log: float
    aicc: float | None
    n_sizes: int
    n_trials: int
    df: int
    N_range: tuple[float, float]
    local_slope: tuple[float, float]

    @property
    def model(self) -> PerToken:
        p0, p1 = self.params.values()
        return PerToken(self.form, p0, p1)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def size_means(N: ArrayLike, joules_per_token: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """The distinct sizes, ascending, and the geometric mean of each one's trials' J/token."""
    N, e = check_positive(N, "N"), check_positive(joules_per_token, "joules_per_token")
    if N.size != e.size:
        raise ScalingInputError(f"N and joules_per_token differ in length: {N.size}, {e.size}")
    sizes, codes = np.unique(N, return_inverse=True)
    if sizes.size < MIN_SIZES:
        raise ScalingInputError(f"{sizes.size} distinct N: e(N) needs at least {MIN_SIZES} model sizes")
    if sizes[-1] < MIN_SPAN * sizes[0]:
        raise ScalingInputError(
            f"the model sizes span {sizes[0]:,.0f} to {sizes[-1]:,.0f} parameters, × {sizes[-1] / sizes[0]:.4g}: "
            f"e(N) needs sizes at least × {MIN_SPAN:g} apart"
        )
    return sizes, np.exp(np.bincount(codes, np.log(e)) / np.bincount(codes))


def _aicc(rss: float, n: int) -> float | None:
    k = 3
    if n < MIN_SIZES_AICC or rss <= 0:  # a perfect fit (RSS 0) has no finite AICc
        return None
    return float(n * np.log(rss / n) + 2 * k + 2 * k * (k + 1) / (n - k - 1))


def _power(x: np.ndarray, y: np.ndarray) -> tuple[dict[str, float], dict[str, float], float]:
    """Least squares of log e on log N: (c, γ), their SEs (c's by the delta method), the RSS."""
    xm = x.mean()
    sxx = float(((x - xm) ** 2).sum())
    gamma = float((x - xm) @ (y - y.mean()) / sxx)
    log_c = float(y.mean() - gamma * xm)
    rss = float(((y - log_c - gamma * x) ** 2).sum())
    s2 = rss / (x.size - 2) if x.size > 2 else float("nan")
    se_gamma, se_log_c = np.sqrt(s2 / sxx), np.sqrt(s2 * (1 / x.size + xm**2 / sxx))
    return {"c": np.exp(log_c), "gamma": gamma}, {"log_c": float(se_log_c), "gamma": float(se_gamma)}, rss


def _affine(N: np.ndarray, y: np.ndarray) -> tuple[dict[str, float], dict[str, float], float]:
    """Least squares of log e on log(e₀ + b N), e₀ ≥ 0 and b ≥ 0, in units of the data's scale so that both
    parameters are of order one; SEs from the Jacobian at the optimum (s² (JᵀJ)⁻¹)."""
    e_scale, n_scale = float(np.exp(y.mean())), float(N.mean())
    u, v = N / n_scale, np.exp(y) / e_scale

    def resid(p: np.ndarray) -> np.ndarray:
        return np.log(np.maximum(p[0] + p[1] * u, 1e-300)) - np.log(v)

    slope, intercept = np.polyfit(u, v, 1)
    start = np.array([max(intercept, 1e-3), max(slope, 1e-3)])
    r = optimize.least_squares(resid, start, bounds=([0.0, 0.0], [np.inf, np.inf]), xtol=1e-14, ftol=1e-14)
    rss = float((r.fun**2).sum())
    s2 = rss / (N.size - 2) if N.size > 2 else float("nan")
    cov = s2 * np.linalg.pinv(r.jac.T @ r.jac)
    se = np.sqrt(np.maximum(np.diag(cov), 0.0))  # pinv of a near-singular JᵀJ can leave a tiny negative
    params = {"e0": float(r.x[0] * e_scale), "b": float(r.x[1] * e_scale / n_scale)}
    return params, {"e0": float(se[0] * e_scale), "b": float(se[1] * e_scale / n_scale)}, rss


def fit_energy(N: ArrayLike, joules_per_token: ArrayLike, form: str = "power") -> EnergyFit:
    """Fit e(N) of ``form`` to one J/token per trial, through the geometric mean of each size."""
    n_trials = int(np.size(N))
    sizes, means = size_means(N, joules_per_token)
    x, y = np.log(sizes), np.log(means)
    df = sizes.size - 2
    t = float(sps.t.ppf(0.5 + LEVEL / 2, df))
    if form == "power":
        params, se, rss = _power(x, y)
        ci = {
            "c": (
                float(np.exp(np.log(params["c"]) - t * se["log_c"])),
                float(np.exp(np.log(params["c"]) + t * se["log_c"])),
            ),
            "gamma": (params["gamma"] - t * se["gamma"], params["gamma"] + t * se["gamma"]),
        }
        se = {"c": params["c"] * se["log_c"], "gamma": se["gamma"]}
    elif form == "affine":
        params, se, rss = _affine(sizes, y)
        ci = {k: (params[k] - t * se[k], params[k] + t * se[k]) for k in params}
    else:
        raise ValueError(f"e(N) form {form!r}: one of {', '.join(FORMS)}")
    model = PerToken(form, *params.values())
    ends = model.local_slope([sizes[0], sizes[-1]])
    return EnergyFit(
        form,
        {k: float(v) for k, v in params.items()},
        se,
        ci,
        rss,
        _aicc(rss, sizes.size),
        int(sizes.size),
        n_trials,
        df,
        (float(sizes[0]), float(sizes[-1])),
        (float(ends[0]), float(ends[1])),
    )


@dataclass(frozen=True)
class EnergyChoice:
    """Both forms of e(N), and the one the data support (``chosen``), with why."""

    fits: dict[str, EnergyFit]
    chosen: str
    delta_aicc: float | None
    reason: str

    @property
    def model(self) -> PerToken:
        return self.fits[self.chosen].model

    def to_dict(self) -> dict[str, Any]:
        return {
            "fits": {k: f.to_dict() for k, f in self.fits.items()},
            "chosen": self.chosen,
            "delta_aicc": self.delta_aicc,
            "reason": self.reason,
        }


def choose_energy(N: ArrayLike, joules_per_token: ArrayLike) -> EnergyChoice:
    """Fit both forms and choose by AICc (the smaller RSS where AICc is not defined)."""
    fits = {form: fit_energy(N, joules_per_token, form) for form in FORMS}
    power, affine = fits["power"], fits["affine"]
    chosen = "power" if power.rss_log <= affine.rss_log else "affine"
    other = "affine" if chosen == "power" else "power"
    if power.aicc is None or affine.aicc is None:
        why = (
            f"{power.n_sizes} sizes are too few for AICc (it needs {MIN_SIZES_AICC})"
            if power.n_sizes < MIN_SIZES_AICC
            else f"the {chosen} form fits the size means exactly, so AICc is not finite"
        )
        return EnergyChoice(
            fits,
            chosen,
            None,
            f"{why}; the {chosen} form has the smaller residual on the size means, which is not evidence against the "
            "other",
        )
    delta = float(fits[other].aicc - fits[chosen].aicc)
    weight = 1 / (1 + np.exp(-delta / 2))
    verdict = (
        "the data do not distinguish the two forms" if delta < NO_PREFERENCE else f"the data support the {chosen} form"
    )
    return EnergyChoice(
        fits,
        chosen,
        delta,
        f"AICc on the {power.n_sizes} size means: the {other} form's is higher by {delta:.2f} (Akaike weight of "
        f"the {chosen} form {weight:.2f}); {verdict}",
    )
