"""The Scaling section's figures (matplotlib, headless), each drawn from the scaling product's outputs alone: its
JSON (``scaling.json``) and its tables of the points the law was fitted to and the trials e(N) was: loss against tokens per model size with the fitted law, joules per token against
N, the energy-optimal frontier with its intervals, and iso-energy contours over (N, D). Anything outside the
measured N and D is drawn dashed and labelled as an extrapolation."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import polars as pl  # noqa: E402

from ..analysis.products import product  # noqa: E402
from ..common.measures import si  # noqa: E402
from .figures import placeholder, plain_ticks  # noqa: E402

if TYPE_CHECKING:
    from ..analysis.scaling.energy_per_token import PerToken

EXTRAPOLATED = "dashed: extrapolated beyond the measured N and D"


def _law(law: dict[str, Any], N: np.ndarray | float, D: np.ndarray | float) -> np.ndarray:
    """The law's loss at (N, D), each term as exp(log A − alpha·log N): a degenerate fit (A ~ 1e260 with alpha ~ 60,
    a step at the smallest size, named not identified) has terms a float power overflows on."""
    term = lambda coef, x, exponent: np.exp(np.log(coef) - exponent * np.log(np.asarray(x, float)))  # noqa: E731
    return law["E"] + term(law["A"], N, law["alpha"]) + term(law["B"], D, law["beta"])


def _millions(n: float) -> str:
    return f"{n / 1e6:.3g} M" if n >= 1e5 else f"{n / 1e3:.3g} K"


def _split_line(ax, x: np.ndarray, y: np.ndarray, inside: np.ndarray, **style) -> None:
    """One curve, solid where ``inside`` and dashed elsewhere (each dashed run joined to its solid neighbour)."""
    ax.plot(np.where(inside, x, np.nan), np.where(inside, y, np.nan), **style)
    style = {**style, "label": None, "ls": "--", "alpha": 0.8}
    outside = ~inside
    reach = outside | np.r_[outside[1:], False] | np.r_[False, outside[:-1]]
    ax.plot(np.where(reach, x, np.nan), np.where(reach, y, np.nan), **style)


def loss_vs_tokens(points: pl.DataFrame, law: dict[str, Any]):
    """Observed eval loss against D for each model size, with the fitted L(N, D) through them: solid over the
    tokens measured, dashed a factor of 4 beyond."""
    fig, ax = plt.subplots(figsize=(7.5, 4.8), layout="constrained")
    d_lo, d_hi = law["D_range"]
    D = np.geomspace(d_lo / 4, d_hi * 4, 200)
    for i, ((n,), block) in enumerate(sorted(points.partition_by("params", as_dict=True).items())):
        colour = f"C{i % 10}"
        ax.scatter(block["tokens"], block["eval_loss"], s=10, alpha=0.5, color=colour)
        _split_line(
            ax,
            D,
            _law(law, float(n), D),
            (D >= d_lo) & (D <= d_hi),
            color=colour,
            lw=1.8,
            label=f"N = {_millions(float(n))}",
        )
    ax.axhline(law["E"], color="0.5", lw=0.8, ls=":", label=f"E = {law['E']:.3g} (irreducible loss)")
    ax.set_xscale("log")
    plain_ticks(ax, "x")
    ax.set_xlabel("Tokens trained on, D (log scale)")
    ax.set_ylabel("Eval loss (nats/token)")
    ax.set_title(
        f"Loss against tokens per model size: points and the fitted law (total N)\n{EXTRAPOLATED}", fontsize=10
    )
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    return fig


def _per_token(fit: dict[str, Any], form: str) -> PerToken:
    """The e(N) of one fitted form from scaling.json's entry."""
    # here, not with the module: its fitting code loads scipy (~1 s), which a study without a fitted law never needs
    from ..analysis.scaling.energy_per_token import PerToken

    return PerToken(form, *fit["fits"][form]["params"].values())


def energy_per_token(sized: pl.DataFrame, fits: list[dict[str, Any]], estimated: bool):
    """Joules per token of each trial against N (log–log), per device profile and energy kind: the size means,
    the power law (solid) and the affine form (dashed), the form the data support named in the legend."""
    fig, ax = plt.subplots(figsize=(7.5, 4.8), layout="constrained")
    kinds = {"joules_per_token": ("total", "o"), "dynamic_joules_per_token": ("above idle", "^")}
    for i, fit in enumerate(f for f in fits if f["status"] == "ok"):
        colour = f"C{i % 10}"
        name, marker = kinds[fit["energy"]]
        rows = sized.filter(pl.col("hardware") == fit["hardware"]).drop_nulls(fit["energy"])
        rows = rows.filter(pl.col(fit["energy"]) > 0)
        ax.scatter(rows["params"], rows[fit["energy"]], s=14, alpha=0.4, color=colour, marker=marker)
        power = fit["fits"]["power"]
        lo, hi = power["N_range"]
        N = np.geomspace(lo, hi, 50)
        profile = f"{fit['hardware'].rstrip('/')}, " if fit["hardware"] else ""
        gamma, (g_lo, g_hi) = power["params"]["gamma"], power["ci"]["gamma"]
        chosen = {form: " (chosen)" if fit["chosen"] == form else "" for form in ("power", "affine")}
        ax.plot(
            N,
            _per_token(fit, "power")(N),
            color=colour,
            lw=1.8,
            label=f"{profile}{name}: c·N^γ, γ = {gamma:.3f} [{g_lo:.3f}, {g_hi:.3f}]{chosen['power']}",
        )
        affine = fit["fits"]["affine"]
        slope_lo, slope_hi = affine["local_slope"]
        ax.plot(
            N,
            _per_token(fit, "affine")(N),
            color=colour,
            lw=1.4,
            ls="--",
            label=f"{profile}{name}: e₀ + b·N, local slope {slope_lo:.2f} to {slope_hi:.2f}{chosen['affine']}",
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    plain_ticks(ax, "x", "y")
    ax.set_xlabel("Parameters, N (total, log scale)")
    ax.set_ylabel("Training energy per real token (J, log scale)" + (" — estimated" if estimated else ""))
    ax.set_title(
        "Joules per token against model size: two forms of e(N), fitted to the size means (γ with 95 % CI)"
        + ("\n(power and energy ESTIMATED from CPU utilisation × TDP)" if estimated else ""),
        fontsize=10,
    )
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    return fig


def frontier(alloc: dict[str, Any], flops: dict[str, Any] | None):
    """N*(J), D*(J) and L*(J) of the energy-optimal allocation with their 95 % jackknife intervals; the FLOP-optimal
    split of the same compute beside them; extrapolated budgets dashed."""
    fig, (ax, ax_loss) = plt.subplots(1, 2, figsize=(10, 4.4), layout="constrained")
    J = np.asarray(alloc["budget"], float)
    inside = ~np.asarray(alloc["extrapolated"] if alloc["extrapolated"] is not None else [False] * len(J), bool)
    for key, colour, name in (("N", "C0", "N* (parameters)"), ("D", "C1", "D* (tokens)")):
        _split_line(ax, J, np.asarray(alloc[key], float), inside, color=colour, lw=2, marker="o", ms=4, label=name)
        if alloc.get(f"{key}_band") is not None:
            lo, hi = np.asarray(alloc[f"{key}_band"], float)
            ax.fill_between(J, lo, hi, color=colour, alpha=0.15, lw=0)
        if flops:
            ax.plot(J, flops[key], color=colour, lw=1, ls=":", label=f"{key}* of the FLOP-optimal split")
    ax.set_xscale("log")
    ax.set_yscale("log")
    plain_ticks(ax, "x", "y")
    ax.set_xlabel("Training-energy budget J (joules, log scale)")
    ax.set_ylabel("Optimal N* and D* (log scale)")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    _split_line(ax_loss, J, np.asarray(alloc["loss"], float), inside, color="C2", lw=2, marker="o", ms=4, label="L*(J)")
    if alloc.get("loss_band") is not None:
        lo, hi = np.asarray(alloc["loss_band"], float)
        ax_loss.fill_between(J, lo, hi, color="C2", alpha=0.15, lw=0, label="95 % interval (jackknife over units)")
    ax_loss.set_xscale("log")
    plain_ticks(ax_loss, "x")
    ax_loss.set_xlabel("Training-energy budget J (joules, log scale)")
    ax_loss.set_ylabel("Loss at the optimum (nats/token)")
    ax_loss.grid(alpha=0.3, which="both")
    ax_loss.legend(fontsize=8)
    fig.suptitle(
        f"The energy-optimal allocation on this hardware (bands: 95 % intervals over trial ids and model sizes; {EXTRAPOLATED})",
        fontsize=10,
    )
    return fig


def contours(points: pl.DataFrame, law: dict[str, Any], energy: dict[str, Any], alloc: dict[str, Any]):
    """Loss contours of the fitted law over (N, D), lines of equal training energy e(N)·D = J for the allocation's
    budgets, the measured points, and the frontier through the lines' tangent points; the measured box drawn,
    everything outside it extrapolation."""
    fig, ax = plt.subplots(figsize=(7.5, 5.4), layout="constrained")
    (n_lo, n_hi), (d_lo, d_hi) = law["N_range"], law["D_range"]
    J = np.asarray(alloc["budget"], float)
    N_star, D_star = np.asarray(alloc["N"], float), np.asarray(alloc["D"], float)
    N = np.geomspace(min(n_lo / 4, N_star.min()), max(n_hi * 4, N_star.max()), 160)
    D = np.geomspace(min(d_lo / 4, D_star.min()), max(d_hi * 4, D_star.max()), 160)
    grid_N, grid_D = np.meshgrid(N, D)
    filled = ax.contourf(grid_N, grid_D, _law(law, grid_N, grid_D), levels=14, cmap="viridis_r", alpha=0.85)
    fig.colorbar(filled, ax=ax, label="Fitted loss L(N, D) (nats/token)")
    per_token = _per_token(energy, energy["chosen"])(N)
    for j in J:
        ax.plot(N, j / per_token, color="white", lw=0.7, alpha=0.8)
    ax.plot(N_star, D_star, color="C3", lw=2, marker="o", ms=4, label="energy-optimal (N*, D*) per budget")
    ax.scatter(points["params"], points["tokens"], s=8, color="black", alpha=0.6, label="measured points")
    ax.add_patch(
        plt.Rectangle(
            (n_lo, d_lo),
            n_hi - n_lo,
            d_hi - d_lo,
            fill=False,
            ls="--",
            lw=1.2,
            color="black",
            label="measured range (outside: extrapolated)",
        )
    )
    ax.set_xscale("log")
    ax.set_yscale("log")
    plain_ticks(ax, "x", "y")
    ax.set_xlim(N[0], N[-1])
    ax.set_ylim(D[0], D[-1])
    ax.set_xlabel("Parameters, N (total, log scale)")
    ax.set_ylabel("Tokens, D (log scale)")
    ax.set_title(
        f"Iso-energy lines (white: e(N)·D = J for {len(J)} budgets, {si(float(J[0]), 'J')} to {si(float(J[-1]), 'J')}) "
        "over the law's loss",
        fontsize=10,
    )
    ax.legend(fontsize=8, loc="lower left")
    return fig


def draw(scaling: dict[str, Any], tables: dict[str, pl.DataFrame], estimated: bool) -> dict:
    """The scaling product's figures (its entry in tokenwatt.analysis.products names this function)."""
    return make_scaling(scaling, tables["scaling_points"], tables["scaling_sizes"], estimated)


def make_scaling(scaling: dict[str, Any], points: pl.DataFrame, sized: pl.DataFrame, estimated: bool) -> dict:
    """Every figure of the Scaling section by name; one that cannot be drawn says why."""
    why = scaling.get("message") or "no scaling analysis"
    if scaling.get("status") != "ok":
        return {name: placeholder(name.replace("_", " ").capitalize(), why) for name in product("scaling").figures}
    law, alloc = scaling["law_total"], scaling.get("allocation_energy")
    total = [e for e in scaling["energy_per_token"] if e["energy"] == "joules_per_token" and e["status"] == "ok"]
    no_alloc = scaling.get("allocation_message") or "no energy-optimal allocation: e(N) was not fitted"
    fits = [e for e in scaling["energy_per_token"] if e["status"] == "ok"]
    # A coefficient past the float range is stored as null (JSON has no inf): no law to draw its loss from.
    unbounded = [k for k in ("E", "A", "B", "alpha", "beta") if not isinstance(law.get(k), int | float)]
    no_law = f"the law's {', '.join(unbounded)} not finite: no fitted loss to draw"
    return {
        "scaling_loss": placeholder("Scaling loss", no_law) if unbounded else loss_vs_tokens(points, law),
        "scaling_energy": energy_per_token(sized, fits, estimated)
        if fits
        else placeholder(
            "Scaling energy",
            "e(N) was not fitted: " + "; ".join(e.get("message", "") for e in scaling["energy_per_token"]),
        ),
        "scaling_frontier": frontier(alloc, scaling.get("allocation_flops"))
        if alloc
        else placeholder("Scaling frontier", no_alloc),
        "scaling_contours": placeholder("Scaling contours", no_law)
        if unbounded
        else contours(points, law, total[0], alloc)
        if alloc and len(total) == 1
        else placeholder("Scaling contours", no_alloc),
    }
