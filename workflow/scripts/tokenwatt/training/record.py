"""A trial's outputs from its measurement: metrics.json (``trial_record``), the loss curve's columns (steps.parquet)
and the eval curve with its energies (``trial_curve``, curve.parquet). Raw measurements only: everything derived from
a formula or a constant (PE, its layers, FLOPs, J/token, MFU, quality verdicts) is computed in the analysis, so
changing it never retrains."""

from __future__ import annotations

import os
import platform
from importlib import metadata
from typing import Any

import polars as pl
import torch

from .. import __version__
from ..measurement.devices import device_name, gpu_uuid
from ..measurement.memory import accounted_bytes
from ..measurement.meter import WindowMeasurement
from .optim import state_bytes
from .session import TrialContext, TrialMeasurement
from .spec import TrialData
from .train import TrainSettings

# The columns of steps.parquet: one row per logged training step.
STEPS_SCHEMA = {
    "step": pl.Int64,
    "epoch": pl.Int64,
    "tokens": pl.Int64,
    "loss": pl.Float64,
    "elapsed_s": pl.Float64,
    "tokens_per_s": pl.Float64,
}

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


def trial_record(ctx: TrialContext, data: TrialData, m: TrialMeasurement, started_at: float) -> dict[str, Any]:
    """metrics.json, the trial's typed record (workflow/schemas/metrics.schema.yaml): its identity (budget, trial,
    levels, cell, seed) first, then what was trained, what the meter measured, and where (``_where_record``). The
    record's keys keep their order, which the file shows. ``started_at``: the Unix time the trial started."""
    spec, s, result, settings = ctx.spec, ctx.setup, m.result, ctx.spec.train
    before = m.session.before
    idle = m.windows["idle"] if before.idle else None
    d = m.diverged.where() if m.diverged else None
    return {
        "budget": spec.budget,
        "trial": spec.trial,
        "levels": dict(spec.levels),
        "cell": spec.cell,
        "seed": spec.seed,
        "status": "diverged" if m.diverged else "ok",
        "started_at_unix_s": started_at,
        **({"diverged_at_step": d["step"], "diverged_in_epoch": d["epoch"], "diverged_loss": d["loss"]} if d else {}),
        "subset_chunks": data.subset["n_chunks"],
        "subset_real_tokens": data.subset["real_tokens"],
        "real_tokens": result.real_tokens,
        "padded_tokens": result.padded_tokens or None,
        "steps": result.n_steps,
        "epochs": settings.epochs,
        "batch_size": settings.batch_size,
        "data_order": settings.order,
        "branch": branch_record(settings, m),
        "lr": settings.lr,
        "lr_schedule": settings.schedule.to_dict(),
        "lr_warmup_steps": result.warmup_steps,
        "adam_betas": list(settings.betas),
        "z_loss": settings.z_loss,
        "precision": settings.precision,
        "optimizer": result.optimizer,
        "optimizer_settings": dict(settings.optimizer),
        **_memory_record(ctx, m),
        "grad_scaler_skips": result.grad_scaler_skips,
        "eval_loss": m.eval_loss,
        "final_train_loss": result.final_train_loss,
        "eval_tokens": int(s.eval_mask.sum()),
        "train_s": result.train_s,
        "eval_s": m.eval_s,
        **before.cooled,
        "eval_points": len(m.session.points),
        "eval_subset_tokens": int(s.eval_mask[: s.n_sub].sum()),
        "stop_rule": settings.stop.to_dict(),
        "stopped": result.stopped,
        **m.session.stop,
        "settle_s": m.meter.reader.settle_s,
        "energy_j": m.energy.energy_j,
        "idle_power_w": None if idle is None or idle.energy_j is None else idle.energy_j / idle.duration_s,
        "idle_seconds": None if idle is None else idle.duration_s,
        "idle_after_s": before.idle_after_s,
        "meter_choice": m.why,
        **{k: v for k, v in m.energy.to_record().items() if k != "energy_j"},
        **_where_record(ctx, data, m),
    }


def _where_record(ctx: TrialContext, data: TrialData, m: TrialMeasurement) -> dict[str, Any]:
    """The record's tail: the device and job it ran on, the model, its checkpoints, its throughput checks and the
    versions it ran with."""
    s = ctx.setup
    return {
        "device": s.device.type,
        "device_name": device_name(s.device),
        "device_uuid": m.meter.reader.static_info().get("meter_device_uuid") or gpu_uuid(s.device, ctx.nvml),
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "job": job_identity(),
        "threads": ctx.spec.train.threads,
        "devices": s.ranks.world,
        **s.arch,
        "compiled": s.compiling,
        "compile_s": s.compile_s,
        "tokenizer_vocab_size": data.tokenizer["vocab_size"],
        "context": s.ids.shape[1],
        **m.checkpoints,
        "checkpoint_energy_j": _sum_windows(m.windows, "checkpoint_", "energy_j"),
        "checkpoint_s": _sum_windows(m.windows, "checkpoint_", "duration_s"),
        "check_before_tflops": m.session.before.check_before,
        "check_after_tflops": m.check_after,
        "versions": versions(),
    }


def _memory_record(ctx: TrialContext, m: TrialMeasurement) -> dict[str, Any]:
    """The device's peak memory over training and the bytes the weights, gradients and optimizer state account for
    (the state as its checkpoint holds it: a diverged run has none), and the seconds its step compiled before the
    meter opened (torchao's)."""
    state = m.result.state
    held = state_bytes(state.optimizer) if state is not None and state.optimizer else None
    return {**m.memory, **accounted_bytes(ctx.setup.model, held), "optimizer_compile_s": ctx.setup.optimizer_compile_s}


def versions() -> dict[str, str]:
    return {
        "tokenwatt": __version__,
        "torch": torch.__version__,
        "transformers": metadata.version("transformers"),
        "python": platform.python_version(),
        "cuda": torch.version.cuda or "none",
    }


def job_identity() -> dict[str, Any]:
    """Where the trial ran, to join its record with the scheduler's accounting: the node, and under SLURM its job id
    and step (null elsewhere)."""
    return {
        "node": os.environ.get("SLURMD_NODENAME") or platform.node(),
        "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
        "slurm_step_id": os.environ.get("SLURM_STEP_ID"),
    }


def trial_curve(
    points: list[dict[str, Any]], windows: dict[str, WindowMeasurement], distinct_total: int
) -> pl.DataFrame:
    """The evaluation points with their energies from the meter's windows: cumulative training energy (the training
    segments up to the point) and the evaluation's own; distinct tokens cap at the subset's (epoch one sees each once)."""
    rows = []
    for p in points:
        # a segment's parts (train_<segment>.<checkpoint>) count as the segment
        segments = [w.energy_j for name, w in windows.items() if 0 < _segment(name) <= p["point"]]
        own = windows.get("eval_final" if p["final"] else f"eval_{p['point']}")
        rows.append(
            {
                **p,
                "distinct_tokens": min(p["real_tokens"], distinct_total),
                "train_energy_j": None if not segments or None in segments else float(sum(segments)),
                "eval_energy_j": own.energy_j if own else None,
            }
        )
    return pl.DataFrame([{k: r.get(k) for k in CURVE_SCHEMA} for r in rows], schema=CURVE_SCHEMA, orient="row")


def branch_record(settings: TrainSettings, m: TrialMeasurement) -> dict[str, Any] | None:
    """A branched trial's ``branch`` (metrics.schema.yaml): the stable run's point it continued (point 0: none, it
    trained from its first step) and the stable run's training energy and seconds, which its own include."""
    if settings.schedule.branch_every is None:
        return None
    point = m.session.branch or {"every": settings.schedule.branch_every, "from_point": 0, "from_step": 0}
    point = {"from_real_tokens": 0, "stable_train_s": 0.0, "stable_run_s": 0.0, "stable_windows": [], **point}
    energies = [m.windows[name].energy_j for name in point.pop("stable_windows")]
    return {
        **point,
        "stable_energy_j": None if None in energies else float(sum(energies)),
        "cooldown_from_step": m.result.cooldown_from,
    }


def _segment(window: str) -> int:
    """The training segment a window belongs to (train_3 and train_3.1: 3); 0 for a window that is not training's."""
    if not window.startswith("train_"):
        return 0
    return int(window.removeprefix("train_").split(".")[0])


def _sum_windows(windows: dict[str, WindowMeasurement], prefix: str, key: str) -> float | None:
    """The windows named ``prefix…``'s total ``key``; 0 where there are none, None where one has no value."""
    values = [getattr(w, key) for name, w in windows.items() if name.startswith(prefix)]
    return None if None in values else float(sum(values))
