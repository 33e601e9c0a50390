"""A forked test run's script jobs, each a fork of a job server that has imported what the jobs import
(snakemake_fork_server.py starts the job servers; workflow_helpers.snakemake runs through it).

Snakemake runs a rule's ``script:`` as ``<its Python> <script>`` through bash. In a forked run its Python is the
launcher (``write_launcher``): it hands the script, its working directory, environment, process group and standard
files (as descriptors) to a job server over a Unix socket and exits with the job's status, or by the signal that
ended the job. A job server is a fork of the Snakemake fork server, made once it had imported the jobs' libraries and
before Snakemake's command line and plugins; it forks a handler per job, which forks the job, waits for it and
reports its exit status, and kills it should the launcher end first (a job never outlives the process that stands
for it, so a run killed at its limit leaves nothing running and a job server never waits for a job nobody waits for).
The job runs the script as ``python <script>`` does: its sys.argv, sys.path[0], ``__main__``, working directory,
environment and standard files, in the shell's process group, with the OpenMP and BLAS thread counts Snakemake set
for it, ending as the interpreter ends (fork_exit.py).

Two job servers, so that a trial's memory figures hold no pages of libraries a trial never imports: a trial records its
process's resident set (tokenwatt.measurement.memory), which in a fork counts the pages it shares with its server.
The trials' server has imported what a trial imports anyway (torch: ~1.1 s of a tiny trial's ~1.5 s of CPU); the
other, forked after scipy, matplotlib and pingouin too, serves every other job. A forked trial's figures are still
not a fresh one's: its resident set counts only the shared pages it touches (the tiny study's trials, 2026-12-06:
244 MB at the start of training against 301 MB fresh, peaks 253 against 308 MB). No test compares them with a fresh
trial's; the SLURM tests' trials run fresh. Neither server imports polars, whose thread pools are not fork-safe, nor
statsmodels, which imports it, nor tokenwatt, which each clone brings.

What a fork cannot be runs fresh (the launcher becomes the interpreter, exec): anything but a single script (the
``-m snakemake`` of a SLURM job, ``-c``), and a job whose environment differs from the server's start in what Python
or a preloaded library reads when it starts or loads (``READ_AT_LOAD``). Still not as in a fresh process, and asked by
no test: the string-hash seed (a server's jobs share it), resource limits, umask and CPU affinity (the server's: the
suite sets none per job), a signal sent to the launcher's process alone (the job is killed, where a fresh one would
get that signal: the tests that signal a job run the command), the finalizers of objects alive at exit
(fork_exit.finish), variables a preloaded library sets in its own environment when imported (scikit-learn's
``KMP_*``, which the job's environment and so its children lack), runpy's frames above the script's in a traceback,
the modules a server imported (a script that uses one it never imports runs forked and fails fresh: the SLURM tests'
jobs run fresh), MKL's and numexpr's thread counts (set by OpenMP's and BLAS's alone; the trials set torch's
themselves), and Snakemake's ``benchmark:`` files, which measure the launcher's processes, not the job's.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import runpy
import select
import signal
import socket
import sys
from dataclasses import dataclass
from pathlib import Path

from fork_exit import exit_status

# The scripts that measure their own process's memory (Snakemake's copy of one: tmp<random>.train_trial.py), forked
# from the server that has imported what they import and nothing more.
MEASURES_MEMORY = ("train_trial.py", "train_stable.py")
# The trials' server: the script preamble's Snakemake module, torch; then the other jobs' adds scipy (the scaling and
# statistics), matplotlib (the figures) and pingouin (the RM-ANOVA).
PRELOADS = {
    "trials": ("snakemake.script", "threadpoolctl", "torch"),
    "jobs": ("scipy.stats", "scipy.optimize", "matplotlib.pyplot", "pingouin"),
}
# Snakemake sets these per job (to its threads); the job sets them as the libraries read them when loaded.
THREAD_COUNTS = (
    "OMP_NUM_THREADS",
    "GOTO_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)
# What Python (its locale too), torch, OpenMP, OpenBLAS, the C library, numpy, scipy, scikit-learn or matplotlib (its
# config and cache folders) read of the environment when they start or load, by prefix: a job whose values differ from
# the server's start runs fresh.
READ_AT_LOAD = (
    "PYTHON",
    "PYTORCH",
    "TORCH",
    "CUDA_",
    "OMP_",
    "GOMP_",
    "KMP_",
    "OPENBLAS_",
    "GOTO_",
    "MKL_",
    "LD_",
    "MALLOC",
    "MPL",
    "MATPLOTLIB",
    "XDG_CONFIG_HOME",
    "XDG_CACHE_HOME",
    "HOME",
    "LANG",
    "LC_",
    "TZ",
    "SKLEARN_",
    "SCIPY_",
    "NPY_",
    "NUMPY_",
)


def read_at_load(env: dict) -> dict:
    """The variables of ``env`` a start or a load reads, bar the thread counts Snakemake sets per job."""
    return {k: v for k, v in env.items() if k.startswith(READ_AT_LOAD) and k not in THREAD_COUNTS}


@dataclass(frozen=True)
class JobServer:
    """A job server as its parent sees it: its process and the write end of the pipe that tells it to stop (closed:
    by its parent at the end, or by its parent's end)."""

    pid: int
    stop: int


@dataclass(frozen=True)
class JobServers:
    """The job servers of a fork server, and the launcher its runs take as their Python."""

    servers: tuple[JobServer, ...]
    launcher: Path

    def forget(self) -> None:
        """In a fork of their parent (a Snakemake run): their pipes closed, so they stop when the parent ends."""
        for server in self.servers:
            os.close(server.stop)

    def close(self) -> None:
        """Stop them and wait for them, which waits for their jobs still running: their CPU counted in this process's."""
        self.forget()
        for server in self.servers:
            os.waitpid(server.pid, 0)


def start_job_servers(folder: Path, started_with: dict) -> JobServers | dict:
    """Import each server's libraries and fork it (its socket in ``folder``), then write the launcher that reaches
    them; ``started_with``: this process's environment at its start. In a job's fork, the job to run."""
    servers: list[JobServer] = []
    for name, modules in PRELOADS.items():
        for module in modules:
            importlib.import_module(module)
        started = _start(_address(folder, name), servers)
        if isinstance(started, dict):
            return started
        servers.append(started)
    return JobServers(tuple(servers), write_launcher(folder, started_with))


def _address(folder: Path, name: str) -> Path:
    return folder / f"{name}.sock"


def _start(address: Path, before: list[JobServer]) -> JobServer | dict:
    with contextlib.suppress(FileNotFoundError):  # a stopped server's: its job server no longer accepts
        address.unlink()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(address))  # before the fork: a launcher may connect before the job server first waits
    listener.listen(64)
    stopped, stop = os.pipe()
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        os.setpgid(0, 0)  # not the test worker's group: a Ctrl-C there ends the server, whose end stops this one
        for fd in (stop, *(server.stop for server in before)):  # only its parent's end may hold it, or another's
            os.close(fd)
        quiet = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1):  # not the protocol's pipes: EOF must reach the test worker when the server ends
            os.dup2(quiet, fd)
        os.close(quiet)
        return _serve(listener, stopped)
    listener.close()
    os.close(stopped)
    return JobServer(pid, stop)


def _serve(listener: socket.socket, stopped: int) -> dict:
    """Accept jobs, each handled by a fork of its own, until the parent closes its end of the pipe ``stopped`` (or has
    ended); then wait for the jobs still running and exit. Return in a job's fork, with its request."""
    while listener in select.select([listener, stopped], [], [])[0]:  # else the pipe alone: told to stop
        connection, _ = listener.accept()
        if os.fork() == 0:
            listener.close()
            os.close(stopped)
            return _handle(connection)
        connection.close()
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(-1, os.WNOHANG)[0]:  # the handlers that have reported
                pass
    listener.close()  # a launcher of a run that outlived the server is refused, not left waiting
    with contextlib.suppress(ChildProcessError):
        while True:
            os.wait()
    os._exit(0)


def _handle(connection: socket.socket) -> dict:
    """Receive a job (its standard files as descriptors, then its request), fork it, wait for it and report its exit
    status to the launcher; return in the job's fork, with its request."""
    try:
        _, fds, _, _ = socket.recv_fds(connection, 1, 3)
        body = b""
        while chunk := connection.recv(1 << 16):
            body += chunk
        request = {**json.loads(body), "fds": fds}
        if len(fds) != 3:
            raise ValueError("a request without its three standard files")
    except (OSError, ValueError):  # a launcher killed before its request was whole: no job to run
        os._exit(1)
    pid = os.fork()
    if pid == 0:
        connection.close()
        return request
    for fd in fds:
        os.close(fd)
    status = _wait(pid, connection)
    with contextlib.suppress(OSError):  # the launcher may be gone: no one to tell
        connection.sendall(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}).encode())
    os._exit(0)


def _wait(pid: int, connection: socket.socket) -> int:
    """The job's wait status; the job killed first if its launcher ends before it (its end of the connection closed:
    POLLHUP, which its shutdown for writing alone does not raise)."""
    job = os.pidfd_open(pid)
    poll = select.poll()
    poll.register(job, select.POLLIN)
    poll.register(connection, select.POLLHUP)
    while job not in (ready := dict(poll.poll())):
        if ready.get(connection.fileno(), 0) & (select.POLLHUP | select.POLLERR):
            os.kill(pid, signal.SIGKILL)
            poll.unregister(connection)
    os.close(job)
    return os.waitpid(pid, 0)[1]


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
    sys.path[0] = os.path.dirname(os.path.realpath(sys.argv[0]))
    return exit_status(lambda: runpy.run_path(sys.argv[0], run_name="__main__"))


def set_thread_counts(env: dict) -> None:
    """The OpenMP and BLAS thread counts the environment gives, set as those libraries set them when loaded (in a
    job's fork, before its environment was known): OpenBLAS reads its own variable, then GOTO's, then OpenMP's. Set for
    the calling thread, which is where the jobs' torch and numpy run their parallel regions from."""
    from threadpoolctl import threadpool_limits

    omp = env.get("OMP_NUM_THREADS", "")
    blas = env.get("OPENBLAS_NUM_THREADS") or env.get("GOTO_NUM_THREADS") or omp
    limits = {api: int(n) for api, n in (("openmp", omp), ("blas", blas)) if n.isdigit()}
    if limits:
        threadpool_limits(limits=limits)


def write_launcher(folder: Path, started_with: dict) -> Path:
    """The runs' Python (``folder``/python), written whole before it is used (a SLURM job may start it meanwhile)."""
    text = f"#!{sys.executable} -S\n" + LAUNCHER.format(
        python=sys.executable,
        **{name: str(_address(folder, name)) for name in PRELOADS},
        measures_memory=MEASURES_MEMORY,
        prefixes=READ_AT_LOAD,
        thread_counts=THREAD_COUNTS,
        load=read_at_load(started_with),
        set_by_snakemake=tuple(k for k in THREAD_COUNTS if k in started_with),
    )
    written = folder / "python.new"
    written.write_text(text)
    written.chmod(0o755)
    return written.replace(folder / "python")


LAUNCHER = '''"""A Snakemake job's Python in a forked test run (tests/job_forks.py): the job forked by a job server."""
import json, os, signal, socket, sys

PYTHON = {python!r}
args = sys.argv[1:]
load = {{k: v for k, v in os.environ.items() if k.startswith({prefixes!r}) and k not in {thread_counts!r}}}
# a script alone, whose start would read what the job server's did (the thread counts: Snakemake's, set by the job)
if len(args) != 1 or not args[0].endswith(".py") or load != {load!r} or not set(os.environ) >= set({set_by_snakemake!r}):
    os.execv(PYTHON, [PYTHON, *args])
job = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
job.connect({trials!r} if args[0].endswith({measures_memory!r}) else {jobs!r})
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
