"""Snakemake imported once per test worker and forked for every run (workflow_helpers.snakemake).

A run of the tiny study's plan costs ~2.2 s of CPU as a fresh `snakemake` process, ~1.5 s of it importing Snakemake,
its plugins and the libraries a parse pulls in; a fork of this server, which has imported them, runs the same entry
point the console script runs (snakemake.cli.main) with its own argv, working directory, environment and output files,
and pays only the rest. It imports no tokenwatt module (each test's clone brings its own) and no polars, whose thread
pools are not fork-safe: the workflow's parse imports those in the fork, as a fresh process would.

Protocol, one JSON object per line: requests on stdin {"argv", "cwd", "env", "stdout", "stderr"}, the fork's exit
status on stdout {"returncode"} (negative: the signal that ended it, as subprocess reports). EOF on stdin ends it.
"""

from __future__ import annotations

import importlib
import json
import os
import sys

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


def serve() -> dict | None:
    """Fork for each request and answer with its exit status; in the fork, return the request to run."""
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            return request
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}), flush=True)
    return None


def run(request: dict) -> None:
    """Snakemake's command line in this fork: its own output files in place of the server's pipes (so nothing it or its
    jobs write reaches the protocol), its working directory and environment, its exit the interpreter's own."""
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
    from snakemake.cli import main

    main()


if __name__ == "__main__":
    for name in PRELOAD:
        importlib.import_module(name)
    request = serve()
    if request is not None:
        run(request)
