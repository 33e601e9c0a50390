"""Nested token-budget subsets: each trial draws one seeded order of the training chunks,
and every budget takes the shortest prefix of that order whose real tokens reach it.

The order is one of every chunk the corpus could give, not of a level's own: a chunk is named by its document and
its place in it (chunking cuts each document alone, so a document a selection level keeps gives the same chunks in
every level), and its rank is a keyed hash of that name and the trial's seed. Every selection level of trial i thus
takes its subset from one permutation of the raw level's chunks, keeping the ones it kept (common random numbers):
two levels' subsets share every chunk of their common documents that both orders reach, and differ by the documents a
level removed."""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl


class SubsetError(ValueError):
    pass


def trial_seed(study_seed: int, trial: int) -> int:
    """Independent, reproducible seed per trial (SeedSequence avoids seed+1 correlations)."""
    return int(np.random.SeedSequence([study_seed, trial]).generate_state(1)[0])


_MASK = np.uint64(0xFFFFFFFFFFFFFFFF)


def _mix(x: np.ndarray) -> np.ndarray:
    """A 64-bit finaliser (xor-shift-multiply rounds): nearby inputs give unrelated outputs."""
    x = x ^ (x >> np.uint64(33))
    x = (x * np.uint64(0xFF51AFD7ED558CCD)) & _MASK
    x = x ^ (x >> np.uint64(33))
    x = (x * np.uint64(0xC4CEB9FE1A85EC53)) & _MASK
    return x ^ (x >> np.uint64(33))


def chunk_order(doc_ids: np.ndarray, parts: np.ndarray, seed: int) -> np.ndarray:
    """Positions of the chunks in the trial's order: ranked by a hash of (seed, document, place in it), so the
    rank of a chunk does not depend on which other chunks are present."""
    doc = np.asarray(doc_ids).astype(np.uint64)
    part = np.asarray(parts).astype(np.uint64)
    with np.errstate(over="ignore"):  # unsigned wrap-around is the hash's arithmetic
        key = _mix(_mix(np.full(doc.size, seed, np.uint64) ^ doc) ^ part)
    return np.lexsort((part, doc, key))


def draw_subset(chunks: pl.DataFrame, budget: int, seed: int, source: str = "the corpus") -> dict[str, Any]:
    """Chunk ids for ``budget`` real tokens, in the trial's drawn order (``chunk_order``); ``chunks``: the level's
    chunk table (``chunk_id``, ``doc_id``, ``n_real``, in chunking's order, so a document's chunks in place order).

    Because the order depends only on ``seed``, a smaller budget's subset is a prefix of
    a larger one's (nesting). The last chunk may overshoot the budget by less than one
    chunk; ``real_tokens`` records the exact count. ``source`` names the chunks' documents in the refusal of a
    budget they cannot fill.
    """
    chunk_ids, n_real, order = _drawn(chunks, seed)
    available = int(n_real.sum())
    if budget > available:
        raise SubsetError(
            f"budget {budget} needs {budget} tokens, {source} has {available}; lower the budget or add data"
        )
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


def stream_head(chunks: pl.DataFrame, tokens: int, seed: int, batch_size: int) -> dict[str, Any]:
    """The head of a trial's drawn order that a stable run trains to its saved point at ``tokens`` real tokens
    (train.schedule.branch_every): the chunks up to the first whole batch that reaches them, so every budget's subset
    (``draw_subset``, a longer head of the same order) starts with exactly these batches."""
    chunk_ids, n_real, order = _drawn(chunks, seed)
    reached = int(np.searchsorted(np.cumsum(n_real[order]), tokens)) + 1
    whole = -(-reached // batch_size) * batch_size
    if whole > len(order):
        raise SubsetError(
            f"the stable run's point at {tokens} real tokens needs {whole} chunks, the corpus has {len(order)}; "
            "lower the budgets or train.schedule.branch_every, or add data"
        )
    picked = order[:whole]
    return {
        "seed": seed,
        "n_chunks": whole,
        "real_tokens": int(n_real[picked].sum()),
        "chunk_ids": chunk_ids[picked].tolist(),
    }


def _drawn(chunks: pl.DataFrame, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The level's chunk ids, their real tokens, and the positions of the chunks in the trial's order."""
    parts = chunks.select(pl.int_range(pl.len()).over("doc_id"))["literal"].to_numpy()
    order = chunk_order(chunks["doc_id"].to_numpy(), parts, seed)
    return chunks["chunk_id"].to_numpy(), chunks["n_real"].to_numpy(), order
