"""The study's eval grid: the real-token counts at which every trial of a series is evaluated, shared by its budgets.

A target's crossing is interpolated between two eval points, linearly in log tokens. If each budget spaced its
points over its own tokens, two budgets would interpolate the same curve over different segments, and on a convex
curve the larger budget's longer segments put its crossing later: a difference in energy to target that the grid
made, not the budget. So the points are absolute token counts, one geometric sequence for every budget of the
series: ``eval.points`` log-spaced from the smallest budget's ``first_fraction`` to its end, continued at the same
ratio up to the largest budget. Each trial takes the points below its own end, then its final evaluation; so every
budget shares the smallest one's segments up to its end, and the larger ones theirs up to their last common point.

The sequence depends on the smallest budget alone: adding a budget, larger or in between, moves no point of the
others, so their trials (and a branched study's cooldowns) are not trained again.
"""

from __future__ import annotations

from collections.abc import Sequence


def shared_grid(ends: Sequence[int], points: int, first_fraction: float) -> list[int]:
    """The intermediate evaluation points (real tokens seen, ascending) shared by trials that end at ``ends``: the
    geometric sequence from ``first_fraction`` of the smallest end that reaches that end at its ``points``-th term,
    continued below the largest end (which is that trial's final evaluation, not a point). One end: ``points``
    log-spaced over its own tokens, as a single trial has them. ``points`` ≤ 1: none (the final evaluation only)."""
    ends = sorted({int(e) for e in ends if e > 0})
    if points <= 1 or not ends or ends[-1] <= 1:
        return []
    smallest, largest = ends[0], ends[-1]
    first = max(1.0, smallest * first_fraction)
    if first >= smallest:  # first_fraction 1: the smallest budget's end is the only point it shares
        return [smallest] if smallest < largest else []
    ratio = (smallest / first) ** (1 / (points - 1))
    grid, j = [], 0
    while (t := first * ratio**j) < largest * (1 - 1e-12):
        grid.append(round(t))
        j += 1
    return sorted(set(grid) - {largest})
