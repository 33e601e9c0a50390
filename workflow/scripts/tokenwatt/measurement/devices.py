"""Which device a process trains on, how to wait for it, and which physical GPU it is."""

from __future__ import annotations

import os
import platform
from collections.abc import Callable
from pathlib import Path

import torch

# Mixed precisions autocast to these dtypes; fp32 runs without autocast.
PRECISIONS = {"fp32": None, "fp16-mixed": torch.float16, "bf16-mixed": torch.bfloat16}


class DeviceError(RuntimeError):
    pass


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise DeviceError(f"train.device is {name} but no CUDA device is visible; use train.device: cpu or auto")
    if name.startswith("cuda:") and int(name[5:]) >= torch.cuda.device_count():
        raise DeviceError(
            f"the hardware level's device is {name} but only {torch.cuda.device_count()} CUDA device(s) are visible"
        )
    return torch.device(name)


def make_deterministic(device: torch.device, compiling: bool) -> None:
    """Same seed, same training: deterministic kernels everywhere the trial runs.

    ``torch.use_deterministic_algorithms`` also sets inductor's deterministic flag, and importing
    inductor's config pulls in torch._dynamo (1.3 s of every trial's start on a 2-core machine);
    an eager trial sets the same switch on ATen alone.

    On CUDA that takes three more settings: cuBLAS's fixed workspace (read when its handle is
    made, so before the first matmul), no cuDNN autotuning, and scaled-dot-product attention
    on the math kernel. The cuDNN, flash and memory-efficient attention backwards accumulate in
    a varying order (seen on an H200: PyTorch warns of cuDNN attention in bf16); at the short
    contexts of these studies the math kernel costs little.
    """
    if compiling:
        torch.use_deterministic_algorithms(True, warn_only=True)
    else:
        torch._C._set_deterministic_algorithms(True, warn_only=True)
    if device.type == "cuda":
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.backends.cudnn.benchmark = False
        torch.backends.cudnn.deterministic = True
        torch.backends.cuda.enable_cudnn_sdp(False)
        torch.backends.cuda.enable_flash_sdp(False)
        torch.backends.cuda.enable_mem_efficient_sdp(False)
        torch.backends.cuda.enable_math_sdp(True)


def compute_dtype(precision: str) -> torch.dtype:
    """The dtype the matmuls of a precision run in: the one the device profile measures."""
    return PRECISIONS[precision] or torch.float32


def device_sync(device: torch.device) -> Callable[[], None]:
    return torch.cuda.synchronize if device.type == "cuda" else (lambda: None)


def cpu_model_name() -> str:
    """The CPU's marketing name from /proc/cpuinfo (Linux), else what platform knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def device_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else cpu_model_name()


def visible_gpu_uuid(nvml, cuda_index: int, visible: str | None) -> str:
    """NVML UUID of the GPU that CUDA calls ``cuda_index`` in this process.

    CUDA_VISIBLE_DEVICES (set by SLURM and by users) renumbers GPUs: its i-th entry, an NVML
    index or a UUID, is CUDA device i. Used when torch cannot report the device's UUID.
    """
    entries = [e.strip() for e in visible.split(",") if e.strip()] if visible else []
    entry = entries[cuda_index] if entries else str(cuda_index)
    if entry.startswith(("GPU-", "MIG-")):
        return entry
    uuid = nvml.nvmlDeviceGetUUID(nvml.nvmlDeviceGetHandleByIndex(int(entry)))
    return uuid.decode() if isinstance(uuid, bytes) else uuid


def _nvml_knows(nvml, uuid: str) -> bool:
    try:
        nvml.nvmlDeviceGetHandleByUUID(uuid)
    except nvml.NVMLError:
        return False
    return True


def gpu_uuid(device: torch.device, nvml=None) -> str | None:
    """NVML UUID of the CUDA device this process uses (None on a CPU).

    torch reports the device's UUID without NVML's prefix: "GPU-" for a whole GPU, "MIG-" for a MIG slice, so the
    prefix is the one NVML knows (a slice named "GPU-…" would match no device and leave the trial unmetered).
    CUDA_VISIBLE_DEVICES is the fallback where torch reports none; without NVML, the whole-GPU form is a guess.
    """
    if device.type != "cuda":
        return None
    bare = str(getattr(torch.cuda.get_device_properties(device), "uuid", "") or "")
    try:
        if nvml is None:
            import pynvml as nvml
        nvml.nvmlInit()
    except Exception:  # no NVML here: nothing to match against, and no NVML meter either
        return bare if bare.startswith(("GPU-", "MIG-")) or not bare else f"GPU-{bare}"
    if bare:
        candidates = [bare] if bare.startswith(("GPU-", "MIG-")) else [f"GPU-{bare}", f"MIG-{bare}"]
        for candidate in candidates:
            if _nvml_knows(nvml, candidate):
                return candidate
    return visible_gpu_uuid(nvml, device.index or 0, os.environ.get("CUDA_VISIBLE_DEVICES"))
