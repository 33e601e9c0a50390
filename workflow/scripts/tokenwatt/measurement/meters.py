"""Which meter a trial takes: its settings (``meter.*``) and ``make_meter``, which chooses the kind and says why.

kinds recorded in the outputs:
  nvml-energy  NVML total-energy counter (Volta+), power polled alongside
  nvml-power   NVML power polled and integrated (GPUs without the counter, or it failed)
  rapl         Linux powercap energy_uj counters (CPU package), wrap-around handled
  estimate     CPU TDP × this process's CPU utilisation: an ESTIMATE, not a measurement
  none         nothing measured: energy and power are null, never 0

The session every kind shares is ``meter.py``; the kinds are ``nvml.py`` and ``cpu_meters.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .cpu_meters import EstimateMeter, RaplMeter
from .kinds import auto_choice
from .meter import Meter, MeterError, NullMeter, no_sync
from .nvml import NvmlMeter


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
    """The meter ``settings`` ask for and a line saying why it was chosen (logged and recorded as ``meter_choice``).

    ``auto`` on a CUDA device takes NVML and nothing else: a CPU meter there would measure the host, not the GPU
    doing the work, so an NVML that does not work fails the trial with the reason rather than falling back. On a
    CPU it takes RAPL if readable, else the estimate (NVML would measure a GPU that is not doing the work).

    A trial on several devices (``ranks`` > 1) has one meter per rank, each of its own device (NVML by its UUID, the
    estimate of its own process): RAPL reads the whole CPU package, which every rank would count again, so it is
    refused there (the config check refuses it before any job) and ``auto`` takes the estimate, on a CPU for every
    trial of a study with multi-device trials (``settings.study_devices``), one-device ones included: its device
    levels are compared metered alike.
    """
    if ranks > 1 and settings.kind == "rapl":
        raise MeterError(
            f"meter.kind rapl reads the whole CPU package, and each of this trial's {ranks} ranks would count it: "
            "use meter.kind estimate (or auto) for a trial on several CPU ranks"
        )
    # Sampling sized to the trial: about target_samples samples over training, whatever its length.
    polling = (settings.interval_s, sync, settings.target_samples)

    def nvml_meter():
        if gpu_uuid is None:
            raise MeterError("meter.kind nvml needs a CUDA device (train.device: cuda)")
        module = nvml
        if module is None:
            import pynvml as module
        return NvmlMeter(module, gpu_uuid, *polling)

    kind = settings.kind
    makers = {
        "nvml": nvml_meter,
        "rapl": lambda: RaplMeter(settings.rapl_root, *polling),
        "estimate": lambda: EstimateMeter(settings.cpu_tdp_w, *polling),
        "none": lambda: NullMeter(*polling),
    }
    if kind != "auto":
        try:
            return makers[kind](), f"meter.kind {kind}"
        except Exception as err:
            raise MeterError(f"meter.kind is {kind!r} but it cannot be used here: {err}") from err
    if auto_choice(device_type) == "nvml":
        try:
            return nvml_meter(), "meter.kind auto chose nvml"
        except Exception as err:
            raise MeterError(
                f"meter.kind is 'auto' on a CUDA device but NVML cannot meter it: {err}. A CPU meter would measure the "
                "host, not the GPU, so none is taken in its place: check the driver and nvidia-ml-py (nvidia-smi must "
                "list the GPU), or set meter.kind: none to train without energy"
            ) from err
    if max(ranks, settings.study_devices) > 1:
        return makers["estimate"](), (
            "meter.kind auto chose estimate, an ESTIMATE, per rank, for every trial of this study: RAPL reads the "
            f"whole package, which each of a trial's ranks would count (up to {settings.study_devices} here)"
        )
    try:
        return makers["rapl"](), "meter.kind auto chose rapl"
    except Exception as err:
        return makers[
            "estimate"
        ](), f"meter.kind auto chose estimate, an ESTIMATE, because no real meter works here: rapl unavailable: {err}"
