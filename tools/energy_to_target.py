"""Energy to a target loss per condition, the censored trials counted, from any table of eval points.

Usage: python tools/energy_to_target.py TABLE --condition COL --trial COL --energy COL --loss COL
       (--target NATS | --target-perplexity P) [--json OUT]

TABLE is a .csv or .parquet file (read by its extension), e.g. the workflow's own results/analysis/curves.parquet.
Each row is one eval point of one trial: its condition, its trial id (the rows that share a seed across
conditions), the cumulative training energy at that point (J) and the eval loss there. A trial reached the target
where its loss first fell to the target or below (log energy interpolated between the points around it, as the
workflow does); the target is a loss in the --loss column's units (nats, with --target) or a perplexity (with
--target-perplexity, whose loss is its natural log). A trial that never reached it is censored at its last point's
energy (it needed more), one already there at its first point needed at most that point's energy. The analysis is the
workflow's (``tokenwatt.analysis.curves.targets``): per condition the Kaplan–Meier median energy with its 95 %
interval and how many reached the target; per pair of conditions (later over earlier, in the table's order) the
energy ratio paired by trial id with its 95 % interval, p and Holm-adjusted p, every trial id in both conditions in
it. Prints them; --json writes them. Input it cannot read ends with a one-line message naming the column or value,
and exit code 2.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

import polars as pl

# tablecli first: it puts the workflow's library on the path
from tablecli import InputError, full, numeric, parser, read_table_file, require, run
from tokenwatt.analysis.curves.targets import (
    Target,
    energy_to_target,
    energy_to_target_comparisons,
    energy_to_target_summary,
)

EXAMPLE = """example, on the workflow's own table of eval points (a multi-factor study: --condition cell):
  python tools/energy_to_target.py results/analysis/curves.parquet --condition budget --trial trial \\
      --energy train_energy_j --loss eval_loss --target-perplexity 9.45
and on the example table that ships with the docs (five model sizes, 3 trial ids; synthetic):
  python tools/energy_to_target.py docs/examples/frontier-points.csv --condition params --trial seed \\
      --energy joules --loss loss --target 4"""


def read_points(path: Path, columns: dict[str, str]) -> tuple[pl.DataFrame, list[str]]:
    """The table as the workflow's curves (one run per condition × trial, points in energy order) and the conditions
    in the order they first appear."""
    table = read_table_file(path)
    require(table, path, columns)
    full(table, columns)
    if "series" in table.columns and columns["--condition"] != "series" and table["series"].n_unique() > 1:
        raise InputError(
            f"{path}: column 'series' holds {table['series'].n_unique()} series, whose runs of one trial id would be "
            "mixed into one: filter the table to one series, or pass --condition series"
        )
    for option in ("--energy", "--loss"):
        col = columns[option]
        values = pl.Series(numeric(table, col, option))
        if not values.is_finite().all() or (option == "--energy" and (values < 0).any()):
            bound = " and ≥ 0 J" if option == "--energy" else ""
            raise InputError(f"column '{col}' ({option}): every value must be finite{bound}")
    points = table.select(
        pl.col(columns["--condition"]).cast(pl.String).alias("cell"),
        pl.col(columns["--trial"]).cast(pl.String).alias("trial_id"),
        pl.col(columns["--energy"]).cast(pl.Float64).alias("train_energy_j"),
        pl.col(columns["--loss"]).cast(pl.Float64).alias("eval_loss"),
    )
    if points.select("cell", "trial_id", "train_energy_j").is_duplicated().any():
        raise InputError(
            f"a trial holds two eval points at the same energy ({columns['--condition']}, {columns['--trial']}, "
            f"{columns['--energy']} repeated): one row per eval point"
        )
    conditions = list(dict.fromkeys(points["cell"].to_list()))
    trial_ids = {t: i for i, t in enumerate(sorted(set(points["trial_id"].to_list())))}
    points = points.with_columns(
        series=pl.lit(""),
        budget=pl.col("cell").replace_strict({c: i for i, c in enumerate(conditions)}, return_dtype=pl.Int64),
        trial=pl.col("trial_id").replace_strict(trial_ids, return_dtype=pl.Int64),
    ).sort("budget", "trial", "train_energy_j")
    points = points.with_columns(
        point=pl.int_range(1, pl.len() + 1).over("cell", "trial_id"),
        # energy stands in for the position axis the workflow interpolates on (real tokens): both grow together
        real_tokens=pl.col("train_energy_j"),
        train_s=pl.lit(None, pl.Float64),
        final=pl.int_range(pl.len()).over("cell", "trial_id") == pl.len().over("cell", "trial_id") - 1,
    )
    return points, conditions


def _joules(x: float | None) -> str:
    return f"{x:.6g} J" if x is not None else "∞"


def _p(x: float | None) -> str:
    return f"{x:.3g}" if x is not None else "none"


def report(
    summary: list[dict],
    pairs: list[dict],
    conditions: list[str],
    target: float,
    source: Path,
    perplexity: float | None = None,
) -> str:
    named = f"perplexity {perplexity:g} (loss {target:.4g} nats)" if perplexity is not None else f"loss {target:g}"
    lines = [
        f"energy to {named} from {source}: Kaplan–Meier median per condition, censored trials included",
        f"  {'condition':20} {'trials':>6} {'reached':>7} {'censored':>8} {'at first point':>14}   median [95 % CI]",
    ]
    for r in summary:
        median = (
            f"{_joules(r['energy_median_j'])} [{_joules(r['energy_ci95_low_j'])}, {_joules(r['energy_ci95_high_j'])}]"
            if r["energy_median_j"] is not None
            else "none: fewer than half reached it"
        )
        lines.append(
            f"  {conditions[r['budget']]:20} {r['n']:>6} {r['n_reached']:>7} {r['n_censored']:>8} "
            f"{r['n_at_first_point']:>14}   {median}"
        )
    lines.append(
        "energy ratio, paired by trial id (later condition over earlier): ratio [95 % CI], p, p Holm under a normal "
        "law of log energy; the rank test's p Holm assumes no law"
    )
    for r in pairs:
        name = f"{conditions[r['budget_b']]} / {conditions[r['budget_a']]}"
        if r["ratio"] is None:
            lines.append(f"  {name}: none: {r['status']}")
            continue
        low = f"{r['ci95_low']:.4g}" if r["ci95_low"] is not None else "0"
        high = f"{r['ci95_high']:.4g}" if r["ci95_high"] is not None else "∞"
        lines.append(
            f"  {name}: {r['ratio']:.4g} [{low}, {high}], p = {r['p']:.3g}, p Holm = {r['p_holm']:.3g}, rank test "
            f"p Holm = {_p(r['rank_p_holm'])} ({r['n_pairs']} trial ids, {r['n_exact']} crossed it between points in "
            "both)"
        )
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    ap = parser(__doc__, EXAMPLE, "eval points, one row per point of one trial", "results/analysis/curves.parquet")
    ap.add_argument("--condition", required=True, help="column of the condition (e.g. the token budget)")
    ap.add_argument("--trial", required=True, help="column of the trial id (rows that share a seed across conditions)")
    ap.add_argument("--energy", required=True, help="column of the cumulative training energy at the point (J)")
    ap.add_argument("--loss", required=True, help="column of the eval loss at the point (nats for --target-perplexity)")
    target = ap.add_mutually_exclusive_group(required=True)
    target.add_argument(
        "--target", type=float, metavar="LOSS", help="the loss to reach, in the --loss column's units (nats)"
    )
    target.add_argument(
        "--target-perplexity",
        type=float,
        metavar="P",
        help="the perplexity to reach: the loss ln P, the --loss column in nats",
    )
    return ap


def target_loss(args: argparse.Namespace) -> float:
    """The loss to reach: --target as given, or the natural log of --target-perplexity (a perplexity is e^loss)."""
    if args.target_perplexity is not None:
        if not (math.isfinite(args.target_perplexity) and args.target_perplexity > 1):
            raise InputError(f"--target-perplexity {args.target_perplexity}: a perplexity to reach is a number above 1")
        return math.log(args.target_perplexity)
    if not math.isfinite(args.target):
        raise InputError(f"--target {args.target}: the loss to reach is a finite number")
    return args.target


def reached(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    """Each condition's median energy to the target and the paired ratios between conditions: printed and as JSON."""
    columns = {"--condition": args.condition, "--trial": args.trial, "--energy": args.energy, "--loss": args.loss}
    target = target_loss(args)
    points, conditions = read_points(args.table, columns)
    got = energy_to_target(points, [Target("loss", target)])
    summary = energy_to_target_summary(got).to_dicts()
    pairs = [c.to_dict() for c in energy_to_target_comparisons(got)]
    return report(summary, pairs, conditions, target, args.table, args.target_perplexity), {
        "columns": {k.removeprefix("--"): v for k, v in columns.items()},
        "target_loss": target,
        "target_perplexity": args.target_perplexity,
        "conditions": [
            {"condition": conditions[r["budget"]], **{k: v for k, v in r.items() if k.startswith(("n", "energy"))}}
            for r in summary
        ],
        "ratios": [
            {
                "condition": conditions[r["budget_b"]],
                "over": conditions[r["budget_a"]],
                **{k: v for k, v in r.items() if k not in ("budget_a", "budget_b", "series", "target")},
            }
            for r in pairs
        ],
    }


def main(argv: list[str] | None = None) -> int:
    return run(_parser(), reached, argv)


if __name__ == "__main__":
    raise SystemExit(main())
