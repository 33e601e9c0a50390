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

from .halving import Cooled, loss_at, spent
from .products import Result

CONFIDENCE = 0.95


def allocation_product(
    settings: Mapping[str, Any],
    rounds: Sequence[Mapping[str, Any]],
    on_disk: Mapping[str, list[dict[str, Any]]],
    full_grid: Mapping[str, Any] | None,
) -> Result:
    """The answer from the round records (in round order), every trial record and stretch record of the study on
    disk (``on_disk``: ``records``, ``stretches``; what the study spent, rounds that a later change of settings no
    longer asks for included) and the full grid's trials table and cost (``full_grid``: ``trials``, ``cost``, where
    allocation.full_grid names a folder that has them)."""
    # every key the section reads, whatever the outcome
    base = {
        "rounds": len(rounds),
        "chosen": None,
        "tied_with": [],
        "target_energy_j": None,
        "full_grid": None,
        "dropped": _dropped(rounds),
        "confidence": CONFIDENCE,
        "drop_confidence": settings["confidence"],
    }
    if not rounds:
        data = {**base, "finished": False, "stopped_why": "no round has been ranked yet", "spent": None}
        return Result(data, {"halving_rounds": _rounds_table([])}, "no halving round yet")
    last = rounds[-1]
    base.update(finished=last["next"] == "final", stopped_why=last["why"], **_spent(last, on_disk))
    if not last["kept"]:  # every survivor of the last round diverged or went unmeasured: no answer, said so
        return Result(base, {"halving_rounds": _rounds_table(rounds)}, "halving kept no candidate")
    best = next(r for r in last["candidates"] if r["verdict"] == "kept")
    target = last["common_energy_j"]
    data = {
        **base,
        "target_energy_j": target,
        "chosen": {"candidate": best["candidate"], "round": last["round"], "budget": last["budget"], **_interval(best)},
        "tied_with": [r["candidate"] for r in last["candidates"] if r["verdict"] == "kept" and r is not best],
        "full_grid": _full_grid(settings, full_grid, target, rounds),
    }
    summary = (
        f"halving chose {best['candidate'] or 'the one candidate'} after {len(rounds)} round(s); "
        f"spent {data['spent']} of {data['limit']} {data['unit']}"
    )
    return Result(data, {"halving_rounds": _rounds_table(rounds)}, summary)


def _spent(last: Mapping[str, Any], on_disk: Mapping[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """What the study spent against its budget: the last round's count, and every trial on disk where that is more (a
    round trained under a larger budget, or other settings, that the rounds no longer ask for: spent all the same)."""
    rounds_spent, measure = last["spent"], last["measure"]
    everything = spent(on_disk["records"], on_disk["stretches"], measure)["spent"] if on_disk["records"] else None
    beyond = everything is not None and rounds_spent is not None and everything > rounds_spent * (1 + 1e-9)
    total = everything if beyond else rounds_spent
    return {
        "spent": total,
        "spent_by_rounds": rounds_spent,
        "spent_beyond_rounds": (everything - rounds_spent) if beyond else 0.0,
        "limit": last["limit"],
        "unit": last["unit"],
        "within_budget": total is not None and total <= last["limit"],
    }


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


def _tested(evidence: Any) -> dict[str, Any]:
    """A verdict's test, for the rounds table: the candidate it was compared with, the loss difference and its bound
    (none for a candidate in the kept share, one not comparable at equal energy, or one that diverged)."""
    tested = isinstance(evidence, dict)
    return {
        "compared_with": evidence["against"] if tested else None,
        "difference": evidence["difference"] if tested else None,
        "lower_bound": evidence["lower_bound"] if tested else None,
        # a candidate whose test showed a difference, kept because one ranked below it was kept within the noise
        "kept_above": evidence.get("kept_above") if tested else None,
        "why": None if tested else str(evidence),
    }


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
            "read_at_ratio": row["read_at_ratio"],
            "verdict": row["verdict"],
            **_tested(row["evidence"]),
        }
        for record in rounds
        for row in record["candidates"]
    ]
    schema = {"round": pl.Int64, "budget": pl.Int64, "candidate": pl.String, "rank": pl.Int64}
    return pl.DataFrame(rows, infer_schema_length=None) if rows else pl.DataFrame(schema=schema)


def _full_grid(
    settings: Mapping[str, Any], grid: Mapping[str, Any] | None, target: float, rounds: Sequence[Mapping[str, Any]]
) -> dict[str, Any] | None:
    """The full grid's choice at the halving's target energy, by the same reading of each trial's cooled points (a
    candidate with a diverged or unmeasured trial disqualified, as a round drops it), and what the full grid spent
    (its cost.json: training, evaluations, checkpoint saves and lost work, each stable run once); None where no full
    grid is named; a reason where it has not run or is not the same ladder (candidates, budgets and trial ids)."""
    folder = settings.get("full_grid")
    if folder is None:
        return None
    if grid is None:
        return {"folder": folder, "why": f"no trials table and cost at {folder}/analysis/ (run the full grid first)"}
    table, candidates = grid["trials"], [r["candidate"] for r in rounds[0]["candidates"]]
    budgets = sorted(set(table["budget"].to_list()))
    missing = sorted(set(candidates) - set(table["series"].to_list()))
    ran = [r["budget"] for r in rounds]
    if missing or not set(ran) <= set(budgets) or sorted(set(table["trial"].to_list())) != list(rounds[0]["trials"]):
        return {
            "folder": folder,
            "why": "not the same ladder (its candidates, budgets or trial ids differ from this study's)",
        }
    last = budgets.index(ran[-1])
    points = [
        Cooled(r["series"], r["trial"], budgets.index(r["budget"]), r["energy_j"], r["eval_loss"])
        for r in table.iter_rows(named=True)
        if r["series"] in candidates and r["budget"] <= ran[-1]
    ]
    trial_ids = list(rounds[0]["trials"])
    means = {c: _grid_mean([p for p in points if p.candidate == c], target, trial_ids, last) for c in candidates}
    choice = min(means, key=lambda c: means[c])
    cost = grid["cost"]
    spent_j = None
    if cost.get("total_energy_j") is not None:
        parts = [cost.get(k) for k in ("total_energy_j", "eval_energy_j", "checkpoint_energy_j", "lost_energy_j")]
        spent_j = None if None in parts else float(sum(parts))
    return {"folder": folder, "chosen": choice, "loss": means[choice], "losses": means, "spent_j": spent_j}


def _grid_mean(points: Sequence[Cooled], target: float, trial_ids: Sequence[int], last: int) -> float:
    """A full-grid candidate's mean loss at ``target`` over its trial ids; infinite where any trial id lacks a cooled
    point at a budget up to the last round's (the full grid's table leaves a diverged or failed trial out) or has no
    loss there: disqualified, as a round drops a candidate with a diverged trial."""
    for t in trial_ids:
        mine = [p for p in points if p.trial == t and p.loss is not None and p.energy_j is not None]
        if sorted(p.round for p in mine) != list(range(last + 1)):
            return math.inf
    return float(np.mean([loss_at([p for p in points if p.trial == t], target)[0] for t in trial_ids]))
