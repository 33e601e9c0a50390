"""A halving study's answer (the allocation product): the configuration it chose and its loss at the target energy
with an interval over trial ids, what it spent against its budget, every dropped candidate with its round and
evidence, and where the same ladder was trained in full (allocation.full_grid), the full grid's choice at the same
energy and what that spent."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import polars as pl
from scipy import stats

from .halving import Cooled, loss_at, spent_of
from .products import Result

CONFIDENCE = 0.95


def allocation_product(
    settings: Mapping[str, Any],
    trials: pl.DataFrame,
    rounds: Sequence[Mapping[str, Any]],
    full_grid: pl.DataFrame | None,
) -> Result:
    if not rounds:
        return Result({"rounds": 0, "chosen": None}, {"halving_rounds": _rounds_table([])}, "no halving round yet")
    last = rounds[-1]
    # the last round that kept a candidate (a round whose every candidate diverged keeps none)
    answered = next((r for r in reversed(rounds) if r["kept"]), None)
    if answered is None:
        data = {"rounds": len(rounds), "chosen": None, "stopped_why": last["why"], "dropped": _dropped(rounds)}
        return Result(data, {"halving_rounds": _rounds_table(rounds)}, "halving kept no candidate")
    best = next(r for r in answered["candidates"] if r["verdict"] == "kept")
    target = answered["common_energy_j"]
    chosen = {
        "candidate": best["candidate"],
        "round": answered["round"],
        "budget": answered["budget"],
        **_interval(best),
    }
    limit, unit = last["limit"], last["unit"]
    data = {
        "rounds": len(rounds),
        "finished": last["next"] == "final",
        "stopped_why": last["why"],
        "target_energy_j": target,
        "chosen": chosen,
        "tied_with": [r["candidate"] for r in answered["candidates"] if r["verdict"] == "kept" and r is not best],
        "spent": last["spent"],
        "limit": limit,
        "unit": unit,
        "within_budget": last["spent"] is not None and last["spent"] <= limit,
        "dropped": _dropped(rounds),
        "full_grid": _full_grid(settings, full_grid, target, [r["candidate"] for r in rounds[0]["candidates"]]),
        "confidence": CONFIDENCE,
        "drop_confidence": last["confidence"],
    }
    summary = (
        f"halving chose {chosen['candidate'] or 'the one candidate'} after {len(rounds)} round(s); "
        f"spent {last['spent']} of {limit} {unit}"
    )
    return Result(data, {"halving_rounds": _rounds_table(rounds)}, summary)


def _interval(row: Mapping[str, Any]) -> dict[str, Any]:
    """A candidate's mean loss at the common energy and its t interval over trial ids (the trial id is the unit)."""
    values = np.array([v for v in row["losses"].values() if v is not None], dtype=float)
    n = len(values)
    mean = float(values.mean())
    if n < 2:
        return {"loss": mean, "low": None, "high": None, "trial_ids": n}
    half = float(stats.t.ppf(0.5 + CONFIDENCE / 2, n - 1)) * float(values.std(ddof=1)) / math.sqrt(n)
    return {"loss": mean, "low": mean - half, "high": mean + half, "trial_ids": n}


def _dropped(rounds: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every dropped candidate: its round, the round's common energy, its loss there and the evidence."""
    found = []
    for record in rounds:
        for row in record["candidates"]:
            if row["verdict"] == "dropped":
                found.append(
                    {
                        "candidate": row["candidate"],
                        "round": record["round"],
                        "budget": record["budget"],
                        "common_energy_j": record["common_energy_j"],
                        "loss": row["mean_loss"],
                        "evidence": row["evidence"],
                    }
                )
    return found


def _rounds_table(rounds: Sequence[Mapping[str, Any]]) -> pl.DataFrame:
    rows = [
        {
            "round": record["round"],
            "budget": record["budget"],
            "candidate": row["candidate"],
            "rank": row["rank"],
            "loss_at_common_energy": row["mean_loss"],
            "common_energy_j": record["common_energy_j"],
            "energy_j": row["energy_j"],
            "verdict": row["verdict"],
            "difference_to_last_kept": row["evidence"].get("difference") if isinstance(row["evidence"], dict) else None,
            "lower_bound": row["evidence"].get("lower_bound") if isinstance(row["evidence"], dict) else None,
        }
        for record in rounds
        for row in record["candidates"]
    ]
    schema = {"round": pl.Int64, "budget": pl.Int64, "candidate": pl.String, "rank": pl.Int64}
    return pl.DataFrame(rows, infer_schema_length=None) if rows else pl.DataFrame(schema=schema)


def _full_grid(
    settings: Mapping[str, Any], grid: pl.DataFrame | None, target: float, candidates: list[str]
) -> dict[str, Any] | None:
    """The full grid's choice at the halving's target energy, by the same reading of each trial's cooled points,
    and what the full grid spent; None where no full grid is named; a reason where it is not the same ladder."""
    folder = settings.get("full_grid")
    if folder is None:
        return None
    if grid is None:
        return {
            "folder": folder,
            "why": f"no trials table at {folder}/analysis/trials.parquet (run the full grid first)",
        }
    missing = sorted(set(candidates) - set(grid["series"].to_list()))
    if missing:
        return {"folder": folder, "why": f"not the same ladder: it has no trials of {', '.join(missing)}"}
    budgets = sorted(set(grid["budget"].to_list()))
    points = [
        Cooled(r["series"], r["trial"], budgets.index(r["budget"]), r["energy_j"], r["eval_loss"])
        for r in grid.iter_rows(named=True)
        if r["series"] in candidates
    ]
    means = {}
    for c in candidates:
        runs = [[p for p in points if p.candidate == c and p.trial == t] for t in sorted({p.trial for p in points})]
        per_trial = [
            loss_at(run, target)[0] for run in runs if any(p.loss is not None and p.energy_j is not None for p in run)
        ]
        means[c] = float(np.mean(per_trial)) if per_trial else math.inf
    choice = min(means, key=means.get)
    money = spent_of(grid, [], "energy_j")
    return {"folder": folder, "chosen": choice, "loss": means[choice], "losses": means, "spent_j": money["spent"]}
