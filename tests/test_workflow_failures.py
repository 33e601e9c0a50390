"""Bad inputs and broken outputs, as a user meets them through Snakemake: each gives a message that
names the key or file and what to do, leaves nothing corrupt, and a rerun after the fix redoes
only what is missing. (Faults inside one stage are tested beside that stage's module.)"""

import base64
import json
import os
import re
import shutil
from typing import NamedTuple

import pytest
from workflow_helpers import TINY, clone, copy_of_study, planned_jobs, snakemake

pytestmark = pytest.mark.workflow

ANALYSIS = {"aggregate": 1, "stats": 1, "trials_figures": 1, "report": 1}  # and any analysis rule added beside them
STUDY_RULES = (
    "corpus",
    "normalize",
    "split",
    "decontaminate",
    "tokenizer",
    "chunk",
    "subset",
    "device_profile",
    "train_trial",
)


def _study_jobs(plan):
    """The jobs of a plan that compute or measure something (the analysis reruns after any of them, in seconds)."""
    return {rule: n for rule, n in plan.items() if rule in STUDY_RULES}


def _reruns(plan, study_jobs):
    """A plan runs exactly these jobs of the study, then the analysis."""
    return _study_jobs(plan) == study_jobs and ANALYSIS.items() <= plan.items()


def _dry(study, text, name="case.yaml"):
    (study / name).write_text(text)
    return snakemake(study, *TINY, name, "-n", check=False)


@pytest.mark.parametrize(
    "text,message",
    [
        ("model: {source: config, preset: llama-huge}", "model.preset: 'llama-huge' is not a preset; choose one of"),
        (
            "tokenizer: {source: pretrained, name: ./missing-tokenizer}",
            "tokenizer.name: the folder ./missing-tokenizer does not exist",
        ),
        ("model: {source: pretrained, name: /nowhere/model}", "model.name: the folder /nowhere/model does not exist"),
        ("study: {name: x, seed: 1, budgets: [-5], trials: 1}", "study.budgets[0]: -5 is less than the minimum of 1"),
        ("train: {on_divergence: ignore}", "train.on_divergence: 'ignore' is not one of ['record', 'fail']"),
        ("metric: {cs_tflops: fast}", "metric.cs_tflops"),
    ],
)
def test_a_bad_config_stops_before_any_job_naming_the_key(study, text, message):
    proc = _dry(study, text)
    assert proc.returncode != 0
    assert message in proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def bare(tmp_path_factory):
    """A fresh clone with nothing built: all a config that must fail before any job needs."""
    return clone(tmp_path_factory.mktemp("bare"))


@pytest.mark.parametrize(
    "text,message",
    [
        ("train: {lr: .inf}", "train.lr: .inf is not a finite number; give a finite value"),
        ("metric: {cs_tflops: 0}", 'metric.cs_tflops: 0 is not allowed; give "measure" or a number > 0'),
        ("train: {lr: 3e-4}", "train.lr: '3e-4' is a string (YAML reads 3e-4 without a dot as text); write 3.0e-4"),
        (
            "design: {model: {big: {preset: llama-tiny, overrides: {num_attention_heads: 5}}}}",
            "design.model.big.overrides.num_attention_heads: num_attention_heads 5 does not divide hidden_size 32",
        ),
    ],
)
def test_a_config_that_cannot_work_stops_before_any_job_with_a_sentence(bare, text, message):
    proc = _dry(bare, text)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and message in out
    assert "Building DAG of jobs" not in out  # refused while parsing, before any job is planned


def test_weights_not_downloaded_yet_let_a_study_be_planned_but_not_started(bare):
    text, message = (
        "model: {source: pretrained, name: org/never-downloaded}",
        "model.name: no folder org/never-downloaded here, and no Hub id org/never-downloaded in the local Hugging Face cache",
    )
    plan = _dry(bare, text)
    assert (
        plan.returncode == 0
        and "this study cannot run yet (a dry run is fine)" in plan.stderr
        and message in plan.stderr
    )
    run = snakemake(bare, *TINY, "case.yaml", "--cores", "1", check=False)
    assert run.returncode != 0 and "tokenwatt cannot start this study" in run.stderr and message in run.stderr
    assert not (bare / "results").exists()  # refused before any job


def test_a_key_given_twice_in_a_config_file_stops_before_any_job_naming_file_key_and_line(bare):
    proc = _dry(
        bare, "design:\n  model:\n    big: {preset: llama-tiny}\n    big: {preset: llama-small}\n", "twice.yaml"
    )
    assert proc.returncode != 0
    assert "twice.yaml line 4: design.model.big is given twice (first on line 3)" in proc.stdout + proc.stderr


def test_command_line_config_overrides_still_plan_beside_the_duplicate_check(bare):
    assert snakemake(bare, *TINY, "--config", "results=elsewhere", "-n", check=False).returncode == 0


class CorpusCase(NamedTuple):
    """A corpus the corpus job cannot read: its config, the sentence the job ends in (… stands for words the case
    does not fix), the files the config names with their permissions, and what else the run is given."""

    config: str
    sentence: str
    files: dict[str, bytes] = {}
    mode: int = 0o644
    args: tuple[str, ...] = ()
    env: dict[str, str] = {}


CORPUS_CASES = [
    pytest.param(
        CorpusCase(
            "corpus: {source: local, local: {files: [bad.txt]}}",
            "corpus file bad.txt is not valid UTF-8 (byte 12: invalid start byte); re-encode it as UTF-8, or set "
            "corpus.local.encoding_errors: replace to substitute U+FFFD",
            {"bad.txt": b"a good line\n\xff\xfe a bad one\n"},
        ),
        id="not-utf8",
    ),
    pytest.param(
        CorpusCase(
            "corpus: {source: local, local: {files: [stories.jsonl]}}",
            "corpus.local.text_column is 'text' but stories.jsonl has columns ['body']; set "
            "corpus.local.text_column to the column that holds the text",
            {"stories.jsonl": b'{"body": "Once upon a time."}\n'},
        ),
        id="no-text-column",
    ),
    # The pre-flight check refuses an unreadable file before any job, as it does a missing one (below); a job that
    # meets one all the same (the check skipped with --no-hooks) says so in the same words.
    pytest.param(
        CorpusCase(
            "corpus: {source: local, local: {files: [locked.txt]}}",
            "corpus.local.files: locked.txt cannot be read by this user (check its permissions)",
            {"locked.txt": b"Once upon a time.\n"},
            mode=0,
            args=("--no-hooks",),
        ),
        id="unreadable",
        marks=pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file whatever its permissions"),
    ),
    # No network, as Hugging Face's offline mode has it (an address that refuses connections says the same after some
    # 30 s of retries).
    pytest.param(
        CorpusCase(
            "corpus: {source: hf, hf: {name: tokenwatt/no-such-corpus}}",
            "corpus.hf: could not load 'tokenwatt/no-such-corpus' (split 'train') from the Hugging Face Hub: … If "
            "this machine is offline, download the data set elsewhere, copy its files here and use corpus.source: "
            "local with corpus.local.files pointing at them.",
            env={"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"},
        ),
        id="hub-unreachable",
    ),
]


@pytest.mark.parametrize("case", CORPUS_CASES)
def test_a_tokenwatt_error_in_a_job_reads_as_its_sentence_once_with_the_traceback_in_a_file_it_names(tmp_path, case):
    work = clone(tmp_path / "work")
    for name, data in case.files.items():
        (work / name).write_bytes(data)
        (work / name).chmod(case.mode)
    (work / "case.yaml").write_text(case.config + "\n")
    proc = snakemake(
        work, "results/data/corpus.parquet", *TINY, "case.yaml", "--cores", "1", *case.args, check=False, env=case.env
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "Failed corpus" in out  # the job is failed, as before
    line = f"tokenwatt: {case.sentence} (the traceback is in results/logs/corpus.traceback.log)"
    # once, as the rich logger prints the failed job's log (wrapped at the terminal's width), and no traceback
    assert len(re.findall(re.escape(line).replace("…", ".*?"), " ".join(out.split()))) == 1
    assert "Traceback" not in out
    assert "Traceback (most recent call last)" in (work / "results/logs/corpus.traceback.log").read_text()
    assert not (work / "results/data/corpus.parquet").exists()


# What this machine cannot do for a study (no file nowhere.txt, no RAPL counters, no CUDA device), and what is said.
MACHINE = (
    "corpus: {source: local, local: {files: [nowhere.txt]}}\n"
    "meter: {kind: rapl, rapl_root: /nonexistent}\ntrain: {device: cuda}\n"
)
MACHINE_SENTENCES = [
    "corpus.local.files: nowhere.txt does not exist",
    "meter.kind is rapl but there are no RAPL counters under /nonexistent (meter.rapl_root)",
    "train.device (or a design.hardware level's device) is cuda but no CUDA device is visible here",
]


def _planned_saying_what_this_machine_cannot_do(plan):
    assert plan.returncode == 0 and "Job stats" in plan.stdout + plan.stderr  # planned all the same
    assert all(f"cannot run the study as configured (a dry run is fine): {s}" in plan.stderr for s in MACHINE_SENTENCES)


def _refused_before_any_job(run, work):
    out = run.stdout + run.stderr
    assert run.returncode != 0 and "tokenwatt cannot start this study here" in out
    assert all(out.count(s) == 1 for s in MACHINE_SENTENCES) and "Traceback" not in out
    assert not (work / "results").exists()  # no job ran


def test_what_this_machine_cannot_do_is_said_by_a_dry_run_and_refused_by_a_run_before_any_job(bare):
    _planned_saying_what_this_machine_cannot_do(_dry(bare, MACHINE, "machine.yaml"))
    _refused_before_any_job(snakemake(bare, *TINY, "machine.yaml", "--cores", "1", check=False), bare)


# A project of its own that uses tokenwatt as a module, as snakedeploy writes it (the rules renamed, no hook).
MODULE = 'module tokenwatt:\n    snakefile:\n        "{snakefile}"\n    config:\n        config\n\n\n'
SNAKEDEPLOY = "use rule * from tokenwatt as tw_*\n"


def _module_project(bare, folder, use=SNAKEDEPLOY):
    folder.mkdir()
    (folder / "Snakefile").write_text(MODULE.format(snakefile=bare / "workflow" / "Snakefile") + use)
    (folder / "config.yaml").write_text((bare / TINY[1]).read_text())
    (folder / "machine.yaml").write_text(MACHINE)
    return folder


def test_a_module_projects_dry_run_says_what_this_machine_cannot_do_and_plans(bare, tmp_path):
    project = _module_project(bare, tmp_path / "project")
    plan = snakemake(project, "--configfile", "config.yaml", "machine.yaml", "-n", check=False)
    _planned_saying_what_this_machine_cannot_do(plan)


def test_a_module_project_refuses_what_this_machine_cannot_do_before_any_job(bare, tmp_path):
    project = _module_project(bare, tmp_path / "project")
    run = snakemake(project, "--configfile", "config.yaml", "machine.yaml", "--cores", "1", check=False)
    _refused_before_any_job(run, project)


def test_a_module_projects_own_onstart_still_runs_after_tokenwatts_checks(bare, tmp_path):
    # The project's onstart calls tokenwatt's too, as docs/use-as-a-module.md once asked.
    use = 'use rule * from tokenwatt\n\n\nonstart:\n    print("the project starts")\n    tokenwatt.onstart()\n'
    project = _module_project(bare, tmp_path / "project", use)
    run = snakemake(project, "--configfile", "config.yaml", "--cores", "1", "results/data/corpus.parquet")
    assert (run.stdout + run.stderr).count("the project starts") == 1
    assert (project / "results/data/corpus.parquet").exists()


def test_whole_numbers_written_as_floats_plan_exactly_the_same_jobs(study):
    (study / "floats.yaml").write_text(
        "study: {name: tiny test study, seed: 11, budgets: [1000.0, 2000.0], trials: 3.0}"
    )
    assert planned_jobs(study, *TINY, "floats.yaml") == {}


def test_reordered_keys_and_written_out_defaults_rerun_nothing(study):
    (study / "same.yaml").write_text(
        "train: {log_every: 20, epochs: 1, lr: 0.003, weight_decay: 0, precision: fp32}\n"
        "quality: {exclude_flagged: false}\n"
    )
    assert planned_jobs(study, *TINY, "same.yaml") == {}


def test_a_deleted_trace_is_rebuilt_by_the_default_target_and_only_its_trial_reruns(study):
    path = study / "results/trials/b2000/t2/power.parquet"
    original, stat = path.read_bytes(), path.stat()
    path.unlink()
    try:
        assert _reruns(planned_jobs(study, *TINY), {"train_trial": 1})
    finally:
        path.write_bytes(original)
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert planned_jobs(study, *TINY) == {}


def test_a_hand_edited_trial_record_is_named_in_the_report_with_the_fix(study, tmp_path):
    work = copy_of_study(study, tmp_path / "copy")
    path = work / "results/trials/b1000/t3/metrics.json"
    stat = path.stat()
    path.write_text("{}")
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # an edit Snakemake does not notice by time
    snakemake(work, *TINY, "--cores", "1", "--forcerun", "aggregate")
    page = (work / "results/report.html").read_text()
    assert "results/trials/b1000/t3/metrics.json is not a valid trial record" in page
    assert "delete it and rerun snakemake" in page and "its trial is restored from the store" in page
    path.unlink()
    assert _reruns(planned_jobs(work, *TINY), {"train_trial": 1})


def test_an_interim_report_reads_the_finished_trials_and_lists_the_rest_without_training(study, tmp_path):
    work = copy_of_study(study, tmp_path / "copy")
    for name in ("metrics.json", "power.parquet", "steps.parquet"):  # trial 3 of budget 2000 "still running"
        (work / "results/trials/b2000/t3" / name).unlink()
    before = {p: p.stat().st_mtime_ns for p in (work / "results/trials").rglob("*.*")}
    # a data file the running study is still writing (Snakemake's mark of an output whose job has not ended)
    marks = work / ".snakemake/incomplete"
    marks.mkdir(parents=True, exist_ok=True)
    (marks / base64.urlsafe_b64encode(b"results/data/normalize_summary.json").decode()).write_text("{}")
    interim = ("interim", *TINY, "--cores", "1", "--nolock", "--rerun-triggers", "mtime")
    assert "IncompleteFilesException" in snakemake(work, *interim, check=False).stderr  # why the command has --ii
    snakemake(work, *interim, "--ignore-incomplete")
    page = (work / "results/interim/report.html").read_text()
    assert "INTERIM report" in page and "budget 2000 trial 3: not finished yet" in page
    assert "5 trial(s) finished so far" in page
    assert {p: p.stat().st_mtime_ns for p in (work / "results/trials").rglob("*.*")} == before  # nothing trained


def test_after_a_failed_run_an_old_report_of_another_config_is_called_out(study, tmp_path):
    work = copy_of_study(study, tmp_path / "copy")
    (work / "fail.yaml").write_text("train: {lr: 1.0e+30, epochs: 1, log_every: 5, on_divergence: fail}\n")
    proc = snakemake(work, *TINY, "fail.yaml", "--cores", "1", check=False)
    assert proc.returncode != 0
    assert "results/report.html was made from another config than this run's" in proc.stdout + proc.stderr
    assert (work / "results/report.html").exists()  # kept: nothing computed is deleted


# --- nothing finished is lost to a failed rerun; a reverted config trains nothing (the result store)
KEPT = (
    "results/trials",
    "results/device",
    "results/subsets",
    "results/data/tokenizer",
    "results/data/chunks_train.parquet",
)
# A value the config check cannot refuse (it is well-formed) that fails inside a job, and what that job says.
BROKEN = {
    "pretrained": (
        "model: {source: pretrained, name: ./empty-model}\n",
        "model.name './empty-model' could not be loaded",
    ),
    "lr": ("train: {lr: 1.0e+30, on_divergence: fail}\n", "training diverged at train.lr 1e+30. Lower train.lr"),
    "corpus": ("corpus: {source: local, local: {files: [empty.txt]}}\n", "corpus.local.files: empty.txt is empty"),
}


def _bytes(work):
    files = []
    for kept in KEPT:
        path = work / kept
        files += (
            sorted(p for p in path.rglob("*") if p.is_file() and p.name != ".snakemake_timestamp")
            if path.is_dir()
            else [path]
        )
    return {str(p.relative_to(work)): p.read_bytes() for p in files}


@pytest.mark.parametrize("case", BROKEN)
def test_a_failed_rerun_loses_nothing_finished_and_reverting_the_config_trains_nothing(study, tmp_path, case):
    work = copy_of_study(study, tmp_path / "copy")
    (work / "empty-model").mkdir()
    (work / "empty.txt").write_text("")
    text, message = BROKEN[case]
    (work / "broken.yaml").write_text(text)
    before = _bytes(work)
    failed = snakemake(work, *TINY, "broken.yaml", "--cores", "2", "--resources", "gpu=1", check=False)
    assert failed.returncode != 0 and message in failed.stdout + failed.stderr
    gone = sorted(set(before) - set(_bytes(work)))  # Snakemake deleted the failed job's outputs when it started
    plan = _study_jobs(planned_jobs(work, *TINY))  # the config put back
    if case == "corpus":  # a corpus job that ran replans everything below it
        assert plan == {
            "corpus": 1,
            "normalize": 1,
            "split": 1,
            "decontaminate": 1,
            "tokenizer": 1,
            "chunk": 2,
            "subset": 6,
            "train_trial": 6,
        }
    else:
        assert len(gone) == 4 and plan == {"train_trial": 1}
    back = snakemake(work, *TINY, "--cores", "2", "--resources", "gpu=1")
    restored = [line for line in (back.stdout + back.stderr).splitlines() if line.startswith("↺ results/trials/")]
    assert len(restored) == plan["train_trial"] and "nothing trained" in restored[0]
    assert _bytes(work) == before  # every trial, subset, chunk table, tokenizer and the device profile, byte for byte
    assert planned_jobs(work, *TINY) == {}


def test_a_trial_forced_to_be_measured_again_is_measured_and_then_kept(study, tmp_path):
    work = copy_of_study(study, tmp_path / "copy")
    metrics = work / "results/trials/b1000/t2/metrics.json"
    before = metrics.read_bytes()
    # the trial alone as the target: what is asked is how it is measured, not the analysis after it
    trial = "results/trials/b1000/t2/metrics.json"
    forced = snakemake(work, *TINY, "--cores", "1", "--forcerun", trial, "--", trial)
    assert "↺" not in forced.stdout + forced.stderr and metrics.read_bytes() != before  # measured, not restored
    measured = metrics.read_bytes()
    for path in metrics.parent.iterdir():  # the trial's files deleted: the default target restores the new measurement
        path.unlink()
    # the default target, stopping before the analysis (which asks nothing of how a trial is restored)
    again = snakemake(work, *TINY, "--cores", "1", "--omit-from", "aggregate")
    assert "↺ results/trials/b1000/t2/metrics.json: restored" in again.stdout + again.stderr
    assert metrics.read_bytes() == measured


# --- every file between rules is checked when read; the default target rebuilds what is missing
def test_a_damaged_trace_is_named_and_a_deleted_one_or_device_profile_is_restored(study, tmp_path):
    work = copy_of_study(study, tmp_path / "copy")
    trace, profile = work / "results/trials/b2000/t2/power.parquet", work / "results/device/profile.json"
    trace_bytes, profile_bytes = trace.read_bytes(), profile.read_bytes()
    trace.write_bytes(trace_bytes[: len(trace_bytes) // 2])
    profile.unlink()
    for args in (["-n"], ["--summary"], ["--unlock"]):
        assert snakemake(work, *TINY, *args, check=False).returncode == 0, args
    assert _study_jobs(planned_jobs(work, *TINY)) == {"device_profile": 1}  # the default target rebuilds the profile
    snakemake(work, *TINY, "--cores", "1")
    assert profile.read_bytes() == profile_bytes  # restored from the store, not measured again
    page = (work / "results/report.html").read_text()
    assert "results/trials/b2000/t2/power.parquet is not a readable power trace (Parquet: " in page
    assert "delete it and rerun snakemake" in page and "its trial is restored from the store" in page
    trace.unlink()  # the fix the report gives
    assert _study_jobs(planned_jobs(work, *TINY)) == {"train_trial": 1}
    snakemake(work, *TINY, "--cores", "1")
    assert (
        trace.read_bytes() == trace_bytes and "power.parquet is not" not in (work / "results/report.html").read_text()
    )


def test_the_interim_report_of_a_study_in_its_data_stage_plans_no_job_of_the_study(bare):
    plan = planned_jobs(bare, "interim", *TINY, "--nolock", "--rerun-triggers", "mtime", "--ignore-incomplete")
    assert plan and all(rule == "interim" or rule.startswith("interim_") for rule in plan), plan


# --- a crash: Snakemake killed mid-trial
def test_after_snakemake_is_killed_unlock_and_rerun_incomplete_restore_its_trial_without_training(study, tmp_path):
    import signal
    import subprocess
    import time

    from workflow_helpers import SNAKEMAKE

    work = copy_of_study(study, tmp_path / "copy")
    trial, log = "results/trials/b1000/t2/metrics.json", work / "results/logs/train_trial/b1000/t2.log"
    log.unlink()
    with open(work / "killed.txt", "w") as out:
        run = subprocess.Popen(
            [SNAKEMAKE, *TINY, "--cores", "1", "--forcerun", trial], cwd=work, stdout=out, stderr=out
        )
        deadline = time.time() + 120
        while not (log.exists() and "store: this job was forced" in log.read_text()) and time.time() < deadline:
            time.sleep(0.02)
        run.send_signal(signal.SIGKILL)  # Snakemake only: its trial runs on, and finishes, as after a kill -9
        run.wait()
    while "store: kept in" not in log.read_text() and time.time() < deadline:
        time.sleep(0.1)
    time.sleep(1)  # the orphaned trial process exits
    again = snakemake(work, *TINY, "--cores", "1", check=False)  # the same command: refused, twice over
    assert again.returncode != 0 and "IncompleteFilesException" in again.stderr and "--rerun-incomplete" in again.stderr
    again = snakemake(work, *TINY, "--cores", "1", "--rerun-incomplete", check=False)
    assert again.returncode != 0 and "Directory cannot be locked" in again.stderr and "--unlock" in again.stderr
    snakemake(work, *TINY, "--unlock")  # what the README says: unlock, then rerun with --rerun-incomplete
    # up to the analysis, which the kill did not reach: what is left after is the analysis alone, no trial
    done = snakemake(work, *TINY, "--cores", "1", "--rerun-incomplete", "--omit-from", "aggregate")
    assert (
        "↺ results/trials/b1000/t2/metrics.json: restored" in done.stdout + done.stderr
    )  # what the killed run measured
    assert _reruns(planned_jobs(work, *TINY), {})


# --- a node lost mid-trial: the trial resumes from its checkpoint
LONG_TRIAL = "train: {epochs: 30, checkpoint_every: 2000, log_every: 10}\n"
TRIAL = "results/trials/b1000/t1/metrics.json"


def _trained(work):
    import polars as pl

    metrics = json.loads((work / TRIAL).read_text())
    steps = pl.read_parquet(work / TRIAL.replace("metrics.json", "steps.parquet"))
    curve = pl.read_parquet(work / TRIAL.replace("metrics.json", "curve.parquet"))
    return metrics, steps["loss"].to_list(), curve["eval_loss"].to_list()


def test_a_killed_trial_is_named_and_the_rerun_resumes_it_from_its_checkpoint_to_the_same_training(study, tmp_path):
    import signal
    import subprocess
    import time

    from workflow_helpers import SNAKEMAKE

    whole = copy_of_study(study, tmp_path / "whole")
    (whole / "long.yaml").write_text(LONG_TRIAL)
    snakemake(whole, *TINY, "long.yaml", "--cores", "1", TRIAL)
    work = copy_of_study(study, tmp_path / "killed")
    (work / "long.yaml").write_text(LONG_TRIAL)
    beat = work / "results/checkpoints/b1000/t1/heartbeat.json"
    run = subprocess.Popen(
        [SNAKEMAKE, *TINY, "long.yaml", "--cores", "1", TRIAL],
        cwd=work,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "NO_COLOR": "1", "COLUMNS": "200"},
    )
    deadline, seen = time.time() + 180, {}
    while time.time() < deadline and run.poll() is None:
        try:
            seen = json.loads(beat.read_text())
        except (OSError, ValueError):
            pass
        if seen.get("checkpoint", 0) >= 2 and seen["step"] > seen["written"]["step"]:
            os.kill(seen["pid"], signal.SIGKILL)  # the trial only, as the out-of-memory killer does
            break
        time.sleep(0.01)
    said = run.communicate()[0]
    assert seen.get("checkpoint", 0) >= 2, "the trial ended before it could be killed after a checkpoint"
    assert run.returncode != 0 and "1K trial 1 was stopped from outside before it finished" in said
    assert f"it resumes from its checkpoint at step {seen['written']['step']}" in said
    assert planned_jobs(work, TRIAL, *TINY, "long.yaml")["train_trial"] == 1  # -n plans the trial it will resume
    snakemake(work, *TINY, "long.yaml", "--cores", "1", TRIAL)
    (resumed, losses, evals), (uninterrupted, whole_losses, whole_evals) = _trained(work), _trained(whole)
    assert losses == whole_losses and evals == whole_evals and resumed["eval_loss"] == uninterrupted["eval_loss"]
    assert resumed["resumed"] == 1 and resumed["resumes"][0]["from_checkpoint"] == seen["checkpoint"]
    assert resumed["lost_steps"] > 0 and resumed["lost_energy_j"] > 0
    assert not (work / "results/checkpoints/b1000/t1").exists()  # removed once the trial's outputs were written
    log = (work / "results/logs/train_trial/b1000/t1.log").read_text()
    assert f"RESUMED from checkpoint {seen['checkpoint']}" in log


@pytest.fixture(scope="module")
def diverging(study, built):
    """The tiny study's data with one trial per cell (the fewest that names a trial in each budget), run to its report
    where half the trials diverge (design.lr: [0.003, 50]), then where all of them do (train.lr: 50); each report
    kept."""
    cases = (("half", "design: {lr: [0.003, 50]}"), ("all", "train: {lr: 50}"))

    def run(folder):
        work = copy_of_study(study, folder)
        for case, text in cases:
            (work / f"{case}.yaml").write_text(f"study: {{trials: 1}}\n{text}\n")
            snakemake(work, *TINY, f"{case}.yaml", "--cores", "2", "--resources", "gpu=1")
            shutil.copy2(work / "results" / "report.html", work / f"report-{case}.html")

    return built("diverging", run)


def _report(diverging, case):
    return (diverging / f"report-{case}.html").read_text(encoding="utf-8")


@pytest.mark.xdist_group("diverging")  # one worker runs the tests that read the diverging studies (conftest.py)
@pytest.mark.parametrize(
    "case,named",
    [
        ("half", [f"lr 50, budget {b} trial 1: diverged at step" for b in (1000, 2000)]),
        ("all", [f"budget {b} trial 1: diverged at step" for b in (1000, 2000)]),
    ],
)
def test_a_study_whose_trials_diverge_ends_in_a_report_naming_each_diverged_trial(diverging, case, named):
    assert all(name in _report(diverging, case) for name in named)


@pytest.mark.xdist_group("diverging")
def test_a_diverged_trial_is_a_result_whose_record_and_report_name_the_step(diverging):
    # the last case run ("all") left its trials in the folder
    record = json.loads((diverging / "results/trials/b1000/t1/metrics.json").read_text())
    assert record["status"] == "diverged" and record["eval_loss"] is None
    assert f"budget 1000 trial 1: diverged at step {record['diverged_at_step']}" in _report(diverging, "all")


@pytest.mark.xdist_group("diverging")
def test_the_statistics_of_a_study_whose_every_trial_diverged_say_once_that_none_finished(diverging):
    statistics = _report(diverging, "all").split("<h2>Statistics</h2>")[1].split("<h2>")[0]
    assert statistics.count("No trial finished, so there is nothing to test") == 1
    assert "no values (e.g. meter none" not in statistics
