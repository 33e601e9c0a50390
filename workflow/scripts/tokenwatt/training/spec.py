"""What a trial is, as one typed record built once from its rule's params (``TrialSpec.from_params``), and what it
reads (``TrialData``): set-up, measurement and record all take these two, so no list of settings is kept in step by
hand between them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from ..common.files import read_chunks, read_subset, read_tokenizer_info
from ..data.order import in_level_order, read_order
from ..data.subsets import stream_head, trial_seed
from ..measurement.meters import MeterSettings
from ..measurement.throughput import ThroughputCheck
from .evalplan import EvalSchedule
from .train import TrainSettings


@dataclass(frozen=True)
class TrialSpec:
    """One (cell, trial): its identity (``budget``, ``trial``, ``cell``, the cell's id, and ``levels``, the cell's level
    of every further factor, recorded as they are: the settings they stand for are already in ``model`` and ``train``)
    and how it is trained, evaluated and metered. The seed, drawn from the study's seed and the trial, is
    ``train.seed``: it initialises the model and orders the data."""

    budget: int
    trial: int
    cell: str
    model: Mapping[str, Any]  # the cell's model.* (Design.model_config): a preset and its overrides, or pretrained
    train: TrainSettings  # the cell's train.* and the trial's seed
    evaluation: EvalSchedule  # eval.*: the evaluation points between training segments
    meter: MeterSettings  # meter.*
    check: ThroughputCheck  # the throughput checks right before and right after training
    levels: Mapping[str, str] = field(default_factory=dict)

    @property
    def seed(self) -> int:
        return self.train.seed

    @property
    def name(self) -> str:
        """How the trial's errors and log lines name it."""
        return f"budget {self.budget}, trial {self.trial}"

    @classmethod
    def from_params(cls, params: Any, job: Mapping[str, Any] | None = None) -> TrialSpec:
        """The spec of the rule train_trial's params (workflow/rules/train.smk), read by name; ``job``: the train.*
        settings the job reads from the config instead (``design.JOB_TRAIN_KEYS``)."""
        return cls(
            budget=params.budget,
            trial=params.trial,
            cell=params.cell,
            levels=dict(params.levels),
            model=dict(params.model),
            train=TrainSettings.from_config(
                {**params.train, **(job or {})}, seed=trial_seed(params.study_seed, params.trial)
            ),
            evaluation=EvalSchedule(**params.evaluation),
            meter=MeterSettings(**params.meter),
            check=ThroughputCheck(**params.check),
        )


@dataclass(frozen=True)
class TrialData:
    """What a trial reads: its subset (``chunk_ids`` in training order, ``n_chunks``, ``real_tokens``), the chunks the
    subset draws from, the eval chunks and the tokenizer's sizes and special tokens."""

    subset: dict[str, Any]
    train_chunks: pl.DataFrame
    eval_chunks: pl.DataFrame
    tokenizer: dict[str, Any]
    order: pl.DataFrame | None = None  # a selection level's training order (doc_id, rank); None: the subset's

    @classmethod
    def read(cls, inputs: Any) -> TrialData:
        """The data of the rule train_trial's inputs (``subset``, ``train``, ``eval``, ``tokenizer``, and ``order`` for
        a level that orders its documents), read by name."""
        return cls(
            subset=read_subset(inputs.subset),
            train_chunks=read_chunks(inputs.train),
            eval_chunks=read_chunks(inputs.eval),
            tokenizer=read_tokenizer_info(inputs.tokenizer),
            order=read_order(inputs.order) if hasattr(inputs, "order") else None,
        )

    @classmethod
    def stable(cls, inputs: Any, spec: TrialSpec) -> TrialData:
        """The data of a stretch of a stable run (the rule train_stable's inputs ``train``, ``eval``, ``tokenizer``):
        the head of the trial's drawn order up to the stretch's end (``stream_head``), which every budget shares."""
        chunks = read_chunks(inputs.train)
        return cls(
            subset=stream_head(chunks, spec.budget, spec.seed, spec.train.batch_size),
            train_chunks=chunks,
            eval_chunks=read_chunks(inputs.eval),
            tokenizer=read_tokenizer_info(inputs.tokenizer),
        )

    def chunk_ids(self, data_order: str) -> list[int]:
        """The subset's chunks in the order training takes them: as drawn (``shuffled``: train reshuffles them each
        epoch) or in the level's order (``given``). The rule gives a trial its level's order table exactly when its
        train config says ``given`` (both from Design.ordered_levels); a trial where the two disagree would train in
        an order nobody asked for and record another, so it is refused."""
        given = self.order is not None
        if (data_order == "given") != given:
            found = "an order table but data_order shuffled" if given else "data_order given but no order table"
            raise ValueError(
                f"a trial with {found}: the rule train_trial's 'order' input and its train params disagree, so it "
                "would train in an order nobody asked for; this is a workflow bug, please report it"
            )
        ids = self.subset["chunk_ids"]
        return ids if self.order is None else in_level_order(ids, self.train_chunks, self.order)
