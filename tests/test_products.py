"""The analysis products: one declared list from which the rules, the report's loading and its order follow."""

import importlib
from pathlib import Path

import polars as pl
import pytest
from tokenwatt.analysis.products import (
    FULL_GRID,
    HALVING_ROUNDS,
    POWER_TRACES,
    PRODUCTS,
    STEP_RECORDS,
    STUDY_RECORDS,
    Product,
    Result,
    products_of,
    setting,
)
from tokenwatt.common.codeclosure import closure

SCRIPTS = Path(__file__).resolve().parents[1] / "workflow" / "scripts"
# What the aggregate rule writes under results/analysis/ (workflow/rules/analysis.smk), the files a product may read
AGGREGATE_FILES = {"trials.parquet", "conditions.csv", "changes.csv", "quality.csv", "curves.parquet", "cost.json"}
# What a halving study's allocation product reads besides: its rounds' checkpoint records, the study's records on disk
# and the full grid's table and cost (rules/common.smk's analysis_input)
HALVING_FILES = {HALVING_ROUNDS, STUDY_RECORDS, FULL_GRID}


@pytest.mark.parametrize("made", PRODUCTS, ids=lambda p: p.name)
def test_each_product_names_a_function_of_the_analysis_stage(made):
    module, name = made.function.split(":")
    assert module.startswith("tokenwatt.analysis.")
    assert callable(getattr(importlib.import_module(module), name))


@pytest.mark.parametrize("made", PRODUCTS, ids=lambda p: p.name)
def test_each_product_reads_the_aggregate_or_an_earlier_product_only(made):
    earlier = {f"{p.name}.json" for p in PRODUCTS[: PRODUCTS.index(made)]}
    assert set(made.reads.values()) <= AGGREGATE_FILES | earlier | {STEP_RECORDS, POWER_TRACES, *HALVING_FILES}
    assert set(made.draws.values()) <= AGGREGATE_FILES  # what its figures draw besides its own outputs


def test_product_names_are_unique_and_are_not_an_aggregate_file():
    names = [p.name for p in PRODUCTS]
    assert len(set(names)) == len(names)
    assert not {f"{n}.json" for n in names} & AGGREGATE_FILES


def test_a_study_without_a_selection_factor_has_no_selection_product():
    assert "selection" not in [p.name for p in products_of({"design": {}})]
    assert "selection" in [p.name for p in products_of({"design": {"selection": {"raw": "none"}}})]


def test_the_products_keep_the_reports_order():
    assert [p.name for p in products_of({"design": {"selection": {"raw": "none"}}})] == [
        "stats",
        "curves",
        "selection",
        "scaling",
        "trials",
    ]


def test_a_dotted_setting_is_read_and_an_absent_one_is_none():
    config = {"quality": {"exclude_flagged": False}, "design": {}}
    assert setting(config, "quality.exclude_flagged") is False
    assert setting(config, "design.selection") is None


# The one product whose module builds on another's: the curves' energy-to-target tests are the statistics' RM-ANOVA.
BUILDS_ON = {"curves": {"tokenwatt.analysis.stats"}}


@pytest.mark.parametrize("made", PRODUCTS, ids=lambda p: p.name)
def test_a_products_code_digest_covers_its_own_module_and_no_other_products(made):
    """So that editing one analysis reruns that product's rule only (the rule's code param digests this closure)."""
    files = {p.relative_to(SCRIPTS).as_posix() for p in closure(SCRIPTS / "analyse.py", SCRIPTS, (made.module,))}
    assert made.module.replace(".", "/") + ".py" in files
    others = {p.module for p in PRODUCTS if p.module != made.module}
    imported = {m for m in others if m.replace(".", "/") + ".py" in files}
    assert imported == BUILDS_ON.get(made.name, set())


def test_the_script_alone_digests_no_products_module():
    files = {p.relative_to(SCRIPTS).as_posix() for p in closure(SCRIPTS / "analyse.py", SCRIPTS)}
    assert not {p.module.replace(".", "/") + ".py" for p in PRODUCTS} & files


def test_a_product_runs_its_function_with_its_settings_and_inputs(monkeypatch):
    import tokenwatt.analysis.stats as stats

    seen = {}

    def fake(trials, settings):
        seen.update(trials=trials, settings=settings)
        return Result(data={"n": trials.height})

    monkeypatch.setattr(stats, "stats_product", fake)
    frame = pl.DataFrame({"trial": [1, 2]})
    made = Product(
        name="stats", function="tokenwatt.analysis.stats:stats_product", reads={"trials": "trials.parquet"},
        settings="quality.exclude_flagged", section="statistics", what="statistics",
    )  # fmt: skip
    assert made.run(True, trials=frame).data == {"n": 2}
    assert seen["settings"] is True
