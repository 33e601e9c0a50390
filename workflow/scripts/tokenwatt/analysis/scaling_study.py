"""The scaling analysis of a study: its trials and eval curves turned into points, the law L(N, D) fitted for
both counts of N, joules per token as a function of N per device profile (hardware level and precision: what a
token costs depends on both), and the energy- and FLOP-optimal
allocations. Every number comes from ``analysis.scaling``; this module only chooses the points.

N is data, never guessed from a level's name: each trial records its parameter count and embedding size.
Kaplan et al. counted non-embedding parameters and Hoffmann et al. total ones (Pearce & Song 2024 traced much of
their disagreement to that choice); at tokenwatt's sizes embeddings are a large share of N, so both are fitted and
reported; the allocation uses total N (what the device multiplies, and what e(N) is measured against).

Which points enter (``scaling.points``): ``first_epoch`` (default) — the eval points within each trial's first
epoch, where D counts distinct tokens as the law assumes (repeated tokens are worth less than new ones:
Muennighoff et al. 2023); ``final`` — one point per trial, D its total tokens, repeats included; ``all`` — every
point, repeats included.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import polars as pl

from .scaling import PUBLISHED, ScalingInputError, allocate_energy, allocate_flops, bootstrap, fit_energy, fit_law

N_COUNTS = {"total": "params", "non_embedding": "non_embedding_params"}


def sizes(trials: pl.DataFrame) -> pl.DataFrame:
    """Per trial: N counted both ways (a head tied to the embedding is one matrix; untied, the head is a second
    vocabulary-sized one, also excluded from the non-embedding count) and joules per real token."""
    tied = pl.col("tied_embeddings").fill_null(False) if "tied_embeddings" in trials.columns else pl.lit(False)
    return trials.select(
        "cell",
        pl.col("trial").cast(pl.Int64),
        "series",
        "budget",
        "params",
        "real_tokens",
        (pl.col("params") - pl.col("embedding_params") * pl.when(tied).then(1).otherwise(2)).alias(
            "non_embedding_params"
        ),
        (pl.col("energy_j") / pl.col("real_tokens")).alias("joules_per_token"),
        (pl.col("dynamic_energy_j") / pl.col("real_tokens")).alias("dynamic_joules_per_token")
        if "dynamic_energy_j" in trials.columns
        else pl.lit(None, pl.Float64).alias("dynamic_joules_per_token"),
        (pl.col("device_profile") if "device_profile" in trials.columns else pl.lit("")).alias("hardware"),
    )


def points(curves: pl.DataFrame, trials: pl.DataFrame, which: str) -> pl.DataFrame:
    """The (N, D, loss) points of the frame's trials, with their subject (the trial), chosen by ``scaling.points``."""
    joined = curves.with_columns(pl.col("trial").cast(pl.Int64)).join(
        sizes(trials), on=["cell", "trial"], how="inner", suffix="_trial"
    )
    if which == "final":
        joined = joined.filter(pl.col("final"))
    elif which == "first_epoch":
        joined = joined.filter(pl.col("real_tokens") <= pl.col("distinct_tokens"))
    return joined.filter(pl.col("real_tokens") > 0).select(
        "cell", "trial", "params", "non_embedding_params", pl.col("real_tokens").alias("tokens"), "eval_loss"
    )


def _finite(summary: dict[str, dict[str, float]]) -> dict[str, dict[str, float | None]]:
    """A bootstrap summary with None where too few resamples converged to give a number (JSON has no NaN)."""
    return {k: {s: (v if v == v else None) for s, v in row.items()} for k, row in summary.items()}


def _energy_fits(sized: pl.DataFrame) -> list[dict[str, Any]]:
    out = []
    for (hardware,), block in sized.partition_by("hardware", as_dict=True, maintain_order=True).items():
        for kind in ("joules_per_token", "dynamic_joules_per_token"):
            rows = block.drop_nulls(kind).filter(pl.col(kind) > 0)
            left_out = block.height - rows.height
            try:
                fit = fit_energy(rows["params"].to_numpy(), rows[kind].to_numpy()).to_dict()
                out.append({"hardware": hardware, "energy": kind, "status": "ok", "left_out": left_out, **fit})
            except ScalingInputError as err:
                out.append(
                    {
                        "hardware": hardware,
                        "energy": kind,
                        "status": "not fitted",
                        "message": str(err),
                        "left_out": left_out,
                    }
                )
    return out


def analyse_scaling(curves: pl.DataFrame, trials: pl.DataFrame, settings: Mapping[str, Any]) -> dict[str, Any]:
    """The study's scaling analysis, or why it cannot be made (it needs 3 model sizes and 3 budgets)."""
    n_sizes = trials["params"].n_unique() if trials.height else 0
    n_budgets = trials["budget"].n_unique() if trials.height else 0
    out: dict[str, Any] = {
        "points": settings.get("points", "first_epoch"),
        "model_sizes": n_sizes,
        "budgets": n_budgets,
        "published": [p.to_dict() for p in PUBLISHED],
    }
    if n_sizes < 3 or n_budgets < 3:
        return {
            **out,
            "status": "not fitted",
            "message": f"A scaling law needs at least 3 model sizes and 3 budgets; this study has {n_sizes} and {n_budgets}.",
        }
    chosen = points(curves, trials, out["points"])
    if chosen.height == 0:
        return {
            **out,
            "status": "not fitted",
            "message": f"No eval point is left for scaling.points: {out['points']} (with several "
            "epochs and eval.points 0 there is no point within the first epoch: set eval.points, or scaling.points: final).",
        }
    try:
        return {**out, **_fits(chosen, sizes(trials), trials, settings)}
    except ScalingInputError as err:
        return {**out, "status": "not fitted", "message": f"The law cannot be fitted to these points: {err}"}


def _fits(
    chosen: pl.DataFrame, sized: pl.DataFrame, trials: pl.DataFrame, settings: Mapping[str, Any]
) -> dict[str, Any]:
    out: dict[str, Any] = {"energy_per_token": _energy_fits(sized)}
    total = [e for e in out["energy_per_token"] if e["energy"] == "joules_per_token" and e["status"] == "ok"]
    # The allocation and its bands use one device profile's e(N): with several profiles of which one was fitted,
    # that profile's trials only (pooling devices would mix what a token costs on each).
    sized = sized.filter(pl.col("hardware") == total[0]["hardware"]) if len(total) == 1 else sized
    boot_n, seed = settings.get("bootstrap", 1000), settings.get("seed", 0)
    laws = {}
    for count, column in N_COUNTS.items():
        N, D, L = (chosen[c].to_numpy().astype(float) for c in (column, "tokens", "eval_loss"))
        fit = fit_law(N, D, L)
        energy = None
        if count == "total" and sized["joules_per_token"].drop_nulls().len() >= 3:
            e = sized.drop_nulls("joules_per_token")
            energy = (e["params"].to_numpy().astype(float), e["joules_per_token"].to_numpy(), e["trial"].to_numpy())
        boot = bootstrap(N, D, L, chosen["trial"].to_numpy(), fit=fit, energy=energy, n_resamples=boot_n, seed=seed)
        laws[count] = {"fit": fit, "boot": boot}
        out[f"law_{count}"] = {
            **fit.to_dict(),
            "bootstrap": _finite(boot.summary()),
            "n_resamples": boot.n_resamples,
            "n_converged": boot.n_converged,
            "n_skipped": boot.n_skipped,
            "n_points": int(N.size),
        }
    if len(total) > 1:
        out["allocation_message"] = (
            "Several device profiles (hardware levels or precisions): e(N) is fitted per profile above; "
            "the energy-optimal allocation needs one device's e(N), so run it per profile."
        )
    elif total:
        law, boot = laws["total"]["fit"], laws["total"]["boot"]
        # The budgets span the fitted profile's own trials (another profile's energies say nothing of this one's).
        if len(total) == 1 and "device_profile" in trials.columns:
            trials = trials.filter(pl.col("device_profile") == total[0]["hardware"])
            out["allocation_profile"] = total[0]["hardware"]
        measured = trials["energy_j"].drop_nulls()
        budgets = np.asarray(
            settings.get("energy_budgets") or np.geomspace(measured.min() / 10, measured.max() * 10, 9)
        )
        e = sized.drop_nulls("joules_per_token").filter(pl.col("joules_per_token") > 0)
        energy = fit_energy(e["params"].to_numpy(), e["joules_per_token"].to_numpy())
        try:
            out["allocation_energy"] = allocate_energy(law, energy, budgets, boot=boot).to_dict()
            flops = 6.0 * np.asarray(out["allocation_energy"]["N"]) * np.asarray(out["allocation_energy"]["D"])
            out["allocation_flops"] = allocate_flops(law, flops, boot=boot).to_dict()
        except ValueError as err:  # a fitted exponent ≤ 0: the law has no finite optimum to allocate by
            out.pop("allocation_energy", None)
            out["allocation_message"] = (
                f"No allocation: {err}. The points do not pin the law down (too few model sizes or "
                "budgets, or too narrow a range of them); the estimates above show which exponent."
            )
    out["status"] = "ok"
    return out
