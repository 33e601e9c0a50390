"""The trial's optimizer (``make_optimizer``, the kinds of ``plan.optimizers``): AdamW as
``torch.optim.AdamW(fused=True)`` computes it, without ``torch.optim`` around the kernel (the default), and the other
kinds from their libraries behind the same members (``LibraryOptimizer``).

Why it exists: every ``torch.optim`` optimizer imports ``torch._dynamo`` on its first call (its
methods are wrapped to be skipped by the compiler), which costs a trial process 1.3-1.8 s on a
2-core machine, longer than a default trial's whole training window; and each step then pays
for that wrapper, a grad-mode switch and two graph-break calls, around one fused kernel. Here the
step is that kernel: ``torch._fused_adamw_`` with the arguments ``torch.optim.AdamW(fused=True)``
passes it, on the same state (float32 step counters on the parameter's device), so the two are
the same optimizer bit for bit (``tests/test_optim.py`` holds them to it, with and without a
gradient scaler). Only what tokenwatt trains with is here: one parameter group, no amsgrad.
"""

from __future__ import annotations

import contextlib
import importlib
import time
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, Protocol

import torch

from ..plan.optimizers import KINDS

if TYPE_CHECKING:
    from .train import TrainSettings


class Optimizer(Protocol):
    """What the training loop asks of an optimizer, and ``torch.amp.GradScaler`` of it: its name (the trial's record
    gives it), the learning rate the loop sets before each step, the parameter groups the scaler unscales, a step,
    and a state a checkpoint saves and loads."""

    name: str
    lr: float
    param_groups: list[dict[str, Any]]

    def zero_grad(self) -> None: ...

    def step(self) -> None: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...

    def evaluating(self) -> contextlib.AbstractContextManager[None]: ...


class FusedAdamW:
    """One group of parameters; ``step``, ``zero_grad`` and what ``torch.amp.GradScaler`` needs.

    The scaler sees ``_step_supports_amp_scaling`` and hands the scale and the inf flag to the
    step (as attributes, its protocol for fused optimizers), so fp16 training needs no extra
    unscale pass and no host sync to decide whether to step."""

    name = "adamw-fused"
    _step_supports_amp_scaling = True

    def __init__(
        self,
        params: Iterable[torch.nn.Parameter],
        lr: float,
        weight_decay: float,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
    ) -> None:
        self.params = [p for p in params if p.requires_grad]
        kinds = sorted({f"{p.dtype} on {p.device}" for p in self.params})
        if len(kinds) > 1:
            raise ValueError(
                f"the model's trainable parameters are {', '.join(kinds)}; the fused AdamW step needs one "
                "dtype on one device (load the model in one dtype, on train.device)"
            )
        self.param_groups = [{"params": self.params}]  # all that GradScaler reads (to unscale and check for infs)
        self.lr, self.weight_decay, self.betas, self.eps = lr, weight_decay, betas, eps
        self.exp_avgs = [torch.zeros_like(p, memory_format=torch.preserve_format) for p in self.params]
        self.exp_avg_sqs = [torch.zeros_like(p, memory_format=torch.preserve_format) for p in self.params]
        self.state_steps = [torch.zeros((), dtype=torch.float32, device=p.device) for p in self.params]

    def state_dict(self) -> dict[str, list[torch.Tensor]]:
        """The moments and step counters, per parameter in order (a checkpoint's; the hyperparameters are the
        trial's settings)."""
        return {"exp_avgs": self.exp_avgs, "exp_avg_sqs": self.exp_avg_sqs, "state_steps": self.state_steps}

    def load_state_dict(self, state: dict[str, list[torch.Tensor]]) -> None:
        """Continue from ``state_dict``'s moments and counters, copied into this optimizer's own tensors."""
        for name in ("exp_avgs", "exp_avg_sqs", "state_steps"):
            mine, saved = getattr(self, name), state[name]
            if len(saved) != len(mine):
                raise ValueError(f"a checkpoint's optimizer holds {len(saved)} {name}, this model {len(mine)}")
            with torch.no_grad():
                for to, value in zip(mine, saved):
                    to.copy_(value)

    def zero_grad(self) -> None:
        """Gradients to None (torch's default), so the next backward writes them instead of adding."""
        for p in self.params:
            p.grad = None

    def evaluating(self) -> contextlib.AbstractContextManager[None]:
        """An evaluation reads the weights as they are."""
        return contextlib.nullcontext()

    @torch.no_grad()
    def step(self) -> None:
        """Update every parameter that has a gradient (as torch does, the others keep their state)."""
        have = [i for i, p in enumerate(self.params) if p.grad is not None]
        if not have:
            return
        steps = [self.state_steps[i] for i in have]
        torch._foreach_add_(steps, 1)
        beta1, beta2 = self.betas
        # GradScaler.step sets these two attributes for the step's duration and deletes them after.
        grad_scale, found_inf = getattr(self, "grad_scale", None), getattr(self, "found_inf", None)
        torch._fused_adamw_(
            [self.params[i] for i in have],
            [self.params[i].grad for i in have],
            [self.exp_avgs[i] for i in have],
            [self.exp_avg_sqs[i] for i in have],
            [],
            steps,
            amsgrad=False,
            lr=self.lr,
            beta1=beta1,
            beta2=beta2,
            weight_decay=self.weight_decay,
            eps=self.eps,
            maximize=False,
            grad_scale=grad_scale,
            found_inf=found_inf,
        )
        if found_inf is not None:  # a skipped step does not count
            torch._foreach_sub_(steps, [found_inf] * len(steps))


def make_optimizer(model: torch.nn.Module, cfg: TrainSettings) -> Optimizer:
    """The optimizer of a trial's model, at ``cfg``'s settings (made on the model's device: move the model first):
    ``cfg.optimizer``'s kind, built here; the loop, its checkpoints and its record take any of them unchanged."""
    spec = dict(cfg.optimizer)
    if spec["kind"] == "adamw":
        return FusedAdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay, betas=cfg.betas)
    params = [p for p in model.parameters() if p.requires_grad]
    return LibraryOptimizer(library_optimizer(spec, params, cfg))


def library_optimizer(spec: dict[str, Any], params: list[torch.nn.Parameter], cfg: TrainSettings) -> Any:
    """A kind's optimizer from its library (``plan.optimizers.KINDS``) over ``params``; a library that cannot be
    imported here fails the trial with its own reason, naming the key."""
    kind = spec["kind"]
    try:
        if kind in ("adamw-8bit", "adamw-4bit"):
            from torchao.optim import AdamW4bit, AdamW8bit

            made = AdamW8bit if kind == "adamw-8bit" else AdamW4bit
            return made(
                params, lr=cfg.lr, betas=cfg.betas, weight_decay=cfg.weight_decay, block_size=spec["block_size"]
            )
        from schedulefree import AdamWScheduleFree

        return AdamWScheduleFree(
            params,
            lr=cfg.lr,
            betas=cfg.betas,
            weight_decay=cfg.weight_decay,
            weight_lr_power=spec["weight_lr_power"],
            r=spec["r"],
        )
    except ImportError as err:
        raise ImportError(f"train.optimizer {kind}: {err} (requirements.txt pins its library)") from err


class LibraryOptimizer:
    """A library's ``torch.optim.Optimizer`` with ``Optimizer``'s members: the rate the loop sets written into its
    group (torchao keeps it as a tensor, which its compiled step reads without recompiling), a state a checkpoint
    holds in plain tensors (``torch.load(weights_only=True)`` reads no tensor subclass: torchao's quantized moments
    are saved as their parts and rebuilt), and for schedule-free the averaged weights an evaluation reads."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = f"{type(inner).__module__.split('.')[0]}.{type(inner).__name__}"
        if hasattr(inner, "train"):
            inner.train()  # schedule-free steps only in train mode (the weights y it takes gradients at)

    @property
    def param_groups(self) -> list[dict[str, Any]]:
        """The library's groups, asked each time: what GradScaler unscales (a loaded state replaces the list)."""
        return self.inner.param_groups

    @property
    def lr(self) -> float:
        return float(self.param_groups[0]["lr"])

    @lr.setter
    def lr(self, value: float) -> None:
        for group in self.param_groups:
            if isinstance(group["lr"], torch.Tensor):
                group["lr"].fill_(value)
            else:
                group["lr"] = value

    def zero_grad(self) -> None:
        self.inner.zero_grad(set_to_none=True)

    def step(self) -> None:
        self.inner.step()

    def state_dict(self) -> dict[str, Any]:
        state = self.inner.state_dict()
        return {**state, "state": {i: {k: _plain(v) for k, v in s.items()} for i, s in state["state"].items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        rebuilt = {i: {k: _rebuilt(v) for k, v in s.items()} for i, s in state["state"].items()}
        self.inner.load_state_dict({**state, "state": rebuilt})

    @contextlib.contextmanager
    def evaluating(self) -> Iterator[None]:
        """Schedule-free: the weights an evaluation reads are its average x, not the point y it steps from; its own
        ``eval()`` and ``train()`` move between them by two interpolations that do not invert each other in the last
        bit, so y is kept aside and put back exactly: an evaluation never changes the training that follows it."""
        if not hasattr(self.inner, "eval"):
            yield
            return
        kept = [p.detach().clone() for group in self.param_groups for p in group["params"]]
        self.inner.eval()
        try:
            yield
        finally:
            with torch.no_grad():
                for p, y in zip((p for group in self.param_groups for p in group["params"]), kept):
                    p.copy_(y)
            for group in self.param_groups:
                group["train_mode"] = True


# A quantized moment saved as its parts: the class (one of these), its inner tensors and its flatten metadata.
SUBCLASS_KEY = "tensor_subclass"


def _subclasses() -> dict[str, type]:
    from torchao.optim.subclass_4bit import OptimState4bit
    from torchao.optim.subclass_8bit import OptimState8bit

    return {c.__name__: c for c in (OptimState4bit, OptimState8bit)}


def _plain(value: Any) -> Any:
    """A state value a weights-only load reads: a tensor subclass (``__tensor_flatten__``) as its parts."""
    if not isinstance(value, torch.Tensor) or type(value) is torch.Tensor or not hasattr(value, "__tensor_flatten__"):
        return value
    names, meta = value.__tensor_flatten__()
    return {
        SUBCLASS_KEY: type(value).__name__,
        "inner": {n: getattr(value, n) for n in names},
        "meta": list(meta),
        "size": list(value.shape),
        "stride": list(value.stride()),
    }


def _rebuilt(value: Any) -> Any:
    if not (isinstance(value, dict) and SUBCLASS_KEY in value):
        return value
    cls = _subclasses()[value[SUBCLASS_KEY]]
    return cls.__tensor_unflatten__(value["inner"], value["meta"], tuple(value["size"]), tuple(value["stride"]))


def warm_up(model: torch.nn.Module, cfg: TrainSettings) -> float:
    """Compile a kind's step before the metered window where its library compiles it (torchao: one graph per
    parameter shape, 10-20 s on a CPU at the first step): one step of a throwaway optimizer over copies of the
    parameters with zero gradients, at the trial's settings, fills the compile cache the trial's own steps then hit.
    Returns its seconds (0: nothing to compile). The weights, the RNG and the trial's optimizer are untouched. A library's
    kind that compiles nothing still has torch.optim's import of torch._dynamo done here, outside the metered window."""
    spec = dict(cfg.optimizer)
    if spec["kind"] != "adamw":
        # a torch.optim optimizer imports torch._dynamo when it is built (about 75 MB resident and 1-2 s on a CPU):
        # imported here, before the meter and the peak memory window open, it is counted as neither training's
        importlib.import_module("torch._dynamo")
    if not KINDS[spec["kind"]].compiles_step:
        return 0.0
    t0 = time.perf_counter()
    copies = [p.detach().clone().requires_grad_(True) for p in model.parameters() if p.requires_grad]
    for c in copies:
        c.grad = torch.zeros_like(c)
    library_optimizer(spec, copies, cfg).step()
    return time.perf_counter() - t0


def state_bytes(state: Any) -> int:
    """The bytes of every tensor in an optimizer's ``state_dict`` (nested dicts and lists): what its state holds."""
    if isinstance(state, torch.Tensor):
        return state.numel() * state.element_size()
    if isinstance(state, dict):
        return sum(state_bytes(v) for v in state.values())
    if isinstance(state, (list, tuple)):
        return sum(state_bytes(v) for v in state)
    return 0
