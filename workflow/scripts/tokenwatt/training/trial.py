"""One trial, end to end: model, idle baseline, metered training, evaluations, throughput checks.

``run_trial`` takes the trial's spec and data (``spec.py``) and returns (metrics, power trace, loss curve, eval curve):
raw measurements only, in three steps: ``set_up`` (device, chunks, model), ``measure`` (the meter session) and
``trial_record`` (metrics.json). One meter session covers the trial, in named windows (idle, check_before,
train_1, eval_1, train_2, …, check_after, eval_final): training energy and time are the sum of the
training segments, each evaluation is metered in its own window beside them. Everything derived from a formula or a constant (PE, its layers, FLOPs,
J/token, MFU, quality verdicts) is computed in the analysis, so changing it never retrains.
The Snakemake script around it only reads and writes files.
"""

from __future__ import annotations

import math
import os
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, NoReturn

import polars as pl
import torch

from .. import __version__
from ..measurement.devices import compute_dtype, device_name, gpu_uuid
from ..measurement.energy import short_eval_window
from ..measurement.meter import Measurement, Meter, Pace, WindowMeasurement
from ..measurement.meters import make_meter
from ..measurement.throughput import measure_throughput
from ..plan.stopping import should_stop
from . import checkpoint as store
from .checkpoint import Checkpoint, TrainState
from .ranks import ONE, Ranks
from .resume import CheckpointPlace, Checkpoints
from .setup import TrialSetup, set_up
from .spec import TrialData, TrialSpec
from .train import (
    Checkpointing,
    Diverged,
    TrainingError,
    TrainResult,
    TrainSettings,
    blowup_loss,
    evaluate,
    train,
)


def cooldown(
    meter: Meter, seconds: float, below_c: float | None, timeout_s: float, log: Callable[[str], None]
) -> dict[str, Any]:
    """Wait before the trial: a fixed pause, then (a meter that reads the device's temperature) until the device is
    cool enough."""
    t0 = time.monotonic()
    time.sleep(seconds)
    reached = None
    if below_c is not None and meter.reads_temperature:
        while (temp := meter.temperature()) >= below_c and time.monotonic() - t0 < seconds + timeout_s:
            time.sleep(1.0)
        reached = temp
        log(f"cooldown: GPU at {temp:.0f} °C (target < {below_c:g} °C)")
    return {"cooldown_s": time.monotonic() - t0, "cooldown_end_temperature_c": reached}


def versions() -> dict[str, str]:
    return {
        "tokenwatt": __version__,
        "torch": torch.__version__,
        "transformers": metadata.version("transformers"),
        "python": platform.python_version(),
        "cuda": torch.version.cuda or "none",
    }


@dataclass
class TrialMeasurement:
    """What one meter session measured: the training's result, the evaluations, the windows' energies."""

    result: TrainResult
    diverged: Diverged | None
    eval_loss: float | None
    eval_s: float
    points: list[dict[str, Any]]  # the eval curve; energies come from the windows (trial_curve)
    stop: dict[str, Any]  # where and why train.stop ended training, when it did
    energy: Measurement  # the meter's summary (Meter.close)
    windows: dict[str, WindowMeasurement]  # its windows by name
    idle: bool  # whether an idle baseline was measured (meter.idle_seconds)
    idle_after_s: float
    cooled: dict[str, Any]
    check_before: list[float]
    check_after: list[float]
    meter: Meter
    why: str  # why this meter was chosen (meter_choice)
    checkpoints: dict[str, Any]  # its checkpoints and resumes (``Checkpoints.record``)
    branch: dict[str, Any] | None = None  # the stable run's point it branched from (``branch_point``)


class _Session:
    """The trial's meter session around training: the meter ``spec.meter`` asks for, the throughput checks, the
    training segments, the progress line, the evaluations that pause training (each in its own window) and the
    stopping rule asked at each."""

    def __init__(
        self,
        spec: TrialSpec,
        setup: TrialSetup,
        log: Callable[[str], None],
        nvml: Any = None,
        place: CheckpointPlace | None = None,
        origin: Path | None = None,
    ) -> None:
        self.spec, self.setup, self.log = spec, setup, log
        train = spec.train
        self.checkpoints = Checkpoints(place, train.checkpoint_every, train.keep_checkpoint, log, origin)
        # what was measured before training (cooldown, idle baseline, first check; the branch point), kept in a
        # checkpoint
        self.before: dict[str, Any] = {}
        self.diverged_before: dict[str, Any] | None = None  # the stable run it branches from diverged: where
        device = setup.device
        self.meter, self.why = make_meter(
            spec.meter,
            device.type,
            gpu_uuid=gpu_uuid(device, nvml),
            nvml=nvml,
            sync=setup.meter_sync,
            ranks=setup.ranks.world,
        )
        log(self.why)
        self.pace = Pace(setup.steps_planned)
        self.points: list[dict[str, Any]] = []
        self.stop: dict[str, Any] = {}

    def check(self, when: str) -> list[float]:
        check, s = self.spec.check, self.setup
        if not check.windows:
            return []
        self.meter.begin(f"check_{when}")
        got = measure_throughput(
            s.device,
            compute_dtype(self.spec.train.precision),
            size=check.matmul_size,
            window_s=check.window_s,
            windows=check.windows,
            warmup_s=0.0,
            sync=s.sync,
        )
        self.meter.end()
        self.log(
            f"throughput check {when} training: {got['median_tflops']:.4g} TFLOP/s (median of {got['windows']} windows)"
        )
        return got["windows_tflops"]

    def fail(self, problem: str) -> NoReturn:
        """End the session and fail the trial, named, with ``problem``."""
        self.meter.end()
        self.meter.close()
        raise TrainingError(f"{self.spec.name}: {problem}") from None

    def train(self, resume: TrainState | None = None, keep_state: bool = False) -> tuple[TrainResult, Diverged | None]:
        """Training, from the window train_1 on (each evaluation switches to the next segment's, each checkpoint to
        a part of it: train_<segment>.<checkpoint>, the continuation of a stable run's point: train_<segment>.p<k>), or
        from a checkpoint's state; a diverged run (a non-finite loss, or one past ``blowup_loss``; a stable run that
        diverged before the branch) is recorded as a result or fails the trial, as train.on_divergence says."""
        meter, saved = self.meter, self.checkpoints
        diverged = None
        # a continued saved point by its number (one per lineage: a stretch and the branch from the same point are
        # in different trials), a trial's own checkpoint by its
        part = f"p{self.before.get('continued', 0)}" if saved.branched else str(saved.number)
        meter.begin(f"train_{len(self.points) + 1}.{part}" if resume else "train_1")
        saved.start(resume.step if resume else 0, resume.train_s if resume else 0.0, meter)
        try:
            with saved.signals_deferred():
                if resume is not None and self.diverged_before is not None:
                    raise self.inherited_divergence(resume)
                result = self._train(resume, keep_state)
        except Diverged as err:
            if self.spec.train.on_divergence == "fail":
                self.fail(
                    f"{err}: training diverged at train.lr {self.spec.train.lr:g}. Lower train.lr (or the lr level of "
                    "this cell), give the schedule a warmup (train.schedule), or train in fp32 (train.precision); "
                    "train.on_divergence: record keeps such a trial as a result named in the report instead"
                )
            self.log(f"DIVERGED: {self.spec.name}: {err}; recorded as a result (train.on_divergence: record)")
            diverged, result = err, err.partial
        except TrainingError as err:
            self.fail(str(err))
        if not result.stopped:
            meter.end()
        return result, diverged

    def inherited_divergence(self, state: TrainState) -> Diverged:
        """The stable run's divergence, which every budget branched from it shares: its loss records and tokens."""
        d = self.diverged_before or {}
        partial = TrainResult(
            steps=list(state.steps),
            n_steps=d["step"],
            real_tokens=state.steps[-1]["tokens"] if state.steps else 0,
            train_s=state.train_s,
        )
        limit = blowup_loss(self.setup.arch["vocab_size"])
        return Diverged(d["step"], d["epoch"], d["loss"] if d["loss"] is not None else math.nan, limit, partial)

    def _train(self, resume: TrainState | None, keep_state: bool = False) -> TrainResult:
        s = self.setup
        return train(
            s.model,
            s.ids,
            s.mask,
            s.device,
            self.spec.train,
            on_log=self.progress,
            sync=s.sync,
            forward=s.forward,
            pace=self.pace,
            pause_at_tokens=s.thresholds,
            on_pause=self.evaluation,
            diverged_above=blowup_loss(s.arch["vocab_size"]),
            checkpoints=Checkpointing(due=self.checkpoints.due, save=self.save_checkpoint),
            resume=resume,
            keep_state=keep_state,
            ranks=s.ranks,
        )

    def save_checkpoint(self, state: TrainState, real_tokens: int) -> None:
        """A checkpoint between two steps, in its own window; training goes on in the next part of its segment."""
        saved = self.checkpoints
        segment = f"train_{len(self.points) + 1}.{saved.number + 1}"
        saved.save(state, real_tokens, self.meter, self.snapshot, segment)
        self.log(f"checkpoint {saved.number} at step {state.step} ({real_tokens:,} real tokens)")

    def snapshot(self) -> dict[str, Any]:
        """The measurement so far, for a checkpoint: the meter session, the evaluations, what came before training."""
        return {"meter": self.meter.session_state(), "points": self.points, "stop": self.stop, **self.before}

    def restore(self, session: dict[str, Any]) -> None:
        """Continue a checkpoint's measurement (``snapshot``): its evaluations and what came before training."""
        self.points, self.stop = list(session["points"]), dict(session["stop"])
        self.before = {
            k: session.get(k)
            for k in (
                "device_name",
                "meter_kind",
                "cooled",
                "idle",
                "idle_after_s",
                "check_before",
                "branch",
                "stable_run_s",
                "continued",
            )
        }
        self.diverged_before = session.get("diverged")

    def progress(self, r: dict[str, Any]) -> None:
        watts = self.meter.latest_power()
        self.log(
            f"step {r['step']:>7} epoch {r['epoch']} tokens {r['tokens']:>10,} loss {r['loss']:.4f} "
            f"{r['tokens_per_s'] or 0:,.0f} tok/s " + (f"{watts:.1f} W" if watts is not None else "- W")
        )
        self.checkpoints.beat(r["step"], r["elapsed_s"], self.meter.energy_now() if self.checkpoints.place else None)

    def evaluation(self, at: dict[str, Any]) -> bool:
        """A pause in training: the segment's window closes, the evaluation gets its own, training resumes in the next
        unless the stopping rule (train.stop) says the last segments no longer paid for their energy."""
        s, settings, meter, k = self.setup, self.spec.train, self.meter, len(self.points) + 1
        meter.switch(f"eval_{k}")
        trained_j = self.devices_energy(meter.energy_so_far("train"))
        t = time.perf_counter()
        ids, mask = s.eval_ids[: s.n_sub], s.eval_mask[: s.n_sub]
        loss = evaluate(s.model, ids, mask, s.device, settings.precision, settings.eval_batch_size, s.ranks)
        eval_s = time.perf_counter() - t
        # NVML's counter updates about every 100 ms: an evaluation shorter than it can resolve is refused at the
        # first point rather than measured as rounding for the rest of the study (the CPU meters resolve ms).
        if k == 1 and meter.coarse_counter:
            tokens = int(mask.sum())
            if s.ranks.many:  # every rank decides on the same seconds: the slowest rank's, and the whole set's tokens
                eval_s = s.ranks.largest(torch.tensor([eval_s], dtype=torch.float64, device=s.device)).item()
            if problem := short_eval_window(eval_s, tokens, meter.update_period_s, "measured at the first point"):
                raise TrainingError(problem)
        self.points.append(
            {
                **at,
                "point": k,
                "eval_loss": loss,
                "eval_s": eval_s,
                "eval_tokens": int(mask.sum()),
                "final": False,
                "train_energy_j": trained_j,
            }
        )
        self.log(
            f"evaluation {k} at {at['real_tokens']:,} real tokens: eval loss {loss:.4f} ({eval_s:.2f} s, outside training)"
        )
        reason = should_stop(self.points, settings.stop) if settings.stop.rule != "none" else None
        if reason:
            self.stop.update(stopped_at_point=k, stopped_at_tokens=at["real_tokens"], stop_reason=reason)
            self.log(f"STOPPED at evaluation {k} ({at['real_tokens']:,} real tokens): {reason} (train.stop)")
            meter.end()  # no further training window
            return True
        meter.switch(f"train_{k + 1}")
        return False

    def devices_energy(self, own: float | None) -> float | None:
        """This rank's energy so far summed over the trial's devices (every rank gets the same sum, so a stopping rule
        decides the same on all of them); its own on one device; None where any device has none."""
        ranks = self.setup.ranks
        if not ranks.many:
            return own
        total = ranks.sum(
            torch.tensor([math.nan if own is None else own], dtype=torch.float64, device=self.setup.device)
        )
        return None if math.isnan(total.item()) else total.item()

    def final_evaluation(self, result: TrainResult) -> tuple[float, float]:
        """The whole eval set's loss, the trial's result, and the curve's last point on the tokens of its others (so no
        point differs from the one before it by the set it was evaluated on); with the seconds both took. A
        non-finite loss fails the trial."""
        s, settings = self.setup, self.spec.train
        self.meter.begin("eval_final")
        t_eval = time.perf_counter()
        precision, batch = settings.precision, settings.eval_batch_size
        eval_loss = evaluate(s.model, s.eval_ids, s.eval_mask, s.device, precision, batch, s.ranks)
        curve_loss = (
            eval_loss
            if s.n_sub == len(s.eval_ids)
            else evaluate(s.model, s.eval_ids[: s.n_sub], s.eval_mask[: s.n_sub], s.device, precision, batch, s.ranks)
        )
        eval_s = time.perf_counter() - t_eval
        self.meter.end()
        if not math.isfinite(eval_loss):
            self.meter.close()
            raise TrainingError(f"{self.spec.name}: non-finite eval loss {eval_loss}")
        self.points.append(
            {
                "step": result.n_steps,
                "epoch": settings.epochs,
                "real_tokens": result.real_tokens,
                "train_s": result.train_s,
                "point": len(self.points) + 1,
                "eval_loss": curve_loss,
                "eval_loss_whole_set": eval_loss,
                "eval_s": eval_s,
                "eval_tokens": int(s.eval_mask[: s.n_sub].sum()),
                "final": True,
            }
        )
        return eval_loss, eval_s

    def close(self) -> Measurement:
        """The meter's summary of the session (``Meter.close``), each window's note logged."""
        energy = self.meter.close()
        for w in energy.windows:
            if w.note:
                self.log(f"NOTE: window {w.name}: {w.note}")
        return energy


def begin(
    spec: TrialSpec,
    setup: TrialSetup,
    log: Callable[[str], None],
    nvml: Any = None,
    place: CheckpointPlace | None = None,
    origin: Path | None = None,
) -> tuple[_Session, Checkpoint | None]:
    """The meter session up to training: cooldown, idle baseline, throughput check; or, with a state to continue (a
    checkpoint in ``place``, else the stable run's point ``origin``), the saved session, whose measurements before
    training are kept. Returns the session and the state training continues from."""
    session = _Session(spec, setup, log, nvml, place, origin)
    meter, settings = session.meter, spec.meter
    here = {"device_name": device_name(setup.device), "meter_kind": meter.kind}
    saved = session.checkpoints.resume()
    if session.checkpoints.branched and saved is not None and saved.train.start >= len(setup.ids):
        raise TrainingError(
            f"{spec.name}: its stable run's saved point ({origin}) is at or past the last of the chunks it trains on, "
            "so it has no step left to cool down in: raise train.schedule.cooldown_fraction or the budget"
        )
    if saved is not None and (there := {k: saved.session.get(k) for k in here}) != here:
        if session.checkpoints.branched:  # the stable run is other jobs' measurement: never silently redone here
            raise TrainingError(
                f"{spec.name}: the stable run it branches from ({origin}) was measured on {there}, this job runs on "
                f"{here}: run a branched study's jobs on one kind of device and meter, or remove that file to train "
                "it again here"
            )
        # its windows and baseline were measured on another device or by another meter: not one measurement
        session.checkpoints.discard(saved, f"the checkpoint was measured on {there}, this process runs on {here}")
        saved = None
    cooled = cooldown(meter, settings.cooldown_s, settings.cooldown_below_c, settings.cooldown_timeout_s, log)
    if saved is not None and not session.checkpoints.branched:
        # a resumed process cools down too; the trial's record keeps the first's, each resume its own
        session.checkpoints.resumes[-1]["cooldown_end_temperature_c"] = cooled["cooldown_end_temperature_c"]
    # At least the meter's settle time since the device last worked, whatever the cooldown: an averaged reading
    # still shows the load or compile for that long, and the idle baseline would read it as idle power.
    time.sleep(max(0.0, meter.settle_s - (time.monotonic() - setup.last_work)))
    if saved is None:
        meter.open(session.pace)
        idle_after_s = time.monotonic() - setup.last_work
        idle = meter.window("idle", settings.idle_seconds) if settings.idle_seconds > 0 else None
        session.before = {
            **here,
            "cooled": cooled,
            "idle": idle is not None,
            "idle_after_s": idle_after_s,
            "check_before": session.check("before"),
        }
    else:
        session.restore(saved.session)
        meter.open(session.pace, carried=session.checkpoints.carried(saved.session["meter"]))
        if session.checkpoints.branched:
            session.before["branch"] = branch_point(spec, saved)
            session.before["continued"] = saved.session.get("stable_point", 0)
    time.sleep(meter.settle_s)
    return session, saved


def branch_point(spec: TrialSpec, saved: Checkpoint) -> dict[str, Any]:
    """Where a branched trial left its stable run: the saved point, and the stable run's training windows (their
    energy and seconds, the trial's record sums them)."""
    windows = [w["name"] for w in saved.session["meter"]["windows"] if w["name"].startswith("train")]
    return {
        "every": spec.train.schedule.branch_every,
        "from_point": saved.session.get("stable_point", 0),
        "from_step": saved.train.step,
        "from_real_tokens": saved.train.steps[-1]["tokens"] if saved.train.steps else 0,
        "stable_train_s": saved.train.train_s,
        "stable_run_s": saved.session.get("stable_run_s", 0.0),
        "stable_windows": windows,
    }


def measure(
    spec: TrialSpec,
    setup: TrialSetup,
    log: Callable[[str], None],
    nvml: Any = None,
    place: CheckpointPlace | None = None,
    origin: Path | None = None,
) -> TrialMeasurement:
    """The trial's one meter session, window by window: cooldown, idle baseline, throughput check, training segments
    and the evaluations between them, check again, the final evaluation. Its order is the measurement protocol, read
    top to bottom here; what happens inside a window is ``_Session``'s. With a checkpoint to resume from (in
    ``place``), or a stable run's point to branch from (``origin``), the session continues the saved one: what it
    measured before training is kept, and training goes on from the saved state."""
    session, saved = begin(spec, setup, log, nvml, place, origin)
    result, diverged = session.train(saved.train if saved else None)
    check_after = session.check("after")
    eval_loss, eval_s = (None, 0.0) if diverged else session.final_evaluation(result)
    energy = session.close()
    return TrialMeasurement(
        result=result,
        diverged=diverged,
        eval_loss=eval_loss,
        eval_s=eval_s,
        points=session.points,
        stop=session.stop,
        energy=energy,
        windows={w.name: w for w in energy.windows},
        idle=session.before["idle"],
        idle_after_s=session.before["idle_after_s"],
        cooled=session.before["cooled"],
        check_before=session.before["check_before"],
        check_after=check_after,
        meter=session.meter,
        why=session.why,
        checkpoints=session.checkpoints.record(),
        branch=session.before.get("branch"),
    )


def run_stable(
    spec: TrialSpec,
    data: TrialData,
    out: Path,
    point: int,
    log: Callable[[str], None] = print,
    nvml: Any = None,
    place: CheckpointPlace | None = None,
    origin: Path | None = None,
) -> dict[str, Any]:
    """One stretch of a stable run (train.schedule.branch_every): ``data`` is the head of the trial's drawn order up
    to saved point ``point`` (``stream_head``), trained from the point before (``origin``; None: from the first step,
    with the cooldown, idle baseline and check a trial begins with) at the peak rate, and saved to ``out`` with its
    whole meter session, which the next stretch and every budget's branch continue. A stable run that diverged saves
    where, and the trials after it are its divergence, recorded or failed as train.on_divergence says. Returns what
    the stretch trained, for its log, and the saved session (``session``: its stretch record's source, stretch.py)."""
    t_start = time.perf_counter()
    setup = set_up(spec, data, log)
    parameters = sum(p.numel() for p in setup.model.parameters())
    per_step = spec.train.batch_size * setup.ids.shape[1]
    if why := spec.train.schedule.room_after_warmup(setup.steps_planned, parameters, per_step):
        raise TrainingError(
            f"the stable run's stretch to {spec.budget:,} real tokens: {why}; every stretch must reach the peak rate, "
            "so raise train.schedule.branch_every above the warmup (or lower train.schedule.warmup_tokens_per_parameter)"
        )
    session, saved = begin(spec, setup, log, nvml, place, origin)
    result, diverged = session.train(saved.train if saved else None, keep_state=True)
    payload = {
        **session.snapshot(),
        "checkpoints": session.checkpoints.written,
        "resumes": session.checkpoints.resumes,
        "stable_point": point,
        # the stable run's processes' seconds so far: a branch's time on the device includes them (its cost)
        "stable_run_s": (session.before.get("stable_run_s") or 0.0) + time.perf_counter() - t_start,
    }
    if diverged is not None:
        payload["diverged"] = {
            "step": diverged.step,
            "epoch": diverged.epoch,
            "loss": diverged.loss if math.isfinite(diverged.loss) else None,
        }
    state = result.state if result.state is not None else _diverged_state(result)
    store.save(
        out.parent, Checkpoint(key=out.name, number=session.checkpoints.number, train=state, session=payload), out.name
    )
    session.close()
    return {
        "step": result.n_steps,
        "real_tokens": result.real_tokens,
        "train_s": state.train_s,  # the saved point's, which its branches inherit
        "diverged": diverged is not None,
        "session": payload,
    }


def _diverged_state(result: TrainResult) -> TrainState:
    """A diverged stable run's saved point: its loss records and time, no weights (no branch trains from it)."""
    return TrainState(
        step=result.n_steps,
        epoch=0,
        start=0,
        order_state=torch.Generator().get_state(),
        logged=len(result.steps),
        pending_losses=torch.empty(0),
        steps=list(result.steps),
        train_s=result.train_s,
        skips=0.0,
        model={},
        optimizer={},
        scaler={},
        rng=torch.get_rng_state(),
    )


def trial_record(
    spec: TrialSpec,
    data: TrialData,
    setup: TrialSetup,
    measured: TrialMeasurement,
    started_at: float,
    nvml: Any = None,
) -> dict[str, Any]:
    """metrics.json, the trial's typed record (workflow/schemas/metrics.schema.yaml): its identity (budget, trial,
    levels, cell, seed) first, then what was trained, what the meter measured, the device and the model. Raw
    measurements only; the record's keys keep their order, which the file shows. ``started_at``: the Unix time
    the trial started."""
    s, m, result, settings = setup, measured, measured.result, spec.train
    idle = m.windows["idle"] if m.idle else None
    return {
        "budget": spec.budget,
        "trial": spec.trial,
        "levels": dict(spec.levels),
        "cell": spec.cell,
        "seed": spec.seed,
        "status": "diverged" if m.diverged else "ok",
        "started_at_unix_s": started_at,
        **(
            {
                "diverged_at_step": m.diverged.step,
                "diverged_in_epoch": m.diverged.epoch,
                # null where the loss was not finite (JSON holds no NaN or inf)
                "diverged_loss": m.diverged.loss if math.isfinite(m.diverged.loss) else None,
            }
            if m.diverged
            else {}
        ),
        "subset_chunks": data.subset["n_chunks"],
        "subset_real_tokens": data.subset["real_tokens"],
        "real_tokens": result.real_tokens,
        "padded_tokens": result.padded_tokens or None,
        "steps": result.n_steps,
        "epochs": settings.epochs,
        "batch_size": settings.batch_size,
        "data_order": settings.order,
        "branch": branch_record(settings, m),
        "lr": settings.lr,
        "lr_schedule": settings.schedule.to_dict(),
        "lr_warmup_steps": result.warmup_steps,
        "adam_betas": list(settings.betas),
        "z_loss": settings.z_loss,
        "precision": settings.precision,
        "optimizer": result.optimizer,
        "grad_scaler_skips": result.grad_scaler_skips,
        "eval_loss": m.eval_loss,
        "final_train_loss": result.final_train_loss,
        "eval_tokens": int(s.eval_mask.sum()),
        "train_s": result.train_s,
        "eval_s": m.eval_s,
        **m.cooled,
        "eval_points": len(m.points),
        "eval_subset_tokens": int(s.eval_mask[: s.n_sub].sum()),
        "stop_rule": settings.stop.to_dict(),
        "stopped": result.stopped,
        **m.stop,
        "settle_s": m.meter.settle_s,
        "energy_j": m.energy.energy_j,
        "idle_power_w": None if idle is None or idle.energy_j is None else idle.energy_j / idle.duration_s,
        "idle_seconds": None if idle is None else idle.duration_s,
        "idle_after_s": m.idle_after_s,
        "meter_choice": m.why,
        **{k: v for k, v in m.energy.to_record().items() if k != "energy_j"},
        "device": s.device.type,
        "device_name": device_name(s.device),
        "device_uuid": m.meter.static_info().get("meter_device_uuid") or gpu_uuid(s.device, nvml),
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "job": job_identity(),
        "threads": settings.threads,
        "devices": s.ranks.world,
        **s.arch,
        "compiled": s.compiling,
        "compile_s": s.compile_s,
        "tokenizer_vocab_size": data.tokenizer["vocab_size"],
        "context": s.ids.shape[1],
        **m.checkpoints,
        "checkpoint_energy_j": _sum_windows(m.windows, "checkpoint_", "energy_j"),
        "checkpoint_s": _sum_windows(m.windows, "checkpoint_", "duration_s"),
        "check_before_tflops": m.check_before,
        "check_after_tflops": m.check_after,
        "versions": versions(),
    }


def job_identity() -> dict[str, Any]:
    """Where the trial ran, to join its record with the scheduler's accounting: the node, and under SLURM its job id
    and step (null elsewhere)."""
    return {
        "node": os.environ.get("SLURMD_NODENAME") or platform.node(),
        "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
        "slurm_step_id": os.environ.get("SLURM_STEP_ID"),
    }


# The columns of steps.parquet: one row per logged training step.
STEPS_SCHEMA = {
    "step": pl.Int64,
    "epoch": pl.Int64,
    "tokens": pl.Int64,
    "loss": pl.Float64,
    "elapsed_s": pl.Float64,
    "tokens_per_s": pl.Float64,
}


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
    trial keeps its checkpoint (``resume.py``), and resumes from one found there; None: no checkpoints. ``ranks``:
    this process's place among a trial's devices (``launch.py`` starts one process per device; each returns its own
    record, which ``combine.py`` makes the trial's)."""
    t_start, started_at = time.perf_counter(), time.time()
    setup = set_up(spec, data, log, ranks)
    measured = measure(spec, setup, log, nvml, place, origin)
    curve = trial_curve(measured.points, measured.windows, data.subset["real_tokens"])
    metrics = trial_record(spec, data, setup, measured, started_at, nvml)
    metrics["run_s"] = time.perf_counter() - t_start
    steps = pl.DataFrame(measured.result.steps, schema=STEPS_SCHEMA, orient="row")
    return metrics, measured.energy.trace, steps, curve


# The columns of curve.parquet: one row per evaluation point of a trial.
CURVE_SCHEMA = {
    "point": pl.Int64,
    "step": pl.Int64,
    "epoch": pl.Int64,
    "real_tokens": pl.Int64,
    "distinct_tokens": pl.Int64,
    "train_s": pl.Float64,
    "train_energy_j": pl.Float64,
    "eval_loss": pl.Float64,
    "eval_loss_whole_set": pl.Float64,
    "eval_s": pl.Float64,
    "eval_energy_j": pl.Float64,
    "eval_tokens": pl.Int64,
    "final": pl.Boolean,
}


def trial_curve(
    points: list[dict[str, Any]], windows: dict[str, WindowMeasurement], distinct_total: int
) -> pl.DataFrame:
    """The evaluation points with their energies from the meter's windows: cumulative training energy (the training
    segments up to the point) and the evaluation's own; distinct tokens cap at the subset's (epoch one sees each once)."""
    rows = []
    for p in points:
        # a segment's parts (train_<segment>.<checkpoint>) count as the segment
        segments = [w.energy_j for name, w in windows.items() if 0 < _segment(name) <= p["point"]]
        own = windows.get("eval_final" if p["final"] else f"eval_{p['point']}")
        rows.append(
            {
                **p,
                "distinct_tokens": min(p["real_tokens"], distinct_total),
                "train_energy_j": None if not segments or None in segments else float(sum(segments)),
                "eval_energy_j": own.energy_j if own else None,
            }
        )
    return pl.DataFrame([{k: r.get(k) for k in CURVE_SCHEMA} for r in rows], schema=CURVE_SCHEMA, orient="row")


def branch_record(settings: TrainSettings, m: TrialMeasurement) -> dict[str, Any] | None:
    """A branched trial's ``branch`` (metrics.schema.yaml): the stable run's point it continued (point 0: none, it
    trained from its first step) and the stable run's training energy and seconds, which its own include."""
    if settings.schedule.branch_every is None:
        return None
    point = m.branch or {"every": settings.schedule.branch_every, "from_point": 0, "from_step": 0}
    point = {"from_real_tokens": 0, "stable_train_s": 0.0, "stable_run_s": 0.0, "stable_windows": [], **point}
    energies = [m.windows[name].energy_j for name in point.pop("stable_windows")]
    return {
        **point,
        "stable_energy_j": None if None in energies else float(sum(energies)),
        "cooldown_from_step": m.result.cooldown_from,
    }


def _segment(window: str) -> int:
    """The training segment a window belongs to (train_3 and train_3.1: 3); 0 for a window that is not training's."""
    if not window.startswith("train_"):
        return 0
    return int(window.removeprefix("train_").split(".")[0])


def _sum_windows(windows: dict[str, WindowMeasurement], prefix: str, key: str) -> float | None:
    """The windows named ``prefix…``'s total ``key``; 0 where there are none, None where one has no value."""
    values = [getattr(w, key) for name, w in windows.items() if name.startswith(prefix)]
    return None if None in values else float(sum(values))
