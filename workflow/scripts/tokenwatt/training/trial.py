"""One trial, end to end: model, idle baseline, metered training, evaluations, throughput checks.

``run_trial`` takes data and settings and returns (metrics, power trace, loss curve, eval curve): raw
measurements only. One meter session covers the trial, in named windows (idle, check_before,
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
from importlib import metadata
from typing import Any

import polars as pl
import torch

from .. import __version__
from ..measurement.devices import compute_dtype, device_name, device_sync, gpu_uuid, make_deterministic, resolve_device
from ..measurement.meters import Meter, MeterSettings, Pace, make_meter, short_eval_window
from ..measurement.throughput import measure_throughput
from ..plan.stopping import should_stop, stop_rule
from .evalplan import eval_thresholds, subset_chunks
from .llama import check_right_padded
from .model import build_model, check_tokenizer_matches, describe, load_pretrained, preset_sizes
from .schedule import schedule_from_config
from .train import (
    Diverged,
    TrainingError,
    TrainSettings,
    check_precision,
    compile_model,
    evaluate,
    should_compile,
    train,
)


def chunk_tensors(chunks: pl.DataFrame, chunk_ids: list[int] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Input ids and attention masks as tensors, in the order of ``chunk_ids`` (all if None)."""
    if chunk_ids is not None:
        position = {cid: i for i, cid in enumerate(chunks["chunk_id"].to_list())}
        chunks = chunks[[position[c] for c in chunk_ids]]
    ids = torch.tensor(chunks["input_ids"].to_numpy(), dtype=torch.long)
    mask = torch.tensor(chunks["attention_mask"].to_numpy(), dtype=torch.long)
    return ids, mask


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


def implementation(model_cfg: dict[str, Any]) -> str:
    """``model.implementation`` resolved: auto is native for a preset, transformers for pretrained weights."""
    chosen = model_cfg.get("implementation", "auto")
    if chosen == "auto":
        return "native" if model_cfg["source"] == "config" else "hf"
    return chosen


def load_model(
    model_cfg: dict[str, Any], tokenizer: dict[str, Any], context: int, seed: int, log: Callable[[str], None] = print
) -> torch.nn.Module:
    if model_cfg["source"] == "config":
        sizes = preset_sizes(model_cfg["preset"], model_cfg["overrides"], tokenizer, context)
        model = build_model(sizes, seed, implementation(model_cfg))
    else:
        model = load_pretrained(model_cfg["name"], model_cfg["revision"], model_cfg["trust_remote_code"])
    for note in check_tokenizer_matches(model, tokenizer):
        log(f"NOTE: {note}")
    return model


def versions() -> dict[str, str]:
    return {
        "tokenwatt": __version__,
        "torch": torch.__version__,
        "transformers": metadata.version("transformers"),
        "python": platform.python_version(),
        "cuda": torch.version.cuda or "none",
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
    (``eval.*``: points or at_tokens, first_fraction, max_tokens) schedules the evaluations (none: the final one only)."""
    t_start, started_at = time.perf_counter(), time.time()
    torch.set_num_threads(train_cfg["threads"])
    device = resolve_device(train_cfg["device"])
    ids, mask = chunk_tensors(train_chunks, subset["chunk_ids"])
    eval_ids, eval_mask = chunk_tensors(eval_chunks)
    context = ids.shape[1]
    steps_planned = train_cfg["epochs"] * math.ceil(len(ids) / train_cfg["batch_size"])
    compiling = should_compile(train_cfg["compile"], device, steps_planned, train_cfg["compile_min_steps"])
    make_deterministic(device, compiling)
    check_precision(device, train_cfg["precision"])
    sync = device_sync(device)

    model = load_model(model_cfg, tokenizer, context, seed, log)
    arch = describe(model)
    if arch["implementation"] == "native":
        check_right_padded(mask, "the trial's training chunks")
        check_right_padded(eval_mask, "the eval chunks")
    model.to(device)
    forward, compile_s = None, None
    if compiling:
        forward, compile_s = compile_model(model, ids, mask, device, train_cfg["precision"], train_cfg["batch_size"])
        log(f"torch.compile: {compile_s:.1f} s before the metered window (train.compile: {train_cfg['compile']})")
    sync()
    last_work = time.monotonic()  # the model's load and compile end here: the idle baseline is measured after a pause
    meter, why = make_meter(meter_settings, device.type, gpu_uuid=gpu_uuid(device, nvml), nvml=nvml, sync=sync)
    log(why)
    cooled = cooldown(
        meter, meter_settings.cooldown_s, meter_settings.cooldown_below_c, meter_settings.cooldown_timeout_s, log
    )
    precision, eval_batch = train_cfg["precision"], train_cfg["eval_batch_size"]
    total_tokens = int(mask.sum()) * train_cfg["epochs"]
    eval_cfg = eval_cfg or {}
    thresholds = eval_thresholds(total_tokens, eval_cfg)
    n_sub = subset_chunks(eval_mask, eval_cfg.get("max_tokens"))

    def check(when: str) -> list[float]:
        meter.begin(f"check_{when}")
        got = measure_throughput(
            device,
            compute_dtype(precision),
            size=check_cfg["matmul_size"],
            window_s=check_cfg["window_s"],
            windows=check_cfg["windows"],
            warmup_s=0.0,
            sync=sync,
        )
        meter.end()
        log(
            f"throughput check {when} training: {got['median_tflops']:.4g} TFLOP/s (median of {got['windows']} windows)"
        )
        return got["windows_tflops"]

    settings = TrainSettings(
        epochs=train_cfg["epochs"],
        batch_size=train_cfg["batch_size"],
        lr=train_cfg["lr"],
        weight_decay=train_cfg["weight_decay"],
        precision=precision,
        seed=seed,
        log_every=train_cfg["log_every"],
        eval_batch_size=eval_batch,
        schedule=schedule_from_config(train_cfg.get("schedule")),
    )

    def progress(r: dict[str, Any]) -> None:
        watts = meter.latest_power()
        log(
            f"step {r['step']:>7} epoch {r['epoch']} tokens {r['tokens']:>10,} loss {r['loss']:.4f} "
            f"{r['tokens_per_s'] or 0:,.0f} tok/s " + (f"{watts:.1f} W" if watts is not None else "- W")
        )

    points: list[dict[str, Any]] = []  # the curve; energies are filled in from the windows once the meter closes
    rule = stop_rule(train_cfg.get("stop", "none"))
    stop: dict[str, Any] = {}

    def evaluation(at: dict[str, Any]) -> bool:
        """A pause in training: the segment's window closes, the evaluation gets its own, training resumes in the next
        unless the stopping rule (train.stop) says the last segments no longer paid for their energy."""
        k = len(points) + 1
        meter.switch(f"eval_{k}")
        trained_j = meter.energy_so_far("train")
        t = time.perf_counter()
        loss = evaluate(model, eval_ids[:n_sub], eval_mask[:n_sub], device, precision, eval_batch)
        eval_s = time.perf_counter() - t
        # NVML's counter updates about every 100 ms: an evaluation shorter than it can resolve is refused at the
        # first point rather than measured as rounding for the rest of the study (the CPU meters resolve ms).
        if k == 1 and meter.coarse_counter:
            tokens = int(eval_mask[:n_sub].sum())
            if problem := short_eval_window(eval_s, tokens, meter.update_period_s, "measured at the first point"):
                raise TrainingError(problem)
        points.append(
            {
                **at,
                "point": k,
                "eval_loss": loss,
                "eval_s": eval_s,
                "eval_tokens": int(eval_mask[:n_sub].sum()),
                "final": False,
                "train_energy_j": trained_j,
            }
        )
        log(
            f"evaluation {k} at {at['real_tokens']:,} real tokens: eval loss {loss:.4f} ({eval_s:.2f} s, outside training)"
        )
        reason = should_stop(points, rule) if rule.rule != "none" else None
        if reason:
            stop.update(stopped_at_point=k, stopped_at_tokens=at["real_tokens"], stop_reason=reason)
            log(f"STOPPED at evaluation {k} ({at['real_tokens']:,} real tokens): {reason} (train.stop)")
            meter.end()  # no further training window
            return True
        meter.switch(f"train_{k + 1}")
        return False

    pace = Pace(steps_planned)
    # At least the meter's settle time since the device last worked, whatever the cooldown: an averaged reading
    # still shows the load or compile for that long, and the idle baseline would read it as idle power.
    time.sleep(max(0.0, meter.settle_s - (time.monotonic() - last_work)))
    meter.open(pace)
    idle_after_s = time.monotonic() - last_work
    idle = meter.window("idle", meter_settings.idle_seconds) if meter_settings.idle_seconds > 0 else None
    check_before = check("before") if check_cfg["windows"] else []
    time.sleep(meter.settle_s)
    diverged = None
    meter.begin("train_1")
    try:
        result = train(
            model,
            ids,
            mask,
            device,
            settings,
            on_log=progress,
            sync=sync,
            forward=forward,
            pace=pace,
            pause_at_tokens=thresholds,
            on_pause=evaluation,
        )
    except Diverged as err:
        if train_cfg["on_divergence"] == "fail":
            meter.end()
            meter.close()
            raise TrainingError(f"budget {budget}, trial {trial}: {err}") from None
        log(f"DIVERGED: budget {budget}, trial {trial}: {err}; recorded as a result (train.on_divergence: record)")
        diverged, result = err, err.partial
    except TrainingError as err:
        meter.end()
        meter.close()
        raise TrainingError(f"budget {budget}, trial {trial}: {err}") from None
    if not result.stopped:
        meter.end()
    check_after = check("after") if check_cfg["windows"] else []
    eval_loss, eval_s = None, 0.0
    if not diverged:
        meter.begin("eval_final")
        t_eval = time.perf_counter()
        eval_loss = evaluate(model, eval_ids, eval_mask, device, precision, eval_batch)
        # The curve's last point on the same eval tokens as its others, so no point of the curve differs from the
        # one before it by the set it was evaluated on; the whole set's loss is the trial's result.
        curve_loss = (
            eval_loss
            if n_sub == len(eval_ids)
            else evaluate(model, eval_ids[:n_sub], eval_mask[:n_sub], device, precision, eval_batch)
        )
        eval_s = time.perf_counter() - t_eval
        meter.end()
        if not math.isfinite(eval_loss):
            meter.close()
            raise TrainingError(f"budget {budget}, trial {trial}: non-finite eval loss {eval_loss}")
        points.append(
            {
                "step": result.n_steps,
                "epoch": settings.epochs,
                "real_tokens": result.real_tokens,
                "train_s": result.train_s,
                "point": len(points) + 1,
                "eval_loss": curve_loss,
                "eval_loss_whole_set": eval_loss,
                "eval_s": eval_s,
                "eval_tokens": int(eval_mask[:n_sub].sum()),
                "final": True,
            }
        )
    energy = meter.close()
    windows = {w["name"]: w for w in energy["windows"]}
    idle_w = (
        None
        if idle is None or windows["idle"]["energy_j"] is None
        else windows["idle"]["energy_j"] / windows["idle"]["duration_s"]
    )
    for w in energy["windows"]:
        if w["note"]:
            log(f"NOTE: window {w['name']}: {w['note']}")
    curve = trial_curve(points, windows, subset["real_tokens"])

    metrics = {
        "budget": budget,
        "trial": trial,
        "levels": dict(levels or {}),
        "cell": cell or f"b{budget}",
        "seed": seed,
        "status": "diverged" if diverged else "ok",
        "started_at_unix_s": started_at,
        **({"diverged_at_step": diverged.step, "diverged_in_epoch": diverged.epoch} if diverged else {}),
        "subset_chunks": subset["n_chunks"],
        "subset_real_tokens": subset["real_tokens"],
        "real_tokens": result.real_tokens,
        "padded_tokens": result.padded_tokens or None,
        "steps": result.n_steps,
        "epochs": settings.epochs,
        "batch_size": settings.batch_size,
        "lr": settings.lr,
        "lr_schedule": settings.schedule.to_dict(),
        "precision": settings.precision,
        "optimizer": result.optimizer,
        "grad_scaler_skips": result.grad_scaler_skips,
        "eval_loss": eval_loss,
        "final_train_loss": result.final_train_loss,
        "eval_tokens": int(eval_mask.sum()),
        "train_s": result.train_s,
        "eval_s": eval_s,
        **cooled,
        "eval_points": len(points),
        "eval_subset_tokens": int(eval_mask[:n_sub].sum()),
        "stop_rule": rule.to_dict(),
        "stopped": result.stopped,
        **stop,
        "settle_s": meter.settle_s,
        "energy_j": energy["energy_j"],
        "idle_power_w": idle_w,
        "idle_seconds": None if idle is None else windows["idle"]["duration_s"],
        "idle_after_s": idle_after_s,
        "meter_choice": why,
        **{k: v for k, v in energy.items() if k not in ("trace", "energy_j")},
        "device": device.type,
        "device_name": device_name(device),
        "device_uuid": meter.static_info().get("meter_device_uuid") or gpu_uuid(device, nvml),
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "threads": train_cfg["threads"],
        **arch,
        "compiled": compiling,
        "compile_s": compile_s,
        "tokenizer_vocab_size": tokenizer["vocab_size"],
        "context": context,
        "check_before_tflops": check_before,
        "check_after_tflops": check_after,
        "versions": versions(),
        "run_s": time.perf_counter() - t_start,
    }
    steps = pl.DataFrame(
        result.steps,
        schema={
            "step": pl.Int64,
            "epoch": pl.Int64,
            "tokens": pl.Int64,
            "loss": pl.Float64,
            "elapsed_s": pl.Float64,
            "tokens_per_s": pl.Float64,
        },
        orient="row",
    )
    return metrics, energy["trace"], steps, curve


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
