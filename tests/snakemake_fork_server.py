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

A job of a forked run (a rule's ``script:``, which Snakemake runs as ``<its Python> <script>``) is a fork too: the run's
Python is a launcher (``write_launcher``) that hands the script, its working directory, environment and standard
files to the job server, a process forked from this one before Snakemake was imported, once it had imported what
the jobs import besides tokenwatt and polars (torch's import alone is ~1.1 s of CPU, three quarters of a tiny trial).
The job server forks for each job, which runs the script as ``python <script>`` runs it, in the process group of the
shell that started it (a run killed at the limit takes its jobs along), with the thread counts its environment gives
set as the libraries would have read them at their import, and exits as the interpreter does; the launcher exits with
the job's status, or is ended by the signal that ended the job. A job whose environment changes Python's start-up
(``PYTHON*``, or what a preloaded library reads when loaded) runs fresh: the launcher becomes the interpreter (exec).
Anything else the interpreter is asked (``-m snakemake`` on a SLURM node, ``-c``) runs fresh the same way.

Protocol with the test worker, one JSON object per line: {"ready"} on stdout once the imports are done; then, for each
request on stdin ({"argv", "cwd", "env", "stdout", "stderr"}), the fork's process id on stdout ({"pid"}) when it starts
and its exit status ({"returncode"}; negative: the signal that ended it, as subprocess reports) when it ends. EOF on
stdin ends the server, and the job server with it. The one argument: a folder for the job server's socket and the
launcher.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import json
import os
import runpy
import select
import signal
import socket
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
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
# What the jobs import besides tokenwatt: the script preamble's Snakemake module, torch (the trials), scipy (the
# scaling and statistics), matplotlib (the figures), pingouin (the RM-ANOVA). Not statsmodels, which imports polars.
JOB_PRELOAD = (
    "snakemake.script",
    "torch",
    "scipy.stats",
    "scipy.optimize",
    "matplotlib.pyplot",
    "pingouin",
    "threadpoolctl",
)
# Environment variables a preloaded library or the interpreter reads when it starts or loads: a job whose values differ
# from the job server's runs fresh. The thread counts are not among them: Snakemake sets them per job (its threads),
# and the job sets them as the libraries would have read them (``set_thread_counts``).
READ_AT_LOAD = ("PYTHON", "MPL", "TORCH", "KMP_", "LD_", "MALLOC", "CUDA_")
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


def exit_status(main: Callable[[], object]) -> int:
    """``main()``'s exit status as the interpreter gives a program's: SystemExit's code, 1 and the traceback for an
    exception, the end by SIGINT for a KeyboardInterrupt."""
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


def read_at_load(env: dict) -> dict:
    return {name: value for name, value in env.items() if name.startswith(READ_AT_LOAD)}


@dataclass(frozen=True)
class JobServer:
    """The job server as this server sees it: its process, the pipe whose end tells it to stop (closed: by this server
    at EOF, or by its end), the launcher the runs take as their Python."""

    pid: int
    stop: int
    launcher: Path

    def close(self) -> None:
        """Stop it and wait for it, which waits for the jobs still running: their CPU counted in this process's."""
        os.close(self.stop)
        os.waitpid(self.pid, 0)


def start_jobs(folder: Path, started_with: dict) -> JobServer | dict:
    """The job server forked from this process (its socket in ``folder``; ``started_with``: the variables of
    READ_AT_LOAD this server started with); in a job's fork, the job to run."""
    address = str(folder / "jobs.sock")
    with contextlib.suppress(FileNotFoundError):  # a stopped server's, whose job server has stopped with it
        os.unlink(address)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(address)  # before the fork: a launcher may connect before the job server first waits
    listener.listen(64)
    stopped, stop = os.pipe()
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        os.close(stop)
        quiet = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1):  # not the protocol's pipes: EOF must reach the test worker when this server ends
            os.dup2(quiet, fd)
        os.close(quiet)
        return serve_jobs(listener, stopped)
    listener.close()
    os.close(stopped)
    return JobServer(pid, stop, write_launcher(folder / "python", address, started_with))


def serve_jobs(listener: socket.socket, stopped: int) -> dict:
    """Accept jobs, each handled by a fork of its own (``handle_job``), until the server closes its end of the pipe
    ``stopped`` (or has ended); then wait for the jobs still running and exit. Return in a job's fork, with its
    request."""
    while listener in select.select([listener, stopped], [], [])[0]:  # else the pipe alone: told to stop
        connection, _ = listener.accept()
        if os.fork() == 0:
            listener.close()
            os.close(stopped)
            return handle_job(connection)
        connection.close()
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(-1, os.WNOHANG)[0]:  # the handlers that have reported
                pass
    with contextlib.suppress(ChildProcessError):
        while True:
            os.wait()
    os._exit(0)


def handle_job(connection: socket.socket) -> dict:
    """Receive a job (its standard files as descriptors, then its request), fork it and report its exit status to the
    launcher; return in the job's fork, with its request."""
    _, fds, _, _ = socket.recv_fds(connection, 1, 3)
    body = b""
    while chunk := connection.recv(1 << 16):
        body += chunk
    request = {**json.loads(body), "fds": fds}
    pid = os.fork()
    if pid == 0:
        connection.close()
        return request
    for fd in fds:
        os.close(fd)
    _, status = os.waitpid(pid, 0)
    try:
        connection.sendall(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}).encode())
    finally:
        os._exit(0)


def run_job(request: dict) -> int:
    """The job's script as ``python <script>`` runs it, its exit status as the interpreter gives it."""
    for fd, target in zip(request["fds"], (0, 1, 2), strict=True):
        os.dup2(fd, target)
        os.close(fd)
    os.setpgid(0, request["pgid"])  # the shell's group, which is the run's: killed with the run
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    set_thread_counts(os.environ)
    sys.argv = list(request["argv"])
    sys.path[0] = os.path.dirname(os.path.abspath(sys.argv[0]))
    return exit_status(lambda: runpy.run_path(sys.argv[0], run_name="__main__"))


def set_thread_counts(env: dict) -> None:
    """The OpenMP and BLAS thread counts the environment gives (Snakemake sets them to the job's threads), set as those
    libraries set them when loaded, which in a job's fork was before its environment was known."""
    from threadpoolctl import threadpool_limits

    omp = env.get("OMP_NUM_THREADS", "")
    blas = env.get("OPENBLAS_NUM_THREADS") or env.get("GOTO_NUM_THREADS") or omp
    limits = {api: int(n) for api, n in (("openmp", omp), ("blas", blas)) if n.isdigit()}
    if limits:
        threadpool_limits(limits=limits)


def write_launcher(path: Path, address: str, started_with: dict) -> Path:
    """The runs' Python: a script that hands ``<script>`` to the job server at ``address`` and exits as the job did, or
    becomes this interpreter (exec) for anything else or a job whose start-up would differ from the job server's."""
    path.write_text(
        f"#!{sys.executable} -S\n"
        + LAUNCHER.format(python=sys.executable, address=address, load=started_with, prefixes=READ_AT_LOAD)
    )
    path.chmod(0o755)
    return path


LAUNCHER = '''"""A Snakemake job's Python in a forked test run (tests/snakemake_fork_server.py)."""
import json, os, signal, socket, sys

PYTHON = {python!r}
args = sys.argv[1:]
load = {{k: v for k, v in os.environ.items() if k.startswith({prefixes!r})}}
# a script alone, started as the job server's processes start (its thread counts set by the job: Snakemake's)
if len(args) != 1 or not args[0].endswith(".py") or load != {load!r} or "OMP_NUM_THREADS" not in os.environ:
    os.execv(PYTHON, [PYTHON, *args])
job = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
job.connect({address!r})
socket.send_fds(job, [b"."], [0, 1, 2])
request = {{"argv": args, "cwd": os.getcwd(), "env": dict(os.environ), "pgid": os.getpgrp()}}
job.sendall(json.dumps(request).encode())
job.shutdown(socket.SHUT_WR)
reply = b""
while chunk := job.recv(4096):
    reply += chunk
if not reply:
    sys.exit("the job server ended before the job did: " + args[0])
code = json.loads(reply)["returncode"]
if code < 0:  # ended by a signal: ended by it too
    if -code not in (signal.SIGKILL, signal.SIGSTOP):  # the two no handler can be set for
        signal.signal(-code, signal.SIG_DFL)
    os.kill(os.getpid(), -code)
os._exit(code)
'''


if __name__ == "__main__":
    started_with = read_at_load(os.environ)  # before the imports: one of them sets KMP_DUPLICATE_LIB_OK
    for name in JOB_PRELOAD:
        importlib.import_module(name)
    jobs = start_jobs(Path(sys.argv[1]), started_with)
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
        os.close(jobs.stop)  # only the server holds it: the job server stops when the server ends, not its runs
        finish(run(request, jobs.launcher))
