"""The memory figure of the trials product: every trial's peak memory against its training energy, and each series'
computed floor (weights + gradients + optimizer state) beside it."""

import io

import numpy as np
import polars as pl
from tokenwatt.presentation.memory_figure import memory_vs_energy


def _trials() -> pl.DataFrame:
    """Two optimizer levels × two budgets × three trial ids at a CPU study's scale: a ~360 MB process peak against a
    few hundred KB of state, energies in J growing with the budget, unequal spreads."""
    rng = np.random.default_rng(4)
    rows = []
    for series, peak, state, joules in (
        ("optimizer=adamw", 3.6e8, 673_108, 0.00088),
        ("optimizer=adamw-8bit", 4.9e8, 286_040, 0.0024),
    ):
        for budget in (50_000, 200_000):
            for trial in (1, 2, 3):
                rows.append(
                    {
                        "series": series,
                        "budget": budget,
                        "trial": trial,
                        "energy_j": budget * joules * float(np.exp(rng.normal(0, 0.05))),
                        "peak_memory_bytes": peak * float(np.exp(rng.normal(0, 0.02))),
                        "model_bytes": 336_512,
                        "gradient_bytes": 336_512,
                        "optimizer_state_bytes": state,
                    }
                )
    rows[0]["peak_memory_bytes"] = None  # not recorded: left out, not drawn at 0
    return pl.DataFrame(rows)


def test_every_trial_with_a_peak_is_a_point_and_each_series_floor_a_dashed_line():
    trials = _trials()
    fig = memory_vs_energy(trials, estimated=True)
    fig.savefig(io.BytesIO(), format="png")
    ax = fig.axes[0]
    points = sum(len(c.get_offsets()) for c in ax.collections)
    assert points == trials.height - 1
    floors = sorted(line.get_ydata()[0] for line in ax.get_lines() if line.get_linestyle() == "--")
    assert floors == [(336_512 * 2 + 286_040) / 1e6, (336_512 * 2 + 673_108) / 1e6]
    assert "ESTIMATED" in ax.get_xlabel() and ax.get_xscale() == "log"
