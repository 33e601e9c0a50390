"""The CPU meters: Linux's RAPL energy counters of the CPU packages, and, where none is readable, an ESTIMATE from
the CPU's TDP and this process's CPU time. Each is a reader of its device (``RaplReader``, ``EstimateReader``); a meter
session over one is ``Meter(reader, polling)``."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

from .meter import MeterError, Reader


def rapl_domains(root: str | Path) -> list[Path]:
    """Top-level package domains (``intel-rapl:N``); subzones would double-count."""
    root = Path(root)
    if not root.is_dir():
        return []
    return sorted(p for p in root.glob("intel-rapl:*") if p.name.count(":") == 1 and (p / "energy_uj").is_file())


class RaplReader(Reader):
    """Linux powercap counters, summed over CPU packages.

    The counters wrap at ``max_energy_range_uj``; the poller accumulates each interval's
    delta (intervals are far shorter than a wrap period), so any number of wraps is handled.
    """

    kind = "rapl"
    covers = "previous"
    update_period_s = 0.001  # the RAPL counters update about every millisecond

    def __init__(self, root: str | Path) -> None:
        super().__init__()
        self.domains = rapl_domains(root)
        if not self.domains:
            raise MeterError(f"no readable RAPL domains under {root} (meter.rapl_root)")
        self.ranges = [int((d / "max_energy_range_uj").read_text()) for d in self.domains]
        self._lock = threading.Lock()

    def _raw(self) -> list[int]:
        return [int((d / "energy_uj").read_text()) for d in self.domains]

    def _advance(self) -> tuple[float, float]:
        """Add the energy since the last read; returns (joules this step, seconds this step)."""
        with self._lock:
            now, raw = time.monotonic(), self._raw()
            step = sum(((r - last) % rng) / 1e6 for r, last, rng in zip(raw, self._last, self.ranges))
            dt = now - self._last_t
            self._last, self._last_t = raw, now
            self._total += step
            return step, dt

    def start(self) -> None:
        self._last, self._last_t, self._total = self._raw(), time.monotonic(), 0.0

    def counter_j(self) -> float:
        self._advance()
        return self._total

    def sample(self) -> dict[str, Any]:
        step, dt = self._advance()
        return {"power_w": step / dt if dt > 0 else None}


class EstimateReader(Reader):
    """CPU TDP × this process's CPU utilisation. An ESTIMATE, labelled so everywhere."""

    kind = "estimate"
    is_estimate = True
    covers = "previous"
    update_period_s = 0.01  # CPU-time accounting resolves a few ms
    min_interval_s = 0.01  # polling faster than that turns the estimate into the accounting's noise

    def __init__(self, tdp_w: float) -> None:
        super().__init__()
        self.tdp_w = tdp_w
        # Every CPU of the machine, not the ones this process may use: each core-second of work is then the same
        # share of the package's TDP whether the scheduler (SLURM's cpus_per_task, taskset) allows 1 core or all.
        self.cores = os.cpu_count() or 1
        self.note = (
            f"ESTIMATE: {tdp_w:g} W TDP × this process's CPU seconds per second ÷ the machine's {self.cores} CPUs; no "
            "power sensor was read. Its energy is work-based (CPU time × a share of the TDP) and its power depends "
            "on the CPU the trial got: another load on the machine lowers it"
        )
        self._last: tuple[float, float] | None = None

    def sample(self) -> dict[str, Any]:
        now, cpu = time.monotonic(), time.process_time()
        last, self._last = self._last, (now, cpu)
        if last is None or now <= last[0]:
            return {"power_w": None}
        utilisation = min(1.0, (cpu - last[1]) / ((now - last[0]) * self.cores))
        return {"power_w": self.tdp_w * utilisation, "utilization_pct": 100.0 * utilisation}

    def start(self) -> None:
        self._last = (time.monotonic(), time.process_time())
