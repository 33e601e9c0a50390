"""A study with a devices factor end to end through Snakemake: config/devices.yaml on the tiny study, its two-device
trials as two gloo ranks on this CPU, each rank metered on its own, and the report answering the reference study's
question (does a second device buy quality per joule, or only time?)."""

import json

import polars as pl
import pytest
from workflow_helpers import TINY, clone, snakemake

pytestmark = pytest.mark.workflow
# Batches of two chunks (a device's share is one); the tiny study's three trial ids, the fewest its RM-ANOVA takes.
SMALL = "train: {batch_size: 2}\n"
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
    assert len(records) == 2 * 2 * 3
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
    # the factor like any other: in the RM-ANOVA beside the budget
    anova = json.loads((devices_study / "results-devices/analysis/stats.json").read_text())["anova"]["energy_j"]
    assert {"devices", "budget × devices"} <= {e["effect"] for e in anova["effects"]}


def test_a_local_run_that_allows_fewer_gpus_than_a_level_asks_for_is_refused_before_any_job(tmp_path):
    work = clone(tmp_path)
    (work / "small.yaml").write_text(SMALL)
    proc = snakemake(work, *DEVICES, "--cores", "2", "--resources", "gpu=1", check=False)
    assert proc.returncode != 0
    assert "asks for 2 devices, each trial's job gpu=2, but this run allows gpu=1" in proc.stdout + proc.stderr
    assert not (work / "results-devices").exists()
