"""Does a second device buy quality per joule, or only time? The devices product (design.devices).

The reference study trained on one GPU and said that more GPUs do not necessarily raise efficiency; a study with a
devices factor measures it. Each level with more devices is compared with the fewest-device level trial by trial:
the same trial id, budget and every other level, so the two trials trained the same chunks in the same global
batches from the same initial weights, and differ only by how many devices shared each step. Per measure, the log
ratio of each such pair; the pairs of one trial id (its budgets and other levels) are averaged first, because trial
ids are the replicates (the data drawn, the weights initialised), budgets and other levels are not; the geometric
mean ratio over trial ids has a t interval with n − 1 degrees of freedom, n the trial ids. A diverged trial leaves
its pair out, counted. Quality per joule is invPPL per kJ (the efficiency layer), training time the slowest rank's
seconds, energy the devices' sum.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import polars as pl
from scipy import stats

from ..plan.design import LEVEL_PREFIX, within_factors
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
    return "lower" if c["high"] < 1 else "higher" if c["low"] > 1 else "not told apart"


def compare(trials: pl.DataFrame, devices: int, reference: int) -> dict[str, Any]:
    """``devices`` against ``reference`` devices, paired by trial id, budget and every other level."""
    keys = ["trial", *(c for c in within_factors(trials.columns) if c != COLUMN)]
    ok = trials.filter(pl.col("status") == "ok")
    columns = [*keys, *MEASURES]
    more = ok.filter(pl.col(COLUMN) == str(devices)).select(columns)
    fewer = ok.filter(pl.col(COLUMN) == str(reference)).select(columns)
    pairs = more.join(fewer, on=keys, suffix="_ref")
    expected = trials.filter(pl.col(COLUMN) == str(devices)).height
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
        "left_out": expected - pairs.height,
        "trial_ids": pairs["trial"].n_unique(),
        "measures": measures,
        "answer": answer(devices, reference, measures),
    }


def answer(devices: int, reference: int, measures: dict[str, dict[str, Any]]) -> str:
    """The reference study's question in words: what the extra devices bought, each part only as far as measured."""
    time, quality = measures["train_s"]["verdict"], measures["quality_per_kj"]["verdict"]
    if "not judged" in (time, quality):
        return (
            f"{devices} devices against {reference}: not judged (fewer than two trial ids have both), so whether the "
            "extra devices buy quality per joule or only time is not answered."
        )
    said_time = {
        "lower": "saved training time",
        "higher": "cost training time",
        "not told apart": "training time not told apart",
    }[time]
    said_quality = {
        "higher": "raised quality per joule",
        "lower": "lowered quality per joule",
        "not told apart": "quality per joule not told apart",
    }[quality]
    bought = [what for what, yes in (("time", time == "lower"), ("quality per joule", quality == "higher")) if yes]
    verdict = " and ".join(bought) or "neither time nor quality per joule"
    if bought == ["time"]:
        verdict = "time, paid for in quality per joule" if quality == "lower" else "time only"
    return f"{devices} devices against {reference}: {said_time}, {said_quality}. The extra devices bought {verdict}."


def devices_product(settings: Any, trials: pl.DataFrame) -> Result:
    """The devices product: every level with more devices against the fewest-device level."""
    if COLUMN not in trials.columns or trials.height == 0:
        return Result({"comparisons": [], "reference": None}, {"devices": pl.DataFrame()}, "no devices factor")
    levels = sorted({int(v) for v in trials[COLUMN].unique().to_list()})
    comparisons = [compare(trials, n, levels[0]) for n in levels[1:]]
    rows = [
        {"devices": c["devices"], "reference": c["reference"], "measure_key": key, **m}
        for c in comparisons
        for key, m in c["measures"].items()
    ]
    return Result(
        {"reference": levels[0], "levels": levels, "confidence": CONFIDENCE, "comparisons": comparisons},
        {"devices": pl.DataFrame(rows)},
        " ".join(c["answer"] for c in comparisons),
    )
