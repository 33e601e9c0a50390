"""One trial, end to end: model, idle baseline, metered training, evaluations, throughput checks.

``run_trial`` takes data and settings and returns (metrics, power trace, loss curve, eval curve): raw
measurements only, in three steps: ``set_up`` (device, chunks, model, settings), ``measure`` (the meter session) and
``trial_record`` (metrics.json). One meter session covers the trial, in named windows (idle, check_before,
train_1, eval_1, train_2, …, check_after, eval_final): training energy and time are the sum of the
training segments, each evaluation is metered in its own window beside them. Everything derived from a formula or a constant (PE, its layers, FLOPs,
J/token, MFU, quality verdicts) is computed in the analysis, so changing it never retrains.
The Snakemake script around it only reads and writes files.
"""

from __future__ import annotations

import math
import os
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from typing import Any

import polars as pl
import torch

from .. import __version__
from ..measurement.devices import compute_dtype, device_name, gpu_uuid
from ..measurement.meters import Meter, MeterSettings, Pace, make_meter, short_eval_window
from ..measurement.throughput import measure_throughput
from ..plan.stopping import should_stop
from .setup import TrialSetup, set_up
from .train import (
    Diverged,
    TrainingError,
    TrainResult,
    evaluate,
    train,
)


def cooldown(
    meter: Meter, seconds: float, below_c: float | None, timeout_s: float, log: Callable[[str], None]
) -> dict[str, Any]:
    """Wait before the trial: a fixed pause, then (a meter that reads the device's temperature) until the device is
    cool enough."""
    t0 = time.monotonic()
    time.sleep(seconds)
    reached = None
    if below_c is not None and meter.reads_temperature:
        while (temp := meter.temperature()) >= below_c and time.monotonic() - t0 < seconds + timeout_s:
            time.sleep(1.0)
        reached = temp
        log(f"cooldown: GPU at {temp:.0f} °C (target < {below_c:g} °C)")
    return {"cooldown_s": time.monotonic() - t0, "cooldown_end_temperature_c": reached}


def versions() -> dict[str, str]:
    return {
        "tokenwatt": __version__,
        "torch": torch.__version__,
        "transformers": metadata.version("transformers"),
        "python": platform.python_version(),
        "cuda": torch.version.cuda or "none",
    }


@dataclass
class TrialMeasurement:
    """What one meter session measured: the training's result, the evaluations, the windows' energies."""

    result: TrainResult
    diverged: Diverged | None
    eval_loss: float | None
    eval_s: float
    points: list[dict[str, Any]]  # the eval curve; energies come from the windows (trial_curve)
    stop: dict[str, Any]  # where and why train.stop ended training, when it did
    energy: dict[str, Any]  # the meter's summary (Meter.close)
    windows: dict[str, dict[str, Any]]  # its windows by name
    idle: bool  # whether an idle baseline was measured (meter.idle_seconds)
    idle_after_s: float
    cooled: dict[str, Any]
    check_before: list[float]
    check_after: list[float]
    meter: Meter
    why: str  # why this meter was chosen (meter_choice)


class _Session:
    """The trial's meter session around training: throughput checks, the progress line, the evaluations that pause
    training (each in its own window) and the stopping rule asked at each."""

    def __init__(self, setup: TrialSetup, meter: Meter, log: Callable[[str], None]) -> None:
        self.setup, self.meter, self.log = setup, meter, log
        self.points: list[dict[str, Any]] = []
        self.stop: dict[str, Any] = {}

    def check(self, when: str, check_cfg: dict[str, Any]) -> list[float]:
        if not check_cfg["windows"]:
            return []
        s = self.setup
        self.meter.begin(f"check_{when}")
        got = measure_throughput(
            s.device,
            compute_dtype(s.settings.precision),
            size=check_cfg["matmul_size"],
            window_s=check_cfg["window_s"],
            windows=check_cfg["windows"],
            warmup_s=0.0,
            sync=s.sync,
        )
        self.meter.end()
        self.log(
            f"throughput check {when} training: {got['median_tflops']:.4g} TFLOP/s (median of {got['windows']} windows)"
        )
        return got["windows_tflops"]

    def progress(self, r: dict[str, Any]) -> None:
        watts = self.meter.latest_power()
        self.log(
            f"step {r['step']:>7} epoch {r['epoch']} tokens {r['tokens']:>10,} loss {r['loss']:.4f} "
            f"{r['tokens_per_s'] or 0:,.0f} tok/s " + (f"{watts:.1f} W" if watts is not None else "- W")
        )

    def evaluation(self, at: dict[str, Any]) -> bool:
        """A pause in training: the segment's window closes, the evaluation gets its own, training resumes in the next
        unless the stopping rule (train.stop) says the last segments no longer paid for their energy."""
        s, meter, k = self.setup, self.meter, len(self.points) + 1
        meter.switch(f"eval_{k}")
        trained_j = meter.energy_so_far("train")
        t = time.perf_counter()
        ids, mask = s.eval_ids[: s.n_sub], s.eval_mask[: s.n_sub]
        loss = evaluate(s.model, ids, mask, s.device, s.settings.precision, s.settings.eval_batch_size)
        eval_s = time.perf_counter() - t
        # NVML's counter updates about every 100 ms: an evaluation shorter than it can resolve is refused at the
        # first point rather than measured as rounding for the rest of the study (the CPU meters resolve ms).
        if k == 1 and meter.coarse_counter:
            tokens = int(mask.sum())
            if problem := short_eval_window(eval_s, tokens, meter.update_period_s, "measured at the first point"):
                raise TrainingError(problem)
        self.points.append(
            {
                **at,
                "point": k,
                "eval_loss": loss,
                "eval_s": eval_s,
                "eval_tokens": int(mask.sum()),
                "final": False,
                "train_energy_j": trained_j,
            }
        )
        self.log(
            f"evaluation {k} at {at['real_tokens']:,} real tokens: eval loss {loss:.4f} ({eval_s:.2f} s, outside training)"
        )
        reason = should_stop(self.points, s.rule) if s.rule.rule != "none" else None
        if reason:
            self.stop.update(stopped_at_point=k, stopped_at_tokens=at["real_tokens"], stop_reason=reason)
            self.log(f"STOPPED at evaluation {k} ({at['real_tokens']:,} real tokens): {reason} (train.stop)")
            meter.end()  # no further training window
            return True
        meter.switch(f"train_{k + 1}")
        return False

    def final_evaluation(self, result: TrainResult) -> tuple[float, float]:
        """The whole eval set's loss, the trial's result, and the curve's last point on the tokens of its others (so no
        point differs from the one before it by the set it was evaluated on); with the seconds both took."""
        s = self.setup
        self.meter.begin("eval_final")
        t_eval = time.perf_counter()
        precision, batch = s.settings.precision, s.settings.eval_batch_size
        eval_loss = evaluate(s.model, s.eval_ids, s.eval_mask, s.device, precision, batch)
        curve_loss = (
            eval_loss
            if s.n_sub == len(s.eval_ids)
            else evaluate(s.model, s.eval_ids[: s.n_sub], s.eval_mask[: s.n_sub], s.device, precision, batch)
        )
        eval_s = time.perf_counter() - t_eval
        self.meter.end()
        if math.isfinite(eval_loss):
            self.points.append(
                {
                    "step": result.n_steps,
                    "epoch": s.settings.epochs,
                    "real_tokens": result.real_tokens,
                    "train_s": result.train_s,
                    "point": len(self.points) + 1,
                    "eval_loss": curve_loss,
                    "eval_loss_whole_set": eval_loss,
                    "eval_s": eval_s,
                    "eval_tokens": int(s.eval_mask[: s.n_sub].sum()),
                    "final": True,
                }
            )
        return eval_loss, eval_s


def measure(
    setup: TrialSetup,
    meter_settings: MeterSettings,
    check_cfg: dict[str, Any],
    on_divergence: str,
    name: str,
    log: Callable[[str], None],
    nvml=None,
) -> TrialMeasurement:
    """The trial's one meter session, window by window: idle baseline, throughput check, training segments and the
    evaluations between them, check again, the final evaluation. ``name`` (budget and trial) labels its errors. One
    function of some 80 lines on purpose: the order of its windows is the measurement protocol, read top to bottom."""
    s = setup
    meter, why = make_meter(meter_settings, s.device.type, gpu_uuid=gpu_uuid(s.device, nvml), nvml=nvml, sync=s.sync)
    log(why)
    cooled = cooldown(
        meter, meter_settings.cooldown_s, meter_settings.cooldown_below_c, meter_settings.cooldown_timeout_s, log
    )
    session = _Session(s, meter, log)
    pace = Pace(s.steps_planned)
    # At least the meter's settle time since the device last worked, whatever the cooldown: an averaged reading
    # still shows the load or compile for that long, and the idle baseline would read it as idle power.
    time.sleep(max(0.0, meter.settle_s - (time.monotonic() - s.last_work)))
    meter.open(pace)
    idle_after_s = time.monotonic() - s.last_work
    idle = meter.window("idle", meter_settings.idle_seconds) if meter_settings.idle_seconds > 0 else None
    check_before = session.check("before", check_cfg)
    time.sleep(meter.settle_s)
    diverged = None
    meter.begin("train_1")
    try:
        result = train(
            s.model,
            s.ids,
            s.mask,
            s.device,
            s.settings,
            on_log=session.progress,
            sync=s.sync,
            forward=s.forward,
            pace=pace,
            pause_at_tokens=s.thresholds,
            on_pause=session.evaluation,
        )
    except Diverged as err:
        if on_divergence == "fail":
            meter.end()
            meter.close()
            raise TrainingError(f"{name}: {err}") from None
        log(f"DIVERGED: {name}: {err}; recorded as a result (train.on_divergence: record)")
        diverged, result = err, err.partial
    except TrainingError as err:
        meter.end()
        meter.close()
        raise TrainingError(f"{name}: {err}") from None
    if not result.stopped:
        meter.end()
    check_after = session.check("after", check_cfg)
    eval_loss, eval_s = None, 0.0
    if not diverged:
        eval_loss, eval_s = session.final_evaluation(result)
        if not math.isfinite(eval_loss):
            meter.close()
            raise TrainingError(f"{name}: non-finite eval loss {eval_loss}")
    energy = meter.close()
    for w in energy["windows"]:
        if w["note"]:
            log(f"NOTE: window {w['name']}: {w['note']}")
    return TrialMeasurement(
        result=result,
        diverged=diverged,
        eval_loss=eval_loss,
        eval_s=eval_s,
        points=session.points,
        stop=session.stop,
        energy=energy,
        windows={w["name"]: w for w in energy["windows"]},
        idle=idle is not None,
        idle_after_s=idle_after_s,
        cooled=cooled,
        check_before=check_before,
        check_after=check_after,
        meter=meter,
        why=why,
    )


def trial_record(
    setup: TrialSetup,
    measured: TrialMeasurement,
    identity: dict[str, Any],
    subset: dict[str, Any],
    tokenizer: dict[str, Any],
    threads: int,
    nvml=None,
) -> dict[str, Any]:
    """metrics.json, the trial's typed record (workflow/schemas/metrics.schema.yaml): ``identity`` (budget, trial,
    levels, cell, seed) first, then what was trained, what the meter measured, the device and the model. Raw
    measurements only; the record's keys keep their order, which the file shows."""
    s, m, result = setup, measured, measured.result
    idle = m.windows["idle"] if m.idle else None
    return {
        **{k: identity[k] for k in ("budget", "trial", "levels", "cell", "seed")},
        "status": "diverged" if m.diverged else "ok",
        "started_at_unix_s": identity["started_at_unix_s"],
        **({"diverged_at_step": m.diverged.step, "diverged_in_epoch": m.diverged.epoch} if m.diverged else {}),
        "subset_chunks": subset["n_chunks"],
        "subset_real_tokens": subset["real_tokens"],
        "real_tokens": result.real_tokens,
        "padded_tokens": result.padded_tokens or None,
        "steps": result.n_steps,
        "epochs": s.settings.epochs,
        "batch_size": s.settings.batch_size,
        "lr": s.settings.lr,
        "lr_schedule": s.settings.schedule.to_dict(),
        "precision": s.settings.precision,
        "optimizer": result.optimizer,
        "grad_scaler_skips": result.grad_scaler_skips,
        "eval_loss": m.eval_loss,
        "final_train_loss": result.final_train_loss,
        "eval_tokens": int(s.eval_mask.sum()),
        "train_s": result.train_s,
        "eval_s": m.eval_s,
        **m.cooled,
        "eval_points": len(m.points),
        "eval_subset_tokens": int(s.eval_mask[: s.n_sub].sum()),
        "stop_rule": s.rule.to_dict(),
        "stopped": result.stopped,
        **m.stop,
        "settle_s": m.meter.settle_s,
        "energy_j": m.energy["energy_j"],
        "idle_power_w": None if idle is None or idle["energy_j"] is None else idle["energy_j"] / idle["duration_s"],
        "idle_seconds": None if idle is None else idle["duration_s"],
        "idle_after_s": m.idle_after_s,
        "meter_choice": m.why,
        **{k: v for k, v in m.energy.items() if k not in ("trace", "energy_j")},
        "device": s.device.type,
        "device_name": device_name(s.device),
        "device_uuid": m.meter.static_info().get("meter_device_uuid") or gpu_uuid(s.device, nvml),
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "threads": threads,
        **s.arch,
        "compiled": s.compiling,
        "compile_s": s.compile_s,
        "tokenizer_vocab_size": tokenizer["vocab_size"],
        "context": s.ids.shape[1],
        "check_before_tflops": m.check_before,
        "check_after_tflops": m.check_after,
        "versions": versions(),
    }


# The columns of steps.parquet: one row per logged training step.
STEPS_SCHEMA = {
    "step": pl.Int64,
    "epoch": pl.Int64,
    "tokens": pl.Int64,
    "loss": pl.Float64,
    "elapsed_s": pl.Float64,
    "tokens_per_s": pl.Float64,
}


def run_trial(
    *,
    budget: int,
    trial: int,
    seed: int,
    subset: dict[str, Any],
    train_chunks: pl.DataFrame,
    eval_chunks: pl.DataFrame,
    tokenizer: dict[str, Any],
    model_cfg: dict[str, Any],
    train_cfg: dict[str, Any],
    meter_settings: MeterSettings,
    check_cfg: dict[str, Any],
    eval_cfg: dict[str, Any] | None = None,
    levels: dict[str, str] | None = None,
    cell: str | None = None,
    log: Callable[[str], None] = print,
    nvml=None,
) -> tuple[dict[str, Any], pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """Train one (cell, trial): the budget and ``levels``, the cell's level of every further factor
    (recorded as they are; the settings they stand for come in ``model_cfg`` and ``train_cfg``) and ``cell``, the
    cell's id (a one-factor study's ``b{budget}`` when not given); ``check_cfg`` (matmul_size, window_s, windows) sizes the throughput
    checks taken right before and right after training, diagnostics of drift against the device profile; ``eval_cfg``
    (``eval.*``: points or at_tokens, first_fraction, max_tokens) schedules the evaluations (none: the final one only).
    Three steps: set up (``set_up``), measure (``measure``), record (``trial_record``)."""
    t_start, started_at = time.perf_counter(), time.time()
    setup = set_up(subset, train_chunks, eval_chunks, tokenizer, model_cfg, train_cfg, eval_cfg or {}, seed, log)
    name = f"budget {budget}, trial {trial}"
    measured = measure(setup, meter_settings, check_cfg, train_cfg["on_divergence"], name, log, nvml)
    identity = {
        "budget": budget,
        "trial": trial,
        "levels": dict(levels or {}),
        "cell": cell or f"b{budget}",
        "seed": seed,
        "started_at_unix_s": started_at,
    }
    curve = trial_curve(measured.points, measured.windows, subset["real_tokens"])
    metrics = trial_record(setup, measured, identity, subset, tokenizer, train_cfg["threads"], nvml)
    metrics["run_s"] = time.perf_counter() - t_start
    steps = pl.DataFrame(measured.result.steps, schema=STEPS_SCHEMA, orient="row")
    return metrics, measured.energy["trace"], steps, curve


# The columns of curve.parquet: one row per evaluation point of a trial.
CURVE_SCHEMA = {
    "point": pl.Int64,
    "step": pl.Int64,
    "epoch": pl.Int64,
    "real_tokens": pl.Int64,
    "distinct_tokens": pl.Int64,
    "train_s": pl.Float64,
    "train_energy_j": pl.Float64,
    "eval_loss": pl.Float64,
    "eval_loss_whole_set": pl.Float64,
    "eval_s": pl.Float64,
    "eval_energy_j": pl.Float64,
    "eval_tokens": pl.Int64,
    "final": pl.Boolean,
}


def trial_curve(points: list[dict[str, Any]], windows: dict[str, dict[str, Any]], distinct_total: int) -> pl.DataFrame:
    """The evaluation points with their energies from the meter's windows: cumulative training energy (the training
    segments up to the point) and the evaluation's own; distinct tokens cap at the subset's (epoch one sees each once)."""
    rows = []
    for p in points:
        segments = [windows[f"train_{i}"]["energy_j"] for i in range(1, p["point"] + 1) if f"train_{i}" in windows]
        own = windows.get("eval_final" if p["final"] else f"eval_{p['point']}", {})
        rows.append(
            {
                **p,
                "distinct_tokens": min(p["real_tokens"], distinct_total),
                "train_energy_j": None if not segments or None in segments else float(sum(segments)),
                "eval_energy_j": own.get("energy_j"),
            }
        )
    return pl.DataFrame([{k: r.get(k) for k in CURVE_SCHEMA} for r in rows], schema=CURVE_SCHEMA, orient="row")
