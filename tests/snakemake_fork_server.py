"""Snakemake imported once per test worker and forked for every run (workflow_helpers.snakemake), and the libraries its
jobs import loaded once and forked for every job of those runs.

A dry run of the tiny study costs ~1.9 s of CPU as a fresh `snakemake` process: importing Snakemake, its plugins and
the libraries a parse pulls in, scanning the plugins, and at exit the interpreter's teardown. A fork of this server,
which has done the first two, runs the same entry point the console script runs (snakemake.cli.main) with its own
argv, working directory, environment and output files, and exits without the teardown: ~0.45 s (measured: the
server's children's CPU, 1 run against 6). It imports no tokenwatt module (each test's clone brings its own) and no
polars, whose thread pools are not fork-safe: the workflow's parse imports those in the fork, as a fresh process would.
Forks share the server's string-hash seed, where fresh processes draw one each: a test that asks whether a plan is
the same from one start to the next runs the command (workflow_helpers.FRESH_HASH_SEED).

Its script jobs are forks too, of job servers forked from this one before Snakemake's command line and plugins were
imported: the run's Python is job_forks.py's launcher.

Protocol with the test worker, one JSON object per line: {"ready"} on stdout once the imports are done; then, for each
request on stdin ({"argv", "cwd", "env", "stdout", "stderr"}), the fork's process id on stdout ({"pid"}) when it starts
and its exit status ({"returncode"}; negative: the signal that ended it, as subprocess reports) when it ends. EOF on
stdin ends the server, and the job servers with it (waited for, their jobs' CPU counted in the server's). The one
argument: a folder for the job servers' sockets and the launcher.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from pathlib import Path

from fork_exit import exit_status, finish
from job_forks import run_job, start_job_servers

# What a run imports besides tokenwatt and polars (measured: the modules new in a fork after a dry run of the tiny
# study); a module missing here is imported by the run itself, only slower.
PRELOAD = (
    "snakemake.cli",
    "snakemake.dag",
    "snakemake_executor_plugin_slurm",
    "snakemake_logger_plugin_rich",
    "smart_open",
    "pyarrow",
    "jsonschema",
    "codecarbon",
    "pynvml",
    "yte",
    "rich",
    "nbformat",
    "docutils",
    "PIL",
    "requests",
    "jinja2",
)
# Snakemake's plugin registries, each a singleton that scans the installed packages when first made (~0.15 s a run).
REGISTRIES = {
    "snakemake_interface_executor_plugins.registry": "ExecutorPluginRegistry",
    "snakemake_interface_logger_plugins.registry": "LoggerPluginRegistry",
    "snakemake_interface_report_plugins.registry": "ReportPluginRegistry",
    "snakemake_interface_scheduler_plugins.registry": "SchedulerPluginRegistry",
    "snakemake_interface_storage_plugins.registry": "StoragePluginRegistry",
}


def serve() -> dict | None:
    """Fork for each request and answer with its exit status; in the fork, return the request to run."""
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            os.setpgid(0, 0)  # a group of its own, the jobs it starts in it: a run killed at the limit takes them along
            return request
        print(json.dumps({"pid": pid}), flush=True)
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}), flush=True)
    return None


def run(request: dict, launcher: Path) -> int:
    """Snakemake's command line in this fork, its exit status as the interpreter would give it: its own output files in
    place of the server's pipes (so nothing it or its jobs write reaches the protocol), its working directory and
    environment, and the launcher as its Python (what its script jobs run with)."""
    for fd, path, flags in (
        (0, os.devnull, os.O_RDONLY),
        (1, request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
        (2, request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
    ):
        opened = os.open(path, flags, 0o644)
        os.dup2(opened, fd)
        os.close(opened)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv = list(request["argv"])
    sys.path[0] = os.path.dirname(sys.argv[0])  # the console script's folder, where this server's is now
    sys.executable = str(launcher)
    from snakemake.cli import main
    from snakemake.workflow import Workflow

    # The one thing Snakemake reads of its process when imported, not when run (test_fork_server.py compares a run's
    # output with the command's): the run directory, a class attribute set from the working directory at import.
    Workflow._rundir = str(Path.cwd().absolute())
    return exit_status(main)


if __name__ == "__main__":
    jobs = start_job_servers(Path(sys.argv[1]), dict(os.environ))  # its start's: an import sets KMP_DUPLICATE_LIB_OK
    if isinstance(jobs, dict):  # a job's fork
        finish(run_job(jobs))
    for name in PRELOAD:
        importlib.import_module(name)
    for module, registry in REGISTRIES.items():
        getattr(importlib.import_module(module), registry)()
    request = serve()
    if request is None:
        jobs.close()
    else:
        jobs.forget()  # the job servers stop when the server ends, not when a run does
        finish(run(request, jobs.launcher))
