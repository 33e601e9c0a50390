"""Whether the corpus holds the real tokens the study's budgets ask for, said before any job rather than found by a
subset job after the data stage.

The chunk job writes a record beside its chunks (``Layout.chunk_record``, ``data.chunking.write_chunk_record``): every setting they
depend on as the config named them (``chunk_settings``), their real tokens and their file's size. Once that record
exists and names the settings the config names now, a budget above its tokens refuses the plan, a dry run included.
Before that, or where the chunks are not known to be current, the tokens are estimated from the corpus's settings (the
synthetic stories' count, or the local or package files' size) and a budget above the estimate is warned of, said to
be an estimate. The subset job keeps its own refusal (``data.subsets.draw_subset``), which stays exact.
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
    record: str
    tokens: int
    cell: Cell
    selection: str | None


def needs(design: Design, layout: Layout) -> list[Need]:
    """Per training-chunk file, the largest tokens a trial draws from it (budget × the model level's budget_scale)."""
    largest: dict[str, Need] = {}
    for cell in design.cells:
        tok, sel = design.tokenizer_key(cell), design.selection_key(cell)
        chunks = layout.chunks(tok, sel, "train")
        level = dict(cell.levels).get("selection")
        if chunks not in largest or design.tokens(cell) > largest[chunks].tokens:
            largest[chunks] = Need(chunks, layout.chunk_record(tok, sel, "train"), design.tokens(cell), cell, level)
    return list(largest.values())


def chunk_settings(config: Mapping[str, Any], design: Design, cell: Cell) -> dict[str, Any]:
    """Every setting a cell's training chunks depend on (``chunk_job_settings`` of its tokenizer and selection
    level)."""
    return chunk_job_settings(config, design, design.tokenizer_key(cell), dict(cell.levels).get("selection"), "train")


def chunk_job_settings(
    config: Mapping[str, Any], design: Design, tok: str, level: str | None, split: str
) -> dict[str, Any]:
    """Every setting one chunk job's chunks depend on and no other (``tok``: its tokenizer key; ``level``: its selection
    level, or None; ``split``: train or eval), through the data-stage rules' params (corpus.smk, tokens.smk,
    selection.smk). Both splits: the corpus source and its settings, normalize.*, split.eval_documents, study.seed (the
    split draws with it), the tokenizer and chunk.*. The eval split adds selection.eval_filters (its documents are
    those that pass them); the training split adds split.decontaminate (every study's first step) and its level's
    near_dup and filters, which make its documents. Not its level's order (the order step reads the chunked documents,
    it does not change them), nor selection.near_dup beyond what a level takes of it: a setting named here that does
    not shape the chunks would rerun them, and every trial on them, when it changes. The chunk rule passes them as a
    param, so the record it writes, restored from the store or a cache too, names its own."""
    corpus, split_config = config["corpus"], config.get("split") or {}
    settings: dict[str, Any] = {
        "corpus": {"source": corpus["source"], "settings": corpus[corpus["source"]]},
        "normalize": config.get("normalize"),
        "split": {"eval_documents": split_config.get("eval_documents")},
        "seed": config["study"].get("seed"),
        "tokenizer": design.tokenizer_config(tok),
        "chunk": config.get("chunk"),
    }
    if split == "eval":
        settings["eval_filters"] = (config.get("selection") or {}).get("eval_filters")
    else:
        steps = None if level is None else design.selection_config(level)
        settings["decontaminate"] = split_config.get("decontaminate")
        settings["level"] = None if steps is None else {"near_dup": steps["near_dup"], "filters": steps["filters"]}
    return json.loads(json.dumps(settings, sort_keys=True, default=str))


def current_tokens(need: Need, source_record: str, settings: Mapping[str, Any]) -> int | None:
    """The real tokens of a chunk file on disk that was made under every setting the config names now
    (``chunk_settings``), from its record; None where that is not known. Current means: its record names the same
    settings and the file's size, the corpus job's record (corpus_source.json) the same source and settings, and the
    chunks are not older than the corpus's record (a corpus remade from edited files, its settings unchanged). Times
    are a link's own, as Snakemake reads them (a cached output is a link)."""
    try:
        record = json.loads(Path(need.record).read_text(encoding="utf-8"))
        source = json.loads(Path(source_record).read_text(encoding="utf-8"))
        if os.lstat(need.chunks).st_mtime < os.lstat(source_record).st_mtime:
            return None
        if record.get("bytes") != os.path.getsize(need.chunks):
            return None
        tokens = int(record["real_tokens"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    corpus = settings["corpus"]
    same = (
        record.get("settings") == settings
        and source.get("source") == corpus["source"]
        and source.get("settings") == corpus["settings"]
    )
    return tokens if same else None


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
        held = current_tokens(need, source_record, chunk_settings(config, design, need.cell))
        if held is not None:
            level = f" of design.selection level {need.selection!r}" if need.selection else ""
            if need.tokens > held:
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
