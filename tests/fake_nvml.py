"""A stand-in for the ``pynvml`` module: the lowest layer the NVML meter talks to.

Each fake GPU draws a constant power; its energy counter integrates that power over
wall time, as the real counter does. Failures can be switched on per call name.
"""

from __future__ import annotations

import time
from types import SimpleNamespace


class NVMLError(Exception):
    pass


class FakeNvml:
    NVMLError = NVMLError
    NVML_TEMPERATURE_GPU = 0
    NVML_CLOCK_SM = 1
    NVML_SUCCESS = 0
    NVML_FI_DEV_POWER_INSTANT = 186

    def __init__(
        self,
        gpus: dict[str, float],
        has_counter: bool = True,
        has_instant: bool = False,
        mig: dict[str, str] | None = None,
    ):
        """``gpus`` maps UUID → constant power in watts; ``has_instant``: the driver offers the
        instantaneous power field (otherwise that field answers "not supported", code 3); ``mig`` maps a MIG
        slice's UUID ("MIG-…") → its GPU's UUID: a slice has a handle but no sensor of its own, as on real NVML."""
        self.gpus = gpus
        self.mig = mig or {}
        self.has_counter = has_counter
        self.has_instant = has_instant
        self.fail: dict[str, int] = {}  # call name → how many more calls succeed before failing forever
        self.t0 = time.monotonic()
        self.calls: list[str] = []

    def _maybe_fail(self, name: str) -> None:
        self.calls.append(name)
        if name in self.fail:
            if self.fail[name] <= 0:
                raise NVMLError(f"{name}: GPU is lost")
            self.fail[name] -= 1

    def nvmlInit(self):
        self._maybe_fail("nvmlInit")

    def nvmlDeviceGetHandleByUUID(self, uuid):
        if uuid not in self.gpus and uuid not in self.mig:
            raise NVMLError(f"no GPU with UUID {uuid}")
        return SimpleNamespace(uuid=uuid)

    def nvmlDeviceIsMigDeviceHandle(self, h):
        return int(h.uuid in self.mig)

    def nvmlDeviceGetDeviceHandleFromMigDeviceHandle(self, h):
        return SimpleNamespace(uuid=self.mig[h.uuid])

    def nvmlDeviceGetHandleByIndex(self, index):
        """NVML indices follow the order of ``gpus`` (physical, PCI order)."""
        return SimpleNamespace(uuid=list(self.gpus)[index])

    def nvmlDeviceGetUUID(self, h):
        return h.uuid

    def nvmlDeviceGetTotalEnergyConsumption(self, h):
        self._maybe_fail("nvmlDeviceGetTotalEnergyConsumption")
        if not self.has_counter:
            raise NVMLError("Not Supported")
        return int(self.gpus[h.uuid] * 1000 * (time.monotonic() - self.t0))  # mJ

    def nvmlDeviceGetPowerUsage(self, h):
        self._maybe_fail("nvmlDeviceGetPowerUsage")
        return int(self.gpus[h.uuid] * 1000)  # mW

    def nvmlDeviceGetFieldValues(self, h, field_ids):
        self._maybe_fail("nvmlDeviceGetFieldValues")
        assert field_ids == [self.NVML_FI_DEV_POWER_INSTANT]
        watts = self.gpus[h.uuid] * 1.1  # distinguishable from the averaged reading
        return [
            SimpleNamespace(nvmlReturn=0 if self.has_instant else 3, value=SimpleNamespace(uiVal=int(watts * 1000)))
        ]

    def nvmlDeviceGetTemperature(self, h, sensor):
        return 40

    def nvmlDeviceGetClockInfo(self, h, clock):
        return 1500

    def nvmlDeviceGetUtilizationRates(self, h):
        return SimpleNamespace(gpu=97, memory=40)

    def nvmlDeviceGetEnforcedPowerLimit(self, h):
        return 300000

    def nvmlDeviceGetName(self, h):
        return "Fake GPU " + h.uuid[-4:]
