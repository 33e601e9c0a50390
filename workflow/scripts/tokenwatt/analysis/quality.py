"""Measurement quality: which trials were disturbed, and why.

A trial's energy and power are only worth comparing when the machine did the same work at the
same pace throughout. Each rule below looks at one symptom of a disturbed measurement (another
load on the machine, a throttled or busy device, a meter that sampled too little) and returns a
reason in words, or None. Thresholds are the ``quality.*`` config keys, documented there.

The anchors: MLPerf Power asks for a steady state, ≥ 1 Hz and ≥ 60 samples per run; Zeus reads
energy as a counter window with synchronised ends; Experiment Runner cools down between runs.
None of them says which runs were disturbed; this module does.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

import numpy as np
import polars as pl

from ..measurement.traces import by_rank, training_samples
from ..plan.design import per_profile, profile_key_of, series_of
from .efficiency import finite

Diagnostics = dict[str, Any]


def window_rates(steps: pl.DataFrame) -> np.ndarray:
    """Optimizer steps per second of each loss-curve window (between consecutive records), the first left out: it
    carries the warm-up (allocation, first kernels) that every trial pays.

    Steps, not real tokens: every step computes a batch of equal padded length, so its pace is the device's, while
    the real tokens per step follow the documents drawn (short ones leave more padding) and, for a selection level
    trained as a curriculum, drift by design. A window that ends an epoch's last, shorter batch is one spike, which
    the rolling median of ``level_change`` ignores.
    """
    done, elapsed = steps["step"].to_numpy(), steps["elapsed_s"].to_numpy()
    dt, dsteps = np.diff(elapsed), np.diff(done)
    ok = dt > 0
    return (dsteps[ok] / dt[ok]).astype(float)


def trial_pace(steps: pl.DataFrame, from_step: int = 0) -> float | None:
    """Optimizer steps per second from the trial's first loss record after ``from_step`` to its last: its pace with
    the warm-up before that record (allocation, first kernels) left out, a share of the trial that grows as its budget
    shrinks. ``from_step``: where a branched trial's own job began (its records before are its stable run's, shared
    with the other budgets branched from it, whose pace would dilute a slow-down of its own). None where the records
    after the first span less than half the steps after ``from_step`` (a pace over the last few steps of a trial
    recorded every 100 is noise) or no time."""
    own = steps.filter(pl.col("step") > from_step)
    if own.height < 2:
        return None
    done, elapsed = own["step"].to_numpy(), own["elapsed_s"].to_numpy()
    seconds, span = float(elapsed[-1] - elapsed[0]), float(done[-1] - done[0])
    return span / seconds if seconds > 0 and span >= (done[-1] - from_step) / 2 else None


class Unjudged(str):
    """Why a rule could not judge a trial (its samples or windows cannot support a verdict): neither flagged nor
    passed, and counted as such in the report."""


def level_change(values: np.ndarray, window: int) -> float | None:
    """The largest change of level in a series: its rolling median over ``window`` points (single spikes ignored)
    against the rolling level ``window`` points before it (adjacent, non-overlapping), as the higher over the lower
    minus 1. Judged against the level just before, not the whole series' median, a halved pace scores 1.0 however
    much of the trial it lasts, and a slow-down scores what the same speed-up does. None if shorter than two
    windows."""
    values = np.asarray(values, dtype=float)
    if len(values) < 2 * window:
        return None
    rolling = pl.Series(values).rolling_median(window_size=window).drop_nulls().to_numpy()
    before, after = rolling[:-window], rolling[window:]
    ok = (before > 0) & (after > 0)
    if not ok.any():
        return None
    return float(np.max(np.maximum(before[ok], after[ok]) / np.minimum(before[ok], after[ok])) - 1.0)


def steady_deviation(steps: pl.DataFrame, window: int) -> float | Unjudged:
    """Level change of the trial's steps per second across its loss-curve windows (warm-up window left out), or
    why it cannot be judged (too few windows)."""
    rates = window_rates(steps)
    got = level_change(rates, window)
    if got is None:
        return Unjudged(
            f"{steps.height} loss records give {len(rates)} paced windows after the first; the rolling level needs "
            f"2 × quality.steady_window = {2 * window}"
        )
    return got


def power_step(trace: pl.DataFrame, window_s: float, min_samples: int) -> float | Unjudged:
    """``device_power_step`` of every device the trial trained on: the largest of those judged (a step on any device
    is a disturbance), or why none could be."""
    judged = [device_power_step(part, window_s, min_samples) for part in by_rank(trace)]
    steps = [j for j in judged if not isinstance(j, Unjudged)]
    return max(steps) if steps else judged[0]


def device_power_step(trace: pl.DataFrame, window_s: float, min_samples: int) -> float | Unjudged:
    """Level change of the polled power during training, in windows of ``window_s`` seconds of training time (or
    of ``min_samples`` sampling intervals where the meter polls more slowly, as a GPU meter at 1 Hz does): the
    first window (the device ramping from idle to load) left out, each later one's median taken where it holds at
    least ``min_samples`` samples standing for at least half of its seconds, every window against the next two (a
    step inside one still separates its neighbours), as the higher over the lower minus 1. Or why it cannot be
    judged: fewer than two such windows, as in a trial of a second or two, whose power ramp is no disturbance.

    A sample stands for the time since the one before it in the whole trace (a poll covers the interval before it).
    The half matters where the meter polls fast: a poller that shortened its interval to 34 ms for a 4-s trial puts
    5 samples in its last 0.17 s, and their median would stand for a 0.5-s level while reading a stall of a tenth of
    a second."""
    spans = trace.sort("t_s").with_columns(span_s=pl.col("t_s").diff().fill_null(0.0))
    samples = training_samples(spans)
    if samples.height == 0:
        return Unjudged("no power samples during training")
    t, power, span = samples["t_s"].to_numpy(), samples["power_w"].to_numpy(), samples["span_s"].to_numpy()
    steps = np.diff(t)
    interval = float(np.median(steps[steps > 0])) if (steps > 0).any() else 0.0
    window_s = max(window_s, min_samples * interval)
    bins = np.floor(t / window_s).astype(int)
    levels = [
        float(np.median(power[bins == b]))
        for b in range(1, int(bins.max()) + 1)
        if (bins == b).sum() >= min_samples and span[bins == b].sum() >= window_s / 2
    ]
    if len(levels) < 2:
        return Unjudged(
            f"{t.max():.2f} s of training power: after the first {window_s:.3g} s (the ramp from idle), fewer than two "
            f"{window_s:.3g}-s windows of ≥ {min_samples} samples standing for at least half of it "
            "(quality.power_step_window_s, quality.power_step_window)"
        )
    levels = np.asarray(levels)
    pairs = [(a, b) for lag in (1, 2) for a, b in zip(levels[:-lag], levels[lag:])]
    ok = [(a, b) for a, b in pairs if a > 0 and b > 0]
    return float(max(max(a, b) / min(a, b) for a, b in ok) - 1.0) if ok else Unjudged("no training power above 0 W")


def first_temperature(trace: pl.DataFrame) -> float | None:
    """The device's first temperature reading (on several devices, the hottest of their first readings)."""
    firsts = [t["temperature_c"].drop_nulls() for t in by_rank(trace)]
    temps = pl.Series([f[0] for f in firsts if len(f)], dtype=pl.Float64).sort(descending=True)
    return float(temps[0]) if len(temps) else None


def _pct(x: float) -> str:
    return f"{100 * x:+.0f} %"


def _median(values: list[float]) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def _check_median(trial: dict[str, Any], when: str) -> float | None:
    return _median(trial[f"check_{when}_tflops"])


def profile_verdict(profile: dict[str, Any] | None, trials: list[dict[str, Any]], q: dict[str, Any]) -> dict[str, Any]:
    """Is the device profile itself a trustworthy reference? And the reference the matmul-check rule uses.

    A profile measured while the machine was busy is off for the whole study. Two symptoms: its
    windows vary too much (``profile.max_cv``, passed as ``profile_cv_max``), or the trials' own checks before training
    sit off it by more than ``quality.check_tolerance`` (median over trials). Then the trials are
    judged against the study's median check instead, so one bad profile does not flag every trial.
    CS_TFLOPS scales every trial's PE alike, so a bad profile moves PE's level, not its changes.
    """
    checks = _median([_check_median(t, "before") for t in trials if t.get("status") == "ok"])
    verdict = {
        "checks_median_tflops": checks,
        "profile_tflops": None if profile is None else profile["cs_tflops"],
        "profile_cv": None if profile is None else profile["cv"],
        "reasons": [],
    }
    if profile is None:
        return {
            **verdict,
            "status": "no profile",
            "reference": "the study's median matmul check",
            "reference_tflops": checks,
        }
    if profile["cv"] is not None and profile["cv"] > q["profile_cv_max"]:
        verdict["reasons"].append(
            f"its windows vary by {100 * profile['cv']:.0f} % (coefficient of variation; at most "
            f"{100 * q['profile_cv_max']:g} %)"
        )
    if checks and abs(checks / profile["cs_tflops"] - 1) > q["check_tolerance"]:
        verdict["reasons"].append(
            f"the trials' matmul checks before training ran {_pct(checks / profile['cs_tflops'] - 1)} "
            f"off it (median; tolerance ±{100 * q['check_tolerance']:g} %)"
        )
    if verdict["reasons"]:
        return {
            **verdict,
            "status": "disturbed",
            "reference": "the study's median matmul check",
            "reference_tflops": checks,
        }
    return {**verdict, "status": "ok", "reference": "the device profile", "reference_tflops": profile["cs_tflops"]}


def device_load(trials: pl.DataFrame) -> float | None:
    """How much more power training drew than the idle baseline: the median over finished trials of
    mean W ÷ idle W − 1. Near 0 the device was barely loaded (measured on an H200: a small model at
    batch 1 drew 123 W in training against 125 W idle), so the energy is mostly idle power × time."""
    needed = {"power_mean_w", "idle_power_w", "status"}
    if not needed <= set(trials.columns):
        return None
    rows = trials.filter((pl.col("status") == "ok") & (pl.col("idle_power_w") > 0)).drop_nulls(
        ["power_mean_w", "idle_power_w"]
    )
    return _median((rows["power_mean_w"] / rows["idle_power_w"] - 1).to_list()) if rows.height else None


def diagnose(
    trials: list[dict[str, Any]],
    traces: list[pl.DataFrame],
    steps: list[pl.DataFrame],
    reference_tflops: float | None | dict[str, float | None],
    q: dict[str, Any],
    profile_devices: list[str | None] | None = None,
) -> list[Diagnostics]:
    """The numbers the rules judge, per trial (same order as ``trials``); ``reference_tflops`` is the
    matmul checks' reference from ``profile_verdict``, one per device profile (by profile key) or one for all.
    A trial's pace (``trial_pace``; a branched trial's own job's) is judged against the median of its series: the
    trials at every budget that share its other levels, which train the same model on the same device in the same
    steps, so the budget leaves their pace alone (a disturbance that slows every trial of one budget still stands out;
    a device that slows as its longer trials heat it is flagged too, since its measurement conditions changed with the
    budget). Its idle power is judged against that of the trials measured on the same device profile (hardware level
    and precision) and device count. ``profile_devices`` names, per trial, the device its CS_TFLOPS profile ran on
    (None: no profile)."""
    paces = [trial_pace(st, (t.get("branch") or {}).get("from_step") or 0) for t, st in zip(trials, steps, strict=True)]
    series_keys = [series_of(t["levels"]) for t in trials]
    by_series: dict[str, list[float | None]] = {}
    by_device: dict[str, list[float]] = {}
    # A trial without two loss records, or without a finite idle power, has no pace or idle figure to judge.
    for t, pace, series in zip(trials, paces, series_keys):
        by_series.setdefault(series, []).append(pace)
        by_device.setdefault(_idle_group(t), []).append(finite(t["idle_power_w"]))
    series_pace = {k: _median(v) for k, v in by_series.items()}
    idle_medians = {k: _median(v) for k, v in by_device.items()}
    out = []
    for t, pace, series, trace, st, measured_on in zip(
        trials, paces, series_keys, traces, steps, profile_devices or [None] * len(trials), strict=True
    ):
        idle_w = finite(t["idle_power_w"])
        device = _idle_group(t)
        reference = per_profile(reference_tflops, t["levels"])
        vs_reference = lambda x: None if x is None or not reference else x / reference  # noqa: E731
        idle_median = idle_medians[device]
        out.append(
            {
                "pace_steps_per_s": pace,
                "pace_vs_series": None if pace is None or not series_pace[series] else pace / series_pace[series] - 1.0,
                "throughput_steady_deviation": steady_deviation(st, q["steady_window"]),
                "series_trials": sum(p is not None for p in by_series[series]),
                "check_before_ratio": vs_reference(_check_median(t, "before")),
                "check_after_ratio": vs_reference(_check_median(t, "after")),
                "idle_power_deviation_w": None if idle_w is None or idle_median is None else idle_w - idle_median,
                "idle_power_median_w": idle_median,
                "power_step": power_step(trace, q["power_step_window_s"], q["power_step_window"]),
                "temperature_start_c": first_temperature(trace),
                "profile_device_name": measured_on,
            }
        )
    return out


def _idle_group(trial: dict[str, Any]) -> str:
    """The trials whose idle powers are one level: the same device profile and the same device count (a trial on
    several devices records their summed idle power)."""
    return f"{profile_key_of(trial['levels'])}devices={trial.get('devices') or 1}"


Rule = Callable[[dict[str, Any], Diagnostics, dict[str, Any]], "str | None"]


def _throughput(t, d, q):
    dev = d["pace_vs_series"]
    if dev is None:
        return Unjudged(
            "its loss records after the first span less than half its steps (train.log_every): no pace after the "
            "warm-up to judge"
        )
    if d["series_trials"] < 3:
        return Unjudged(
            f"{d['series_trials']} paced trial(s) in its series (every budget at its other levels): a median of fewer "
            "than 3 is no reference"
        )
    # Judged as the faster pace over the slower, as the steadiness rule judges a level change: a trial at half its
    # series' pace scores what one at twice it does.
    if max(1 + dev, 1 / (1 + dev)) - 1 > q["throughput_tolerance"]:
        return (
            f"throughput: pace {1 + dev:.2f} × the median optimizer steps per second of its series (every budget at "
            f"its other levels; tolerance {100 * q['throughput_tolerance']:g} % either way)"
        )
    return None


def _level_change(found: float | Unjudged, tolerance: float, says: Callable[[float], str]) -> str | Unjudged | None:
    """A change of level measured within a trial (Unjudged where it could not be): ``says`` it beyond ``tolerance``."""
    if isinstance(found, Unjudged):
        return found
    return says(found) if found > tolerance else None


def _steady(t, d, q):
    return _level_change(
        d["throughput_steady_deviation"],
        q["steady_tolerance"],
        lambda dev: (
            f"throughput not steady: its steps per second changed level by {100 * dev:.0f} % against the "
            f"level before it during training (tolerance {100 * q['steady_tolerance']:g} %)"
        ),
    )


def _check(t, d, q):
    if d["check_before_ratio"] is None and d["check_after_ratio"] is None:
        return Unjudged("no matmul check around the trial (profile.check_windows: 0), or no reference to judge it by")
    bad = [
        f"{when} {_pct(d[f'check_{when}_ratio'] - 1)}"
        for when in ("before", "after")
        if d[f"check_{when}_ratio"] is not None and abs(d[f"check_{when}_ratio"] - 1) > q["check_tolerance"]
    ]
    if bad:
        return (
            f"matmul check against the reference throughput: {', '.join(bad)} "
            f"(tolerance ±{100 * q['check_tolerance']:g} %)"
        )
    return None


def _idle(t, d, q):
    dev, median = d["idle_power_deviation_w"], d["idle_power_median_w"]
    if dev is None:
        return Unjudged("no idle power measured")
    limit = max(q["idle_tolerance"] * median, q["idle_floor_w"])
    if abs(dev) > limit:
        return (
            f"idle power {t['idle_power_w']:.1f} W against the median {median:.1f} W of its device profile and device "
            f"count (tolerance ±{limit:.1f} W)"
        )
    return None


def _step(t, d, q):
    return _level_change(
        d["power_step"],
        q["power_step_tolerance"],
        lambda step: (
            f"power stepped by {100 * step:.0f} % between {q['power_step_window_s']:g}-s windows of "
            f"training (tolerance {100 * q['power_step_tolerance']:g} %)"
        ),
    )


def _samples(t, d, q):
    if t["meter"] == "none":
        return Unjudged("meter none: nothing was sampled, by design")
    got, floor = t["samples_with_power"], q["min_samples"]
    if got >= floor:
        return None
    # The poller aims at meter.target_samples by shortening its interval, down to the fastest its meter polls (10 ms
    # for the CPU estimate, whose CPU-time accounting resolves no finer). A trial that asked for enough samples and
    # kept the poller's pace but ended before `floor` of those intervals had passed is as short as its study made it:
    # nothing disturbed it, and no setting would have given it more samples. Not so for a trial its stopping rule
    # ended early (the poller sized its interval to the planned length) or one polled at meter.interval_s itself.
    final, achieved = t.get("interval_final_s"), t["interval_achieved_s"]
    if (
        q.get("target_samples", 0) >= floor
        and not t.get("stopped")
        and final
        and final < t["interval_requested_s"]
        and achieved
        and achieved <= q["max_interval_ratio"] * final
        and t["train_s"] < floor * achieved
    ):
        return Unjudged(
            f"{got} power samples: it trained {t['train_s']:.2f} s, under {floor} of the {1000 * achieved:.0f}-ms "
            "intervals its meter polled at, the fastest it polls (its power figures rest on those samples)"
        )
    return (
        f"only {got} power samples (at least {floor}, MLPerf Power's floor; raise meter.target_samples, or lower "
        "meter.interval_s)"
    )


def _interval(t, d, q):
    got, asked = t["interval_achieved_s"], t["interval_requested_s"]
    if got is None:
        return Unjudged("no sampling interval recorded")
    if got > q["max_interval_ratio"] * asked:
        return f"power sampled every {got:.3g} s on average, asked {asked:g} s (more than {q['max_interval_ratio']:g}×)"
    return None


def _errors(t, d, q):
    if t["sample_errors"]:
        return f"{t['sample_errors']} failed power reads"
    return None


def _profile_device(t, d, q):
    # On SLURM the profile job and a trial can land on different GPU models: its CS_TFLOPS is then another device's.
    if not d["profile_device_name"]:
        return Unjudged("no device profile to compare with")
    if d["profile_device_name"] and d["profile_device_name"] != t["device_name"]:
        return (
            f"trained on {t['device_name']} but its CS_TFLOPS was measured on {d['profile_device_name']} (pin the "
            "hardware level to one device model, e.g. design.hardware.<level>.gpu_model)"
        )
    return None


def _temperature(t, d, q):
    target, start = q.get("start_below_c"), d["temperature_start_c"]
    if target is None:
        return Unjudged("no cooldown target (meter.cooldown_below_c)")
    if start is None:
        return Unjudged("no temperature reading")
    if start >= target:
        return f"GPU at {start:.0f} °C when training started (cooldown target below {target:g} °C)"
    return None


def _resumed(t, d, q):
    # A resumed trial is judged by every rule on its joined measurement; this one flags only what cannot be joined:
    # work its stopped process did after the last checkpoint that no heartbeat counted.
    if not t.get("resumed"):
        return Unjudged("not resumed")
    if t.get("lost_energy_j") is None and t.get("meter") != "none":
        return (
            f"resumed {t['resumed']}× and the energy its stopped process spent after the last checkpoint is not known "
            "(no heartbeat of it): the energy it took is more than its record shows"
        )
    return None


RULES: dict[str, Rule] = {
    "throughput": _throughput,
    "unsteady": _steady,
    "matmul_check": _check,
    "idle_power": _idle,
    "power_step": _step,
    "few_samples": _samples,
    "sample_interval": _interval,
    "sample_errors": _errors,
    "start_temperature": _temperature,
    "profile_device": _profile_device,
    "resumed": _resumed,
}


def assess(trials: list[dict[str, Any]], diagnostics: list[Diagnostics], q: dict[str, Any]) -> list[dict[str, Any]]:
    """Per trial (``diagnostics``: ``diagnose``'s, in the same order): its diagnostics, one ``flag_<rule>`` per rule,
    ``unjudged_<rule>`` (why the rule could not judge it, or null), ``quality`` (ok | flagged) and the reasons in
    words."""
    out = []
    for t, d in zip(trials, diagnostics, strict=True):
        reasons = {name: rule(t, d, q) for name, rule in RULES.items()}
        said = [r for r in reasons.values() if r and not isinstance(r, Unjudged)]
        numbers = {k: (None if isinstance(v, Unjudged) else v) for k, v in d.items()}
        out.append(
            {
                **numbers,
                **{f"flag_{name}": r is not None and not isinstance(r, Unjudged) for name, r in reasons.items()},
                **{f"unjudged_{name}": str(r) if isinstance(r, Unjudged) else None for name, r in reasons.items()},
                "quality": "flagged" if said else "ok",
                "quality_reasons": "; ".join(said),
            }
        )
    return out


# The columns of quality.csv: which trial, its verdict and reasons, every flag and the numbers behind them.
QUALITY_COLUMNS = [
    "series",
    "budget",
    "trial",
    "run_position",
    "quality",
    "quality_reasons",
    *(f"flag_{name}" for name in RULES),
    *(f"unjudged_{name}" for name in RULES),
    "pace_steps_per_s",
    "pace_vs_series",
    "throughput_steady_deviation",
    "check_before_ratio",
    "check_after_ratio",
    "idle_power_deviation_w",
    "power_step",
    "temperature_start_c",
]
