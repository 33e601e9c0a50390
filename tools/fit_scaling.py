"""Fit L(N, D) = E + A/N^alpha + B/D^beta to a table, with intervals over its trial ids and model sizes.

Usage: python tools/fit_scaling.py TABLE --params COL --tokens COL --loss COL
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
of it. Input no fit can use ends with a one-line message and exit code 2.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

# tablecli first: it puts the workflow's library on the path
from tablecli import full, numeric, parser, read_table_file, require, run
from tokenwatt.analysis.scaling.law import LAW_SUMMARY, LawFit, ScalingInputError, check_positive, fit_law
from tokenwatt.analysis.scaling.units import SIZE, TRIAL, lack_of_fit, law_uncertainty

EXAMPLE = """example, on the points the workflow's scaling analysis fitted (a study of 3 or more model sizes):
  python tools/fit_scaling.py results/analysis/scaling_points.csv --params params --tokens tokens --loss eval_loss \\
      --group trial --json fit.json"""


def read_columns(
    path: Path, columns: dict[str, str], labels: dict[str, str | None]
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The numeric columns (option → positive finite values) and the label columns given (--group, --cell, --run →
    values as text), or an error that names the problem."""
    table = read_table_file(path)
    require(table, path, {**columns, **labels})
    full(table, labels)
    values = {
        option: check_positive(numeric(table, col, option), f"column '{col}' ({option})")
        for option, col in columns.items()
    }
    given = {option: table[col].cast(pl.String).to_numpy() for option, col in labels.items() if col}
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


def _parser() -> argparse.ArgumentParser:
    ap = parser(__doc__, EXAMPLE, "points, one row per eval point of one run", "results/analysis/scaling_points.csv")
    ap.add_argument("--params", required=True, help="column of N, the parameter count")
    ap.add_argument("--tokens", required=True, help="column of D, the training tokens")
    ap.add_argument("--loss", required=True, help="column of the loss (nats)")
    ap.add_argument("--group", help="column of the trial ids (rows that share a seed) for the intervals and the screen")
    ap.add_argument("--cell", help="with --group: column of the condition a row belongs to (default: its N and D)")
    ap.add_argument("--run", help="with --group: column whose rows share one run (its eval points)")
    return ap


def fitted(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    """The law fitted to the table, its intervals and (with --group) its lack-of-fit screen: printed and as JSON."""
    if (args.cell or args.run) and not args.group:
        raise ScalingInputError("--cell and --run serve the lack-of-fit screen, which needs --group (trial ids)")
    columns = {"--params": args.params, "--tokens": args.tokens, "--loss": args.loss}
    values, labels = read_columns(args.table, columns, {"--group": args.group, "--cell": args.cell, "--run": args.run})
    N, D, loss = values["--params"], values["--tokens"], values["--loss"]
    fit = fit_law(N, D, loss)
    subjects = labels.get("--group")
    ids = {SIZE: N} if subjects is None else {TRIAL: subjects, SIZE: N}
    uncertainty = law_uncertainty(N, D, loss, ids, fit)
    intervals = uncertainty.intervals(fit)
    screen = None
    if subjects is not None:
        cell = labels.get("--cell")
        cell = cell if cell is not None else np.char.add(np.char.add(N.astype(str), "/"), D.astype(str))
        screen = lack_of_fit(N, D, loss, cell, subjects, fit, run=labels.get("--run"))
    names = {"N": args.params, "D": args.tokens, "loss": args.loss, "group": args.group, "cell": args.cell}
    return report(fit, intervals, uncertainty.method, args.table, screen), {
        "columns": {**names, "run": args.run},
        "fit": fit.to_dict(),
        "units": uncertainty.counts,
        "interval_method": uncertainty.method,
        "intervals": intervals,
        "lack_of_fit": screen,
    }


def main(argv: list[str] | None = None) -> int:
    return run(_parser(), fitted, argv, (ScalingInputError,))


if __name__ == "__main__":
    raise SystemExit(main())
