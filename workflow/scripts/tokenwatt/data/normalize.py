"""Text normalization: Unicode form, control and zero-width characters, whitespace."""

from __future__ import annotations

import re
import unicodedata
from typing import Any

import polars as pl

_WHITESPACE = re.compile(r"\s+")


def normalize_text(text: str, form: str = "NFKC") -> str:
    """Normalize one document.

    Whitespace controls (tab, newline, ...) become spaces before other control (Cc) and
    format (Cf: zero-width space/joiners, BOM, soft hyphen) characters are deleted, so
    words on either side of a line break do not merge.
    """
    text = unicodedata.normalize(form, text)
    text = _WHITESPACE.sub(" ", text)
    text = "".join(ch for ch in text if unicodedata.category(ch) not in ("Cc", "Cf"))
    return _WHITESPACE.sub(" ", text).strip()


def normalize_corpus(
    docs: pl.DataFrame, form: str = "NFKC", dedupe: bool = True
) -> tuple[pl.DataFrame, dict[str, Any]]:
    """Normalize every document; drop the empty ones (and exact duplicates if asked), counting why."""
    texts = [normalize_text(t, form) for t in docs["text"].to_list()]
    out = docs.with_columns(pl.Series("text", texts, dtype=pl.String))
    empty = out["text"].str.len_chars() == 0
    out = out.filter(~empty)
    n_dup = 0
    if dedupe:
        before = out.height
        out = out.unique(subset="text", keep="first", maintain_order=True)
        n_dup = before - out.height
    summary = {
        "documents_in": docs.height,
        "documents_out": out.height,
        "characters_in": int(docs["text"].str.len_chars().sum() or 0),
        "characters_out": int(out["text"].str.len_chars().sum() or 0),
        "dropped": {"empty_after_normalization": int(empty.sum()), "exact_duplicate": n_dup},
        "unicode_form": form,
        "dedupe": dedupe,
    }
    return out, summary
