"""A trial's checkpoint: what a killed trial resumes from, bit for bit, with every joule it had measured.

One file per trial, ``state.pt`` in the trial's checkpoint folder (``Layout.checkpoint``: results/checkpoints/<cell>/t<trial>, outside
the job's outputs, so a failed job's cleanup never removes it): the training loop's state between two steps
(``TrainState``: model, optimizer, gradient scaler, the data order's generator and position, the loss records so far,
the RNG) and the trial's measurement so far (``SessionState``: what it measured before training, the meter session
with its closed windows and their energies, the evaluations, the checkpoints and resumes). It is written atomically (a temporary file renamed over the last), keyed by the job's content key (the result store's:
the trial's params, code and input files), so a changed setting, input or code never resumes from a stale one.

A trial on several devices saves every rank's state in that one file, written by rank 0 (``gather_ranks``); each
rank continues its own part of it (``for_rank``). Beside it, ``heartbeat.json`` (on several devices, one per rank:
``heartbeat_name``): rewritten at every loss record, the session's energy and position now. A process
killed between two checkpoints leaves its last heartbeat, and the work done after the checkpoint (lost, and done
again by the rerun) is counted from it: spent and recorded apart, never hidden and never counted as training.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, NamedTuple

import torch

from .ranks import ONE, Ranks

STATE = "state.pt"
HEARTBEAT = "heartbeat.json"


class CheckpointError(RuntimeError):
    """A saved state that this trial's processes cannot continue."""


@dataclass
class TrainState:
    """Where the training loop stands between two steps: everything the next step depends on. The loop changes it as
    it trains (its position and loss records) and fills in the rest when it saves it (``train.py``'s
    ``_Loop.capture``); a fresh one stands before the first step."""

    step: int = 0  # optimizer steps done
    epoch: int = 0  # the epoch the next step belongs to (0-based)
    start: int = 0  # the first index, in this epoch's order, of the next batch
    order_state: torch.Tensor | None = None  # the data order's generator before this epoch's permutation was drawn
    logged: int = 0  # steps whose losses are in ``steps``
    pending_losses: torch.Tensor = field(default_factory=lambda: torch.empty(0))  # steps logged+1..step's losses
    steps: list[dict[str, Any]] = field(default_factory=list)  # the loss records so far
    train_s: float = 0.0  # training seconds so far
    skips: float = 0.0  # optimizer steps a gradient scaler skipped so far
    model: dict[str, torch.Tensor] = field(default_factory=dict)
    optimizer: dict[str, Any] = field(default_factory=dict)
    scaler: dict[str, Any] = field(default_factory=dict)
    rng: torch.Tensor | None = None  # torch's global CPU generator


@dataclass(frozen=True)
class BeforeTraining:
    """What a trial measured before its training: kept through its checkpoints; a branched trial keeps its stable
    run's (``trial.py``'s ``begin``)."""

    device_name: str  # the device and the meter it was measured with: a resume elsewhere cannot continue it
    meter_kind: str
    cooled: dict[str, Any]  # the cooldown's seconds and end temperature
    idle: bool  # whether an idle baseline was measured
    idle_after_s: float  # seconds between the device's last work and the idle baseline
    check_before: list[float]  # the throughput check right before training, TFLOP/s per window


@dataclass(frozen=True)
class SessionState:
    """A trial's measurement between two steps, as ``TrainState`` is its training: what it measured before training,
    its meter session (``Meter.session_state``: the closed windows with their energies), its evaluation points and
    where train.stop ended training; the checkpoints it wrote and its resumes; in a branched study, the stable run's
    point it continued and, for a stable run's saved point, that point's number, seconds and divergence."""

    before: BeforeTraining
    meter: dict[str, Any] = field(default_factory=dict)
    points: tuple[dict[str, Any], ...] = ()
    stop: dict[str, Any] = field(default_factory=dict)
    checkpoints: tuple[dict[str, Any], ...] = ()  # the checkpoints written before this one (``Checkpoints.written``)
    this: dict[str, Any] | None = None  # this checkpoint's record, for a kill before the heartbeat that holds it
    resumes: tuple[dict[str, Any], ...] = ()
    branch: dict[str, Any] | None = None  # the stable run's point a branched trial continued (``branch_point``)
    stable_point: int = 0  # a stable run's saved point: its number
    stable_run_s: float = 0.0  # the stable run's processes' seconds up to its point: a branch's cost includes them
    diverged: dict[str, Any] | None = None  # where the stable run diverged before its point (step, epoch, loss)

    def to_dict(self) -> dict[str, Any]:
        """Plain values only, as a checkpoint's file holds them (``torch.load(weights_only=True)`` reads no class)."""
        return {**_fields(self), "before": _fields(self.before)}

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> SessionState:
        return cls(**{**raw, "before": BeforeTraining(**raw["before"])})


@dataclass
class Checkpoint:
    """A saved trial: its key, the loop's state, and the trial's measurement so far (None: the loop's alone, as a test
    or a benchmark saves it)."""

    key: str
    number: int  # checkpoints this trial has written, this one included
    train: TrainState
    session: SessionState | None = None
    # a trial on several devices: ranks 1…N-1's, saved with rank 0's (``gather_ranks``); their states hold no weights
    peers: tuple[Checkpoint, ...] = ()


def gather_ranks(mine: Checkpoint, ranks: Ranks = ONE) -> Checkpoint | None:
    """Every rank's ``mine`` as one checkpoint, on rank 0 (None on the others; ``mine`` itself on one device): the
    other ranks send their position, losses, RNG and meter session, not their weights, optimizer and scaler, which
    data-parallel training keeps identical on every rank (their gradients are all-reduced before each step)."""
    if not ranks.many:
        return mine
    own = dataclasses.replace(mine.train, model={}, optimizer={}, scaler={})
    parts = ranks.gather(None if ranks.rank == 0 else dataclasses.replace(mine, train=own))
    return dataclasses.replace(mine, peers=tuple(parts[1:])) if parts is not None else None


def for_rank(saved: Checkpoint, ranks: Ranks = ONE) -> Checkpoint:
    """This rank's part of ``saved`` (``gather_ranks``), with rank 0's weights, optimizer and scaler."""
    if len(saved.peers) + 1 != ranks.world:
        raise CheckpointError(
            f"a state saved by {len(saved.peers) + 1} ranks cannot be continued on {ranks.world}: train the trial (or "
            "its stable run) on the devices it was saved on, or remove that file to train it again"
        )
    if ranks.rank == 0:
        return dataclasses.replace(saved, peers=())
    peer = saved.peers[ranks.rank - 1]
    first = saved.train
    train = dataclasses.replace(peer.train, model=first.model, optimizer=first.optimizer, scaler=first.scaler)
    return dataclasses.replace(peer, train=train)


def heartbeat_name(ranks: Ranks = ONE) -> str:
    """The heartbeat's file of this rank: each rank's work and energy since the checkpoint are its own."""
    return HEARTBEAT if not ranks.many else f"heartbeat.rank{ranks.rank}.json"


def save(folder: Path, checkpoint: Checkpoint, name: str = STATE, ranks: Ranks = ONE) -> int:
    """Write ``checkpoint`` atomically over the last one (or as ``name``: a stable run's saved point, a file of the
    workflow's), on several devices every rank's in one file (``gather_ranks``); its size in bytes, on every rank."""
    together, size = gather_ranks(checkpoint, ranks), 0
    if together is not None:
        staged = stage(folder, together, name)
        size = staged.stat().st_size
        commit(folder, staged, name)
    return ranks.from_first(size)


def stage(folder: Path, checkpoint: Checkpoint, name: str = STATE) -> Path:
    """Write ``checkpoint`` to a temporary file beside the last one, on disk (``commit`` makes it the checkpoint)."""
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{name}.{os.getpid()}.tmp"
    torch.save(_payload(checkpoint), tmp)
    with open(tmp, "rb+") as f:  # on disk before the rename makes it the checkpoint
        os.fsync(f.fileno())
    return tmp


def commit(folder: Path, staged: Path, name: str = STATE) -> None:
    """The staged file becomes the checkpoint, atomically (a kill leaves either the last one or this one)."""
    os.replace(staged, folder / name)


class Found(NamedTuple):
    """What a trial's checkpoint folder holds to resume from (``find``)."""

    saved: Checkpoint | None
    why: str  # why there is none to resume from ("" where there is)
    unreadable: bool = False  # a file that could not be read: removed, the heartbeats beside it kept


def find(folder: Path, key: str) -> Found:
    """The checkpoint saved under ``key``, or None and why there is none to resume from. A stale one, written under
    another key, is removed with its folder: it can never be resumed, and its heartbeats count another trial's work.
    One that cannot be read is removed alone: its heartbeats are the only record of the work it held, which the trial
    records as lost (``resume.Checkpoints``)."""
    path = folder / STATE
    if not path.exists():
        return Found(None, "no checkpoint")
    try:
        saved = read(path)
    except Exception as err:  # a file cut short by a full disk or a crash mid-rename cannot be resumed from
        path.unlink(missing_ok=True)
        return Found(
            None, f"the checkpoint {path} could not be read ({type(err).__name__}: {err}); it was removed", True
        )
    if saved.key != key:
        remove(folder)
        return Found(None, f"the checkpoint {path} was written for other settings, inputs or code; it was removed")
    return Found(saved, "")


def load(folder: Path, key: str) -> tuple[Checkpoint | None, str]:
    """``find``'s checkpoint and why there is none."""
    found = find(folder, key)
    return found.saved, found.why


def read(path: Path) -> Checkpoint:
    """The checkpoint in ``path``, whatever its key (a stable run's saved point: the workflow keys it as a file)."""
    return _checkpoint(torch.load(path, map_location="cpu", weights_only=True))


def _payload(checkpoint: Checkpoint) -> dict[str, Any]:
    # shallow: dataclasses.asdict would copy every tensor (weights and moments) on the device before saving it
    session = checkpoint.session.to_dict() if checkpoint.session is not None else None
    peers = [_payload(peer) for peer in checkpoint.peers]
    return {**_fields(checkpoint), "train": _fields(checkpoint.train), "session": session, "peers": peers}


def _checkpoint(raw: dict[str, Any]) -> Checkpoint:
    session = SessionState.from_dict(raw["session"]) if raw["session"] is not None else None
    peers = tuple(_checkpoint(peer) for peer in raw.get("peers", ()))
    return Checkpoint(raw["key"], raw["number"], TrainState(**raw["train"]), session, peers)


def _fields(record: Any) -> dict[str, Any]:
    return {f.name: getattr(record, f.name) for f in fields(record)}


def write_heartbeat(folder: Path, beat: dict[str, Any], name: str = HEARTBEAT) -> None:
    """The session's position and energy now, atomically (a kill mid-write leaves the one before)."""
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{name}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(beat))
    os.replace(tmp, folder / name)


def read_heartbeat(folder: Path, name: str = HEARTBEAT) -> dict[str, Any] | None:
    try:
        return json.loads((folder / name).read_text())
    except (OSError, ValueError):
        return None


def remove(folder: Path) -> None:
    """The trial's checkpoint folder, gone (a finished trial's, unless kept on purpose)."""
    shutil.rmtree(folder, ignore_errors=True)
