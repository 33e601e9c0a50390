"""The tiny study end to end through Snakemake, then what Snakemake would do after each change."""

import contextlib
import json
import os
import re
import shutil
import time
from pathlib import Path

import polars as pl
import pytest
import yaml
from snakemake.utils import update_config
from statsmodels.stats.anova import AnovaRM
from test_design import SCHEMA
from tokenwatt.analysis.products import product, products_of
from tokenwatt.plan.config import validate_config
from tokenwatt.plan.study import Study
from workflow_helpers import ANALYSIS, FRESH_HASH_SEED, ROOT, TINY, clone, copy_of_study, planned_jobs, snakemake

pytestmark = pytest.mark.workflow


def _tiny_study() -> Study:
    """The tiny study as `snakemake --configfile .test/config/config.yaml` plans it: over config/config.yaml, merged as
    Snakemake merges config files."""
    config = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    update_config(config, yaml.safe_load((ROOT / ".test/config/config.yaml").read_text()))
    config = validate_config(config, SCHEMA)
    return Study(config, products_of(config), ROOT / "workflow", ROOT / "workflow" / "scripts")


def test_the_study_ends_in_a_report_with_every_figure(study):
    page = (study / "results/report.html").read_text()
    # the Scaling section of a study with one model size says why in a sentence and embeds none of its figures
    assert (
        page.count("data:image/png;base64,") == len(product("trials").figures)
        and "A study with a design.model factor" in page
    )
    for ext in ("png", "svg"):
        assert len(list((study / "results/figures").glob(f"*.{ext}"))) == len(_tiny_study().report_figures)


def test_the_device_profile_is_measured_once_before_any_trial(study):
    profile = json.loads((study / "results/device/profile.json").read_text())
    assert profile["windows"] == 5 and profile["cs_tflops"] == profile["median_tflops"] > 0
    first_trial = min(p.stat().st_mtime for p in (study / "results/trials").rglob("metrics.json"))
    assert (study / "results/device/profile.json").stat().st_mtime < first_trial


def test_every_trial_uses_the_one_cs_tflops_of_the_device_profile(study):
    trials = pl.read_parquet(study / "results/analysis/trials.parquet")
    profile = json.loads((study / "results/device/profile.json").read_text())
    assert set(trials["cs_tflops"]) == {profile["cs_tflops"]}


def test_trial_records_hold_measurements_and_the_analysis_holds_pe(study):
    record = json.loads((study / "results/trials/b1000/t1/metrics.json").read_text())
    assert "pe" not in record and "cs_tflops" not in record and len(record["check_before_tflops"]) == 2
    assert "quality" in pl.read_parquet(study / "results/analysis/trials.parquet").columns


def test_the_report_has_a_measurement_quality_section(study):
    page = (study / "results/report.html").read_text()
    assert "Measurement quality" in page and "CS_TFLOPS</b> =" in page and "trials flagged" in page


def test_the_report_carries_the_stats_sentences(study):
    import html

    stats = json.loads((study / "results/analysis/stats.json").read_text())
    page = (study / "results/report.html").read_text()
    assert stats["anova"]["pe"]["status"] == "ok"
    assert html.escape(stats["anova"]["pe"]["apa"]) in page


def test_stats_on_our_own_trials_match_statsmodels_on_the_log_values_they_test(study):
    trials = pl.read_parquet(study / "results/analysis/trials.parquet")
    stats = json.loads((study / "results/analysis/stats.json").read_text())
    for dv in ("pe", "energy_j", "train_s"):  # ratio-scale measures: tested on log values
        assert stats["anova"][dv]["scale"] == "log"
        logged = trials.select("trial", "budget", pl.col(dv).log()).to_pandas()
        table = AnovaRM(logged, depvar=dv, subject="trial", within=["budget"]).fit().anova_table
        assert stats["anova"][dv]["F"] == pytest.approx(float(table["F Value"].iloc[0]), rel=1e-8)


def test_every_trial_records_its_meter_and_efficiency(study):
    trials = pl.read_parquet(study / "results/analysis/trials.parquet")
    assert trials.height == 6
    assert set(trials["meter"]) == {"estimate"} and trials["meter_is_estimate"].all()
    assert (trials["pe"] > 0).all() and (trials["real_tokens"] >= trials["budget"]).all()


def test_conditions_and_the_studys_change_table_are_written(study):
    conditions = pl.read_csv(study / "results/analysis/conditions.csv")
    assert set(conditions["budget"]) == {1000, 2000}
    assert conditions.filter(pl.col("measure") == "pe")["n"].to_list() == [3, 3]
    assert pl.read_csv(study / "results/analysis/changes.csv").height == 1


def test_every_job_wrote_its_log(study):
    logs = study / "results/logs"
    for rule in (
        "corpus",
        "normalize",
        "split",
        "tokenizer",
        "chunk",
        "subset",
        "train_trial",
        "aggregate",
        "stats",
        "trials_figures",
        "report",
    ):
        assert list(logs.glob(f"{rule}*")), rule
    trial_log = (logs / "train_trial/b1000/t1.log").read_text()
    assert "tok/s" in trial_log and "meter.kind estimate" in trial_log


def test_a_truncated_trial_record_does_not_block_a_dry_run_and_is_named(study):
    path = study / "results/trials/b1000/t1/metrics.json"
    original, stat = path.read_bytes(), path.stat()
    path.write_text('{"budget": 10')
    try:
        proc = snakemake(study, *TINY, "-n")
        assert f"{path.relative_to(study)} is unreadable" in proc.stdout + proc.stderr
    finally:
        path.write_bytes(original)
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def test_the_terminal_shows_each_trial_and_the_studys_progress_without_noise(study):
    terminal = (study / "terminal.txt").read_text()
    assert terminal.count("▶ ") == 6 and terminal.count("■ ") == 6
    assert "tokens/s" in terminal and "W estimated" in terminal and "eval loss" in terminal
    assert "study: 6 of 6 trials done." in terminal and "of estimated energy to go" in terminal
    assert "Shell command: None" not in terminal
    assert "Job stats" in terminal and "tokenwatt plan:" in terminal
    assert "input:" not in terminal and "output:" not in terminal and "eligible for caching" not in terminal
    assert terminal.count("process start-up between trials not included") == 1  # said once, in the plan
    log = re.search(r"Complete [Ll]og: (\S+)", terminal)
    assert log and "input:" in Path(log.group(1)).read_text()  # Snakemake's job blocks went to its log


def test_an_unchanged_rerun_has_nothing_to_do(study):
    assert planned_jobs(study, *TINY, env=FRESH_HASH_SEED) == {}


def test_a_diverging_trial_set_to_fail_leaves_no_outputs_behind(study, tmp_path):
    work = copy_of_study(study, tmp_path / "copy")  # its data stages and device profile, none of its trials or logs
    shutil.rmtree(work / "results/trials")
    shutil.rmtree(work / "results/logs/train_trial")
    (work / "diverge.yaml").write_text(
        "study: {name: x, seed: 11, budgets: [1000], trials: 1}\n"  # the study's seed: its data stages as they are
        "train: {lr: 1.0e+30, epochs: 1, log_every: 5, on_divergence: fail}\n"
    )
    proc = snakemake(work, *TINY, "diverge.yaml", "--cores", "1", check=False)
    assert proc.returncode != 0
    log = (work / "results/logs/train_trial/b1000/t1.log").read_text()
    assert "budget 1000, trial 1: " in log and "training diverged at train.lr 1e+30. Lower train.lr" in log
    assert not list((work / "results/trials").rglob("*.*"))


# --- what reruns after a change (asked of Snakemake with a dry run; exact jobs by rule and count)


def _with(study, text):
    (study / "change.yaml").write_text(text)
    return [*TINY, "change.yaml"]


@contextlib.contextmanager
def _edited(path):
    original = path.read_text()
    path.write_text(original + "\n_EDITED = 1  # an edit to what the code does (a comment alone reruns nothing)\n")
    try:
        yield
    finally:
        path.write_text(original)


def test_a_figure_style_change_reruns_only_figures_and_report(study):
    assert planned_jobs(study, *_with(study, "figures: {dpi: 99}")) == {
        "trials_figures": 1,
        "scaling_figures": 1,
        "report": 1,
    }


def test_one_more_budget_runs_only_its_subsets_and_trials_then_the_analysis(study):
    change = _with(study, "study: {name: tiny test study, seed: 11, budgets: [1000, 2000, 3000], trials: 3}")
    assert planned_jobs(study, *change) == {"subset": 3, "train_trial": 3, **ANALYSIS}


def test_more_trials_run_only_the_new_trials_then_the_analysis(study):
    change = _with(study, "study: {name: tiny test study, seed: 11, budgets: [1000, 2000], trials: 4}")
    assert planned_jobs(study, *change) == {"subset": 2, "train_trial": 2, **ANALYSIS}


def test_a_normalization_change_reruns_everything_from_normalization_down(study):
    assert planned_jobs(study, *_with(study, "normalize: {dedupe: false}")) == {
        "normalize": 1,
        "split": 1,
        "decontaminate": 1,
        "tokenizer": 1,
        "chunk": 2,
        "subset": 6,
        "train_trial": 6,
        **ANALYSIS,
    }


def test_editing_the_training_library_reruns_every_trial_and_what_follows(study):
    with _edited(study / "workflow/scripts/tokenwatt/training/train.py"):
        assert planned_jobs(study, *TINY) == {"train_trial": 6, **ANALYSIS}


def test_a_metric_constant_change_reruns_only_the_analysis(study):
    assert planned_jobs(study, *_with(study, "metric: {K: 2.0, tt_scale: 1000}")) == ANALYSIS


def test_a_configured_cs_tflops_reruns_only_the_analysis(study):
    assert planned_jobs(study, *_with(study, "metric: {cs_tflops: 125.0}")) == ANALYSIS


def test_a_quality_threshold_change_reruns_only_the_analysis(study):
    assert planned_jobs(study, *_with(study, "quality: {steady_tolerance: 0.5}")) == ANALYSIS


def test_editing_the_efficiency_formulas_reruns_only_the_analysis(study):
    with _edited(study / "workflow/scripts/tokenwatt/analysis/efficiency.py"):
        assert planned_jobs(study, *TINY) == ANALYSIS


def test_editing_the_tokenizer_module_reruns_chunking_and_everything_after(study):
    with _edited(study / "workflow/scripts/tokenwatt/data/tokenizer.py"):
        assert planned_jobs(study, *TINY) == {"tokenizer": 1, "chunk": 2, "subset": 6, "train_trial": 6, **ANALYSIS}


def test_the_documented_rerun_of_flagged_trials_retrains_exactly_those(study):
    flagged = ["results/trials/b1000/t2/metrics.json", "results/trials/b2000/t3/metrics.json"]
    assert planned_jobs(study, *TINY, "--forcerun", *flagged) == {"train_trial": 2, **ANALYSIS}


def test_editing_the_analysis_library_reruns_only_the_analysis(study):
    with _edited(study / "workflow/scripts/tokenwatt/analysis/aggregate.py"):
        assert planned_jobs(study, *TINY) == ANALYSIS
    with _edited(study / "workflow/scripts/tokenwatt/presentation/figures.py"):
        assert planned_jobs(study, *TINY) == {"trials_figures": 1, "scaling_figures": 1, "report": 1}


def test_a_scaling_setting_or_an_edit_to_the_interval_method_reruns_only_the_scaling_analysis(study):
    scaling_only = {"scaling": 1, "scaling_figures": 1, "report": 1}
    assert planned_jobs(study, *_with(study, "scaling: {points: all}")) == scaling_only
    with _edited(study / "workflow/scripts/tokenwatt/analysis/scaling/units.py"):
        assert planned_jobs(study, *TINY) == scaling_only


def test_a_comment_a_docstring_or_a_reformatting_of_the_training_library_reruns_nothing(study):
    path = study / "workflow/scripts/tokenwatt/training/train.py"
    original = path.read_text()
    assert original.startswith('"""')  # the module's docstring, reworded below
    edited = '"""In other words: ' + original[3:].replace(" = ", "  =  ")  # spaces around every assignment
    assert edited.count("  =  ") > 5
    path.write_text("# why this module exists, said again\n" + edited + "\n\n\n")
    try:
        assert planned_jobs(study, *TINY) == {}
    finally:
        path.write_text(original)


def test_touching_the_corpus_input_without_changing_it_reruns_nothing(study):
    grammar = study / "resources/story_grammar.json"
    later = time.time() + 60
    os.utime(grammar, (later, later))
    assert planned_jobs(study, *TINY) == {}


def test_a_second_clone_fetches_its_trials_from_the_cache(study, cache, tmp_path):
    second = clone(tmp_path)
    snakemake(second, *TINY, "--cores", "2", "--resources", "gpu=1", "--cache", env=cache)
    trained = [log for log in (second / "results/logs").rglob("train_trial/**/*.log") if log.read_text().strip()]
    assert not trained  # no training job wrote a line: every trial came from the cache
    for metrics in (study / "results/trials").rglob("metrics.json"):
        twin = second / metrics.relative_to(study)
        assert twin.read_bytes() == metrics.read_bytes()
    for figure in (study / "results/figures").glob("*.png"):
        assert (second / figure.relative_to(study)).read_bytes() == figure.read_bytes(), figure.name


def test_snakemakes_own_report_builds_with_our_captions_and_categories(study):
    proc = snakemake(study, *TINY, "--report", "smk-report.html")
    assert "Could not detect mimetype" not in proc.stdout + proc.stderr
    page = (study / "smk-report.html").read_text()
    for text in ("Figures", "Tables", "Tests", "each thin line joins one trial across budgets"):
        assert text in page, text
