"""The trials product's memory figure: what each trial held against what it spent. Peak memory is what 8-bit and
4-bit optimizer states exist to save, and what decides whether a protocol fits a device at all; its energy is what
the study weighs it against."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import polars as pl  # noqa: E402

from ..plan.design import series_label  # noqa: E402

MB = 1e6


def memory_vs_energy(trials: pl.DataFrame, estimated: bool):
    """Each trial's peak memory during training (CUDA's max allocated; on a CPU the process's peak resident set) against
    its training energy, one colour per series (a factorial study's levels but the budget), one marker per budget;
    and per series the floor its weights, gradients and optimizer state hold, computed, as a dashed line."""
    fig, ax = plt.subplots(figsize=(7.5, 4.5), layout="constrained")
    budgets = sorted(trials["budget"].unique().to_list())
    markers = "osD^v<>ph*"
    for i, series in enumerate(trials["series"].unique(maintain_order=True).to_list()):
        mine = trials.filter(pl.col("series") == series).drop_nulls(["peak_memory_bytes", "energy_j"])
        for j, budget in enumerate(budgets):
            at = mine.filter(pl.col("budget") == budget)
            ax.scatter(
                at["energy_j"],
                at["peak_memory_bytes"] / MB,
                color=f"C{i % 10}",
                marker=markers[j % len(markers)],
                s=18,
                alpha=0.7,
                label=f"{series_label(series) or 'trials'}, {budget:,} tokens",
            )
        floor = mine.select(
            pl.col("model_bytes") + pl.col("gradient_bytes") + pl.col("optimizer_state_bytes")
        ).to_series()
        if floor.drop_nulls().len():
            ax.axhline(floor.max() / MB, color=f"C{i % 10}", ls="--", lw=1)
    ax.set_xscale("log")
    ax.set_xlabel("training energy per trial (J)" + (" — ESTIMATED" if estimated else ""))
    ax.set_ylabel("peak memory during training (MB)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.suptitle(
        "Memory against energy: each trial's peak (points) and its weights + gradients + optimizer state (dashed)",
        fontsize=10,
    )
    return fig
