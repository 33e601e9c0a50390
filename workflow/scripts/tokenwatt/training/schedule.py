"""The learning rate over a trial's steps: constant (the reference study's), or warmup then cosine decay.

At small scale the optimiser's settings decide which model wins: Porian et al. (2024) traced the
Kaplan–Chinchilla disagreement to a learning rate not tuned per size, no warmup and a decay whose length did
not match the token count, and Hoffmann et al. (2022) matched each run's cosine cycle to its own tokens. So
the cosine here always ends at the trial's own last step: each budget is a complete schedule, not the head of
a longer one. The factor is a pure function of the step, so a trial's learning rates are the same on every
rerun (and exactly 1.0 throughout for ``constant``, whose trials are bit for bit those without a schedule).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Schedule:
    """``kind`` constant or cosine; for cosine, a linear warmup over ``warmup_fraction`` of the steps, then a
    half cosine from the peak to ``final_fraction`` of it at the last step."""

    kind: str = "constant"
    warmup_fraction: float = 0.0
    final_fraction: float = 0.1

    def factor(self, step: int, total: int) -> float:
        """The multiplier of the peak learning rate for step ``step`` (0-based) of ``total``."""
        if self.kind == "constant":
            return 1.0
        warmup = round(self.warmup_fraction * total)
        if step < warmup:
            return (step + 1) / warmup
        progress = (step - warmup) / max(1, total - warmup - 1)
        return self.final_fraction + (1 - self.final_fraction) * 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def schedule_from_config(cfg: dict[str, Any] | None) -> Schedule:
    """``train.schedule`` as a Schedule (the schema has checked its keys and ranges)."""
    return Schedule(**(cfg or {}))
