"""The evaluation schedule of a trial: where on its way through the tokens it is evaluated, and on what.

The points are spaced evenly in log real tokens (a learning curve changes fastest early), the last at the
end of training; intermediate evaluations may use a fixed leading part of the eval set, the same for every
trial, to bound their cost, and the final one the whole set.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class EvalSchedule:
    """``eval.*``: ``points`` log-spaced from ``first_fraction`` of the trial's real tokens, or the real-token counts
    ``at_tokens``; ``max_tokens`` bounds an intermediate evaluation's share of the eval set (None: all of it). The
    defaults, the schema's, make the final evaluation the only one."""

    points: int = 0
    at_tokens: Sequence[int] = ()
    first_fraction: float = 0.01
    max_tokens: int | None = None


def eval_thresholds(total_tokens: int, schedule: EvalSchedule) -> list[int]:
    """Real-token counts after which training pauses for an intermediate evaluation (``eval.at_tokens``, or
    ``eval.points`` log-spaced from ``eval.first_fraction`` of the total to the total); the final evaluation, at
    the end, is not among them."""
    if schedule.at_tokens:
        return sorted({int(t) for t in schedule.at_tokens if 0 < t < total_tokens})
    points = schedule.points
    if points <= 1 or total_tokens <= 1:
        return []
    first = max(1.0, total_tokens * schedule.first_fraction)
    ratio = (total_tokens / first) ** (1 / (points - 1))
    return sorted({int(round(first * ratio**i)) for i in range(points - 1)} - {total_tokens})


def subset_chunks(mask: torch.Tensor, max_tokens: int | None) -> int:
    """How many leading eval chunks an intermediate evaluation uses: as many as fit in ``max_tokens`` real tokens
    (at least one), or all of them without a limit."""
    if not max_tokens:
        return len(mask)
    fits = (mask.sum(dim=1).cumsum(0) <= max_tokens).sum().item()
    return max(1, int(fits))
