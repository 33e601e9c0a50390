"""The meter kinds a config may name, and what ``auto`` takes on a device: decided here once, for the config check, the
pre-flight check and the meter a trial makes (meters.make_meter).

kinds: ``auto``, ``nvml``, ``rapl``, ``estimate``, ``none`` (meters.py says what each records). The schema's enums
are checked against KINDS (``meter.kind``) and CPU_KINDS (``selection.meter``: the data steps run on the CPU).
"""

from __future__ import annotations

KINDS = ("auto", "nvml", "rapl", "estimate", "none")
CPU_KINDS = tuple(kind for kind in KINDS if kind != "nvml")


def auto_choice(device_type: str) -> str:
    """What ``meter.kind: auto`` takes on a training device (``cuda``, ``cuda:1``, ``cpu``): NVML on a CUDA device and
    nothing else, since a CPU meter there would measure the host, not the GPU doing the work; on a CPU RAPL, or the
    estimate where RAPL cannot be read (NVML would measure a GPU that is not doing the work)."""
    return "nvml" if device_type.startswith("cuda") else "rapl"


def chosen_kind(kind: str, device_type: str) -> str:
    """The kind a trial on ``device_type`` meters with: ``kind`` itself, or auto's choice."""
    return auto_choice(device_type) if kind == "auto" else kind
