"""A trial's setup, everything fixed before its meter opens: the device, the trial's chunks as tensors, the model
(compiled when train.compile says so) and its training settings."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import polars as pl
import torch

from ..measurement.devices import device_sync, make_deterministic, resolve_device
from ..plan.stopping import StopRule, stop_rule
from .evalplan import eval_thresholds, subset_chunks
from .llama import check_right_padded
from .model import build_model, check_tokenizer_matches, describe, load_pretrained, preset_sizes
from .schedule import schedule_from_config
from .train import TrainSettings, check_precision, compile_model, should_compile


def chunk_tensors(chunks: pl.DataFrame, chunk_ids: list[int] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Input ids and attention masks as tensors, in the order of ``chunk_ids`` (all if None)."""
    if chunk_ids is not None:
        position = {cid: i for i, cid in enumerate(chunks["chunk_id"].to_list())}
        chunks = chunks[[position[c] for c in chunk_ids]]
    ids = torch.tensor(chunks["input_ids"].to_numpy(), dtype=torch.long)
    mask = torch.tensor(chunks["attention_mask"].to_numpy(), dtype=torch.long)
    return ids, mask


def implementation(model_cfg: dict[str, Any]) -> str:
    """``model.implementation`` resolved: auto is native for a preset, transformers for pretrained weights."""
    chosen = model_cfg.get("implementation", "auto")
    if chosen == "auto":
        return "native" if model_cfg["source"] == "config" else "hf"
    return chosen


def load_model(
    model_cfg: dict[str, Any], tokenizer: dict[str, Any], context: int, seed: int, log: Callable[[str], None] = print
) -> torch.nn.Module:
    if model_cfg["source"] == "config":
        sizes = preset_sizes(model_cfg["preset"], model_cfg["overrides"], tokenizer, context)
        model = build_model(sizes, seed, implementation(model_cfg))
    else:
        model = load_pretrained(model_cfg["name"], model_cfg["revision"], model_cfg["trust_remote_code"])
    for note in check_tokenizer_matches(model, tokenizer):
        log(f"NOTE: {note}")
    return model


@dataclass
class TrialSetup:
    """What a trial trains and evaluates, and on which device: all fixed before its meter opens."""

    device: torch.device
    sync: Callable[[], None]
    ids: torch.Tensor
    mask: torch.Tensor
    eval_ids: torch.Tensor
    eval_mask: torch.Tensor
    n_sub: int  # eval chunks of an intermediate evaluation (eval.max_tokens)
    thresholds: list[int]  # real tokens at which training pauses for one
    model: torch.nn.Module
    arch: dict[str, Any]
    forward: Callable[..., Any] | None
    compile_s: float | None
    compiling: bool
    settings: TrainSettings
    rule: StopRule
    steps_planned: int
    last_work: float  # monotonic time the device last worked (load, compile): the idle baseline waits after it


def set_up(
    subset: dict[str, Any],
    train_chunks: pl.DataFrame,
    eval_chunks: pl.DataFrame,
    tokenizer: dict[str, Any],
    model_cfg: dict[str, Any],
    train_cfg: dict[str, Any],
    eval_cfg: dict[str, Any],
    seed: int,
    log: Callable[[str], None],
) -> TrialSetup:
    """The device, the trial's chunks, the model (compiled when train.compile says so) and its training settings."""
    torch.set_num_threads(train_cfg["threads"])
    device = resolve_device(train_cfg["device"])
    ids, mask = chunk_tensors(train_chunks, subset["chunk_ids"])
    eval_ids, eval_mask = chunk_tensors(eval_chunks)
    steps_planned = train_cfg["epochs"] * math.ceil(len(ids) / train_cfg["batch_size"])
    compiling = should_compile(train_cfg["compile"], device, steps_planned, train_cfg["compile_min_steps"])
    make_deterministic(device, compiling)
    check_precision(device, train_cfg["precision"])
    sync = device_sync(device)

    model = load_model(model_cfg, tokenizer, ids.shape[1], seed, log)
    arch = describe(model)
    if arch["implementation"] == "native":
        check_right_padded(mask, "the trial's training chunks")
        check_right_padded(eval_mask, "the eval chunks")
    model.to(device)
    forward, compile_s = None, None
    if compiling:
        forward, compile_s = compile_model(model, ids, mask, device, train_cfg["precision"], train_cfg["batch_size"])
        log(f"torch.compile: {compile_s:.1f} s before the metered window (train.compile: {train_cfg['compile']})")
    sync()
    last_work = time.monotonic()
    settings = TrainSettings(
        epochs=train_cfg["epochs"],
        batch_size=train_cfg["batch_size"],
        lr=train_cfg["lr"],
        weight_decay=train_cfg["weight_decay"],
        precision=train_cfg["precision"],
        seed=seed,
        log_every=train_cfg["log_every"],
        eval_batch_size=train_cfg["eval_batch_size"],
        schedule=schedule_from_config(train_cfg.get("schedule")),
    )
    return TrialSetup(
        device=device,
        sync=sync,
        ids=ids,
        mask=mask,
        eval_ids=eval_ids,
        eval_mask=eval_mask,
        n_sub=subset_chunks(eval_mask, eval_cfg.get("max_tokens")),
        thresholds=eval_thresholds(int(mask.sum()) * train_cfg["epochs"], eval_cfg),
        model=model,
        arch=arch,
        forward=forward,
        compile_s=compile_s,
        compiling=compiling,
        settings=settings,
        rule=stop_rule(train_cfg.get("stop", "none")),
        steps_planned=steps_planned,
        last_work=last_work,
    )
