"""The data stages through Snakemake: what a dry run plans, what bad settings are refused with, and the subsets, chunks
and logs of the shared tiny study's data stages (conftest.py's ``study``: the same jobs the `data` target runs)."""

import json

import polars as pl
import pytest
from workflow_helpers import clone, planned_jobs, snakemake

pytestmark = pytest.mark.workflow


def test_dry_run_of_the_default_config_plans_one_subset_per_budget_and_trial(tmp_path):
    jobs = planned_jobs(clone(tmp_path), "data")
    assert jobs == {
        "corpus": 1,
        "normalize": 1,
        "split": 1,
        "decontaminate": 1,
        "tokenizer": 1,
        "chunk": 2,
        "subset": 15,
    }


def _override(work, text):
    (work / "override.yaml").write_text(text)
    return ["--configfile", ".test/config/config.yaml", "override.yaml"]


def test_a_bad_config_fails_before_any_job_with_the_key(tmp_path):
    work = clone(tmp_path)
    proc = snakemake(work, "-n", *_override(work, "study: {name: x, seed: 1, budgets: [-5], trials: 2}"), check=False)
    assert proc.returncode != 0
    assert "study.budgets[0]: -5 is less than the minimum of 1" in proc.stdout + proc.stderr


def test_data_stages_write_nested_subsets_with_exact_counts(study):
    chunks = pl.read_parquet(study / "results/data/chunks_train.parquet")
    n_real = dict(zip(chunks["chunk_id"], chunks["n_real"]))
    for trial in (1, 2, 3):
        small = json.loads((study / f"results/subsets/b1000/t{trial}.json").read_text())
        large = json.loads((study / f"results/subsets/b2000/t{trial}.json").read_text())
        assert large["chunk_ids"][: small["n_chunks"]] == small["chunk_ids"]
        assert large["real_tokens"] == sum(n_real[c] for c in large["chunk_ids"]) >= 2000


def test_eval_chunks_come_from_documents_no_trial_trains_on(study):
    train = pl.read_parquet(study / "results/data/chunks_train.parquet")
    evaluation = pl.read_parquet(study / "results/data/chunks_eval.parquet")
    assert not set(train["doc_id"]) & set(evaluation["doc_id"])


def test_every_rule_wrote_its_log(study):
    for rule in ("corpus", "normalize", "split", "tokenizer", "chunk", "subset"):
        assert list((study / "results/logs").glob(f"{rule}*")), rule


def test_a_budget_larger_than_the_corpus_fails_before_training(tmp_path):
    work = clone(tmp_path)
    override = _override(work, "study: {name: x, seed: 1, budgets: [1000, 90000000], trials: 1}")
    proc = snakemake(work, *override, "--cores", "1", check=False)
    assert proc.returncode != 0
    assert (
        "budget 90000000 needs 90000000 tokens, the corpus has"
        in (work / "results/logs/subset/b90000000/t1.log").read_text()
    )
    assert not (work / "results/trials").exists()


def test_the_rule_graph_renders_with_graphviz(tmp_path):
    import shutil
    import subprocess

    dot = shutil.which("dot")
    assert dot, "Graphviz is needed: `make test` installs it (apt-get install graphviz)"
    graph = snakemake(clone(tmp_path), "--rulegraph").stdout
    svg = subprocess.run([dot, "-Tsvg"], input=graph, capture_output=True, text=True, check=True).stdout
    for rule in ("corpus", "train_trial", "stats", "report"):
        assert rule in svg
