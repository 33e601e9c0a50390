"""The plan's memory arithmetic: each cell's weights, gradients and optimizer state (``optimizers.floor_bytes``)
against the training device's memory, warned of before any job. A floor, not a forecast: activations, autocast's
half-precision weight copies and the allocator's slack come on top (docs/factorial-designs.md works the reference
protocol through), so a trial over it cannot fit, and one under it may still not.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from .design import Design, series_label
from .disk import model_parameters
from .optimizers import floor_bytes, normalized
from .preflight import visible_cuda_devices

GB = 1e9


def gpu_memory_bytes(nvml: Any = None) -> int | None:
    """NVML's total memory of the first visible GPU, or None without one."""
    if not visible_cuda_devices(nvml):
        return None
    try:
        if nvml is None:
            import pynvml as nvml
        nvml.nvmlInit()
        try:
            return int(nvml.nvmlDeviceGetMemoryInfo(nvml.nvmlDeviceGetHandleByIndex(0)).total)
        finally:
            nvml.nvmlShutdown()
    except Exception:  # noqa: BLE001 - no driver or no memory query: the plan cannot say, and stays quiet
        return None


def host_memory_bytes() -> int | None:
    """This machine's physical memory (a CPU trial's device)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def device_memory(config: Mapping[str, Any], on_gpu: bool, nvml: Any = None) -> tuple[int | None, str]:
    """The bytes a trial's device holds and where that figure comes from: plan.device_memory_gb, else NVML's total
    for a study on a GPU, else this machine's memory."""
    if (given := config["plan"].get("device_memory_gb")) is not None:
        return round(given * GB), "plan.device_memory_gb"
    if on_gpu:
        return gpu_memory_bytes(nvml), "NVML's total of the first visible GPU"
    return host_memory_bytes(), "this machine's physical memory"


def memory_warnings(design: Design, on_gpu: bool, nvml: Any = None) -> list[str]:
    """One warning per cell whose weights, gradients and optimizer state alone exceed the device's memory; none where
    the model's size or the device's memory is not known here (pretrained weights; no GPU visible to the plan)."""
    available, source = device_memory(design.config, on_gpu, nvml)
    if available is None:
        return []
    warnings = []
    for cell in {c.series: c for c in design.cells}.values():  # the budget changes nothing held
        params = model_parameters(design.model_config(cell), design.tokenizer_config(design.tokenizer_key(cell)))
        optimizer = normalized(design.train_config(cell)["optimizer"])
        if params is None or (needed := floor_bytes(params, optimizer)) <= available:
            continue
        where = series_label(cell.series) if cell.levels else "every trial"
        warnings.append(
            f"WARNING: {where}: {params / 1e6:,.1f} M parameters hold {needed / GB:,.1f} GB in fp32 weights, gradients "
            f"and {optimizer['kind']} state before any activation, over the device's {available / GB:,.1f} GB "
            f"({source}); such a trial fails out of memory. Choose a smaller model (model.preset), an optimizer "
            "with smaller state (train.optimizer: adamw-8bit or adamw-4bit), or a device with more memory"
        )
    return warnings
