"""The energy-optimal frontier of a table of points: N*, D*, L* at each training energy by three estimators.

Usage: python tools/fit_frontier.py TABLE --params COL --tokens COL --energy COL --loss COL
       [--group COL] [--flops-per-token COL] [--energies J [J ...]] [--json OUT]

TABLE is a .csv or .parquet file (read by its extension), e.g. the workflow's results/analysis/scaling_points.csv.
Each row is one point: a run's parameter count, its tokens so far, its cumulative training energy (J) and its eval
loss (nats), at a point that may stand for its budget (a constant learning rate, or a schedule's own last step).
The estimators (``tokenwatt.analysis.scaling.frontier``): the lower envelope of (energy, loss), iso-energy slices across the
sizes, and the law L(N, D) with e(N); each with jackknife intervals over the model sizes (the distinct values of
--params) and, with --group, the trial ids (rows that share a seed). The energies default to seven log-spaced ones
across the table's measured range; an energy outside it is refused. Prints one line per energy and approach; --json
writes ``approaches`` → ``envelope`` | ``isoenergy`` | ``law`` → ``estimates``, a list of ``{energy_j, n_opt, n_low,
n_high, d_opt, loss_opt, why, ...}`` (nulls with a ``why`` where an approach refuses), and ``agreement``: per
energy, each pair's ``log_difference`` of N* with its paired jackknife interval (``log_low``, ``log_high``,
``width_factor``), ``contradict`` where it excludes 0 and ``verdict``, and ``left_out`` (a law in doubt);
``energy_vs_flop`` the slices' energy-optimal N* over the FLOP-optimal N* of the compute it trains, per energy, its
compute each point's training FLOPs so far: its FLOPs per token (--flops-per-token COL, as scaling_points.csv's
flops_per_token) times its tokens; without it 6·N·D, N as --params counts it.
Input no estimator can use (at no energy does any of the three give an N*: one model size, say) ends with a one-line
message and exit code 2.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

# fit_scaling's columns reader, and through it tablecli, which puts the workflow's library on the path
from fit_scaling import read_columns
from tablecli import parser, run
from tokenwatt.analysis.scaling.frontier import FrontierPoints, frontier
from tokenwatt.analysis.scaling.law import ScalingInputError

EXAMPLE = """example, on the points the workflow's scaling analysis fitted (a study of 3 or more model sizes):
  python tools/fit_frontier.py results/analysis/scaling_points.csv --params params --tokens tokens \\
      --energy train_energy_j --loss eval_loss --group trial --flops-per-token flops_per_token
and on the example table that ships with the docs (five model sizes, 3 trial ids; synthetic):
  python tools/fit_frontier.py docs/examples/frontier-points.csv --params params --tokens tokens \\
      --energy joules --loss loss --group seed"""


def _shown(value: float | None, low: float | None, high: float | None) -> str:
    if value is None:
        return "—"
    band = f" [{low:.4g}, {high:.4g}]" if low is not None else " [no interval]"
    return f"{value:.4g}{band}"


def _paired_tests(agreement: dict) -> list[str]:
    """Each pair's test of log N* at one energy: its verdict with the difference and its paired interval, or why it
    was not tested; and each approach left out of the test, with why."""
    lines = []
    for t in agreement["pairs"]:
        pair = " − ".join(t["approaches"])
        if t["verdict"] is None:
            lines.append(f"    paired test of log N*, {pair}: not tested ({t['why']})")
        else:
            band = f"{t['log_difference']:.3g} [{t['log_low']:.3g}, {t['log_high']:.3g}]"
            lines.append(f"    paired test of log N*, {pair}: {band}: {t['verdict']}")
    return lines + [f"    paired test of log N*: {why}" for why in agreement["left_out"].values()]


def report(result: dict, source: Path) -> str:
    lines = [f"energy-optimal frontier of {source}: intervals {next(iter(result['approaches'].values()))['intervals']}"]
    for j, energy in enumerate(result["energies_j"]):
        lines.append(f"  at {energy:.4g} J:")
        for name, approach in result["approaches"].items():
            e = approach["estimates"][j]
            if e["n_opt"] is None:
                lines.append(f"    {name:10} refused: {e['why']}")
            else:
                beyond = " (beyond the sizes measured)" if e["beyond_sizes"] else ""
                lines.append(
                    f"    {name:10} N* {_shown(e['n_opt'], e['n_low'], e['n_high'])}{beyond}, "
                    f"D* {_shown(e['d_opt'], e['d_low'], e['d_high'])}, L* {e['loss_opt']:.4g}"
                )
        lines += _paired_tests(result["agreement"][j])
        versus = result["energy_vs_flop"]["estimates"][j]
        lines.append(
            f"    energy- / FLOP-optimal N* (slices): {_shown(versus['ratio'], versus['ratio_low'], versus['ratio_high'])}"
            + (f" ({versus['why']})" if versus["why"] else f" at {versus['compute_flop']:.4g} FLOPs")
        )
    return "\n".join(lines)


def unusable(result: dict, source: Path, sizes: int, params: str) -> str | None:
    """Why no estimator gives an N* at any energy, in one line (each approach's first reason), or None where one does:
    a table of one model size would otherwise print every approach's refusal at every energy."""
    approaches = result["approaches"]
    if any(e["n_opt"] is not None for a in approaches.values() for e in a["estimates"]):
        return None
    reasons = "; ".join(f"{name}: {a['estimates'][0]['why']}" for name, a in approaches.items())
    return f"no estimator can use {source} ({sizes} model size(s) in column '{params}'): {reasons}"


def _parser() -> argparse.ArgumentParser:
    ap = parser(__doc__, EXAMPLE, "points, one row per eval point of one run", "results/analysis/scaling_points.csv")
    ap.add_argument("--params", required=True, help="column of N, the parameter count")
    ap.add_argument("--tokens", required=True, help="column of D, the tokens trained so far")
    ap.add_argument("--energy", required=True, help="column of the cumulative training energy (J)")
    ap.add_argument("--loss", required=True, help="column of the eval loss (nats)")
    ap.add_argument("--group", help="column of the trial ids (rows that share a seed) for the intervals")
    ap.add_argument("--flops-per-token", help="column of each point's training FLOPs per token (default: 6 × N)")
    ap.add_argument("--energies", type=float, nargs="+", help="energies (J) to report at, inside the table's range")
    return ap


def estimated(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    """The frontier by the three estimators at each energy: printed and as JSON."""
    columns = {"--params": args.params, "--tokens": args.tokens, "--energy": args.energy, "--loss": args.loss}
    if args.flops_per_token:
        columns["--flops-per-token"] = args.flops_per_token
    values, labels = read_columns(args.table, columns, {"--group": args.group})
    points = FrontierPoints.of(
        values["--params"],
        values["--tokens"],
        values["--energy"],
        values["--loss"],
        labels.get("--group"),
        None if not args.flops_per_token else values["--flops-per-token"] * values["--tokens"],
    )
    counted = f"the column {args.flops_per_token} × tokens" if args.flops_per_token else "6ND"
    result = frontier(points, args.energies, flops=counted)
    if why := unusable(result, args.table, len(set(points.N.tolist())), args.params):
        raise ScalingInputError(why)
    names = {"N": args.params, "D": args.tokens, "energy": args.energy, "loss": args.loss, "group": args.group}
    return report(result, args.table), {"columns": {**names, "flops_per_token": args.flops_per_token}, **result}


def main(argv: list[str] | None = None) -> int:
    return run(_parser(), estimated, argv, (ScalingInputError,))


if __name__ == "__main__":
    raise SystemExit(main())
