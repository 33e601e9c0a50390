"""Snakemake imported once per test worker and forked for every run (workflow_helpers.snakemake).

A dry run of the tiny study costs ~1.9 s of CPU as a fresh `snakemake` process: importing Snakemake, its plugins and
the libraries a parse pulls in, scanning the plugins, and at exit the interpreter's teardown. A fork of this server,
which has done the first two, runs the same entry point the console script runs (snakemake.cli.main) with its own
argv, working directory, environment and output files, and exits without the teardown: ~0.45 s (measured: the
server's children's CPU, 1 run against 6). It imports no tokenwatt module (each test's clone brings its own) and no
polars, whose thread pools are not fork-safe: the workflow's parse imports those in the fork, as a fresh process would.
Forks share the server's string-hash seed, where fresh processes draw one each: a test that asks whether a plan is
the same from one start to the next runs the command (workflow_helpers.FRESH_HASH_SEED).

Protocol, one JSON object per line: {"ready"} on stdout once the imports are done; then, for each request on stdin
({"argv", "cwd", "env", "stdout", "stderr"}), the fork's process id on stdout ({"pid"}) when it starts and its exit
status ({"returncode"}; negative: the signal that ended it, as subprocess reports) when it ends. EOF on stdin ends
the server.
"""

from __future__ import annotations

import atexit
import importlib
import json
import os
import signal
import sys
import threading
from pathlib import Path
from typing import NoReturn

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


def run(request: dict) -> int:
    """Snakemake's command line in this fork, its exit status as the interpreter would give it: its own output files in
    place of the server's pipes (so nothing it or its jobs write reaches the protocol), its working directory and
    environment."""
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
    from snakemake.cli import main
    from snakemake.workflow import Workflow

    # The one thing Snakemake reads of its process when imported, not when run (test_fork_server.py compares a run's
    # output with the command's): the run directory, a class attribute set from the working directory at import.
    Workflow._rundir = str(Path.cwd().absolute())

    try:
        main()
    except SystemExit as stop:
        if stop.code is None or isinstance(stop.code, int):
            return stop.code or 0
        print(stop.code, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_DFL)  # ended by the signal, as the interpreter ends then
        os.kill(os.getpid(), signal.SIGINT)
        return 128 + signal.SIGINT  # what a shell reports, were the signal blocked
    except BaseException:
        sys.excepthook(*sys.exc_info())
        return 1
    return 0


def finish(status: int) -> NoReturn:
    """Exit as the interpreter does up to its teardown of every module: threading's own shutdown (its exit hooks, which
    tell idle thread pools to stop, then every non-daemon thread joined: Thread.join alone waits forever on a pool's
    idle worker), atexit handlers (logging's, the SLURM plugin's), the standard streams flushed. The teardown is left
    out: ~0.45 s of CPU a run, which frees memory and changes nothing a run leaves behind."""
    threading._shutdown()  # what Py_FinalizeEx calls first; no public API does all of it
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


if __name__ == "__main__":
    for name in PRELOAD:
        importlib.import_module(name)
    for module, registry in REGISTRIES.items():
        getattr(importlib.import_module(module), registry)()
    request = serve()
    if request is not None:
        finish(run(request))
