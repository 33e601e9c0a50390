"""The result store: a job's outputs kept under a key of its rule, params and input contents; restored whole and
checked, never through a link; a forced job computes again and replaces its entry."""

import json
import os
from types import SimpleNamespace

import pytest
from tokenwatt.common.store import (
    FORCED_ENV,
    STORE_ENV,
    JobStore,
    StoreError,
    entry_dir,
    forced_spec,
    is_forced,
    job_key,
    job_store,
    named_paths,
    restore,
    save,
    store_root,
)

ENTRY_NAME = "entry.json"


def _outputs(tmp_path, texts=None):
    texts = texts or {"metrics": "{}\n", "power": "power bytes"}
    folder = tmp_path / "results/trials/b10/t1"
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, text in texts.items():
        path = folder / (f"{name}.json" if name == "metrics" else f"{name}.parquet")
        path.write_text(text)
        paths[name] = str(path)
    return paths


def test_the_key_is_the_content_of_the_inputs_not_their_place_or_time(tmp_path):
    a, b = tmp_path / "a.parquet", tmp_path / "elsewhere" / "b.parquet"
    b.parent.mkdir()
    a.write_bytes(b"same")
    b.write_bytes(b"same")
    os.utime(b, (1, 1))
    params = {"budget": 10, "code": "abc"}
    assert job_key("subset", params, {"0": a}) == job_key("subset", params, {"0": b})
    b.write_bytes(b"other")
    assert job_key("subset", params, {"0": a}) != job_key("subset", params, {"0": b})
    assert job_key("subset", params, {"0": a}) != job_key("subset", {**params, "budget": 20}, {"0": a})
    assert job_key("subset", params, {"0": a}) != job_key("chunk", params, {"0": a})


def test_a_directory_input_counts_by_its_files_without_snakemakes_timestamp(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    for d in (one, two):
        (d / "sub").mkdir(parents=True)
        (d / "tokenizer.json").write_text("{}")
        (d / "sub" / "x").write_text("x")
    (two / ".snakemake_timestamp").write_text("")
    assert job_key("chunk", {}, {"tokenizer": one}) == job_key("chunk", {}, {"tokenizer": two})
    (two / "sub" / "x").write_text("y")
    assert job_key("chunk", {}, {"tokenizer": one}) != job_key("chunk", {}, {"tokenizer": two})


def test_a_stored_job_is_restored_byte_for_byte_with_the_marker_file_last(tmp_path, monkeypatch):
    root, outputs = tmp_path / "store", _outputs(tmp_path)
    originals = {n: open(p, "rb").read() for n, p in outputs.items()}
    save(root, "train_trial", "k" * 64, outputs, log_text="trained\n")
    for path in outputs.values():
        os.remove(path)
    placed = []
    real_replace = os.replace
    monkeypatch.setattr(os, "replace", lambda src, dst: (placed.append(os.path.basename(dst)), real_replace(src, dst)))
    entry = restore(root, "train_trial", "k" * 64, outputs, last="metrics")
    assert entry["rule"] == "train_trial" and placed[-1] == "metrics.json"
    assert {n: open(p, "rb").read() for n, p in outputs.items()} == originals
    assert (entry_dir(root, "train_trial", "k" * 64) / "log.txt").read_text() == "trained\n"
    assert restore(root, "train_trial", "0" * 64, outputs) is None  # no entry: the job computes


def test_a_hand_edit_of_the_readable_file_never_reaches_the_stored_copy(tmp_path):
    root, outputs = tmp_path / "store", _outputs(tmp_path)
    save(root, "train_trial", "k" * 64, outputs)
    with open(outputs["power"], "w") as fh:  # in place, as an editor or a truncation would
        fh.write("")
    os.remove(outputs["metrics"])
    restore(root, "train_trial", "k" * 64, outputs)
    assert open(outputs["power"]).read() == "power bytes"


def test_a_damaged_entry_is_named_dropped_and_the_job_computes(tmp_path, capsys):
    root, outputs = tmp_path / "store", _outputs(tmp_path)
    where = save(root, "train_trial", "k" * 64, outputs)
    (where / "files" / "power.parquet").write_text("bit rot")
    with pytest.raises(StoreError, match="power.parquet differs from what was stored"):
        restore(root, "train_trial", "k" * 64, outputs)
    assert not where.exists()
    job = JobStore(root, "train_trial", outputs, "k" * 64, forced=False)
    save(root, "train_trial", "k" * 64, outputs)
    (where / ENTRY_NAME).write_text("{")
    assert job.restore() is False
    assert "damaged and is dropped" in capsys.readouterr().out


def test_computing_a_key_again_replaces_its_entry_only_once_the_new_one_is_complete(tmp_path):
    root = tmp_path / "store"
    save(root, "device_profile", "p" * 64, _outputs(tmp_path, {"metrics": '{"cs": 1}'}))
    where = save(root, "device_profile", "p" * 64, _outputs(tmp_path, {"metrics": '{"cs": 2}'}))
    assert (where / "files" / "metrics.json").read_text() == '{"cs": 2}'
    assert sorted(p.name for p in where.parent.iterdir()) == ["p" * 64]  # no temporary or old folder left


def test_the_jobs_the_user_forced_compute_again(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rules = ["train_trial", "subset", "all"]
    trial = ["results/trials/b10/t1/metrics.json", "results/trials/b10/t1/power.parquet"]
    by_file = forced_spec(False, ["./results/trials/b10/t1/metrics.json"], [], rules)
    assert is_forced("train_trial", trial, by_file) and not is_forced(
        "train_trial", ["results/trials/b10/t2/metrics.json"], by_file
    )
    assert is_forced("train_trial", trial, forced_spec(False, ["train_trial"], [], rules))
    assert not is_forced("subset", ["results/subsets/b10/t1.json"], forced_spec(False, ["train_trial"], [], rules))
    assert is_forced("subset", ["x"], forced_spec(True, [], [], rules))
    assert is_forced("train_trial", trial, forced_spec(False, [], trial[:1], rules))  # -f with the trial as target
    monkeypatch.setenv(FORCED_ENV, "not json")
    assert not is_forced("train_trial", trial)


def test_a_file_forced_by_its_absolute_path_is_found_from_a_node_that_mounts_the_folder_elsewhere(
    tmp_path, monkeypatch
):
    login, node = tmp_path / "home" / "study", tmp_path / "mnt" / "home" / "study"
    login.mkdir(parents=True)
    node.mkdir(parents=True)
    monkeypatch.chdir(login)
    spec = forced_spec(False, [str(login / "results/trials/b10/t1/metrics.json")], [], ["train_trial"])
    monkeypatch.chdir(node)  # the job's Snakemake, in the same study folder under another mount point
    assert is_forced("train_trial", ["results/trials/b10/t1/metrics.json"], spec)


def test_a_forced_file_outside_the_working_directory_is_matched_by_its_absolute_path(tmp_path, monkeypatch):
    study, node_study, scratch = tmp_path / "home" / "study", tmp_path / "a" / "b" / "study", tmp_path / "scratch"
    for folder in (study, node_study, scratch):
        folder.mkdir(parents=True)
    metrics = str(scratch / "results/trials/b10/t1/metrics.json")  # results: an absolute folder on scratch
    monkeypatch.chdir(study)
    spec = forced_spec(False, [metrics], [], ["train_trial"])
    monkeypatch.chdir(node_study)  # a working directory at another depth
    assert is_forced("train_trial", [metrics], spec)


def _trial_job(rule):
    """A trial's Snakemake script object, as the project named its rule, with one output and no inputs."""
    return SimpleNamespace(
        rule=rule,
        config={"results": "results"},
        log=[],
        params=_Params(budget=10, trial=1),
        input=_Files([], {}),
        output=_Files(["m.json"], {"metrics": "m.json"}),
    )


def test_a_job_without_the_forced_list_in_its_environment_says_so(tmp_path, monkeypatch, capfd):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(FORCED_ENV, raising=False)
    job_store(_trial_job("train_trial"), "train_trial")
    assert "TOKENWATT_FORCED is not in this job's environment" in capfd.readouterr().err


def test_the_store_lives_in_the_results_folder_unless_told_otherwise(tmp_path, monkeypatch):
    monkeypatch.delenv(STORE_ENV, raising=False)
    assert store_root("results") == (tmp_path.cwd() / "results" / "store")
    monkeypatch.setenv(STORE_ENV, str(tmp_path / "shared"))
    assert store_root("results") == tmp_path / "shared"
    monkeypatch.setenv(STORE_ENV, "off")
    assert store_root("results") is None


class _Files(list):
    """A Snakemake file list as the script sees it: positional, some names."""

    def __init__(self, items, names=None):
        super().__init__(items)
        self._names = names or {}
        for name, value in self._names.items():
            setattr(self, name, value)

    def keys(self):
        return self._names.keys()


class _Params(dict):
    pass


def test_a_script_job_is_keyed_by_its_rule_params_and_named_inputs(tmp_path, monkeypatch):
    # A project's own name for the rule (use rule * from tokenwatt as tw_*) keys nothing: tokenwatt's name does.
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(STORE_ENV, raising=False)
    monkeypatch.setenv(FORCED_ENV, json.dumps({"all": False, "rules": [], "files": []}))
    (tmp_path / "chunks.parquet").write_bytes(b"chunks")
    outputs = _outputs(tmp_path)
    smk = SimpleNamespace(
        rule="tw_train_trial",
        config={"results": "results"},
        log=["results/logs/t1.log"],
        params=_Params(budget=10, trial=1),
        input=_Files(["chunks.parquet"], {"train": "chunks.parquet"}),
        output=_Files(list(outputs.values()), {"metrics": outputs["metrics"], "power": outputs["power"]}),
    )
    job = job_store(smk, "train_trial", last="metrics")
    assert job.root == tmp_path / "results" / "store" and not job.forced
    assert job.key == job_key("train_trial", {"budget": 10, "trial": 1}, {"train": "chunks.parquet"})
    assert named_paths(smk.output) == outputs
    job.save()
    for path in outputs.values():
        os.remove(path)
    assert job.restore() is True and "restored from the store" in job.restored_line()


def test_a_renamed_rule_is_forced_by_the_name_the_user_gave_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(FORCED_ENV, forced_spec(False, ["tw_train_trial"], (), ["tw_train_trial", "tw_report"]))
    assert job_store(_trial_job("tw_train_trial"), "train_trial").forced
