"""The meter kinds, in one table (``TABLE``): a row per kind says what it reads, the device it meters, whether each
rank of a multi-device trial may run one, how its reader is made and why it is refused where it cannot run. The
config check (the schema's enums, ``KINDS`` and ``CPU_KINDS``), the pre-flight checks, ``auto`` and ``make_reader``
all read it, and every refusal of a kind is ``refusal`` here. A new kind is its reader module, one row and its test
(``tests/test_meters.py`` adds one in the test alone).

kinds recorded in the outputs:
  nvml-energy  NVML total-energy counter (Volta+), power polled alongside
  nvml-power   NVML power polled and integrated (GPUs without the counter, or it failed)
  rapl         Linux powercap energy_uj counters (CPU package), wrap-around handled
  estimate     CPU TDP × this process's CPU utilisation: an ESTIMATE, not a measurement
  none         nothing measured: energy and power are null, never 0
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .cpu_meters import EstimateReader, RaplReader
from .meter import MeterError, NullReader, Reader
from .nvml import NvmlReader

if TYPE_CHECKING:  # meters.py imports this module; the settings are only read here
    from .meters import MeterSettings


@dataclass(frozen=True)
class Place:
    """Where a reader is made: the trial's device (``cuda``, ``cuda:1``, ``cpu``), its GPU's UUID and the NVML module
    (``pynvml``, or a test's fake; None imports pynvml), and how many ranks the trial has."""

    device_type: str
    gpu_uuid: str | None = None
    nvml: Any = None
    ranks: int = 1


@dataclass(frozen=True)
class MeterKind:
    """One row of the table: a kind a config may name."""

    name: str
    reads: str
    # The device it meters: "cuda" (refused where a trial or a data step runs on the CPU), "cpu" (the host's), or ""
    # (nothing). ``auto`` takes the first row of the trial's device that works, in table order.
    device: str
    # Whether each rank of a multi-device trial may run one; ``per_rank_refusal`` says why not ({ranks} is filled in).
    per_rank: bool
    make: Callable[[MeterSettings, Place], Reader]
    per_rank_refusal: str = ""


def _nvml_reader(settings: MeterSettings, place: Place) -> Reader:
    nvml = place.nvml
    if nvml is None:
        import pynvml as nvml  # only where a GPU is metered: a CPU trial runs without it
    return NvmlReader(nvml, place.gpu_uuid)


TABLE: dict[str, MeterKind] = {
    row.name: row
    for row in (
        MeterKind("nvml", "the GPU's energy counter and power, through NVML", "cuda", True, _nvml_reader),
        MeterKind(
            "rapl",
            "the CPU packages' RAPL energy counters (meter.rapl_root)",
            "cpu",
            False,
            lambda settings, place: RaplReader(settings.rapl_root),
            "reads the whole CPU package, which each of {ranks} ranks would count again",
        ),
        MeterKind(
            "estimate",
            "an ESTIMATE: the CPU's TDP (meter.cpu_tdp_w) × this process's CPU time",
            "cpu",
            True,
            lambda settings, place: EstimateReader(settings.cpu_tdp_w),
        ),
        MeterKind("none", "nothing: energy and power stay null", "", True, lambda settings, place: NullReader()),
    )
}
KINDS = ("auto", *TABLE)
# selection.meter's kinds: the data steps run on the CPU
CPU_KINDS = ("auto", *(row.name for row in TABLE.values() if row.device != "cuda"))


def metered_device(device_type: str) -> str:
    """The device a trial on ``device_type`` (``cuda``, ``cuda:1``, ``cpu``) is metered on, as a row names it."""
    return "cuda" if device_type.startswith("cuda") else "cpu"


def gpu_kind(kind: str) -> bool:
    """Whether ``kind`` (``auto`` included: it decides on the device) is a GPU's meter, which needs a GPU to read."""
    return kind != "auto" and TABLE[kind].device == "cuda"


def auto_choice(device_type: str) -> str:
    """What ``meter.kind: auto`` takes first on a training device: the first row metering that device (NVML on a CUDA
    device, since a CPU meter there would measure the host, not the GPU doing the work; on a CPU RAPL, with the
    estimate where RAPL cannot be read)."""
    return next(row.name for row in TABLE.values() if row.device == metered_device(device_type))


def chosen_kind(kind: str, device_type: str) -> str:
    """The kind a trial on ``device_type`` meters with: ``kind`` itself, or auto's choice."""
    return auto_choice(device_type) if kind == "auto" else kind


def refusal(kind: str, on_gpu: bool | None = None, ranks: int = 1) -> str | None:
    """Why ``kind`` cannot meter a trial with ``ranks`` ranks, on a GPU or not (``on_gpu``; None: not known yet), as a
    sentence naming the key and the fix; None where it can. The one place a kind is refused."""
    row = TABLE[kind]
    if ranks > 1 and not row.per_rank:
        return (
            f"meter.kind {kind} {row.per_rank_refusal.format(ranks=ranks)}; use meter.kind: estimate or auto (each "
            "rank then meters its own process)"
        )
    if on_gpu is False and row.device == "cuda":
        return f"meter.kind {kind} needs a CUDA device (train.device: cuda)"
    return None


def make_reader(kind: str, settings: MeterSettings, place: Place, study_devices: int = 1) -> tuple[Reader, str]:
    """The reader ``kind`` names on ``place`` and a line saying why it was chosen (logged and recorded as
    ``meter_choice``). An explicit kind that cannot be used fails with the reason. ``auto`` takes the first row of the
    trial's device that works, in table order: on a CUDA device that is NVML and nothing else, failing with the
    reason; on a CPU RAPL, else the estimate. A study with multi-device trials (``study_devices``) meters every trial
    alike, one-device ones included, so its device levels are compared metered alike: with no row that may run per
    rank (RAPL reads the whole package)."""
    if kind != "auto":
        try:
            if why := refusal(kind, place.gpu_uuid is not None, place.ranks):
                raise MeterError(why)
            return TABLE[kind].make(settings, place), f"meter.kind {kind}"
        except Exception as err:
            raise MeterError(f"meter.kind is {kind!r} but it cannot be used here: {err}") from err
    device = metered_device(place.device_type)
    ranks = max(place.ranks, study_devices)
    rows = [row for row in TABLE.values() if row.device == device]
    skipped = [row for row in rows if ranks > 1 and not row.per_rank]
    failed: list[tuple[str, Exception]] = []
    for row in (row for row in rows if row not in skipped):
        try:
            reader = row.make(settings, place)
        except Exception as err:
            failed.append((row.name, err))
            continue
        return reader, _auto_why(row.name, reader, skipped, failed, ranks)
    if device == "cuda":
        raise MeterError(
            f"meter.kind is 'auto' on a CUDA device but NVML cannot meter it: {failed[-1][1]}. A CPU meter would "
            "measure the host, not the GPU, so none is taken in its place: check the driver and nvidia-ml-py "
            "(nvidia-smi must list the GPU), or set meter.kind: none to train without energy"
        )
    raise MeterError(f"meter.kind is 'auto' but no meter works here: {_unavailable(failed)}")


def _unavailable(failed: list[tuple[str, Exception]]) -> str:
    return "; ".join(f"{name} unavailable: {err}" for name, err in failed)


def _auto_why(
    name: str, reader: Reader, skipped: list[MeterKind], failed: list[tuple[str, Exception]], ranks: int
) -> str:
    """What ``auto`` says of its choice: the kind, and why the rows before it were passed over."""
    estimate = ", an ESTIMATE," if reader.is_estimate else ""
    if skipped:
        why = "; ".join(f"{row.name} {row.per_rank_refusal.format(ranks=ranks)}" for row in skipped)
        return f"meter.kind auto chose {name}{estimate} per rank, for every trial of this study: {why}"
    if failed:
        return f"meter.kind auto chose {name}{estimate} because no real meter works here: {_unavailable(failed)}"
    return f"meter.kind auto chose {name}"
