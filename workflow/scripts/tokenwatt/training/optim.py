"""The trial's optimizer (``make_optimizer``), and AdamW as ``torch.optim.AdamW(fused=True)`` computes it, without
``torch.optim`` around the kernel.

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

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Protocol

import torch

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
    """The optimizer of a trial's model, at ``cfg``'s settings (made on the model's device: move the model first).
    Every trial trains with the fused AdamW here; another optimizer is one more class with ``Optimizer``'s members,
    chosen here, and the loop, its checkpoints and its record take it unchanged."""
    return FusedAdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay, betas=cfg.betas)
