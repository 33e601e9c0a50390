"""What a study's planned jobs will write, from the plan alone: the bytes the pre-flight check weighs against the free
disk of the results folder, which holds the outputs and the result store's copy of every expensive one.

Each part is derived from what drives it, with constants measured on real studies' folders (2-core VMs,
2026-12-02; ``tests/test_disk.py`` holds the estimate to the tiny study's measured folder):

- **the data stage** (when its corpus job is planned): the corpus's characters × ``DATA_BYTES_PER_CHARACTER``: the
  corpus, normalized, split and decontaminated documents (parquet) and the chunks with their store copy.
  config/frontier.yaml's five translations (20.6 M characters) left 45.7 MB, 2.2 bytes a character. Characters are
  counted from the files read (local or installed package files; a package's Python modules hold more than their text,
  so this overcounts) or, for the synthetic stories, at ``SYNTHETIC_CHARACTERS`` a story (299–305 measured). A Hub
  corpus is not counted: its size is not known before it downloads, and a guess per document would refuse studies
  that fit (TinyStories' documents are ~850 characters, a web crawl's several thousand); ``describe`` says so. Each selection level keeps its own training documents and
  chunks, ``LEVEL_SHARE`` of the data stage (0.59 measured); a run that adds levels to a study whose corpus is done
  (its chunk jobs planned, not its corpus job) is charged that share per chunk job.
- **a trial**: its record, curves and log (``TRIAL_FIXED_BYTES``) and its power trace, ``POWER_SAMPLE_BYTES`` a
  sample at ``meter.interval_s`` over the trial's expected seconds, twice (the store's copy). The seconds come from the
  config's pilot (plan.tokens_per_s), else from the trial's FLOPs (6 × parameters × tokens) at a rate below any
  trial measured (``FLOOR_FLOPS``: a CPU core 1e9/s, where the tiniest CPU trials ran at 1e10; a GPU 1e12/s, where
  TinyLlama on an A10G ran at 1.5e12), else (a pretrained model, whose size is not in the config) the plan's
  RUNTIME_UNKNOWN_MIN, plus ``FIXED_SECONDS`` of baseline, profile checks and evaluations.
- **a trial's checkpoint** (train.checkpoint_every): ``CHECKPOINT_BYTES_PER_PARAMETER`` a parameter (fp32 weights
  and AdamW's two moments; the data position, RNG and measurement so far are small beside them). One is written even
  with checkpoint_every 0, when a signal stops the trial. A finished trial's is removed, so the plan charges the
  largest trial's once; with train.keep_checkpoint every trial keeps its own, and each is charged; and a save writes
  its new file beside the last one before the rename, so the largest is charged once more. A pretrained model's
  size is not in the config: its checkpoint is not counted, and ``describe`` says so.
- subsets and device profiles: ``JOB_BYTES`` each; the analysis, figures and report: ``REPORT_BYTES`` and
  ``FIGURE_BYTES_PER_TRIAL``.

The margin scales with the study: ``MARGIN_SHARE`` of the sum, plus ``MARGIN_BYTES`` for Snakemake's records and the
logs. So a study that fits is not refused for a flat constant (the tiny study, ~4 MB, on a disk with 59 MB free), and
one that does not is refused with both figures.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .presets import PRESETS
from .preview import RUNTIME_UNKNOWN_MIN

STORE_COPIES = 2
DATA_BYTES_PER_CHARACTER = 3.0
SYNTHETIC_CHARACTERS = 320
LEVEL_SHARE = 0.6
TRIAL_FIXED_BYTES = 100_000
POWER_SAMPLE_BYTES = 32
FLOOR_FLOPS = {"cpu": 1e9, "cuda": 1e12}
FIXED_SECONDS = 60.0
JOB_BYTES = {"device_profile": 100_000, "subset": 200_000}
REPORT_BYTES = 5_000_000
FIGURE_BYTES_PER_TRIAL = 400_000
CHECKPOINT_BYTES_PER_PARAMETER = 12
# A save serialises and writes ~52 MB/s here (benchmarks/checkpoint_cost.py: 1.05 MB in 20.1 ms, 2-core VM): a trial's
# time limit counts its checkpoints at this rate, slow beside a GPU node's disk, so the limit errs long.
CHECKPOINT_BYTES_PER_S = 50_000_000
MARGIN_SHARE = 0.25
MARGIN_BYTES = 16_000_000


@dataclass(frozen=True)
class DiskPlan:
    """The bytes a plan will write, by part; ``total`` with the margin."""

    data: int
    trials: int
    other: int
    margin: int
    uncounted: str | None = None  # what the plan writes that is not counted, in words

    @property
    def total(self) -> int:
        return self.data + self.trials + self.other + self.margin

    def describe(self) -> str:
        mb = lambda b: f"{b / 1e6:,.0f} MB"  # noqa: E731
        counted = f"data {mb(self.data)}, trials {mb(self.trials)}, analysis and report {mb(self.other)}, margin {mb(self.margin)}"
        return counted + (f"; not counted: {self.uncounted}" if self.uncounted else "")


def llama_parameters(sizes: Mapping[str, Any], vocab: int) -> int:
    """A Llama's parameter count from its sizes (LlamaConfig's names): embeddings, per layer attention (grouped
    key/value heads), the gated MLP and two norms, the final norm, and an untied head."""
    hidden, layers = sizes["hidden_size"], sizes["num_hidden_layers"]
    heads = sizes["num_attention_heads"]
    kv_heads = sizes.get("num_key_value_heads") or heads
    head_dim = sizes.get("head_dim") or hidden // heads
    attention = 2 * hidden * heads * head_dim + 2 * hidden * kv_heads * head_dim
    layer = attention + 3 * hidden * sizes["intermediate_size"] + 2 * hidden
    embeddings = vocab * hidden * (1 if sizes.get("tie_word_embeddings") else 2)
    return layers * layer + hidden + embeddings


def model_parameters(model: Mapping[str, Any], tokenizer: Mapping[str, Any]) -> int | None:
    """The parameters of a model built from the config (its preset and overrides, the tokenizer's vocabulary), or
    None where the config does not hold them (pretrained weights or tokenizer)."""
    if model.get("source") != "config" or tokenizer.get("source") != "train":
        return None
    return llama_parameters({**PRESETS[model["preset"]], **(model.get("overrides") or {})}, tokenizer["vocab_size"])


def trial_seconds(params: int | None, tokens: int, device_kind: str, pilot: Mapping[str, Any]) -> float:
    """A generous bound on a trial's length (module docstring)."""
    if pilot.get("tokens_per_s"):
        return tokens / pilot["tokens_per_s"] + pilot.get("fixed_s", 0) + FIXED_SECONDS
    if params is None:
        return RUNTIME_UNKNOWN_MIN * 60.0
    return 6.0 * params * tokens / FLOOR_FLOPS[device_kind] + FIXED_SECONDS


def trial_bytes(seconds: float, interval_s: float) -> int:
    """A trial's files with their store copy: its fixed files and its power trace."""
    return int(STORE_COPIES * (TRIAL_FIXED_BYTES + seconds / interval_s * POWER_SAMPLE_BYTES))


def checkpoint_bytes(trials: list[tuple[int | None, int, str]], keep: bool) -> int:
    """The checkpoints the trials leave on disk at once (module docstring): every trial's when they are kept, else the
    largest one's."""
    sizes = [CHECKPOINT_BYTES_PER_PARAMETER * n for n, _, _ in trials if n is not None]
    if not sizes:
        return 0
    # a save writes its file beside the last one before it replaces it: the largest checkpoint twice, for a moment
    return (sum(sizes) if keep else max(sizes)) + max(sizes)


def checkpoint_seconds(params: int | None, tokens: int, every: int) -> float:
    """How long a trial's checkpoints pause its training: one every ``every`` real tokens of its ``tokens``, and the
    one a warning signal asks for before its time limit; 0 where the model's size is not in the config."""
    if params is None:
        return 0.0
    saves = (tokens // every if every > 0 else 0) + 1
    return saves * CHECKPOINT_BYTES_PER_PARAMETER * params / CHECKPOINT_BYTES_PER_S


def corpus_characters(corpus: Mapping[str, Any], files: list[str]) -> int:
    """The characters the data stage will hold, at most: the files read, or the synthetic stories; 0 for the Hub."""
    if corpus["source"] == "synthetic":
        return corpus["synthetic"]["documents"] * SYNTHETIC_CHARACTERS
    return sum(os.path.getsize(f) for f in files if os.path.isfile(f))


def disk_plan(
    planned: Mapping[str, int],
    characters: int,
    selection_levels: int,
    trials: list[tuple[int | None, int, str]],
    pilot: Mapping[str, Any],
    interval_s: float,
    uncounted: str | None = None,
    keep_checkpoints: bool = False,
) -> DiskPlan:
    """The bytes of the planned jobs (``planned``: rule → jobs to run): the data stage if its corpus job runs (its
    ``characters``, ``selection_levels``), else a level's share per chunk job; ``trials`` as (parameters or None,
    tokens, device kind) per trial to run, each with its checkpoint (``keep_checkpoints``: train.keep_checkpoint)."""
    share = 1 + LEVEL_SHARE * selection_levels if planned.get("corpus") else LEVEL_SHARE * planned.get("chunk", 0)
    data = int(characters * DATA_BYTES_PER_CHARACTER * share)
    trial = sum(trial_bytes(trial_seconds(n, tokens, kind, pilot), interval_s) for n, tokens, kind in trials)
    trial += checkpoint_bytes(trials, keep_checkpoints)
    if any(n is None for n, _, _ in trials):
        uncounted = "; ".join(
            filter(None, [uncounted, "a pretrained model's checkpoints (its size is not in the config)"])
        )
    other = sum(JOB_BYTES.get(rule, 0) * n for rule, n in planned.items())
    if trials:
        other += REPORT_BYTES + FIGURE_BYTES_PER_TRIAL * len(trials)
    subtotal = data + trial + other
    return DiskPlan(data, trial, other, int(MARGIN_SHARE * subtotal) + MARGIN_BYTES, uncounted)
