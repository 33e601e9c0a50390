"""The metered data steps, declared once: decontamination, the eval filter, and each selection level's steps.

A step is one function (documents in, a table and its record out), the files it reads, the table it writes, where
its settings come from and whether it runs once for the study or once per selection level. The workflow makes one
rule per step from this list (``rules/selection.smk``) and one script runs them all (``scripts/select_step.py``),
each inside its own meter window; the analysis reads each record's level and energy. A new step is its function, one
entry here and its settings' schema key.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import polars as pl

from ..plan.design import Design
from ..plan.layout import SHARED, Layout
from .order import order_documents
from .steps import (
    EVAL_FILTER,
    apply_filters,
    refuse_empty,
    refuse_empty_eval,
    remove_eval_copies,
    remove_near_duplicates,
)

Outcome = tuple[pl.DataFrame, dict[str, Any]]


@dataclass(frozen=True)
class Step:
    """One metered data step. ``run(docs, settings, seed)`` is handed the tables of ``reads`` (keyword → file; a
    per-level step reads a name starting ``level:`` from its level's folder, any other from the study's data folder),
    ``settings`` (a shared step: the config value at the dotted key ``settings``; a per-level step: that key of the
    level's selection, design.Design.selection_config) and the study's seed; it returns the table written to
    ``writes`` and its record (``record``.json beside it). ``check(level, records)`` refuses, by name, what the study
    cannot train on (``records``: the ``after`` steps' records, then this step's). ``applies(design, level)`` says
    whether a study (level None: a shared step) or a level runs the step."""

    @property
    def wildcard(self) -> str:
        """The level of the step's files in its rule: the ``{level}`` wildcard for a per-level step, SHARED if not."""
        return "{level}" if self.per_level else SHARED

    def path(self, layout: Layout, level: str, name: str) -> str:
        """A file this step reads or writes: ``level:<name>`` in the level's folder, any other in the study's."""
        own = name.startswith("level:")
        return layout.selection(level if own else SHARED, name.removeprefix("level:"))

    def record_path(self, layout: Layout, level: str) -> str:
        return self.path(layout, level, f"{'level:' * self.per_level}{self.record}.json")

    def inputs(self, layout: Layout) -> dict[str, Any]:
        """The rule's inputs: the tables it reads, by keyword, and the earlier steps' records it checks."""
        return {
            **{keyword: self.path(layout, self.wildcard, file) for keyword, file in self.reads.items()},
            "records": [self.path(layout, self.wildcard, f"{r}.json") for r in self.after],
        }

    def outputs(self, layout: Layout) -> dict[str, str]:
        """The rule's outputs: its table and its record."""
        table = self.path(layout, self.wildcard, f"{'level:' * self.per_level}{self.writes}")
        return {"table": table, "record": self.record_path(layout, self.wildcard)}

    def log_parts(self) -> list[str]:
        """The rule's log and benchmark below their rule's folder: per level, or none."""
        return [self.wildcard] if self.per_level else []

    def settings_of(self, design: Design, level: str | None) -> Any:
        if self.per_level:
            return design.selection_config(str(level))[self.settings]
        value: Any = design.config
        for part in self.settings.split("."):
            value = value.get(part) if isinstance(value, Mapping) else None
        return value

    name: str
    record: str
    run: Callable[[Mapping[str, pl.DataFrame], Any, int], Outcome]
    reads: Mapping[str, str]
    writes: str
    settings: str
    per_level: bool
    mem_mb: int = 4000
    after: tuple[str, ...] = ()
    check: Callable[[str | None, list[dict[str, Any]]], None] | None = None
    applies: Callable[[Design, str | None], bool] = lambda design, level: True


def _eval_check(level: str | None, records: list[dict[str, Any]]) -> None:
    refuse_empty_eval(records[-1])


def _level_check(level: str | None, records: list[dict[str, Any]]) -> None:
    refuse_empty(str(level), records)


def _eval_filters_set(design: Design, level: str | None) -> bool:
    return bool(design.config["selection"].get("eval_filters"))


def _ordered(design: Design, level: str | None) -> bool:
    """Only a level that trains in an order of its own (as read, or a curriculum) ranks its documents."""
    return level in design.ordered_levels()


# In the order the data flows: each per-level step reads what the one before it wrote.
STEPS: tuple[Step, ...] = (
    Step(
        name="decontaminate",
        record="decontaminate",
        run=lambda docs, settings, seed: remove_eval_copies(docs["docs"], docs["eval"], settings),
        reads={"docs": "docs_train.parquet", "eval": "docs_eval.parquet"},
        writes="decontaminated.parquet",
        settings="split.decontaminate",
        per_level=False,
    ),
    Step(
        name="select_eval",
        record=EVAL_FILTER,
        run=lambda docs, settings, seed: apply_filters(docs["docs"], settings, EVAL_FILTER),
        reads={"docs": "docs_eval.parquet"},
        writes="docs_eval_kept.parquet",
        settings="selection.eval_filters",
        per_level=False,
        mem_mb=2000,
        check=_eval_check,
        applies=_eval_filters_set,
    ),
    Step(
        name="select_near_dup",
        record="near_dup",
        run=lambda docs, settings, seed: remove_near_duplicates(docs["docs"], settings, seed),
        reads={"docs": "decontaminated.parquet"},
        writes="near_dup.parquet",
        settings="near_dup",
        per_level=True,
    ),
    Step(
        name="select_filter",
        record="filter",
        run=lambda docs, settings, seed: apply_filters(docs["docs"], settings),
        reads={"docs": "level:near_dup.parquet"},
        writes="docs_train.parquet",
        settings="filters",
        per_level=True,
        after=("decontaminate", "level:near_dup"),
        check=_level_check,
    ),
    Step(
        name="select_order",
        record="order",
        run=lambda docs, settings, seed: order_documents(docs["docs"], settings),
        reads={"docs": "level:docs_train.parquet"},
        writes="order.parquet",
        settings="order",
        per_level=True,
        mem_mb=2000,
        applies=_ordered,
    ),
)


def step(name: str) -> Step:
    return next(s for s in STEPS if s.name == name)


def step_records(layout: Layout) -> dict[str, list[str]]:
    """Every step record a study with design.selection writes, by level (SHARED: the steps every level shares, which
    the analysis adds to each level's cost); empty without design.selection, whose study has no selection analysis."""
    design = layout.design
    levels = list(design.factors.get("selection", {}))
    if not levels:
        return {}
    shared = [s.record_path(layout, SHARED) for s in STEPS if not s.per_level and s.applies(design, None)]
    return {
        SHARED: shared,
        **{
            level: [s.record_path(layout, level) for s in STEPS if s.per_level and s.applies(design, level)]
            for level in levels
        },
    }
