"""The evaluation schedule of a trial: where on its way through the tokens it is evaluated, and on what.

The points are spaced evenly in log real tokens (a learning curve changes fastest early), the last at the
end of training; in a study they are the study's shared grid (``plan.evalgrid``: the same absolute token counts
for every budget, so no budget's energy to a target differs from another's by where it was evaluated).
Intermediate evaluations may use a fixed leading part of the eval set, the same for every trial, to bound their
cost, and the final one the whole set.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ..plan.evalgrid import shared_grid


@dataclass(frozen=True)
class EvalSchedule:
    """``eval.*``: ``points`` log-spaced from ``first_fraction`` of the trial's real tokens, or the real-token counts
    ``at_tokens``; ``max_tokens`` bounds an intermediate evaluation's share of the eval set (None: all of it).
    ``grid``: the study's shared points below this trial's end (``Design.eval_config``), which replace its own
    log-spacing. The defaults, the schema's, make the final evaluation the only one."""

    points: int = 0
    at_tokens: Sequence[int] = ()
    first_fraction: float = 0.01
    max_tokens: int | None = None
    grid: Sequence[int] | None = None  # None: no study set one (a trial alone); [] is a grid with no point inside


def eval_thresholds(total_tokens: int, schedule: EvalSchedule) -> list[int]:
    """Real-token counts after which training pauses for an intermediate evaluation: ``eval.at_tokens``, else the
    study's shared ``grid``, else (a trial alone) ``eval.points`` log-spaced from ``eval.first_fraction`` of the total
    to the total; only those inside the run, and never the final evaluation, at the end."""
    if schedule.at_tokens:
        given = schedule.at_tokens
    elif schedule.grid is not None:
        given = schedule.grid
    else:
        given = shared_grid([total_tokens], schedule.points, schedule.first_fraction)
    return sorted({int(t) for t in given if 0 < t < total_tokens})


def subset_chunks(mask: torch.Tensor, max_tokens: int | None) -> int:
    """How many leading eval chunks an intermediate evaluation uses: as many as fit in ``max_tokens`` real tokens
    (at least one), or all of them without a limit."""
    if not max_tokens:
        return len(mask)
    fits = (mask.sum(dim=1).cumsum(0) <= max_tokens).sum().item()
    return max(1, int(fits))
