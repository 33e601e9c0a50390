"""Dense matmul throughput of a device: the study's CS_TFLOPS, measured once per study as a
device profile, and the short checks each trial takes before and after training.

CS_TFLOPS is a property of the device, not of a trial: one long profile (warm-up, then many
timed windows, median and IQR) gives the constant; the per-trial checks only show drift.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch


def timed_windows(
    op: Callable[[], None],
    flops_per_op: float,
    *,
    window_s: float,
    windows: int,
    sync: Callable[[], None] = lambda: None,
    clock: Callable[[], float] = time.perf_counter,
) -> list[float]:
    """TFLOP/s of ``windows`` back-to-back windows, each at least ``window_s`` long.

    A window ends at the first synchronised op after ``window_s``; the device is synchronised at
    both ends, so queued work never leaks from one window into the next.
    """
    out = []
    for _ in range(windows):
        sync()
        n, start = 0, clock()
        while True:
            op()
            n += 1
            sync()
            elapsed = clock() - start
            if elapsed >= window_s:
                out.append(flops_per_op * n / elapsed / 1e12)
                break
    return out


def summarise(tflops: list[float]) -> dict[str, Any]:
    """Median, quartiles, IQR and coefficient of variation of window throughputs."""
    x = np.asarray(tflops, dtype=float)
    q25, median, q75 = (float(v) for v in np.percentile(x, [25, 50, 75]))
    return {
        "median_tflops": median,
        "q25_tflops": q25,
        "q75_tflops": q75,
        "iqr_tflops": q75 - q25,
        "cv": float(x.std(ddof=1) / x.mean()) if len(x) > 1 and x.mean() > 0 else None,
        "windows": len(x),
        "windows_tflops": [float(v) for v in x],
    }


def matmul_op(device: torch.device, dtype: torch.dtype, size: int) -> tuple[Callable[[], None], float]:
    """One square matmul in ``dtype`` on ``device`` (fixed-seed operands) and its FLOPs."""
    gen = torch.Generator(device="cpu").manual_seed(0)
    a = torch.randn(size, size, generator=gen).to(device=device, dtype=dtype)
    b = torch.randn(size, size, generator=gen).to(device=device, dtype=dtype)
    out = torch.empty(size, size, device=device, dtype=dtype)
    return (lambda: torch.matmul(a, b, out=out)), 2.0 * size**3


@dataclass(frozen=True)
class ThroughputCheck:
    """The throughput check a trial takes right before and right after training, a diagnostic of drift against the
    device profile: ``windows`` timed windows of at least ``window_s`` seconds of ``matmul_size`` matmuls (the rule's
    ``profile.matmul_size``, ``profile.window_s`` and ``profile.check_windows``); no windows, no check."""

    matmul_size: int
    window_s: float
    windows: int


def measure_throughput(
    device: torch.device,
    dtype: torch.dtype,
    *,
    size: int,
    window_s: float,
    windows: int,
    warmup_s: float,
    sync: Callable[[], None],
) -> dict[str, Any]:
    """Warm up for ``warmup_s`` (kernel choice, clocks, caches), then time ``windows`` windows."""
    op, flops = matmul_op(device, dtype, size)
    if warmup_s > 0:
        timed_windows(op, flops, window_s=warmup_s, windows=1, sync=sync)
    return {
        **summarise(timed_windows(op, flops, window_s=window_s, windows=windows, sync=sync)),
        "matmul_size": size,
        "window_s": window_s,
        "warmup_s": warmup_s,
        "dtype": str(dtype).removeprefix("torch."),
    }


def profile_device(
    *,
    device_name: str,
    precision: str,
    threads: int,
    size: int,
    window_s: float,
    windows: int,
    warmup_s: float,
    max_cv: float = float("inf"),
    attempts: int = 1,
    nvml=None,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """The device profile record: CS_TFLOPS (median of the windows) and its spread, with the GPU's
    temperature, SM clock and power before and after where NVML can read them.

    A profile whose windows vary more than ``max_cv`` was probably measured beside another load;
    it is measured again, up to ``attempts`` times, and the steadiest attempt is kept.
    """
    from .devices import compute_dtype, device_sync, gpu_uuid, resolve_device
    from .devices import device_name as name_of

    torch.set_num_threads(threads)
    device = resolve_device(device_name)
    snapshot = _nvml_snapshot(device, nvml, log)
    before = snapshot()
    tried = []
    for attempt in range(1, attempts + 1):
        tried.append(
            measure_throughput(
                device,
                compute_dtype(precision),
                size=size,
                window_s=window_s,
                windows=windows,
                warmup_s=warmup_s,
                sync=device_sync(device),
            )
        )
        cv = tried[-1]["cv"] or 0.0
        log(f"attempt {attempt}: median {tried[-1]['median_tflops']:.4g} TFLOP/s, CV {100 * cv:.1f} %")
        if cv <= max_cv:
            break
    measured = min(tried, key=lambda m: m["cv"] or 0.0)
    after = snapshot()
    log(
        f"CS_TFLOPS {measured['median_tflops']:.4g} (IQR {measured['iqr_tflops']:.3g}, {windows} windows of {window_s:g} s, "
        f"{measured['dtype']}, {name_of(device)})"
    )
    return {
        "cs_tflops": measured["median_tflops"],
        **measured,
        "precision": precision,
        "device": device.type,
        "device_name": name_of(device),
        "device_uuid": gpu_uuid(device, nvml),
        "threads": threads,
        "attempts": len(tried),
        "attempt_cvs": [m["cv"] for m in tried],
        "max_cv": max_cv,
        **{f"{k}_before": v for k, v in before.items()},
        **{f"{k}_after": v for k, v in after.items()},
    }


def _nvml_snapshot(device: torch.device, nvml, log: Callable[[str], None]) -> Callable[[], dict[str, Any]]:
    """Reads the GPU's power, temperature, SM clock and utilisation; nothing on a CPU or without NVML."""
    if device.type != "cuda":
        return dict
    from .devices import gpu_uuid
    from .nvml import NvmlReader

    try:
        if nvml is None:
            import pynvml as nvml
        return NvmlReader(nvml, gpu_uuid(device, nvml)).sample
    except Exception as err:  # the profile stands without them; say why they are missing
        log(f"NVML unavailable for the device profile ({type(err).__name__}: {err}); no temperature or clocks recorded")
        return dict
