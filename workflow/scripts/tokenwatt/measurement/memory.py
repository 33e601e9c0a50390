"""A trial's peak memory over its training, and the bytes its weights, gradients and optimizer state account for.

On CUDA, the caching allocator's own counters: ``max_memory_allocated`` (tensors) and ``max_memory_reserved`` (what
the allocator held from the driver), reset when training starts, its cache of unused blocks emptied first. On a CPU
there is no allocator to ask: the figure is the process's peak resident set (the kernel's VmHWM), reset when training
starts by writing 5 to /proc/self/clear_refs (Linux 4.0 on), so that the import, the data and the model's build before
it do not count. It is the whole process's (interpreter, torch, the trial's tensors), exact where a sampled RSS would
miss a peak between two samples (to the kernel's counters' few pages); the resident set at the start is recorded beside
it, and the training's own growth is the difference. A resumed or branched trial's window opens again once its saved
state is loaded into the model and optimizer and the copy read from the file is let go (``TrainHooks.loaded``), so
that copy never counts; its start then holds the loaded optimizer state. Where the reset is refused (another kernel,
a sandbox), VmHWM is the peak since the process started and ``peak_memory_method`` says so. Either way the window is
the whole training call, its evaluation pauses included (an evaluation batch can be larger than a training batch, and
schedule-free's evaluation keeps a copy of the weights it steps from: 4 bytes per fp32 parameter, not its state).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

STATUS = Path("/proc/self/status")
CLEAR_REFS = Path("/proc/self/clear_refs")


def _status_bytes(field: str) -> int | None:
    """A ``kB`` line of /proc/self/status in bytes (None off Linux)."""
    try:
        for line in STATUS.read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


class PeakMemory:
    """``start`` at the training's start, ``read`` at its end: the device's peak memory in between."""

    def __init__(self, device: torch.device) -> None:
        self.device, self.method, self.at_start = device, "", None

    def start(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            # the blocks the warm-up, compile and throughput check left cached stay reserved, and a reset sets the
            # reserved peak to what is reserved now: released first, the reserved peak is the training's own
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(self.device)
            self.method, self.at_start = "cuda-allocator", torch.cuda.memory_allocated(self.device)
            return
        try:
            CLEAR_REFS.write_text("5")  # resets VmHWM to the resident set now
            self.method = "vmhwm-reset-at-training"
        except OSError:
            self.method = "vmhwm-since-process-start"
        self.at_start = _status_bytes("VmRSS")

    def read(self) -> dict[str, Any]:
        """The record's peak memory keys (metrics.schema.yaml)."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            peak = torch.cuda.max_memory_allocated(self.device)
            reserved = torch.cuda.max_memory_reserved(self.device)
        else:
            peak, reserved = _status_bytes("VmHWM"), None
            if peak is not None and self.at_start is not None:
                # The kernel's resident-set counters are approximate (per-CPU, summed lazily), so two reads taken apart
                # can disagree by some pages: a window that grew little past its start (a resumed trial whose state is
                # all loaded before it opens) read a VmHWM 11 pages below its VmRSS at the start. A window's peak is
                # never below its start.
                peak = max(peak, self.at_start)
        return {
            "peak_memory_bytes": peak,
            "peak_memory_reserved_bytes": reserved,
            "memory_at_start_bytes": self.at_start,
            "peak_memory_method": self.method if peak is not None else "unavailable",
        }


def accounted_bytes(model: torch.nn.Module, optimizer_state_bytes: int | None) -> dict[str, Any]:
    """What the peak holds at the least: the weights, a gradient per trainable weight (its dtype) and the optimizer's
    state (``optim.state_bytes`` of its saved state), and that state per parameter."""
    params = list(model.parameters())
    weights = sum(p.numel() * p.element_size() for p in params)
    gradients = sum(p.numel() * p.element_size() for p in params if p.requires_grad)
    count = sum(p.numel() for p in params if p.requires_grad)
    return {
        "model_bytes": weights,
        "gradient_bytes": gradients,
        "optimizer_state_bytes": optimizer_state_bytes,
        "optimizer_state_bytes_per_parameter": None
        if optimizer_state_bytes is None or not count
        else optimizer_state_bytes / count,
    }
