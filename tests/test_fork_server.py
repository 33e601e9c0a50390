"""The suite's Snakemake runs (workflow_helpers.snakemake) go through a fork server: what a test reads of a run, its
exit status and its output, is what the `snakemake` command gives."""

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
