"""Run Snakemake on a copy of the repository, as a user of a fresh clone would."""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import json
import os
import random
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")
TINY = ["--configfile", ".test/config/config.yaml"]
# The shipped configs that are added to another study (--configfile study.yaml overlay.yaml), not run over the
# embedded default alone: each with the study it is added to.
OVERLAYS = {
    "hardware-slurm.yaml": "config.yaml",
    "selection-curriculum.yaml": "selection.yaml",
    "devices.yaml": "config.yaml",
    "optimizer.yaml": "config.yaml",
    "architecture.yaml": "config.yaml",
    "paper-8bit.yaml": "paper.yaml",
    "frontier-halving.yaml": "frontier-wsd.yaml",
}
# The analysis jobs a change below the trials reruns, once each.
ANALYSIS = {
    "aggregate": 1,
    "stats": 1,
    "curves": 1,
    "scaling": 1,
    "trials": 1,
    "scaling_figures": 1,
    "trials_figures": 1,
    "report": 1,
}
COPIED = ("environment.yml", "workflow", "config", "profiles", "resources", ".test")


def clone(dest: Path) -> Path:
    for name in COPIED:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    return dest


def copy_of_study(study: Path, dest: Path) -> Path:
    """A second folder with the study's results and Snakemake's records of them, to break without harm."""
    work = clone(dest)
    shutil.copytree(study / "results", work / "results")
    shutil.copytree(study / ".snakemake", work / ".snakemake", ignore=shutil.ignore_patterns("locks", "incomplete"))
    return work


def built_once(shared: Path, name: str, build) -> Path:
    """``shared/name``, made by ``build(folder)`` once in a test run, by whichever parallel worker asks first; the
    others wait for it under a lock and never build it again. A build that failed fails every later ask with its
    error, without a second try that would fail the same way minutes later."""
    folder, failed = shared / name, shared / f"{name}.failed"
    shared.mkdir(parents=True, exist_ok=True)
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, also when the build raises
        if failed.exists():
            raise AssertionError(f"building the shared {name} failed in another worker:\n{failed.read_text()}")
        if not (folder / ".built").exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            try:
                build(folder)
            except BaseException as err:
                failed.write_text(str(err)[-8000:])
                raise
            (folder / ".built").touch()
    return folder


def cluster_up(folder: Path) -> None:
    """cluster/slurm-up.sh, installing Debian's packages if needed: the build of the run's one SLURM (built_once's
    ``shared/slurm``, whose mark says a test of this run brought it up); a machine that cannot is a failure."""
    up = subprocess.run([str(ROOT / "cluster/slurm-up.sh")], capture_output=True, text=True)
    assert up.returncode == 0, f"SLURM could not start on this machine:\n{up.stderr[-3000:]}"


def cluster_down(shared: Path) -> None:
    """cluster/slurm-down.sh, once, if a test of this run brought SLURM up (cluster_up)."""
    mark = shared / "slurm" / ".built"
    if mark.exists():
        subprocess.run([str(ROOT / "cluster/slurm-down.sh")], capture_output=True, text=True)
        mark.unlink()


def run_tiny_study(folder: Path, env: dict) -> None:
    """The tiny study run locally in ``folder``, with the between-workflow cache ``env`` on (targets before --cache),
    and what the user saw kept in terminal.txt: the shared ``study`` fixture's build."""
    work = clone(folder)
    proc = snakemake(work, *TINY, "--cores", "2", "--resources", "gpu=1", "--cache", env=env)
    (work / "terminal.txt").write_text(proc.stdout + proc.stderr)


def own_copy(built: Path, dest: Path) -> Path:
    """A worker's own copy of a study built once, to change and to run Snakemake in without touching another
    worker's: files keep their times (Snakemake's records compare them); a link into the run's output cache becomes
    a file of its own, so a test that edits a trial's record in place edits its copy only."""
    with contextlib.suppress(FileNotFoundError):
        dest.rmdir()  # pytest's mktemp made it empty
    shutil.copytree(built, dest, ignore=shutil.ignore_patterns("locks", "incomplete", ".built"))
    return dest


def run_script(name: str, *args) -> subprocess.CompletedProcess:
    """One of the command-line tools (tools/: fit_scaling.py, energy_to_target.py) as a user runs it, output captured."""
    return subprocess.run(
        [sys.executable, str(ROOT / "tools" / name), *map(str, args)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )


def plain_env(env: dict) -> dict:
    """``env`` for a Snakemake run whose output a test reads: plain, wide text whatever the caller's terminal (the job
    table is parsed, planned_jobs, and colour codes or wrapped rows would hide its rows)."""
    full_env = {**env, "HF_HUB_DISABLE_PROGRESS_BARS": "1", "NO_COLOR": "1", "COLUMNS": "200"}
    full_env.pop("FORCE_COLOR", None)
    return full_env


def _startup(env: dict) -> dict:
    return {name: value for name, value in env.items() if name.startswith("PYTHON")}


# The environment of a run that asks whether a plan is the same from one start to the next: a hash seed of its own, as
# a fresh process draws (forks share their server's), so an order that depends on it shows; it runs the command. A
# number drawn once per worker, not "random", which a worker started with it would share with its server's forks.
FRESH_HASH_SEED = {"PYTHONHASHSEED": str(random.SystemRandom().randrange(1, 2**32))}
# A run through the fork server that takes longer is killed and fails its test, where a hung run would stall the suite:
# the longest run of the suite, the cancelled study through SLURM, takes ~3 min on a slow machine.
RUN_LIMIT_S = 1800


class _ForkServer:
    """A snakemake_fork_server.py, started at its thread's first run: each run a fork of a process that has imported
    Snakemake (~1.4 s of CPU fewer than a fresh `snakemake` each run), the entry point and all it does the command
    line's own, its exit without the interpreter's teardown; its script jobs forks of a job server that has imported
    torch and the analysis libraries (~1.1 s of CPU fewer a trial). A run whose environment changes Python's start-up
    (PYTHON*) runs the command; tests that signal or time the process itself start it themselves (SNAKEMAKE)."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self.log = Path(tempfile.mkdtemp(prefix="snakemake-fork-server-")) / "stderr.txt"
        self.env = plain_env(os.environ)  # the worker's environment, as conftest.py set it

    def run(self, args: list[str], cwd: Path, env: dict) -> subprocess.CompletedProcess:
        if _startup(env) != _startup(self.env):
            # Python reads these when a process starts (PYTHONPATH, a sitecustomize on it, PYTHONHASHSEED...): a fork of
            # a server started without them would not have them, so the command runs, as a fresh process reads them
            return subprocess.run([SNAKEMAKE, *args], cwd=cwd, capture_output=True, text=True, env=env)
        with tempfile.TemporaryDirectory(prefix="snakemake-run-") as tmp:
            out, err = Path(tmp, "stdout"), Path(tmp, "stderr")
            request = {"argv": [SNAKEMAKE, *args], "cwd": str(cwd), "env": env, "stdout": str(out), "stderr": str(err)}
            try:
                code = self._exchange(request)
            except BaseException:
                self._stop()  # a server out of step would answer this worker's next run with this run's reply
                raise
            return subprocess.CompletedProcess([SNAKEMAKE, *args], code, out.read_text(), err.read_text())

    def _exchange(self, request: dict) -> int:
        if self.proc is None:
            with open(self.log, "w") as log:
                self.proc = subprocess.Popen(
                    [sys.executable, str(Path(__file__).with_name("snakemake_fork_server.py")), str(self.log.parent)],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=log,
                    bufsize=0,  # unbuffered: a line read leaves the next in the pipe, where select sees it
                    env=self.env,
                )
            self._reply(300)  # ready once its imports are done: slow while every worker starts at once
        line = json.dumps(request).encode() + b"\n"
        while line:  # a pipe may take part of a long request at a time
            line = line[self.proc.stdin.write(line) :]
        pid = self._reply(60)["pid"]
        try:
            return self._reply(RUN_LIMIT_S)["returncode"]
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):  # the run and the jobs it started (its process group)
                os.killpg(pid, signal.SIGKILL)
            raise AssertionError(
                f"snakemake {' '.join(request['argv'][1:])} still running after {RUN_LIMIT_S} s, killed:\n"
                f"{Path(request['stderr']).read_text()[-4000:]}"
            ) from None

    def _reply(self, timeout_s: float) -> dict:
        if not select.select([self.proc.stdout], [], [], timeout_s)[0]:
            raise TimeoutError
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the Snakemake fork server ended:\n{self.log.read_text()[-4000:]}")
        return json.loads(line)

    def _stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def close(self) -> None:
        """EOF ends the server; waiting for it keeps its CPU in the test run's own (benchmarks/suite_cpu.py)."""
        if self.proc is not None:
            self.proc.stdin.close()
            self.proc.wait()
        shutil.rmtree(self.log.parent, ignore_errors=True)


# One server per thread: a server runs one Snakemake at a time, and a test may run one in a thread beside its own
# (test_cluster.py builds the local study while the SLURM tests wait on the scheduler).
_SERVERS: list[_ForkServer] = []
_THREAD = threading.local()


def _fork_server() -> _ForkServer:
    if not hasattr(_THREAD, "server"):
        _THREAD.server = _ForkServer()
        _SERVERS.append(_THREAD.server)
    return _THREAD.server


@atexit.register
def _close_fork_servers() -> None:
    for server in _SERVERS:
        server.close()


def snakemake(workdir: Path, *args: str, check: bool = True, env: dict | None = None) -> subprocess.CompletedProcess:
    proc = _fork_server().run(list(args), workdir, plain_env({**os.environ, **(env or {})}))
    if check and proc.returncode != 0:
        raise AssertionError(
            f"snakemake {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
        )
    return proc


def planned_jobs(workdir: Path, *args: str, env: dict | None = None) -> Counter:
    """Jobs a dry run would execute, by rule (the 'Job stats' table, as Snakemake's own logger or the default
    profile's rich logger prints it: "train_trial 6" or "train trial 6"), without the target rules. Empty only when
    Snakemake says there is nothing to be done: a table it cannot read fails the test, never passes it vacuously."""
    proc = snakemake(workdir, "-n", *args, env=env)
    out = re.sub(r"\x1b\[[0-9;]*m", "", proc.stdout + proc.stderr)
    if "Job stats" not in out:
        assert "Nothing to be done" in out, f"neither a job table nor 'Nothing to be done' in:\n{out[-3000:]}"
        return Counter()
    jobs, total = Counter(), None
    for line in out.split("Job stats", 1)[1].splitlines()[1:]:
        if not line.strip():  # the rich table's spacer rows
            continue
        m = re.match(r"^\s*([a-z][\w ]*?)\s+(\d+)\s*$", line)
        if m is None:
            if jobs:
                break
            continue
        rule = m.group(1).replace(" ", "_")
        if rule == "total":
            total = int(m.group(2))
            break
        jobs[rule] = int(m.group(2))
    assert total is not None and sum(jobs.values()) == total, f"a job table that does not add up:\n{out[-3000:]}"
    for target in ("all", "data", "interim"):
        jobs.pop(target, None)
    return jobs


# --- a released tokenwatt from GitHub, reached offline: git's url.insteadOf sends github.com/tokenwatt/tokenwatt to a
# local repository of this checkout's files, so Snakemake's own github(...) source runs unchanged
REMOTE_SNAKEFILE = """configfile: "config.yaml"


module tokenwatt:
    snakefile:
        github("tokenwatt/tokenwatt", path="workflow/Snakefile", tag="{tag}")
    config:
        config


use rule * from tokenwatt as tw_*
"""


def git(repo: Path, *args: str, env: dict | None = None) -> None:
    subprocess.run(
        ["git", "-c", "user.name=tokenwatt", "-c", "user.email=tokenwatt@example.org", *args],
        cwd=repo,
        check=True,
        capture_output=True,
        # the developer's own git settings (commit signing, hooks) kept out
        env={**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", **(env or {})},
    )


def release(repo: Path, tag: str, committed: str | None = None) -> None:
    """Commit the folder as it is and tag it; ``committed`` backdates the commit (git's own date format)."""
    dates = {"GIT_COMMITTER_DATE": committed, "GIT_AUTHOR_DATE": committed} if committed else None
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--allow-empty", "-m", tag, env=dates)
    git(repo, "tag", tag)


def publish(base: Path) -> tuple[Path, dict]:
    """This checkout as github.com/tokenwatt/tokenwatt at v1.0.0; the environment that reaches it, with a source cache
    of its own."""
    repo = clone(base / "repo")
    git(repo, "init", "-q")
    release(repo, "v1.0.0")
    return repo, reach(base)


def reach(base: Path) -> dict:
    """The environment that reaches ``base``'s repository (publish) as github.com/tokenwatt/tokenwatt, with the source
    cache beside it: written again for a copy of ``base``, so that it reaches the copy's repository."""
    (base / "gitconfig").write_text(f'[url "{base / "repo"}"]\n\tinsteadOf = https://github.com/tokenwatt/tokenwatt\n')
    return {
        "GIT_CONFIG_GLOBAL": str(base / "gitconfig"),
        "GIT_CONFIG_NOSYSTEM": "1",
        "XDG_CACHE_HOME": str(base / "cache"),
    }


def pin_release(project: Path, tag: str) -> None:
    (project / "Snakefile").write_text(REMOTE_SNAKEFILE.format(tag=tag))


def copy_project(project: Path, dest: Path) -> Path:
    shutil.copytree(project, dest, ignore=shutil.ignore_patterns("locks", "incomplete"))
    return dest


def chromium_title(page: str, tmp_path: Path, width: int, probe: str) -> str:
    """The document title after ``page`` loaded in headless Chromium at a ``width``-px window, with the script
    ``probe`` (which writes its finding into the title) appended to the body: how a test reads what a browser laid out."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    assert chromium, "Debian's chromium is needed for this test: `make test` installs it (apt-get install chromium)"
    path = tmp_path / "report.html"
    path.write_text(page.replace("</body>", probe + "</body>"))
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]
    flags += ["--disable-component-update", "--disable-sync", f"--user-data-dir={tmp_path / 'profile'}"]
    flags += [f"--window-size={width},2000", "--virtual-time-budget=5000", "--dump-dom", path.as_uri()]
    proc = subprocess.run([chromium, *flags], capture_output=True, text=True, timeout=120)
    found = re.search(r"<title>(.*?)</title>", proc.stdout, re.S)
    assert found, proc.stderr[-2000:]
    return found.group(1)


def config_error(schema: dict, cfg: dict) -> str:
    """The message of the ConfigError that validating ``cfg`` against ``schema`` raises (a test fails if none does)."""
    import pytest
    from tokenwatt.plan.config import ConfigError, validate_config

    with pytest.raises(ConfigError) as exc:
        validate_config(cfg, schema)
    return str(exc.value)
