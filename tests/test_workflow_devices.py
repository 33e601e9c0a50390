"""A study with a devices factor end to end through Snakemake: config/devices.yaml on the tiny study, its two-device
trials as two gloo ranks on this CPU, each rank metered on its own, and the report answering the reference study's
question (does a second device buy quality per joule, or only time?)."""

import json

import polars as pl
import pytest
import torch
from workflow_helpers import ANALYSIS, TINY, clone, planned_jobs, snakemake

# one worker runs the module's tests, which read the study it builds once (conftest.py)
pytestmark = [pytest.mark.workflow, pytest.mark.xdist_group("devices")]
# Batches of two chunks (a device's share is one); the tiny study's three trial ids, the fewest its RM-ANOVA takes, at
# its smaller budget alone (how a factor crosses the budget: test_workflow_design.py's two-way study).
SMALL = "train: {batch_size: 2}\nstudy: {name: devices, seed: 11, budgets: [1000], trials: 3}\n"
DEVICES = [*TINY, "config/devices.yaml", "small.yaml"]


@pytest.fixture(scope="module")
def devices_study(built):
    def run(folder):
        work = clone(folder)
        (work / "small.yaml").write_text(SMALL)
        snakemake(work, *DEVICES, "--cores", "2", "--resources", "gpu=2")

    return built("devices", run)


def _records(work):
    return {
        path.parent.relative_to(work / "results-devices/trials").as_posix(): json.loads(path.read_text())
        for path in (work / "results-devices/trials").rglob("metrics.json")
    }


def test_every_cell_trains_its_trials_on_its_device_count(devices_study):
    records = _records(devices_study)
    assert len(records) == 2 * 3
    assert {(r["levels"]["devices"], r["devices"]) for r in records.values()} == {("1", 1), ("2", 2)}


def test_a_two_device_trial_records_each_device_and_their_sum(devices_study):
    for cell, r in _records(devices_study).items():
        if r["devices"] == 2:
            assert [d["rank"] for d in r["ranks"]] == [0, 1], cell
            assert r["energy_j"] == pytest.approx(sum(d["energy_j"] for d in r["ranks"]), rel=1e-12), cell
            assert r["train_s"] == max(d["train_s"] for d in r["ranks"]), cell
            assert r["job"]["node"] and r["job"]["slurm_job_id"] is None
            trace = pl.read_parquet(devices_study / "results-devices/trials" / cell / "power.parquet")
            assert sorted(trace["rank"].unique().to_list()) == [0, 1], cell


def test_both_device_counts_train_the_same_tokens_in_the_same_steps(devices_study):
    by_pair = {}
    for r in _records(devices_study).values():
        by_pair.setdefault((r["budget"], r["trial"]), {})[r["devices"]] = (r["steps"], r["real_tokens"])
    assert all(pair[1] == pair[2] for pair in by_pair.values())


def test_the_report_answers_whether_a_second_device_buys_quality_per_joule_or_only_time(devices_study):
    devices = json.loads((devices_study / "results-devices/analysis/devices.json").read_text())
    comparison = devices["comparisons"][0]
    assert (comparison["devices"], comparison["reference"], comparison["trial_ids"]) == (2, 1, 3)
    report = (devices_study / "results-devices/report.html").read_text()
    assert "Devices: quality per joule, or only time?" in report and comparison["answer"] in report
    # the factor like any other: in the RM-ANOVA
    anova = json.loads((devices_study / "results-devices/analysis/stats.json").read_text())["anova"]["energy_j"]
    assert [e["effect"] for e in anova["effects"]] == ["devices"]


def test_a_local_run_that_allows_fewer_gpus_than_a_level_asks_for_is_refused_before_any_job(tmp_path):
    work = clone(tmp_path)
    (work / "small.yaml").write_text(SMALL)
    proc = snakemake(work, *DEVICES, "--cores", "2", "--resources", "gpu=1", check=False)
    assert proc.returncode != 0
    assert "asks for 2 devices, each trial's job gpu=2, but this run allows gpu=1" in proc.stdout + proc.stderr
    assert not (work / "results-devices").exists()


# A branched study (train.schedule.branch_every) on two devices, one trial id: every stretch of the stable run and every cooldown
# trains on two gloo ranks, each saving its part of the one point; then what a new budget trains.
BRANCHED = (
    "results: results-devices\nstudy: {trials: 1}\n"
    "train: {devices: 2, batch_size: 2, schedule: {kind: wsd, branch_every: 500}}\n"
)


@pytest.fixture(scope="module")
def branched_on_two(built):
    def run(folder):
        work = clone(folder)
        (work / "branched.yaml").write_text(BRANCHED)
        # the trials and the profile only: what the test reads (a devices study's analysis is the module fixture's)
        snakemake(
            work,
            *TINY,
            "branched.yaml",
            "--cores",
            "2",
            "--resources",
            "gpu=2",
            "--until",
            "train_trial",
            "device_profile",
        )

    return built("devices-branched", run)


def test_a_two_device_wsd_study_branches_each_budget_from_its_stable_run_and_a_new_budget_trains_only_its_cooldowns(
    branched_on_two,
):
    records = _records(branched_on_two)
    assert {(r["devices"], r["branch"]["from_point"]) for r in records.values()} == {(2, 1), (2, 3)}
    point = torch.load(branched_on_two / "results-devices/stable/t1/p1.pt", weights_only=True)
    assert len(point["peers"]) == 1  # rank 1's state, saved with rank 0's in the one point
    # a branch holds its stable run's energy as the stretch record counts it: both devices'
    stretch = json.loads((branched_on_two / "results-devices/stable/t1/p3.json").read_text())
    (longest,) = [r for r in records.values() if r["budget"] == 2000 and r["trial"] == 1]
    assert longest["branch"]["stable_energy_j"] == pytest.approx(stretch["energy_j"], rel=1e-9)
    (branched_on_two / "more.yaml").write_text("study: {budgets: [1000, 1500, 2000]}\n")
    jobs = planned_jobs(branched_on_two, *TINY, "branched.yaml", "more.yaml")
    assert jobs == {"subset": 1, "train_trial": 2, **ANALYSIS}
