import functools
import os

# One thread per test process for torch, OpenMP and BLAS, set before any of them is imported: the suite runs in
# parallel workers, two per core (make test), and a worker whose libraries each start a pool per core oversubscribes
# the machine and runs slower than the suite in series. Snakemake and the jobs it starts inherit them (a trial still
# sets its own torch threads, train.threads); polars and tokenizers keep their own pools, as a user's jobs do.
for _pool in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[_pool] = "1"
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

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
def shared(tmp_path_factory) -> Path:
    """The folder that every parallel worker of this test run shares (pytest-xdist gives each worker its own base
    folder inside one run folder): what is built once for the run lives there."""
    base = tmp_path_factory.getbasetemp()
    return (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "shared"


@pytest.fixture(scope="session")
def built(shared, tmp_path_factory):
    """``built(name, build)``: this worker's own copy of a study that ``build(folder)`` makes once for the whole test
    run (workflow_helpers.built_once): tests change their copy and run Snakemake in it, never another worker's."""
    from workflow_helpers import built_once, own_copy

    def copy(name: str, build) -> Path:
        return own_copy(built_once(shared, name, build), tmp_path_factory.mktemp(name))

    return copy


@pytest.fixture(scope="session")
def cache(shared):
    """Snakemake's between-workflow output cache, one for the run: the study stores its trials in it and a second
    clone fetches them, whichever worker each runs in."""
    folder = shared / "output-cache"
    folder.mkdir(parents=True, exist_ok=True)
    return {"SNAKEMAKE_OUTPUT_CACHE": str(folder)}


@pytest.fixture(scope="session")
def study(built, cache):
    """The tiny study run locally once, with the between-workflow cache on (targets before --cache)."""
    from workflow_helpers import run_tiny_study

    return built("study", functools.partial(run_tiny_study, env=cache))


@pytest.fixture(scope="session")
def released(study, built):
    """A project pinned to tokenwatt v1.0.0 on GitHub (workflow_helpers.publish), run to its report once per test run
    and copied for each worker with the repository it was fetched from (tests release new tags to it) and its source
    cache. Its rules are renamed, and its trials are restored from the shared study's store all the same: an entry is
    keyed by tokenwatt's name for the rule."""
    from types import SimpleNamespace

    from workflow_helpers import pin_release, publish, reach, snakemake

    def run(base):
        _, env = publish(base)
        project = base / "project"
        project.mkdir()
        (project / "config.yaml").write_text((ROOT / ".test" / "config" / "config.yaml").read_text())
        pin_release(project, "v1.0.0")
        proc = snakemake(
            project,
            "--cores",
            "2",
            "--resources",
            "gpu=1",
            env={**env, "TOKENWATT_STORE": str(study / "results/store")},
        )
        (base / "terminal.txt").write_text(proc.stdout + proc.stderr)

    base = built("released", run)
    env = {**reach(base), "TOKENWATT_STORE": str(study / "results" / "store")}
    return SimpleNamespace(
        repo=base / "repo", project=base / "project", env=env, terminal=(base / "terminal.txt").read_text()
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The slowest tests first (the SLURM ones, then those marked long), the unit tests last: parallel workers then end together, the quick tests filling the
    gaps, instead of one worker finishing a long study alone at the end (a stable sort: the order within each kind
    stays the files' own). A module whose tests read what one fixture builds once (a study through Snakemake, a
    two-rank trial, an analysed report) is one xdist_group, run by one worker: spread over several, every worker but
    the builder waited for it, idle (a quarter of the workers' time at 101e0b5: docs/benchmarks.md), or built its own
    copy of a module fixture. With --dist loadgroup, each test of an xdist_group is named for its group, as
    pytest-xdist 3.8 means to: it writes the name to ``item._nodeid``, which pytest 9.2 (pinned beside it) does not
    read, so no group had ever held together (the SLURM tests ran their shared cancelled study twice, and each worker
    took the cluster down at its end). pytest 9.2 keeps a node's id in ``item._id``; no public setter exists."""
    if getattr(config.option, "loadgroup", False):
        from _pytest.nodeid import coerce_node_id

        for item in items:
            marks = item.iter_markers("xdist_group")
            groups = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default")) for m in marks})
            if groups and "@" not in item.nodeid:
                item._id = coerce_node_id(f"{item.nodeid}@{'_'.join(groups)}")

    def kind(item: pytest.Item) -> int:
        marks = ("cluster", "long", "workflow")
        return next((i for i, mark in enumerate(marks) if item.get_closest_marker(mark)), len(marks))

    items.sort(key=kind)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """The SLURM that a cluster test brought up for this run (test_cluster.py's ``slurm``) taken down once, in the
    process that distributed the tests to workers, after every worker has ended: a worker's own end would take it
    from under another's jobs. (A run without workers takes it down at its session's end, in the fixture.)"""
    if session.config.pluginmanager.has_plugin("dsession"):
        from workflow_helpers import cluster_down

        cluster_down(session.config._tmp_path_factory.getbasetemp() / "shared")


@pytest.fixture
def installed_bible(tmp_path, monkeypatch):
    """A distribution installed where importlib.metadata looks (a folder put first on sys.path), as a wheel like
    pythonbible's leaves it: a Python module holding its text in one long string beside short titles, a plain-text
    file, and the dist-info with METADATA and RECORD."""
    site = tmp_path / "site"
    package = site / "tinybible"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "plain_text.py").write_text(
        'TITLES = {"gen": "Genesis", "exo": "Exodus"}\n'
        'text = """In the beginning the earth was without form.\nAnd there was light.\n\nAnd it was good."""\n'
    )
    (package / "notes.txt").write_text("A note on the text.\nA second note.\n")
    info = site / "tinybible-0.0.2.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.4\nName: tinybible\nVersion: 0.0.2\nLicense-Expression: MIT\n")
    files = ["tinybible/__init__.py", "tinybible/plain_text.py", "tinybible/notes.txt", f"{info.name}/METADATA"]
    (info / "RECORD").write_text("".join(f"{f},,\n" for f in [*files, f"{info.name}/RECORD"]))
    monkeypatch.syspath_prepend(str(site))
    return site
