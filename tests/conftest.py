import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def grammar():
    from tokenwatt.data.corpus import load_grammar

    return load_grammar(ROOT / "resources" / "story_grammar.json")


@pytest.fixture(scope="session")
def small_tokenizer(grammar):
    """A BPE trained on a few hundred synthetic stories; shared because training takes ~1 s."""
    from tokenwatt.data.corpus import synthetic_corpus
    from tokenwatt.data.tokenizer import train_bpe

    return train_bpe(synthetic_corpus(grammar, 300, seed=1)["text"].to_list(), vocab_size=400)


@pytest.fixture(scope="session")
def cache(tmp_path_factory):
    return {"SNAKEMAKE_OUTPUT_CACHE": str(tmp_path_factory.mktemp("output-cache"))}


@pytest.fixture(scope="session")
def study(tmp_path_factory, cache):
    """The tiny study run locally once, with the between-workflow cache on (targets before --cache)."""
    from workflow_helpers import TINY, clone, snakemake

    work = clone(tmp_path_factory.mktemp("study"))
    proc = snakemake(work, *TINY, "--cores", "2", "--resources", "gpu=1", "--cache", env=cache)
    (work / "terminal.txt").write_text(proc.stdout + proc.stderr)  # what the user saw
    return work


@pytest.fixture(scope="session")
def released(study, tmp_path_factory):
    """A project pinned to tokenwatt v1.0.0 on GitHub (workflow_helpers.publish), run once to its report. Its rules
    are renamed, and its trials are restored from the shared study's store all the same: an entry is keyed by
    tokenwatt's name for the rule."""
    from types import SimpleNamespace

    from workflow_helpers import pin_release, publish, snakemake

    base = tmp_path_factory.mktemp("released")
    repo, env = publish(base)
    env["TOKENWATT_STORE"] = str(study / "results" / "store")
    project = base / "project"
    project.mkdir()
    (project / "config.yaml").write_text((ROOT / ".test" / "config" / "config.yaml").read_text())
    pin_release(project, "v1.0.0")
    proc = snakemake(project, "--cores", "2", "--resources", "gpu=1", env=env)
    return SimpleNamespace(repo=repo, project=project, env=env, terminal=proc.stdout + proc.stderr)
