"""One trial, end to end: model, idle baseline, metered training, evaluations, throughput checks; and one stretch of a
stable run, which a branched study's trials continue.

``run_trial`` takes the trial's spec and data (``spec.py``) and returns (metrics, power trace, loss curve, eval curve):
raw measurements only, in three steps: ``set_up`` (device, chunks, model), ``measure`` (the meter session,
``session.py``) and ``trial_record`` (metrics.json, ``record.py``). One meter session covers the trial, in named
windows (idle, check_before, train_1, eval_1, train_2, …, check_after, eval_final): training energy and time are the
sum of the training segments, each evaluation is metered in its own window beside them. ``run_stable`` takes the same
parameters and saves where its training ended, with its whole session, for the stretches and branches after it.
The Snakemake scripts around them only read and write files.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import polars as pl

from . import checkpoint as store
from .checkpoint import Checkpoint, TrainState
from .ranks import ONE, Ranks
from .record import STEPS_SCHEMA, trial_curve, trial_record
from .resume import CheckpointPlace
from .session import Session, TrialContext, TrialMeasurement
from .setup import set_up
from .spec import TrialData, TrialSpec
from .train import TrainingError


def measure(ctx: TrialContext) -> TrialMeasurement:
    """The trial's one meter session, window by window: cooldown, idle baseline, throughput check, training segments
    and the evaluations between them, check again, the final evaluation. Its order is the measurement protocol, read
    top to bottom here; what happens inside a window is ``Session``'s. With a checkpoint to resume from (in
    ``ctx.place``), or a stable run's point to branch from (``ctx.origin``), the session continues the saved one: what
    it measured before training is kept, and training goes on from the saved state."""
    session = Session(ctx)
    result, diverged = session.train(session.begin())  # no reference to the saved state kept here (its weights)
    check_after = session.check("after")
    eval_loss, eval_s = (None, 0.0) if diverged else session.final_evaluation(result)
    energy = session.close()
    return TrialMeasurement(
        result=result,
        diverged=diverged,
        eval_loss=eval_loss,
        eval_s=eval_s,
        energy=energy,
        windows={w.name: w for w in energy.windows},
        session=session.state,
        check_after=check_after,
        meter=session.meter,
        why=session.why,
        checkpoints=session.checkpoints.record(),
        memory=session.memory,
    )


def run_trial(
    spec: TrialSpec,
    data: TrialData,
    log: Callable[[str], None] = print,
    nvml: Any = None,
    place: CheckpointPlace | None = None,
    origin: Path | None = None,
    ranks: Ranks = ONE,
) -> tuple[dict[str, Any], pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """Train the trial ``spec`` on ``data``, in three steps: set up (``set_up``), measure (``measure``), record
    (``trial_record``). The throughput checks (``spec.check``) taken right before and right after training are
    diagnostics of drift against the device profile; ``spec.evaluation`` schedules the evaluations (none: the final
    one only). ``nvml``: the NVML module the meter reads (a test's fake), pynvml when None. ``place``: where the
    trial keeps its checkpoint (``resume.py``), and resumes from one found there; None: no checkpoints. ``origin``:
    the stable run's saved point a branched trial continues. ``ranks``: this process's place among a trial's devices
    (``launch.py`` starts one process per device; each returns its own record, which ``combine.py`` makes the
    trial's)."""
    t_start, started_at = time.perf_counter(), time.time()
    ctx = TrialContext(spec, set_up(spec, data, log, ranks), log, nvml, place, origin)
    measured = measure(ctx)
    curve = trial_curve(list(measured.session.points), measured.windows, data.subset["real_tokens"])
    metrics = trial_record(ctx, data, measured, started_at)
    metrics["run_s"] = time.perf_counter() - t_start
    steps = pl.DataFrame(measured.result.steps, schema=STEPS_SCHEMA, orient="row")
    return metrics, measured.energy.trace, steps, curve


def run_stable(
    spec: TrialSpec,
    data: TrialData,
    out: Path,
    point: int,
    log: Callable[[str], None] = print,
    nvml: Any = None,
    place: CheckpointPlace | None = None,
    origin: Path | None = None,
    ranks: Ranks = ONE,
) -> dict[str, Any]:
    """One stretch of a stable run (train.schedule.branch_every), with ``run_trial``'s parameters and context: ``data``
    is the head of the trial's drawn order up to saved point ``point`` (``stream_head``), trained from the point before
    (``origin``; None: from the first step, with the cooldown, idle baseline and check a trial begins with) at the peak
    rate, and saved to ``out`` with its whole session, which the next stretch and every budget's branch continue. A
    stable run that diverged saves where, and the trials after it are its divergence, recorded or failed as
    train.on_divergence says. Returns what the stretch trained, for its log, and the saved session (``session``: its
    stretch record's source, stretch.py). On several devices (``ranks``) every rank's state is saved in the one file,
    and each rank returns its own session."""
    t_start = time.perf_counter()
    ctx = TrialContext(spec, set_up(spec, data, log, ranks), log, nvml, place, origin)
    parameters = sum(p.numel() for p in ctx.setup.model.parameters())
    per_step = spec.train.batch_size * ctx.setup.ids.shape[1]
    if why := spec.train.schedule.room_after_warmup(ctx.setup.steps_planned, parameters, per_step):
        raise TrainingError(
            f"the stable run's stretch to {spec.budget:,} real tokens: {why}; every stretch must reach the peak rate, "
            "so raise train.schedule.branch_every above the warmup (or lower train.schedule.warmup_tokens_per_parameter)"
        )
    session = Session(ctx)
    result, diverged = session.train(session.begin())  # no reference to the saved state kept here (its weights)
    kept = session.checkpoints
    written = replace(
        session.snapshot(),
        checkpoints=tuple(kept.written),
        this=None,
        resumes=tuple(kept.resumes),
        stable_point=point,
        # the stable run's processes' seconds so far: a branch's time on the device includes them (its cost)
        stable_run_s=session.state.stable_run_s + time.perf_counter() - t_start,
        diverged=diverged.where() if diverged else None,
    )
    # a diverged stable run's point: its loss records and time, no weights (no branch trains from it)
    state = result.state or TrainState(step=result.n_steps, steps=result.steps, train_s=result.train_s)
    store.save(out.parent, Checkpoint(key=out.name, number=kept.number, train=state, session=written), out.name, ranks)
    session.close()
    return {
        "step": result.n_steps,
        "real_tokens": result.real_tokens,
        "train_s": state.train_s,  # the saved point's, which its branches inherit
        "diverged": diverged is not None,
        "session": written,
    }
