"""Energy and power meters that run beside training.

Each meter polls power on a background thread (for RMS, mean, max and the trace) and,
where the hardware has one, reads a cumulative energy counter at both ends of the window,
which sees the whole run rather than the polled instants.

kinds recorded in the outputs:
  nvml-energy  NVML total-energy counter (Volta+), power polled alongside
  nvml-power   NVML power polled and integrated (GPUs without the counter, or it failed)
  rapl         Linux powercap energy_uj counters (CPU package), wrap-around handled
  estimate     CPU TDP × this process's CPU utilisation: an ESTIMATE, not a measurement
  none         nothing measured: energy and power are null, never 0
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

TRACE_COLUMNS = ("t_s", "power_w", "temperature_c", "sm_clock_mhz", "utilization_pct")


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


class MeterError(RuntimeError):
    pass


class Pace:
    """Steps done of steps planned, and the training seconds they took: the training loop sets ``started`` when
    it starts, ``done`` after every step (a Python int, no device sync) and ``paused`` after each evaluation; the
    poller reads them to size its interval to the trial's expected training time."""

    def __init__(self, planned: int) -> None:
        self.planned = planned
        self.done = 0
        self.started: float | None = None  # time.monotonic() when training started
        self.paused = 0.0  # seconds of evaluation since

    def expected_s(self) -> float | None:
        """The trial's expected training seconds, from its pace so far; None before its first step."""
        if self.started is None or self.done <= 0:
            return None
        return (time.monotonic() - self.started - self.paused) * self.planned / self.done


def sample_weights(times, covers: str):
    """Seconds each power sample stands for, so that mean and RMS power are time-weighted whatever the
    spacing (a skipped poll, the closing sample). ``previous``: a sample is the mean over the time since the
    one before it (utilisation, RAPL deltas); ``instant``: a reading at its instant (trapezoid weights)."""
    import numpy as np

    t = np.asarray(times, dtype=float)
    if len(t) < 2:
        return np.ones(len(t))
    gaps = np.diff(t)
    if covers == "previous":
        return np.concatenate([[0.0], gaps])
    return np.concatenate([[gaps[0] / 2], (gaps[1:] + gaps[:-1]) / 2, [gaps[-1] / 2]])


def _nothing() -> None:
    return None


class Meter:
    """Base meter: a polling thread and a measurement window with synchronised ends.

    Subclasses implement ``_sample()`` (a dict with ``power_w`` and optional extras) and,
    if they have a counter, ``_counter_j()`` (cumulative joules).
    """

    kind = "none"
    is_estimate = False
    # Seconds a burst of work keeps showing in this meter's power readings after it ended;
    # the trial waits this long between its throughput check and the metered window.
    settle_s = 0.0
    # What one power sample stands for (``sample_weights``).
    covers = "instant"
    # The shortest interval worth polling at: below it the sensor repeats itself or the poller costs the trial.
    min_interval_s = 0.005
    # How often the sensor's value changes; a window shorter than this is said to be so.
    update_period_s = 0.0
    # Capabilities a trial asks of its meter, never of its class: whether it reads the device's temperature (a
    # cooldown can wait for it), and whether its energy counter updates too seldom for a short window, so that an
    # evaluation is checked against ``update_period_s`` (the CPU meters resolve milliseconds).
    reads_temperature = False
    coarse_counter = False

    def __init__(self, interval_s: float, sync: Callable[[], None] = _nothing, target_samples: int = 0) -> None:
        self.interval_s = interval_s
        self.sync = sync
        # With a pace and a target, the poller shortens its interval (never below min_interval_s, never above
        # interval_s) so that a trial of any length gets about ``target_samples`` samples.
        self.target_samples = target_samples
        self._pace: Pace | None = None
        self._interval_now = interval_s
        self.note = ""
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    # -- hooks
    def _sample(self) -> dict[str, Any]:
        return {}

    def _counter_j(self) -> float | None:
        return None

    def static_info(self) -> dict[str, Any]:
        return {}

    # -- polling
    def _adapt(self) -> None:
        """The interval that gives ``target_samples`` over the trial's expected length (elapsed × planned ÷ done)."""
        expected_s = None if self._pace is None else self._pace.expected_s()
        if expected_s is None or not self.target_samples:
            return
        self._interval_now = min(self.interval_s, max(self.min_interval_s, expected_s / self.target_samples))

    def _poll(self) -> None:
        next_t = time.monotonic()
        while not self._stop.is_set():
            self._record()
            scheduled = next_t
            while not self._stop.is_set():
                # Fixed-rate schedule at the current interval, re-sized while waiting (at least every 50 ms), so a
                # long configured interval never delays the first samples of a short trial; a late sample skips
                # ahead instead of bursting.
                self._adapt()
                next_t = scheduled + self._interval_now
                delay = next_t - time.monotonic()
                if delay <= 0:
                    next_t = time.monotonic()
                    break
                self._stop.wait(min(delay, 0.05))
        self._thread_cpu_s = time.thread_time()  # the poller's own CPU cost, reported beside the samples

    def _record(self) -> float:
        """Take one sample now, labelled with the open window; returns its time (s since the session opened)."""
        with (
            self._record_lock
        ):  # the poller and a window's ends both record; a sample's state (e.g. the last CPU time) is shared
            t = time.monotonic() - self._t0
            try:
                sample = self._sample()
            except Exception as err:  # a failed read is counted and kept, never dropped silently
                self._errors.append(f"t={t:.2f}s: {type(err).__name__}: {err}")
                sample = {}
            self._rows.append({"t_s": t, **{k: sample.get(k) for k in TRACE_COLUMNS[1:]}, "window": self._window})
            return t

    # -- a session of named windows (Zeus's begin_window / end_window)
    def open(self, pace: Pace | None = None) -> None:
        """Start polling; windows are then measured with ``begin`` and ``end``. With ``pace`` the interval follows
        the trial's progress (see ``target_samples``)."""
        self.sync()
        self._pace, self._interval_now = pace, self.interval_s
        self._record_lock = threading.Lock()
        self._rows: list[dict[str, Any]] = []
        self._errors: list[str] = []
        self._windows: list[dict[str, Any]] = []
        self._window: str | None = None
        self._t0 = time.monotonic()
        self._stop.clear()
        self._thread_cpu_s = None
        self._thread = threading.Thread(target=self._poll, name=f"meter-{self.kind}", daemon=True)
        self._thread.start()

    def begin(self, name: str) -> None:
        """Open the window ``name``, its start synchronised with the device; a sample closes what came before."""
        self.sync()
        if self.covers == "instant":  # a reading at the window's start belongs to it
            self._window = name
        # The boundary sample before the counter read: RAPL's samples and counter share their last reading, so a
        # counter read first would leave the sample a few microseconds of energy, standing for the whole gap.
        t = self._record()
        self._opened = (name, t, self._read_counter())  # windows meet exactly at their boundary samples
        self._window = name

    def end(self) -> dict[str, Any]:
        """Close the open window (its end synchronised with the device) and return its record."""
        self.sync()
        t = self._record()
        closed = self._close_window(t, self._read_counter())
        self._window = None
        return closed

    def switch(self, name: str) -> dict[str, Any]:
        """Close the open window and open ``name`` at the same synchronised instant (one boundary sample and
        counter read), so that back-to-back windows (training segments and evaluations) add up to their span."""
        self.sync()
        t = self._record()
        counter = self._read_counter()
        closed = self._close_window(t, counter)
        self._opened, self._window = (name, t, counter), name
        return closed

    def _close_window(self, end_s: float, counter: float | None) -> dict[str, Any]:
        name, start_s, counter0 = self._opened
        window = {
            "name": name,
            "start_s": start_s,
            "end_s": end_s,
            "counter_j": None if counter0 is None or counter is None else counter - counter0,
        }
        self._windows.append(window)
        return window

    def energy_so_far(self, prefix: str = "train") -> float | None:
        """Energy of the closed windows whose name starts with ``prefix``, now, mid-session (a stopping rule
        decides on it): their counter readings, or the integral of the samples taken so far; None without either."""
        with self._record_lock:
            rows = [(r["t_s"], r["power_w"]) for r in self._rows if r["power_w"] is not None]
        total = 0.0
        for w in (w for w in self._windows if w["name"].startswith(prefix)):
            if w["counter_j"] is not None:
                total += w["counter_j"]
            elif rows:
                total += integrate([t for t, _ in rows], [p for _, p in rows], self.covers, w["start_s"], w["end_s"])
            else:
                return None
        return total

    def window(self, name: str, seconds: float) -> dict[str, Any]:
        """A window of ``seconds`` with nothing else running (the idle baseline)."""
        self.begin(name)
        time.sleep(seconds)
        return self.end()

    def close(self) -> dict[str, Any]:
        """Stop polling; the session's summary: every window's energy, and the training windows' (``train*``)
        energy, time and power, which is what a trial reports as its training measurement."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        trace = pl.DataFrame(
            self._rows, schema={**{c: pl.Float64 for c in TRACE_COLUMNS}, "window": pl.String}, orient="row"
        )
        return self._summarise(trace)

    def start(self, pace: Pace | None = None) -> None:
        """One training window: ``open`` then ``begin("train")``."""
        self.open(pace)
        self.begin("train")

    def stop(self) -> dict[str, Any]:
        self.end()
        return self.close()

    def _read_counter(self) -> float | None:
        try:
            return self._counter_j()
        except Exception as err:
            self._errors.append(f"energy counter: {type(err).__name__}: {err}")
            return None

    def latest_power(self) -> float | None:
        """The most recent polled power (W), for progress lines; never blocks."""
        rows = getattr(self, "_rows", None)
        return rows[-1]["power_w"] if rows else None

    # -- results
    def _settling(self, t: Any, in_training: Any) -> Any:
        """Training samples within ``settle_s`` of a segment that follows another window (an evaluation): an averaged
        reading still shows that window's power there, so the training power statistics leave them out (the energy,
        from the counter or the integral over the windows, keeps every sample). A segment is never left without
        samples: one shorter than the settle time keeps its own."""
        import numpy as np

        out = np.zeros(len(t), dtype=bool)
        if (
            self.settle_s <= 0 or getattr(self, "power_reading", "average") == "instant"
        ):  # an instant reading has no lag
            return out
        for before, w in zip(self._windows, self._windows[1:]):
            if (
                w["name"].startswith("train")
                and not before["name"].startswith("train")
                and before["end_s"] == w["start_s"]
            ):
                segment = in_training & (t > w["start_s"]) & (t <= w["end_s"])
                early = segment & (t < w["start_s"] + self.settle_s)
                if (segment & ~early).any():
                    out |= early
        return out

    def _summarise(self, trace: pl.DataFrame) -> dict[str, Any]:
        import numpy as np

        valid = trace.drop_nulls("power_w")
        t_all, p_all = valid["t_s"].to_numpy(), valid["power_w"].to_numpy()
        windows, fell_back = [], False
        for w in self._windows:
            duration = w["end_s"] - w["start_s"]
            energy = w["counter_j"]
            if energy is None and len(p_all):
                fell_back = True
                energy = integrate(t_all, p_all, self.covers, w["start_s"], w["end_s"])
            note = (
                f"shorter ({duration * 1000:.0f} ms) than the sensor's update period ({self.update_period_s * 1000:.0f} ms): "
                "its energy is less certain than the others'"
                if duration < self.update_period_s
                else ""
            )
            windows.append(
                {
                    "name": w["name"],
                    "start_s": w["start_s"],
                    "end_s": w["end_s"],
                    "duration_s": duration,
                    "energy_j": energy,
                    "samples": int((trace["window"] == w["name"]).sum()),
                    "note": note,
                }
            )
        training = [w for w in windows if w["name"].startswith("train")]
        evals = [w for w in windows if w["name"].startswith("eval")]
        total = lambda ws, k: None if not ws or any(w[k] is None for w in ws) else float(sum(w[k] for w in ws))  # noqa: E731
        # Power over the training windows' samples, each weighted by the time it stands for.
        names = pl.Series([w["name"] for w in training], dtype=pl.String).implode()
        in_training = valid["window"].is_in(names).fill_null(False).to_numpy()
        with_power = int(in_training.sum())  # what the quality rules count: every training sample with power
        settling = self._settling(t_all, in_training)
        in_training &= ~settling
        p = p_all[in_training]
        wts = sample_weights(t_all, self.covers)[in_training]
        if len(p) and wts.sum() <= 0:  # every sample at one instant
            wts = np.ones(len(p))
        in_windows = trace.filter(pl.col("window").is_in(names).fill_null(False))
        times = in_windows["t_s"].to_numpy()
        # The polling interval within each training window: the pauses for evaluation between them are no late polls.
        gaps = np.concatenate(
            [np.diff(w["t_s"].to_numpy()) for w in in_windows.partition_by("window")] or [np.empty(0)]
        )
        kind, note = self.kind, self.note
        if fell_back and self.kind == "nvml-energy":
            kind, note = "nvml-power", "energy counter unavailable in a window; integrated polled power there"
        has_power = len(p) > 0
        return {
            "meter": kind,
            "meter_is_estimate": self.is_estimate,
            "meter_note": note,
            "energy_j": total(training, "energy_j"),
            "duration_s": total(training, "duration_s") or 0.0,
            "eval_energy_j": total(evals, "energy_j"),
            "eval_window_s": total(evals, "duration_s"),
            "windows": windows,
            "short_windows": sum(bool(w["note"]) for w in windows),
            "power_rms_w": float(math.sqrt((wts * p**2).sum() / wts.sum())) if has_power else None,
            "power_mean_w": float((wts * p).sum() / wts.sum()) if has_power else None,
            "power_max_w": float(p.max()) if has_power else None,
            "samples": len(times),
            "samples_with_power": with_power,
            "samples_settling": int(settling.sum()),
            "sample_errors": len(self._errors),
            "sample_error_messages": self._errors[:20],
            "interval_requested_s": self.interval_s,
            "interval_final_s": self._interval_now,
            "interval_achieved_s": float(gaps.mean()) if len(gaps) else None,
            "meter_thread_cpu_s": self._thread_cpu_s,
            "temperature_max_c": trace["temperature_c"].max(),
            "sm_clock_mean_mhz": trace["sm_clock_mhz"].mean(),
            **self.static_info(),
            "trace": trace,
        }


def integrate(times, power, covers: str, a: float, b: float) -> float:
    """∫ power dt over [a, b] from samples: ``previous`` — each sample the mean since the one before it (a step
    function); ``instant`` — readings at their instants (linear between them, held flat beyond the ends)."""
    import numpy as np

    t, p = np.asarray(times, dtype=float), np.asarray(power, dtype=float)
    if b <= a or not len(t):
        return 0.0
    if covers == "previous":
        lo, hi = np.concatenate([[-np.inf], t[:-1]]), t
        overlap = np.clip(np.minimum(hi, b) - np.maximum(lo, a), 0, None)
        tail = max(0.0, b - max(a, t[-1])) * p[-1]  # after the last sample: its level held
        return float((overlap * p).sum() + tail)
    knots = np.unique(np.concatenate([[a, b], t[(t > a) & (t < b)]]))
    values = np.interp(knots, t, p)
    return float(((values[1:] + values[:-1]) / 2 * np.diff(knots)).sum())


class NullMeter(Meter):
    """``none``: no counter and no samples, so every energy and power figure stays null."""

    kind = "none"


# An evaluation's energy is the counter's change over its window; a counter that updates every ``update_period_s``
# is off by up to one update at each end, so a window must span this many updates to keep that within ~10 %.
MIN_COUNTER_PERIODS = 10


def short_eval_window(seconds: float, tokens: int, period_s: float, how: str) -> str | None:
    """Why an intermediate evaluation of ``tokens`` real tokens lasting ``seconds`` (``how`` that figure was had) is
    too short for an energy counter updated every ``period_s``, with the eval.max_tokens that would do; None if it
    is long enough."""
    need_s = MIN_COUNTER_PERIODS * period_s
    if seconds >= need_s:
        return None
    enough = f"at least {math.ceil(tokens * need_s / seconds):,}" if seconds > 0 else "far more"
    return (
        f"eval.max_tokens: an intermediate evaluation of {tokens:,} real tokens takes {seconds * 1000:.0f} ms ({how}), "
        f"shorter than {MIN_COUNTER_PERIODS} updates of the energy counter ({need_s:g} s), so its energy would be the "
        f"counter's rounding; set eval.max_tokens to {enough} (null: the whole eval set), or eval.points: 0 and no "
        "eval.at_tokens for the final evaluation only"
    )


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


class NvmlMeter(Meter):
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

    def __init__(
        self, nvml, uuid: str, interval_s: float, sync: Callable[[], None] = _nothing, target_samples: int = 0
    ) -> None:
        super().__init__(interval_s, sync, target_samples)
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

    def _counter_j(self) -> float | None:
        if self.kind != "nvml-energy":
            return None
        return self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle) / 1000.0

    def _instant_mw(self) -> int:
        (field,) = self.nvml.nvmlDeviceGetFieldValues(self.handle, [self.nvml.NVML_FI_DEV_POWER_INSTANT])
        if field.nvmlReturn != self.nvml.NVML_SUCCESS:
            raise MeterError(f"instant power field returned NVML code {field.nvmlReturn}")
        return field.value.uiVal

    def _sample(self) -> dict[str, Any]:
        n, h = self.nvml, self.handle
        milliwatts = self._instant_mw() if self.power_reading == "instant" else n.nvmlDeviceGetPowerUsage(h)
        return {
            "power_w": milliwatts / 1000.0,
            "temperature_c": self._optional(lambda: float(n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU))),
            "sm_clock_mhz": self._optional(lambda: float(n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM))),
            "utilization_pct": self._optional(lambda: float(n.nvmlDeviceGetUtilizationRates(h).gpu)),
        }

    def snapshot(self) -> dict[str, Any]:
        """One reading of power, temperature, SM clock and utilisation, outside any window."""
        return self._sample()

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


def rapl_domains(root: str | Path) -> list[Path]:
    """Top-level package domains (``intel-rapl:N``); subzones would double-count."""
    root = Path(root)
    if not root.is_dir():
        return []
    return sorted(p for p in root.glob("intel-rapl:*") if p.name.count(":") == 1 and (p / "energy_uj").is_file())


class RaplMeter(Meter):
    """Linux powercap counters, summed over CPU packages.

    The counters wrap at ``max_energy_range_uj``; the poller accumulates each interval's
    delta (intervals are far shorter than a wrap period), so any number of wraps is handled.
    """

    kind = "rapl"
    covers = "previous"
    update_period_s = 0.001  # the RAPL counters update about every millisecond

    def __init__(
        self, root: str | Path, interval_s: float, sync: Callable[[], None] = _nothing, target_samples: int = 0
    ) -> None:
        super().__init__(interval_s, sync, target_samples)
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

    def open(self, pace: Pace | None = None) -> None:
        self._last, self._last_t, self._total = self._raw(), time.monotonic(), 0.0
        super().open(pace)

    def _counter_j(self) -> float:
        self._advance()
        return self._total

    def _sample(self) -> dict[str, Any]:
        step, dt = self._advance()
        return {"power_w": step / dt if dt > 0 else None}


class EstimateMeter(Meter):
    """CPU TDP × this process's CPU utilisation. An ESTIMATE, labelled so everywhere."""

    kind = "estimate"
    is_estimate = True
    covers = "previous"
    update_period_s = 0.01  # CPU-time accounting resolves a few ms
    min_interval_s = 0.01  # polling faster than that turns the estimate into the accounting's noise

    def __init__(
        self, tdp_w: float, interval_s: float, sync: Callable[[], None] = _nothing, target_samples: int = 0
    ) -> None:
        super().__init__(interval_s, sync, target_samples)
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

    def _sample(self) -> dict[str, Any]:
        now, cpu = time.monotonic(), time.process_time()
        last, self._last = self._last, (now, cpu)
        if last is None or now <= last[0]:
            return {"power_w": None}
        utilisation = min(1.0, (cpu - last[1]) / ((now - last[0]) * self.cores))
        return {"power_w": self.tdp_w * utilisation, "utilization_pct": 100.0 * utilisation}

    def open(self, pace: Pace | None = None) -> None:
        self._last = (time.monotonic(), time.process_time())
        super().open(pace)


def make_meter(
    settings: MeterSettings,
    device_type: str,
    *,
    gpu_uuid: str | None = None,
    nvml=None,
    sync: Callable[[], None] = _nothing,
) -> tuple[Meter, str]:
    """The meter ``settings`` ask for and a line saying why it was chosen (logged and recorded as ``meter_choice``).

    ``auto`` on a CUDA device takes NVML and nothing else: a CPU meter there would measure the host, not the GPU
    doing the work, so an NVML that does not work fails the trial with the reason rather than falling back. On a
    CPU it takes RAPL if readable, else the estimate (NVML would measure a GPU that is not doing the work).
    """
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
    if device_type == "cuda":
        try:
            return nvml_meter(), "meter.kind auto chose nvml"
        except Exception as err:
            raise MeterError(
                f"meter.kind is 'auto' on a CUDA device but NVML cannot meter it: {err}. A CPU meter would measure the "
                "host, not the GPU, so none is taken in its place: check the driver and nvidia-ml-py (nvidia-smi must "
                "list the GPU), or set meter.kind: none to train without energy"
            ) from err
    try:
        return makers["rapl"](), "meter.kind auto chose rapl"
    except Exception as err:
        return makers[
            "estimate"
        ](), f"meter.kind auto chose estimate, an ESTIMATE, because no real meter works here: rapl unavailable: {err}"
