"""The study's eval grid: the real-token counts at which every trial of a series is evaluated, shared by its budgets.

A target's crossing is interpolated between two eval points, linearly in log tokens. If each budget spaced its
points over its own tokens, two budgets would interpolate the same curve over different segments, and on a convex
curve the larger budget's longer segments put its crossing later: a difference in energy to target that the grid
made, not the budget. So the points are absolute token counts, the same for every budget of the series: log-spaced
from the smallest budget's ``first_fraction`` to the largest budget's end, with every smaller budget's end among
them (where that budget makes its final evaluation, the larger ones evaluate too), so any two budgets interpolate
over the same segments up to the smaller one's end. Each trial takes the grid's points below its own end.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def shared_grid(ends: Sequence[int], points: int, first_fraction: float) -> list[int]:
    """The intermediate evaluation points (real tokens seen, ascending) shared by trials that end at ``ends``:
    ``points`` − 1 log-spaced from ``first_fraction`` of the smallest end to the largest end (exclusive), each
    smaller end taking the place of the log-spaced point nearest it (never the first), so the longest trial keeps
    ``points`` evaluations with its final one (more where the study has more budgets than points to replace: every
    end stays a point). One end: ``points`` log-spaced over its own tokens, as a single trial
    has them. ``points`` ≤ 1: none (the final evaluation only)."""
    ends = sorted({int(e) for e in ends if e > 0})
    if points <= 1 or not ends or ends[-1] <= 1:
        return []
    first = max(1.0, ends[0] * first_fraction)
    ratio = (ends[-1] / first) ** (1 / (points - 1))
    spaced = [first * ratio**i for i in range(points - 1)]
    for end in ends[:-1]:
        if any(round(p) == end for p in spaced):
            continue  # already a point (first_fraction 1 puts the first there)
        # the first point stays: it is where the study's curves begin
        if movable := spaced[1:]:
            spaced.remove(min(movable, key=lambda p: abs(math.log(p / end))))
    return sorted(({round(p) for p in spaced} | set(ends[:-1])) - {ends[-1]})
