"""The power trace a trial writes holds every window of its meter session (idle, checks, training segments,
evaluations); what training drew is the samples of its ``train*`` windows. A trial on several devices writes each
device's samples, labelled with its ``rank``: each device's own trace is ``by_rank``'s."""

from __future__ import annotations

import polars as pl


def training_samples(trace: pl.DataFrame) -> pl.DataFrame:
    """The trace's training samples with power, time counted from the first of them (the evaluation pauses left
    in place, so a pause shows as a gap, never as a change of level). A trace without windows is all training."""
    rows = trace.drop_nulls("power_w")
    if "window" in rows.columns:
        rows = rows.filter(pl.col("window").str.starts_with("train").fill_null(False))
    return rows.with_columns(pl.col("t_s") - pl.col("t_s").min()) if rows.height else rows


def by_rank(trace: pl.DataFrame) -> list[pl.DataFrame]:
    """Each device's trace, in rank order: a trace without ranks (one device) is its own."""
    if "rank" not in trace.columns:
        return [trace]
    return [
        part.drop("rank") for part in trace.sort("rank", maintain_order=True).partition_by("rank", maintain_order=True)
    ]
