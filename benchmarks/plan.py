"""Benchmark: how long Snakemake takes to plan a study, against a bare Snakefile of the same jobs.

Plans (``snakemake -n``) the embedded study scaled to ``--trials`` trials per budget (3 budgets,
so 3 × trials subsets and 3 × trials training jobs), and, alternating with it, a bare Snakefile
whose rules do nothing but have the same job graph (a subset and a trial per budget × trial,
one aggregation), and the same graph with every directive tokenwatt's rules carry, which splits
the difference into Snakemake's price for the directives and tokenwatt's own code. Also times
the dry runs of ``config/paper.yaml`` and of the embedded default (nothing built yet: every job
planned). Prints medians and the ratios.

Usage: .venv/bin/python benchmarks/plan.py [--trials 5000] [--repeats 2]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))

# Both Snakefiles below: the trials, the default target and the aggregation.
GRAPH = """
BUDGETS = [10000, 20000, 40000]
TRIALS = range(1, {trials} + 1)

rule all:
    input: "results/analysis/trials.csv"

rule aggregate:
    input: expand("results/trials/b{{budget}}/t{{trial}}/metrics.json", budget=BUDGETS, trial=TRIALS)
    output: "results/analysis/trials.csv"
    shell: "touch {{output}}"
"""

BARE = (
    GRAPH
    + """
rule subset:
    output: "results/subsets/b{{budget}}/t{{trial}}.json"
    shell: "touch {{output}}"

rule train:
    input: "results/subsets/b{{budget}}/t{{trial}}.json"
    output: "results/trials/b{{budget}}/t{{trial}}/metrics.json"
    resources: gpu=1
    shell: "touch {{output}}"
"""
)

# The same job graph with every directive tokenwatt's rules carry (a log, params computed from the
# wildcards, a priority function, resources, three outputs, four inputs from an input function, a
# conda env, a script), each doing no work of its own: what Snakemake charges for the directives,
# apart from what tokenwatt's own code (config check, design, paths, run order) adds.
DIRECTIVES = (
    GRAPH
    + """
PRIORITY = {{(b, t): i for i, (b, t) in enumerate((b, t) for t in TRIALS for b in BUDGETS)}}

rule data:
    output: "data/chunks_train.parquet", "data/chunks_eval.parquet", directory("data/tokenizer")
    shell: "touch {{output}}"

rule subset:
    input: "data/chunks_train.parquet"
    output: "results/subsets/b{{budget}}/t{{trial}}.json"
    params:
        budget=lambda wildcards: int(wildcards.budget),
        trial=lambda wildcards: int(wildcards.trial),
        seed=1,
    log: "results/logs/subset/b{{budget}}/t{{trial}}.log"
    priority: 100000
    threads: 1
    resources: mem_mb=2000
    conda: "environment.yml"
    script: "noop.py"

rule train:
    input:
        unpack(lambda wildcards: {{"subset": f"results/subsets/b{{wildcards.budget}}/t{{wildcards.trial}}.json",
                                  "train": "data/chunks_train.parquet", "eval": "data/chunks_eval.parquet",
                                  "tokenizer": "data/tokenizer"}}),
    output:
        multiext("results/trials/b{{budget}}/t{{trial}}/", metrics="metrics.json", power="power.parquet", steps="steps.parquet"),
    params:
        budget=lambda wildcards: int(wildcards.budget),
        trial=lambda wildcards: int(wildcards.trial),
        cell=lambda wildcards: "b" + wildcards.budget,
        levels=lambda wildcards: {{}},
        model=lambda wildcards: {{"source": "config"}},
        train=lambda wildcards: {{"lr": 0.003}},
        seed=1,
    log: "results/logs/train/b{{budget}}/t{{trial}}.log"
    priority: lambda wildcards: PRIORITY[(int(wildcards.budget), int(wildcards.trial))]
    threads: 1
    resources: gpu=1, mem_mb=8000, runtime=60
    conda: "environment.yml"
    script: "noop.py"
"""
)


def timed(cmd: list[str], cwd: Path) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def jobs(cmd: list[str], cwd: Path) -> int:
    """The jobs a dry run plans: the 'total' row of its job table, as Snakemake's own logger or the default profile's
    rich logger (a table drawn with box characters) prints it."""
    proc = subprocess.run(cmd + ["--quiet", "rules"], cwd=cwd, check=True, capture_output=True, text=True)
    for line in (proc.stdout + proc.stderr).splitlines():
        cells = line.replace("│", " ").replace("┃", " ").split()
        if cells[:1] == ["total"]:
            return int(cells[-1])
    raise SystemExit(f"no job table in the dry run of {cwd}:\n{(proc.stdout + proc.stderr)[-2000:]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=5000, help="trials per budget (3 budgets)")
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="tokenwatt-plan-"))
    try:
        study = work / "study"
        shutil.copytree(
            ROOT, study, ignore=shutil.ignore_patterns(".git", ".venv", "results", ".snakemake", "benchmarks")
        )
        (study / "big.yaml").write_text(f"study: {{trials: {args.trials}}}\nresults: results-big\n")
        bare, directives = work / "bare", work / "directives"
        bare.mkdir()
        (bare / "Snakefile").write_text(BARE.format(trials=args.trials))
        directives.mkdir()
        (directives / "Snakefile").write_text(DIRECTIVES.format(trials=args.trials))
        (directives / "noop.py").write_text("")
        (directives / "environment.yml").write_text("dependencies: [python]\n")
        ours_cmd = [SNAKEMAKE, "-n", "--cores", "1", "--configfile", "config/config.yaml", "big.yaml"]
        bare_cmd = [SNAKEMAKE, "-n", "--cores", "1"]
        print(
            f"jobs planned: tokenwatt {jobs(ours_cmd, study)}, bare {jobs(bare_cmd, bare)}, "
            f"bare with tokenwatt's directives {jobs(bare_cmd, directives)}",
            flush=True,
        )
        times: dict[str, list[float]] = {
            "tokenwatt": [],
            "bare": [],
            "directives": [],
            "paper.yaml -n": [],
            "default -n": [],
        }
        for r in range(args.repeats):
            trio = [("tokenwatt", ours_cmd, study), ("bare", bare_cmd, bare), ("directives", bare_cmd, directives)]
            for name, cmd, cwd in trio if r % 2 == 0 else trio[::-1]:
                times[name].append(timed(cmd, cwd))
            times["paper.yaml -n"].append(
                timed([SNAKEMAKE, "-n", "--cores", "1", "--configfile", "config/paper.yaml"], study)
            )
            times["default -n"].append(timed([SNAKEMAKE, "-n", "--cores", "1"], study))
            print(f"repeat {r + 1}: " + ", ".join(f"{k} {v[-1]:.1f} s" for k, v in times.items()), flush=True)
        med = {k: statistics.median(v) for k, v in times.items()}
        print(
            f"\ndry run, {3 * args.trials} trials: tokenwatt {med['tokenwatt']:.1f} s, bare Snakefile {med['bare']:.1f} s, "
            f"ratio {med['tokenwatt'] / med['bare']:.2f}"
        )
        print(
            f"  a bare Snakefile with tokenwatt's directives: {med['directives']:.1f} s; Snakemake's price for the "
            f"directives {med['directives'] / med['bare']:.2f} × bare, tokenwatt's own code {med['tokenwatt'] / med['directives']:.2f} × that"
        )
        print(
            f"dry run of config/paper.yaml: {med['paper.yaml -n']:.1f} s; of the embedded default: {med['default -n']:.1f} s"
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
