"""Benchmark: where the test suite's CPU time goes, by kind of process and by test.

Runs pytest (the arguments after ``--``; the suite as ``make test`` runs it by default) with a ``sitecustomize``
module on ``PYTHONPATH`` that every Python process of the run loads: at its exit (``os._exit`` included, which a
finished trial calls) it appends its own CPU time (user + system, children not counted), the test
that was running when it started (pytest's ``PYTEST_CURRENT_TEST``, which subprocesses inherit) and its command
line to a log. Then prints pytest's failures, its slowest tests (if asked) and its last line, the CPU by kind of
process (a Snakemake start, a training, data or analysis job, a job's Snakemake on a SLURM node, the pytest workers
running the in-process tests, the suite's fork servers) and the tests whose processes used the most, with the run's wall time and the CPU time of pytest and the processes it waited for beside them (that total
leaves out the SLURM jobs, which slurmd starts, and the jobs of a test fork server stopped after a failed exchange,
whose job servers no process waits for; the logged rows count both: the two need not agree). Not
counted: a process ended by a signal it does not handle, one started with a PYTHONPATH of its own or with another
``sitecustomize`` before this one (a few tests set one), the launchers that hand a forked run's jobs to the job
servers (started with ``-S``, no site: ~0.01 s each; tests/job_forks.py), and anything not Python (the SLURM daemons).
A test's CPU is that of the processes started while it ran: the shared tiny study, built in a thread beside the SLURM
tests, counts under the SLURM test running when its jobs started; a forked job, under the test of its run (its
environment's); a fork server and its job servers, under the test that started the server.

Usage: .venv/bin/python benchmarks/suite_cpu.py [--top 30] [-- <pytest arguments>]
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORKERS = str(min(16, 2 * (os.cpu_count() or 1)))
# What each process writes when it ends: loaded by every Python process of the run, before anything else.
LOGGER = """
import atexit, os, resource, sys
_written = []
def _write():
    if _written:
        return
    _written.append(True)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    test = os.environ.get("PYTEST_CURRENT_TEST", "- (none)").rsplit(" (", 1)[0]
    if "execnet" in sys.modules:  # a pytest-xdist worker (started as python -c, as other processes are)
        sys.argv = ["pytest-xdist worker"]
    line = f"{usage.ru_utime + usage.ru_stime:.3f}\\t{test}\\t{' '.join(sys.argv)[:300]}\\n"
    with open(os.environ["SUITE_CPU_LOG"], "a") as log:
        log.write(line)
atexit.register(_write)
_exit = os._exit
def _exit_logged(code):
    _write()
    _exit(code)
os._exit = _exit_logged
"""
KINDS = {
    "training job": ("train_trial.py", "train_stable.py", "training/launch.py", "torch/distributed/run.py"),
    "analysis job": ("analyse.py", "product_figures.py", "aggregate.py", "report.py", "halving_round.py"),
    "job's Snakemake on a SLURM node": ("snakemake/__main__.py",),
    "Snakemake start (a run or a dry run)": ("/bin/snakemake",),
    # their imports, once per worker thread; their job servers and the forks that hand each job its status
    "the fork servers (tests/snakemake_fork_server.py)": ("snakemake_fork_server.py",),
}


def kind(argv: str) -> str:
    """The kind of process a logged command line is: a job's script is named in Snakemake's copy of it."""
    for name, marks in KINDS.items():
        if any(mark in argv for mark in marks):
            return name
    if ".snakemake/scripts/" in argv:
        return "data job (corpus to subsets, device profile)"
    if "pytest" in argv.split(" ")[0]:
        return "pytest and its workers (the in-process tests)"
    return "other (tools, validation scripts, python -c)"


def summary(rows: list[tuple[float, str, str]], top: int) -> list[str]:
    by_kind, count, by_test = collections.Counter(), collections.Counter(), collections.Counter()
    for cpu, test, argv in rows:
        by_kind[kind(argv)] += cpu
        count[kind(argv)] += 1
        if test != "-":
            by_test[re.sub(r"@\w+$", "", test)] += cpu
    lines = [f"{'CPU s':>8}  {'processes':>9}  kind"]
    lines += [f"{cpu:8.0f}  {count[name]:9d}  {name}" for name, cpu in by_kind.most_common()]
    lines += [f"{sum(by_kind.values()):8.0f}  {sum(count.values()):9d}  in all", "", f"{'CPU s':>8}  test"]
    return lines + [f"{cpu:8.1f}  {test}" for test, cpu in by_test.most_common(top)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--top", type=int, default=30, help="how many tests to list by CPU")
    parser.add_argument("pytest", nargs="*", help="pytest's arguments (after --)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        Path(folder, "sitecustomize.py").write_text(LOGGER)
        log = Path(folder, "cpu.log")
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(p for p in (folder, os.environ.get("PYTHONPATH")) if p),
            "SUITE_CPU_LOG": str(log),
            "HF_HUB_DISABLE_PROGRESS_BARS": "1",
        }
        command = [sys.executable, "-m", "pytest", "-q", *(args.pytest or ["-n", WORKERS])]
        start, before = time.time(), resource.getrusage(resource.RUSAGE_CHILDREN)
        proc = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
        wall, after = time.time() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
        fields = [line.split("\t") for line in log.read_text().splitlines()] if log.exists() else []
    lines = proc.stdout.strip().splitlines()
    # the run's last line, and what pytest named before it: failures and errors, and its slowest tests if asked
    failed = [line for line in lines if line.startswith(("FAILED", "ERROR"))]
    first = next((i for i, line in enumerate(lines) if line.startswith("=") and "slowest" in line), len(lines))
    last = next((i for i, line in enumerate(lines) if "short test summary info" in line), len(lines) - 1)
    slowest = lines[first : max(first, last)]
    print("\n".join([*failed, *slowest, lines[-1]]) if lines else proc.stderr[-2000:])
    total = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    print(f"wall {wall:.0f} s; CPU of pytest and the processes it waited for {total:.0f} s (user + system)\n")
    print("\n".join(summary([(float(cpu), test, argv) for cpu, test, argv in fields], args.top)))


if __name__ == "__main__":
    main()
