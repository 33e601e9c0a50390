"""A disk that fills while a job writes: one sentence naming the file or folder, the free space left and what to do,
never a traceback on the terminal, and nothing finished lost. The full disk is a fake (an ENOSPC raised by the
writer), never a real one filled."""

from __future__ import annotations

import errno
import os
import shutil
from collections import namedtuple

import pytest
from tokenwatt.common import failures, files
from workflow_helpers import TINY, copy_of_study, snakemake

Usage = namedtuple("Usage", "total used free")


def _full(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")  # as write() raises it: no file name


@pytest.fixture
def little_room(monkeypatch):
    monkeypatch.setattr(failures.shutil, "disk_usage", lambda path: Usage(10**9, 10**9 - 2_500_000, 2_500_000))


def test_a_full_disk_names_the_folder_its_free_space_and_that_nothing_is_lost(tmp_path, capsys, little_room):
    results = tmp_path / "results"
    with pytest.raises(SystemExit):
        with files.logged(results / "logs" / "chunk.log"):
            files._atomic(results / "data" / "chunks.parquet", _full)
    said = capsys.readouterr().err
    assert f"no space left on the device while writing {results / 'data' / 'chunks.parquet'}; free space" in said
    assert f"({results / 'data'} has 2.5 MB free)" in said
    assert "rerun the same command: every finished trial and file is kept" in said and "Traceback" not in said


def test_a_write_that_names_no_file_names_the_jobs_results_folder(tmp_path, capsys, little_room):
    results = tmp_path / "results"
    with pytest.raises(SystemExit):
        with files.logged(results / "logs" / "train_trial" / "b1000" / "t1.log"):
            _full()  # a checkpoint's or a heartbeat's write, outside tokenwatt's atomic writer
    said = capsys.readouterr().err
    assert f"while this job wrote its outputs; free space on that disk ({results} has 2.5 MB free)" in said


def test_free_space_is_read_on_the_nearest_folder_that_exists(tmp_path):
    assert failures.free_space(tmp_path / "not" / "made" / "yet") is not None
    assert failures.free_space(tmp_path).split()[-1] in {"B", "KB", "MB", "GB"}


# A fake full disk inside a trial's job: every torch.save (the checkpoint's writer) raises ENOSPC.
SITECUSTOMIZE = """
import errno, importlib.abc, sys

class _FullDisk(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "tokenwatt.training.trial":
            sys.meta_path.remove(self)
            import torch

            def save(*args, **kwargs):
                raise OSError(errno.ENOSPC, "No space left on device")

            torch.save = save
        return None

sys.meta_path.insert(0, _FullDisk())
"""


@pytest.mark.workflow
def test_a_disk_that_fills_mid_trial_ends_in_one_sentence_and_keeps_every_finished_trial(study, tmp_path):
    work = copy_of_study(study, tmp_path / "copy")
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "sitecustomize.py").write_text(SITECUSTOMIZE)
    (work / "checkpoints.yaml").write_text("train: {checkpoint_every: 200}\n")  # a checkpoint mid-trial
    trials = work / "results/trials"
    kept = {p: p.read_bytes() for p in trials.rglob("*.*") if "b1000/t2" not in str(p)}
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(fake), os.environ.get("PYTHONPATH")]))}
    forced = ("--forcerun", "results/trials/b1000/t2/metrics.json")
    proc = snakemake(work, *TINY, "checkpoints.yaml", "--cores", "1", *forced, check=False, env=env)
    out = " ".join((proc.stdout + proc.stderr).split())  # the terminal's lines joined as one text
    assert proc.returncode != 0
    assert "tokenwatt: train_trial (cell b1000, trial 2): no space left on the device while" in out
    assert " free), or set `results` to a folder on a larger one, and rerun the same command" in out
    assert "Traceback" not in out and "OSError" not in out
    assert {p: p.read_bytes() for p in kept} == kept  # every other trial as it was
    shutil.rmtree(fake)
