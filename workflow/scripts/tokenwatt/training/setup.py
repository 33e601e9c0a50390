"""A trial's setup, everything fixed before its meter opens: the device, the trial's chunks as tensors and the model
(compiled when train.compile says so; wrapped for data-parallel training on several devices)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import polars as pl
import torch

from ..measurement.devices import device_sync, make_deterministic, resolve_device
from .evalplan import eval_thresholds, subset_chunks
from .llama import check_right_padded
from .model import build_model, check_tokenizer_matches, describe, load_pretrained, preset_sizes
from .optim import warm_up
from .ranks import ONE, Ranks
from .spec import TrialData, TrialSpec
from .train import check_precision, compile_model, should_compile


def chunk_tensors(chunks: pl.DataFrame, chunk_ids: list[int] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Input ids and attention masks as tensors, in the order of ``chunk_ids`` (all if None)."""
    if chunk_ids is not None:
        position = {cid: i for i, cid in enumerate(chunks["chunk_id"].to_list())}
        chunks = chunks[[position[c] for c in chunk_ids]]
    ids = torch.tensor(chunks["input_ids"].to_numpy(), dtype=torch.long)
    mask = torch.tensor(chunks["attention_mask"].to_numpy(), dtype=torch.long)
    return ids, mask


def implementation(model_cfg: Mapping[str, Any]) -> str:
    """``model.implementation`` resolved: auto is native for a Llama preset, transformers for pretrained weights and for
    every other family (``model.architecture``)."""
    chosen = model_cfg.get("implementation", "auto")
    if chosen == "auto":
        native = model_cfg["source"] == "config" and model_cfg.get("architecture", "llama") == "llama"
        return "native" if native else "hf"
    return chosen


def load_model(
    model_cfg: Mapping[str, Any], tokenizer: dict[str, Any], context: int, seed: int, log: Callable[[str], None] = print
) -> torch.nn.Module:
    """The trial's model: a preset built from ``seed`` (``model.source: config``) or pretrained weights; a mismatch with
    the tokenizer that training survives is logged as a note."""
    if model_cfg["source"] == "config":
        sizes = preset_sizes(model_cfg["preset"], model_cfg["overrides"], tokenizer, context)
        model = build_model(sizes, seed, implementation(model_cfg), model_cfg.get("architecture", "llama"))
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
    steps_planned: int
    last_work: float  # monotonic time the device last worked (load, compile): the idle baseline waits after it
    ranks: Ranks = ONE  # this process's place among the trial's devices (train.devices)
    optimizer_compile_s: float = 0.0  # the optimizer's step compiled before the meter opened (``optim.warm_up``)

    def meter_sync(self) -> None:
        """A meter window's end: the device's queue done and, on several devices, every rank there (a barrier), so
        the ranks' windows begin and end together and their energies add up to the trial's."""
        self.sync()
        self.ranks.barrier()


def set_up(spec: TrialSpec, data: TrialData, log: Callable[[str], None], ranks: Ranks = ONE) -> TrialSetup:
    """The device, the trial's chunks and the model (compiled when train.compile says so). On several devices
    (``ranks``) the steps call the model through PyTorch's DistributedDataParallel, built from the same seed on every
    rank (and rank 0's weights broadcast, as DDP does), whose backward adds the ranks' gradients."""
    train = spec.train
    torch.set_num_threads(train.threads)
    device = resolve_device(train.device)
    ids, mask = chunk_tensors(data.train_chunks, data.chunk_ids(train.order))
    eval_ids, eval_mask = chunk_tensors(data.eval_chunks)
    steps_planned = train.epochs * math.ceil(len(ids) / train.batch_size)
    compiling = should_compile(train.compile, device, steps_planned, train.compile_min_steps)
    make_deterministic(device, compiling)
    check_precision(device, train.precision)
    sync = device_sync(device)

    model = load_model(spec.model, data.tokenizer, ids.shape[1], spec.seed, log)
    arch = describe(model)
    if arch["implementation"] == "native":
        check_right_padded(mask, "the trial's training chunks")
        check_right_padded(eval_mask, "the eval chunks")
    model.to(device)
    forward, compile_s = None, None
    if ranks.many:
        forward = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None
        )
    if compiling:
        forward, compile_s = compile_model(forward or model, ids, mask, device, train, ranks)
        log(f"torch.compile: {compile_s:.1f} s before the metered window (train.compile: {train.compile})")
    if optimizer_compile_s := warm_up(model, train):
        log(
            f"optimizer {train.optimizer['kind']}: its step compiled in {optimizer_compile_s:.1f} s before the metered window"
        )
    sync()
    last_work = time.monotonic()
    return TrialSetup(
        device=device,
        sync=sync,
        ids=ids,
        mask=mask,
        eval_ids=eval_ids,
        eval_mask=eval_mask,
        n_sub=subset_chunks(eval_mask, spec.evaluation.max_tokens),
        thresholds=eval_thresholds(int(mask.sum()) * train.epochs, spec.evaluation),
        model=model,
        arch=arch,
        forward=forward,
        compile_s=compile_s,
        compiling=compiling,
        steps_planned=steps_planned,
        last_work=last_work,
        ranks=ranks,
        optimizer_compile_s=optimizer_compile_s,
    )
