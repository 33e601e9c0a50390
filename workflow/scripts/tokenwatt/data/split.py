"""Held-out evaluation documents, chosen once per study so every trial and budget shares them."""

from __future__ import annotations

import numpy as np
import polars as pl


class SplitError(ValueError):
    pass


def split_documents(docs: pl.DataFrame, eval_documents: int, seed: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Split by document (never by chunk), so no document feeds both training and evaluation."""
    if docs.height == 0:
        raise SplitError(
            "no documents are left after normalization and de-duplication (results/data/normalize_summary.json "
            "counts what was dropped); check the corpus: corpus.source, its files and corpus.local.text_column"
        )
    if eval_documents >= docs.height:
        raise SplitError(
            f"split.eval_documents is {eval_documents} but the normalized corpus has only {docs.height} "
            "documents; lower split.eval_documents or add data"
        )
    rng = np.random.default_rng(seed)
    is_eval = np.zeros(docs.height, dtype=bool)
    is_eval[rng.choice(docs.height, size=eval_documents, replace=False)] = True
    mask = pl.Series(is_eval)
    return docs.filter(~mask), docs.filter(mask)
