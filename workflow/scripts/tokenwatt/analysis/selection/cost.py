"""The selection stage's cost in the study's terms: each level's metered joules in full, beside the energy one run
needed to reach each target.

Making a level's data once costs its own steps (near_dup, filter, order) and the eval clearance every level needs;
both are stated in full, never divided over the level's trials: its budgets are alternatives and its trial ids
replicates, not uses that would share the data. A cost of None means a step ran without a meter (selection.meter
none): missing, never 0 J.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from ...plan.design import LEVEL_PREFIX
from ...plan.layout import SHARED
from ...selection.steps import EVAL_FILTER
from ..products import Result

COLUMN = LEVEL_PREFIX + "selection"


def _folder_level(path: str) -> str:
    folder = os.path.basename(os.path.dirname(path))
    return folder.removeprefix("sel=") if folder.startswith("sel=") else SHARED


def _joules(steps: Sequence[Mapping[str, Any]]) -> float | None:
    values = [s["energy"]["energy_j"] for s in steps]
    return None if any(v is None for v in values) else float(sum(values))


def level_costs(records: Mapping[str, Sequence[Mapping[str, Any]]], trials: pl.DataFrame) -> list[dict[str, Any]]:
    """Per level, in the trials' order: its steps' joules and seconds, the shared steps' joules, both in full, their
    sum (``selection_j``: what making the level's data once cost), the trials that trained on it, and the meters that
    measured the selection and the level's training."""
    # The eval set's own filter (selection.eval_filters) prepares what every level is scored on: not a selection of
    # training documents, so not part of any level's cost (the report shows its joules on its own row).
    shared = [s for s in records.get(SHARED, []) if s["step"] != EVAL_FILTER]
    shared_j = _joules(shared)
    rows = []
    if COLUMN not in trials.columns:  # no trial finished yet (an interim report): no trials to share the joules over
        return rows
    for level in trials[COLUMN].unique(maintain_order=True).to_list():
        steps = records.get(level, [])
        n = trials.filter(pl.col(COLUMN) == level).height
        own_j = _joules(steps)
        total = None if own_j is None or shared_j is None else own_j + shared_j
        rows.append(
            {
                "level": level,
                "steps": list(steps),
                "documents": steps[-1]["kept"] if steps else None,
                "joules": own_j,
                "seconds": sum(s["energy"]["duration_s"] for s in steps),
                "shared_joules": shared_j,
                "trials": n,
                "selection_j": total,
                "is_estimate": any(s["energy"]["meter_is_estimate"] for s in [*steps, *shared]),
                # what measured the selection's joules, beside what measured the training's: a CPU meter's joules added
                # to a GPU board's are a sum of two scopes, and the report says so
                "selection_meters": sorted({s["energy"]["meter"] for s in [*steps, *shared]}),
                "training_meters": trials.filter(pl.col(COLUMN) == level)["meter"]
                .drop_nulls()
                .unique()
                .sort()
                .to_list()
                if "meter" in trials.columns
                else [],
            }
        )
    return rows


def _level_in(series: str) -> str | None:
    levels = dict(part.split("=", 1) for part in series.split("/") if part)
    return levels.get("selection")


def energy_to_target_with_selection(
    energy_to_target: Sequence[Mapping[str, Any]], costs: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """The curves' energy to each target per cell (one run's: the Kaplan–Meier median over its trials, censored ones
    included), beside the level's whole selection cost, that cost as a % of the run's energy, and their sum (one run
    trained on data made once for it)."""
    total = {c["level"]: c["selection_j"] for c in costs}
    rows = []
    for r in energy_to_target:
        level = _level_in(r["series"])
        training = r["energy_median_j"]
        added = total.get(level)
        rows.append(
            {
                "target": r["target"],
                "series": r["series"],
                "budget": r["budget"],
                "level": level,
                "n_reached": r["n_reached"],
                "n": r["n"],
                # runs that reached the target at or before their first eval point: their energy is an upper bound
                "n_at_first_point": r.get("n_at_first_point") or 0,
                "training_j": training,
                "selection_j": added,
                "selection_pct_of_run": None if not training or added is None else 100.0 * added / training,
                "with_selection_j": None if training is None or added is None else training + added,
            }
        )
    return rows


def selection_product(
    trials: pl.DataFrame, curves: Mapping[str, Any], records: Mapping[str, Mapping[str, Any]], settings: Any
) -> Result:
    """The data selection product: each level's steps and their metered cost in full (``records``: each step's record
    by its path, each naming its level: none for the steps every level shares), and one run's energy to each target
    beside it. ``settings``
    (design.selection) is the levels' definition, already in each record."""
    by_level: dict[str, list[Mapping[str, Any]]] = {}
    for path, record in records.items():
        # a record written before records named their level: its folder names it (data/sel=<level>/)
        level = record["level"] if "level" in record else _folder_level(path)
        by_level.setdefault(level or SHARED, []).append(record)
    costs = level_costs(by_level, trials)
    data = {
        "shared": by_level.get(SHARED, []),
        "levels": costs,
        "energy_to_target": energy_to_target_with_selection(curves.get("energy_to_target") or [], costs),
    }
    return Result(data=data, summary=f"selection: {len(costs)} level(s) of {trials.height} trial(s)")
