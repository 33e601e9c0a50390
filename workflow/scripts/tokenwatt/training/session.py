"""A trial's meter session around its training: the meter ``spec.meter`` asks for, what it measures before training
(cooldown, idle baseline, throughput check), the training segments, the progress line, the evaluations that pause
training (each in its own window) with the stopping rule asked at each, the checkpoints, and the final evaluation.

Its state between two steps is a ``SessionState`` (``checkpoint.py``), saved beside the loop's ``TrainState`` in
every checkpoint and in a stable run's saved point; ``Session.begin`` measures a new one or continues a saved one.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NoReturn

import torch

from ..measurement.devices import compute_dtype, device_name, gpu_uuid
from ..measurement.energy import short_eval_window
from ..measurement.memory import PeakMemory
from ..measurement.meter import Measurement, Meter, Pace, WindowMeasurement
from ..measurement.meters import make_meter
from ..measurement.throughput import measure_throughput
from ..plan.stopping import should_stop
from .checkpoint import BeforeTraining, Checkpoint, SessionState, TrainState
from .resume import CheckpointPlace, Checkpoints
from .setup import TrialSetup
from .spec import TrialSpec
from .train import Checkpointing, Diverged, TrainHooks, TrainingError, TrainResult, blowup_loss, evaluate, train


@dataclass(frozen=True)
class TrialContext:
    """One trial process's measurement: the trial (``spec``) and what it trains on which device (``setup``), where it
    logs, the NVML module its meter reads (a test's fake; None: pynvml), where it keeps its checkpoint (``place``;
    None: no checkpoints) and the stable run's saved point it continues (``origin``; None: none)."""

    spec: TrialSpec
    setup: TrialSetup
    log: Callable[[str], None] = print
    nvml: Any = None
    place: CheckpointPlace | None = None
    origin: Path | None = None


@dataclass
class TrialMeasurement:
    """What one meter session measured: the training's result, the evaluations, the windows' energies."""

    result: TrainResult
    diverged: Diverged | None
    eval_loss: float | None
    eval_s: float
    energy: Measurement  # the meter's summary (Meter.close)
    windows: dict[str, WindowMeasurement]  # its windows by name
    session: SessionState  # what it measured before training, the eval curve (energies: the windows'), the stop
    check_after: list[float]
    meter: Meter
    why: str  # why this meter was chosen (meter_choice)
    checkpoints: dict[str, Any]  # its checkpoints and resumes (``Checkpoints.record``)
    memory: dict[str, Any]  # the device's peak memory over training (``PeakMemory.read``)


def cooldown(
    meter: Meter, seconds: float, below_c: float | None, timeout_s: float, log: Callable[[str], None]
) -> dict[str, Any]:
    """Wait before the trial: a fixed pause, then (a meter that reads the device's temperature) until the device is
    cool enough."""
    t0 = time.monotonic()
    time.sleep(seconds)
    reached = None
    if below_c is not None and meter.reader.reads_temperature:
        while (temp := meter.reader.temperature()) >= below_c and time.monotonic() - t0 < seconds + timeout_s:
            time.sleep(1.0)
        reached = temp
        log(f"cooldown: GPU at {temp:.0f} °C (target < {below_c:g} °C)")
    return {"cooldown_s": time.monotonic() - t0, "cooldown_end_temperature_c": reached}


class Session:
    """The trial's meter session around training, from ``begin`` to ``close``; ``state`` is its measurement so far."""

    state: SessionState  # set by ``begin``
    memory: dict[str, Any]  # the peak memory over training (``PeakMemory.read``), set by ``train``

    def __init__(self, ctx: TrialContext) -> None:
        self.ctx, spec, setup = ctx, ctx.spec, ctx.setup
        train = spec.train
        self.checkpoints = Checkpoints(
            ctx.place, train.checkpoint_every, train.keep_checkpoint, ctx.log, ctx.origin, setup.ranks
        )
        self.meter, self.why = make_meter(
            spec.meter,
            setup.device.type,
            gpu_uuid=gpu_uuid(setup.device, ctx.nvml),
            nvml=ctx.nvml,
            sync=setup.meter_sync,
            ranks=setup.ranks.world,
        )
        ctx.log(self.why)
        self.pace = Pace(setup.steps_planned)

    def begin(self) -> TrainState | None:
        """The session up to training: cooldown, idle baseline, throughput check; or, with a state to continue (a
        checkpoint in ``place``, else the stable run's point ``origin``), the saved session, whose measurements before
        training are kept. Returns the saved training state to continue from, and nothing else of the checkpoint: the
        loop lets go of its weights once loaded, and no other reference may keep them resident (``train``)."""
        ctx, meter, settings, saved = self.ctx, self.meter, self.ctx.spec.meter, self.checkpoints.resume()
        branched = self.checkpoints.branched
        if branched and saved is not None and saved.train.start >= len(ctx.setup.ids):
            raise TrainingError(
                f"{ctx.spec.name}: its stable run's saved point ({ctx.origin}) is at or past the last of the chunks it "
                "trains on, so it has no step left to cool down in: raise train.schedule.cooldown_fraction or the budget"
            )
        here = {"device_name": device_name(ctx.setup.device), "meter_kind": meter.reader.kind}
        there = {k: getattr(saved.session.before, k) for k in here} if saved is not None else here
        if ctx.setup.ranks.any(there != here):  # every rank continues the saved session, or none does
            if branched:  # the stable run is other jobs' measurement: never silently redone here
                raise TrainingError(
                    f"{ctx.spec.name}: the stable run it branches from ({ctx.origin}) was measured on {there}, this job "
                    f"runs on {here}: run a branched study's jobs on one kind of device and meter, or remove that file "
                    "to train it again here"
                )
            # its windows and baseline were measured on another device or by another meter: not one measurement
            self.checkpoints.discard(saved, f"the checkpoint was measured on {there}, this process runs on {here}")
            saved = None
        cooled = cooldown(meter, settings.cooldown_s, settings.cooldown_below_c, settings.cooldown_timeout_s, ctx.log)
        if saved is not None and not branched:
            # a resumed process cools down too; the trial's record keeps the first's, each resume its own
            self.checkpoints.resumes[-1]["cooldown_end_temperature_c"] = cooled["cooldown_end_temperature_c"]
        # At least the meter's settle time since the device last worked, whatever the cooldown: an averaged reading
        # still shows the load or compile for that long, and the idle baseline would read it as idle power.
        time.sleep(max(0.0, meter.reader.settle_s - (time.monotonic() - ctx.setup.last_work)))
        if saved is None:
            meter.open(self.pace)
            idle_after_s = time.monotonic() - ctx.setup.last_work
            idle = meter.window("idle", settings.idle_seconds) if settings.idle_seconds > 0 else None
            check_before = self.check("before")
            before = BeforeTraining(
                **here, cooled=cooled, idle=idle is not None, idle_after_s=idle_after_s, check_before=check_before
            )
            self.state = SessionState(before=before)
        else:
            self.state = replace(saved.session, branch=branch_point(ctx.spec, saved)) if branched else saved.session
            meter.open(self.pace, carried=self.checkpoints.carried(saved.session.meter))
        time.sleep(meter.reader.settle_s)
        return saved.train if saved is not None else None

    def check(self, when: str) -> list[float]:
        check, s = self.ctx.spec.check, self.ctx.setup
        if not check.windows:
            return []
        self.meter.begin(f"check_{when}")
        got = measure_throughput(
            s.device,
            compute_dtype(self.ctx.spec.train.precision),
            size=check.matmul_size,
            window_s=check.window_s,
            windows=check.windows,
            warmup_s=0.0,
            sync=s.sync,
        )
        self.meter.end()
        self.ctx.log(
            f"throughput check {when} training: {got['median_tflops']:.4g} TFLOP/s (median of {got['windows']} windows)"
        )
        return got["windows_tflops"]

    def fail(self, problem: str) -> NoReturn:
        """End the session and fail the trial, named, with ``problem``."""
        self.meter.end()
        self.meter.close()
        raise TrainingError(f"{self.ctx.spec.name}: {problem}") from None

    def train(self, resume: TrainState | None = None) -> tuple[TrainResult, Diverged | None]:
        """Training, from the window train_1 on (each evaluation switches to the next segment's, each checkpoint to
        a part of it: train_<segment>.<checkpoint>, the continuation of a stable run's point: train_<segment>.p<k>), or
        from a checkpoint's state; a diverged run (a non-finite loss, or one past ``blowup_loss``; a stable run that
        diverged before the branch) is recorded as a result or fails the trial, as train.on_divergence says."""
        meter, saved, settings, s = self.meter, self.checkpoints, self.ctx.spec.train, self.ctx.setup
        diverged, peak = None, PeakMemory(s.device)
        # a continued saved point by its number (one per lineage: a stretch and the branch from the same point are
        # in different trials), a trial's own checkpoint by its
        part = f"p{self.state.branch['from_point']}" if saved.branched else str(saved.number)
        meter.begin(f"train_{len(self.state.points) + 1}.{part}" if resume else "train_1")
        saved.start(resume.step if resume else 0, resume.train_s if resume else 0.0, meter)
        try:
            with saved.signals_deferred():
                if resume is not None and self.state.diverged is not None:
                    raise self.inherited_divergence(resume)
                # a resumed state's window opens again once it is loaded and its copy let go (``TrainHooks.loaded``)
                hooks = replace(self.hooks(), loaded=peak.start)
                peak.start()
                result = train(s.model, s.ids, s.mask, s.device, settings, hooks=hooks, resume=resume, ranks=s.ranks)
        except Diverged as err:
            if settings.on_divergence == "fail":
                self.fail(
                    f"{err}: training diverged at train.lr {settings.lr:g}. Lower train.lr (or the lr level of "
                    "this cell), give the schedule a warmup (train.schedule), or train in fp32 (train.precision); "
                    "train.on_divergence: record keeps such a trial as a result named in the report instead"
                )
            self.ctx.log(f"DIVERGED: {self.ctx.spec.name}: {err}; recorded as a result (train.on_divergence: record)")
            diverged, result = err, err.partial
        except TrainingError as err:
            self.fail(str(err))
        self.memory = peak.read()
        if not result.stopped:
            meter.end()
        return result, diverged

    def hooks(self) -> TrainHooks:
        """What this session adds to the training loop: its progress line, evaluations and checkpoints."""
        s = self.ctx.setup
        return TrainHooks(
            forward=s.forward,
            log=self.progress,
            sync=s.sync,
            pace=self.pace,
            pause_at_tokens=s.thresholds,
            pause=self.evaluation,
            checkpoints=Checkpointing(due=self.checkpoints.due, save=self.save_checkpoint),
            diverged_above=blowup_loss(s.arch["vocab_size"]),
        )

    def inherited_divergence(self, state: TrainState) -> Diverged:
        """The stable run's divergence, which every budget branched from it shares: its loss records and tokens."""
        d = self.state.diverged or {}
        partial = TrainResult(
            steps=list(state.steps),
            n_steps=d["step"],
            real_tokens=state.steps[-1]["tokens"] if state.steps else 0,
            train_s=state.train_s,
        )
        limit = blowup_loss(self.ctx.setup.arch["vocab_size"])
        return Diverged(d["step"], d["epoch"], d["loss"] if d["loss"] is not None else math.nan, limit, partial)

    def save_checkpoint(self, state: TrainState, real_tokens: int) -> None:
        """A checkpoint between two steps, in its own window; training goes on in the next part of its segment."""
        saved = self.checkpoints
        segment = f"train_{len(self.state.points) + 1}.{saved.number + 1}"
        saved.save(state, real_tokens, self.meter, self.snapshot, segment)
        self.ctx.log(f"checkpoint {saved.number} at step {state.step} ({real_tokens:,} real tokens)")

    def snapshot(self) -> SessionState:
        """The measurement so far, for a checkpoint: the state with the meter session as it stands."""
        return replace(self.state, meter=self.meter.session_state())

    def progress(self, r: dict[str, Any]) -> None:
        watts = self.meter.latest_power()
        self.ctx.log(
            f"step {r['step']:>7} epoch {r['epoch']} tokens {r['tokens']:>10,} loss {r['loss']:.4f} "
            f"{r['tokens_per_s'] or 0:,.0f} tok/s " + (f"{watts:.1f} W" if watts is not None else "- W")
        )
        self.checkpoints.agree_on_stop()
        self.checkpoints.beat(r["step"], r["elapsed_s"], self.meter.energy_now() if self.checkpoints.place else None)

    def evaluation(self, at: dict[str, Any]) -> bool:
        """A pause in training: the segment's window closes, the evaluation gets its own, training resumes in the next
        unless the stopping rule (train.stop) says the last segments no longer paid for their energy."""
        s, settings, meter, k = self.ctx.setup, self.ctx.spec.train, self.meter, len(self.state.points) + 1
        meter.switch(f"eval_{k}")
        trained_j = self.devices_energy(meter.energy_so_far("train"))
        t = time.perf_counter()
        ids, mask = s.eval_ids[: s.n_sub], s.eval_mask[: s.n_sub]
        loss = evaluate(s.model, ids, mask, s.device, settings.precision, settings.eval_batch_size, s.ranks)
        eval_s = time.perf_counter() - t
        # NVML's counter updates about every 100 ms: an evaluation shorter than it can resolve is refused at the
        # first point rather than measured as rounding for the rest of the study (the CPU meters resolve ms).
        if k == 1 and meter.reader.coarse_counter:
            tokens = int(mask.sum())
            if s.ranks.many:  # every rank decides on the same seconds: the slowest rank's, and the whole set's tokens
                eval_s = s.ranks.largest(torch.tensor([eval_s], dtype=torch.float64, device=s.device)).item()
            if problem := short_eval_window(
                eval_s, tokens, meter.reader.update_period_s, "measured at the first point"
            ):
                raise TrainingError(problem)
        point = {**at, "point": k, "eval_loss": loss, "eval_s": eval_s, "eval_tokens": int(mask.sum()), "final": False}
        point["train_energy_j"] = trained_j
        self.state = replace(self.state, points=(*self.state.points, point))
        self.ctx.log(
            f"evaluation {k} at {at['real_tokens']:,} real tokens: eval loss {loss:.4f} ({eval_s:.2f} s, outside training)"
        )
        reason = should_stop(self.state.points, settings.stop) if settings.stop.rule != "none" else None
        if reason:
            stop = {"stopped_at_point": k, "stopped_at_tokens": at["real_tokens"], "stop_reason": reason}
            self.state = replace(self.state, stop={**self.state.stop, **stop})
            self.ctx.log(f"STOPPED at evaluation {k} ({at['real_tokens']:,} real tokens): {reason} (train.stop)")
            meter.end()  # no further training window
            return True
        meter.switch(f"train_{k + 1}")
        return False

    def devices_energy(self, own: float | None) -> float | None:
        """This rank's energy so far summed over the trial's devices (every rank gets the same sum, so a stopping rule
        decides the same on all of them); its own on one device; None where any device has none."""
        ranks = self.ctx.setup.ranks
        if not ranks.many:
            return own
        total = ranks.sum(
            torch.tensor([math.nan if own is None else own], dtype=torch.float64, device=self.ctx.setup.device)
        )
        return None if math.isnan(total.item()) else total.item()

    def final_evaluation(self, result: TrainResult) -> tuple[float, float]:
        """The whole eval set's loss, the trial's result, and the curve's last point on the tokens of its others (so no
        point differs from the one before it by the set it was evaluated on); with the seconds both took. A
        non-finite loss fails the trial."""
        s, settings = self.ctx.setup, self.ctx.spec.train
        self.meter.begin("eval_final")
        t_eval = time.perf_counter()
        precision, batch = settings.precision, settings.eval_batch_size
        with result.evaluating():  # the weights an evaluation reads (schedule-free: its average)
            eval_loss = evaluate(s.model, s.eval_ids, s.eval_mask, s.device, precision, batch, s.ranks)
            curve_loss = (
                eval_loss
                if s.n_sub == len(s.eval_ids)
                else evaluate(
                    s.model, s.eval_ids[: s.n_sub], s.eval_mask[: s.n_sub], s.device, precision, batch, s.ranks
                )
            )
        eval_s = time.perf_counter() - t_eval
        self.meter.end()
        if not math.isfinite(eval_loss):
            self.meter.close()
            raise TrainingError(f"{self.ctx.spec.name}: non-finite eval loss {eval_loss}")
        final = {
            "step": result.n_steps,
            "epoch": settings.epochs,
            "real_tokens": result.real_tokens,
            "train_s": result.train_s,
            "point": len(self.state.points) + 1,
            "eval_loss": curve_loss,
            "eval_loss_whole_set": eval_loss,
            "eval_s": eval_s,
            "eval_tokens": int(s.eval_mask[: s.n_sub].sum()),
            "final": True,
        }
        self.state = replace(self.state, points=(*self.state.points, final))
        return eval_loss, eval_s

    def close(self) -> Measurement:
        """The meter's summary of the session (``Meter.close``), each window's note logged."""
        energy = self.meter.close()
        for w in energy.windows:
            if w.note:
                self.ctx.log(f"NOTE: window {w.name}: {w.note}")
        return energy


def branch_point(spec: TrialSpec, saved: Checkpoint) -> dict[str, Any]:
    """Where a branched trial left its stable run: the saved point, and the stable run's training windows (their
    energy and seconds, the trial's record sums them)."""
    windows = [w["name"] for w in saved.session.meter["windows"] if w["name"].startswith("train")]
    return {
        "every": spec.train.schedule.branch_every,
        "from_point": saved.session.stable_point,
        "from_step": saved.train.step,
        "from_real_tokens": saved.train.steps[-1]["tokens"] if saved.train.steps else 0,
        "stable_train_s": saved.train.train_s,
        "stable_run_s": saved.session.stable_run_s,
        "stable_windows": windows,
    }
