"""Trial records as a trial writes them (schema-valid), and the aggregation of a list of them."""

from __future__ import annotations

import numpy as np
import polars as pl

QUALITY = dict(
    throughput_tolerance=0.1,
    steady_tolerance=0.25,
    steady_window=3,
    check_tolerance=0.15,
    profile_cv_max=0.1,
    idle_tolerance=0.25,
    idle_floor_w=2.0,
    power_step_tolerance=0.25,
    power_step_window=5,
    power_step_window_s=0.5,
    min_samples=60,
    max_interval_ratio=1.5,
    start_below_c=None,
)
METRIC = {"K": 1.0, "tt_scale": 1e6, "cs_tflops": "measure"}
COST = {
    "carbon_intensity": None,
    "pue": 1.0,
    "electricity_price_per_kwh": None,
    "device_hour_price": None,
    "currency": "EUR",
}


def raw_record(budget: int, trial: int, **overrides) -> dict:
    """What one trial records: measurements only, every required key of metrics.schema.yaml."""
    rec = {
        "budget": budget,
        "trial": trial,
        "levels": {},
        "cell": f"b{budget}",
        "seed": trial,
        "status": "ok",
        "started_at_unix_s": 1e9 + budget + trial,
        "real_tokens": 3 * budget,
        "padded_tokens": 3 * budget + 30,
        "steps": 3 * budget // 64,
        "epochs": 3,
        "batch_size": 1,
        "lr": 0.003,
        "precision": "fp32",
        "optimizer": "adamw-fused",
        "eval_loss": 2.5,
        "final_train_loss": 2.6,
        "train_s": 3 * budget / 10_000,
        "energy_j": 32.0 * 3 * budget / 10_000,
        "idle_power_w": 1.0,
        "meter": "estimate",
        "meter_is_estimate": True,
        "meter_note": "ESTIMATE",
        "duration_s": 3 * budget / 10_000,
        "power_rms_w": 32.0,
        "power_mean_w": 32.0,
        "power_max_w": 33.0,
        "samples": 100,
        "samples_with_power": 100,
        "sample_errors": 0,
        "interval_requested_s": 0.05,
        "interval_achieved_s": 0.05,
        "device": "cpu",
        "device_name": "Test CPU",
        "threads": 1,
        "params": 84_128,
        "embedding_params": 32_768,
        # a CPU process's peak resident set over training (~360 MB: interpreter and torch) above what the weights,
        # gradients and AdamW's fp32 moments hold (16 B a parameter)
        "peak_memory_bytes": 358_907_904 + 4096 * trial,
        "model_bytes": 4 * 84_128,
        "gradient_bytes": 4 * 84_128,
        "optimizer_state_bytes": 8 * 84_128,
        "n_layers": 2,
        "hidden_size": 32,
        "vocab_size": 1024,
        "context": 64,
        "implementation": "native",
        "compiled": False,
        "compile_s": None,
        "check_before_tflops": [0.15] * 3,
        "check_after_tflops": [0.15] * 3,
        "versions": {"torch": "2.13"},
        "run_s": 5.0,
    }
    return {**rec, **overrides}


def steady_trace(n: int = 100) -> pl.DataFrame:
    return pl.DataFrame(
        {"t_s": np.arange(n) * 0.05, "power_w": np.full(n, 32.0), "temperature_c": [None] * n},
        schema={"t_s": pl.Float64, "power_w": pl.Float64, "temperature_c": pl.Float64},
    )


def steady_steps(n: int = 6) -> pl.DataFrame:
    return pl.DataFrame(
        {"step": np.arange(1, n + 1) * 10, "tokens": np.arange(1, n + 1) * 1000, "elapsed_s": np.arange(1, n + 1) * 0.1}
    )


def aggregate(
    records: list,
    expected: list[tuple[int | str, int]],
    *,
    cs_tflops: float = 0.15,
    metric: dict | None = None,
    quality: dict | None = None,
    traces: list | None = None,
    steps: list | None = None,
    cost: dict | None = None,
    intensity: float | None = None,
    exclude_flagged: bool = False,
):
    """trials_table over records with steady traces and loss curves unless given, its analysis frame marked as the
    aggregate rule marks it; ``expected`` names each trial's cell by its id or, in a one-factor study, by its budget."""
    from tokenwatt.analysis.aggregate import trials_table
    from tokenwatt.analysis.frame import mark

    n = len(expected)
    expected = [(f"b{cell}" if isinstance(cell, int) else cell, trial) for cell, trial in expected]
    trials, missing = trials_table(
        records,
        expected,
        traces=traces or [steady_trace()] * n,
        steps=steps or [steady_steps()] * n,
        cs_tflops=cs_tflops,
        metric=metric or METRIC,
        quality=quality or QUALITY,
        reference_tflops=cs_tflops,
        cost=cost or COST,
        intensity_g_per_kwh=intensity,
    )
    return mark(trials, dict.fromkeys(c for c, _ in expected), exclude_flagged), missing
