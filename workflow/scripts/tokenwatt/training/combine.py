"""A trial on several devices as one record: its ranks' outputs (each ``run_trial``'s, metered on its own device over
windows that began and ended at barriers on every rank) made the trial's.

Energy is summed over the devices, time is the slowest rank's, and each device's own figures stay in the record
(``ranks``), so an imbalance between devices shows instead of vanishing into the sum. RMS power, which PE divides by,
is the RMS of the devices' summed power trace, not the sum of each device's RMS: that sum is the total's only where
the devices' power swings in lockstep and is larger wherever it swings out of step (compute on one device while
another communicates). Everything a rank computed together with the others (the loss records, the evaluations, the
steps and tokens) is the same on every rank and is taken from rank 0. The power trace keeps every rank's samples,
each row labelled with its ``rank``. Ranks that report one device are refused: its energy would count twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import polars as pl

from ..measurement.energy import rms_of_sum, sample_spans
from .train import TrainingError

# metrics.json's keys a trial's devices add up: energies, the devices' power (the total's mean, to within the skew
# of the ranks' boundary samples after each barrier; its maximum as a sum, which bounds the total's from above) and
# the devices' power limits, and what the meters' own work cost. power_rms_w is not among them: ``summed_rms``.
SUMMED = (
    "energy_j",
    "eval_energy_j",
    "checkpoint_energy_j",
    "idle_power_w",
    "power_mean_w",
    "power_max_w",
    "power_limit_w",
    "meter_thread_cpu_s",
    "sample_errors",
)
# The slowest rank's: times, the largest sampling interval and temperature, the most short windows, and the largest
# peak memory (the device that must fit the trial).
SLOWEST = (
    "peak_memory_bytes",
    "peak_memory_reserved_bytes",
    "optimizer_compile_s",
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
    "power_rms_w",
    "power_max_w",
    "train_s",
    "lost_energy_j",
    "lost_train_s",
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


def combine_resumes(per_rank: Sequence[Sequence[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The trial's resumes: every rank resumed from the same checkpoint (one file holds all their states); what each
    stopped process lost is summed over the devices (energy) or the slowest rank's (seconds), and kept per rank. Ranks
    that recorded different numbers of resumes did not resume together, and are refused rather than paired short."""
    counts = [len(resumes) for resumes in per_rank]
    if len(set(counts)) > 1:
        raise ValueError(
            f"the ranks recorded {counts} resumes (rank by rank): every rank resumes from the one checkpoint, or none "
            "does, so they cannot differ; a workflow bug, please report it"
        )
    combined = []
    for same in zip(*per_rank, strict=True):
        lost = {"lost_energy_j": _total([r["lost_energy_j"] for r in same])}
        lost["lost_train_s"] = (
            None if any(r["lost_train_s"] is None for r in same) else max(r["lost_train_s"] for r in same)
        )
        each = [
            {"rank": rank, "lost_energy_j": r["lost_energy_j"], "lost_train_s": r["lost_train_s"]}
            for rank, r in enumerate(same)
        ]
        combined.append({**same[0], **lost, "ranks": each})
    return combined


def check_distinct_devices(records: Sequence[dict[str, Any]]) -> None:
    """Refuse ranks that metered one GPU: two ranks reporting one device UUID (or MIG slices of one GPU, whose power
    NVML reads as the whole GPU's) would add its energy twice without a word. CPU ranks report no UUID: each meters
    its own process."""
    seen: dict[str, int] = {}
    for rank, r in enumerate(records):
        sensor = r.get("mig_parent_uuid") or r.get("device_uuid")
        if not sensor:
            continue
        if sensor in seen:
            raise TrainingError(
                f"ranks {seen[sensor]} and {rank} of this trial both metered GPU {sensor}, so its energy would be "
                "counted twice; each rank must train on a device of its own (a whole GPU, not a MIG slice of one "
                "another rank uses): check CUDA_VISIBLE_DEVICES (one distinct GPU per rank) and that the launcher "
                "starts one process per GPU, then run the trial again"
            )
        seen[sensor] = rank


def clock_offsets(per_rank: Sequence[Sequence[dict[str, Any]]]) -> list[float]:
    """How far each rank's clock (seconds since its meter opened) is ahead of rank 0's: every window begins and ends
    at a barrier, so each boundary is one instant on every rank; the median over them is robust to a late one."""
    bounds = [np.array([b for w in windows for b in (w["start_s"], w["end_s"])], dtype=float) for windows in per_rank]
    if not len(bounds[0]):
        return [0.0] * len(per_rank)
    return [float(np.median(b - bounds[0])) for b in bounds]


def summed_rms(records: Sequence[dict[str, Any]], traces: Sequence[pl.DataFrame]) -> tuple[float | None, str | None]:
    """The trial's RMS power and how it was had: ``summed_trace``, the RMS of the devices' summed power over the
    training time every device has samples for, each rank's samples the ones its own RMS is over
    (``in_power_stats``), each standing for its stretch of time (``sample_spans``), the ranks' clocks lined up at the
    barriers; so one device's is its own RMS. ``devices_sum`` (the sum of each device's RMS, an upper bound) only
    where the traces cannot be summed: a record from before traces said which samples count, or no shared time.
    (None, None) where a device has no RMS."""
    each = [r.get("power_rms_w") for r in records]
    if any(v is None for v in each):
        return None, None
    usable = all("in_power_stats" in t.columns and r.get("power_covers") for r, t in zip(records, traces))
    total = None
    if usable:
        devices = []
        for r, t, offset in zip(records, traces, clock_offsets([r["windows"] for r in records])):
            valid = t.filter(pl.col("power_w").is_not_null())  # the samples the meter's spans are over
            lo, hi = sample_spans(valid["t_s"].to_numpy(), r["power_covers"])
            keep = valid["in_power_stats"].to_numpy()
            devices.append((lo[keep] - offset, hi[keep] - offset, valid["power_w"].to_numpy()[keep]))
        total = rms_of_sum(devices)
    return (total, "summed_trace") if total is not None else (sum(each), "devices_sum")


def combine_ranks(outputs: Sequence[Outputs]) -> Outputs:
    """The trial's (metrics, power trace, loss curve, eval curve) from its ranks' in rank order."""
    records = [o[0] for o in outputs]
    check_distinct_devices(records)
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
    if "power_rms_w" in first:
        metrics["power_rms_w"], metrics["power_rms_from"] = summed_rms(records, [o[1] for o in outputs])
    metrics["sample_error_messages"] = [
        f"rank {rank}: {m}" for rank, r in enumerate(records) for m in r.get("sample_error_messages", [])
    ][:20]
    if first.get("branch"):  # the stable run's part of a branched trial, as its own: the devices' energy, slowest time
        each = [r["branch"] for r in records]
        metrics["branch"] = {
            **first["branch"],
            "stable_energy_j": _total([b["stable_energy_j"] for b in each]),
            **{k: max(b[k] for b in each) for k in ("stable_train_s", "stable_run_s")},
        }
    if "resumes" in first:  # the lost work as one device's record sums it: over the resumes, null where one is
        metrics["resumes"] = combine_resumes([r["resumes"] for r in records])
        for key in ("lost_energy_j", "lost_train_s"):
            metrics[key] = _total([r[key] for r in metrics["resumes"]])
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
