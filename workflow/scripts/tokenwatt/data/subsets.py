"""Nested token-budget subsets: each trial draws one seeded order of the training chunks,
and every budget takes the shortest prefix of that order whose real tokens reach it."""

from __future__ import annotations

from typing import Any

import numpy as np


class SubsetError(ValueError):
    pass


def trial_seed(study_seed: int, trial: int) -> int:
    """Independent, reproducible seed per trial (SeedSequence avoids seed+1 correlations)."""
    return int(np.random.SeedSequence([study_seed, trial]).generate_state(1)[0])


def draw_subset(
    chunk_ids: np.ndarray, n_real: np.ndarray, budget: int, seed: int, source: str = "the corpus"
) -> dict[str, Any]:
    """Chunk ids for ``budget`` real tokens, in the trial's drawn order.

    Because the order depends only on ``seed``, a smaller budget's subset is a prefix of
    a larger one's (nesting). The last chunk may overshoot the budget by less than one
    chunk; ``real_tokens`` records the exact count. ``source`` names the chunks' documents in the refusal of a
    budget they cannot fill.
    """
    chunk_ids = np.asarray(chunk_ids)
    n_real = np.asarray(n_real)
    available = int(n_real.sum())
    if budget > available:
        raise SubsetError(
            f"budget {budget} needs {budget} tokens, {source} has {available}; lower the budget or add data"
        )
    order = np.random.default_rng(seed).permutation(len(chunk_ids))
    reached = int(np.searchsorted(np.cumsum(n_real[order]), budget)) + 1
    picked = order[:reached]
    return {
        "budget": budget,
        "seed": seed,
        "n_chunks": int(reached),
        "real_tokens": int(n_real[picked].sum()),
        "available_tokens": available,
        "chunk_ids": chunk_ids[picked].tolist(),
    }
