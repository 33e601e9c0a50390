"""Data selection as a factor end to end through Snakemake: config/selection.yaml's three levels on the tiny data, what
a changed filter threshold reruns, and a level that leaves too little to train on."""

import json

import polars as pl
import pytest
from tokenwatt.selection.near_dup import shingles
from workflow_helpers import ANALYSIS, clone, copy_of_study, planned_jobs, snakemake

# one worker runs the module's tests, which read the study it builds once (conftest.py)
pytestmark = [pytest.mark.workflow, pytest.mark.xdist_group("selection")]
# The shipped selection study on the tiny study's trials at its smaller budget (what is read is each level's documents,
# records and trials, and what a change reruns); the tiny corpus keeps the study's noise shares.
SELECTION = ["--configfile", "config/selection.yaml", ".test/config/config.yaml", "one-budget.yaml"]
ONE_BUDGET = "study: {name: selection, seed: 11, budgets: [1000], trials: 3}\n"
LEVELS = ["raw", "dedup", "dedup-filter"]


def _with_overlay(work):
    (work / "one-budget.yaml").write_text(ONE_BUDGET)
    return work


@pytest.fixture(scope="module")
def selected(built):
    return built(
        "selection",
        lambda folder: snakemake(_with_overlay(clone(folder)), *SELECTION, "--cores", "2", "--resources", "gpu=1"),
    )


def _docs(work, level):
    return pl.read_parquet(work / f"results/data/sel={level}/docs_train.parquet")


def test_every_level_trains_every_trial_and_each_step_says_what_it_removed(selected):
    trials = pl.read_parquet(selected / "results/analysis/trials.parquet")
    assert trials.group_by("levels_selection", maintain_order=True).len().rows() == [(level, 3) for level in LEVELS]
    kept = [_docs(selected, level).height for level in LEVELS]
    assert kept[0] > kept[1] > kept[2]  # near-duplicates, then boilerplate and garbled documents, removed
    record = json.loads((selected / "results/data/sel=dedup-filter/filter.json").read_text())
    assert record["removed"] == kept[1] - kept[2] and record["examples"][0]["why"].startswith("max_")
    assert record["energy"]["energy_j"] > 0 and record["level"] == "dedup-filter"  # the record names its level
    assert json.loads((selected / "results/data/decontaminate.json").read_text())["level"] is None  # every level's


def test_no_level_trains_on_an_eval_document_or_a_copy_of_one(selected):
    settings = json.loads((selected / "results/data/decontaminate.json").read_text())["settings"]
    evaluation = pl.read_parquet(selected / "results/data/docs_eval.parquet")
    eval_sets = [shingles(t, settings["shingle_size"]) for t in evaluation["text"]]
    for level in LEVELS:
        docs = _docs(selected, level)
        assert not set(docs["doc_id"]) & set(evaluation["doc_id"])
        assert all(
            len(shingles(t, settings["shingle_size"]) & e) / len(e) < settings["containment"]
            for t in docs["text"]
            for e in eval_sets
        )


def test_a_changed_filter_threshold_reruns_that_level_from_its_filter_on_and_not_the_tokenizer(selected, tmp_path):
    (selected / "threshold.yaml").write_text(
        "design: {selection: {dedup-filter: {filters: {max_policy_line_fraction: 0.5}}}}\n"
    )
    jobs = planned_jobs(selected, *SELECTION, "threshold.yaml")
    assert jobs == {"select_filter": 1, "chunk": 1, "subset": 3, "train_trial": 3, "selection": 1, **ANALYSIS}


def test_a_level_that_empties_the_training_documents_is_refused_by_name_before_any_training(selected, tmp_path):
    work = _with_overlay(copy_of_study(selected, tmp_path / "strict"))
    (work / "strict.yaml").write_text("design: {selection: {strict: {filters: {min_words: 1000}}}}\n")
    proc = snakemake(work, *SELECTION, "strict.yaml", "--cores", "1", "--resources", "gpu=1", check=False)
    assert proc.returncode != 0
    assert "design.selection level 'strict' leaves no training document" in proc.stdout + proc.stderr
    assert not (work / "results/trials/selection=strict").exists()


def test_every_level_is_scored_on_the_eval_documents_that_pass_the_eval_filters(selected):
    kept = pl.read_parquet(selected / "results/data/docs_eval_kept.parquet")
    record = json.loads((selected / "results/data/eval_filter.json").read_text())
    chunks = pl.read_parquet(selected / "results/data/chunks_eval.parquet")
    assert record["kept"] == kept.height > 0
    assert set(chunks["doc_id"]) == set(kept["doc_id"])


def test_a_changed_eval_filter_reruns_the_eval_chunks_and_every_trial_but_not_the_tokenizer_or_subsets(selected):
    (selected / "eval.yaml").write_text("selection: {eval_filters: {min_words: 5}}\n")
    jobs = planned_jobs(selected, *SELECTION, "eval.yaml")
    assert jobs == {"select_eval": 1, "chunk": 1, "train_trial": 9, "selection": 1, **ANALYSIS}


ORDER = "design: {selection: {dedup: {near_dup: {}, order: {curriculum: {score: words}}}}}\n"


def test_an_order_for_one_level_reruns_its_order_step_and_trials_but_not_its_subsets_or_other_levels(selected):
    (selected / "order.yaml").write_text(ORDER)
    jobs = planned_jobs(selected, *SELECTION, "order.yaml")
    assert jobs == {"select_order": 1, "train_trial": 3, "selection": 1, **ANALYSIS}


def test_a_curriculum_level_trains_its_subsets_shortest_document_first_and_the_report_says_so(selected, tmp_path):
    work = _with_overlay(copy_of_study(selected, tmp_path / "ordered"))
    (work / "order.yaml").write_text(ORDER)
    snakemake(work, *SELECTION, "order.yaml", "--cores", "2", "--resources", "gpu=1")
    trials = pl.read_parquet(work / "results/analysis/trials.parquet")
    assert trials.group_by("levels_selection", maintain_order=True).len().rows() == [(level, 3) for level in LEVELS]
    orders = {
        level: json.loads(p.read_text())["data_order"]
        for level in LEVELS
        for p in (work / f"results/trials/selection={level}").rglob("metrics.json")
    }
    assert orders == {"raw": "shuffled", "dedup": "given", "dedup-filter": "shuffled"}
    ranks = pl.read_parquet(work / "results/data/sel=dedup/order.parquet")
    docs = _docs(work, "dedup").join(ranks, on="doc_id").sort("rank")
    lengths = [len(t.split()) for t in docs["text"]]
    assert ranks.height == _docs(work, "dedup").height and lengths == sorted(lengths)
    report = (work / "results/report.html").read_text()
    assert "Level dedup trains its documents in a curriculum by words, ascending (words: first" in report
