"""A trial's checkpoints within its meter session: when one is due, saving it in its own metered window, the heartbeat
that counts the work a kill loses, resuming, and what the trial's record says of all three.

A checkpoint is due every ``train.checkpoint_every`` real tokens, and at the next step after SIGTERM or SIGINT (a
scheduler's warning before the time limit, Ctrl-C): the state is saved and the job then stops, to be resumed by the
rerun. Saving pauses training, as an evaluation does, and is metered in its own window (``checkpoint_<n>``): its
cost is reported, never counted as training. A resumed trial's training energy is the sum of the training windows it
kept; the work done after the last checkpoint by the process that was killed is counted from its last heartbeat and
recorded apart (``lost_energy_j``, ``lost_train_s``, ``lost_steps``): spent, and done again.

On several devices every rank saves at the same step, into one file (``checkpoint.gather_ranks``), and keeps a
heartbeat of its own, so each rank's lost work and energy are its own. A signal reaches each rank at its own step, so
the ranks agree on stopping at every loss record (``agree_on_stop``) and save together at the step after it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..common.failures import JobStopped
from ..measurement.meter import Meter
from . import checkpoint as store
from .checkpoint import Checkpoint, SessionState, TrainState, for_rank, gather_ranks, heartbeat_name
from .ranks import ONE, Ranks


@dataclass(frozen=True)
class CheckpointPlace:
    """Where a trial keeps its checkpoint and the key it is valid under (the job's content key)."""

    folder: Path
    key: str


class Checkpoints:
    """One trial's checkpoints (``place`` None: none, as outside the workflow), and the stable run's saved point it
    branches from (``origin``, train.schedule.branch_every): what it continues when it has no checkpoint of its own.
    ``ranks``: this process's place among the trial's devices; each rank keeps its own part of both."""

    def __init__(
        self,
        place: CheckpointPlace | None,
        every_tokens: int,
        keep: bool,
        log: Callable[[str], None],
        origin: Path | None = None,
        ranks: Ranks = ONE,
    ):
        self.place, self.every, self.keep, self.log, self.origin = place, every_tokens, keep, log, origin
        self.ranks, self.heartbeat = ranks, heartbeat_name(ranks)
        self.stopping = False  # on several devices: the ranks' agreed stop (``agree_on_stop``)
        self.branched = False  # whether this process continues ``origin`` (not a checkpoint of its own)
        self.stop_requested = threading.Event()
        self.written: list[dict[str, Any]] = []  # number, step, real_tokens, bytes, save_s of each checkpoint
        self.resumes: list[dict[str, Any]] = []  # where each resume started and what the kill before it lost
        self.number = 0
        self.next_tokens = every_tokens
        self._beat: dict[str, Any] = {}
        # the checkpoint resumed from: its record and the window it was saved in (only its heartbeat holds them)
        self._carried_written: dict[str, Any] | None = None
        self._carried_window: dict[str, Any] | None = None

    # -- resuming
    def resume(self) -> Checkpoint | None:
        """The state to continue from: the trial's own checkpoint (``resume_own``), else the stable run's saved point
        it branches from; None where there is neither."""
        origin = for_rank(store.read(self.origin), self.ranks) if self.origin is not None else None
        own = self.resume_own(origin)
        if own is not None or origin is None:
            return own
        # the stable run's history is the trial's: its checkpoints, and its resumes (a kill of one of its jobs), with
        # a kill of this job's before its first checkpoint after them (``resume_own`` took them from its heartbeat)
        self.written = list(origin.session.checkpoints)
        self.resumes = self.resumes or list(origin.session.resumes)
        self.number, self.branched = origin.number, True
        tokens = origin.train.steps[-1]["tokens"] if origin.train.steps else 0
        self.next_tokens = self._after(tokens) if self.every > 0 else self.every
        self.log(f"BRANCHED from the stable run's point at step {origin.train.step} ({tokens:,} real tokens)")
        return origin

    def resume_own(self, origin: Checkpoint | None = None) -> Checkpoint | None:
        """The trial's own checkpoint, with the work the killed process did after it counted from its heartbeat;
        None where there is none (a stale one is removed, and said; an unreadable one too, and everything the trial's
        processes had done is recorded as lost). Without one, a killed process's work is counted from where it
        started: the first step, or the stable run's point ``origin`` it continued. On several devices every rank
        continues the same checkpoint or none (``_found``)."""
        if self.place is None:
            return None
        found = self._found()
        saved = for_rank(found.saved, self.ranks) if found.saved is not None else None
        beat = store.read_heartbeat(self.place.folder, self.heartbeat) or {}
        if found.unreadable:
            self._lost_with_unreadable(beat, origin, found.why)
            return None
        pending = beat.get("pending") or {}
        if saved is not None and pending.get("checkpoint") == saved.number:
            beat = {**beat, **pending}  # killed after the rename, before the heartbeat that follows it
        base = saved or origin
        number, step, train_s = (base.number, base.train.step, base.train.train_s) if base else (0, 0, 0.0)
        same = beat.get("key") == self.place.key and beat.get("checkpoint") == number
        # without a checkpoint, a rank whose heartbeat is there records a resume: every rank does (its own lost work
        # unknown where its heartbeat is not), or none does
        if saved is None and not self.ranks.any(same):
            if found.why != "no checkpoint":
                self.log(f"NOTE: {found.why}; the trial starts from its first step")
            return None
        lost = (
            {
                "lost_energy_j": _difference(beat.get("energy_j"), beat.get("after_checkpoint_j")),
                "lost_train_s": max(0.0, beat["train_s"] - train_s),
                "lost_steps": max(0, beat["step"] - step),
            }
            if same
            else {"lost_energy_j": None, "lost_train_s": None, "lost_steps": None}
        )
        self._carried_written = beat.get("written") if same else None
        self._carried_window = beat.get("window") if same else None
        # the checkpoint's own record: its heartbeat's (with its size and time), else what the file says of itself
        own = self._carried_written or (saved.session.this if saved else None)
        self.written = [*(saved.session.checkpoints if saved else ()), *([own] if own else [])]
        # the heartbeat's list where it has one: a process stopped after a resume and before its next checkpoint
        # recorded that resume only there
        before = beat["resumes"] if same and "resumes" in beat else (saved.session.resumes if saved else ())
        self.resumes = [*before, {"from_checkpoint": number, "from_step": step, **lost}]
        self._agree_resumes()
        self.number = number
        self.next_tokens = self._after(self.written[-1]["real_tokens"]) if self.written else self.every
        lost_said = (
            f"{lost['lost_steps']} steps, {lost['lost_train_s']:.1f} s of training"
            + (f" and {lost['lost_energy_j']:.4g} J" if lost["lost_energy_j"] is not None else "")
            + " done by the stopped process after it are lost and done again (recorded apart)"
            if same
            else "what the stopped process did after it is not known (no heartbeat of it): recorded as unknown"
        )
        where = (
            f"checkpoint {number} at step {step}"
            if saved
            else f"the stable run's point at step {step} (no checkpoint of its own had been saved)"
            if origin
            else "its first step (no checkpoint had been saved)"
        )
        self.log(f"RESUMED from {where} (resume {len(self.resumes)}); {lost_said}")
        return saved

    def _found(self) -> store.Found:
        """The trial's own checkpoint, the same on every rank: rank 0 reads it (and removes one that cannot be
        continued) and tells the others whether there is one before any of them reads it. Each rank reading and
        removing on its own, one could resume at a step while another, reading after the removal, started afresh. A
        file rank 0 read that another rank cannot is unreadable on every rank."""
        assert self.place is not None
        folder, key, ranks = self.place.folder, self.place.key, self.ranks
        if not ranks.many:
            return store.find(folder, key)
        first = store.find(folder, key) if ranks.rank == 0 else None
        present, why, unreadable = ranks.from_first(
            (first.saved is not None, first.why, first.unreadable) if first is not None else None
        )
        saved = first.saved if first is not None else None
        if present and ranks.rank > 0:
            with contextlib.suppress(Exception):  # what went wrong is said below, on every rank
                saved = store.read(folder / store.STATE)
        if present and ranks.any(saved is None):
            if ranks.rank == 0:
                (folder / store.STATE).unlink(missing_ok=True)
            ranks.barrier()  # removed before any rank writes its heartbeat again
            return store.Found(
                None, f"a rank could not read the checkpoint {folder / store.STATE}; it was removed", True
            )
        return store.Found(saved if present else None, why, unreadable)

    def _lost_with_unreadable(self, beat: dict[str, Any], origin: Checkpoint | None, why: str) -> None:
        """The checkpoint could not be read (``why``; removed, its heartbeats kept): the trial starts again from its
        first step, or a branch from the stable run's point ``origin``, and everything its stopped processes did after
        that is lost, as ``discard`` counts it, from this rank's heartbeat: each part null where it is not known (no
        heartbeat, or a meter without energy), never 0. A heartbeat of another key is another trial's work: no resume."""
        assert self.place is not None
        ours = beat.get("key") == self.place.key
        if not self.ranks.any(ours or not beat):  # every rank records the resume, or none does
            self.log(f"NOTE: {why}; the trial starts from its first step")
            return
        beat = beat if ours else {}
        number, step, train_s = (origin.number, origin.train.step, origin.train.train_s) if origin else (0, 0, 0.0)
        # the session's energy at its last heartbeat holds the stable run's windows a branch continued
        kept = [w["counter_j"] for w in origin.session.meter["windows"]] if origin and origin.session else []
        before_j = None if None in kept else float(sum(kept))
        lost = (
            {
                "lost_energy_j": _difference(beat.get("energy_j"), before_j),
                "lost_train_s": max(0.0, beat["train_s"] - train_s),
                "lost_steps": max(0, beat["step"] - step),
            }
            if beat
            else {"lost_energy_j": None, "lost_train_s": None, "lost_steps": None}
        )
        # the resumes before: the heartbeat's list, else (none of this trial's) the stable run's a branch inherits
        before = beat["resumes"] if "resumes" in beat else (origin.session.resumes if origin and origin.session else ())
        self.resumes = [*before, {"from_checkpoint": number, "from_step": step, **lost, "why": why}]
        self._agree_resumes()
        self.log(f"NOTE: {why}; the trial starts again, the work its stopped processes did recorded as lost: {lost}")
        # at once, not at training's start: a process stopped before that still leaves this history to the next
        self._beat = {"key": self.place.key, "checkpoint": number, "written": None, "window": None}
        self._beat |= {"after_checkpoint_j": None, "resumes": self.resumes}
        self.beat(step, train_s, None)

    def _agree_resumes(self) -> None:
        """On several devices every rank records the same resumes (``combine.py`` pairs them): rank 0's, where this
        rank's own heartbeat told another story (a rank stopped before it wrote its own), with what this rank lost
        unknown (null)."""
        if not self.ranks.many:
            return
        first = self.ranks.from_first(self.resumes)
        where = lambda resumes: [(r["from_checkpoint"], r["from_step"]) for r in resumes]  # noqa: E731
        if where(first) != where(self.resumes):
            self.resumes = [{**r, "lost_energy_j": None, "lost_train_s": None, "lost_steps": None} for r in first]

    def discard(self, saved: Checkpoint, why: str) -> None:
        """``saved`` cannot be continued here (``why``): removed, and the trial starts from its first step. Everything
        the stopped processes did is lost: their steps and training seconds, and their energy (the saved session's
        windows and the work after it), each null where a part of it is not known."""
        assert self.place is not None
        self.log(f"NOTE: {why}; the checkpoint was removed and the trial starts from its first step")
        if self.ranks.rank == 0:
            store.remove(self.place.folder)
        self.ranks.barrier()  # removed before any rank writes its heartbeat again
        last = self.resumes[-1]
        # the saved session's windows and the one it was saved in, which only its heartbeat holds
        windows = [*saved.session.meter["windows"], *([self._carried_window] if self._carried_window else [])]
        kept = [w["counter_j"] for w in windows]
        before_j = None if None in kept else float(sum(kept))
        lost = {
            "lost_energy_j": None if before_j is None else _sum(before_j, last["lost_energy_j"]),
            "lost_train_s": _sum(saved.train.train_s, last["lost_train_s"]),
            "lost_steps": _sum(saved.train.step, last["lost_steps"]),
        }
        self.resumes = [*self.resumes[:-1], {"from_checkpoint": 0, "from_step": 0, **lost, "why": why}]
        self.written, self.number, self.next_tokens = [], 0, self.every
        self._carried_written = self._carried_window = None
        # at once, not at training's start: a process stopped before that still leaves this history to the next
        self._beat = {"key": self.place.key, "checkpoint": 0, "written": None, "window": None}
        self._beat |= {"after_checkpoint_j": None, "resumes": self.resumes}
        self.beat(0, 0.0, None)

    def _after(self, real_tokens: int) -> int:
        """The next checkpoint's tokens after one at ``real_tokens``: the next multiple of the interval, as in a run
        never stopped (a signal's checkpoint falls between them)."""
        return self.every * (real_tokens // self.every + 1) if self.every > 0 else 0

    def carried(self, snapshot: dict[str, Any]) -> dict[str, Any]:
        """The meter session to continue: the checkpoint's, with the window the checkpoint was saved in (which closed
        after the file was written, so only the heartbeat holds it)."""
        window = self._carried_window
        if window is None:
            return snapshot
        return {**snapshot, "windows": [*snapshot["windows"], window], "end_s": max(snapshot["end_s"], window["end_s"])}

    # -- saving
    def start(self, step: int, train_s: float, meter: Meter) -> None:
        """Training (re)starts: the heartbeat from here counts what a kill before the next checkpoint loses."""
        if self.place is None:
            return
        now = meter.energy_now()
        self._beat = {
            "key": self.place.key,
            "checkpoint": self.number,
            "written": self._carried_written,
            "window": self._carried_window,
            "after_checkpoint_j": now,
            "resumes": self.resumes,
        }
        self.beat(step, train_s, now)

    def due(self, step: int, real_tokens: int) -> bool:
        """After a step: a signal asked the job to stop, or the tokens since the last checkpoint reached the interval."""
        if self.place is None:
            return False
        return self.stop_asked() or (self.every > 0 and real_tokens >= self.next_tokens)

    def stop_asked(self) -> bool:
        """Whether a signal asked the job to stop: on several devices, whether the ranks agreed it did."""
        return self.stopping if self.ranks.many else self.stop_requested.is_set()

    def agree_on_stop(self) -> None:
        """At a loss record (one collective there, none per step): a stop asked of any rank becomes every rank's, so
        that all of them save at the same step; nothing to agree on one device."""
        if self.place is not None and self.ranks.many:
            self.stopping = self.ranks.any(self.stop_requested.is_set())

    def save(
        self,
        state: TrainState,
        real_tokens: int,
        meter: Meter,
        session: Callable[[], SessionState],
        next_window: str,
    ) -> None:
        """Save ``state`` and ``session()`` (the measurement so far) in the window ``checkpoint_<n>``, then reopen
        training in ``next_window``; a stop asked by a signal ends the job here."""
        assert self.place is not None
        n = self.number + 1
        meter.switch(f"checkpoint_{n}")
        t = time.perf_counter()
        this = {"number": n, "step": state.step, "real_tokens": real_tokens, "bytes": None, "save_s": None}
        payload = replace(session(), checkpoints=tuple(self.written), this=this, resumes=tuple(self.resumes))
        # rank 0 stages every rank's state in one file; every rank learns its size
        together = gather_ranks(Checkpoint(key=self.place.key, number=n, train=state, session=payload), self.ranks)
        staged = store.stage(self.place.folder, together) if together is not None else None
        size = self.ranks.from_first(staged.stat().st_size if staged is not None else None)
        written = {"number": n, "step": state.step, "real_tokens": real_tokens, "bytes": size}
        written["save_s"] = time.perf_counter() - t
        # The checkpoint's window closes before the file becomes the checkpoint, and the heartbeat holds both as
        # pending first: a process killed between the rename and the next heartbeat leaves a heartbeat that names
        # the new checkpoint, with its window's energy (``resume`` takes the pending part when the file is this one).
        window = meter.with_energy(meter.switch(next_window))
        after = meter.energy_now()
        pending = {"checkpoint": n, "written": written, "window": window, "after_checkpoint_j": after}
        self.beat(state.step, state.train_s, after, pending=pending)
        self.ranks.barrier()  # every rank's heartbeat names the new checkpoint before it becomes the checkpoint
        if staged is not None:
            store.commit(self.place.folder, staged)
        self.written.append(written)
        self.number = n
        if real_tokens >= self.next_tokens:
            self.next_tokens = self._after(real_tokens)
        self._beat = {"key": self.place.key, **pending, "resumes": self.resumes}
        self.beat(state.step, state.train_s, after)
        if self.stop_asked():
            raise JobStopped(
                f"stopped by a signal at step {state.step}; its state was saved (checkpoint {n}, "
                f"{self.place.folder}): rerun the same command and it resumes there"
            )

    def beat(self, step: int, train_s: float, energy_j: float | None, pending: dict[str, Any] | None = None) -> None:
        """The heartbeat after a checkpoint: where training is now and the session's energy (with ``pending``: the
        checkpoint being made the last one, and its window)."""
        if self.place is not None and self._beat:
            beat = {**self._beat, "pid": os.getpid(), "step": step, "train_s": train_s, "energy_j": energy_j}
            store.write_heartbeat(self.place.folder, {**beat, "pending": pending} if pending else beat, self.heartbeat)

    @contextlib.contextmanager
    def signals_deferred(self) -> Iterator[None]:
        """While training: SIGTERM and SIGINT ask for a checkpoint at the next step instead of stopping at once (the
        handlers before are restored after)."""
        if self.place is None or threading.current_thread() is not threading.main_thread():
            yield
            return
        before = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}

        def defer(signum: int, frame: object) -> None:
            self.log(f"{signal.Signals(signum).name}: saving a checkpoint at the next step, then stopping")
            self.stop_requested.set()

        for sig in before:
            signal.signal(sig, defer)
        try:
            yield
        finally:
            for sig, handler in before.items():
                signal.signal(sig, handler)

    def record(self) -> dict[str, Any]:
        """What the trial's record says of its checkpoints and resumes (metrics.schema.yaml)."""
        lost = lambda k: (  # noqa: E731
            None if any(r[k] is None for r in self.resumes) else sum(r[k] for r in self.resumes)
        )
        return {
            "checkpoint_every": self.every,
            "checkpoints": len(self.written),
            "checkpoint_bytes": max((w["bytes"] for w in self.written), default=None),
            "resumed": len(self.resumes),
            "resumes": self.resumes,
            "lost_energy_j": lost("lost_energy_j"),
            "lost_train_s": lost("lost_train_s"),
            "lost_steps": lost("lost_steps"),
        }


def _difference(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else max(0.0, a - b)


def _sum(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a + b
