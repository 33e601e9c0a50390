"""Trial run order, expressed as Snakemake rule priorities (higher runs first).

Running all trials of one condition before the next lets heat, clocks and time of day
masquerade as an effect of the budget (or model, precision, ...); a seeded random order over
every (cell, trial) of the design spreads them.
"""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np


def run_order(keys: list[Hashable], seed: int, mode: str) -> list[Hashable]:
    """``keys`` in the design's order (cell by cell, trial by trial): as they are when sequential."""
    if mode == "sequential":
        return list(keys)
    perm = np.random.default_rng([seed, 0x5EED]).permutation(len(keys))
    return [keys[i] for i in perm]


def trial_priorities(keys: list[Hashable], seed: int, mode: str) -> dict[Hashable, int]:
    """Snakemake priority of every (cell, trial): the first to run gets the highest."""
    order = run_order(keys, seed, mode)
    return {key: len(order) - i for i, key in enumerate(order)}
