"""The analysis frame: the one set of trials every table, figure and test of a study reads.

The trial is the subject of the repeated-measures design, so a subject enters only whole: with a
finished trial in every cell of the design and, under ``quality.exclude_flagged``, none of them flagged.
A subject that misses a cell or (when excluded) has a flagged one leaves every cell at once; a design is
never shrunk by dropping a level. The frame is marked once, in the aggregate step, as columns of
``trials.parquet``; every later step filters on ``in_frame``: the trials with ``frame``, their eval curves with
``in_frame``.
"""

from __future__ import annotations

from collections.abc import Iterable

import polars as pl

FRAME_COLUMNS = ("subject_complete", "subject_flagged", "in_frame")
# The fewest subjects a repeated-measures test runs on (below, it says why not).
MIN_SUBJECTS = 3


def energy_is_estimated(trials: pl.DataFrame) -> bool:
    """Whether any trial's energy is an estimate, as its record says (``meter_is_estimate``): the label every figure
    and the report carry, read from the record rather than from the meter's name."""
    return "meter_is_estimate" in trials.columns and bool(trials["meter_is_estimate"].any())


def mark(
    trials: pl.DataFrame, cells: Iterable[str], exclude_flagged: bool, require_complete: bool = True
) -> pl.DataFrame:
    """``trials`` with ``subject_complete`` (its subject finished every cell), ``subject_flagged`` (any trial of its
    subject was flagged) and ``in_frame``. ``require_complete`` False (the interim report, mid-study) keeps
    incomplete subjects, so that it describes what has finished; the tests still use complete blocks only."""
    if trials.height == 0:
        return trials.with_columns(*(pl.lit(False).alias(c) for c in FRAME_COLUMNS))
    cells = set(cells)
    flagged = pl.col("quality") == "flagged" if "quality" in trials.columns else pl.lit(False)
    per = trials.group_by("trial").agg(
        pl.col("cell").n_unique().alias("_n"),
        pl.col("cell").is_in(list(cells)).all().alias("_known"),
        flagged.any().alias("subject_flagged"),
    )
    per = per.with_columns(subject_complete=(pl.col("_n") == len(cells)) & pl.col("_known")).drop("_n", "_known")
    out = trials.drop([c for c in FRAME_COLUMNS if c in trials.columns]).join(
        per, on="trial", how="left", maintain_order="left"
    )
    keep = pl.col("subject_complete") if require_complete else pl.lit(True)
    if exclude_flagged:
        keep = keep & ~pl.col("subject_flagged")
    return out.with_columns(in_frame=keep)


def frame(trials: pl.DataFrame) -> pl.DataFrame:
    """The trials of the primary analysis (every trial when the table was never marked)."""
    return trials.filter(pl.col("in_frame")) if "in_frame" in trials.columns else trials


def in_frame(curves: pl.DataFrame, trials: pl.DataFrame) -> pl.DataFrame:
    """The curves of the analysis frame's trials only (``frame``): the curve analysis reads the trial set the tests do."""
    if curves.height == 0 or "in_frame" not in trials.columns:
        return curves
    kept = trials.filter(pl.col("in_frame")).select("cell", pl.col("trial").cast(pl.Int64))
    return curves.with_columns(pl.col("trial").cast(pl.Int64)).join(kept, on=["cell", "trial"], how="semi")


def full_runs(curves: pl.DataFrame, trials: pl.DataFrame) -> pl.DataFrame:
    """The curves of trials that trained all their tokens (no ``train.stop`` rule applied online): the runs a
    stopping rule is replayed against."""
    if "stop_rule_rule" not in trials.columns:
        return curves
    full = trials.filter(pl.col("stop_rule_rule").fill_null("none") == "none").select(
        "cell", pl.col("trial").cast(pl.Int64)
    )
    return curves.join(full, on=["cell", "trial"], how="semi")


def sensitivity_set(trials: pl.DataFrame, exclude_flagged: bool) -> tuple[str, pl.DataFrame]:
    """The other trial set, for the sensitivity analysis, and its name: complete subjects without a flagged
    trial when the primary keeps them, every complete subject when the primary excludes them."""
    complete = trials.filter(pl.col("subject_complete")) if "subject_complete" in trials.columns else trials
    if exclude_flagged:
        return "every complete subject, flagged trials included", complete
    flagged = pl.col("subject_flagged") if "subject_flagged" in trials.columns else pl.lit(False)
    return "subjects without a flagged trial", complete.filter(~flagged)


def subjects(trials: pl.DataFrame) -> int:
    return trials["trial"].n_unique() if trials.height else 0


def frame_note(trials: pl.DataFrame, exclude_flagged: bool) -> str:
    """One sentence saying which subjects the analysis used and which it left out, and why."""
    if trials.height == 0 or "in_frame" not in trials.columns:
        return "No finished trials."
    all_subjects = subjects(trials)
    kept = subjects(frame(trials))
    out = [f"The analysis uses {kept} of {all_subjects} subjects (trials run under every cell)"]
    incomplete = trials.filter(~pl.col("subject_complete"))["trial"].unique().sort().to_list()
    if incomplete:
        out.append(f"left out as incomplete (a cell missing or failed): trial {', '.join(map(str, incomplete))}")
    if exclude_flagged:
        gone = trials.filter(pl.col("subject_flagged") & pl.col("subject_complete"))["trial"].unique().sort().to_list()
        if gone:
            out.append(
                f"left out because a trial of theirs was flagged (quality.exclude_flagged): trial {', '.join(map(str, gone))}"
            )
    return "; ".join(out) + "."
