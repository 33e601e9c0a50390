"""The suite's Snakemake runs (workflow_helpers.snakemake) go through a fork server: what a test reads of a run, its
exit status and its output, is what the `snakemake` command gives."""

import concurrent.futures
import json
import os
import re
import shutil
import signal
import subprocess
import time

import pytest
import workflow_helpers
from workflow_helpers import SNAKEMAKE, snakemake

pytestmark = pytest.mark.workflow

SNAKEFILE = """
rule all:
    input:
        "done.txt",


rule done:
    output:
        "done.txt",
    params:
        value=config["value"],
    shell:
        "echo {params.value} > {output}"
"""


def _lines(proc) -> list[str]:
    # the parts of Snakemake's output that name a time or the run's id differ between any two runs
    varying = r"\d{4}-\d\d-\d\d[T ][\d:.]+|\[.*\d\d:\d\d:\d\d.*\]|@ \d\d:\d\d|Workflow ID: [\w-]+"
    return re.sub(varying, "<varies>", proc.stdout + proc.stderr).splitlines()


@pytest.mark.parametrize(
    "args", [["-n", "--config", "value=1"], ["--cores", "1", "--config", "nothing=1"]], ids=["dry run", "refused"]
)
def test_a_run_exits_and_prints_as_the_command_does(tmp_path, args):
    (tmp_path / "Snakefile").write_text(SNAKEFILE)
    env = workflow_helpers.plain_env(dict(os.environ))
    command = subprocess.run([SNAKEMAKE, *args], cwd=tmp_path, capture_output=True, text=True, env=env)
    shutil.rmtree(tmp_path / ".snakemake")
    forked = snakemake(tmp_path, *args, check=False)
    assert workflow_helpers._fork_server().proc is not None  # run in a fork, not as the command
    assert forked.returncode == command.returncode and (forked.returncode == 0) == (args[0] == "-n")
    assert _lines(forked) == _lines(command)


def test_a_run_that_leaves_an_idle_thread_pool_ends_as_the_command_does(tmp_path, monkeypatch):
    monkeypatch.setattr(workflow_helpers, "RUN_LIMIT_S", 60)  # fails the test, not the suite, if it hangs
    (tmp_path / "Snakefile").write_text(
        "from concurrent.futures import ThreadPoolExecutor\n\n"
        "POOL = ThreadPoolExecutor(1)\n"
        "POOL.submit(print, 'a worker thread started').result()\n" + SNAKEFILE
    )
    done = snakemake(tmp_path, "--cores", "1", "--config", "value=2")
    assert done.returncode == 0 and (tmp_path / "done.txt").read_text() == "2\n"


def test_a_run_whose_environment_changes_pythons_start_up_starts_with_it(tmp_path):
    (tmp_path / "Snakefile").write_text(SNAKEFILE)
    (tmp_path / "hook").mkdir()
    (tmp_path / "hook" / "sitecustomize.py").write_text("import sys\nprint('started with the hook', file=sys.stderr)\n")
    done = snakemake(tmp_path, "-n", "--config", "value=3", env={"PYTHONPATH": str(tmp_path / "hook")})
    assert done.stderr.startswith("started with the hook")


def test_a_run_killed_at_the_limit_fails_its_test_and_the_next_run_gets_its_own_answer(tmp_path, monkeypatch):
    (tmp_path / "slow").mkdir()
    (tmp_path / "slow" / "Snakefile").write_text("import time\n\ntime.sleep(30)\n" + SNAKEFILE)
    (tmp_path / "Snakefile").write_text(SNAKEFILE)
    monkeypatch.setattr(workflow_helpers, "RUN_LIMIT_S", 3)
    with pytest.raises(AssertionError, match="still running after 3 s, killed"):
        snakemake(tmp_path / "slow", "-n", "--config", "value=4")
    refused = snakemake(tmp_path, "-n", "--config", "nothing=4", check=False)
    assert refused.returncode == 1 and "KeyError" in refused.stdout + refused.stderr


# A job that writes what `python <script>` gives a script: its arguments, module path and working directory, an
# environment variable of the run's, the thread counts Snakemake set for its two threads, and what was imported before
# it started (a fresh process: nothing; a fork: its job server's imports); then ends as asked.
JOB_SNAKEFILE = """
rule job:
    output:
        "job.txt",
    threads: 2
    params:
        end=config["end"],
    script:
        config.get("script", "job.py")
"""
JOB = """
import sys

preloaded = sorted(name for name in ("matplotlib", "torch") if name in sys.modules)
import json, os, signal
import threadpoolctl, torch

seen = {
    "argv": [os.path.basename(a).split(".", 1)[1] for a in sys.argv],  # Snakemake's copy: tmp<random>.job.py
    "path": sys.path[0] == os.path.dirname(os.path.realpath(sys.argv[0])),
    "cwd": os.getcwd(),
    "variable": os.environ.get("A_VARIABLE"),
    "torch threads": torch.get_num_threads(),
    # by kind: the job server has loaded scipy's OpenBLAS beside numpy's
    "pools": sorted({(p["user_api"], p["num_threads"]) for p in threadpoolctl.threadpool_info()}),
    "name": __name__,
}
with open("seen.json", "w") as out:  # not the output, which Snakemake removes when the job fails
    json.dump({**seen, "preloaded": preloaded, "pid": os.getpid()}, out)
open(snakemake.output[0], "w").close()
if snakemake.params.end == "exit 3":
    sys.exit(3)
if snakemake.params.end == "killed":
    os.kill(os.getpid(), signal.SIGKILL)
if snakemake.params.end == "sleep":
    import time
    time.sleep(60)
"""


def _job_run(folder, end: str, forked: bool, env: dict | None = None, script: str = "job.py"):
    folder.mkdir()
    (folder / "Snakefile").write_text(JOB_SNAKEFILE)
    (folder / script).write_text(JOB)
    args = ["--cores", "2", "--config", f"end={end}", f"script={script}"]
    env = {"A_VARIABLE": "set", **(env or {})}
    if forked:
        return snakemake(folder, *args, check=False, env=env)
    full = workflow_helpers.plain_env({**os.environ, **env})
    return subprocess.run([SNAKEMAKE, *args], cwd=folder, capture_output=True, text=True, env=full)


def _seen(folder) -> dict:
    return json.loads((folder / "seen.json").read_text())


def test_a_job_of_a_forked_run_runs_in_a_fork_as_python_runs_its_script(tmp_path):
    command, forked = (_job_run(tmp_path / name, "done", name == "forked") for name in ("command", "forked"))
    assert command.returncode == forked.returncode == 0
    seen = {name: _seen(tmp_path / name) for name in ("command", "forked")}
    assert (seen["command"].pop("preloaded"), seen["forked"].pop("preloaded")) == ([], ["matplotlib", "torch"])
    assert seen["forked"]["cwd"] == str(tmp_path / "forked")
    assert {**seen["command"], "cwd": "", "pid": 0} == {**seen["forked"], "cwd": "", "pid": 0}
    assert seen["forked"]["torch threads"] == 2 and ["openmp", 2] in seen["forked"]["pools"]


def test_a_trial_job_forks_from_a_server_that_imported_only_what_a_trial_imports(tmp_path):
    # a trial measures its process's resident set, which in a fork counts the pages it shares with its server
    forked = _job_run(tmp_path / "run", "done", True, script="train_trial.py")
    assert forked.returncode == 0 and _seen(tmp_path / "run")["preloaded"] == ["torch"]


@pytest.mark.parametrize("end", ["exit 3", "killed"])
def test_a_job_that_fails_or_is_killed_fails_its_run_as_with_the_command(tmp_path, end):
    command, forked = (_job_run(tmp_path / name, end, name == "forked") for name in ("command", "forked"))
    assert _seen(tmp_path / "forked")["preloaded"] == ["matplotlib", "torch"]
    assert command.returncode == forked.returncode == 1
    ended = r"returned non-zero exit status 3|died with <Signals.SIGKILL: 9>"
    assert re.findall(ended, forked.stdout + forked.stderr) == re.findall(ended, command.stdout + command.stderr) != []


def test_a_job_whose_environment_changes_what_a_library_reads_when_loaded_starts_fresh(tmp_path):
    # not a PYTHON* variable, with which the whole run starts fresh: matplotlib reads MPLBACKEND when imported
    forked = _job_run(tmp_path / "run", "done", True, env={"MPLBACKEND": "svg"})
    assert forked.returncode == 0 and _seen(tmp_path / "run")["preloaded"] == []


def _ended(pid: int) -> bool:
    for _ in range(50):  # its handler reaps it once killed
        if not os.path.exists(f"/proc/{pid}"):
            return True
        time.sleep(0.1)
    return False


def test_a_run_killed_at_the_limit_takes_its_jobs_along(tmp_path, monkeypatch):
    monkeypatch.setattr(workflow_helpers, "RUN_LIMIT_S", 8)
    with pytest.raises(AssertionError, match="still running after 8 s, killed"):
        _job_run(tmp_path / "run", "sleep", True)
    seen = _seen(tmp_path / "run")
    assert seen["preloaded"] == ["matplotlib", "torch"] and _ended(seen["pid"])


def test_a_job_whose_launcher_is_killed_alone_is_killed_with_it(tmp_path):
    # as a fresh job would be, whose process the launcher's is: Snakemake signals a job's shell alone, which execs it
    server = workflow_helpers._fork_server()  # this thread's, lent to the thread that waits for the run
    lent = concurrent.futures.ThreadPoolExecutor(
        1, initializer=setattr, initargs=(workflow_helpers._THREAD, "server", server)
    )
    ran = lent.submit(_job_run, tmp_path / "run", "sleep", True)
    for _ in range(3000):
        if (tmp_path / "run/seen.json").exists() or ran.done():
            break
        time.sleep(0.1)
    seen = _seen(tmp_path / "run")
    (launcher,) = [pid for pid in os.listdir("/proc") if pid.isdigit() and _launches(pid, tmp_path / "run")]
    os.kill(int(launcher), signal.SIGKILL)
    assert ran.result(timeout=120).returncode == 1 and _ended(seen["pid"])


def _launches(pid: str, folder) -> bool:
    """Whether process ``pid`` is a launcher (`python -S <server folder>/python <script>`) of a job in ``folder``."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            argv = cmdline.read().decode().split("\0")
    except OSError:
        return False
    return "-S" in argv and any(a.endswith("/python") for a in argv) and any(a.startswith(str(folder)) for a in argv)
