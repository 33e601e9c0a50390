"""The energy- and FLOP-optimal allocations a study's fitted law implies, with jackknife intervals: the device
profile whose e(N) they use, the energy budgets they are computed at, whether the law can carry a verdict, and, per
budget, whether the energy-optimal size differs from the FLOP-optimal one (judged only inside the trials' measured
energies).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import polars as pl

from .allocation import allocate
from .energy_per_token import FLOPS_PER_TOKEN, EnergyChoice, choose_energy
from .law import Law, LawFit, ScalingInputError
from .units import Jackknife, LawUncertainty, stack, without

# A unit's points, sizes and chosen rates with the learning rate chosen again without it (study.analyse_scaling).
Retuned = Callable[[str, Any], tuple[pl.DataFrame, pl.DataFrame, list[dict[str, Any]]]]


def allocation(
    fits: Mapping[str, Any],
    fitted: tuple[LawFit, LawUncertainty],
    sized: pl.DataFrame,
    trials: pl.DataFrame,
    settings: Mapping[str, Any],
    retuned: Retuned | None,
) -> dict[str, Any]:
    """The allocation's entries of the scaling result, or the sentence that says why there is none. ``fits``: the
    result so far (its e(N) fits and the total-N law's lack of fit); ``fitted``: the total-N law and its uncertainty."""
    law, uncertainty = fitted
    total = [e for e in fits["energy_per_token"] if e["energy"] == "joules_per_token" and e["status"] == "ok"]
    if len(total) > 1:
        return {
            "allocation_message": "Several device profiles (hardware levels or precisions): e(N) is fitted per "
            "profile above; the energy-optimal allocation needs one device's e(N), so run it per profile."
        }
    if unpinned := [k for k in ("alpha", "beta") if k in law.not_identified]:
        return {
            "allocation_message": "No allocation: "
            + "; ".join(f"{k} is not identified ({law.not_identified[k]})" for k in unpinned)
            + ". An allocation, and whether it differs from the FLOP-optimal one, would rest on it."
        }
    if not total:
        return {}
    got: dict[str, Any] = {}
    profile = total[0]["hardware"]
    # The allocation, its budgets and its intervals use this profile's trials only (pooling devices would mix what a
    # token costs on each).
    sized = (
        sized.filter(pl.col("hardware") == profile)
        .drop_nulls("joules_per_token")
        .filter(pl.col("joules_per_token") > 0)
    )
    if "device_profile" in trials.columns:
        trials = trials.filter(pl.col("device_profile") == profile)
        got["allocation_profile"] = profile
    measured = trials["energy_j"].drop_nulls()
    budgets = np.asarray(
        settings.get("energy_budgets") or np.geomspace(measured.min() / 10, measured.max() * 10, 9), float
    )
    doubt = (
        "the law is rejected by its lack-of-fit screen"
        if fits["law_total"]["lack_of_fit"]["fits"] is False
        else f"{', '.join(law.not_identified)} not identified"
        if law.not_identified
        else None
    )
    resized = (lambda d, u: retuned(d, u)[1].filter(pl.col("hardware") == profile)) if retuned else None
    span = (float(measured.min()), float(measured.max()))
    return got | _allocations(law, uncertainty, sized, budgets, span, doubt, resized)


# The allocation's quantities per budget, in the order of ``_allocation_row``; all positive, intervals on log scale.
ALLOCATION_QUANTITIES = ("N", "D", "loss", "flops_N", "flops_D", "ratio_N")


def _allocation_row(law: Law, energy: EnergyChoice, budgets: np.ndarray) -> np.ndarray:
    """Per budget: the energy-optimal N*, D*, L*, the FLOP-optimal N*, D* of the same FLOPs (6 N* D*), and the
    ratio of the two N*; NaN where there is no optimum."""
    e = allocate(law, energy.model, budgets)
    f = allocate(law, FLOPS_PER_TOKEN, np.where(np.isfinite(e.N), 6 * e.N * e.D, 1.0), "flops")
    f_N, f_D = (np.where(np.isfinite(e.N), v, np.nan) for v in (f.N, f.D))
    return np.concatenate([e.N, e.D, e.loss, f_N, f_D, e.N / f_N])


def _allocations(
    law: LawFit,
    uncertainty: LawUncertainty,
    sized: pl.DataFrame,
    budgets: np.ndarray,
    measured: tuple[float, float],
    doubt: str | None,
    resized: Callable[[str, Any], pl.DataFrame] | None = None,
) -> dict[str, Any]:
    """The energy- and FLOP-optimal allocations with jackknife intervals: each left-out unit refits the law
    (done already) and e(N) (the chosen form) on what is left, and allocates again. Whether the two differ is
    judged only where it was measured (``_energy_vs_flops``: ``measured``, the trials' energy range; ``doubt``, why
    the law itself cannot carry a verdict, if it cannot; ``resized``: a unit's sizes with the rates chosen again)."""
    energy = choose_energy(sized["params"].to_numpy(), sized["joules_per_token"].to_numpy())
    ranges = (
        (max(law.N_range[0], energy.fits["power"].N_range[0]), min(law.N_range[1], energy.fits["power"].N_range[1])),
        law.D_range,
    )
    point = allocate(law, energy.model, budgets, "energy", ranges)
    if np.isnan(point.N).any():
        return {
            "allocation_message": (
                "No allocation: the law has no finite energy-optimal size (it needs alpha and beta > 0 and an e(N) that "
                f"grows with N; alpha = {law.alpha:.3g}, beta = {law.beta:.3g}, e(N) {energy.chosen}). The points do "
                "not pin the law down (too few model sizes or budgets, or too narrow a range of them); the estimates "
                "above show which exponent."
            )
        }
    names = tuple(f"{q}[{j}]" for q in ALLOCATION_QUANTITIES for j in range(budgets.size))
    replicates = {}
    for d, refits in uncertainty.refits.items():
        rows = []
        for u, refit in refits:
            kept = resized(d, u) if resized else without(sized, d, u)
            kept = kept.drop_nulls("joules_per_token").filter(pl.col("joules_per_token") > 0)
            try:
                e = choose_energy(kept["params"].to_numpy(), kept["joules_per_token"].to_numpy())
            except ScalingInputError:
                e = None
            rows.append(None if refit is None or e is None else _allocation_row(refit, _same_form(e, energy), budgets))
        replicates[d] = rows
    jack = (
        stack(names, _allocation_row(law, energy, budgets), np.ones(len(names), bool), replicates)
        if replicates
        else None
    )
    flops = allocate(law, FLOPS_PER_TOKEN, 6 * point.N * point.D, "flops", (law.N_range, law.D_range))
    return {
        "energy_model": {"chosen": energy.chosen, "reason": energy.reason},
        "allocation_energy": {**point.to_dict(), **_bands(jack, budgets.size, ("N", "D", "loss"))},
        "allocation_flops": flops.to_dict(),
        "energy_vs_flops": _energy_vs_flops(jack, point, flops, measured, doubt),
    }


def _same_form(refit: EnergyChoice, full: EnergyChoice) -> EnergyChoice:
    """A refit's e(N) in the form the full data chose (a replicate must not switch model)."""
    return EnergyChoice(refit.fits, full.chosen, refit.delta_aicc, refit.reason)


def _bands(jack: Jackknife | None, n: int, quantities: tuple[str, ...]) -> dict[str, Any]:
    """Per quantity its interval bounds per budget ([low, high] lists, None where a refit had no optimum), and
    why any is missing."""
    if jack is None:
        return {f"{q}_band": None for q in quantities} | {"band_note": "no intervals (see the law's units)"}
    out: dict[str, Any] = {}
    notes = set()
    for q in quantities:
        got = [jack.interval(ALLOCATION_QUANTITIES.index(q) * n + j) for j in range(n)]
        out[f"{q}_band"] = [[g["ci_low"] for g in got], [g["ci_high"] for g in got]]
        notes |= {g["why"] for g in got if g["why"]}
    out["band_note"] = "; ".join(sorted(notes)) or None
    return out


def _energy_vs_flops(
    jack: Jackknife | None, energy: Any, flops: Any, measured: tuple[float, float], doubt: str | None
) -> list[dict[str, Any]]:
    """Per budget: the energy-optimal N* over the FLOP-optimal N* of the same FLOPs, with its interval, and
    whether the interval excludes 1 (the two splits differ on this hardware). Judged only at a budget inside the
    trials' measured energies (``not_judged`` says why not), and nowhere when the law is rejected or not identified
    (``doubt``); ``extrapolated``: an optimum lies beyond the measured sizes or tokens (the law's form carries it)."""
    n = energy.budget.size
    rows = []
    for j in range(n):
        iv = (
            jack.interval(ALLOCATION_QUANTITIES.index("ratio_N") * n + j) if jack else {"ci_low": None, "ci_high": None}
        )
        lo, hi = iv["ci_low"], iv["ci_high"]
        budget = float(energy.budget[j])
        why = (
            doubt
            or (
                f"the budget lies outside the trials' measured energies ({measured[0]:.3g}–{measured[1]:.3g} J)"
                if not measured[0] <= budget <= measured[1]
                else None
            )
            or ("no interval" if lo is None else None)
        )
        rows.append(
            {
                "budget_j": float(energy.budget[j]),
                "flops": float(flops.budget[j]),
                "ratio_N": float(energy.N[j] / flops.N[j]) if np.isfinite(flops.N[j]) else None,
                "ci_low": lo,
                "ci_high": hi,
                "tokens_per_parameter_energy": float(energy.D[j] / energy.N[j]),
                "tokens_per_parameter_flops": float(flops.D[j] / flops.N[j]) if np.isfinite(flops.N[j]) else None,
                "differs": None if why else bool(lo > 1 or hi < 1),
                "not_judged": why,
                "extrapolated": any(a.extrapolated is not None and bool(a.extrapolated[j]) for a in (energy, flops)),
            }
        )
    return rows
