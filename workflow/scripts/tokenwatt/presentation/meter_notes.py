"""What the report says about how the trials' energy was read: the meter chosen, why the CPU estimate was, which NVML
power reading, MIG slices, and why energy above idle can come out at or below zero."""

from __future__ import annotations

import html
import statistics
from typing import Any

import polars as pl


def _values(trials: pl.DataFrame, column: str) -> list[Any]:
    """A column's distinct values in order of first appearance, nulls left out; none when the column is missing."""
    if column not in trials.columns:
        return []
    return list(dict.fromkeys(v for v in trials[column].to_list() if v is not None))


def meter_provenance(trials: pl.DataFrame) -> list[list[Any]]:
    """Provenance rows: how each meter was chosen, which NVML reading power came from, and any MIG slice."""
    rows = []
    if choices := _values(trials, "meter_choice"):
        rows.append(["meter choice", "; ".join(choices)])
    if readings := _values(trials, "power_reading_source"):
        rows.append(["NVML power reading", "; ".join(readings)])
    if parents := _values(
        trials.filter(pl.col("mig")) if "mig" in trials.columns else trials.clear(), "mig_parent_uuid"
    ):
        rows.append(["MIG", f"slice(s) of GPU {', '.join(parents)}: power and energy are the whole GPU's"])
    return rows


def why_estimated(trials: pl.DataFrame) -> str:
    """Why the CPU estimate metered the trials rather than a sensor, in the run's own words (``meter_choice``): a
    config that asked for it, or auto finding no readable counter (RAPL's refusal quoted)."""
    estimated = trials.filter(pl.col("meter") == "estimate") if "meter" in trials.columns else trials.clear()
    choices = _values(estimated, "meter_choice")
    if not choices:
        return "the trials' records do not say (no meter_choice)"
    said = ["the config asked for it (meter.kind: estimate)" if c == "meter.kind estimate" else c for c in choices]
    return "; ".join(said)


def meter_warnings(trials: pl.DataFrame) -> list[str]:
    """The report's warnings about how energy was read, each the HTML inside one warning box."""
    out = []
    if "devices_differ" in trials.columns and trials["devices_differ"].fill_null(False).any():
        cells = _values(trials.filter(pl.col("devices_differ").fill_null(False)), "cell")
        out.append(
            "<b>Devices of more than one kind in one trial</b> (" + html.escape(", ".join(cells)) + "): its ranks "
            "trained on devices with different names, and its PE and MFU take one device profile's CS_TFLOPS × its "
            "devices: read them as approximate."
        )
    if "mig" in trials.columns and trials["mig"].fill_null(False).any():
        out.append(
            "<b>Trained on a MIG slice</b>: NVML has no power sensor or energy counter per slice, so energy and power "
            "are the whole GPU's, every slice's work and the GPU's idle power included. Compare such trials only with "
            "each other, on a GPU whose other slices did the same throughout."
        )
    if len(readings := _values(trials, "power_reading")) > 1:
        out.append(
            f"<b>Power came from {len(readings)} different NVML readings</b> ({html.escape(', '.join(readings))}): an averaged "
            "reading smooths the peaks an instantaneous one sees, so RMS power, PE's denominator, is not the same "
            "statistic across these trials (power_reading in trials.parquet names each trial's)."
        )
    if (sentence := dynamic_energy_sentence(trials)) is not None:
        out.append(sentence)
    return out


def dynamic_energy_sentence(trials: pl.DataFrame) -> str | None:
    """Why some trials' energy above idle is zero or negative, with the figures that say so; None when none is."""
    needed = {"dynamic_energy_j", "power_mean_w", "idle_power_w"}
    if not needed <= set(trials.columns):
        return None
    low = trials.filter(pl.col("dynamic_energy_j") <= 0).drop_nulls(["power_mean_w", "idle_power_w"])
    if not low.height:
        return None
    idle = statistics.median(low["idle_power_w"].to_list())
    mean = statistics.median(low["power_mean_w"].to_list())
    after = _values(low, "idle_after_s")
    settled = (
        f"; its baseline began {statistics.median(after):.0f} s after the model's load and compile" if after else ""
    )
    return (
        f"<b>{low.height} trial(s) have energy above idle at or below zero</b>: training drew {mean:.1f} W on average "
        f"against an idle baseline of {idle:.1f} W (medians over those trials{settled}). That is no negative work: "
        "either the device was barely loaded (a host-bound step leaves a GPU at its idle power, so training and idle "
        "differ by noise), or the baseline read the device still in its working power state after the load or "
        "compile (lengthen meter.cooldown_s). Read their total energy; energy above idle is not meaningful for them."
    )
