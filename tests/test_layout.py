"""Every path a study reads and writes, and what each rule is handed, from the config alone: no Snakemake here."""

import copy
import os
from pathlib import Path

import yaml
from test_design import DEFAULT, SCHEMA
from tokenwatt.analysis.products import products_of
from tokenwatt.plan import startup
from tokenwatt.plan.config import validate_config
from tokenwatt.plan.layout import SHARED, Layout
from tokenwatt.plan.study import Study
from tokenwatt.selection.catalog import STEPS, step, step_records
from workflow_helpers import ROOT

SCRIPTS = ROOT / "workflow" / "scripts"


def _study(**changes) -> Study:
    config = validate_config({**copy.deepcopy(DEFAULT), **changes}, SCHEMA)
    return Study(config, products_of(config), ROOT / "workflow", SCRIPTS)


def _selection(**levels) -> dict:
    return {"design": {"selection": levels}, "selection": {"eval_filters": {"min_words": 3}}}


def test_a_trials_four_files_live_in_its_cells_folder_under_the_results_key():
    layout = _study(results="out", design={"model": {"tiny": {"preset": "llama-tiny"}}}).layout
    files = layout.trial("model=tiny/b10000", 2)
    assert files.metrics == os.path.join("out", "trials", "model=tiny", "b10000", "t2", "metrics.json")
    assert [os.path.basename(f) for f in files] == ["metrics.json", "power.parquet", "steps.parquet", "curve.parquet"]
    assert len(layout.trial_targets()) == 4 * len(layout.expected) == 4 * 3 * 5


def test_the_interim_twin_of_an_analysis_file_is_under_interim_and_a_trial_stays_where_it_is():
    layout = _study(results="out").layout
    assert layout.interim_of(layout.analysis("stats.json")) == os.path.join("out", "interim", "analysis", "stats.json")
    assert layout.interim_of(layout.report) == os.path.join("out", "interim", "report.html")
    assert layout.interim_of(layout.trial("b10000", 1).power) == layout.trial("b10000", 1).power


def test_a_selection_level_trains_on_its_own_documents_and_every_level_is_scored_on_the_filtered_eval_set():
    layout = _study(**_selection(strict={"filters": {"min_words": 5}})).layout
    assert layout.chunked_documents("sel=strict/", "train") == os.path.join(
        "results", "data", "sel=strict", "docs_train.parquet"
    )
    assert layout.chunked_documents("", "train") == os.path.join("results", "data", "decontaminated.parquet")
    assert layout.chunked_documents("", "eval") == os.path.join("results", "data", "docs_eval_kept.parquet")
    inputs = layout.trial_inputs("selection=strict/b10000", 1)
    assert inputs["subset"] == os.path.join("results", "subsets", "sel=strict", "b10000", "t1.json")
    assert "order" not in inputs  # a shuffled level ranks nothing


def test_every_step_record_is_listed_by_its_level_and_only_an_ordered_level_ranks_its_documents():
    layout = _study(**_selection(plain="none", ranked={"order": "as_read"})).layout
    records = step_records(layout)
    assert [os.path.basename(p) for p in records[SHARED]] == ["decontaminate.json", "eval_filter.json"]
    assert [os.path.relpath(p, "results/data") for p in records["plain"]] == [
        "sel=plain/near_dup.json",
        "sel=plain/filter.json",
    ]
    assert records["ranked"][-1] == os.path.join("results", "data", "sel=ranked", "order.json")
    assert layout.trial_inputs("selection=ranked/b10000", 1)["order"] == os.path.join(
        "results", "data", "sel=ranked", "order.parquet"
    )
    assert step_records(_study().layout) == {}  # no design.selection, no selection analysis


def test_a_value_every_cell_shares_is_handed_to_the_rule_as_itself_not_as_a_function_per_job():
    study = _study(design={"model": {"a": {"preset": "llama-tiny"}, "b": {"preset": "llama-tiny"}}})
    assert study.by_cell(lambda cell_id: 7) == 7
    assert study.by_cell(lambda cell_id: {"lr": 0.003}) == {"lr": 0.003}
    assert study.by_cell(lambda cell_id: 1.0) == 1.0 and type(study.by_cell(lambda cell_id: 1.0)) is float


def test_a_value_that_differs_between_cells_is_looked_up_by_the_jobs_cell():
    study = _study(design={"model": {"a": {"preset": "llama-tiny"}, "b": {"preset": "llama-tiny"}}})
    budget_of = study.by_cell(lambda cell_id: study.design.cell(cell_id).budget)
    assert callable(budget_of)
    assert {cell.id: budget_of({"cell": cell.id}) for cell in study.design.cells} == {
        cell.id: cell.budget for cell in study.design.cells
    }
    # equal by == yet not the same value: each cell is handed its own (a type, a key order), never the first cell's
    first = study.design.cells[0].id
    for own, others in ((1, 1.0), (True, 1), ({"b": 1, "a": 2}, {"a": 2, "b": 1})):
        value = {cell.id: own if cell.id == first else others for cell in study.design.cells}
        value_of = study.by_cell(value.__getitem__)
        assert callable(value_of)
        assert [repr(value_of({"cell": key})) for key in value] == [repr(v) for v in value.values()]
    runtime_of = study.by_cell(study.stable_runtime, "stable")
    keys = {study.design.stable_key(cell) for cell in study.design.cells}
    assert keys == {"model=a/", "model=b/"}
    assert all(
        (runtime_of({"stable": key}) if callable(runtime_of) else runtime_of) == study.stable_runtime(key)
        for key in keys
    )


def test_each_step_rule_reads_what_the_step_before_it_wrote():
    layout = Layout(_study().config, _study().design)
    near_dup, filtered = step("select_near_dup"), step("select_filter")
    assert near_dup.inputs(layout)["docs"] == step("decontaminate").outputs(layout)["table"]
    assert filtered.inputs(layout)["docs"] == near_dup.outputs(layout)["table"]
    assert filtered.inputs(layout)["records"] == [
        step("decontaminate").outputs(layout)["record"],
        near_dup.outputs(layout)["record"],
    ]
    assert filtered.outputs(layout)["table"] == os.path.join("results", "data", "sel={level}", "docs_train.parquet")
    assert [s.name for s in STEPS if not s.per_level] == ["decontaminate", "select_eval"]


def test_a_steps_settings_are_its_levels_or_the_config_keys():
    study = _study(**_selection(strict={"near_dup": {"threshold": 0.5}}))
    assert step("select_near_dup").settings_of(study.design, "strict")["threshold"] == 0.5
    assert step("select_eval").settings_of(study.design, None) == {"min_words": 3}
    assert step("decontaminate").settings_of(study.design, None) == study.config["split"]["decontaminate"]
    assert study.window_meter("estimate") == {
        "kind": "estimate",
        **{k: study.config["meter"][k] for k in ("interval_s", "cpu_tdp_w", "rapl_root")},
    }


def test_the_report_digests_the_section_of_every_product_the_study_has():
    plain, selected = _study(), _study(**_selection(strict="none"))
    assert "selection" not in [p.name for p in plain.products] and "selection" in [p.name for p in selected.products]
    assert plain.report_params(False)["code"] != selected.report_params(False)["code"]
    assert plain.report_params(True)["interim"] and not plain.report_params(False)["interim"]


def test_a_measured_constant_has_a_device_profile_per_hardware_level_and_a_given_one_none():
    measured = _study(design={"hardware": {"a": {"device": "cpu"}, "b": {"device": "cpu"}}})
    assert sorted(os.path.basename(os.path.dirname(p)) for p in measured.device_profiles) == [
        "hardware=a",
        "hardware=b",
    ]
    given = copy.deepcopy(DEFAULT)
    given["metric"] = {**given.get("metric", {}), "cs_tflops": 1.5}
    assert _study(metric=given["metric"]).device_profiles == []


def test_a_run_is_refused_naming_weights_not_downloaded_before_anything_else(tmp_path):
    study = _study(results=str(tmp_path / "results"))
    assert startup.refusal(study, {"train_trial": 1}, False, ["model.source hub: weights of x are not here"]) == (
        "tokenwatt cannot start this study:\n  model.source hub: weights of x are not here"
    )
    assert startup.refusal(study, {}, False, []) is None


def test_a_report_of_another_config_is_named_after_a_failed_run(tmp_path):
    study = _study(results=str(tmp_path / "results"))
    os.makedirs(tmp_path / "results")
    (tmp_path / "results" / "report.html").write_text('<meta name="tokenwatt-config-hash" content="0123abcd">')
    [said] = startup.stale_reports(study)
    assert "config hash 0123abcd" in said and study.hash in said
    (tmp_path / "results" / "report.html").write_text(f'<meta name="tokenwatt-config-hash" content="{study.hash}">')
    assert startup.stale_reports(study) == []


def test_the_embedded_default_config_plans_every_path_it_reads_from_the_results_folder():
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    study = Study(validate_config(config, SCHEMA), [], ROOT / "workflow", SCRIPTS)
    assert all(p.startswith(study.layout.root) for p in study.layout.data_targets() + study.layout.trial_targets())


def test_a_package_corpus_job_reads_the_installed_files_so_a_new_release_reruns_it(installed_bible):
    study = _study(corpus={"source": "package", "package": {"distributions": ["tinybible"], "files": ["*.txt"]}})
    assert study.corpus_inputs() == [str(installed_bible / "tinybible" / "notes.txt")]


def test_a_package_corpus_that_is_not_installed_is_refused_before_any_job_naming_its_key():
    study = _study(corpus={"source": "package", "package": {"distributions": ["no-such-bible"]}})
    refused = startup.refusal(study, {"corpus": 1}, local_exec=True, downloads=[])
    assert refused and "corpus.package.distributions: 'no-such-bible' is not installed" in refused
    assert study.corpus_inputs() == []


def test_a_device_profile_stopped_from_outside_is_named_after_a_failed_run(tmp_path):
    study = _study(results=str(tmp_path / "results"))
    [(key, output)] = study.layout.profiles().items()
    log = Path(study.layout.log("device_profile", f"{key}profile"))
    assert startup.stopped_jobs(study) == []  # never started: nothing to name
    log.parent.mkdir(parents=True)
    log.write_text("measuring the device's matmul throughput\n")  # killed mid-measurement: no error of its own
    [said] = startup.stopped_jobs(study)
    assert "device profile was stopped from outside" in said and str(log) in said and "measured again" in said
    log.write_text("Traceback (most recent call last):\n")  # failed on an error of its own: Snakemake says it
    assert startup.stopped_jobs(study) == []
    log.write_text("measured\n")
    Path(output).parent.mkdir(parents=True, exist_ok=True)
    Path(output).write_text("{}")  # finished
    assert startup.stopped_jobs(study) == []


def test_a_profile_the_study_does_not_measure_is_never_named_as_stopped(tmp_path):
    given = copy.deepcopy(DEFAULT)
    study = _study(results=str(tmp_path / "results"), metric={**given.get("metric", {}), "cs_tflops": 1.5})
    [key] = study.layout.profiles()
    log = Path(study.layout.log("device_profile", f"{key}profile"))
    log.parent.mkdir(parents=True)
    log.write_text("measuring\n")  # left by an earlier run that measured it
    assert startup.stopped_jobs(study) == []


def test_a_trial_stopped_during_a_save_is_named_with_the_checkpoint_it_resumes_from(tmp_path):
    import json

    study = _study(results=str(tmp_path / "results"))
    cell, trial = study.layout.expected[0]
    folder = Path(study.layout.checkpoint(cell, trial))
    folder.mkdir(parents=True)
    log = Path(study.layout.log("train_trial", cell, f"t{trial}"))
    log.parent.mkdir(parents=True)
    log.write_text("step 10\n")
    (folder / "state.pt").write_bytes(b"checkpoint")
    beat = {"pid": 7, "step": 40, "written": {"step": 20}, "pending": {"checkpoint": 3, "written": {"step": 40}}}
    (folder / "heartbeat.json").write_text(json.dumps(beat))
    [said] = startup.stopped_trials(study)
    assert "resumes from its checkpoint at step 40" in said  # the staged file was renamed: the new checkpoint
    (folder / ".state.pt.7.tmp").write_bytes(b"staged")
    [said] = startup.stopped_trials(study)
    assert "resumes from its checkpoint at step 20" in said  # stopped before the rename: the one before
