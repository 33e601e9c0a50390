"""The trials product (``tokenwatt.analysis.products``): what the trial-table figures draw beyond the aggregate's
tables, written beside its JSON. That is the power of one trial per cell over its training window, device by device
(``trace_samples.csv``), the currency the cost figure names, and whether any trial's energy is an estimate (every
figure says so, the measurement-quality one judging every trial); its figures draw these and the aggregate's tables.
"""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from ..measurement.traces import by_rank, training_samples
from .frame import energy_is_estimated
from .products import Result
from .tables import PRODUCT_TABLES


def trace_samples(traces: Mapping[tuple[str, int], pl.DataFrame]) -> pl.DataFrame:
    """Each trace's training samples (time from the first of them; evaluation pauses left as gaps), one row per sample
    with its cell, trial and device (0 for a one-device trial; a rank otherwise), in the traces' order."""
    parts = [
        training_samples(part).select(
            pl.lit(cell).alias("cell"), pl.lit(trial).alias("trial"), pl.lit(device).alias("device"), "t_s", "power_w"
        )
        for (cell, trial), trace in traces.items()
        for device, part in enumerate(by_rank(trace))
    ]
    schema = PRODUCT_TABLES["trace_samples"]
    return pl.concat([p.cast(schema) for p in parts]) if parts else pl.DataFrame(schema=schema)


def trials_product(settings: str, trials: pl.DataFrame, traces: Mapping[tuple[str, int], pl.DataFrame]) -> Result:
    """``settings`` is cost.currency; ``traces`` maps (cell, trial) to its power trace."""
    samples = trace_samples(traces)
    shown = [{"cell": cell, "trial": trial} for cell, trial in traces]
    return Result(
        data={"currency": settings, "estimated": energy_is_estimated(trials), "traces": shown},
        tables={"trace_samples": samples},
        summary=f"{samples.height} power samples of {len(shown)} trials for the figures",
    )


def traces_of(samples: pl.DataFrame, shown: list[dict]) -> dict[tuple[str, int], pl.DataFrame]:
    """The traces the power figure draws, back from ``trace_samples.csv``: (cell, trial) → its samples, a ``rank``
    column for each device (the figure draws one line per device), in the product's order."""
    return {
        (t["cell"], t["trial"]): samples.filter((pl.col("cell") == t["cell"]) & (pl.col("trial") == t["trial"]))
        .rename({"device": "rank"})
        .select("rank", "t_s", "power_w")
        for t in shown
    }
