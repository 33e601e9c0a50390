"""Energy from what a meter reads: the seconds each power sample stands for (and the stretch of the clock it
covers), the integral of sampled power over a window, the RMS of several devices' summed power, and the shortest
window an energy counter resolves.

Pure functions of the samples (numpy only), shared by every meter (``meter.py``), by the combination of a
multi-device trial's ranks (``combine.py``) and by the config check, which asks before any trial whether a planned
evaluation is long enough for NVML's counter.
"""

from __future__ import annotations

import math


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


def sample_spans(times, covers: str):
    """The stretch of time (start, end arrays) each power sample stands for, whose lengths are ``sample_weights``'
    (to rounding): ``previous``: from the sample before it to its own instant; ``instant``: between the midpoints to
    its neighbours (the first and last end at their own instants). Placed on the clock, unlike the weights, so that
    several devices' samples can be lined up (``rms_of_sum``)."""
    import numpy as np

    t = np.asarray(times, dtype=float)
    if len(t) < 2:
        return t.copy(), t.copy()
    if covers == "previous":
        return np.concatenate([[t[0]], t[:-1]]), t.copy()
    mids = (t[1:] + t[:-1]) / 2
    return np.concatenate([[t[0]], mids]), np.concatenate([mids, [t[-1]]])


def rms_of_sum(devices) -> float | None:
    """The RMS of several devices' summed power, each device given as (starts, ends, watts) of its samples' spans on
    one clock, sorted, not overlapping (``sample_spans``, some left out): each device's power is the step function its
    samples make, and the sum is averaged over the time every device has a sample for (elsewhere it is not known).
    So one device gives its own time-weighted RMS, and devices whose power swings out of step give less than the sum of
    their RMS. None where they share no time."""
    import numpy as np

    if not devices or any(len(lo) == 0 for lo, _, _ in devices):  # a device without samples: the sum is unknown
        return None
    breaks = np.unique(np.concatenate([np.concatenate([lo, hi]) for lo, hi, _ in devices]))
    if len(breaks) < 2:
        return None
    mid, dt = (breaks[1:] + breaks[:-1]) / 2, np.diff(breaks)
    total, everyone = np.zeros(len(mid)), np.ones(len(mid), dtype=bool)
    for lo, hi, watts in devices:
        # the last span starting at or before each piece's midpoint holds it if it has not ended there
        started = np.searchsorted(lo, mid, side="right")
        j = np.clip(started - 1, 0, None)
        inside = (started > 0) & (mid < np.asarray(hi)[j])
        everyone &= inside
        total += np.where(inside, np.asarray(watts, dtype=float)[j], 0.0)
    seconds = dt * everyone
    if seconds.sum() <= 0:
        return None
    return float(np.sqrt((seconds * total**2).sum() / seconds.sum()))


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
