"""The interim report beside a study that remakes its data stage (a changed config or corpus): it reads only what is
finished under the config and never runs a job of the study; where Snakemake would run one for it, it says so in one
sentence before any job."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from tokenwatt.plan import startup
from workflow_helpers import TINY, copy_of_study, planned_jobs, snakemake

INTERIM = ("interim", *TINY, "--cores", "1", "--nolock", "--rerun-triggers", "mtime", "--ignore-incomplete")


def _times(folder: Path) -> dict[Path, int]:
    return {p: p.stat().st_mtime_ns for p in folder.rglob("*") if p.is_file()}


@pytest.mark.workflow
def test_while_the_study_remakes_its_subsets_the_interim_report_reads_no_trial_and_runs_no_study_job(study, tmp_path):
    work = copy_of_study(study, tmp_path / "copy")
    for subset in (work / "results/subsets").rglob("*.json"):  # as the study's subset jobs delete them when they start
        subset.unlink()
    trials = _times(work / "results/trials")
    plan = planned_jobs(work, *INTERIM[:-4], "--nolock", "--rerun-triggers", "mtime", "--ignore-incomplete")
    assert plan and all(rule.startswith("interim_") for rule in plan), plan
    out = snakemake(work, *INTERIM)
    assert "No trial has finished" in out.stdout + out.stderr
    assert _times(work / "results/trials") == trials and not list((work / "results/subsets").rglob("*.json"))


@pytest.mark.workflow
def test_an_interim_report_that_would_run_a_study_job_stops_in_one_sentence_before_any_job(study, tmp_path):
    work = copy_of_study(study, tmp_path / "copy")
    corpus = work / "results/data/corpus.parquet"  # the study's corpus job rewrote it: every job below reruns
    pl.read_parquet(corpus).head(50).write_parquet(corpus)
    data, trials = _times(work / "results/data"), _times(work / "results/trials")
    proc = snakemake(work, *INTERIM, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "tokenwatt: the interim report runs no job of the study, and now it would run" in out
    assert "run the interim report again once the study's data stage is done and a trial has finished" in out
    assert _times(work / "results/data") == data and _times(work / "results/trials") == trials
    assert not (work / "results/interim/report.html").exists()


def test_only_a_run_that_asked_for_the_interim_report_alone_is_refused_a_study_job():
    interim = {"interim", "interim_aggregate"}
    assert startup.interim_refusal({"interim_aggregate": 1, "train_trial": 2}, interim, True)
    assert startup.interim_refusal({"train_trial": 2}, interim, True)  # Snakemake may plan the study's jobs alone
    assert startup.interim_refusal({"interim_aggregate": 1, "train_trial": 2}, interim, False) is None
    assert startup.interim_refusal({"interim_aggregate": 1}, interim, True) is None
