"""Energy from what a meter reads: the seconds each power sample stands for, the integral of sampled power over a
window, and the shortest window an energy counter resolves.

Pure functions of the samples (numpy only), shared by every meter (``meter.py``) and by the config check, which asks
before any trial whether a planned evaluation is long enough for NVML's counter.
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
