"""Fit L(N, D) = E + A/N^alpha + B/D^beta to a table, with intervals over its trial ids and model sizes.

Usage: python workflow/scripts/fit_scaling.py TABLE --params COL --tokens COL --loss COL
       [--group COL [--cell COL] [--run COL]] [--json OUT]

TABLE is a .csv or .parquet file (read by its extension), e.g. the workflow's results/analysis/scaling_points.csv.

The intervals are the workflow's (``tokenwatt.analysis.scaling.units``): the law refitted without each model
size (the distinct values of --params) and, with --group, without each trial id (the column whose rows
share a seed: a run's eval points, or every run of one seed across the sizes), 95 % t intervals from the
jackknife variances. With --group it also screens the law's lack of fit (``tokenwatt.analysis.scaling.units.lack_of_fit``): the
cell means (rows of one condition: --cell, by default the distinct (--params, --tokens) pairs) against the law
refitted by least squares, judged by the trial × cell noise; --run names the column whose rows share one run (a
run's eval points), whose correlation the screen's bootstrap keeps. Prints the estimates with their intervals and
units, the screen, what the points do not identify, the objective and whether L-BFGS-B converged; --json writes all
of it. Input no fit can use ends with a
one-line message and exit code 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
import polars as pl  # noqa: E402
from tokenwatt.analysis.scaling.law import LAW_SUMMARY, LawFit, ScalingInputError, check_positive, fit_law  # noqa: E402
from tokenwatt.analysis.scaling.units import SIZE, TRIAL, lack_of_fit, law_uncertainty  # noqa: E402
from tokenwatt.common.tables import TableError, read_table_file  # noqa: E402


def read_columns(
    path: Path, columns: dict[str, str], labels: dict[str, str | None]
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The numeric columns (option → values) and the label columns given (--group, --cell, --run → values as
    text), or a ScalingInputError that names the problem."""
    try:
        table = read_table_file(path)  # CSV or Parquet, by its extension
    except TableError as e:
        raise ScalingInputError(str(e)) from e
    labels = {option: col for option, col in labels.items() if col}
    wanted = {**columns, **labels}
    for option, col in wanted.items():
        if col not in table.columns:
            raise ScalingInputError(
                f"{path}: no column '{col}' ({option}); columns present: {', '.join(table.columns)}"
            )
    values = {}
    for option, col in columns.items():
        try:
            x = table[col].cast(pl.Float64, strict=True).to_numpy()
        except pl.exceptions.PolarsError as e:
            raise ScalingInputError(f"column '{col}' ({option}) is not numeric") from e
        values[option] = check_positive(x, f"column '{col}' ({option})")
    given = {}
    for option, col in labels.items():
        if (missing := table[col].null_count()) > 0:
            raise ScalingInputError(f"column '{col}' ({option}): {missing} of {table.height} rows are empty")
        given[option] = table[col].cast(pl.String).to_numpy()
    return values, given


def report(fit: LawFit, intervals: dict[str, dict], method: str, source: str, screen: dict | None) -> str:
    lines = [
        f"L(N, D) = E + A/N^alpha + B/D^beta fitted to {fit.n_points} points of {source}",
        f"  objective (sum of Huber losses, delta = {fit.delta:g}): {fit.objective:.10g}",
        (
            f"  L-BFGS-B {'converged' if fit.success else 'did NOT converge'}: {fit.message}; "
            f"max |gradient| {fit.grad_norm:.2e}, {fit.n_iter} iterations, "
            f"best of {fit.n_starts} refined grid starts"
        ),
        f"  intervals: {method}",
        f"  {'':6} {'estimate':>12}   95 % interval",
    ]
    estimates = fit.to_dict()
    for name in LAW_SUMMARY:
        iv = intervals[name]
        shown = f"[{iv['ci_low']:.5g}, {iv['ci_high']:.5g}]" if iv["ci_low"] is not None else f"none: {iv['why']}"
        lines.append(f"  {name:6} {estimates[name]:12.5g}   {shown}")
    if screen is not None:
        reference = f", against {screen['reference']}" if screen.get("reference") else ""
        lines.append(f"  lack of fit ({screen['cells']} cell means{reference}): {screen['verdict']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("table", type=Path)
    ap.add_argument("--params", required=True, help="column of N, the parameter count")
    ap.add_argument("--tokens", required=True, help="column of D, the training tokens")
    ap.add_argument("--loss", required=True, help="column of the loss (nats)")
    ap.add_argument("--group", help="column of the trial ids (rows that share a seed) for the intervals and the screen")
    ap.add_argument("--cell", help="with --group: column of the condition a row belongs to (default: its N and D)")
    ap.add_argument("--run", help="with --group: column whose rows share one run (its eval points)")
    ap.add_argument("--json", type=Path, help="write the fit and its intervals here")
    args = ap.parse_args(argv)
    try:
        columns = {"--params": args.params, "--tokens": args.tokens, "--loss": args.loss}
        if (args.cell or args.run) and not args.group:
            raise ScalingInputError("--cell and --run serve the lack-of-fit screen, which needs --group (trial ids)")
        values, labels = read_columns(
            args.table, columns, {"--group": args.group, "--cell": args.cell, "--run": args.run}
        )
        N, D, loss = values["--params"], values["--tokens"], values["--loss"]
        fit = fit_law(N, D, loss)
    except ScalingInputError as e:
        print(f"fit_scaling: error: {e}", file=sys.stderr)
        return 2
    subjects = labels.get("--group")
    ids = {SIZE: N} if subjects is None else {TRIAL: subjects, SIZE: N}
    uncertainty = law_uncertainty(N, D, loss, ids, fit)
    intervals = uncertainty.intervals(fit)
    screen = None
    if subjects is not None:
        cell = labels.get("--cell")
        cell = cell if cell is not None else np.char.add(np.char.add(N.astype(str), "/"), D.astype(str))
        screen = lack_of_fit(N, D, loss, cell, subjects, fit, run=labels.get("--run"))
    print(report(fit, intervals, uncertainty.method, args.table, screen))
    if args.json:
        result = {
            "table": str(args.table),
            "columns": {
                "N": args.params,
                "D": args.tokens,
                "loss": args.loss,
                "group": args.group,
                "cell": args.cell,
                "run": args.run,
            },
            "fit": fit.to_dict(),
            "units": uncertainty.counts,
            "interval_method": uncertainty.method,
            "intervals": intervals,
            "lack_of_fit": screen,
        }
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
