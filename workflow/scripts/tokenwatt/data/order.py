"""A trial's chunks in its selection level's training order (the select_order step's ranks), for the levels that
order their documents; every other trial trains its subset reshuffled each epoch (tokenwatt.training.train)."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from ..common.files import DATA_FIX, read_parquet_checked


def read_order(path: str | Path) -> pl.DataFrame:
    """A selection level's training order (order.parquet: doc_id, rank; 0 trains first)."""
    return read_parquet_checked(path, "document order", DATA_FIX, ("doc_id", "rank"))


def in_level_order(chunk_ids: list[int], chunks: pl.DataFrame, ranks: pl.DataFrame) -> list[int]:
    """A subset's chunks in its level's order (``ranks``: doc_id → rank; ``chunks``: chunk_id → doc_id), a document's
    chunks in the order they were cut: which chunks train is the subset's draw, the level decides only when."""
    doc_of = dict(chunks.select("chunk_id", "doc_id").iter_rows())
    rank = dict(ranks.select("doc_id", "rank").iter_rows())
    return sorted(chunk_ids, key=lambda c: (rank[doc_of[c]], c))
