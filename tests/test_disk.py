"""The disk a plan needs, derived from what drives it: the corpus, each trial's length and power trace, the selection
levels; held to the tiny study's measured folder, and never a flat constant that refuses a study that fits."""

import copy

import pytest
import yaml
from test_design import DEFAULT, SCHEMA
from tokenwatt.analysis.products import products_of
from tokenwatt.plan import disk, startup
from tokenwatt.plan.config import validate_config
from tokenwatt.plan.presets import PRESETS
from tokenwatt.plan.study import Study
from workflow_helpers import ROOT

SCRIPTS = ROOT / "workflow" / "scripts"
H16 = {**PRESETS["llama-tiny"], "hidden_size": 16, "intermediate_size": 44, "num_hidden_layers": 1}
H16 |= {"num_attention_heads": 2, "num_key_value_heads": 1}


def _study(config: dict) -> Study:
    config = validate_config(copy.deepcopy(config), SCHEMA)
    return Study(config, products_of(config), ROOT / "workflow", SCRIPTS)


@pytest.mark.parametrize(
    "sizes,vocab,recorded",
    [(H16, 1024, 35_696), (PRESETS["llama-tiny"], 1024, 84_128), (PRESETS["tinyllama-1.1b"], 32_000, 1_100_048_384)],
)
def test_a_llamas_parameters_are_counted_from_its_sizes_as_its_trials_record_them(sizes, vocab, recorded):
    assert disk.llama_parameters(sizes, vocab) == recorded


def test_a_trials_length_comes_from_the_pilot_then_its_flops_then_the_plans_guess():
    assert disk.trial_seconds(1e6, 2e6, "cpu", {"tokens_per_s": 1e4, "fixed_s": 5}) == 200 + 5 + disk.FIXED_SECONDS
    assert disk.trial_seconds(1e6, 2e6, "cpu", {}) == 6 * 1e6 * 2e6 / 1e9 + disk.FIXED_SECONDS
    assert disk.trial_seconds(1e6, 2e6, "cuda", {}) == 6 * 1e6 * 2e6 / 1e12 + disk.FIXED_SECONDS
    assert disk.trial_seconds(None, 2e6, "cuda", {}) == disk.RUNTIME_UNKNOWN_MIN * 60


def test_a_longer_trial_and_a_denser_power_trace_need_more_room():
    short, long = disk.trial_bytes(100, 0.1), disk.trial_bytes(10_000, 0.1)
    assert long - short == 2 * (10_000 - 100) / 0.1 * disk.POWER_SAMPLE_BYTES
    assert disk.trial_bytes(100, 0.05) > short


def test_the_data_stage_counts_only_when_the_corpus_job_runs_and_grows_with_each_selection_level():
    plan = lambda planned, levels: disk.disk_plan(planned, 1_000_000, levels, [], {}, 0.1)  # noqa: E731
    assert plan({}, 0).data == 0
    assert plan({"corpus": 1}, 0).data == 3_000_000
    assert plan({"corpus": 1}, 2).data == pytest.approx(3_000_000 * (1 + 2 * disk.LEVEL_SHARE))


def test_adding_a_selection_level_to_a_finished_data_stage_is_charged_its_share_per_chunk_job():
    added = disk.disk_plan({"chunk": 2}, 1_000_000, 3, [], {}, 0.1)
    assert added.data == pytest.approx(3_000_000 * 2 * disk.LEVEL_SHARE)


def test_the_margin_scales_with_the_study_instead_of_a_flat_constant():
    small = disk.disk_plan({"corpus": 1}, 40_000, 0, [(10_000, 2_000, "cpu")], {}, 0.05)
    large = disk.disk_plan({"corpus": 1}, 40_000_000, 0, [(10_000, 2_000, "cpu")] * 500, {}, 0.05)
    assert small.margin < 20e6 < large.margin
    assert large.margin < (large.data + large.trials + large.other) / 2  # a share, not a multiple


def test_the_embedded_default_is_planned_at_tens_of_megabytes_not_hundreds():
    study = _study(DEFAULT)
    planned = {"corpus": 1, "device_profile": 1, "subset": 3, "train_trial": len(study.layout.expected)}
    total = startup.disk_plan_of(study, planned).total
    assert 16e6 < total < 60e6


def test_a_tinyllama_study_plans_each_trial_by_its_parameters_on_a_gpu():
    config = copy.deepcopy(DEFAULT)
    config["study"] |= {"budgets": [2_000_000], "trials": 2}
    config["model"] = {"source": "config", "preset": "tinyllama-1.1b"}
    config["tokenizer"] |= {"source": "train", "vocab_size": 32_000}
    config["train"] |= {"device": "cuda", "epochs": 1}
    plan = startup.disk_plan_of(_study(config), {"train_trial": 1})
    seconds = 6 * 1_100_048_384 * 2_000_000 / 1e12 + disk.FIXED_SECONDS  # 3.7 h: TinyLlama took 2.4 h on an A10G
    checkpoint = 12 * 1_100_048_384  # fp32 weights and AdamW's two moments: 13.2 GB, the issue's ~13 GB
    checkpoint *= 2  # the new file beside the last one while it is saved
    assert plan.trials == disk.trial_bytes(seconds, config["meter"]["interval_s"]) + checkpoint


def test_kept_checkpoints_are_charged_per_trial_and_a_removed_ones_once():
    config = copy.deepcopy(DEFAULT)
    config["model"] = {"source": "config", "preset": "tinyllama-1.1b"}
    config["tokenizer"] |= {"source": "train", "vocab_size": 32_000}
    removed = startup.disk_plan_of(_study(config), {"train_trial": 3}).trials
    config["train"] |= {"keep_checkpoint": True}
    kept = startup.disk_plan_of(_study(config), {"train_trial": 3}).trials
    assert kept - removed == 2 * 12 * 1_100_048_384


@pytest.mark.workflow
def test_the_tiny_studys_plan_bounds_its_measured_folder_and_fits_a_59_mb_disk(study):
    config = yaml.safe_load((study / ".test" / "config" / "config.yaml").read_text())
    tiny = _study({**config, "results": str(study / "results")})
    planned = {"corpus": 1, "device_profile": 1, "subset": 2, "train_trial": len(tiny.layout.expected)}
    plan = startup.disk_plan_of(tiny, planned)
    measured = sum(f.stat().st_size for f in (study / "results").rglob("*") if f.is_file())
    assert measured <= plan.total <= 59e6, (measured, plan.describe())


def test_a_hub_corpus_is_said_not_to_be_counted_rather_than_guessed():
    config = copy.deepcopy(DEFAULT)
    config["corpus"] = {"source": "hf", "hf": {"name": "roneneldan/TinyStories", "max_documents": 1000}}
    plan = startup.disk_plan_of(_study(config), {"corpus": 1})
    assert plan.data == 0 and "not counted: the Hub corpus's data stage" in plan.describe()
