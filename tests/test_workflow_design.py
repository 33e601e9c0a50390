"""A factorial study end to end through Snakemake: config/model-size.yaml's design on the tiny data,
then what Snakemake would do when the design grows."""

import json

import numpy as np
import polars as pl
import pytest
from statsmodels.stats.anova import AnovaRM
from workflow_helpers import ANALYSIS, FRESH_HASH_SEED, clone, planned_jobs, snakemake

# one worker runs the module's tests, which read the study it builds once (conftest.py)
pytestmark = [pytest.mark.workflow, pytest.mark.xdist_group("factorial")]
# The shipped two-way example (budget × three model sizes) on the tiny study's data, budgets and trials.
MODEL_SIZE = ["--configfile", "config/model-size.yaml", ".test/config/config.yaml"]
MODELS = ["tiny", "small", "base"]


@pytest.fixture(scope="module")
def factorial(built):
    def run(folder):
        proc = snakemake(clone(folder), *MODEL_SIZE, "--cores", "2", "--resources", "gpu=1")
        (folder / "terminal.txt").write_text(proc.stdout + proc.stderr)

    return built("factorial", run)


def _trials(work):
    return pl.read_parquet(work / "results/analysis/trials.parquet")


def test_every_cell_has_its_own_readable_folder_and_the_trials_carry_their_levels(factorial):
    for model in MODELS:
        for budget in (1000, 2000):
            for trial in (1, 2, 3):
                record = json.loads(
                    (factorial / f"results/trials/model={model}/b{budget}/t{trial}/metrics.json").read_text()
                )
                assert (record["levels"], record["cell"]) == ({"model": model}, f"model={model}/b{budget}")
    trials = _trials(factorial)
    assert trials.height == 18 and trials["levels_model"].unique(maintain_order=True).to_list() == MODELS


def test_every_model_trains_on_the_same_tokens_of_its_trial(factorial):
    trials = _trials(factorial)
    tokens = trials.group_by("budget", "trial").agg(pl.col("real_tokens").n_unique(), pl.col("seed").n_unique())
    assert tokens["real_tokens"].to_list() == [1] * 6 and tokens["seed"].to_list() == [1] * 6
    params = trials.group_by("levels_model", maintain_order=True).agg(pl.col("params").first())["params"].to_list()
    assert params[0] < params[1] < params[2]  # the sizes differ as the config says


def test_the_two_way_anova_of_log_pe_matches_statsmodels_and_a_hand_computed_generalized_eta_squared(factorial):
    trials = _trials(factorial).with_columns(pl.col("pe").log())  # PE is tested on its log scale
    stats = json.loads((factorial / "results/analysis/stats.json").read_text())
    effects = {e["effect"]: e for e in stats["anova"]["pe"]["effects"]}
    assert list(effects) == ["budget", "model", "budget × model"]
    table = (
        AnovaRM(
            trials.select("trial", "budget", "levels_model", "pe").to_pandas(),
            depvar="pe",
            subject="trial",
            within=["budget", "levels_model"],
        )
        .fit()
        .anova_table
    )
    for ours, theirs in zip(effects.values(), table["F Value"]):
        assert ours["F"] == pytest.approx(theirs, rel=1e-8)
    # η²G (Olejnik & Algina 2003), all factors within: SS_effect / (SS_effect + SS_subjects + every error SS)
    y = np.array(
        [
            [
                trials.filter((pl.col("trial") == t) & (pl.col("budget") == b) & (pl.col("levels_model") == m))["pe"][0]
                for b in (1000, 2000)
                for m in MODELS
            ]
            for t in (1, 2, 3)
        ]
    ).reshape(3, 2, 3)
    grand = y.mean()
    cell, subject = y.mean(axis=0), y.mean(axis=(1, 2))
    ss_b = 3 * 3 * ((y.mean(axis=(0, 2)) - grand) ** 2).sum()
    ss_m = 3 * 2 * ((y.mean(axis=(0, 1)) - grand) ** 2).sum()
    ss_bm = 3 * ((cell - y.mean(axis=(0, 2))[:, None] - y.mean(axis=(0, 1))[None, :] + grand) ** 2).sum()
    ss_s = 6 * ((subject - grand) ** 2).sum()
    ss_total = ((y - grand) ** 2).sum()
    error_total = ss_total - ss_b - ss_m - ss_bm - ss_s
    assert effects["budget × model"]["eta2_g"] == pytest.approx(ss_bm / (ss_bm + ss_s + error_total), rel=1e-9)
    assert effects["model"]["eta2_g"] == pytest.approx(ss_m / (ss_m + ss_s + error_total), rel=1e-9)


def test_the_report_is_written_over_the_design(factorial):
    page = (factorial / "results/report.html").read_text()
    assert "crossed with model: tiny, small, base" in page
    assert "model tiny, 1K" in page and "model base, 2K" in page  # conditions as cells
    assert "The budget × model interaction on log PE" in page and "Simple effects of the budget" in page
    assert "RM-ANOVA on log values" in page  # the scale each test used, said in the report
    stats = json.loads((factorial / "results/analysis/stats.json").read_text())
    assert [r["series"] for r in stats["simple_effects"] if r["dv"] == "pe"] == [f"model={m}" for m in MODELS]


def test_the_plan_and_the_progress_lines_name_the_cells(factorial):
    terminal = (factorial / "terminal.txt").read_text()
    assert "tokenwatt plan: 2 budgets × 3 model levels × 3 trials = 18 trials" in terminal
    assert "▶ model small, 1K · trial" in terminal and "study: 18 of 18 trials done." in terminal


def test_an_unchanged_factorial_rerun_has_nothing_to_do(factorial):
    assert planned_jobs(factorial, *MODEL_SIZE, env=FRESH_HASH_SEED) == {}


def _with(work, text):
    (work / "change.yaml").write_text(text)
    return [*MODEL_SIZE, "change.yaml"]


def test_adding_a_model_level_runs_only_its_trials_then_the_analysis(factorial):
    change = _with(factorial, "design: {model: {wider: {preset: llama-tiny, overrides: {hidden_size: 48}}}}")
    assert planned_jobs(factorial, *change) == {"train_trial": 6, **ANALYSIS}


def test_a_model_level_with_its_own_tokenizer_also_makes_its_tokenizer_chunks_and_subsets(factorial):
    change = _with(factorial, "design: {model: {own: {preset: llama-tiny, tokenizer: {vocab_size: 280}}}}")
    assert planned_jobs(factorial, *change) == {"tokenizer": 1, "chunk": 2, "subset": 6, "train_trial": 6, **ANALYSIS}


def test_adding_a_trial_runs_it_in_every_cell(factorial):
    change = _with(factorial, "study: {name: tiny test study, seed: 11, budgets: [1000, 2000], trials: 4}")
    assert planned_jobs(factorial, *change) == {"subset": 2, "train_trial": 6, **ANALYSIS}


def test_a_precision_factor_gets_a_device_profile_per_level(factorial):
    change = _with(factorial, "design: {precision: [fp32, bf16-mixed]}")
    jobs = planned_jobs(factorial, *change)
    # new paths for every trial (one more level in each), and a profile per precision
    assert jobs["device_profile"] == 2 and jobs["train_trial"] == 36


def test_a_model_level_with_its_own_tokenizer_trains_on_its_own_chunks_of_the_same_documents(tmp_path):
    work = clone(tmp_path)
    # one budget and one trial per level: what is asked is which tokenizer each level's trial trained with
    (work / "own.yaml").write_text(
        "study: {name: own tokenizer, seed: 11, budgets: [1000], trials: 1}\n"
        "design: {model: {shared: {preset: llama-tiny}, own: {preset: llama-tiny, tokenizer: {vocab_size: 280}}}}\n"
    )
    snakemake(work, "--configfile", ".test/config/config.yaml", "own.yaml", "--cores", "2", "--resources", "gpu=1")
    assert (work / "results/data/tok=own/tokenizer").is_dir() and (
        work / "results/subsets/tok=own/b1000/t1.json"
    ).exists()
    trials = _trials(work)
    vocab = dict(trials.group_by("levels_model").agg(pl.col("tokenizer_vocab_size").first()).iter_rows())
    assert vocab["own"] < vocab["shared"] <= 300
    assert (work / "results/report.html").exists()


def _trial_threads(work, *args):
    # Snakemake's own logger prints each job's block in a dry run; the default profile's rich logger shows the table only.
    out = snakemake(
        work, "-n", "--workflow-profile", "none", "--cores", "2", "--configfile", ".test/config/config.yaml", *args
    ).stdout
    blocks = [b for b in out.split("\nrule ")[1:] if b.startswith("train_trial:")]
    # Snakemake prints a job's threads only when there are more than one
    return {int(line.split(":")[1]) for b in blocks for line in b.splitlines()[:12] if "threads:" in line} or {1}


def test_a_metered_trial_reserves_every_local_core_so_nothing_runs_beside_it(tmp_path):
    work = clone(tmp_path / "work")
    assert _trial_threads(work) == {2}
    (work / "shared.yaml").write_text("train: {run_alone: false}\n")
    assert _trial_threads(work, "shared.yaml") == {1}  # asked otherwise: train.threads
