"""The analysis tables that travel as CSV, with their column types fixed for writing and reading."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from ..common.files import read_table

# Column types of conditions.csv and changes.csv, for writing and for reading back: an all-null
# column (e.g. energy with meter none) would otherwise come back from CSV as strings.
CONDITIONS_SCHEMA = {
    "series": pl.String,
    "budget": pl.Int64,
    "measure": pl.String,
    "scale": pl.String,
    "n": pl.Int64,
    "mean": pl.Float64,
    "sd": pl.Float64,
    "center": pl.Float64,
    "ci95_low": pl.Float64,
    "ci95_high": pl.Float64,
    "nonpositive": pl.Int64,
    "change": pl.Float64,
    "change_ci95_low": pl.Float64,
    "change_ci95_high": pl.Float64,
    "change_n": pl.Int64,
    "change_unit": pl.String,
}
CHANGES_SCHEMA = {
    "series": pl.String,
    "from_budget": pl.Int64,
    "to_budget": pl.Int64,
    "perplexity_reduction_pct": pl.Float64,
    "pe_drop_pct": pl.Float64,
    "power_change_pct": pl.Float64,
    "energy_change_pct": pl.Float64,
}


# The scaling product's tables: the points its law was fitted to and the trials its e(N) was (what its figures draw).
SCALING_TABLES = {
    "scaling_points": {
        "cell": pl.String,
        "trial": pl.Int64,
        "point": pl.Int64,
        "params": pl.Int64,
        "non_embedding_params": pl.Int64,
        "tokens": pl.Int64,
        "eval_loss": pl.Float64,
        "train_energy_j": pl.Float64,
        "flops_per_token": pl.Float64,
        "hardware": pl.String,
    },
    "scaling_sizes": {
        "cell": pl.String,
        "trial": pl.Int64,
        "series": pl.String,
        "budget": pl.Int64,
        "params": pl.Int64,
        "real_tokens": pl.Int64,
        "non_embedding_params": pl.Int64,
        "joules_per_token": pl.Float64,
        "dynamic_joules_per_token": pl.Float64,
        "flops_per_token": pl.Float64,
        "hardware": pl.String,
    },
}
# Every product table read back with fixed types (a CSV gives an all-null column back as strings).
PRODUCT_TABLES = {
    **SCALING_TABLES,
    # the trials product's: the power figure's samples, one trial per cell, device by device
    "trace_samples": {
        "cell": pl.String,
        "trial": pl.Int64,
        "device": pl.Int64,
        "t_s": pl.Float64,
        "power_w": pl.Float64,
    },
}


def read_product_table(path: str | Path, name: str) -> pl.DataFrame:
    """A product's table ``name`` as it wrote it; its text columns' "" (which CSV gives back as null) restored."""
    schema = PRODUCT_TABLES[name]
    table = pl.read_csv(path, schema=schema)
    return table.with_columns(pl.col(c).fill_null("") for c, kind in schema.items() if kind == pl.String)


def read_conditions(path: str | Path) -> pl.DataFrame:
    return _series_text(pl.read_csv(path, schema=CONDITIONS_SCHEMA))


def read_changes(path: str | Path) -> pl.DataFrame:
    return _series_text(pl.read_csv(path, schema=CHANGES_SCHEMA))


def read_aggregate_table(path: str | Path, file: str) -> pl.DataFrame:
    """One of the aggregate's tables that a product's figures draw (``Product.draws``), with its column types: a CSV
    by its schema, a Parquet file as written."""
    readers = {"conditions.csv": read_conditions, "changes.csv": read_changes}
    return readers[file](path) if file in readers else read_table(path, f"{file} table")


def series_blocks(table: pl.DataFrame) -> list[tuple[str, pl.DataFrame]]:
    """The rows of each series (the levels of every factor but the budget's) in the design's order, the order
    the rows come in; a table without the column is one series, ""."""
    if "series" not in table.columns:
        return [("", table)]
    return [(s, table.filter(pl.col("series") == s)) for s in dict.fromkeys(table["series"].to_list())]


def _series_text(table: pl.DataFrame) -> pl.DataFrame:
    """A one-factor study's series is "", which CSV gives back as null."""
    return table.with_columns(pl.col("series").fill_null(""))
