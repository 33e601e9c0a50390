"""Test–retest of the embedded default study, and how well the quality rules catch a disturbance.

CPU training is bit-identical run to run, so two runs of the same trial differ only in what was
measured. This script runs the embedded default three times, each in its own fresh copy of the
workflow (no cache):

  A, B  quiet: the whole study as `snakemake --cores 2 --resources gpu=1` runs it;
  H     the same study trial by trial in its run order, with a CPU hog (one busy process per
        core) running beside every other trial, from its start to its end.

It prints, per trial, the relative PE difference between A and B (test–retest), its median and
maximum, the within-budget coefficient of variation of PE (which also holds real differences
between trials), each run's CS_TFLOPS, how many trials the quality rules flagged in A and B, and
in H how many disturbed and undisturbed trials were flagged.

Usage: python benchmarks/repeatability.py [--keep DIR]   (about 15 minutes on 2 cores; keep the
machine otherwise idle, or the quiet runs are not quiet)
       python benchmarks/repeatability.py --reanalyse DIR   (a kept DIR: the same measurements
       analysed again with this checkout's analysis code and config, e.g. after changing a
       quality threshold; nothing trains)
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "workflow" / "scripts"))

import polars as pl  # noqa: E402
import yaml  # noqa: E402
from tokenwatt.plan.config import load_schema, validate_config  # noqa: E402
from tokenwatt.plan.design import Design, parse_cell  # noqa: E402
from tokenwatt.plan.runorder import run_order  # noqa: E402

SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")
# Targets go before these: after `--quiet all` they would be read as more --quiet choices.
OPTIONS = ["--cores", "2", "--resources", "gpu=1", "--quiet", "all"]
COPIED = ("environment.yml", "workflow", "config", "profiles", "resources")


def fresh_copy(dest: Path) -> Path:
    for name in COPIED:
        (shutil.copytree if (ROOT / name).is_dir() else shutil.copy2)(ROOT / name, dest / name)
    return dest


def snakemake(work: Path, *targets: str) -> None:
    env = {**os.environ, "HF_HUB_DISABLE_PROGRESS_BARS": "1"}
    proc = subprocess.run([SNAKEMAKE, *targets, *OPTIONS], cwd=work, env=env, capture_output=True, text=True)
    if proc.returncode:
        sys.exit(f"snakemake {' '.join(targets)} failed in {work}:\n{proc.stderr[-3000:]}")


def _spin() -> None:
    while True:
        pass


def trials(work: Path) -> pl.DataFrame:
    return pl.read_parquet(work / "results/analysis/trials.parquet").sort("budget", "trial")


def quiet_run(work: Path) -> pl.DataFrame:
    snakemake(work)
    return trials(work)


def planned_order(work: Path) -> list[tuple[int, int]]:
    config = validate_config(
        yaml.safe_load((work / "config/config.yaml").read_text()),
        load_schema(work / "workflow/schemas/config.schema.yaml"),
    )
    order = run_order(Design(config).keys(), config["study"]["seed"], config["study"]["run_order"])
    return [(parse_cell(cell).budget, trial) for cell, trial in order]  # the default study is one-way


def hogged(order: list[tuple[int, int]]) -> set[tuple[int, int]]:
    """Every other trial in run order: the second, fourth, ..."""
    return set(order[1::2])


def hog_run(work: Path) -> tuple[pl.DataFrame, set[tuple[int, int]]]:
    """Every other trial in run order gets a CPU hog beside it for its whole job."""
    order = planned_order(work)
    disturbed = hogged(order)
    snakemake(work, "data", "results/device/profile.json")
    for budget, trial in order:
        hogs = []
        if (budget, trial) in disturbed:
            hogs = [mp.Process(target=_spin, daemon=True) for _ in range(os.cpu_count() or 2)]
            for h in hogs:
                h.start()
        try:
            snakemake(work, f"results/trials/b{budget}/t{trial}/metrics.json")
        finally:
            for h in hogs:
                h.terminate()
                h.join()
    snakemake(work, "results/analysis/trials.parquet")
    return trials(work), disturbed


def reanalyse(base: Path) -> tuple[dict[str, pl.DataFrame], set[tuple[int, int]]]:
    """The kept runs analysed again with this checkout's workflow and config; every trial is kept as measured."""
    runs = {}
    for name in ("A", "B", "H"):
        for part in ("workflow", "config"):
            shutil.rmtree(base / name / part)
            shutil.copytree(ROOT / part, base / name / part)
        # Only the aggregation may run: the trials stay exactly as they were measured.
        snakemake(
            base / name, "results/analysis/trials.parquet", "--forcerun", "aggregate", "--allowed-rules", "aggregate"
        )
        runs[name] = trials(base / name)
    return runs, hogged(planned_order(base / "H"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--keep", help="keep the three study folders here (default: a temporary folder, removed)")
    ap.add_argument("--reanalyse", help="analyse the three kept study folders in this folder again; nothing trains")
    args = ap.parse_args()
    if args.reanalyse:
        base = Path(args.reanalyse)
        runs, disturbed = reanalyse(base)
    else:
        base = Path(args.keep or tempfile.mkdtemp(prefix="tokenwatt-repeat-"))
        runs = {}
        for name in ("A", "B", "H"):
            (base / name).mkdir(parents=True, exist_ok=True)
            fresh_copy(base / name)
        runs["A"] = quiet_run(base / "A")
        runs["B"] = quiet_run(base / "B")
        runs["H"], disturbed = hog_run(base / "H")

    a, b = runs["A"], runs["B"]
    assert a["eval_loss"].to_list() == b["eval_loss"].to_list(), "training was not bit-identical between the quiet runs"
    print("Test-retest (quiet runs A and B; training bit-identical, eval losses equal):")
    print(
        f"{'budget':>7} {'trial':>5} {'PE A':>11} {'PE B':>11} {'|diff| %':>8} {'RMS W A':>8} {'RMS W B':>8} {'tok/s A':>8} {'tok/s B':>8}"
    )
    diffs = []
    for ra, rb in zip(a.iter_rows(named=True), b.iter_rows(named=True)):
        d = abs(ra["pe"] - rb["pe"]) / ((ra["pe"] + rb["pe"]) / 2) * 100
        diffs.append(d)
        print(
            f"{ra['budget']:>7} {ra['trial']:>5} {ra['pe']:>11.4e} {rb['pe']:>11.4e} {d:>8.2f} {ra['power_rms_w']:>8.2f} "
            f"{rb['power_rms_w']:>8.2f} {ra['tokens_per_s']:>8.0f} {rb['tokens_per_s']:>8.0f}"
        )
    print(
        f"PE test-retest difference, each run with its own device profile: median {statistics.median(diffs):.2f} %, "
        f"max {max(diffs):.2f} % (targets: <= 2 %, <= 5 %)"
    )
    # PE is proportional to CS_TFLOPS, so B's PE with A's profile (what a cached profile or a
    # configured metric.cs_tflops gives) is exact arithmetic, not an estimate.
    shared = [
        abs(ra["pe"] - rb["pe"] * ra["cs_tflops"] / rb["cs_tflops"]) / ra["pe"] * 100
        for ra, rb in zip(a.iter_rows(named=True), b.iter_rows(named=True))
    ]
    print(
        f"PE test-retest difference, one device profile for both runs: median {statistics.median(shared):.2f} %, max {max(shared):.2f} %"
    )
    clean = [
        d
        for d, ra, rb in zip(shared, a.iter_rows(named=True), b.iter_rows(named=True))
        if ra["quality"] == rb["quality"] == "ok"
    ]
    if clean:
        print(
            f"  of which trials unflagged in both runs ({len(clean)}): median {statistics.median(clean):.2f} %, max {max(clean):.2f} %"
        )
    print(
        f"CS_TFLOPS: A {a['cs_tflops'][0]:.4f}, B {b['cs_tflops'][0]:.4f}, H {runs['H']['cs_tflops'][0]:.4f} "
        f"(A/B differ by {abs(a['cs_tflops'][0] / b['cs_tflops'][0] - 1) * 100:.2f} %)"
    )
    for budget, grp in a.group_by("budget", maintain_order=True):
        pe = grp["pe"]
        print(f"within-budget CV of PE, run A, budget {budget[0]}: {pe.std() / pe.mean() * 100:.2f} %")
    for name in ("A", "B"):
        t = runs[name]
        print(f"run {name} (quiet): {int((t['quality'] == 'flagged').sum())} of {t.height} trials flagged")
    h = runs["H"]
    flagged = {(r["budget"], r["trial"]) for r in h.filter(pl.col("quality") == "flagged").iter_rows(named=True)}
    everyone = {(r["budget"], r["trial"]) for r in h.iter_rows(named=True)}
    calm = everyone - disturbed
    print(
        f"run H (hog beside every other trial): disturbed flagged {len(flagged & disturbed)} of {len(disturbed)} "
        f"({100 * len(flagged & disturbed) / len(disturbed):.0f} %, target >= 90 %); undisturbed flagged {len(flagged & calm)} of "
        f"{len(calm)} ({100 * len(flagged & calm) / len(calm):.0f} %, target <= 10 %)"
    )
    for r in h.sort("run_position").iter_rows(named=True):
        mark = "HOG " if (r["budget"], r["trial"]) in disturbed else "    "
        print(f"  {mark}#{r['run_position']:>2} b{r['budget']} t{r['trial']}: {r['quality']:<7} {r['quality_reasons']}")
    if not (args.keep or args.reanalyse):
        shutil.rmtree(base)


if __name__ == "__main__":
    main()
