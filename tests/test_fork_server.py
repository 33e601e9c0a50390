"""The suite's Snakemake runs (workflow_helpers.snakemake) go through a fork server: what a test reads of a run, its
exit status and its output, is what the `snakemake` command gives."""

import json
import os
import re
import shutil
import subprocess

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
# environment variable of the run's, the thread counts Snakemake set for its two threads; then exits as asked.
JOB_SNAKEFILE = """
rule job:
    output:
        "job.txt",
    threads: 2
    params:
        end=config["end"],
    script:
        "job.py"
"""
JOB = """
import json, os, signal, sys
import numpy, threadpoolctl, torch

seen = {
    "argv": [os.path.basename(a).split(".", 1)[1] for a in sys.argv],  # Snakemake's copy: tmp<random>.job.py
    "path": sys.path[0] == os.path.dirname(os.path.abspath(sys.argv[0])),
    "cwd": os.getcwd(),
    "variable": os.environ.get("A_VARIABLE"),
    "torch threads": torch.get_num_threads(),
    # by kind: the job server has loaded scipy's OpenBLAS beside numpy's
    "pools": sorted({(p["user_api"], p["num_threads"]) for p in threadpoolctl.threadpool_info()}),
    "name": __name__,
}
with open(snakemake.output[0], "w") as out:
    json.dump(seen, out)
with open("forked.txt", "w") as out:  # a fresh process has not imported matplotlib: the job server has
    out.write(str("matplotlib" in sys.modules))
if snakemake.params.end == "exit 3":
    sys.exit(3)
if snakemake.params.end == "killed":
    os.kill(os.getpid(), signal.SIGKILL)
if snakemake.params.end == "sleep":
    import time
    time.sleep(60)
"""


def _job_run(folder, end: str, forked: bool, env: dict | None = None):
    folder.mkdir()
    (folder / "Snakefile").write_text(JOB_SNAKEFILE)
    (folder / "job.py").write_text(JOB)
    args = ["--cores", "2", "--config", f"end={end}"]
    env = {"A_VARIABLE": "set", **(env or {})}
    if forked:
        return snakemake(folder, *args, check=False, env=env)
    full = workflow_helpers.plain_env({**os.environ, **env})
    return subprocess.run([SNAKEMAKE, *args], cwd=folder, capture_output=True, text=True, env=full)


def test_a_job_of_a_forked_run_runs_in_a_fork_as_python_runs_its_script(tmp_path):
    command, forked = (_job_run(tmp_path / name, "done", name == "forked") for name in ("command", "forked"))
    assert command.returncode == forked.returncode == 0
    assert (tmp_path / "command/forked.txt").read_text() == "False"
    assert (tmp_path / "forked/forked.txt").read_text() == "True"
    seen = {name: json.loads((tmp_path / name / "job.txt").read_text()) for name in ("command", "forked")}
    assert seen["forked"]["cwd"] == str(tmp_path / "forked")
    assert seen["command"] == {**seen["forked"], "cwd": str(tmp_path / "command")}
    assert seen["forked"]["torch threads"] == 2 and ("openmp", 2) in map(tuple, seen["forked"]["pools"])


@pytest.mark.parametrize("end", ["exit 3", "killed"])
def test_a_job_that_fails_or_is_killed_fails_its_run_as_with_the_command(tmp_path, end):
    command, forked = (_job_run(tmp_path / name, end, name == "forked") for name in ("command", "forked"))
    assert (tmp_path / "forked/forked.txt").read_text() == "True"
    assert command.returncode == forked.returncode == 1
    ended = r"returned non-zero exit status 3|died with <Signals.SIGKILL: 9>"
    assert re.findall(ended, forked.stdout + forked.stderr) == re.findall(ended, command.stdout + command.stderr) != []


def test_a_job_whose_environment_changes_pythons_start_up_starts_fresh_with_it(tmp_path):
    (tmp_path / "hook").mkdir()
    (tmp_path / "hook" / "sitecustomize.py").write_text("import os\nos.environ['A_VARIABLE'] = 'from the hook'\n")
    forked = _job_run(tmp_path / "run", "done", True, env={"PYTHONPATH": str(tmp_path / "hook")})
    assert forked.returncode == 0 and (tmp_path / "run/forked.txt").read_text() == "False"
    assert json.loads((tmp_path / "run/job.txt").read_text())["variable"] == "from the hook"


def test_a_run_killed_at_the_limit_takes_its_jobs_along(tmp_path, monkeypatch):
    monkeypatch.setattr(workflow_helpers, "RUN_LIMIT_S", 20)
    with pytest.raises(AssertionError, match="still running after 20 s, killed"):
        _job_run(tmp_path / "run", "sleep", True)
    assert (tmp_path / "run/forked.txt").read_text() == "True"
    jobs = [p for p in os.listdir("/proc") if p.isdigit() and _runs(p, "job.py")]
    assert jobs == []


def _runs(pid: str, script: str) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            return script.encode() in cmdline.read() and os.path.exists(f"/proc/{pid}/status")
    except OSError:
        return False
