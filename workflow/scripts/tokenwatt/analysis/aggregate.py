"""Per-trial table (measured, derived, quality verdict), with missing trials named."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import polars as pl

from ..plan.cost import energy_cost, trial_cost
from ..plan.design import cell_label, profile_key_of, series_of
from .efficiency import derived_metrics, finite
from .quality import assess, diagnose
from .totals import study_totals


def cs_tflops_of(metric: dict[str, Any], profile: dict[str, Any] | None) -> tuple[float | None, str]:
    """The study's CS_TFLOPS and where it came from: the device profile's median, or the configured number."""
    if metric["cs_tflops"] == "measure" and profile is None:
        return None, "not measured yet: the device profile has not run"
    if metric["cs_tflops"] == "measure":
        return profile["cs_tflops"], (
            f"measured: device profile, median of {profile['windows']} windows "
            f"(IQR {profile['iqr_tflops']:.3g} TFLOP/s), {profile['dtype']} on {profile['device_name']}"
        )
    return float(metric["cs_tflops"]), "configured (metric.cs_tflops)"


def cost_summary(
    trials: pl.DataFrame,
    cost: dict[str, Any],
    intensity: tuple[float | None, str],
    stretches: Iterable[dict[str, Any]] = (),
) -> dict[str, Any]:
    """The study's totals of energy, CO2 and money, with the settings and where the carbon intensity came from:
    ``total_*``, what its training used, and ``spent_*``, that plus the work lost to resumes and the checkpoint
    saves; each stable run once (its ``stretches``' records, training/stretch.py), each trial on its devices."""
    totals = study_totals(trials, stretches) if trials.height else None
    got = totals.values if totals else dict.fromkeys(("energy_j", "train_s", "device_s", *SPENT_BESIDE))
    why = totals.missing if totals else dict.fromkeys(got, "no finished trial")
    used = energy_cost(got["energy_j"], got["device_s"], cost, intensity[0])
    # spent: the same device time (a trial's run_s already holds its checkpoint saves), more energy
    beside = [got[k] for k in SPENT_BESIDE]
    spent_j = None if got["energy_j"] is None or None in beside else got["energy_j"] + sum(beside)
    spent = energy_cost(spent_j, got["device_s"], cost, intensity[0])
    return {
        "carbon_intensity_g_per_kwh": intensity[0],
        "carbon_intensity_source": intensity[1],
        "pue": cost["pue"],
        "currency": cost["currency"],
        "electricity_price_per_kwh": cost["electricity_price_per_kwh"],
        "device_hour_price": cost["device_hour_price"],
        "trials": trials.height,
        "is_estimate": bool(trials["cost_is_estimate"].any()) if "cost_is_estimate" in trials.columns else False,
        "total_energy_j": got["energy_j"],
        "total_train_s": got["train_s"],
        "total_device_s": got["device_s"],
        "totals_missing": _first(why, ("energy_j", "device_s")),
        # what the trials' records, each branched trial holding its stable run to its point, count more than once
        "branch_shared_energy_j": shared_by_branches(trials, "branch_stable_energy_j"),
        "stable_runs": totals.stable_runs if totals else 0,
        "stable_energy_j": totals.stable.get("energy_j") if totals else 0.0,
        "stable_from": totals.stable_from if totals else None,
        **{f"total_{c}": used[c] for c in COSTS},
        **{k: got[k] for k in SPENT_BESIDE},
        "spent_energy_j": spent_j,
        **{f"spent_{c}": spent[c] for c in COSTS},
        "spent_missing": _first(why, ("energy_j", *SPENT_BESIDE)),
        # The evaluations' own energy, metered beside the training energy and never in it (nor in the totals above).
        **_eval_costs(_column_total(trials, "eval_energy_j"), cost, intensity[0]),
    }


# What the study spent beside its training: work lost to resumes and done again, and the checkpoint saves.
SPENT_BESIDE = ("lost_energy_j", "checkpoint_energy_j")
COSTS = ("kwh", "kg_co2e", "electricity_cost", "device_cost", "total_cost")


def _first(why: dict[str, str], names: tuple[str, ...]) -> str | None:
    """Why the first of ``names`` that has no total has none; None where every one has its total."""
    return next((why[name] for name in names if name in why), None)


def _column_total(trials: pl.DataFrame, column: str) -> float | None:
    """A column's total over every trial or None: a sum that silently skipped the trials without a figure would be
    too low."""
    known = column in trials.columns and trials.height and trials[column].null_count() == 0
    return float(trials[column].sum()) if known else None


def shared_by_branches(trials: pl.DataFrame, column: str) -> float:
    """A stable run's ``column`` (its energy or its processes' seconds) that the trials branched from it count more than
    once: the sum over trials less the largest per run (a trial id and its levels but the budget; the largest point
    passed through every smaller one). 0 without branches. (The study's totals count each run once from its stretch
    records instead: analysis/totals.py.)"""
    if column not in trials.columns or trials[column].drop_nulls().len() == 0:
        return 0.0
    largest = float(trials.group_by("series", "trial").agg(pl.col(column).max())[column].sum())
    return float(trials[column].sum()) - largest


def _eval_costs(joules: float | None, cost: dict[str, Any], intensity_g_per_kwh: float | None) -> dict[str, Any]:
    kwh = None if joules is None else joules * cost["pue"] / 3.6e6
    price = cost["electricity_price_per_kwh"]
    return {
        "eval_energy_j": joules,
        "eval_kwh": kwh,
        "eval_kg_co2e": None if kwh is None or intensity_g_per_kwh is None else kwh * intensity_g_per_kwh / 1000,
        "eval_electricity_cost": None if kwh is None or price is None else kwh * price,
    }


def curves_table(records: Iterable[dict[str, Any] | str | None], curves: Iterable[pl.DataFrame | None]) -> pl.DataFrame:
    """Every trial's eval curve in one long table, each row carrying its trial's cell, series, budget and trial
    (what the curve analysis groups by); trials without a readable record or curve are left out (the trials
    table names them)."""
    parts = [
        curve.with_columns(
            pl.lit(rec["cell"]).alias("cell"),
            pl.lit(series_of(rec["levels"])).alias("series"),
            pl.lit(rec["budget"]).cast(pl.Int64).alias("budget"),
            pl.lit(rec["trial"]).cast(pl.Int64).alias("trial"),
        )
        for rec, curve in zip(records, curves)
        if isinstance(rec, dict) and curve is not None
    ]
    if not parts:
        return pl.DataFrame(schema={"cell": pl.String, "series": pl.String, "budget": pl.Int64, "trial": pl.Int64})
    return pl.concat(parts, how="diagonal_relaxed").select(
        "cell", "series", "budget", "trial", pl.exclude("cell", "series", "budget", "trial")
    )


def _diverged_loss(rec: dict[str, Any]) -> str:
    """What stopped a diverged trial: its training loss, or that it was not finite (older records say neither)."""
    loss = rec.get("diverged_loss")
    return f"training loss {loss:.4g} nats" if isinstance(loss, (int, float)) else "non-finite training loss"


def flat_record(rec: dict[str, Any]) -> dict[str, Any]:
    """Nested records flattened (versions -> versions_torch), lists dropped, a non-finite number (a hand-edited NaN
    or Infinity, which JSON readers accept) made missing: a summary would spread it to its whole cell."""
    flat = {}
    for key, value in rec.items():
        if isinstance(value, dict):
            flat.update({f"{key}_{k}": v for k, v in value.items()})
        elif isinstance(value, float):
            flat[key] = finite(value)
        elif not isinstance(value, list):
            flat[key] = value
    return flat


def trials_table(
    records: Iterable[dict[str, Any] | str | None],
    expected: list[tuple[str, int]],
    *,
    traces: Iterable[pl.DataFrame | None],
    steps: Iterable[pl.DataFrame | None],
    cs_tflops: float | None | dict[str, float | None],
    metric: dict[str, Any],
    quality: dict[str, Any],
    reference_tflops: float | None | dict[str, float | None],
    cost: dict[str, Any],
    intensity_g_per_kwh: float | None,
    absent: str = "no metrics",
    cs_keys: dict[str, str] | None = None,
    profile_devices: dict[str, str | None] | None = None,
) -> tuple[pl.DataFrame, list[str]]:
    """One row per finished trial, in the design's order: what it recorded, what the analysis derives from it
    (PE, layers, FLOPs, idle energy) and its measurement-quality verdict; and the names of missing or failed trials.

    ``records``, ``traces`` and ``steps`` pair with ``expected`` (cell id, trial); None means no file
    (named with ``absent``), a string says why a record could not be used. ``cs_tflops`` and
    ``reference_tflops`` are one value or one per device profile (``design.profile_key_of``); without
    ``cs_tflops`` (no device profile yet) PE and MFU are null. ``cs_keys`` maps a cell id to the profile of its
    CS_TFLOPS (``metric.cs_basis``; its own profile when not given) and ``profile_devices`` a profile key to the
    device it was measured on, so that a trial trained on another device is flagged. ``series`` names a trial's
    levels of every factor but the budget ("" in a one-factor study).
    """
    kept, missing = [], []
    for (cell, trial), rec, trace, st in zip(expected, records, traces, steps):
        if isinstance(rec, str) or rec is None or rec.get("status") != "ok" or trace is None or st is None:
            why = (
                rec
                if isinstance(rec, str)
                else absent
                if rec is None
                else f"diverged at step {rec.get('diverged_at_step')} ({_diverged_loss(rec)}); its subject is left out of the "
                "repeated-measures tests"
                if rec.get("status") == "diverged"
                else f"status {rec.get('status')}"
                if rec.get("status") != "ok"
                else "trace files missing"
            )
            missing.append(f"{cell_label(cell)} trial {trial}: {why}")
            continue
        kept.append((rec, trace, st))
    if not kept:  # nothing finished: an empty table that still has its key columns
        return pl.DataFrame(
            schema={"series": pl.String, "cell": pl.String, "budget": pl.Int64, "trial": pl.Int64, "quality": pl.String}
        ), missing
    recs = [r for r, _, _ in kept]
    cs_key = lambda rec: (cs_keys or {}).get(rec["cell"], profile_key_of(rec["levels"]))  # noqa: E731
    measured_on = [(profile_devices or {}).get(cs_key(r)) for r in recs]
    traces, steps = [tr for _, tr, _ in kept], [st for _, _, st in kept]
    verdicts = assess(recs, diagnose(recs, traces, steps, reference_tflops, quality, measured_on), quality)
    order = sorted(range(len(recs)), key=lambda i: recs[i]["started_at_unix_s"])
    position = {i: pos + 1 for pos, i in enumerate(order)}
    rows = []
    for i, (rec, verdict) in enumerate(zip(recs, verdicts)):
        cs = cs_tflops.get(cs_key(rec)) if isinstance(cs_tflops, dict) else cs_tflops
        flat = flat_record(rec)
        derived = derived_metrics(flat, cs_tflops=cs, K=metric["K"], tt_scale=metric["tt_scale"])
        rows.append(
            {
                "series": series_of(rec["levels"]),
                **flat,
                **derived,
                "cs_basis": metric.get("cs_basis", "training"),
                "cs_profile": cs_key(rec),
                "device_profile": profile_key_of(rec["levels"]),
                **trial_cost({**flat, **derived}, cost, intensity_g_per_kwh),
                "cost_is_estimate": rec["meter_is_estimate"],
                **verdict,
                "run_position": position[i],
            }
        )
    return pl.DataFrame(rows, infer_schema_length=None), missing
