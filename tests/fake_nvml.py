"""A stand-in for the ``pynvml`` module: the lowest layer the NVML meter talks to.

Each fake GPU draws a constant power, or with ``load_w`` that much more while this process's main thread computes
(the CPU standing in for the GPU); its energy counter integrates that power over wall time, as the real counter does.
Failures can be switched on per call name.
"""

from __future__ import annotations

import threading
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
        load_w: float = 0.0,
        load_update_s: float = 0.01,
    ):
        """``gpus`` maps UUID → constant power in watts; ``has_instant``: the driver offers the
        instantaneous power field (otherwise that field answers "not supported", code 3); ``mig`` maps a MIG
        slice's UUID ("MIG-…") → its GPU's UUID: a slice has a handle but no sensor of its own, as on real NVML;
        ``load_w``: watts added in proportion to the main thread's CPU use (CPU seconds per second), so that training
        draws more than idle; the load updates every ``load_update_s``, as a real sensor does, so that a read a few
        microseconds after another does not stand for the CPU burst between them (a meter's own threads not counted)."""
        self.gpus = gpus
        self.mig = mig or {}
        self.load_w = load_w
        self.load_update_s = load_update_s
        self._lock = threading.Lock()
        self._main_cpu = time.pthread_getcpuclockid(threading.main_thread().ident)
        self._last = (time.monotonic(), time.clock_gettime(self._main_cpu))
        self._load_j = 0.0  # the load's energy so far
        self._load_now_w = 0.0  # the load's power over the interval up to the last call
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

    def _load(self) -> float:
        """The load's power now: the main thread's CPU use over the last update, its energy added at each update."""
        if not self.load_w:
            return 0.0
        with self._lock:
            now, cpu = time.monotonic(), time.clock_gettime(self._main_cpu)
            dt = now - self._last[0]
            if dt >= self.load_update_s:
                self._load_now_w = self.load_w * min(1.0, (cpu - self._last[1]) / dt)
                self._load_j += self._load_now_w * dt
                self._last = (now, cpu)
            return self._load_now_w

    def nvmlDeviceGetTotalEnergyConsumption(self, h):
        self._maybe_fail("nvmlDeviceGetTotalEnergyConsumption")
        if not self.has_counter:
            raise NVMLError("Not Supported")
        self._load()
        return int(1000 * (self.gpus[h.uuid] * (time.monotonic() - self.t0) + self._load_j))  # mJ

    def nvmlDeviceGetPowerUsage(self, h):
        self._maybe_fail("nvmlDeviceGetPowerUsage")
        return int((self.gpus[h.uuid] + self._load()) * 1000)  # mW

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

    def nvmlSystemGetDriverVersion(self):
        return "0.0-fake"
