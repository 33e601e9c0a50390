"""Fit L(N, D) = E + A/N^alpha + B/D^beta to a table and bootstrap it over subjects.

Usage: python workflow/scripts/fit_scaling.py TABLE.csv --params COL --tokens COL --loss COL
       [--group COL] [--bootstrap 1000] [--seed 0] [--json OUT]

--group names the subject column (a trial: its eval points are resampled together); without it each
row is its own subject. Prints the estimates with bootstrap SE and 95 % percentile intervals, the
objective and whether L-BFGS-B converged; --json writes all of it. Input no fit can use ends with a
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
from tokenwatt.analysis.scaling import (  # noqa: E402
    LAW_SUMMARY,
    BootstrapResult,
    LawFit,
    ScalingInputError,
    bootstrap,
    check_positive,
    fit_law,
)


def read_columns(
    path: Path, columns: dict[str, str], group: str | None
) -> tuple[dict[str, np.ndarray], np.ndarray | None]:
    """The numeric columns (option → values) and the subjects, or a ScalingInputError that names the problem."""
    if not path.is_file():
        raise ScalingInputError(f"{path}: no such file")
    try:
        table = pl.read_csv(path, infer_schema_length=None)
    except pl.exceptions.PolarsError as e:
        raise ScalingInputError(f"{path}: not a readable CSV table ({str(e).splitlines()[0]})") from e
    wanted = {**columns, **({"--group": group} if group else {})}
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
    subjects = None
    if group:
        if (missing := table[group].null_count()) > 0:
            raise ScalingInputError(f"column '{group}' (--group): {missing} of {table.height} rows are empty")
        subjects = table[group].cast(pl.String).to_numpy()
    return values, subjects


def report(fit: LawFit, boot: BootstrapResult | None, source: str) -> str:
    lines = [
        f"L(N, D) = E + A/N^alpha + B/D^beta fitted to {fit.n_points} points of {source}",
        f"  objective (sum of Huber losses, delta = {fit.delta:g}): {fit.objective:.10g}",
        (
            f"  L-BFGS-B {'converged' if fit.success else 'did NOT converge'}: {fit.message}; "
            f"max |gradient| {fit.grad_norm:.2e}, {fit.n_iter} iterations, "
            f"best of {fit.n_starts} refined grid starts"
        ),
    ]
    if boot is not None:
        d = boot.to_dict()
        lines.append(
            f"  bootstrap over {d['n_subjects']} subjects, seed {d['seed']}: {d['n_resamples']} resamples, "
            f"{d['n_converged']} converged, {d['n_not_converged']} did not, {d['n_skipped']} skipped "
            "(their subjects did not span 3 N, 3 D and 5 points); SE and interval over the converged"
        )
    summary = boot.summary() if boot is not None else None
    lines.append(f"  {'':6} {'estimate':>12} {'SE':>12}   95 % interval")
    estimates = fit.to_dict()
    for name in LAW_SUMMARY:
        row = f"  {name:6} {estimates[name]:12.5g}"
        if summary:
            s = summary[name]
            row += f" {s['se']:12.4g}   [{s['ci_low']:.5g}, {s['ci_high']:.5g}]"
        lines.append(row)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("table", type=Path)
    ap.add_argument("--params", required=True, help="column of N, the parameter count")
    ap.add_argument("--tokens", required=True, help="column of D, the training tokens")
    ap.add_argument("--loss", required=True, help="column of the loss (nats)")
    ap.add_argument("--group", help="column of the subject (trial) ids for the bootstrap")
    ap.add_argument("--bootstrap", type=int, default=1000, help="resamples (0: none)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, help="write the fit and the bootstrap here")
    args = ap.parse_args(argv)
    if args.bootstrap < 0:
        ap.error("--bootstrap must be 0 or more")
    try:
        columns = {"--params": args.params, "--tokens": args.tokens, "--loss": args.loss}
        values, subjects = read_columns(args.table, columns, args.group)
        N, D, loss = values["--params"], values["--tokens"], values["--loss"]
        fit = fit_law(N, D, loss)
    except ScalingInputError as e:
        print(f"fit_scaling: error: {e}", file=sys.stderr)
        return 2
    boot = None
    if args.bootstrap > 0:
        boot = bootstrap(N, D, loss, subjects, fit=fit, n_resamples=args.bootstrap, seed=args.seed)
    print(report(fit, boot, args.table))
    if args.json:
        result = {
            "table": str(args.table),
            "columns": {"N": args.params, "D": args.tokens, "loss": args.loss, "group": args.group},
            "fit": fit.to_dict(),
            "bootstrap": boot.to_dict() if boot else None,
        }
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
