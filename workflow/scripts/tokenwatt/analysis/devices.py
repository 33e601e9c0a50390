"""Does a second device buy quality per joule, or only time? The devices product (design.devices).

The reference study trained on one GPU and said that more GPUs do not necessarily raise efficiency; a study with a
devices factor measures it. Each level with more devices is compared with the fewest-device level trial by trial:
the same trial id, budget and every other level, so the two trials trained the same chunks in the same global
batches from the same initial weights, and differ only by how many devices shared each step. Per measure, the log
ratio of each such pair; the pairs of one trial id (its budgets and other levels) are averaged first, because trial
ids are the replicates (the data drawn, the weights initialised), budgets and other levels are not; the geometric
mean ratio over trial ids has a t interval with n − 1 degrees of freedom, n the trial ids. It reads the analysis
frame (complete subjects: a trial id with a diverged or missing trial is left out, named). Quality per joule is invPPL per kJ (the efficiency layer), training time the slowest rank's
seconds, energy the devices' sum.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import polars as pl
from scipy import stats

from ..plan.design import LEVEL_PREFIX, within_factors
from .frame import frame
from .products import Result

COLUMN = LEVEL_PREFIX + "devices"
# The measures compared, each as a ratio (more devices ÷ the fewest): what a device count changes.
MEASURES = {"train_s": "training time", "energy_j": "training energy", "quality_per_kj": "quality per kJ"}
CONFIDENCE = 0.95


def _interval(values: np.ndarray) -> dict[str, Any]:
    """The geometric mean ratio of per-trial-id mean log ratios, its t interval and the one-sample t test's p; no
    interval from fewer than two trial ids."""
    n = len(values)
    mean = float(values.mean()) if n else math.nan
    out: dict[str, Any] = {"ratio": math.exp(mean) if n else None, "low": None, "high": None, "p": None}
    if n >= 2:
        sd = float(values.std(ddof=1))
        half = float(stats.t.ppf(0.5 + CONFIDENCE / 2, n - 1)) * sd / math.sqrt(n)
        out.update(low=math.exp(mean - half), high=math.exp(mean + half))
        out["p"] = float(stats.ttest_1samp(values, 0.0).pvalue) if sd > 0 else (0.0 if mean else 1.0)
    return out


def _verdict(c: dict[str, Any]) -> str:
    if c["low"] is None:
        return "not judged"
    return "lower" if c["high"] < 1 else "higher" if c["low"] > 1 else "no difference shown"


def compare(trials: pl.DataFrame, devices: int, reference: int) -> dict[str, Any]:
    """``devices`` against ``reference`` devices, paired by trial id, budget and every other level; a pair whose two
    trials were metered by different meters is left out (their ratio would be the meters')."""
    keys = ["trial", *(c for c in within_factors(trials.columns) if c != COLUMN)]
    columns = [*keys, "meter", *MEASURES]
    more = trials.filter(pl.col(COLUMN) == str(devices)).select(columns)
    fewer = trials.filter(pl.col(COLUMN) == str(reference)).select(columns)
    joined = more.join(fewer, on=keys, suffix="_ref")
    pairs = joined.filter(pl.col("meter") == pl.col("meter_ref"))
    measures = {}
    for measure, words in MEASURES.items():
        logged = pairs.filter((pl.col(measure) > 0) & (pl.col(f"{measure}_ref") > 0)).with_columns(
            log_ratio=(pl.col(measure) / pl.col(f"{measure}_ref")).log()
        )
        per_trial = logged.group_by("trial").agg(pl.col("log_ratio").mean()).sort("trial")
        found = _interval(per_trial["log_ratio"].to_numpy())
        measures[measure] = {
            "measure": words,
            **found,
            "verdict": _verdict(found),
            "trial_ids": per_trial.height,
            "pairs": logged.height,
        }
    return {
        "devices": devices,
        "reference": reference,
        "pairs": pairs.height,
        "other_meter": joined.height - pairs.height,
        "trial_ids": pairs["trial"].n_unique(),
        "measures": measures,
        "answer": answer(devices, reference, measures),
    }


def answer(devices: int, reference: int, measures: dict[str, dict[str, Any]]) -> str:
    """The reference study's question in words: what the extra devices bought, each part only as far as its interval
    shows; a difference not shown is said as such, never as an absence."""
    time, quality = measures["train_s"]["verdict"], measures["quality_per_kj"]["verdict"]
    if "not judged" in (time, quality):
        return (
            f"{devices} devices against {reference}: not judged (fewer than two trial ids with both trials measured), "
            "so whether the extra devices buy quality per joule or only time is not answered."
        )
    said_time = {
        "lower": "saved training time",
        "higher": "cost training time",
        "no difference shown": "no difference in training time shown",
    }[time]
    said_quality = {
        "higher": "raised quality per joule",
        "lower": "lowered quality per joule",
        "no difference shown": "no difference in quality per joule shown",
    }[quality]
    if time == "lower":
        verdict = {
            "higher": "bought time and quality per joule",
            "lower": "bought time, paid for in quality per joule",
            "no difference shown": "bought time; whether they changed quality per joule is not shown",
        }[quality]
    elif quality == "higher":
        verdict = "bought quality per joule" + (", paid for in time" if time == "higher" else "")
    elif time == "higher" or quality == "lower":
        verdict = "cost " + " and ".join(
            w for w, yes in (("time", time == "higher"), ("quality per joule", quality == "lower")) if yes
        )
        verdict += " and bought nothing shown"
    else:
        verdict = "bought nothing shown: neither difference is told apart from none"
    return f"{devices} devices against {reference}: {said_time}, {said_quality}. The extra devices {verdict}."


def devices_product(settings: Any, trials: pl.DataFrame) -> Result:
    """The devices product: every level with more devices against the fewest-device level, on the analysis frame
    (complete subjects; flagged ones out where quality.exclude_flagged says so), as every test of the study."""
    if COLUMN not in trials.columns or trials.height == 0:
        return Result({"comparisons": [], "reference": None}, {"devices": pl.DataFrame()}, "no devices factor")
    used = frame(trials)
    left_out = sorted(set(trials["trial"].to_list()) - set(used["trial"].to_list()))
    levels = sorted({int(v) for v in trials[COLUMN].unique().to_list()})
    comparisons = [compare(used, n, levels[0]) for n in levels[1:]]
    rows = [
        {"devices": c["devices"], "reference": c["reference"], "measure_key": key, **m}
        for c in comparisons
        for key, m in c["measures"].items()
    ]
    return Result(
        {
            "reference": levels[0],
            "levels": levels,
            "confidence": CONFIDENCE,
            "trial_ids_left_out": left_out,
            "comparisons": comparisons,
        },
        {"devices": pl.DataFrame(rows)},
        " ".join(c["answer"] for c in comparisons),
    )
