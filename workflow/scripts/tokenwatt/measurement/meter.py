"""The meter every kind shares: a poller on a background thread and a session of named windows (Zeus's
begin_window / end_window) whose ends are synchronised with the device, summarised as a typed measurement.

Each meter polls power (for RMS, mean, max and the trace) and, where the hardware has one, reads a cumulative
energy counter at both ends of a window, which sees the whole window rather than the polled instants. A meter is
``Meter(reader, polling)``: the readers (``nvml.py``, ``cpu_meters.py``, ``NullReader`` here) supply a sample and a
counter; ``kinds.make_reader`` chooses one from the table of kinds.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import polars as pl

from .energy import integrate, sample_weights

TRACE_COLUMNS = ("t_s", "power_w", "temperature_c", "sm_clock_mhz", "utilization_pct")


class MeterError(RuntimeError):
    pass


@dataclass(frozen=True)
class WindowMeasurement:
    """One named window of a session: its span (seconds since the session opened), its energy (J: the counter's
    change, else the integral of its samples; None without either), its samples, and a note where it is shorter than
    the sensor's update period."""

    name: str
    start_s: float
    end_s: float
    duration_s: float
    energy_j: float | None
    samples: int
    note: str

    def to_record(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Measurement:
    """A meter session's summary (``Meter.close``; Zeus's Measurement): every window's, and the training windows'
    (``train*``) energy, time and power, which is what a trial reports as its training measurement; the sampling
    it rests on; what the meter says of its device (``device``: its kind's own keys); and the power trace, each
    sample marked ``in_power_stats`` where the training power figures (RMS, mean, max) are over it."""

    meter: str
    meter_is_estimate: bool
    meter_note: str
    energy_j: float | None
    duration_s: float
    eval_energy_j: float | None
    eval_window_s: float | None
    windows: tuple[WindowMeasurement, ...]
    short_windows: int
    power_rms_w: float | None
    power_mean_w: float | None
    power_max_w: float | None
    # What each sample stands for (``Reader.covers``): with the trace's ``in_power_stats`` it places every sample's
    # stretch on the clock, so that a multi-device trial's power can be summed (``combine.py``).
    power_covers: str
    samples: int
    samples_with_power: int
    samples_settling: int
    sample_errors: int
    sample_error_messages: tuple[str, ...]
    interval_requested_s: float
    interval_final_s: float
    interval_achieved_s: float | None
    meter_thread_cpu_s: float | None
    temperature_max_c: float | None
    sm_clock_mean_mhz: float | None
    device: Mapping[str, Any]
    trace: pl.DataFrame = field(repr=False, compare=False)

    def to_record(self) -> dict[str, Any]:
        """The summary as a trial's record holds it (metrics.schema.yaml): every field but the trace, the windows and
        messages as lists, the device's keys in place of ``device``."""
        record: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "trace":
                continue
            if f.name == "device":
                record.update(value)
            elif f.name == "windows":
                record[f.name] = [w.to_record() for w in value]
            else:
                record[f.name] = list(value) if isinstance(value, tuple) else value
        return record


class Pace:
    """Steps done of steps planned, and the training seconds they took: the training loop sets ``started`` when
    it starts, ``done`` after every step (a Python int, no device sync) and ``paused`` after each evaluation; the
    poller reads them to size its interval to the trial's expected training time."""

    def __init__(self, planned: int) -> None:
        self.planned = planned
        self.done = 0
        self.first = 0  # steps done before this process started training (a resumed trial's)
        self.started: float | None = None  # time.monotonic() when training started
        self.paused = 0.0  # seconds of evaluation since

    def expected_s(self) -> float | None:
        """This process's expected training seconds, from its pace so far; None before its first step."""
        if self.started is None or self.done <= self.first:
            return None
        return (time.monotonic() - self.started - self.paused) * (self.planned - self.first) / (self.done - self.first)


def no_sync() -> None:
    """The default ``sync`` of a meter: a CPU trial has no device queue to wait for."""
    return None


class Reader:
    """What a meter reads from its device, apart from the session that reads it (as Zeus keeps its device readers):
    a power sample and, where the hardware has one, a cumulative energy counter, what it says of the device, and what
    its readings are like. This base reads nothing; the kinds (``nvml.py``, ``cpu_meters.py``) read
    their devices."""

    kind = "none"
    is_estimate = False
    # Seconds a burst of work keeps showing in this reader's power after it ended;
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
    # How the power was read where a reader has a choice ("instant" has no lag to settle).
    power_reading = "average"

    def __init__(self) -> None:
        self.note = ""  # what the record says of this reader's readings (an estimate, a MIG slice, no counter)

    def start(self) -> None:
        """A session opens: the reader takes its baselines (a counter's last value, the CPU time)."""

    def sample(self) -> dict[str, Any]:
        """One reading now: ``power_w`` and optional extras (``TRACE_COLUMNS``)."""
        return {}

    def counter_j(self) -> float | None:
        """The cumulative energy counter now (J), None without one."""
        return None

    def static_info(self) -> dict[str, Any]:
        """What the reader says of its device, for the record."""
        return {}

    def temperature(self) -> float:
        raise MeterError(f"meter {self.kind} reads no temperature")


class NullReader(Reader):
    """``none``: no counter and no samples, so every energy and power figure stays null."""


@dataclass(frozen=True)
class Polling:
    """How a meter polls: every ``interval_s`` at most, each window's ends synchronised with the device by ``sync``.
    With a pace and ``target_samples``, the poller shortens its interval (never below the reader's
    ``min_interval_s``, never above ``interval_s``) so that a trial of any length gets about that many samples."""

    interval_s: float
    sync: Callable[[], None] = no_sync
    target_samples: int = 0


class Meter:
    """A meter session over one ``Reader``: a polling thread and named measurement windows with synchronised ends,
    summarised as a ``Measurement``. What the readings are like (kind, lag, resolution) is ``meter.reader``'s."""

    def __init__(self, reader: Reader, polling: Polling) -> None:
        self.reader = reader
        self.polling = polling
        self._pace: Pace | None = None
        self._interval_now = polling.interval_s
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    # -- polling
    def _adapt(self) -> None:
        """The interval that gives ``target_samples`` over the trial's expected length (elapsed × planned ÷ done)."""
        expected_s = None if self._pace is None else self._pace.expected_s()
        if expected_s is None or not self.polling.target_samples:
            return
        self._interval_now = min(
            self.polling.interval_s, max(self.reader.min_interval_s, expected_s / self.polling.target_samples)
        )

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
                sample = self.reader.sample()
            except Exception as err:  # a failed read is counted and kept, never dropped silently
                self._errors.append(f"t={t:.2f}s: {type(err).__name__}: {err}")
                sample = {}
            self._rows.append({"t_s": t, **{k: sample.get(k) for k in TRACE_COLUMNS[1:]}, "window": self._window})
            return t

    # -- a session of named windows (Zeus's begin_window / end_window)
    def open(self, pace: Pace | None = None, carried: dict[str, Any] | None = None) -> None:
        """Start polling; windows are then measured with ``begin`` and ``end``. With ``pace`` the interval follows
        the trial's progress (see ``target_samples``). ``carried``: an earlier session's ``session_state`` (a resumed
        trial's) that this one continues: its windows and samples come first, and this session's clock starts
        where it ended."""
        self.reader.start()
        self.polling.sync()
        self._pace, self._interval_now = pace, self.polling.interval_s
        self._record_lock = threading.Lock()
        self._rows: list[dict[str, Any]] = list(carried["rows"]) if carried else []
        self._errors: list[str] = list(carried["errors"]) if carried else []
        self._windows: list[dict[str, Any]] = list(carried["windows"]) if carried else []
        self._window: str | None = None
        self._t0 = time.monotonic() - (carried["end_s"] if carried else 0.0)
        self._stop.clear()
        self._thread_cpu_s = None
        self._thread = threading.Thread(target=self._poll, name=f"meter-{self.reader.kind}", daemon=True)
        self._thread.start()

    def begin(self, name: str) -> None:
        """Open the window ``name``, its start synchronised with the device; a sample closes what came before."""
        self.polling.sync()
        if self.reader.covers == "instant":  # a reading at the window's start belongs to it
            self._window = name
        # The boundary sample before the counter read: RAPL's samples and counter share their last reading, so a
        # counter read first would leave the sample a few microseconds of energy, standing for the whole gap.
        t = self._record()
        self._opened = (name, t, self._read_counter())  # windows meet exactly at their boundary samples
        self._window = name

    def end(self) -> dict[str, Any]:
        """Close the open window (its end synchronised with the device) and return its record."""
        self.polling.sync()
        t = self._record()
        closed = self._close_window(t, self._read_counter())
        self._window = None
        return closed

    def switch(self, name: str) -> dict[str, Any]:
        """Close the open window and open ``name`` at the same synchronised instant (one boundary sample and
        counter read), so that back-to-back windows (training segments and evaluations) add up to their span."""
        self.polling.sync()
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
                total += integrate(
                    [t for t, _ in rows], [p for _, p in rows], self.reader.covers, w["start_s"], w["end_s"]
                )
            else:
                return None
        return total

    def _window_energy(
        self, start_s: float, end_s: float, counter0: float | None, counter: float | None
    ) -> float | None:
        """A span's energy: the counter's change, else the integral of the samples taken in it; None without either."""
        if counter0 is not None and counter is not None:
            return counter - counter0
        with self._record_lock:
            rows = [(r["t_s"], r["power_w"]) for r in self._rows if r["power_w"] is not None]
        return (
            integrate([t for t, _ in rows], [p for _, p in rows], self.reader.covers, start_s, end_s) if rows else None
        )

    def energy_now(self) -> float | None:
        """The session's energy so far: every closed window's and the open one's up to now (a checkpoint's heartbeat:
        what a process killed after it had spent). The open window's part is its samples' integral (the last held to
        now): a
        counter read here would move the reading the poller's next sample is taken against (RAPL). None where a
        window has neither counter nor samples."""
        closed = self.energy_so_far("")
        if self._window is None or closed is None:
            return closed
        now = self._window_energy(self._opened[1], time.monotonic() - self._t0, None, None)
        return None if now is None else closed + now

    def session_state(self) -> dict[str, Any]:
        """The session so far as plain data, for a later session to continue (``open(carried=...)``): its closed
        windows, each with its energy fixed as a counter reading (the samples' integral where there was no counter),
        its samples and failed reads, and its clock now."""
        with self._record_lock:
            rows = [dict(r) for r in self._rows]
            errors = list(self._errors)
        windows = [self.with_energy(w) for w in self._windows]
        return {"windows": windows, "rows": rows, "errors": errors, "end_s": time.monotonic() - self._t0}

    def with_energy(self, window: dict[str, Any]) -> dict[str, Any]:
        """A closed window with its energy fixed as a counter reading: the samples' integral where there was no
        counter, so that it keeps its energy without them (in a later session)."""
        if window["counter_j"] is not None:
            return dict(window)
        return {**window, "counter_j": self._window_energy(window["start_s"], window["end_s"], None, None)}

    def window(self, name: str, seconds: float) -> dict[str, Any]:
        """A window of ``seconds`` with nothing else running (the idle baseline)."""
        self.begin(name)
        time.sleep(seconds)
        return self.end()

    def close(self) -> Measurement:
        """Stop polling; the session's summary (``Measurement``)."""
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

    def stop(self) -> Measurement:
        self.end()
        return self.close()

    def _read_counter(self) -> float | None:
        try:
            return self.reader.counter_j()
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
        if self.reader.settle_s <= 0 or self.reader.power_reading == "instant":  # an instant reading has no lag
            return out
        for before, w in zip(self._windows, self._windows[1:]):
            if (
                w["name"].startswith("train")
                and not before["name"].startswith("train")
                and before["end_s"] == w["start_s"]
            ):
                segment = in_training & (t > w["start_s"]) & (t <= w["end_s"])
                early = segment & (t < w["start_s"] + self.reader.settle_s)
                if (segment & ~early).any():
                    out |= early
        return out

    def _window_records(self, trace: pl.DataFrame, t_all: Any, p_all: Any) -> tuple[list[WindowMeasurement], bool]:
        """Each window's record: its span, its energy (the counter's change, else the integral of the samples with
        power ``t_all``, ``p_all``) and a note when it is shorter than the sensor's update period; and whether any
        window had to fall back to the integral."""
        windows, fell_back = [], False
        for w in self._windows:
            duration = w["end_s"] - w["start_s"]
            energy = w["counter_j"]
            if energy is None and len(p_all):
                fell_back = True
                energy = integrate(t_all, p_all, self.reader.covers, w["start_s"], w["end_s"])
            note = (
                f"shorter ({duration * 1000:.0f} ms) than the sensor's update period ({self.reader.update_period_s * 1000:.0f} ms): "
                "its energy is less certain than the others'"
                if duration < self.reader.update_period_s
                else ""
            )
            windows.append(
                WindowMeasurement(
                    name=w["name"],
                    start_s=w["start_s"],
                    end_s=w["end_s"],
                    duration_s=duration,
                    energy_j=energy,
                    samples=int((trace["window"] == w["name"]).sum()),
                    note=note,
                )
            )
        return windows, fell_back

    def _summarise(self, trace: pl.DataFrame) -> Measurement:
        import numpy as np

        valid = trace.drop_nulls("power_w")
        t_all, p_all = valid["t_s"].to_numpy(), valid["power_w"].to_numpy()
        windows, fell_back = self._window_records(trace, t_all, p_all)
        training = [w for w in windows if w.name.startswith("train")]
        evals = [w for w in windows if w.name.startswith("eval")]
        total = lambda ws, k: (  # noqa: E731
            None if not ws or any(getattr(w, k) is None for w in ws) else float(sum(getattr(w, k) for w in ws))
        )
        # Power over the training windows' samples, each weighted by the time it stands for.
        names = pl.Series([w.name for w in training], dtype=pl.String).implode()
        in_training = valid["window"].is_in(names).fill_null(False).to_numpy()
        with_power = int(in_training.sum())  # what the quality rules count: every training sample with power
        settling = self._settling(t_all, in_training)
        in_training &= ~settling
        p = p_all[in_training]
        wts = sample_weights(t_all, self.reader.covers)[in_training]
        if len(p) and wts.sum() <= 0:  # every sample at one instant
            wts = np.ones(len(p))
        # The trace says which samples the power figures are over, so that they can be recomputed from it alone
        stats = np.zeros(trace.height, dtype=bool)
        stats[trace["power_w"].is_not_null().to_numpy()] = in_training
        trace = trace.with_columns(pl.Series("in_power_stats", stats))
        in_windows = trace.filter(pl.col("window").is_in(names).fill_null(False))
        times = in_windows["t_s"].to_numpy()
        # The polling interval within each training window: the pauses for evaluation between them are no late polls.
        gaps = np.concatenate(
            [np.diff(w["t_s"].to_numpy()) for w in in_windows.partition_by("window")] or [np.empty(0)]
        )
        kind, note = self.reader.kind, self.reader.note
        if fell_back and self.reader.kind == "nvml-energy":
            kind, note = "nvml-power", "energy counter unavailable in a window; integrated polled power there"
        has_power = len(p) > 0
        return Measurement(
            meter=kind,
            meter_is_estimate=self.reader.is_estimate,
            meter_note=note,
            energy_j=total(training, "energy_j"),
            duration_s=total(training, "duration_s") or 0.0,
            eval_energy_j=total(evals, "energy_j"),
            eval_window_s=total(evals, "duration_s"),
            windows=tuple(windows),
            short_windows=sum(bool(w.note) for w in windows),
            power_rms_w=float(math.sqrt((wts * p**2).sum() / wts.sum())) if has_power else None,
            power_mean_w=float((wts * p).sum() / wts.sum()) if has_power else None,
            power_max_w=float(p.max()) if has_power else None,
            power_covers=self.reader.covers,
            samples=len(times),
            samples_with_power=with_power,
            samples_settling=int(settling.sum()),
            sample_errors=len(self._errors),
            sample_error_messages=tuple(self._errors[:20]),
            interval_requested_s=self.polling.interval_s,
            interval_final_s=self._interval_now,
            interval_achieved_s=float(gaps.mean()) if len(gaps) else None,
            meter_thread_cpu_s=self._thread_cpu_s,
            temperature_max_c=trace["temperature_c"].max(),
            sm_clock_mean_mhz=trace["sm_clock_mhz"].mean(),
            device=self.reader.static_info(),
            trace=trace,
        )
