"""The NVML meter: the GPU this process was given, read through NVIDIA's management library (``pynvml``, passed in,
so a test can hand it a fake): its energy counter where the GPU has one, its power, temperature and clocks polled.
``NvmlReader`` reads the device; a meter session over it is ``Meter(reader, polling)``."""

from __future__ import annotations

from typing import Any

from .meter import MeterError, Reader


def mig_parent(nvml, handle) -> tuple[object, str] | None:
    """The whole GPU's handle and UUID when ``handle`` is a MIG slice; None for a whole GPU (or an NVML without MIG)."""
    try:
        if not nvml.nvmlDeviceIsMigDeviceHandle(handle):
            return None
    except (AttributeError, nvml.NVMLError):  # NVML before MIG (pre-Ampere drivers) has no slices
        return None
    parent = nvml.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(handle)
    uuid = nvml.nvmlDeviceGetUUID(parent)
    return parent, uuid.decode() if isinstance(uuid, bytes) else uuid


class NvmlReader(Reader):
    """NVML on the GPU this process was given, found by UUID (not by index).

    Power is read instantaneously where the driver offers it (``NVML_FI_DEV_POWER_INSTANT``);
    otherwise ``nvmlDeviceGetPowerUsage``, which on Ampere and newer is a one-second average.
    Measured on an H200: with the averaged reading, a matmul burst just before the window
    showed for about a second inside it (polled-power integral 5–8 % above the counter, a
    training "maximum" of 682 W while training drew 122 W), hence ``settle_s``.

    A MIG slice has no power sensor or energy counter of its own: the meter reads the whole GPU the
    slice belongs to (every slice's work and the GPU's idle power) and says so in its note and record.
    """

    # How each ``power_reading`` was read, for the record and the report: the two are different statistics (an
    # averaged reading smooths peaks), so RMS power is comparable between trials only at the same reading.
    READINGS = {
        "instant": "instantaneous (NVML_FI_DEV_POWER_INSTANT)",
        "average": "one-second average (nvmlDeviceGetPowerUsage)",
    }

    kind = "nvml-energy"
    settle_s = 1.0
    # NVML's power reading updates every few tens of ms at best: faster polls repeat it; its energy counter and
    # power average are refreshed about every 100 ms.
    min_interval_s = 0.02
    update_period_s = 0.1
    reads_temperature = True
    coarse_counter = True

    def __init__(self, nvml, uuid: str) -> None:
        super().__init__()
        self.nvml = nvml
        nvml.nvmlInit()
        self.uuid = uuid
        self.handle = nvml.nvmlDeviceGetHandleByUUID(uuid)
        self.mig_parent_uuid: str | None = None
        if (parent := mig_parent(nvml, self.handle)) is not None:
            self.handle, self.mig_parent_uuid = parent
            self.note = (
                f"MIG slice {uuid} of GPU {self.mig_parent_uuid}: NVML has no sensor per slice, so power and energy are "
                "the whole GPU's (every slice's work and its idle power), not this slice's"
            )
        try:
            nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle)
        except nvml.NVMLError as err:
            self.kind = "nvml-power"
            self.note = "; ".join(
                filter(None, [self.note, f"no energy counter on this GPU ({err}); energy integrates polled power"])
            )
        self._power_limit_w = self._optional(lambda: nvml.nvmlDeviceGetEnforcedPowerLimit(self.handle) / 1000.0)
        self._name = self._optional(lambda: nvml.nvmlDeviceGetName(self.handle))
        self.power_reading = "instant"
        try:
            self._instant_mw()
        except Exception:  # older driver or GPU: the averaged reading is all there is
            self.power_reading = "average"

    def _optional(self, read):
        try:
            return read()
        except self.nvml.NVMLError:
            return None

    def counter_j(self) -> float | None:
        if self.kind != "nvml-energy":
            return None
        return self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle) / 1000.0

    def _instant_mw(self) -> int:
        (field,) = self.nvml.nvmlDeviceGetFieldValues(self.handle, [self.nvml.NVML_FI_DEV_POWER_INSTANT])
        if field.nvmlReturn != self.nvml.NVML_SUCCESS:
            raise MeterError(f"instant power field returned NVML code {field.nvmlReturn}")
        return field.value.uiVal

    def sample(self) -> dict[str, Any]:
        n, h = self.nvml, self.handle
        milliwatts = self._instant_mw() if self.power_reading == "instant" else n.nvmlDeviceGetPowerUsage(h)
        return {
            "power_w": milliwatts / 1000.0,
            "temperature_c": self._optional(lambda: float(n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU))),
            "sm_clock_mhz": self._optional(lambda: float(n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM))),
            "utilization_pct": self._optional(lambda: float(n.nvmlDeviceGetUtilizationRates(h).gpu)),
        }

    def temperature(self) -> float:
        return float(self.nvml.nvmlDeviceGetTemperature(self.handle, self.nvml.NVML_TEMPERATURE_GPU))

    def static_info(self) -> dict[str, Any]:
        return {
            "power_limit_w": self._power_limit_w,
            "meter_device_uuid": self.uuid,
            "meter_device_name": self._name,
            "power_reading": self.power_reading,
            "power_reading_source": self.READINGS[self.power_reading],
            "mig": self.mig_parent_uuid is not None,
            "mig_parent_uuid": self.mig_parent_uuid,
        }
