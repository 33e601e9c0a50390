"""The pre-flight check: what this machine cannot do for a study, each a sentence naming the key and the fix."""

from __future__ import annotations

import os

import pytest
from tokenwatt.plan import preflight
from tokenwatt.plan.disk import DiskPlan


class FakeNvml:
    def __init__(self, count: int) -> None:
        self.count = count

    def nvmlInit(self) -> None:
        if self.count < 0:
            raise RuntimeError("NVML Shared Library Not Found")

    def nvmlDeviceGetCount(self) -> int:
        return self.count

    def nvmlShutdown(self) -> None:
        pass


def test_a_missing_local_corpus_file_is_named_with_its_key(tmp_path):
    (tmp_path / "a.txt").write_text("a story\n")
    found = preflight.local_corpus_files([str(tmp_path / "a.txt"), str(tmp_path / "gone.txt")])
    assert [f.key for f in found] == ["corpus.local.files"]
    assert found[0].sentence.startswith(f"corpus.local.files: {tmp_path / 'gone.txt'} does not exist")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads and writes everything")
def test_an_unreadable_corpus_file_and_an_unwritable_results_folder_are_named(tmp_path):
    (tmp_path / "locked.txt").write_text("a story\n")
    (tmp_path / "locked.txt").chmod(0)
    (tmp_path / "ro").mkdir(mode=0o500)
    assert "cannot be read" in preflight.local_corpus_files([str(tmp_path / "locked.txt")])[0].sentence
    assert "cannot be written" in preflight.results_folder(str(tmp_path / "ro" / "results"))[0].sentence


def test_a_results_folder_that_does_not_exist_yet_is_judged_by_the_folder_it_will_be_made_in(tmp_path):
    assert preflight.results_folder(str(tmp_path / "new" / "results")) == []
    (tmp_path / "file").write_text("")
    assert "is not a folder" in preflight.results_folder(str(tmp_path / "file" / "results"))[0].sentence


def test_a_disk_without_room_for_the_plans_outputs_says_how_much_is_needed_and_for_what(tmp_path):
    plan = DiskPlan(data=30_000_000, trials=600_000_000, other=40_000_000, margin=10_000_000)
    found = preflight.free_disk(str(tmp_path), plan, free=lambda path: 1_000_000)
    assert "has 1 MB free and this plan's outputs need about 680 MB (data 30 MB, trials 600 MB" in found[0].sentence
    assert preflight.free_disk(str(tmp_path), plan, free=lambda path: plan.total) == []


@pytest.mark.parametrize(
    "count,visible,seen", [(-1, None, 0), (2, None, 2), (2, "", 0), (2, "1", 1), (4, "0,2,-1,3", 2), (1, "0,1,2", 1)]
)
def test_cuda_devices_are_counted_as_a_job_here_would_see_them(monkeypatch, count, visible, seen):
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    assert preflight.visible_cuda_devices(FakeNvml(count)) == seen


def test_a_cuda_device_that_is_not_here_is_refused_and_cpu_or_auto_never_are():
    found = preflight.training_devices(["cuda", "cpu", "auto", "cuda:1"], cuda_count=1)
    assert [f.sentence.split(" but ")[1].split(";")[0] for f in found] == ["only 1 CUDA device(s) are visible"]
    assert "is cuda but no CUDA device is visible here" in preflight.training_devices(["cuda"], 0)[0].sentence
    assert all(f.on_node for f in found)


def test_rapl_without_readable_counters_is_refused_naming_meter_kind(tmp_path):
    meter = {"kind": "rapl", "rapl_root": str(tmp_path)}
    assert (
        "meter.kind is rapl but there are no RAPL counters under" in preflight.meter_kind(meter, ["cpu"], 0)[0].sentence
    )
    (tmp_path / "intel-rapl:0").mkdir()
    (tmp_path / "intel-rapl:0" / "energy_uj").write_text("123\n")
    assert preflight.meter_kind(meter, ["cpu"], 0) == []


@pytest.mark.parametrize("kind", ["auto", "estimate", "none"])
def test_meters_that_need_no_hardware_are_never_refused(kind):
    assert preflight.meter_kind({"kind": kind, "rapl_root": "/nowhere"}, ["cpu"], 0) == []


def test_nvml_is_refused_without_a_gpu_or_when_a_trial_trains_on_the_cpu():
    meter = {"kind": "nvml", "rapl_root": "/nowhere"}
    assert "no NVIDIA GPU is visible here" in preflight.meter_kind(meter, ["cuda"], 0)[0].sentence
    assert "some trials train on the CPU" in preflight.meter_kind(meter, ["cuda", "cpu"], 1)[0].sentence
    assert preflight.meter_kind(meter, ["cuda"], 1) == []


def test_nvml_is_not_asked_when_nothing_needs_a_gpu():
    class Untouchable:
        def __getattr__(self, name):
            raise AssertionError("NVML was asked")

    assert (
        preflight.machine_findings({"kind": "estimate", "rapl_root": "/x"}, {"cpu": 1, "auto": 1}, Untouchable()) == []
    )


def test_nvml_with_train_device_auto_is_accepted_where_a_gpu_is_visible():
    """auto trains on CUDA wherever a GPU is visible, so it is no reason to refuse the NVML meter."""
    assert preflight.meter_kind({"kind": "nvml"}, ["auto"], 1) == []
    assert preflight.meter_kind({"kind": "nvml"}, ["cpu"], 1)[0].key == "meter.kind"
