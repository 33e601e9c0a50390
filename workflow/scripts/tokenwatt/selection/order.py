"""A selection level's training order (design.selection.<level>.order): the documents as read, or a curriculum by one
per-document measure. The step ranks the level's documents; which of them a trial trains on stays its subset's draw
(tokenwatt.data.order puts that subset in this order).

A curriculum is offered only by the measures that vary from document to document in the workflow: the line measures
(duplicate, policy and punctuated lines) see one line per document after ``normalize`` joins lines, so they would
rank nearly every document alike and the "curriculum" would train as read.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

import polars as pl

from .filters import alpha_words_ratio, mean_word_length, stop_words, symbol_word_ratio, top_bigram_fraction, words
from .steps import record

# The step's name in its record and the report (it removes no document).
ORDER = "order"
# Measure name -> the measure: what a curriculum may order documents by (the schema's enum of order.curriculum.score).
MEASURES: dict[str, Callable[[str], float]] = {
    fn.__name__: fn
    for fn in (words, mean_word_length, symbol_word_ratio, alpha_words_ratio, stop_words, top_bigram_fraction)
}


def order_documents(docs: pl.DataFrame, order: str | dict[str, Any]) -> tuple[pl.DataFrame, dict[str, Any]]:
    """The training order of a level's documents: ``as_read`` (the order the corpus gives them) or a curriculum
    (``{curriculum: {score, direction}}``: by a measure of each document, ties in the order read). A table of doc_id
    and rank (0 trains first), and the step's record: every document kept, and for a curriculum the measure's value
    at the start, middle and end of the order."""
    position = pl.int_range(pl.len(), dtype=pl.Int64)
    step = record(ORDER, order, docs, {})
    if order == "as_read":
        return docs.select("doc_id", rank=position), step
    spec = order["curriculum"]  # its direction filled in by the config's defaults
    descending = spec["direction"] == "descending"
    scored = docs.select("doc_id", score=pl.col("text").map_elements(MEASURES[spec["score"]], return_dtype=pl.Float64))
    ranked = scored.with_columns(read=position).sort(["score", "read"], descending=[descending, False])
    values = ranked["score"].to_list()
    summary = {"first": values[0], "median": statistics.median(values), "last": values[-1]} if values else {}
    return ranked.select("doc_id", rank=position), {
        **step,
        "ranked_by": {**spec, **summary},
    }
