"""The analysis products: every analysis the study runs on the aggregate's tables, declared once.

A product is one library function, the files it reads, the config key it is handed, the JSON it writes
(``results/analysis/<name>.json``, with any CSV tables beside it), the report section that shows it and the figures it
draws from them. The workflow makes one rule per product and its interim twin from this list (``rules/analysis.smk``),
and one figures rule per product that has figures; one script runs every product (``scripts/analyse.py``) and one
draws every product's figures (``scripts/product_figures.py``), and the report loads each product's JSON by name and
shows the sections in this order. A new analysis is its module, its report section and one entry here; a figure of
it, its drawing function (named in the entry) and its caption. The figures of the trials table are a product's too
(``trials``), so every figure takes the one road from its product's files to the report.

The function is named as ``module:function`` and imported by the script that runs it, so that each product's rule
digests its own module's code only: a change to the scaling analysis reruns the scaling rule, not the statistics.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import polars as pl

# What a product may read, besides the aggregate's files under results/analysis/ (named by file) and another
# product's JSON (<name>.json): each selection step's record from the data stage, by level; and the power trace of
# one trial per cell (the first; the interim twin's: the first finished), by (cell, trial).
STEP_RECORDS = "selection records"
POWER_TRACES = "power traces"
# A halving study's round records (results/allocation/round<k>.json, in round order; the interim twin's: those written
# so far); every trial record and stretch record of the study on disk (what it spent, whichever rounds ask for them
# now); and the trials table and cost of the same ladder trained in full (allocation.full_grid's, where they exist).
HALVING_ROUNDS = "halving rounds"
STUDY_RECORDS = "study records on disk"
FULL_GRID = "full grid"


@dataclass(frozen=True)
class Result:
    """What a product's function returns: its JSON, the tables written beside it as CSV (by file stem), and one line
    for the job's log."""

    data: dict[str, Any]
    tables: Mapping[str, pl.DataFrame] = field(default_factory=dict)
    summary: str = ""


@dataclass(frozen=True)
class Product:
    """One analysis: ``function`` (``module:function`` in this package) is called with the files in ``reads`` (keyword
    → file under results/analysis/, or STEP_RECORDS) and ``settings`` (the config value at that dotted key) and
    returns a Result; ``section`` is the report section that shows it; ``requires`` a dotted config key that must be
    set for the product to exist in a study (design.selection: no data selection, no selection analysis).
    ``figures`` names the figures its section shows, drawn by ``draw`` (``module:function`` in tokenwatt.presentation,
    called with the product's JSON, its tables by name and whether energy was estimated, and returning each figure
    by name) from the product's outputs and the aggregate's tables in ``draws`` (keyword → file under
    results/analysis/; the trials product's figures draw those tables themselves): a figure shows what was computed,
    never a recomputation."""

    name: str
    function: str
    reads: Mapping[str, str]
    settings: str
    section: str
    what: str
    tables: tuple[str, ...] = ()
    table_category: str = "Tables"
    requires: str | None = None
    figures: tuple[str, ...] = ()
    draw: str | None = None
    draws: Mapping[str, str] = field(default_factory=dict)

    @property
    def module(self) -> str:
        return self.function.split(":", 1)[0]

    @property
    def draw_module(self) -> str | None:
        return self.draw.split(":", 1)[0] if self.draw else None

    def draw_figures(self, data: Mapping[str, Any], tables: Mapping[str, pl.DataFrame], estimated: bool) -> dict:
        assert self.draw is not None, f"the {self.name} product draws no figure"
        module, name = self.draw.split(":", 1)
        return getattr(importlib.import_module(module), name)(data, tables, estimated)

    def run(self, settings: Any, **inputs: Any) -> Result:
        module, name = self.function.split(":", 1)
        return getattr(importlib.import_module(module), name)(settings=settings, **inputs)

    def applies(self, config: Mapping[str, Any]) -> bool:
        return self.requires is None or bool(setting(config, self.requires))


def setting(config: Mapping[str, Any], key: str) -> Any:
    """The config value at a dotted key (``quality.exclude_flagged``); None where a level of it is absent."""
    value: Any = config
    for part in key.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    return value


# In the report's order: each product's section follows the one before it.
PRODUCTS: tuple[Product, ...] = (
    # First: a halving study's answer is the configuration it chose, and what that cost.
    Product(
        name="allocation",
        function="tokenwatt.analysis.halving_answer:allocation_product",
        reads={"rounds": HALVING_ROUNDS, "on_disk": STUDY_RECORDS, "full_grid": FULL_GRID},
        settings="allocation",
        section="allocation",
        what="energy-budgeted halving",
        tables=("halving_rounds",),
        requires="allocation.method",
    ),
    Product(
        name="stats",
        function="tokenwatt.analysis.stats:stats_product",
        reads={"trials": "trials.parquet"},
        settings="quality.exclude_flagged",
        section="statistics",
        what="statistics",
        tables=("anova", "posthoc"),
        table_category="Tests",
    ),
    Product(
        name="devices",
        function="tokenwatt.analysis.devices:devices_product",
        reads={"trials": "trials.parquet"},
        settings="design.devices",
        section="devices",
        what="device-count comparison",
        tables=("devices",),
        table_category="Tests",
        requires="design.devices",
    ),
    Product(
        name="curves",
        function="tokenwatt.analysis.curves.summary:curves_product",
        reads={"trials": "trials.parquet", "curves": "curves.parquet", "cost": "cost.json"},
        settings="analysis",
        section="curves",
        what="eval curves analysis",
    ),
    Product(
        name="selection",
        function="tokenwatt.analysis.selection.cost:selection_product",
        reads={"trials": "trials.parquet", "curves": "curves.json", "records": STEP_RECORDS},
        settings="design.selection",
        section="selection",
        what="data selection analysis",
        requires="design.selection",
    ),
    Product(
        name="scaling",
        function="tokenwatt.analysis.scaling.study:scaling_product",
        reads={"trials": "trials.parquet", "curves": "curves.parquet"},
        settings="scaling",
        section="scaling",
        what="scaling analysis",
        tables=("scaling_points", "scaling_sizes"),
        figures=("scaling_loss", "scaling_energy", "scaling_frontier", "scaling_contours"),
        draw="tokenwatt.presentation.scaling_figures:draw",
    ),
    # Last: its section is the figures the other sections do not show, which closes the products' part of the report.
    Product(
        name="trials",
        function="tokenwatt.analysis.traces:trials_product",
        reads={"trials": "trials.parquet", "traces": POWER_TRACES},
        settings="cost.currency",
        section="figures",
        what="trial-table figures",
        tables=("trace_samples",),
        figures=(
            "pe_by_budget",
            "efficiency_layers",
            "power_energy_by_budget",
            "time_by_budget",
            "perplexity_vs_tokens",
            "tradeoff",
            "power_traces",
            "measurement_quality",
            "quality_vs_cost",
            "quality_vs_energy",
            "memory_vs_energy",
        ),
        draw="tokenwatt.presentation.figures:draw",
        draws={"conditions": "conditions.csv", "changes": "changes.csv", "curves": "curves.parquet"},
    ),
)


def products_of(config: Mapping[str, Any]) -> tuple[Product, ...]:
    """The products a study has, in the report's order."""
    return tuple(p for p in PRODUCTS if p.applies(config))


def product(name: str) -> Product:
    return next(p for p in PRODUCTS if p.name == name)
