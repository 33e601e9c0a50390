"""Which meter a trial takes: its settings (``meter.*``) and ``make_meter``, a meter session (``meter.py``) over the
reader ``kinds.make_reader`` chooses from the table of kinds (``kinds.py``, which lists what each kind records).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .kinds import Place, make_reader
from .meter import Meter, Polling, no_sync


@dataclass(frozen=True)
class MeterSettings:
    """The ``meter.*`` config (config/README.md): how a meter is chosen and polls, and what a trial does around it
    (cooldown, idle baseline). Built once from the config section, ``MeterSettings(**config["meter"])``; the defaults
    are the ones a caller outside the workflow (a test, a benchmark) may leave out."""

    kind: str
    interval_s: float
    cpu_tdp_w: float
    rapl_root: str
    target_samples: int = 0
    idle_seconds: float = 0.0
    cooldown_s: float = 0.0
    cooldown_below_c: float | None = None
    cooldown_timeout_s: float = 0.0
    # the most devices any trial of the study trains on (Design.meter_extra): auto decides by it, once for the study
    study_devices: int = 1


def make_meter(
    settings: MeterSettings,
    device_type: str,
    *,
    gpu_uuid: str | None = None,
    nvml=None,
    sync: Callable[[], None] = no_sync,
    ranks: int = 1,
) -> tuple[Meter, str]:
    """The meter ``settings`` ask for on ``device_type`` and a line saying why its kind was chosen (logged and recorded
    as ``meter_choice``). A trial on several devices (``ranks`` > 1) has one meter per rank, each of its own device
    (NVML by its UUID, the estimate of its own process); ``kinds.make_reader`` says which kinds may run so."""
    place = Place(device_type, gpu_uuid=gpu_uuid, nvml=nvml, ranks=ranks)
    reader, why = make_reader(settings.kind, settings, place, study_devices=settings.study_devices)
    # Sampling sized to the trial: about target_samples samples over training, whatever its length.
    return Meter(reader, Polling(settings.interval_s, sync, settings.target_samples)), why
