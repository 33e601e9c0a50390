"""The tiny study end to end through Snakemake, then what Snakemake would do after each change."""

import contextlib
import json
import os
import time

import polars as pl
import pytest
from statsmodels.stats.anova import AnovaRM

from workflow_helpers import TINY, clone, planned_jobs, snakemake

pytestmark = pytest.mark.workflow


def test_the_study_ends_in_a_report_with_every_figure(study):
    page = (study / "results/report.html").read_text()
    assert page.count("data:image/png;base64,") == 6
    for ext in ("png", "svg"):
        assert len(list((study / "results/figures").glob(f"*.{ext}"))) == 6


def test_the_report_carries_the_stats_sentences(study):
    import html

    stats = json.loads((study / "results/analysis/stats.json").read_text())
    page = (study / "results/report.html").read_text()
    assert stats["anova"]["pe"]["status"] == "ok"
    assert html.escape(stats["anova"]["pe"]["apa"]) in page


def test_stats_on_our_own_trials_match_statsmodels(study):
    trials = pl.read_parquet(study / "results/analysis/trials.parquet")
    stats = json.loads((study / "results/analysis/stats.json").read_text())
    for dv in ("pe", "energy_j", "train_s"):
        table = AnovaRM(trials.select("trial", "budget", dv).to_pandas(), depvar=dv, subject="trial", within=["budget"]).fit().anova_table
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
    for rule in ("corpus", "normalize", "split", "tokenizer", "chunk", "subset", "train_trial", "aggregate", "stats", "figures", "report"):
        assert list(logs.glob(f"{rule}*")), rule
    trial_log = (logs / "train_trial/b1000/t1.log").read_text()
    assert "tok/s" in trial_log and "meter.kind estimate" in trial_log


def test_an_unchanged_rerun_has_nothing_to_do(study):
    assert planned_jobs(study, *TINY) == {}


def test_a_diverging_trial_leaves_no_outputs_behind(tmp_path):
    work = clone(tmp_path)
    (work / "diverge.yaml").write_text("study: {name: x, seed: 1, budgets: [1000], trials: 1}\ntrain: {lr: 1.0e+30, epochs: 1, log_every: 5}\n")
    proc = snakemake(work, *TINY, "diverge.yaml", "--cores", "1", check=False)
    assert proc.returncode != 0
    log = (work / "results/logs/train_trial/b1000/t1.log").read_text()
    assert "budget 1000, trial 1: non-finite loss at step" in log
    assert not list((work / "results/trials").rglob("*.*"))


# --- what reruns after a change (asked of Snakemake with a dry run; exact jobs by rule and count)
ANALYSIS = {"aggregate": 1, "stats": 1, "figures": 1, "report": 1}


def _with(study, text):
    (study / "change.yaml").write_text(text)
    return [*TINY, "change.yaml"]


@contextlib.contextmanager
def _edited(path):
    original = path.read_text()
    path.write_text(original + "\n# an edit\n")
    try:
        yield
    finally:
        path.write_text(original)


def test_a_figure_style_change_reruns_only_figures_and_report(study):
    assert planned_jobs(study, *_with(study, "figures: {dpi: 99}")) == {"figures": 1, "report": 1}


def test_one_more_budget_runs_only_its_subsets_and_trials_then_the_analysis(study):
    change = _with(study, "study: {name: tiny test study, seed: 11, budgets: [1000, 2000, 3000], trials: 3}")
    assert planned_jobs(study, *change) == {"subset": 3, "train_trial": 3, **ANALYSIS}


def test_more_trials_run_only_the_new_trials_then_the_analysis(study):
    change = _with(study, "study: {name: tiny test study, seed: 11, budgets: [1000, 2000], trials: 4}")
    assert planned_jobs(study, *change) == {"subset": 2, "train_trial": 2, **ANALYSIS}


def test_a_normalization_change_reruns_everything_from_normalization_down(study):
    assert planned_jobs(study, *_with(study, "normalize: {dedupe: false}")) == {
        "normalize": 1, "split": 1, "tokenizer": 1, "chunk": 2, "subset": 6, "train_trial": 6, **ANALYSIS}


def test_editing_the_training_library_reruns_every_trial_and_what_follows(study):
    with _edited(study / "workflow/scripts/tokenwatt/train.py"):
        assert planned_jobs(study, *TINY) == {"train_trial": 6, **ANALYSIS}


def test_editing_the_analysis_library_reruns_only_the_analysis(study):
    with _edited(study / "workflow/scripts/tokenwatt/aggregate.py"):
        assert planned_jobs(study, *TINY) == ANALYSIS
    with _edited(study / "workflow/scripts/tokenwatt/figures.py"):
        assert planned_jobs(study, *TINY) == {"figures": 1, "report": 1}


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
    snakemake(study, *TINY, "--report", "smk-report.html")
    page = (study / "smk-report.html").read_text()
    for text in ("Figures", "Tables", "Tests", "each grey line joins one trial across budgets"):
        assert text in page, text
