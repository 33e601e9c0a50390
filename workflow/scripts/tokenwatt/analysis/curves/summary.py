"""Energy-to-quality curves: what each trial's evaluation points say about joules and quality.

A study's question, "are more tokens worth their energy?", is answered by the curve, not the endpoint:
how much training energy each budget needed to reach the same quality (``targets``: energy to target, the MLPerf
Training Power score), what quality each budget had at the same joules (``equal_energy``: repeat the data or add
new data, Muennighoff et al. 2023), where a joule stopped buying quality (``marginal_gain``: gain per kJ), how the
loss moved between points (``trajectory``: the statistics of arXiv:2606.13370) and what an energy-aware stopping
rule would have saved and cost, replayed on the full runs (``stopping_replay``). This module runs them all on a
study's curves as the curves product; ``runs`` holds the table they read and the conventions they share.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import polars as pl

from ...plan.stopping import stop_rule
from ..frame import full_runs, in_frame
from ..products import Result
from .equal_energy import quality_at_energy, quality_at_energy_comparison, quality_at_energy_summary
from .marginal_gain import gain_falls, gain_falls_summary, marginal_gains
from .stopping_replay import stopping_outcomes
from .targets import (
    energy_to_target,
    energy_to_target_comparisons,
    energy_to_target_level_comparisons,
    energy_to_target_summary,
    targets_from_config,
)
from .trajectory import trajectory


def analyse_curves(
    curves: pl.DataFrame,
    settings: Mapping[str, Any],
    full: pl.DataFrame | None = None,
    cost: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Everything the report shows of the eval curves, machine-readable: energy to each target (``analysis.targets``,
    or per budget a perplexity 4 in 5 of its trials reached), quality at equal energy, where the marginal gain per kJ falls
    below ``analysis.gain_fraction`` of its first value, the trajectory statistics, and each named stopping rule
    (``analysis.stopping``) replayed against the full runs (``full``: those no rule stopped online; every curve
    when not given; ``cost``: the aggregate's cost summary, for CO2e and money to each target). A study without energy
    or with one point per trial says so instead."""
    if curves.height == 0:
        return {"status": "no curves", "message": "No finished trial has an eval curve yet."}
    points = int(curves.group_by("cell", "trial").len()["len"].max())
    out: dict[str, Any] = {"status": "ok", "points_per_trial": points, "trajectory": trajectory(curves).to_dict()}
    if curves["train_energy_j"].null_count() == curves.height:
        return {
            **out,
            "status": "no energy",
            "message": "Energy was not measured (meter none): no energy-to-quality analysis.",
        }
    targets = targets_from_config(settings.get("targets") or None, curves)
    reached = energy_to_target(curves, targets, cost)
    at = quality_at_energy(curves)
    out.update(
        targets=[t.to_dict() for t in targets],
        targets_source="analysis.targets"
        if settings.get("targets")
        else "per budget, the perplexity 4 in 5 of its trials reached by their end (analysis.targets not set)",
        energy_to_target=energy_to_target_summary(reached).to_dicts(),
        currency=(cost or {}).get("currency", ""),
        cost_is_estimate=bool((cost or {}).get("is_estimate", False)),
        energy_to_target_comparisons=[t.to_dict() for t in energy_to_target_comparisons(reached)],
        energy_to_target_level_comparisons=[t.to_dict() for t in energy_to_target_level_comparisons(reached)],
        quality_at_energy=quality_at_energy_summary(at).to_dicts(),
        quality_at_energy_comparison=quality_at_energy_comparison(at).to_dicts(),
        marginal_gains=marginal_gains(curves).to_dicts(),
        gain_falls=gain_falls_summary(gain_falls(curves, settings.get("gain_fraction", 0.1))).to_dicts(),
        gain_fraction=settings.get("gain_fraction", 0.1),
        stopping={
            name: stopping_outcomes(curves if full is None else full, stop_rule(rule), targets).to_dict()
            for name, rule in (settings.get("stopping") or {}).items()
        },
    )
    if points < 2:
        out["message"] = "One evaluation per trial (eval.points: 0): energy to target reads the final points only."
    return out


def curves_product(
    trials: pl.DataFrame, curves: pl.DataFrame, cost: Mapping[str, Any], settings: Mapping[str, Any]
) -> Result:
    """The eval curves product (``settings``: the config's analysis section) on the study's frame of trials."""
    curves = in_frame(curves, trials)
    if "stopped" in trials.columns:  # a run a stopping rule ended online: a target it had not reached, it never will
        ruled = trials.select(
            "cell", pl.col("trial").cast(pl.Int64), pl.col("stopped").fill_null(False).alias("stopped_by_rule")
        )
        curves = curves.with_columns(pl.col("trial").cast(pl.Int64)).join(ruled, on=["cell", "trial"], how="left")
    result = analyse_curves(curves, settings, full_runs(curves, trials), cost)
    return Result(
        data=result,
        summary=f"curves: {result['status']}; {curves.height} points of {curves.select('cell', 'trial').n_unique()} trials",
    )
