"""A trial on several devices as one record: its ranks' outputs (each ``run_trial``'s, metered on its own device over
windows that began and ended at barriers on every rank) made the trial's.

Energy is summed over the devices, time is the slowest rank's, and each device's own figures stay in the record
(``ranks``), so an imbalance between devices shows instead of vanishing into the sum. Everything a rank computed
together with the others (the loss records, the evaluations, the steps and tokens) is the same on every rank and is
taken from rank 0. The power trace keeps every rank's samples, each row labelled with its ``rank``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import polars as pl

# metrics.json's keys a trial's devices add up: energies, the devices' power (the total's mean, to within the skew
# of the ranks' boundary samples after each barrier; its RMS and maximum as sums, which bound the total's from above)
# and the devices' power limits, and what the meters' own work cost.
SUMMED = (
    "energy_j",
    "eval_energy_j",
    "checkpoint_energy_j",
    "idle_power_w",
    "power_mean_w",
    "power_rms_w",
    "power_max_w",
    "power_limit_w",
    "meter_thread_cpu_s",
    "sample_errors",
)
# The slowest rank's: times, the largest sampling interval and temperature, the most short windows.
SLOWEST = (
    "train_s",
    "eval_s",
    "duration_s",
    "eval_window_s",
    "idle_seconds",
    "compile_s",
    "checkpoint_s",
    "interval_achieved_s",
    "interval_final_s",
    "temperature_max_c",
    "short_windows",
)
# The sparsest rank's: a quality rule asking for enough samples asks it of every device.
SPARSEST = ("samples", "samples_with_power", "samples_settling")
# Each device's own figures, kept per rank.
PER_RANK = (
    "device_name",
    "device_uuid",
    "energy_j",
    "eval_energy_j",
    "idle_power_w",
    "power_mean_w",
    "power_max_w",
    "train_s",
    "samples_with_power",
    "meter_choice",
    "check_before_tflops",
    "check_after_tflops",
)

Outputs = tuple[dict[str, Any], pl.DataFrame, pl.DataFrame, pl.DataFrame]


def _total(values: list[Any]) -> Any:
    return None if any(v is None for v in values) else sum(values)


def _largest(values: list[Any]) -> Any:
    present = [v for v in values if v is not None]
    return max(present) if present else None


def _smallest(values: list[Any]) -> Any:
    present = [v for v in values if v is not None]
    return min(present) if present else None


def combine_windows(per_rank: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The trial's windows: every rank has the same ones in the same order (each began and ended at a barrier); a
    window's energy is the devices' sum, its duration the longest, its samples the fewest."""
    names = [[w["name"] for w in windows] for windows in per_rank]
    if any(n != names[0] for n in names):
        raise ValueError(f"the ranks measured different windows: {names}; a workflow bug, please report it")
    combined = []
    for same in zip(*per_rank):
        first = same[0]
        duration = max(w["duration_s"] for w in same)
        combined.append(
            {
                **first,
                "end_s": first["start_s"] + duration,  # on rank 0's clock
                "energy_j": _total([w["energy_j"] for w in same]),
                "duration_s": duration,
                "samples": min(w["samples"] for w in same),
                "note": "; ".join(sorted({w["note"] for w in same if w["note"]})),
            }
        )
    return combined


def combine_ranks(outputs: Sequence[Outputs]) -> Outputs:
    """The trial's (metrics, power trace, loss curve, eval curve) from its ranks' in rank order."""
    records = [o[0] for o in outputs]
    first = records[0]
    metrics = dict(first)
    for key in SUMMED:
        if key in first:
            metrics[key] = _total([r.get(key) for r in records])
    for key in SLOWEST:
        if key in first:
            metrics[key] = _largest([r.get(key) for r in records])
    for key in SPARSEST:
        if key in first:
            metrics[key] = _smallest([r.get(key) for r in records])
    metrics["windows"] = combine_windows([r["windows"] for r in records])
    metrics["sample_error_messages"] = [
        f"rank {rank}: {m}" for rank, r in enumerate(records) for m in r.get("sample_error_messages", [])
    ][:20]
    metrics["ranks"] = [{"rank": rank, **{k: r.get(k) for k in PER_RANK}} for rank, r in enumerate(records)]
    # PE's CS_TFLOPS × N assumes N devices of one kind (the report warns where they were not)
    metrics["devices_differ"] = len({r.get("device_name") for r in records}) > 1
    power = pl.concat([o[1].with_columns(rank=pl.lit(rank, pl.Int64)) for rank, o in enumerate(outputs)])
    curves = [o[3] for o in outputs]
    curve = curves[0].with_columns(
        *(
            pl.Series(col, [_total(list(v)) for v in zip(*(c[col].to_list() for c in curves))], dtype=pl.Float64)
            for col in ("train_energy_j", "eval_energy_j")
        ),
        *(pl.max_horizontal([c[col] for c in curves]).alias(col) for col in ("train_s", "eval_s")),
    )
    return metrics, power, outputs[0][2], curve
