"""The tiny study end to end through Snakemake, then what Snakemake would do after each change."""

import json

import polars as pl
import pytest
from statsmodels.stats.anova import AnovaRM

from workflow_helpers import clone, planned_jobs, snakemake

pytestmark = pytest.mark.workflow
TINY = ["--configfile", "tests/data/tiny.yaml"]


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    work = clone(tmp_path_factory.mktemp("study"))
    snakemake(work, *TINY, "--cores", "2", "--resources", "gpu=1")
    return work


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
