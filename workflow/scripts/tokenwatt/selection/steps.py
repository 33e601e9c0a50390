"""The selection steps as they run in a rule: documents in, documents kept, and a record of what was removed and why.

Every step keeps documents in the order read and never rewrites a text, so a level's training documents are a subset
of the normalized training split; the same inputs and settings give the same documents bit for bit.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any, TypeVar

import polars as pl

from .filters import failed_rule
from .near_dup import eval_copies, near_duplicates

T = TypeVar("T")
# The step that filters the eval documents (selection.eval_filters): what every level is scored on, not its training.
EVAL_FILTER = "eval_filter"
# Removed documents quoted in a step's record, and how much of each.
EXAMPLES = 3
EXAMPLE_CHARS = 240


class SelectionError(ValueError):
    """A selection the study cannot train on; the message names the level, the counts and the key to change."""


def record(step: str, settings: Any, docs: pl.DataFrame, why: dict[int, str]) -> dict[str, Any]:
    """What a step kept and removed: counts, the count per reason, and the first removed documents quoted."""
    examples = [
        {"doc_id": doc_id, "why": why[doc_id], "text": text[:EXAMPLE_CHARS]}
        for doc_id, text in docs.filter(pl.col("doc_id").is_in(list(why)))
        .select("doc_id", "text")
        .head(EXAMPLES)
        .iter_rows()
    ]
    return {
        "step": step,
        "settings": settings,
        "documents_in": docs.height,
        "kept": docs.height - len(why),
        "removed": len(why),
        "removed_by": dict(sorted(Counter(reason.split(" ", 1)[0] for reason in why.values()).items())),
        "examples": examples,
    }


def _kept(docs: pl.DataFrame, why: dict[int, str]) -> pl.DataFrame:
    return docs.filter(~pl.col("doc_id").is_in(list(why)))


def remove_near_duplicates(
    docs: pl.DataFrame, settings: dict[str, Any] | None, seed: int
) -> tuple[pl.DataFrame, dict[str, Any]]:
    """Documents that near-duplicate an earlier one removed; ``settings`` None keeps every document (a level without
    this step)."""
    if settings is None:
        return docs, record("near_dup", None, docs, {})
    ids = docs["doc_id"].to_list()
    matches = near_duplicates(
        docs["text"].to_list(), settings["shingle_size"], settings["permutations"], settings["threshold"], seed
    )
    why = {
        ids[m.index]: f"near_dup of train doc {ids[int(m.of.split(':')[1])]} (Jaccard {m.similarity:.3f})"
        for m in matches
    }
    return _kept(docs, why), record("near_dup", settings, docs, why)


def remove_eval_copies(
    docs: pl.DataFrame, eval_docs: pl.DataFrame, settings: dict[str, Any]
) -> tuple[pl.DataFrame, dict[str, Any]]:
    """Training documents that hold most of an eval document (``split.decontaminate``: containment of its
    ``shingle_size``-word shingles at or above ``containment``) removed, each naming the eval document."""
    ids, ref_ids = docs["doc_id"].to_list(), eval_docs["doc_id"].to_list()
    matches = eval_copies(
        docs["text"].to_list(), eval_docs["text"].to_list(), settings["shingle_size"], settings["containment"]
    )
    why = {
        ids[m.index]: (
            f"eval_copy (holds {m.similarity:.3f} of eval doc {ref_ids[int(m.of.split(':')[1])]}'s "
            f"{settings['shingle_size']}-word shingles)"
        )
        for m in matches
    }
    return _kept(docs, why), record("decontaminate", settings, docs, why)


def apply_filters(
    docs: pl.DataFrame, thresholds: dict[str, float] | None, step: str = "filter"
) -> tuple[pl.DataFrame, dict[str, Any]]:
    """Documents failing a quality rule removed, each with the first rule it failed; None applies none. ``step`` names
    the step in its record (a level's filter, or the eval documents' eval_filter)."""
    why = {}
    for doc_id, text in docs.select("doc_id", "text").iter_rows() if thresholds else ():
        if (failed := failed_rule(text, thresholds)) is not None:
            rule, value = failed
            why[doc_id] = f"{rule} (value {value:g}, threshold {thresholds[rule]:g})"
    return _kept(docs, why), record(step, thresholds, docs, why)


def refuse_empty(level: str, steps: list[dict[str, Any]]) -> None:
    """A level that keeps no document is refused here, naming its counts, rather than by a tokenizer or chunking error."""
    if steps[-1]["kept"] == 0:
        counts = ", ".join(f"{s['step']} kept {s['kept']} of {s['documents_in']}" for s in steps)
        raise SelectionError(
            f"design.selection level {level!r} leaves no training document ({counts}); loosen its thresholds "
            f"(design.selection.{level}) or add data"
        )


def refuse_empty_eval(step: dict[str, Any]) -> None:
    """Eval filters that keep no eval document leave nothing to score any level on."""
    if step["kept"] == 0:
        raise SelectionError(
            f"selection.eval_filters keeps none of the {step['documents_in']} eval documents "
            f"(removed by {', '.join(f'{rule} {n}' for rule, n in step['removed_by'].items())}); loosen its "
            "thresholds, remove it, or raise split.eval_documents"
        )


def metered(meter: dict[str, Any], step: Callable[[], T]) -> tuple[T, dict[str, Any]]:
    """Run ``step`` inside its own meter window (``meter``: the kind and polling settings, study.Study.window_meter);
    its result and the window's energy record (joules, seconds, meter, whether an estimate), which the analysis
    states beside the trials that trained on the selection."""
    from ..measurement.meters import MeterSettings, make_meter

    window, why = make_meter(MeterSettings(**meter), "cpu")
    window.start()
    result = step()
    summary = window.stop()
    keys = ("energy_j", "duration_s", "meter", "meter_is_estimate", "samples")
    return result, {**{k: getattr(summary, k) for k in keys}, "meter_choice": why}
