"""The study on a real single-node SLURM (cluster/slurm-up.sh), every job through sbatch."""

import functools
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time

import polars as pl
import pytest
from workflow_helpers import (
    ANALYSIS,
    ROOT,
    SNAKEMAKE,
    TINY,
    built_once,
    clone,
    cluster_down,
    cluster_up,
    copy_project,
    planned_jobs,
    run_tiny_study,
    snakemake,
)

# One worker runs them all, one after another: the suite's one-node SLURM has the one CPU that nproc gives under the
# suite's one-thread pools, so it runs one job at a time whatever the workers do, and a test spread to another worker
# would only wait there (for the scheduler, or for the cancelled study through sbatch that ``cancelled_run`` makes once)
# while the other workers' tests could use the cores. SLURM comes up once per run (``slurm``) and goes down at its end.
pytestmark = [pytest.mark.cluster, pytest.mark.xdist_group("slurm")]
PROFILE = [
    "--profile",
    "profiles/slurm",
    "--workflow-profile",
    "none",
    # The plugin's first status check after a submission; each check that finds no job finished adds 10 s to the
    # next wait. Jobs here take seconds, so the first check comes as early as the plugin allows.
    "--slurm-init-seconds-before-status-checks",
    "1",
]
# Columns that must equal the local run's; timing, energy and power may differ.
SAME_AS_LOCAL = [
    "budget",
    "trial",
    "seed",
    "subset_chunks",
    "real_tokens",
    "padded_tokens",
    "steps",
    "eval_loss",
    "final_train_loss",
    "perplexity",
    "params",
    "flops",
    "quality_per_mparam",
    "quality_per_pflop",
]


@pytest.fixture(scope="session")
def slurm(shared):
    """SLURM up once per test run, by the first worker that needs it (workflow_helpers.cluster_up: a machine that
    cannot is a failure, not a skip); every worker's cluster tests share it. It goes down once, when no test can need
    it any more: at the end of a run without workers here, else when every worker has ended (conftest.py's
    pytest_sessionfinish), never at one worker's end while another's jobs run on it."""
    built_once(shared, "slurm", cluster_up)
    yield
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        cluster_down(shared)


@pytest.fixture(scope="module", autouse=True)
def study_built_beside(shared, cache):
    """The local study that the rerun is compared with, built from the start beside the SLURM tests, which mostly
    wait on the scheduler: they would otherwise wait for it in the middle, the suite's longest path. A failed build
    fails the ``study`` fixture that asks for it (built_once keeps the error)."""
    thread = threading.Thread(
        target=built_once, args=(shared, "study", functools.partial(run_tiny_study, env=cache)), daemon=True
    )
    thread.start()
    yield
    thread.join()


def _squeue(workdir: os.PathLike) -> list[tuple[str, str, str]]:
    """(job id, comment, state) of the jobs SLURM knows that run in ``workdir``: a job of another study on the same
    cluster (an earlier test run's, a user's) is never taken for this one's."""
    out = subprocess.run(["squeue", "-h", "-o", "%i|%k|%T|%Z"], capture_output=True, text=True).stdout
    rows = [line.split("|") for line in out.splitlines() if line.strip()]
    return [
        (jobid, comment, state)
        for jobid, comment, state, cwd in rows
        if os.path.realpath(cwd) == os.path.realpath(workdir)
    ]


def test_a_gpu_job_sees_the_gpu_slurm_assigned_and_the_meter_maps_it(slurm, tmp_path):
    """SLURM's fake GPU sets CUDA_VISIBLE_DEVICES; our NVML mapping resolves it (fake NVML with two GPUs)."""
    code = (
        "import os; from fake_nvml import FakeNvml; from tokenwatt.measurement.devices import visible_gpu_uuid; "
        "nvml = FakeNvml({'GPU-first': 1.0, 'GPU-second': 1.0}); "
        "print('CVD', os.environ.get('CUDA_VISIBLE_DEVICES'), visible_gpu_uuid(nvml, 0, os.environ.get('CUDA_VISIBLE_DEVICES')))"
    )
    out = tmp_path / "job.out"
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'tests'}:{ROOT / 'workflow/scripts'}"}
    subprocess.run(
        ["sbatch", "--wait", "--gpus=1", "-o", str(out), "--wrap", f'{sys.executable} -c "{code}"'],
        check=True,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.read_text().split() == ["CVD", "0", "GPU-first"]


# The tiny study at one trial id per budget: SLURM runs one job at a time here, ~10 s each (the plugin's status checks),
# and what the cancelled study asks (a cancelled trial named, a rerun that trains it alone and matches the local run)
# needs no more trials than one finished and one cancelled.
ONE_TRIAL = [*TINY, "one-trial.yaml"]


def _cancel_a_training_job(work):
    """The tiny study at one trial id through SLURM in ``work`` with no retries; one training job is scancel'ed while
    running. What the run ended with is kept beside it (cancelled.json, terminal.txt)."""
    work = clone(work)
    (work / "one-trial.yaml").write_text("study: {trials: 1}\n")
    env = {**os.environ, "HF_HUB_DISABLE_PROGRESS_BARS": "1"}
    proc = subprocess.Popen(
        [SNAKEMAKE, *ONE_TRIAL, *PROFILE, "--retries", "0", "--keep-going"],
        cwd=work,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    cancelled = None
    deadline = time.time() + 900
    while cancelled is None and time.time() < deadline and proc.poll() is None:
        for jobid, comment, state in _squeue(work):
            if comment.startswith("rule_train_trial") and state == "RUNNING":
                subprocess.run(["scancel", jobid], check=True)
                cancelled = (jobid, re.sub(r"^rule_train_trial_wildcards_", "", comment))
                break
        time.sleep(0.5)
    output, _ = proc.communicate(timeout=1800)
    assert cancelled, f"no training job was seen running:\n{output[-3000:]}"
    (work / "terminal.txt").write_text(output)
    (work / "cancelled.json").write_text(json.dumps({"returncode": proc.returncode, "cancelled": cancelled}))


@pytest.fixture
def cancelled_run(slurm, built):
    """The tiny study at one trial id through SLURM with one training job cancelled, run once per test run (whichever worker asks
    first; built_once) and copied for each test, which reruns it in its copy: (folder, return code, what Snakemake
    printed, (the cancelled job's id, its wildcards))."""
    work = built("slurm-cancelled", _cancel_a_training_job)
    ended = json.loads((work / "cancelled.json").read_text())
    return work, ended["returncode"], (work / "terminal.txt").read_text(), tuple(ended["cancelled"])


def test_a_cancelled_training_job_is_reported_clearly(cancelled_run):
    work, returncode, output, (jobid, wildcards) = cancelled_run
    assert returncode != 0
    assert re.search(rf"SLURM-job '{jobid}' failed, SLURM status is: 'CANCELLED'", output), output[-3000:]
    assert not (work / "results/report.html").exists()


def test_a_rerun_completes_the_study_without_redoing_finished_trials(cancelled_run, study):
    work, _, _, _ = cancelled_run
    finished = {p: p.stat().st_mtime_ns for p in (work / "results/trials").rglob("metrics.json")}
    assert len(finished) == 1  # of its two trials, the other cancelled
    assert planned_jobs(work, *ONE_TRIAL, *PROFILE) == {"train_trial": 1, **ANALYSIS}
    rerun = snakemake(work, *ONE_TRIAL, *PROFILE)
    assert (rerun.stdout + rerun.stderr).count("submitted with SLURM") == 9  # the trial and the eight analysis jobs
    assert {p: p.stat().st_mtime_ns for p in finished} == finished
    assert (work / "results/report.html").exists()
    # Same results table as the local run's trial id 1 (a trial's subset and seed are its id's, whatever the count),
    # except timing and energy.
    ours = pl.read_parquet(work / "results/analysis/trials.parquet").select(SAME_AS_LOCAL)
    local = pl.read_parquet(study / "results/analysis/trials.parquet").select(SAME_AS_LOCAL)
    assert ours.height == 2 and ours.equals(local.filter(pl.col("trial") == 1))
    assert set(pl.read_parquet(work / "results/analysis/trials.parquet")["cuda_visible_devices"]) <= {"0", "1"}


def _allocated_gpu_types(work: os.PathLike) -> dict[str, tuple[str, set[str]]]:
    """Per training job run in ``work`` that SLURM still knows (MinJobAge keeps finished ones), by job id: its
    wildcards and the GPU types it was allocated (the job's detailed record, e.g. JOB_GRES=gpu:h100:1). Another
    test's jobs on the same cluster, running beside, are never counted."""
    out = subprocess.run(["scontrol", "-d", "show", "job", "-o"], capture_output=True, text=True).stdout
    found = {}
    for line in out.splitlines():
        comment = re.search(r"Comment=rule_train_trial_wildcards_(\S+)", line)
        if comment and f"WorkDir={os.path.realpath(work)} " in line:
            found[re.search(r"JobId=(\d+)", line).group(1)] = (
                comment.group(1),
                set(re.findall(r"JOB_GRES=gpu:(\w+):1", line)),
            )
    return found


def test_a_hardware_factor_puts_each_levels_trials_on_its_gpu_type(slurm, tmp_path):
    """config/hardware-slurm.yaml's two levels, on the two GPU types this cluster has (trained on the CPU here). The
    data stage runs locally before and the analysis after: what is asked of SLURM here is where it puts the trials
    and their device profiles (the whole study through sbatch, data and analysis included, is cancelled_run's)."""
    work = clone(tmp_path)
    (work / "cpu.yaml").write_text(
        "design: {hardware: {a100: {device: cpu}, h100: {device: cpu}}}\n"
        "study: {name: hardware, seed: 11, budgets: [1000], trials: 2}\n"
    )
    config = [*TINY, "config/hardware-slurm.yaml", "cpu.yaml"]
    snakemake(work, *config, "--cores", "2", "data")
    trials = [f"results/trials/hardware={level}/b1000/t{t}/metrics.json" for level in ("a100", "h100") for t in (1, 2)]
    before = set(_allocated_gpu_types(work))
    snakemake(work, *config, *PROFILE, "--", *trials)
    jobs = [job for jobid, job in _allocated_gpu_types(work).items() if jobid not in before]
    assert len(jobs) == 4, jobs
    for wildcards, types in jobs:
        level = re.search(r"hardware=([a-z0-9]+)", wildcards).group(1)
        assert types == {level}, (wildcards, types)
    measured = {path: (work / path).stat().st_mtime_ns for path in trials}
    snakemake(work, *config, "--cores", "2")
    assert {path: (work / path).stat().st_mtime_ns for path in trials} == measured  # the analysis only: no trial again
    records = pl.read_parquet(work / "results/analysis/trials.parquet")
    assert sorted(records["levels_hardware"].to_list()) == ["a100", "a100", "h100", "h100"]


def test_a_two_device_trial_asks_slurm_for_two_gpus_and_records_its_job(slurm, tmp_path):
    """config/devices.yaml's two-device level on this cluster's two (fake) GPUs, trained as two CPU ranks: the trial's
    job is given both GPUs, and its record names the SLURM job it ran as, to be joined with the accounting."""
    work = clone(tmp_path)
    (work / "two.yaml").write_text(
        "design: {devices: [2]}\ntrain: {batch_size: 2}\nstudy: {name: devices, seed: 11, budgets: [1000], trials: 1}\n"
    )
    config = [*TINY, "config/devices.yaml", "two.yaml"]
    snakemake(work, *config, "--cores", "2", "data")
    trial = "results-devices/trials/devices=2/b1000/t1/metrics.json"
    # The suite's one-node cluster has the CPUs nproc gives under the suite's one-thread pools (OMP_NUM_THREADS=1:
    # one), and the rule asks train.threads × 2; the two ranks share that one here.
    snakemake(work, *config, *PROFILE, "--set-resources", "train_trial:cpus_per_task=1", "--", trial)
    out = subprocess.run(["scontrol", "-d", "show", "job", "-o"], capture_output=True, text=True).stdout
    [line] = [
        line
        for line in out.splitlines()
        if "rule_train_trial" in line and f"WorkDir={os.path.realpath(work)} " in line and "JobState=COMPLETED" in line
    ]
    assert "TresPerJob=gres:gpu:2" in line  # asked for
    gres = re.search(r"JOB_GRES=(\S+)", line).group(1)  # given
    assert sum(int(n) for n in re.findall(r"gpu:\w+:(\d+)", gres)) == 2, gres
    record = json.loads((work / trial).read_text())
    assert record["devices"] == 2 and record["job"]["slurm_job_id"] == re.search(r"JobId=(\d+)", line).group(1)
    assert len(record["cuda_visible_devices"].split(",")) == 2


def test_a_github_release_runs_its_jobs_on_slurm_and_restores_what_was_not_forced(slurm, released, tmp_path):
    """Each job's own Snakemake on a node parses the project again: it fetches the release, imports the library from
    its source cache, reads the mirror the main Snakemake wrote in this run, and keeps the forced list sbatch passed
    down."""
    project = copy_project(released.project, tmp_path / "project")
    shutil.rmtree(project / ".snakemake" / "tokenwatt")  # written again by this run's main Snakemake
    trial = project / "results" / "trials" / "b1000" / "t1"
    log = project / "results" / "logs" / "train_trial" / "b1000" / "t1.log"
    for path in [*trial.iterdir(), log]:
        path.unlink()
    profile = ["--profile", str(ROOT / "profiles" / "slurm"), *PROFILE[2:]]
    logs = tmp_path / "slurm_logs"  # kept: the job's own output shows what its Snakemake on the node saw
    proc = snakemake(
        project,
        *profile,
        "--slurm-keep-successful-logs",
        "--slurm-logdir",
        str(logs),
        "--",
        "results/trials/b1000/t1/metrics.json",
        env=released.env,
    )
    assert (proc.stdout + proc.stderr).count("submitted with SLURM") == 1
    assert "store: restored from" in log.read_text()  # on the node, through sbatch: not trained again
    job_output = "".join(f.read_text() for f in logs.rglob("*.log"))
    assert "tw_train_trial" in job_output and "is not in this job's environment" not in job_output
    assert (trial / "metrics.json").read_bytes() == (
        released.project / "results/trials/b1000/t1/metrics.json"
    ).read_bytes()
