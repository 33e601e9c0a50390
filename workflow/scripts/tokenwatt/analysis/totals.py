"""The study's totals: what its training used, and what it spent (training, work lost to resumes, checkpoint saves).

A branched trial's record (train.schedule.branch_every) holds its stable run up to its own point: its training
energy and seconds, and the checkpoints and resumes it inherited. A sum over trials would count each stable run once
per budget, and a run's stretch past its last finished cooldown not at all. So every figure here is each trial's own
part (its record less its stable run's share at its point) plus each stable run once, to its last saved point, from
the run's stretch records (training/stretch.py); where a run has none (results written before them), from its
trials' branch records, which reach only as far as the longest branch that finished.

A total is a sum over every trial or None with its reason (``missing``): a sum that silently skipped a trial, or a
stable run it could not split, would be too low.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import polars as pl

# Each total: the trial's column (its figure, whole), the stretch record's key, the branch record's column for the
# stable run's share (None: the branch record holds none), and whether the trial's figure includes that share.
FIGURES = {
    "energy_j": ("energy_j", "energy_j", "branch_stable_energy_j", True),
    "train_s": ("train_s", "train_s", "branch_stable_train_s", True),
    # a trial's run_s is its own process's; the device cost adds its stable run's (plan/cost.py)
    "device_s": ("device_s", "run_s", "branch_stable_run_s", False),
    "checkpoint_energy_j": ("checkpoint_energy_j", "checkpoint_energy_j", None, True),
    "lost_energy_j": ("lost_energy_j", "lost_energy_j", None, True),
}


@dataclass
class Totals:
    """Each figure's study total (None where one part is unknown) and why a total is missing."""

    values: dict[str, float | None]
    missing: dict[str, str] = field(default_factory=dict)
    stable_runs: int = 0
    stable_from: str | None = None  # where the stable runs' figures came from
    stable: dict[str, float | None] = field(default_factory=dict)  # the stable runs' part, each once


def study_totals(trials: pl.DataFrame, stretches: Iterable[dict[str, Any]] = ()) -> Totals:
    """Every figure of ``FIGURES`` over the study: each trial's own part plus each stable run once."""
    rows = [{**r, "device_s": _device_s(r)} for r in trials.iter_rows(named=True)]
    runs = _stable_runs(rows, list(stretches))
    values, missing, stable = {}, {}, {}
    for name, (column, key, branch, included) in FIGURES.items():
        own, why = _own(rows, runs, column, key, branch, included)
        once, why_stable = _once(runs, column, key, branch)
        values[name] = None if own is None or once is None else own + once
        stable[name] = once
        if values[name] is None:
            missing[name] = why or why_stable or "not known"
    from_records = sum(1 for run in runs.values() if run.records)
    stable_from = None
    if runs:
        stable_from = (
            "stretch records"
            if from_records == len(runs)
            else f"stretch records for {from_records} of {len(runs)} stable runs, the trials' branch records for the "
            "rest (a stretch past a run's longest finished branch is not in them)"
        )
    return Totals(values, missing, len(runs), stable_from, stable)


@dataclass
class _Run:
    """One stable run (a trial id and its levels but the budget): its stretch records and its branches, by point."""

    records: dict[int, dict[str, Any]] = field(default_factory=dict)
    branches: dict[int, dict[str, Any]] = field(default_factory=dict)

    @property
    def last(self) -> int:
        return max([*self.records, *self.branches])


def _stable_runs(rows: list[dict[str, Any]], stretches: list[dict[str, Any]]) -> dict[tuple[str, int], _Run]:
    runs: dict[tuple[str, int], _Run] = {}
    for rec in stretches:
        runs.setdefault((rec["series"], rec["trial"]), _Run()).records[rec["point"]] = rec
    for row in rows:
        if _point(row):
            runs.setdefault(_run_of(row), _Run()).branches.setdefault(_point(row), row)
    return runs


def _own(
    rows: list[dict[str, Any]],
    runs: dict[tuple[str, int], _Run],
    column: str,
    key: str,
    branch: str | None,
    included: bool,
) -> tuple[float | None, str | None]:
    """The trials' own parts of a figure: each trial's, less its stable run's share where it includes it."""
    unknown = [r for r in rows if r.get(column) is None]
    if unknown:
        return None, f"{column} not recorded for {len(unknown)} of {len(rows)} trials"
    total = 0.0
    for row in rows:
        share = _inherited(row, runs[_run_of(row)], column, key, branch) if included and _point(row) else 0.0
        if share is None:
            return None, (
                f"{column} of trial {row['trial']} ({row['cell']}) includes its stable run's, which no stretch record "
                "tells apart"
            )
        total += row[column] - share
    return total, None


def _once(
    runs: dict[tuple[str, int], _Run], column: str, key: str, branch: str | None
) -> tuple[float | None, str | None]:
    """The stable runs' part of a figure, each run once, to its last saved point: its stretch record's, else the
    branch record of its trial that branched from that point."""
    total = 0.0
    for (series, trial), run in runs.items():
        last = run.last
        share = (
            run.records[last].get(key)
            if last in run.records
            else _inherited(run.branches[last], run, column, key, branch)
        )
        if share is None:
            where = f"trial {trial}" + (f", {series}" if series else "")
            return None, f"the stable run of {where}: its {key} to point {last} is not known"
        total += share
    return total, None


def _inherited(row: dict[str, Any], run: _Run, column: str, key: str, branch: str | None) -> float | None:
    """The stable run's share of a branched trial's ``column``: its branch record's, else the stretch record's at its
    point; a share no record holds (checkpoints, lost work before the stretch records) is known only where the
    trial's whole figure is 0."""
    if branch is not None and row.get(branch) is not None:
        return row[branch]
    if _point(row) in run.records:
        return run.records[_point(row)].get(key)
    return 0.0 if row.get(column) == 0 else None


def _point(row: dict[str, Any]) -> int:
    """The stable run's saved point a trial branched from (0: none, it trained alone or from its first step)."""
    return int(row.get("branch_from_point") or 0)


def _run_of(row: dict[str, Any]) -> tuple[str, int]:
    return row["series"], row["trial"]


def _device_s(row: dict[str, Any]) -> float | None:
    """A trial's own process's device-seconds: its run_s on each of its devices."""
    return None if row.get("run_s") is None else row["run_s"] * (row.get("devices") or 1)
