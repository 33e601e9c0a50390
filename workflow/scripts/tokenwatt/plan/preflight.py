"""What this machine must offer a study before its first job: checked when the workflow starts, not found in a job.

The config check (``plan.config``) judges what the config says; this module judges what the config asks of the machine
it runs on: the local corpus files exist and can be read, the results folder can be written, the disk has room for the
plan's outputs, the training device is there and the meter can be read. Each finding is one sentence naming the key
and the fix. The device and the meter are ``on_node`` findings: under a cluster executor the jobs run elsewhere, and
the node's job checks them (``measurement.devices`` and ``measurement.meters`` raise the same sentences there).

The Snakefile imports this module at every start: it reads the file system and NVML only, never torch.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..common.installed import NotInstalled, installed_files
from .disk import DiskPlan


@dataclass(frozen=True)
class Finding:
    """One thing this machine cannot do for the study: the config key it concerns and the sentence saying the fix."""

    key: str
    sentence: str
    on_node: bool = False  # depends on the machine the jobs run on: a cluster's node checks it itself


def local_corpus_files(files: Iterable[str]) -> list[Finding]:
    """Each configured local corpus file that is missing, not a file, or unreadable."""
    found = []
    for name in files:
        path = Path(name)
        if not path.exists():
            why = f"{name} does not exist (relative paths are read from {Path.cwd()})"
        elif not path.is_file():
            why = f"{name} is not a file"
        elif not os.access(path, os.R_OK):
            why = f"{name} cannot be read by this user (check its permissions)"
        else:
            continue
        found.append(
            Finding("corpus.local.files", f"corpus.local.files: {why}; fix the path or remove it from the list")
        )
    return found


def package_corpus(distributions: list[str], files: list[str]) -> list[Finding]:
    """Each configured package that is not installed here or has no file that matches."""
    found = []
    for distribution in distributions:
        try:
            installed_files(distribution, files)
        except NotInstalled as err:
            found.append(Finding("corpus.package", str(err)))
    return found


def results_folder(results: str) -> list[Finding]:
    """The results folder, or the nearest folder above it that exists (where it will be made), must be writable."""
    folder = Path(results).absolute()
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if folder.is_dir() and os.access(folder, os.W_OK | os.X_OK):
        return []
    what = "is not a folder" if folder.exists() and not folder.is_dir() else "cannot be written by this user"
    return [
        Finding(
            "results",
            f"results: {folder} {what}, so the study has nowhere to write; set `results` to a folder you can write",
        )
    ]


def free_disk(results: str, plan: DiskPlan, free: Callable[[str], int] | None = None) -> list[Finding]:
    """Whether the disk of the results folder has room for the ``plan``'s bytes (``free``: bytes free at a path)."""
    folder = Path(results).absolute()
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    available = (free or (lambda p: shutil.disk_usage(p).free))(str(folder))
    if available >= plan.total:
        return []
    return [
        Finding(
            "results",
            f"results: the disk of {folder} has {available / 1e6:,.0f} MB free and this plan's outputs need about "
            f"{plan.total / 1e6:,.0f} MB ({plan.describe()}); free space there, or set `results` to a folder on a "
            "larger disk",
        )
    ]


def visible_cuda_devices(nvml: Any = None) -> int:
    """How many CUDA devices a job started here would see: NVML's count, cut as CUDA_VISIBLE_DEVICES cuts it (CUDA
    stops at the first entry that is empty or negative). Zero without NVML (no NVIDIA driver)."""
    try:
        if nvml is None:
            import pynvml as nvml
        nvml.nvmlInit()
        try:
            count = int(nvml.nvmlDeviceGetCount())
        finally:
            nvml.nvmlShutdown()
    except Exception:  # noqa: BLE001 - pynvml missing, no driver, no device: nothing a job could train on
        return 0
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return count
    listed = 0
    for entry in visible.split(","):
        if not entry.strip() or entry.strip().startswith("-"):
            break
        listed += 1
    return min(count, listed)


def training_devices(devices: Iterable[str], cuda_count: int) -> list[Finding]:
    """Each training device (train.device, or a design.hardware level's device) that this machine does not have."""
    found = []
    for name in sorted(set(devices)):
        if not name.startswith("cuda"):
            continue  # cpu, and auto, which takes the CPU where no GPU is
        index = int(name[5:]) if name.startswith("cuda:") else 0
        if index < cuda_count:
            continue
        have = "no CUDA device is visible here" if not cuda_count else f"only {cuda_count} CUDA device(s) are visible"
        found.append(
            Finding(
                "train.device",
                f"train.device (or a design.hardware level's device) is {name} but {have}; use train.device: cpu or "
                "auto, or run the study where that GPU is",
                on_node=True,
            )
        )
    return found


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity, as SLURM's cpus_per_task or taskset set it)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def rank_devices(wanted: Mapping[str, int], cuda_count: int, cpus: int) -> list[Finding]:
    """Each training device whose trials ask for more devices (train.devices, a design.devices level) than this machine
    has: GPUs for a CUDA trial (auto trains on CUDA where a GPU is visible), CPUs for a CPU trial's ranks (one core
    each at least). A level pinned to one GPU (cuda:K) cannot have several."""
    found = []
    for name, count in sorted(wanted.items()):
        if count <= 1:
            continue
        if name.startswith("cuda:"):
            why = f"{name} is one GPU"
        elif name == "cuda" or (name == "auto" and cuda_count):
            if count <= cuda_count:
                continue
            why = f"only {cuda_count} CUDA device(s) are visible here"
        else:
            if count <= cpus:
                continue
            why = f"its ranks train on the CPU, and only {cpus} CPU(s) are usable here"
        found.append(
            Finding(
                "train.devices",
                f"train.devices (or a design.devices level) asks for {count} devices on {name}, but {why}; lower it, or "
                "run the study where that many are (and pass --resources gpu=N to a local run)",
                on_node=True,
            )
        )
    return found


def meter_kind(meter: Mapping[str, Any], devices: Iterable[str], cuda_count: int) -> list[Finding]:
    """Whether ``meter.kind`` can be read here: RAPL counters readable under meter.rapl_root, a GPU's meter (a row of
    measurement.kinds.TABLE metering ``cuda``) with a GPU to read and no trial on the CPU (kinds.refusal). The
    estimate and none always can; auto takes measurement.kinds.auto_choice's kind: on a CPU it falls back to the
    estimate where RAPL cannot be read, on a CUDA device it needs NVML, whose GPU ``training_devices`` asks for."""
    from ..measurement.kinds import gpu_kind, refusal

    kind = meter["kind"]
    if kind == "auto":  # auto takes what works, NVML where a GPU trains (training_devices checks there is one)
        return []
    if kind == "rapl":
        from ..measurement.cpu_meters import rapl_domains  # the domains the RAPL meter reads

        root = Path(meter["rapl_root"])
        counters = [d / "energy_uj" for d in rapl_domains(root)]
        if rapl_readable(root):
            return []
        why = (
            f"its counters under {root} cannot be read by this user (Linux lets only root read them by default)"
            if counters
            else f"there are no RAPL counters under {root} (meter.rapl_root)"
        )
        return [
            Finding(
                "meter.kind",
                f"meter.kind is rapl but {why}; use meter.kind: estimate or auto, or make energy_uj readable",
                on_node=True,
            )
        ]
    # train.device auto trains on CUDA wherever a GPU is visible, so only an explicit cpu rules a GPU's meter out.
    cpu_trials = [d for d in devices if d != "auto" and refusal(kind, on_gpu=d.startswith("cuda"))]
    if gpu_kind(kind) and (not cuda_count or cpu_trials):
        why = "no NVIDIA GPU is visible here" if not cuda_count else "some trials train on the CPU (train.device)"
        return [
            Finding(
                "meter.kind",
                f"meter.kind is {kind} but {why}; use meter.kind: auto (NVML where a GPU trains, else RAPL or the "
                "estimate), or train.device: cuda",
                on_node=True,
            )
        ]
    return []


def rapl_readable(root: str | Path) -> bool:
    """Whether RAPL's package counters under ``root`` exist and this user can read them."""
    from ..measurement.cpu_meters import rapl_domains  # the domains the RAPL meter reads

    counters = [d / "energy_uj" for d in rapl_domains(root)]
    return bool(counters) and all(os.access(c, os.R_OK) for c in counters)


def machine_findings(
    meter: Mapping[str, Any],
    devices: Mapping[str, int],
    nvml: Any = None,
    cpus: int | None = None,
) -> list[Finding]:
    """The device and meter findings; ``devices``: each training device and the most devices its trials ask for (asks
    NVML only when a GPU or NVML is configured, or several devices on auto)."""
    names = list(devices)
    from ..measurement.kinds import gpu_kind

    wants_gpu = (
        gpu_kind(meter["kind"])
        or any(d.startswith("cuda") for d in names)
        or any(d == "auto" and n > 1 for d, n in devices.items())
    )
    cuda_count = visible_cuda_devices(nvml) if wants_gpu else 0
    return (
        training_devices(names, cuda_count)
        + rank_devices(devices, cuda_count, usable_cpus() if cpus is None else cpus)
        + meter_kind(meter, names, cuda_count)
    )


def report(findings: list[Finding]) -> str:
    return "\n  ".join(f.sentence for f in findings)
