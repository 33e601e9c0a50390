"""What the plan checks before any job: budgets the corpus cannot fill (refused once the chunks exist, warned of as an
estimate before), too few trial ids for a paired ratio, and a config error named in the user's file, not a rule
file's line; the dry runs as a user types them."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import polars as pl
import pytest
import yaml
from test_design import DEFAULT, SCHEMA
from tokenwatt.analysis.curves.censored import MIN_EXACT_PAIRS
from tokenwatt.analysis.products import products_of
from tokenwatt.common.files import write_parquet
from tokenwatt.data.chunking import write_chunk_record
from tokenwatt.plan import capacity, startup
from tokenwatt.plan.config import validate_config
from tokenwatt.plan.study import Study
from workflow_helpers import OVERLAYS, ROOT, TINY, clone, snakemake

SCRIPTS = ROOT / "workflow" / "scripts"


def _config(folder: Path, budgets=(10_000, 50_000), trials=3, documents=4000) -> dict:
    config = copy.deepcopy(DEFAULT)
    config["results"] = str(folder / "results")
    config["study"] |= {"budgets": list(budgets), "trials": trials}
    config["corpus"]["synthetic"]["documents"] = documents
    return config


def _study(config: dict) -> Study:
    config = validate_config(copy.deepcopy(config), SCHEMA)
    return Study(config, products_of(config), ROOT / "workflow", SCRIPTS)


def _chunks_on_disk(results: Path, config: dict, tokens: int, chunks: int = 100) -> None:
    """The data stage's files the check reads, as its jobs write them: the corpus job's record, then the training
    chunks (chunk.py: n_real per chunk)."""
    corpus = validate_config(copy.deepcopy(config), SCHEMA)["corpus"]
    data = results / "data"
    data.mkdir(parents=True, exist_ok=True)
    record = {"source": corpus["source"], "documents": 4000, "settings": corpus[corpus["source"]]}
    (data / "corpus_source.json").write_text(json.dumps(record))
    n_real = [tokens // chunks] * (chunks - 1) + [tokens - (tokens // chunks) * (chunks - 1)]
    write_parquet(data / "chunks_train.parquet", pl.DataFrame({"chunk_id": range(chunks), "n_real": n_real}))
    study = _study(config)
    write_chunk_record(
        data / "chunks_train.settings.json",
        data / "chunks_train.parquet",
        capacity.chunk_settings(study.config, study.design, study.design.cells[0]),
    )


def test_a_budget_above_the_tokens_of_the_chunks_on_disk_is_refused_naming_the_keys(tmp_path):
    config = _config(tmp_path)
    _chunks_on_disk(tmp_path / "results", config, 30_000)
    why = startup.corpus_refusal(_study(config))
    assert why is not None and why.startswith("tokenwatt cannot run this plan:")
    assert "study.budgets: budget 50,000 needs 50,000 real training tokens, and the training chunks hold 30,000" in why
    assert "raise corpus.synthetic.documents (now 4,000)" in why
    assert startup.refusal(_study(config), {"subset": 6}, True, []) == why  # a real run's start checks too


def test_chunks_of_another_corpus_say_nothing_of_this_one(tmp_path):
    config = _config(tmp_path)
    _chunks_on_disk(tmp_path / "results", config, 30_000)
    config["corpus"]["synthetic"]["documents"] = 8000  # the data stage reruns: its new chunks are not counted yet
    assert startup.corpus_refusal(_study(config)) is None


def test_chunks_of_other_tokenizer_or_chunk_settings_are_warned_of_not_refused(tmp_path):
    config = _config(tmp_path, documents=600)  # the estimate, about 41 600 tokens, is below budget 50 000
    _chunks_on_disk(tmp_path / "results", config, 30_000)
    config["tokenizer"]["vocab_size"] = 2 * config["tokenizer"]["vocab_size"]
    config["chunk"]["length"] = 2 * config["chunk"]["length"]
    assert startup.corpus_refusal(_study(config)) is None
    [warning] = [w for w in startup.design_warnings(_study(config)) if w.startswith("study.budgets")]
    assert "an ESTIMATE" in warning


LEVELS = {"plain": "none", "dedup": {"near_dup": {}}}


def _settings_of_chunks(config: dict) -> dict[str, dict]:
    """The chunk rule's settings param of each chunk file: the study's training chunks without design.selection, and
    with it (the config's own levels over LEVELS) the eval chunks every level shares and each level's training
    chunks."""

    def of(config: dict, level: str | None, split: str) -> dict:
        study = _study(config)
        return capacity.chunk_job_settings(study.config, study.design, "", level, split)

    design, selection = config.get("design", {}), config.get("selection", {})
    plain = {  # selection.eval_filters is design.selection's alone
        **config,
        "design": {k: v for k, v in design.items() if k != "selection"},
        "selection": {k: v for k, v in selection.items() if k != "eval_filters"},
    }
    levels = {**config, "design": _merged({"selection": LEVELS}, design)}
    return {
        "train": of(plain, None, "train"),
        "eval": of(levels, None, "eval"),
        **{level: of(levels, level, "train") for level in LEVELS},
    }


@pytest.mark.parametrize(
    "change,changed",
    [
        # near-duplicate removal shapes no chunks of a study without design.selection, and only a level's that takes it
        ({"selection": {"near_dup": {"threshold": 0.5}}}, {"dedup"}),
        ({"selection": {"eval_filters": {"min_words": 5}}}, {"eval"}),
        ({"split": {"decontaminate": {"containment": 0.5}}}, {"train", "plain", "dedup"}),
        # a level's order: its order step reads the chunked documents, it does not change them
        ({"design": {"selection": {"dedup": {"order": "as_read"}}}}, set()),
        ({"chunk": {"length": 32}}, {"train", "eval", "plain", "dedup"}),
    ],
)
def test_a_chunk_jobs_settings_name_what_shapes_its_chunks_and_nothing_else(tmp_path, change, changed):
    """A change to the chunk rule's settings param reruns those chunks and every trial on them: it names only what
    shapes them, and the record it becomes, which the plan compares with the config now, names all of it."""
    before = _settings_of_chunks(_config(tmp_path))
    after = _settings_of_chunks(_merged(_config(tmp_path), change))
    assert {name for name in before if before[name] != after[name]} == changed


def test_before_the_chunks_exist_a_budget_above_the_corpus_estimate_is_warned_of_as_an_estimate(tmp_path):
    small = _config(tmp_path, documents=600)  # 500 training stories: about 41 600 tokens
    [warning] = [w for w in startup.design_warnings(_study(small)) if w.startswith("study.budgets")]
    assert "budget 50,000 needs 50,000 real training tokens, likely more than the corpus holds: about 41,600" in warning
    assert "an ESTIMATE from corpus.synthetic.documents" in warning
    assert startup.corpus_refusal(_study(small)) is None  # an estimate warns, never refuses
    assert not [w for w in startup.design_warnings(_study(_config(tmp_path))) if w.startswith("study.budgets")]


def test_the_estimate_of_the_default_corpus_is_near_what_its_chunks_held():
    tokens, _ = capacity.estimated_tokens(validate_config(copy.deepcopy(DEFAULT), SCHEMA), [])
    assert tokens == pytest.approx(324_388, rel=0.01)  # the default study's chunks_train.parquet, 2026-12


@pytest.mark.parametrize("trials,warned", [(2, True), (3, False)])
def test_fewer_trial_ids_than_a_paired_ratio_needs_are_warned_of(tmp_path, trials, warned):
    warnings = startup.design_warnings(_study(_config(tmp_path, trials=trials)))
    said = [w for w in warnings if w.startswith("study.trials")]
    assert bool(said) == warned
    if warned:
        assert "needs at least 3 trial ids" in said[0] and "set study.trials to 3 or more" in said[0]


def test_the_plans_least_trial_ids_are_the_paired_ratios():
    assert startup.MIN_PAIRED_TRIALS == MIN_EXACT_PAIRS


# --- as a user types them: snakemake -n with the checkout's Snakefile, in a folder of its own
def _dry_run(folder: Path, config: dict) -> tuple[int, str]:
    (folder / "study.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    proc = snakemake(
        folder, "-s", str(ROOT / "workflow" / "Snakefile"), "--configfile", "study.yaml", "-n", check=False
    )
    return proc.returncode, proc.stdout + proc.stderr


def _tiny_dry_run(work: Path, budgets: list[int]) -> tuple[int, str]:
    """`snakemake -n` on the tiny study with other budgets, as a user adds a config file over it."""
    (work / "budgets.yaml").write_text(yaml.safe_dump({"study": {"budgets": budgets}}))
    proc = snakemake(work, "-n", *TINY, "budgets.yaml", check=False)
    return proc.returncode, proc.stdout + proc.stderr


@pytest.mark.workflow
def test_a_dry_run_refuses_a_budget_above_the_tokens_the_chunk_job_recorded(tmp_path):
    work = clone(tmp_path)
    snakemake(work, *TINY, "--cores", "1", "results/data/chunks_train.parquet")  # the data stage up to the chunks
    held = json.loads((work / "results/data/chunks_train.settings.json").read_text())["real_tokens"]
    code, out = _tiny_dry_run(work, [1000, held + 1])
    assert code != 0 and "tokenwatt cannot run this plan:" in out
    asked = f"budget {held + 1:,} needs {held + 1:,} real training tokens"
    assert f"study.budgets: {asked}, and the training chunks hold {held:,}" in out
    assert "raise corpus.synthetic.documents (now 120)" in out
    assert "Job stats" not in out and "Traceback" not in out and ".smk" not in out  # before any job is planned


@pytest.mark.workflow
def test_before_the_chunks_exist_a_dry_run_warns_of_a_budget_above_the_estimate_and_plans_it(tmp_path):
    code, out = _tiny_dry_run(clone(tmp_path), [1000, 50_000])
    assert code == 0 and "Job stats" in out
    assert "study.budgets: budget 50,000 needs 50,000 real training tokens, likely more than the corpus holds" in out
    assert "an ESTIMATE" in out and "the plan checks it exactly once the chunks exist" in out


@pytest.mark.workflow
def test_a_dry_run_names_the_users_config_file_and_line_and_no_rule_file(tmp_path):
    config = _config(tmp_path)
    config["study"]["budgetz"] = 3
    code, out = _dry_run(tmp_path, config)
    line = next(
        i for i, text in enumerate(yaml.safe_dump(config, sort_keys=False).splitlines(), 1) if "budgetz" in text
    )
    assert (
        code != 0 and f"study.yaml line {line}: study.budgetz: not a key of study (did you mean study.budgets?)" in out
    )
    assert "common.smk" not in out and "WorkflowError" not in out


# --- the plan's time for every shipped config, and what a node that only submits is told
def _merged(base: dict, over: dict) -> dict:
    """``over`` merged into ``base`` mapping by mapping, as Snakemake merges config files."""
    out = dict(base)
    for key, value in over.items():
        out[key] = _merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def _shipped_study(name: str) -> Study:
    """A shipped config as `snakemake --configfile config/NAME` plans it: over the embedded default (and an overlay
    over its study), with weights not downloaded yet let through as a dry run lets them."""
    read = lambda n: yaml.safe_load((ROOT / "config" / n).read_text())  # noqa: E731
    config = read("config.yaml")
    for part in [OVERLAYS[name], name] if name in OVERLAYS else [name]:
        config = _merged(config, read(part))
    config = validate_config(config, SCHEMA, downloads=[])
    return Study(config, products_of(config), ROOT / "workflow", SCRIPTS)


@pytest.mark.parametrize("name", sorted(p.name for p in (ROOT / "config").glob("*.yaml")))
def test_every_shipped_config_plans_a_time_or_says_how_to_measure_it(name):
    study = _shipped_study(name)
    [time] = [line for text in startup.preview(study)[0] for line in text.splitlines() if line.startswith("Time:")]
    if startup.trains_on_gpu(study) and not study.pilot.get("tokens_per_s_range"):
        assert "bash benchmarks/gpu_validate.sh" in time  # no GPU has measured it: the command that does
    else:
        assert time.startswith("Time: ~") and "ESTIMATE" in time, time


def test_the_reference_study_plans_the_docs_range_and_its_trials_time_limits_follow_the_slow_end():
    study = _shipped_study("paper.yaml")
    [time] = [line for line in startup.preview(study)[0][0].splitlines() if line.startswith("Time:")]
    assert "~182.3 h to ~341.5 h" in time and "RANGE ESTIMATED without a measurement" in time
    [limits] = startup.runtime_lines(study)
    assert "103–367 min" in limits  # docs/gpu.md: a 2M-token trial 2.1–3.9 h, its limit 3.4–6.1 h


def test_a_cluster_run_without_a_pace_is_warned_that_every_trial_gets_a_flat_limit():
    [warning] = startup.runtime_lines(_shipped_study("paper-model-size.yaml"))
    assert warning.startswith("WARNING: every trial's time limit (runtime, SLURM's --time) is a flat 240 min")


def test_a_node_that_only_submits_is_not_told_this_machine_cannot_run_the_trials(tmp_path):
    config = _config(tmp_path)
    config["meter"] |= {"kind": "rapl", "rapl_root": str(tmp_path / "no-powercap")}  # a meter this machine lacks
    study = _study(config)
    assert any("meter.kind is rapl" in w for w in startup.dry_run_warnings(study))
    assert not any("meter.kind" in w for w in startup.dry_run_warnings(study, submits_only=True))


def test_the_executor_the_command_line_asked_for_is_read_before_snakemake_hands_it_over():
    class Args:
        executor = "slurm"

    def args_to_api(args):  # noqa: ARG001 - the name and local Snakemake's command line runs the workflow under
        return startup.intended_executor()

    assert args_to_api(Args()) == "slurm" and startup.intended_executor() is None
    assert not startup.submits_only("local") and not startup.submits_only(None)
    pytest.importorskip("snakemake_executor_plugin_slurm")
    assert startup.submits_only("slurm")
