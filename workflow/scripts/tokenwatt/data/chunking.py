"""Fixed-length chunks with padding, and real-token counts from the attention mask."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl


class ChunkError(ValueError):
    pass


def with_special_tokens(ids: Sequence[int], bos_id: int | None, eos_id: int | None) -> list[int]:
    """Wrap one document's ids: BOS (if given) starts it, EOS (if given) ends it.

    Each document is framed on its own, so a chunk never spans two documents and the
    model always sees where a story begins and ends.
    """
    return ([bos_id] if bos_id is not None else []) + list(ids) + ([eos_id] if eos_id is not None else [])


def chunk_ids(doc_ids: Sequence[int], token_lists: Sequence[Sequence[int]], length: int, pad_id: int) -> pl.DataFrame:
    """Cut each document's tokens into ``length``-token chunks; the last one of a document is padded.

    ``attention_mask`` is 1 on real tokens and 0 on padding; ``n_real`` is its sum.
    """
    if length < 2:
        raise ChunkError(f"chunk.length is {length}; a causal LM needs at least 2 tokens per chunk")
    rows_doc, rows_ids, rows_mask = [], [], []
    for doc_id, tokens in zip(doc_ids, token_lists):
        tokens = np.asarray(tokens, dtype=np.int64)
        for start in range(0, len(tokens), length):
            piece = tokens[start : start + length]
            mask = np.zeros(length, dtype=np.int8)
            mask[: len(piece)] = 1
            padded = np.full(length, pad_id, dtype=np.int64)
            padded[: len(piece)] = piece
            rows_doc.append(doc_id)
            rows_ids.append(padded)
            rows_mask.append(mask)
    masks = np.array(rows_mask, dtype=np.int8).reshape(-1, length)
    return pl.DataFrame(
        {
            "chunk_id": np.arange(len(rows_doc), dtype=np.int64),
            "doc_id": np.asarray(rows_doc, dtype=np.int64),
            "input_ids": np.array(rows_ids, dtype=np.int64).reshape(-1, length),
            "attention_mask": masks,
            "n_real": masks.sum(axis=1).astype(np.int64),
        }
    )


def chunk_documents(docs: pl.DataFrame, tok, length: int, add_bos: bool, add_eos: bool) -> pl.DataFrame:
    """Tokenize ``docs`` and chunk them (see :func:`chunk_ids`)."""
    for wanted, attr, key in ((add_bos, "bos_token_id", "chunk.add_bos"), (add_eos, "eos_token_id", "chunk.add_eos")):
        if wanted and getattr(tok, attr) is None:
            raise ChunkError(
                f"{key} is true but the tokenizer has no {attr.split('_')[0].upper()} token; set {key}: false"
            )
    encoded = tok(docs["text"].to_list(), add_special_tokens=False)["input_ids"]
    bos = tok.bos_token_id if add_bos else None
    eos = tok.eos_token_id if add_eos else None
    framed = [with_special_tokens(ids, bos, eos) for ids in encoded]
    return chunk_ids(docs["doc_id"].to_list(), framed, length, tok.pad_token_id)


def write_chunk_record(record: str | Path, chunks: str | Path, settings: Mapping[str, Any]) -> None:
    """The chunk job's record of the chunk file it wrote: the settings it was made under (the rule's params, every one
    the chunks depend on), its real tokens (the sum of ``n_real``) and its size, which ties the record to this file.
    The plan reads it (plan.capacity) to refuse a budget above the corpus before any job."""
    from ..common.files import write_text

    tokens = int(pl.scan_parquet(chunks).select(pl.col("n_real").sum()).collect().item() or 0)
    text = json.dumps(
        {"settings": settings, "real_tokens": tokens, "bytes": os.path.getsize(chunks)}, sort_keys=True, default=str
    )
    write_text(record, text + "\n")
