"""Benchmark: where the embedded default study's wall time goes.

Runs the default study from nothing in a fresh copy of the project
(``snakemake --cores 2 --resources gpu=1``, as `make study` does) and splits its wall time into
training (the metered windows, Σ train_s), the rest of each trial inside run_trial
(Σ run_s − Σ train_s: model build, idle baseline, throughput checks, eval), and everything else
(each trial process's start and exit, Snakemake, data preparation, device profile, analysis,
report). Prints how many trials the quality rules flagged (and why), the median training time per budget, the ratio the
speed work aims at, wall ÷ Σ train_s, the fixed cost each trial adds (its
protocol inside run_trial, and the gap between one trial's record and the next trial's start), and
the training time per trial from which the ratio would reach 1.3 at that fixed cost. With ``--baseline REF`` it
first runs the same study with the project as it was at git commit REF, and prints the wall
time ratio of the two, measured side by side on the same machine.

Usage: .venv/bin/python benchmarks/study_time.py [--config config/config.yaml] [--baseline REF]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))


def run(study: Path, config: str, label: str) -> float:
    """Run the study from nothing in ``study``; print where its wall time went; return the wall time."""
    t0 = time.perf_counter()
    subprocess.run(
        [SNAKEMAKE, "--cores", "2", "--resources", "gpu=1", "--configfile", config],
        cwd=study,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wall = time.perf_counter() - t0
    paths = sorted((study / "results" / "trials").glob("**/metrics.json"))
    records = sorted(
        ({**json.loads(p.read_text()), "written": p.stat().st_mtime} for p in paths),
        key=lambda r: r["started_at_unix_s"],
    )
    n = len(records)
    train_s = sum(r["train_s"] for r in records)
    run_s = sum(r["run_s"] for r in records)
    # Between one trial's record being written and the next trial's run_trial starting: the first
    # trial's process exit, Snakemake's bookkeeping, the next process's start, imports and input reads.
    gaps = [b["started_at_unix_s"] - a["written"] for a, b in zip(records, records[1:])]
    gap = statistics.median(gaps) if gaps else float("nan")
    protocol = (run_s - train_s) / n
    once = wall - run_s - gap * n
    trials = pl.read_parquet(study / "results" / "analysis" / "trials.parquet")
    flagged = trials.filter(pl.col("quality") != "ok")
    print(f"{label}: {n} trials, {wall:.0f} s wall ({wall / 60:.1f} min); {flagged.height} of {trials.height} flagged")
    for row in flagged.select("cell", "trial", "quality_reasons").iter_rows():
        print(f"  flagged: {row[0]} trial {row[1]}: {row[2]}")
    per_budget = trials.group_by("budget").agg(pl.col("train_s").median()).sort("budget")
    print("  median training per trial: " + ", ".join(f"{b:,} tokens {t:.1f} s" for b, t in per_budget.iter_rows()))
    print(f"  training (Σ train_s)                 {train_s:7.1f} s  {100 * train_s / wall:5.1f} %")
    print(
        f"  rest of run_trial (Σ run_s − train)  {run_s - train_s:7.1f} s  {100 * (run_s - train_s) / wall:5.1f} %"
        f"  ({protocol:.2f} s per trial: model, idle baseline, checks, eval)"
    )
    print(
        f"  between trials (median gap × trials) {gap * n:7.1f} s  {100 * gap * n / wall:5.1f} %"
        f"  ({gap:.2f} s per trial: process exit and start, imports, Snakemake)"
    )
    print(
        f"  once per study (the rest)            {once:7.1f} s  {100 * once / wall:5.1f} %"
        "  (data, device profile, analysis, report, Snakemake's start)"
    )
    fixed = protocol + gap
    print(
        f"  wall / Σ train_s = {wall / train_s:.2f}; fixed cost per trial {fixed:.2f} s, so wall / training reaches 1.3 "
        f"from ~{(fixed * n + once) / (0.3 * n):.0f} s of training per trial (derived from these figures)",
        flush=True,
    )
    return wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default="config/config.yaml")
    ap.add_argument("--baseline", help="a git commit to compare with, run first")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="tokenwatt-study-"))
    try:
        walls = {}
        if args.baseline:
            (work / "baseline").mkdir()
            archive = subprocess.run(
                ["git", "archive", args.baseline], cwd=ROOT, check=True, capture_output=True
            ).stdout
            subprocess.run(["tar", "-x", "-C", str(work / "baseline")], input=archive, check=True)
            walls["baseline"] = run(work / "baseline", args.config, f"at {args.baseline}")
        shutil.copytree(ROOT, work / "study", ignore=shutil.ignore_patterns(".git", ".venv", "results", ".snakemake"))
        walls["now"] = run(work / "study", args.config, "this working tree")
        if args.baseline:
            print(f"wall time now / at {args.baseline} = {walls['now'] / walls['baseline']:.2f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
