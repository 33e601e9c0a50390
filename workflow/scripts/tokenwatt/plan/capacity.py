"""Whether the corpus holds the real tokens the study's budgets ask for, said before any job rather than found by a
subset job after the data stage.

Once the training chunks exist and are known to be current (their record, ``chunk_record``, names every setting they
depend on as the config names it now: ``chunk_settings``), their real tokens are counted and a budget above them
refuses the plan, a dry run included. Before that, or where they are not known to be current, the tokens are estimated from the corpus's
settings (the synthetic stories' count, or the local or package files' size) and a budget above the estimate is warned
of, said to be an estimate. The subset job keeps its own refusal (``data.subsets.draw_subset``), which stays exact.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .design import Cell, Design
from .layout import Layout

# Real tokens per synthetic story as chunked for training: the default study's 3 900 training stories (4 000 less
# split.eval_documents 100) gave 324 388 (vocab_size 1 024, chunk.length 64 with BOS and EOS, 2026-12); a larger
# vocabulary gives fewer.
SYNTHETIC_TOKENS_PER_STORY = 83.2
# Characters of a text file per real token, for local and package files: byte-level BPE on English text at a few
# thousand merges (the synthetic stories measured 3.8); a package's files hold code beside the text, so their count
# errs high, and the warning, said to be an estimate, errs towards silence.
CHARACTERS_PER_TOKEN = 4.0


@dataclass(frozen=True)
class Need:
    """The largest real tokens one set of training chunks must hold (a tokenizer × selection level's), and the cell
    that asks for them."""

    chunks: str
    tokens: int
    cell: Cell
    selection: str | None


def needs(design: Design, layout: Layout) -> list[Need]:
    """Per training-chunk file, the largest tokens a trial draws from it (budget × the model level's budget_scale)."""
    largest: dict[str, Need] = {}
    for cell in design.cells:
        chunks = layout.data(design.tokenizer_key(cell), f"{design.selection_key(cell)}chunks_train.parquet")
        level = dict(cell.levels).get("selection")
        if chunks not in largest or design.tokens(cell) > largest[chunks].tokens:
            largest[chunks] = Need(chunks, design.tokens(cell), cell, level)
    return list(largest.values())


def chunk_settings(config: Mapping[str, Any], design: Design, cell: Cell) -> dict[str, Any]:
    """Every setting a cell's training chunks depend on, through the data-stage rules' params (corpus.smk,
    tokens.smk, selection.smk): the corpus source and its settings, normalize.*, split.eval_documents, study.seed
    (the split and the selection steps draw with it), the tokenizer the cell trains with, chunk.*, selection.* (the
    decontamination every study runs) and the cell's selection level's steps."""
    corpus, level = config["corpus"], dict(cell.levels).get("selection")
    settings = {
        "corpus": {"source": corpus["source"], "settings": corpus[corpus["source"]]},
        "normalize": config.get("normalize"),
        "split": config.get("split"),
        "seed": config["study"].get("seed"),
        "tokenizer": design.tokenizer_config(design.tokenizer_key(cell)),
        "chunk": config.get("chunk"),
        "selection": config.get("selection"),
        "level": None if level is None else design.selection_config(level),
    }
    return json.loads(json.dumps(settings, sort_keys=True, default=str))


def chunk_record(chunks: str) -> str:
    """The record beside a chunk file of the settings it was made under (``chunk_settings``)."""
    return str(Path(chunks).with_suffix(".settings.json"))


def write_chunk_record(chunks: str, settings: Mapping[str, Any]) -> None:
    """Record the settings a chunk file was made under, after the file itself (the data stage's chunk job)."""
    Path(chunk_record(chunks)).write_text(json.dumps(settings, sort_keys=True, default=str), encoding="utf-8")


def chunks_current(chunks: str, source_record: str, settings: Mapping[str, Any]) -> bool:
    """Whether a chunk file on disk was made under every setting the config names now (``chunk_settings``): its
    record beside it names the same settings, the corpus job's record (corpus_source.json) the same source and
    settings, and the chunks are not older than either. Chunks of other settings, or of settings not recorded,
    say nothing of the ones this config makes."""
    record_path = chunk_record(chunks)
    try:
        record = json.loads(Path(record_path).read_text(encoding="utf-8"))
        source = json.loads(Path(source_record).read_text(encoding="utf-8"))
        if os.path.getmtime(chunks) < os.path.getmtime(source_record):
            return False
        if os.path.getmtime(record_path) < os.path.getmtime(chunks):
            return False
    except (OSError, ValueError):
        return False
    corpus = settings["corpus"]
    return (
        record == settings and source.get("source") == corpus["source"] and source.get("settings") == corpus["settings"]
    )


def chunk_tokens(chunks: str) -> int | None:
    """The real tokens of a chunk file, or None where it cannot be read (its own job's reader names a damaged file)."""
    import polars as pl  # only where chunks exist: the Snakefile imports this module at every start

    try:
        return int(pl.scan_parquet(chunks).select(pl.col("n_real").sum()).collect().item())
    except Exception:  # noqa: BLE001 - any unreadable file is left to the jobs that read it
        return None


def add_data(corpus: Mapping[str, Any]) -> str:
    """The corpus key that adds training data, in words."""
    source = corpus["source"]
    if source == "synthetic":
        return f"raise corpus.synthetic.documents (now {corpus['synthetic']['documents']:,})"
    if source == "local":
        return "add files to corpus.local.files"
    if source == "package":
        return "add distributions to corpus.package.distributions (or files to corpus.package.files)"
    hub = corpus["hf"]
    if hub.get("max_documents"):
        return f"raise corpus.hf.max_documents (now {hub['max_documents']:,})"
    return "choose a larger corpus.hf.name or corpus.hf.split"


def estimated_tokens(config: Mapping[str, Any], files: list[str]) -> tuple[int, str] | None:
    """The training tokens the corpus will give, estimated from its settings before its chunks exist, with how; None
    for the Hub (its size is not known before it downloads)."""
    corpus, held_out = config["corpus"], config["split"]["eval_documents"]
    if corpus["source"] == "synthetic":
        stories = max(0, corpus["synthetic"]["documents"] - held_out)
        how = (
            f"corpus.synthetic.documents less split.eval_documents ({stories:,} stories) × "
            f"{SYNTHETIC_TOKENS_PER_STORY:g} real tokens a story, the default study's"
        )
        return round(stories * SYNTHETIC_TOKENS_PER_STORY), how
    if corpus["source"] in ("local", "package"):
        characters = sum(os.path.getsize(f) for f in files if os.path.isfile(f))
        if not characters:
            return None
        how = f"the corpus files' {characters:,} bytes ÷ {CHARACTERS_PER_TOKEN:g} a token, the held-out documents not taken off"
        return round(characters / CHARACTERS_PER_TOKEN), how
    return None


def _asks(need: Need) -> str:
    """The budget that needs the most tokens, in words, with the model level's scale where it has one."""
    model = dict(need.cell.levels).get("model")
    if need.tokens == need.cell.budget or model is None:
        return f"budget {need.cell.budget:,}"
    scale = need.tokens / need.cell.budget
    return f"budget {need.cell.budget:,} × design.model level {model!r}'s budget_scale {scale:.3g} (= {need.tokens:,})"


def corpus_problems(
    config: Mapping[str, Any], design: Design, layout: Layout, files: list[str]
) -> tuple[list[str], list[str]]:
    """(refusals, warnings): each budget that the corpus's training chunks on disk cannot fill, and, where they do not
    exist yet, each that its estimate suggests it cannot (said to be an estimate)."""
    corpus, refusals, warnings = config["corpus"], [], []
    source_record = layout.path("data", "corpus_source.json")
    fix = f"lower study.budgets, or add data: {add_data(corpus)}"
    estimate = None
    for need in needs(design, layout):
        settings = chunk_settings(config, design, need.cell)
        if os.path.exists(need.chunks) and chunks_current(need.chunks, source_record, settings):
            held = chunk_tokens(need.chunks)
            level = f" of design.selection level {need.selection!r}" if need.selection else ""
            if held is not None and need.tokens > held:
                refusals.append(
                    f"study.budgets: {_asks(need)} needs {need.tokens:,} real training tokens, and the training "
                    f"chunks{level} hold {held:,} ({need.chunks}); {fix}"
                    + (f", or let design.selection level {need.selection!r} keep more" if need.selection else "")
                )
            continue
        estimate = estimate or estimated_tokens(config, files)
        # a selection level's share is not known before its steps run: only the whole corpus is estimated
        if estimate is not None and need.selection is None and need.tokens > estimate[0]:
            warnings.append(
                f"study.budgets: {_asks(need)} needs {need.tokens:,} real training tokens, likely more than the "
                f"corpus holds: about {estimate[0]:,} (an ESTIMATE from {estimate[1]}; the plan checks it exactly "
                f"once the chunks exist); {fix}"
            )
    return refusals, warnings
