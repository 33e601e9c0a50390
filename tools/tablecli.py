"""The command-line tools' one argument layer: a tool over one table (CSV or Parquet, read by its extension), its
columns named by options, its result printed and, with --json, written; input it cannot use refused in one line with
exit code 2, never a traceback.

A tool gives ``parser`` its docstring, example and what a row is, adds its own options, and hands ``run`` a function
from the parsed arguments to the printed text and the JSON. The tools import the workflow's library
(workflow/scripts/tokenwatt), so that a table outside the workflow gets the same analysis as the study's own.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

# The library the tools share with the workflow's rules: importable from a checkout, whatever the working directory.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workflow" / "scripts"))

if TYPE_CHECKING:  # polars is imported where a table is read: --help stays quick
    import numpy as np
    import polars as pl

PARQUET = (".parquet", ".pq")
CSV = (".csv",)


class InputError(ValueError):
    """A table or option a tool cannot use; the message names which, in one line."""


def read_table_file(path: Path) -> pl.DataFrame:
    """The table at ``path``: Parquet for .parquet or .pq, CSV for .csv (every row read to infer the columns' types)."""
    import polars as pl

    if not path.is_file():
        raise InputError(f"{path}: no such file")
    suffix = path.suffix.lower()
    if suffix not in PARQUET + CSV:
        raise InputError(f"{path}: not a table this tool reads; give a .csv or .parquet file")
    kind = "Parquet" if suffix in PARQUET else "CSV"
    try:
        return pl.read_parquet(path) if suffix in PARQUET else pl.read_csv(path, infer_schema_length=None)
    except (pl.exceptions.PolarsError, OSError) as e:
        raise InputError(f"{path}: not a readable {kind} table ({str(e).splitlines()[0]})") from e


def require(table: pl.DataFrame, path: Path, columns: Mapping[str, str | None]) -> None:
    """Every column ``columns`` names (option → column; None: the option not given) is in ``table``."""
    for option, col in columns.items():
        if col is not None and col not in table.columns:
            raise InputError(f"{path}: no column '{col}' ({option}); columns present: {', '.join(table.columns)}")


def full(table: pl.DataFrame, columns: Mapping[str, str | None]) -> None:
    """No row of a column ``columns`` names is empty (a numeric column's own check may say more than "empty")."""
    for option, col in columns.items():
        if col is not None and (missing := table[col].null_count()) > 0:
            raise InputError(f"column '{col}' ({option}): {missing} of {table.height} rows are empty")


def numeric(table: pl.DataFrame, col: str, option: str) -> np.ndarray:
    """Column ``col`` as float64 values, or an InputError that says it is not numeric."""
    import polars as pl

    try:
        return table[col].cast(pl.Float64, strict=True).to_numpy()
    except pl.exceptions.PolarsError as e:
        raise InputError(f"column '{col}' ({option}) is not numeric") from e


def parser(doc: str, example: str, rows: str, sample: str) -> argparse.ArgumentParser:
    """A tool's parser: its description from ``doc``'s first line, its ``example`` as the epilog, the positional
    ``table`` (one row per ``rows``, e.g. ``sample``) and --json; the tool adds its column options."""
    ap = argparse.ArgumentParser(
        description=doc.split("\n")[0], epilog=example, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("table", type=Path, help=f"the table of {rows}: .csv or .parquet (by its extension), e.g. {sample}")
    ap.add_argument("--json", type=Path, help="write the result here as JSON")
    return ap


def run(
    ap: argparse.ArgumentParser,
    compute: Callable[[argparse.Namespace], tuple[str, dict[str, Any]]],
    argv: list[str] | None = None,
    refusals: tuple[type[Exception], ...] = (),
) -> int:
    """Parse ``argv``, print what ``compute`` says and write its JSON (--json); an InputError or one of ``refusals``
    (the library's own, such as ScalingInputError) ends in one line, "<tool>: error: ...", and exit code 2."""
    args = ap.parse_args(argv)
    try:
        text, result = compute(args)
    except (InputError, *refusals) as e:
        print(f"{Path(ap.prog).stem}: error: {e}", file=sys.stderr)
        return 2
    print(text)
    if args.json:
        args.json.write_text(json.dumps({"table": str(args.table), **result}, indent=2))
    return 0
