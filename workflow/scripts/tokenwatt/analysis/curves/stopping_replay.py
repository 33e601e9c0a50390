"""Stopping rules, replayed: what an energy-aware stopping rule would have saved and cost.

Each named rule (``analysis.stopping``) is replayed on the full runs, point by point as training would have asked
it, and priced against the same trial's full run: energy and time saved, loss and perplexity lost, per trial and
per cell paired with 95 % intervals, and the energy to each target of the full and the stopped runs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from ...plan.stopping import StopRule, should_stop
from ..scale import paired_change
from .runs import RUN_SCHEMA, Run, floats, nullable, perplexity_change_pct, rows_table, runs_of
from .targets import Target, energy_to_target, energy_to_target_summary

STOP_TRIAL_SCHEMA = {
    **RUN_SCHEMA,
    "stopped": pl.Boolean,
    "stop_point": pl.Int64,
    "stop_reason": pl.String,
    "stop_eval_whole_set": pl.Boolean,
    "full_energy_j": pl.Float64,
    "stop_energy_j": pl.Float64,
    "energy_saved_pct": pl.Float64,
    "full_train_s": pl.Float64,
    "stop_train_s": pl.Float64,
    "time_saved_pct": pl.Float64,
    "full_real_tokens": pl.Float64,
    "stop_real_tokens": pl.Float64,
    "full_loss": pl.Float64,
    "stop_loss": pl.Float64,
    "loss_increase": pl.Float64,
    "ppl_increase_pct": pl.Float64,
}
STOP_CELL_SCHEMA = {
    "cell": pl.String,
    "series": pl.String,
    "budget": pl.Int64,
    "n": pl.Int64,
    "n_stopped": pl.Int64,
    **{
        f"{m}{k}": pl.Float64
        for m in ("energy_saved_pct", "time_saved_pct", "loss_increase", "ppl_increase_pct")
        for k in ("", "_ci95_low", "_ci95_high")
    },
}
STOP_NOTE = (
    "The stopped runs are the full runs cut where the rule first said stop (the rule at the final point "
    "changes nothing). Their loss is the evaluation at the stop point; where intermediate evaluations use a "
    "subset of the eval set (eval.max_tokens) and the final one the whole set, quality lost compares a subset "
    "loss with a whole-set loss (stop_eval_whole_set says which)."
)


@dataclass(frozen=True)
class StoppingOutcomes:
    """A rule replayed on full runs: ``trials`` (per run: where and why it would have stopped, and what that
    saved and lost against its own full run), ``cells`` (per cell, the paired savings and losses with 95 %
    intervals), ``targets`` (``energy_to_target_summary`` of the full and the stopped runs, column ``run``)."""

    rule: StopRule
    trials: pl.DataFrame
    cells: pl.DataFrame
    targets: pl.DataFrame
    note: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule.to_dict(),
            "trials": self.trials.to_dicts(),
            "cells": self.cells.to_dicts(),
            "targets": self.targets.to_dicts(),
            "note": self.note,
        }


def _stop_index(run: Run, rule: StopRule) -> tuple[int, str | None]:
    """The index of the point the rule would have stopped the run at, and why; the last point and None if never."""
    points = run.rule_points()
    for k in range(1, len(points)):
        reason = should_stop(points[:k], rule)
        if reason is not None:
            return k - 1, reason
    return len(points) - 1, None


def _saved(full: float, stop: float) -> float | None:
    return nullable(100.0 * (1.0 - stop / full)) if full and math.isfinite(full) else None


def _bounds(c: dict[str, Any], as_value: Any) -> tuple[Any, Any, Any]:
    """``paired_change``'s change and interval through ``as_value`` (a decreasing map swaps the bounds)."""
    values = [as_value(c[k]) if c[k] is not None else None for k in ("change", "change_ci95_low", "change_ci95_high")]
    low, high = sorted(values[1:]) if None not in values[1:] else values[1:]
    return values[0], low, high


def _stop_cell(block: pl.DataFrame) -> dict[str, Any]:
    """One cell's paired savings (geometric mean ratio stopped / full on log values, as % saved) and losses (mean
    loss increase on the raw scale, and as the % change of the geometric mean perplexity)."""

    def pair(before: str, after: str, scale: str) -> dict[str, Any]:
        return paired_change(floats(block, before), floats(block, after), scale)

    row: dict[str, Any] = {
        "cell": block["cell"][0],
        "series": block["series"][0],
        "budget": block["budget"][0],
        "n": block.height,
        "n_stopped": int(block["stopped"].sum()),
    }
    for name, before, after in (
        ("energy_saved_pct", "full_energy_j", "stop_energy_j"),
        ("time_saved_pct", "full_train_s", "stop_train_s"),
    ):
        saved = _bounds(pair(before, after, "log"), lambda v: 0.0 - v)  # a change of −x % is x % saved
        row.update(zip((name, f"{name}_ci95_low", f"{name}_ci95_high"), saved))
    loss = pair("full_loss", "stop_loss", "raw")
    row.update(zip(("loss_increase", "loss_increase_ci95_low", "loss_increase_ci95_high"), _bounds(loss, lambda v: v)))
    row.update(
        zip(
            ("ppl_increase_pct", "ppl_increase_pct_ci95_low", "ppl_increase_pct_ci95_high"),
            _bounds(loss, perplexity_change_pct),
        )
    )
    return row


def stopping_outcomes(
    curves: pl.DataFrame, rule: StopRule, targets: Sequence[Target | Mapping[str, float]] = ()
) -> StoppingOutcomes:
    """Replay ``rule`` on full-run curves (``stopping.should_stop`` at each point, as training would call it) and
    price it per trial against the same trial's full run: energy and time saved (%), loss increase (nats) and
    perplexity increase (%); per cell the paired means with 95 % intervals (a run the rule never stopped counts
    as saving nothing, losing nothing); and the energy to each target of the full and the stopped runs. Pass full
    runs only (not runs a rule already stopped); a marginal rule needs their training energy (``StopRuleError``)."""
    rows, cut = [], []
    for run in runs_of(curves):
        s, reason = _stop_index(run, rule)
        delta = float(run.loss[s] - run.loss[-1])
        rows.append(
            {
                **run.key(),
                "stopped": reason is not None,
                "stop_point": int(run.point[s]),
                "stop_reason": reason,
                "stop_eval_whole_set": bool(run.final[s]),
                "full_energy_j": nullable(run.energy[-1]),
                "stop_energy_j": nullable(run.energy[s]),
                "energy_saved_pct": _saved(run.energy[-1], run.energy[s]),
                "full_train_s": nullable(run.seconds[-1]),
                "stop_train_s": nullable(run.seconds[s]),
                "time_saved_pct": _saved(run.seconds[-1], run.seconds[s]),
                "full_real_tokens": nullable(run.tokens[-1]),
                "stop_real_tokens": nullable(run.tokens[s]),
                "full_loss": nullable(run.loss[-1]),
                "stop_loss": nullable(run.loss[s]),
                "loss_increase": nullable(delta),
                "ppl_increase_pct": perplexity_change_pct(delta),
            }
        )
        cut.append(
            {"cell": run.cell, "trial": run.trial, "_stop": int(run.point[s]), "stopped_by_rule": reason is not None}
        )
    trials = rows_table(rows, STOP_TRIAL_SCHEMA)
    cells = rows_table([_stop_cell(b) for b in trials.partition_by("cell", maintain_order=True)], STOP_CELL_SCHEMA)
    stopped = (
        curves.join(
            pl.DataFrame(
                cut,
                schema={
                    "cell": pl.String,
                    "trial": curves.schema["trial"],
                    "_stop": pl.Int64,
                    "stopped_by_rule": pl.Boolean,
                },
            ),
            on=["cell", "trial"],
        )
        .filter(pl.col("point") <= pl.col("_stop"))
        .drop("_stop")
    )
    reach = [
        energy_to_target_summary(energy_to_target(c, targets)).select(pl.lit(name).alias("run"), pl.all())
        for name, c in (("full", curves), ("stopped", stopped))
    ]
    return StoppingOutcomes(rule, trials, cells, pl.concat(reach), STOP_NOTE)
