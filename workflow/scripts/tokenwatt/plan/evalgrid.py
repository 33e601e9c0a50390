"""The study's eval grid: the real-token counts at which every trial of a series is evaluated, shared by its budgets.

A target's crossing is interpolated between two eval points, linearly in log tokens. If each budget spaced its
points over its own tokens, two budgets would interpolate the same curve over different segments, and on a convex
curve the larger budget's longer segments put its crossing later: a difference in energy to target that the grid
made, not the budget. So the points are absolute token counts, one set for every budget of the series: ``eval.points``
log-spaced from the smallest budget's ``first_fraction`` to its end, continued at the same ratio up to the largest
budget, and every smaller budget's end. Each trial takes the points below its own end, then its final evaluation; so
any two budgets are evaluated at the same points up to the smaller one's end, and interpolate over the same segments
there (a budget's default target is crossed near its end: without that end among the larger budgets' points, their
crossings would be read off a longer segment).

Adding a budget above the largest moves no point of the others; adding one in between adds its end to the larger
budgets' points, so their trials train again (their curves gain the point the comparison needs); a new smallest budget
moves the sequence.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

MAX_POINTS = 1_000  # evaluations of one trial, each metered: more is a setting's mistake, said before any job


def shared_grid(ends: Sequence[int], points: int, first_fraction: float) -> list[int]:
    """The intermediate evaluation points (real tokens seen, ascending) shared by trials that end at ``ends``: the
    geometric sequence from ``first_fraction`` of the smallest end that reaches that end at its ``points``-th term,
    continued below the largest end, and every end but the largest (which is that trial's final evaluation, not a
    point). One end: ``points`` log-spaced over its own tokens, as a single trial has them. ``points`` ≤ 1: none (the
    final evaluation only). A sequence too fine to reach the largest end in ``MAX_POINTS`` terms is refused."""
    ends = sorted({int(e) for e in ends if e > 0})
    if points <= 1 or not ends or ends[-1] <= 1:
        return []
    smallest, largest = ends[0], ends[-1]
    first = max(1.0, smallest * first_fraction)
    inner = set(ends[:-1])
    if first >= smallest:  # first_fraction 1: the budgets' ends are the only points
        return sorted(inner)
    ratio = (smallest / first) ** (1 / (points - 1))
    count = math.ceil(math.log(largest / first) / math.log(ratio)) if ratio > 1 else math.inf
    if count > MAX_POINTS:
        raise ValueError(
            f"eval.points {points} from eval.first_fraction {first_fraction:g} of the smallest budget space the "
            f"evaluations by a factor of {ratio:.6g}: {count} of them to reach the largest budget ({largest:,} "
            f"tokens), over the {MAX_POINTS:,} a trial may make; lower eval.first_fraction or eval.points"
        )
    spaced = {round(first * ratio**j) for j in range(int(count) + 1)}
    return sorted({t for t in spaced if t < largest} | inner)
