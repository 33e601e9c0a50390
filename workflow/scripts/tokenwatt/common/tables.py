"""A table a command-line tool is given, read by its extension: the workflow's own Parquet tables
(results/analysis/curves.parquet, trials.parquet) and CSV (its scaling_points.csv, or any spreadsheet's export), so
that the tools run on the workflow's outputs as they are."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # polars is imported where a table is read
    import polars as pl

PARQUET = (".parquet", ".pq")
CSV = (".csv",)


class TableError(ValueError):
    """A table that cannot be read; the message names the file and why."""


def read_table_file(path: Path) -> pl.DataFrame:
    """The table at ``path``: Parquet for .parquet or .pq, CSV for .csv (every row read to infer the columns' types)."""
    import polars as pl

    if not path.is_file():
        raise TableError(f"{path}: no such file")
    suffix = path.suffix.lower()
    if suffix not in PARQUET + CSV:
        raise TableError(f"{path}: not a table this tool reads; give a .csv or .parquet file")
    kind = "Parquet" if suffix in PARQUET else "CSV"
    try:
        return pl.read_parquet(path) if suffix in PARQUET else pl.read_csv(path, infer_schema_length=None)
    except (pl.exceptions.PolarsError, OSError) as e:
        raise TableError(f"{path}: not a readable {kind} table ({str(e).splitlines()[0]})") from e


def table_parser(doc: str, example: str, rows: str, sample: str) -> argparse.ArgumentParser:
    """A command-line tool's parser over one table (CSV or Parquet): its description from ``doc``'s first line, its
    ``example`` as the epilog, and the positional ``table`` argument, one row per ``rows``, e.g. ``sample``."""
    ap = argparse.ArgumentParser(
        description=doc.split("\n")[0], epilog=example, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("table", type=Path, help=f"the table of {rows}: .csv or .parquet (by its extension), e.g. {sample}")
    return ap
