"""A stable run's stretch record (train.schedule.branch_every): what the stable run spent up to one saved point, written
beside the point (``p<k>.json`` beside ``p<k>.pt``).

A branched trial's record holds its stable run up to its own point only, so a cooldown that never finished (failed,
or not yet run in an interim report) would take its stretches out of every total made from the trials. These small
records let the totals count each stretch once from the stable run's own jobs. Every figure is cumulative over the
stable run up to the point, as a branch from it inherits them: its training windows' energy and seconds, its jobs'
processes' seconds, its checkpoint windows, and the work lost to resumes. Standard library only: the analysis reads
the records without torch.
"""

from __future__ import annotations

from typing import Any

# What a stretch record holds (written by train_stable, read by the aggregate rule).
STRETCH_KEYS = (
    "series",
    "trial",
    "point",
    "real_tokens",
    "energy_j",
    "train_s",
    "run_s",
    "checkpoints",
    "checkpoint_energy_j",
    "checkpoint_s",
    "resumed",
    "lost_energy_j",
    "lost_train_s",
    "diverged",
)


def stretch_record(
    session: Any, *, series: str, trial: int, point: int, real_tokens: int, train_s: float, diverged: bool
) -> dict[str, Any]:
    """The stretch record of a saved point from its session (a ``checkpoint.SessionState``, not imported here: the
    analysis stage reads STRETCH_KEYS and installs no torch; ``run_stable``'s: the meter session's closed windows,
    each with its energy fixed, the checkpoints written and the resumes, the processes' seconds)."""
    windows, resumes = session.meter["windows"], session.resumes
    return {
        "series": series,
        "trial": trial,
        "point": point,
        "real_tokens": real_tokens,
        "energy_j": _windows(windows, "train", lambda w: w["counter_j"]),
        "train_s": train_s,
        "run_s": session.stable_run_s,
        "checkpoints": len(session.checkpoints),
        "checkpoint_energy_j": _windows(windows, "checkpoint_", lambda w: w["counter_j"]),
        "checkpoint_s": _windows(windows, "checkpoint_", lambda w: w["end_s"] - w["start_s"]),
        "resumed": len(resumes),
        # null where a resume could not tell (as a trial's record says it)
        "lost_energy_j": _resumes(resumes, "lost_energy_j"),
        "lost_train_s": _resumes(resumes, "lost_train_s"),
        "diverged": diverged,
    }


# A stable run on several devices: the figures its ranks' stretch records add up (energies) and the slowest rank's
# (seconds); the rest are the same on every rank.
SUMMED = ("energy_j", "checkpoint_energy_j", "lost_energy_j")
SLOWEST = ("train_s", "run_s", "checkpoint_s", "lost_train_s")


def combine_stretches(records: list[dict[str, Any]]) -> dict[str, Any]:
    """The stretch record of a stable run on several devices from its ranks' (``stretch_record`` each, rank order),
    as a trial's record combines its ranks' (``combine.py``): null where a rank's figure is."""
    if len(records) == 1:  # one device: its own, untouched
        return records[0]
    values = {key: [r[key] for r in records] for key in (*SUMMED, *SLOWEST)}
    known = {key: None if None in v else (sum(v) if key in SUMMED else max(v)) for key, v in values.items()}
    return {**records[0], **known}


def _windows(windows: list[dict[str, Any]], prefix: str, value: Any) -> float | None:
    """The windows named ``prefix…``'s total ``value``; 0 where there are none, None where one has no value."""
    values = [value(w) for w in windows if w["name"].startswith(prefix)]
    return None if None in values else float(sum(values))


def _resumes(resumes: tuple[dict[str, Any], ...], key: str) -> float | None:
    values = [r.get(key) for r in resumes]
    return None if None in values else float(sum(values))
