"""The training loop: AdamW at the learning rate of its schedule (``schedule``), loss on real tokens only.

Kept small enough to read in one sitting (in the spirit of nanoGPT's train.py). The hot
path never synchronises with the device except every ``log_every`` steps.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import torch
import torch.nn.functional as F

from ..measurement.devices import PRECISIONS
from ..plan.optimizers import DEFAULT, normalized
from ..plan.stopping import StopRule, stop_rule
from .checkpoint import TrainState
from .optim import make_optimizer
from .ranks import ONE, Ranks
from .schedule import Schedule, schedule_from_config

if TYPE_CHECKING:
    from ..measurement.meter import Pace

IGNORE = -100
T = TypeVar("T")


class TrainingError(RuntimeError):
    pass


# A training loss this many times that of a uniform guess over the vocabulary (ln V nats, about where an initialised
# model starts) is a blow-up, not a spike: the model gives the target less than V^-10. One machine's arithmetic
# carries such a run as finite numbers (1e4 nats at lr 50 on one CPU) where another's turns it into NaN; both are
# the same divergence, and a threshold this far out leaves every run that can still recover alone.
BLOWUP_FACTOR = 10.0


def blowup_loss(vocab_size: int) -> float:
    """The training loss (nats) above which a run has diverged though its loss is finite."""
    return BLOWUP_FACTOR * math.log(max(vocab_size, 2))


class Diverged(TrainingError):
    """A non-finite loss, or one past ``blowup_loss``: where it happened, what it was, and the loss curve and tokens
    up to the last good record."""

    def __init__(self, step: int, epoch: int, loss: float, limit: float, partial: TrainResult) -> None:
        what = (
            f"non-finite loss ({loss}) at step {step}"
            if not math.isfinite(loss)
            else f"loss {loss:.4g} nats at step {step}, past {limit:.3g} ({BLOWUP_FACTOR:g} × ln of the vocabulary)"
        )
        super().__init__(f"{what} (epoch {epoch})")
        self.step, self.epoch, self.loss, self.partial = step, epoch, loss, partial

    def where(self) -> dict[str, Any]:
        """Its step, epoch and loss as records keep them: the loss null where it was not finite (JSON holds no NaN or
        inf)."""
        return {"step": self.step, "epoch": self.epoch, "loss": self.loss if math.isfinite(self.loss) else None}


@dataclass(frozen=True)
class TrainSettings:
    """A cell's ``train.*`` (config/README.md) and the trial's ``seed``, which orders the data (and initialises a
    preset's model). The loop and its evaluations read the first nine; the trial's set-up reads ``device``,
    ``threads`` and ``compile``, its measurement ``on_divergence``, ``stop`` and the checkpoints' two settings. The
    defaults are the schema's, for a caller outside the workflow (a test, a benchmark)."""

    epochs: int
    batch_size: int
    lr: float
    weight_decay: float
    precision: str
    seed: int
    log_every: int
    eval_batch_size: int = 32
    schedule: Schedule = field(default_factory=Schedule)
    betas: tuple[float, float] = (0.9, 0.999)  # AdamW's β₁, β₂
    optimizer: Mapping[str, Any] = field(default_factory=lambda: normalized(DEFAULT))  # {kind, ...its settings}
    z_loss: float = 0.0  # the auxiliary loss's weight on log²Z per target (0: none; the recorded loss is always CE)
    device: str = "auto"
    threads: int = 1
    devices: int = 1  # data-parallel ranks, one per device (``ranks.py``, ``launch.py``)
    compile: bool | str = "auto"
    compile_min_steps: int = 1000
    on_divergence: str = "record"
    stop: StopRule = field(default_factory=StopRule)
    checkpoint_every: int = 0  # real tokens between checkpoints; 0: only when a signal asks for one
    keep_checkpoint: bool = False
    # "shuffled": each epoch a permutation drawn from ``seed``; "given": the chunks in the order given, every epoch
    # (a selection level's order: as read, or a curriculum); "drawn": the subset as drawn (a branched trial's, whose
    # smaller budgets' chunks are the head of its stream).
    order: str = "shuffled"

    @classmethod
    def from_config(cls, train: Mapping[str, Any], seed: int) -> TrainSettings:
        """The settings of a cell's ``train.*`` (``Design.train_config``) for the trial of ``seed``. ``run_alone`` is
        left out: it is the rule's (the cores a trial reserves), not the trial's."""
        given = {k: v for k, v in train.items() if k != "run_alone"}
        return cls(
            **{
                **given,
                "seed": seed,
                "schedule": schedule_from_config(given.get("schedule")),
                **({"betas": tuple(given["betas"])} if "betas" in given else {}),
                "optimizer": normalized(given.get("optimizer", DEFAULT)),
                "stop": stop_rule(given.get("stop", "none")),
            }
        )


@dataclass(frozen=True)
class Checkpointing:
    """When and how the loop saves its state: ``due(step, real_tokens)``, asked after every step with host values (no
    device sync), and ``save(state, real_tokens)``, called with the loop's ``TrainState`` when ``due`` says so,
    training paused (its time left out of the training time, as an evaluation's is). ``save`` writes the state before
    it returns: the loop goes on changing it."""

    due: Callable[[int, int], bool]
    save: Callable[[TrainState, int], None]  # the state and the real tokens trained so far


def _ignore(*_: Any) -> None:
    """A hook that adds nothing."""


@dataclass(frozen=True)
class TrainHooks:
    """What the trial around the loop adds to it; each default adds nothing (a test's or a benchmark's loop).

    ``forward`` is the model as the steps call it (compiled by ``compile_model``; on several devices the data-parallel
    model, which sums the ranks' gradients), the model itself when None. ``log`` gets every loss record, ``sync`` waits
    for the device's queue, and ``pace`` learns each step as it is queued, so the power meter can size its interval.
    After the first step at which the real tokens trained on reach each of ``pause_at_tokens``, training pauses and
    calls ``pause`` with the step, epoch, real tokens and training seconds so far (an evaluation, in its own metered
    window); its True stops training there (an energy-aware stopping rule). ``checkpoints`` saves the loop's state
    between steps, training paused too. A loss that is not finite or is above ``diverged_above`` (``blowup_loss`` of
    the model's vocabulary) raises ``Diverged`` at the next record. ``loaded`` is called once a resumed state is in the
    model, optimizer and scaler and the loop holds no loaded copy of it: a peak memory window opens again there, so
    that the copy read from the checkpoint never counts as training's."""

    forward: Callable[..., Any] | None = None
    log: Callable[[dict[str, Any]], None] = _ignore
    sync: Callable[[], None] = _ignore
    pace: Pace | None = None
    pause_at_tokens: Sequence[int] = ()
    pause: Callable[[dict[str, Any]], bool | None] = _ignore
    checkpoints: Checkpointing | None = None
    diverged_above: float = math.inf
    loaded: Callable[[], None] = _ignore


NO_HOOKS = TrainHooks()


@dataclass
class TrainResult:
    steps: list[dict[str, Any]] = field(default_factory=list)
    n_steps: int = 0
    real_tokens: int = 0
    padded_tokens: int = 0
    train_s: float = 0.0
    final_train_loss: float | None = None
    optimizer: str = ""
    warmup_steps: int = 0  # the schedule's linear warmup, in optimizer steps
    stopped: bool = False  # by a stopping rule, before the end of its tokens
    grad_scaler_skips: int | None = None  # fp16-mixed: optimizer steps the GradScaler skipped (inf/NaN gradients)
    cooldown_from: int | None = None  # a branched wsd trial: the step its cooldown began at
    state: TrainState | None = None  # the loop's state after its last step: a stable run's branch point
    evaluating: Callable[[], contextlib.AbstractContextManager[None]] = contextlib.nullcontext  # ``Optimizer``'s


def autocast(device: torch.device, precision: str):
    """Autocast context for the precision; fp32 runs without one."""
    dtype = PRECISIONS[precision]
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)


def check_precision(device: torch.device, precision: str) -> None:
    """Fail before training if this device cannot run the precision, with what to use instead."""
    dtype = PRECISIONS[precision]
    if dtype is None:
        return
    try:
        with torch.autocast(device_type=device.type, dtype=dtype):
            torch.ones(2, 2, device=device) @ torch.ones(2, 2, device=device)
    except (RuntimeError, ValueError) as err:
        raise TrainingError(
            f"train.precision {precision} is not supported on {device.type} here ({err}); use fp32"
        ) from err
    if device.type == "cuda" and dtype is torch.bfloat16 and not torch.cuda.is_bf16_supported():
        raise TrainingError("train.precision bf16-mixed needs a GPU with bf16 (Ampere or newer); use fp16-mixed")


def labels_for(input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Targets equal the inputs with padding set to the ignore index, so padding adds no loss."""
    return input_ids.masked_fill(attention_mask == 0, IGNORE)


def next_token_targets(input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Each position's target is the next real token; the last position has none. Full width, so
    the loss needs no slice of the logits (whose backward would allocate and fill a logits-sized
    tensor every step)."""
    return F.pad(labels_for(input_ids, attention_mask)[:, 1:], (0, 1), value=IGNORE)


def _flat_logits(model: Callable[..., Any], input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """The forward pass's logits in fp32, one row per position. ``model`` is either implementation, compiled or not:
    the native one returns logits, a transformers model an output record holding them."""
    out = model(input_ids=input_ids, attention_mask=attention_mask)
    logits = out if isinstance(out, torch.Tensor) else out.logits
    return logits.float().reshape(-1, logits.size(-1))


def token_loss_sum(
    model: Callable[..., Any],
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    targets: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Summed next-token cross-entropy over real targets, and how many there were. ``targets``
    (``next_token_targets``) may be passed in when made once for many steps."""
    logits = _flat_logits(model, input_ids, attention_mask)
    if targets is None:
        targets = next_token_targets(input_ids, attention_mask)
    loss = F.cross_entropy(logits, targets.reshape(-1), ignore_index=IGNORE, reduction="sum")
    return loss, (targets != IGNORE).sum()


def z_loss_sum(
    model: Callable[..., Any], input_ids: torch.Tensor, attention_mask: torch.Tensor, targets: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``token_loss_sum``'s cross-entropy sum and target count, and beside them the sum over the same real targets
    of log²Z, Z the softmax normaliser of the logits there (PaLM's z-loss, Chowdhery et al. 2022; Wortsman et al. 2023
    found it keeps logits from drifting at high learning rates). One forward pass serves both."""
    logits = _flat_logits(model, input_ids, attention_mask)
    flat = targets.reshape(-1)
    loss = F.cross_entropy(logits, flat, ignore_index=IGNORE, reduction="sum")
    real = flat != IGNORE
    log_z = torch.logsumexp(logits, dim=-1)
    return loss, real.sum(), torch.where(real, log_z.square(), 0.0).sum()  # where: an inf at padding adds no NaN


@torch.no_grad()
def evaluate(
    model: torch.nn.Module,
    ids: torch.Tensor,
    mask: torch.Tensor,
    device: torch.device,
    precision: str,
    batch_size: int,
    ranks: Ranks = ONE,
) -> float:
    """Token-weighted mean loss over the whole eval set (every real target counts once); on several devices each rank
    evaluates its share of the rows and the sums are added over the ranks."""
    was_training = model.training
    model.eval()
    total = torch.zeros((), device=device)
    count = torch.zeros((), device=device, dtype=torch.long)
    share = ranks.rows(0, len(ids))
    for start in range(share.start, share.stop, batch_size):
        end = min(start + batch_size, share.stop)
        with autocast(device, precision):
            loss, n = token_loss_sum(model, ids[start:end].to(device), mask[start:end].to(device))
        total += loss
        count += n
    model.train(was_training)
    return (ranks.sum(total) / ranks.sum(count)).item()


def should_compile(setting: bool | str, device: torch.device, steps: int, min_steps: int) -> bool:
    """``train.compile``: true/false as given; auto compiles a CUDA trial of at least ``min_steps`` steps.
    On a CPU a compile (18–60 s cold) outweighs what it saves in a trial of minutes. (A study decides auto
    once, by its shortest cell: ``Design.train_config`` turns it into false where that cell is too short.)"""
    if setting == "auto":
        return device.type == "cuda" and steps >= min_steps
    return bool(setting)


def batch_sizes(n_chunks: int, batch_size: int) -> list[int]:
    """The distinct batch sizes an epoch runs: full batches and a shorter last one if any."""
    return sorted({min(batch_size, n_chunks)} | ({n_chunks % batch_size} if n_chunks % batch_size else set()))


def warmup_sizes(n_chunks: int, batch_size: int, ranks: Ranks = ONE) -> list[int]:
    """The batch shapes a compile warms up, one pass each: the epoch's batch sizes; on several devices, this rank's
    share of each (one row where it has none: the zero-weighted row it trains then), so that every rank runs as many
    passes as every other (each backward is a collective) and compiles the shapes it will train."""
    sizes = batch_sizes(n_chunks, batch_size)
    if not ranks.many:
        return sizes
    return [len(range(size)[ranks.rows(0, size)]) or 1 for size in sizes]


def compile_model(
    model: torch.nn.Module,
    ids: torch.Tensor,
    mask: torch.Tensor,
    device: torch.device,
    cfg: TrainSettings,
    ranks: Ranks = ONE,
) -> tuple[Callable[..., Any], float]:
    """``torch.compile`` the model and compile it now, for every batch shape training with ``cfg`` will run (its
    batch size and precision; on several devices, this rank's shares of them), so that no compile happens inside the
    metered training window. Returns the compiled model and the seconds compiling took. The warm-up's gradients are
    discarded: weights are untouched."""
    compiled = torch.compile(model, dynamic=False)
    t0 = time.perf_counter()
    model.to(device).train()
    for size in warmup_sizes(len(ids), cfg.batch_size, ranks):
        with autocast(device, cfg.precision):
            loss, _ = token_loss_sum(compiled, ids[:size].to(device), mask[:size].to(device))
        loss.backward()
    model.zero_grad()
    return compiled, time.perf_counter() - t0


def train(
    model: torch.nn.Module,
    ids: torch.Tensor,
    mask: torch.Tensor,
    device: torch.device,
    cfg: TrainSettings,
    *,
    hooks: TrainHooks = NO_HOOKS,
    resume: TrainState | None = None,
    ranks: Ranks = ONE,
) -> TrainResult:
    """Train in place; the data order of each epoch is a permutation drawn from ``cfg.seed`` (``cfg.order`` shuffled),
    or the order of ``ids`` (given, drawn). ``hooks``: what the trial adds (``TrainHooks``: records, pauses,
    checkpoints). ``resume`` continues a state the loop saved, and the run then goes on exactly as the one that saved
    it (on CPU, bit for bit: the loss records, the pauses and the final weights); the loop changes that state as it
    trains, and returns it after its last step (``TrainResult.state``: a stable run's, which a longer stream with the
    same head continues as if never stopped). ``ranks``: on several devices (``ranks.py``), this rank's share of every
    global batch, each loss record the ranks' shares added.

    A step runs only what training needs (``_Loop.step``): targets are made once, each epoch's order is applied once,
    and a step's loss goes into a device buffer read (one sync) at each record, where the divergence check happens.
    One loop, as nanoGPT keeps its own: what happens between steps, and in which order, reads top to bottom here."""
    n_real_host = mask.sum(dim=1).cpu()  # before the move: where to pause is planned on the host, never synced
    total_real = int(n_real_host.sum())
    pending = sorted(t for t in set(hooks.pause_at_tokens) if 0 < t < total_real * cfg.epochs)
    model.to(device).train()
    result = TrainResult()
    total_steps, result.warmup_steps, result.cooldown_from = _planned_steps(model, ids, n_real_host, cfg)
    loop = _Loop(model, device, cfg, hooks, ranks, total_steps)
    ids, mask = ids.to(device), mask.to(device)
    targets, n_real = next_token_targets(ids, mask), mask.sum(dim=1)
    state = loop.start(resume)
    result.optimizer, result.steps, stopped = loop.optimizer.name, state.steps, False
    result.evaluating = loop.optimizer.evaluating
    for epoch in range(state.epoch, cfg.epochs):
        if epoch > state.epoch:  # the next epoch, from its first batch
            state.epoch, state.start = epoch, 0
        state.order_state = loop.order_gen.get_state()  # a checkpoint in this epoch draws its order again from here
        kept = cfg.order in ("given", "drawn")
        host_order = torch.arange(len(ids)) if kept else torch.randperm(len(ids), generator=loop.order_gen)
        order = host_order.to(device)
        steps_before = state.step - state.start // cfg.batch_size  # a resumed epoch's batches done before it
        reached = _pause_steps(n_real_host, host_order, cfg.batch_size, epoch, steps_before, pending)
        pause_steps = {at: tokens for at, tokens in reached.items() if at > state.step}
        tokens_after = total_real * epoch + n_real_host[host_order].cumsum(0)  # host: no sync per step
        batches = ids[order], mask[order], targets[order]
        for start in range(state.start, len(order), cfg.batch_size):
            end = min(start + cfg.batch_size, len(order))
            factor = cfg.schedule.factor(state.step, total_steps, result.warmup_steps, result.cooldown_from)
            loop.step(state.step, batches, slice(start, end), cfg.lr * factor)
            state.step, state.start = state.step + 1, end
            if hooks.pace is not None:
                hooks.pace.done = state.step
            # a loss record (and the divergence check) every log_every steps, at every pause and at the epoch's end
            if state.step % cfg.log_every == 0 or state.step in pause_steps or end == len(order):
                _log_window(loop, state, result, n_real, order[:end])
            if state.step in pause_steps:
                at = {"step": state.step, "epoch": epoch + 1, "real_tokens": pause_steps[state.step]}
                if stopped := bool(loop.paused(lambda: loop.evaluated(hooks.pause, at))):
                    break
            tokens = int(tokens_after[end - 1])
            if hooks.checkpoints is not None and hooks.checkpoints.due(state.step, tokens):
                loop.paused(lambda: hooks.checkpoints.save(loop.capture(state), tokens))
        if stopped:
            break
    hooks.sync()
    result.state = loop.capture(state)
    result.train_s, result.n_steps, result.stopped = state.train_s, state.step, stopped
    result.grad_scaler_skips = int(state.skips)
    result.real_tokens = result.steps[-1]["tokens"] if stopped else total_real * cfg.epochs
    # positions computed: the epochs done, and the chunks of the epoch it stopped in
    result.padded_tokens = (state.epoch * len(ids) + state.start if stopped else len(ids) * cfg.epochs) * ids.shape[1]
    result.final_train_loss = result.steps[-1]["loss"] if result.steps else None
    return result


def _planned_steps(
    model: torch.nn.Module, ids: torch.Tensor, n_real: torch.Tensor, cfg: TrainSettings
) -> tuple[int, int, int | None]:
    """The run's optimizer steps, its schedule's warmup steps and the step its cooldown begins at (a branched wsd
    trial's: the first whose real tokens reach the cooldown's share, one epoch in the drawn order; None: no such
    cooldown). Checked here, where they are exact (the steps follow the subset's padded chunks): before the first
    step, nothing measured."""
    total_steps = cfg.epochs * math.ceil(len(ids) / cfg.batch_size)
    parameters = sum(p.numel() for p in model.parameters())
    per_step = cfg.batch_size * ids.shape[1]
    if why := cfg.schedule.room_after_warmup(total_steps, parameters, per_step):
        raise TrainingError(
            f"train.schedule: {why}; lower train.schedule.warmup_tokens_per_parameter or warmup_fraction"
            f"{' or cooldown_fraction' if cfg.schedule.kind == 'wsd' else ''}, or raise the budget"
        )
    cooldown_from = None
    if (cooldown_tokens := cfg.schedule.cooldown_tokens(int(n_real.sum()))) is not None:
        reached = _pause_steps(n_real, torch.arange(len(ids)), cfg.batch_size, 0, 0, [cooldown_tokens])
        cooldown_from = next(iter(reached), total_steps)
        if cooldown_from >= total_steps:
            raise TrainingError(
                f"train.schedule: its cooldown (the last {cfg.schedule.cooldown_fraction:g} of its real tokens) begins "
                "after its last step; raise train.schedule.cooldown_fraction or the budget"
            )
    return total_steps, cfg.schedule.warmup_steps(total_steps, parameters, per_step), cooldown_from


class _Loop:
    """What the steps work with besides the position they save: the model as they call it, the optimizer, the
    gradient scaler, the device buffers of the steps' losses and the scaler's skipped steps, the data order's
    generator, and the training clock (its pauses left out)."""

    def __init__(
        self,
        model: torch.nn.Module,
        device: torch.device,
        cfg: TrainSettings,
        hooks: TrainHooks,
        ranks: Ranks,
        total_steps: int,
    ) -> None:
        self.model, self.device, self.cfg, self.hooks, self.ranks = model, device, cfg, hooks, ranks
        self.forward = model if hooks.forward is None else hooks.forward
        self.optimizer = make_optimizer(model, cfg)
        self.scaler = torch.amp.GradScaler(device.type, enabled=cfg.precision == "fp16-mixed")
        self.skips = torch.zeros((), device=device)  # summed on the device, read once at the end: no sync per step
        self.losses = torch.empty(total_steps, device=device)
        self.order_gen = torch.Generator().manual_seed(cfg.seed)
        self.t0, self.before, self.pauses = 0.0, 0.0, 0.0

    def start(self, resume: TrainState | None) -> TrainState:
        """The state training goes on from, ``resume``'s loaded into the model, optimizer, scaler and generators (a
        fresh one: the first step's), and the training clock started."""
        state = TrainState() if resume is None else resume
        if resume is not None:
            self.model.load_state_dict(state.model)
            self.optimizer.load_state_dict(state.optimizer)
            if self.scaler.is_enabled():
                self.scaler.load_state_dict(state.scaler)
            self.skips.fill_(state.skips)
            torch.set_rng_state(state.rng)
            self.order_gen.set_state(state.order_state)
            self.losses[state.logged : state.step] = state.pending_losses.to(self.device)
            # the loaded weights were copied into the model (a fused optimizer's moments into its own tensors): let go
            # of them, or a second copy stays resident until the first capture, which fills these again
            state.model, state.optimizer, state.scaler = {}, {}, {}
            self.hooks.sync()
            self.hooks.loaded()
        self.hooks.sync()
        self.t0, self.before = time.perf_counter(), state.train_s
        if (pace := self.hooks.pace) is not None:
            pace.started, pace.done, pace.first = time.monotonic(), state.step, state.step
        return state

    def clock(self) -> float:
        """Training seconds so far: this process's, pauses left out, and those of the state it resumed."""
        return time.perf_counter() - self.t0 - self.pauses + self.before

    def paused(self, work: Callable[[], T]) -> T:
        """``work`` done with training paused (an evaluation, a checkpoint): the device's queue waited for first, the
        pause left out of every training time."""
        self.hooks.sync()
        at = time.perf_counter()
        done = work()
        self.pauses += time.perf_counter() - at
        if self.hooks.pace is not None:
            self.hooks.pace.paused = self.pauses
        return done

    def evaluated(self, pause: Callable[[dict[str, Any]], bool | None], at: dict[str, Any]) -> bool | None:
        """``pause`` at ``at`` and the training seconds so far, on the weights an evaluation reads (the optimizer's
        ``evaluating``: schedule-free's average), which training goes on from unchanged after it."""
        train_s = self.clock()
        with self.optimizer.evaluating():
            return pause({**at, "train_s": train_s})

    def capture(self, state: TrainState) -> TrainState:
        """``state`` (the position between two steps) completed with what the steps hold: the losses not yet in a
        record, the training seconds, the scaler's skips, the weights, the optimizer's and scaler's states, the RNG."""
        state.pending_losses = self.losses[state.logged : state.step].cpu()
        state.train_s, state.skips = self.clock(), float(self.skips.item())
        state.model, state.optimizer = self.model.state_dict(), self.optimizer.state_dict()
        state.scaler, state.rng = self.scaler.state_dict(), torch.get_rng_state()
        return state

    def step(self, step: int, batches: tuple[torch.Tensor, ...], rows: slice, lr: float) -> None:
        """One optimizer step on the epoch's ``rows`` (this rank's share of them) at learning rate ``lr``."""
        cfg, ranks, (ids, mask, targets) = self.cfg, self.ranks, batches
        mine = ranks.rows(rows.start, rows.stop)  # the whole batch on one device
        idle = mine.start == mine.stop  # a short last batch with fewer chunks than ranks
        if idle:  # one of the batch's rows, weighted 0 below: this rank's backward still reaches every weight
            mine = slice(rows.start, rows.start + 1)
        with autocast(self.device, cfg.precision):
            if cfg.z_loss:
                loss_sum, n_targets, z_sum = z_loss_sum(self.forward, ids[mine], mask[mine], targets[mine])
            else:  # the plain loss, exactly as without the key: no operation more, the same bits
                loss_sum, n_targets = token_loss_sum(self.forward, ids[mine], mask[mine], targets[mine])
        if ranks.many:  # this rank's share of the global batch's mean: over the whole batch's targets
            n_targets = (targets[rows] != IGNORE).sum()
            if idle:
                loss_sum = loss_sum * 0.0
                if cfg.z_loss:
                    z_sum = z_sum * 0.0
        loss = loss_sum / n_targets.clamp(min=1)
        self.optimizer.zero_grad()
        objective = loss + cfg.z_loss * z_sum / n_targets.clamp(min=1) if cfg.z_loss else loss
        if ranks.many:  # data-parallel averages the ranks' gradients; the shares' sum is the batch's
            objective = objective * ranks.world
        self.scaler.scale(objective).backward()
        self.optimizer.lr = lr
        self.scaler.step(self.optimizer)
        if self.scaler.is_enabled():  # the step's inf/NaN flags, which update() clears
            self.skips += sum(self.scaler._found_inf_per_device(self.optimizer).values())
        self.scaler.update()
        self.losses[step] = loss.detach()


def _pause_steps(
    n_real: torch.Tensor, order: torch.Tensor, batch_size: int, epoch: int, steps_before: int, pending: list[int]
) -> dict[int, int]:
    """Step (counted over the whole run) -> real tokens trained on after it, for the first step of this epoch
    at which each pending threshold is reached; computed on the host from the epoch's order."""
    values = n_real[order]
    padded = torch.nn.functional.pad(values, (0, -len(values) % batch_size))
    per_batch = padded.reshape(-1, batch_size).sum(dim=1)
    before = int(n_real.sum()) * epoch
    reached = (before + per_batch.cumsum(0)).tolist()
    out: dict[int, int] = {}
    for threshold in pending:
        if before < threshold <= reached[-1]:
            i = next(i for i, r in enumerate(reached) if r >= threshold)
            out[steps_before + i + 1] = int(reached[i])
    return out


def _log_window(loop: _Loop, state: TrainState, result: TrainResult, n_real: torch.Tensor, done: torch.Tensor) -> None:
    """A loss record: one host sync, the record of the steps since the last one (on several devices the ranks' shares
    added: one collective per record, none per step, so every rank records, and judges divergence on, the same global
    losses), the divergence check. ``done``: the chunks of this epoch trained so far."""
    window = loop.losses[state.logged : state.step]
    values = (loop.ranks.sum(window.clone()) if loop.ranks.many else window).tolist()
    limit = loop.hooks.diverged_above
    bad = next(((i, v) for i, v in enumerate(values) if not (math.isfinite(v) and v <= limit)), None)
    if bad is not None:
        result.n_steps, result.train_s = state.logged + bad[0] + 1, loop.clock()
        result.real_tokens = result.steps[-1]["tokens"] if result.steps else 0
        raise Diverged(result.n_steps, state.epoch + 1, bad[1], limit, result)
    loop.hooks.sync()
    tokens = int(n_real.sum().item()) * state.epoch + int(n_real[done].sum().item())
    elapsed = loop.clock()
    record = {
        "step": state.step,
        "epoch": state.epoch + 1,
        "tokens": tokens,
        "loss": sum(values) / len(values),
        "elapsed_s": elapsed,
        "tokens_per_s": tokens / elapsed if elapsed > 0 else None,
    }
    state.steps.append(record)
    loop.hooks.log(record)
    state.logged = state.step
