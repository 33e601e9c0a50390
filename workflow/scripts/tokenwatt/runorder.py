"""Trial run order, expressed as Snakemake rule priorities (higher runs first).

Running all trials of one budget before the next lets heat, clocks and time of day
masquerade as a budget effect; a seeded random order over (budget, trial) spreads them.
"""

from __future__ import annotations

import numpy as np


def run_order(budgets: list[int], trials: list[int], seed: int, mode: str) -> list[tuple[int, int]]:
    pairs = [(b, t) for b in sorted(budgets) for t in trials]
    if mode == "sequential":
        return pairs
    perm = np.random.default_rng([seed, 0x5EED]).permutation(len(pairs))
    return [pairs[i] for i in perm]


def trial_priorities(budgets: list[int], trials: list[int], seed: int, mode: str) -> dict[tuple[int, int], int]:
    """Snakemake priority of every (budget, trial): the first to run gets the highest."""
    order = run_order(budgets, trials, seed, mode)
    return {pair: len(order) - i for i, pair in enumerate(order)}
