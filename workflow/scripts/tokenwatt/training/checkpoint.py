"""A trial's checkpoint: what a killed trial resumes from, bit for bit, with every joule it had measured.

One file per trial, ``state.pt`` in the trial's checkpoint folder (``Layout.checkpoint``: results/checkpoints/<cell>/t<trial>, outside
the job's outputs, so a failed job's cleanup never removes it): the training loop's state between two steps
(``TrainState``: model, optimizer, gradient scaler, the data order's generator and position, the loss records so far,
the RNG) and the meter session so far (its closed windows with their energies, its samples, the evaluations). It is
written atomically (a temporary file renamed over the last), keyed by the job's content key (the result store's:
the trial's params, code and input files), so a changed setting, input or code never resumes from a stale one.

Beside it, ``heartbeat.json``: rewritten at every loss record, the session's energy and position now. A process
killed between two checkpoints leaves its last heartbeat, and the work done after the checkpoint (lost, and done
again by the rerun) is counted from it: spent and recorded apart, never hidden and never counted as training.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import torch

STATE = "state.pt"
HEARTBEAT = "heartbeat.json"


@dataclass
class TrainState:
    """Where the training loop stands between two steps: everything the next step depends on."""

    step: int  # optimizer steps done
    epoch: int  # the epoch the next step belongs to (0-based)
    start: int  # the first index, in this epoch's order, of the next batch
    order_state: torch.Tensor  # the data order's generator before this epoch's permutation was drawn
    logged: int  # steps whose losses are in ``steps``
    pending_losses: torch.Tensor  # the losses of steps logged+1..step, not yet in a record
    steps: list[dict[str, Any]]  # the loss records so far
    train_s: float  # training seconds so far
    skips: float  # optimizer steps a gradient scaler skipped so far
    model: dict[str, torch.Tensor]
    optimizer: dict[str, Any]
    scaler: dict[str, Any]
    rng: torch.Tensor  # torch's global CPU generator


@dataclass
class Checkpoint:
    """A saved trial: its key, the loop's state, and the trial's measurement so far (``trial.py``'s session)."""

    key: str
    number: int  # checkpoints this trial has written, this one included
    train: TrainState
    session: dict[str, Any] = field(default_factory=dict)


def save(folder: Path, checkpoint: Checkpoint, name: str = STATE) -> int:
    """Write ``checkpoint`` atomically over the last one (or as ``name``: a stable run's saved point, a file of the
    workflow's); its size in bytes."""
    staged = stage(folder, checkpoint, name)
    size = staged.stat().st_size
    commit(folder, staged, name)
    return size


def stage(folder: Path, checkpoint: Checkpoint, name: str = STATE) -> Path:
    """Write ``checkpoint`` to a temporary file beside the last one, on disk (``commit`` makes it the checkpoint)."""
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{name}.{os.getpid()}.tmp"
    # shallow: dataclasses.asdict would copy every tensor (weights and moments) on the device before saving it
    payload = {**_fields(checkpoint), "train": _fields(checkpoint.train)}
    torch.save(payload, tmp)
    with open(tmp, "rb+") as f:  # on disk before the rename makes it the checkpoint
        os.fsync(f.fileno())
    return tmp


def commit(folder: Path, staged: Path, name: str = STATE) -> None:
    """The staged file becomes the checkpoint, atomically (a kill leaves either the last one or this one)."""
    os.replace(staged, folder / name)


def load(folder: Path, key: str) -> tuple[Checkpoint | None, str]:
    """The checkpoint saved under ``key``, or None and why there is none to resume from (a stale one, written under
    another key, is removed: it can never be resumed)."""
    path = folder / STATE
    if not path.exists():
        return None, "no checkpoint"
    try:
        saved = read(path)
    except Exception as err:  # a file cut short by a full disk or a crash mid-rename cannot be resumed from
        remove(folder)
        return None, f"the checkpoint {path} could not be read ({type(err).__name__}: {err}); it was removed"
    if saved.key != key:
        remove(folder)
        return None, f"the checkpoint {path} was written for other settings, inputs or code; it was removed"
    return saved, ""


def read(path: Path) -> Checkpoint:
    """The checkpoint in ``path``, whatever its key (a stable run's saved point: the workflow keys it as a file)."""
    raw = torch.load(path, map_location="cpu", weights_only=True)
    return Checkpoint(key=raw["key"], number=raw["number"], train=TrainState(**raw["train"]), session=raw["session"])


def _fields(record: Any) -> dict[str, Any]:
    return {f.name: getattr(record, f.name) for f in fields(record)}


def write_heartbeat(folder: Path, beat: dict[str, Any]) -> None:
    """The session's position and energy now, atomically (a kill mid-write leaves the one before)."""
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{HEARTBEAT}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(beat))
    os.replace(tmp, folder / HEARTBEAT)


def read_heartbeat(folder: Path) -> dict[str, Any] | None:
    try:
        return json.loads((folder / HEARTBEAT).read_text())
    except (OSError, ValueError):
        return None


def remove(folder: Path) -> None:
    """The trial's checkpoint folder, gone (a finished trial's, unless kept on purpose)."""
    shutil.rmtree(folder, ignore_errors=True)
