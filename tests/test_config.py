import copy
import errno
import json
import os

import pytest
import yaml
from tokenwatt.common import files
from tokenwatt.data.corpus import CorpusError
from tokenwatt.plan.config import (
    ConfigError,
    checked_config,
    load_schema,
    schema_reference,
    validate_config,
)
from tokenwatt.plan.config_files import duplicate_keys
from workflow_helpers import OVERLAYS
from workflow_helpers import config_error as _error


@pytest.fixture(scope="module")
def schema(root):
    return load_schema(root / "workflow/schemas/config.schema.yaml")


@pytest.fixture
def default(root):
    return yaml.safe_load((root / "config/config.yaml").read_text())


@pytest.fixture
def hub_cache(tmp_path, monkeypatch):
    """An empty local Hugging Face cache; ``hub_cache(repo)`` puts a repository's marker files in it."""
    import huggingface_hub.constants

    cache = tmp_path / "hub"
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))

    def add(repo, names=("config.json", "tokenizer_config.json")):
        sha = "0123456789abcdef0123456789abcdef01234567"
        folder = cache / f"models--{repo.replace('/', '--')}"
        (folder / "refs").mkdir(parents=True, exist_ok=True)
        (folder / "refs" / "main").write_text(sha)
        (folder / "snapshots" / sha).mkdir(parents=True, exist_ok=True)
        for name in names:
            (folder / "snapshots" / sha / name).write_text("{}")

    return add


def test_shipped_configs_validate(root, schema, hub_cache):
    hub_cache("TinyLlama/TinyLlama_v1.1")  # paper*.yaml fine-tune it: downloaded first
    # Overlays are added to a study (--configfile study.yaml overlay.yaml), not run alone: each is checked over its study,
    # merged as Snakemake merges config files (mappings key by key).
    overlays = OVERLAYS
    shipped = sorted(p.name for p in (root / "config").glob("*.yaml") if p.name not in overlays)
    assert {"config.yaml", "paper.yaml", "scaling.yaml", "paper-scaling.yaml", "trajectory.yaml"} <= set(shipped)
    read = lambda name: yaml.safe_load((root / "config" / name).read_text())  # noqa: E731
    for name in shipped:
        validate_config(read(name), schema)
    for overlay, study in overlays.items():
        validate_config(_merged(read(study), read(overlay)), schema)


def _merged(base, over):
    """``over`` merged into ``base`` mapping by mapping, as Snakemake merges --configfile files."""
    out = dict(base)
    for key, value in over.items():
        out[key] = _merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def test_defaults_are_filled_in(schema, default):
    del default["train"]
    cfg = validate_config(default, schema)
    assert cfg["train"]["precision"] == "fp32" and cfg["corpus"]["hf"]["split"] == "train"


def test_negative_budget_names_the_key(schema, default):
    default["study"]["budgets"] = [20000, -5]
    assert "study.budgets[1]: -5 is less than the minimum of 1" in _error(schema, default)


def test_zero_trials_names_the_key(schema, default):
    default["study"]["trials"] = 0
    assert "study.trials: 0 is less than the minimum of 1" in _error(schema, default)


def test_chunk_length_below_two_names_the_key(schema, default):
    default["chunk"]["length"] = 1
    assert "chunk.length: 1 is less than the minimum of 2" in _error(schema, default)


def test_wrong_type_names_the_key(schema, default):
    default["train"]["epochs"] = "three"
    assert "train.epochs: 'three' is not of type 'integer'" in _error(schema, default)


def test_all_problems_are_reported_at_once(schema, default):
    default["study"]["trials"] = 0
    default["chunk"]["length"] = 1
    msg = _error(schema, default)
    assert "study.trials" in msg and "chunk.length" in msg


def test_pretrained_model_needs_a_name(schema, default):
    cfg = copy.deepcopy(default)
    cfg["model"] = {"source": "pretrained"}
    assert "model.name: model.source is pretrained" in _error(schema, cfg)


def test_local_corpus_needs_files(schema, default):
    default["corpus"] = {"source": "local"}
    assert "corpus.local.files" in _error(schema, default)


def test_config_readme_documents_every_schema_key(root, schema):
    """config/README.md carries the reference generated from the schema, so no key goes undocumented."""
    assert schema_reference(schema) in (root / "config/README.md").read_text()


def test_key_order_does_not_change_the_validated_config(schema, default):
    reordered = {k: default[k] for k in reversed(list(default))}
    reordered["train"] = {k: default["train"][k] for k in reversed(list(default["train"]))}
    assert json.dumps(validate_config(reordered, schema)) == json.dumps(validate_config(default, schema))


def test_a_default_written_out_gives_the_same_config_as_leaving_it_out(schema, default):
    explicit = {**default, "train": {**default["train"], "weight_decay": 0}}
    assert json.dumps(validate_config(explicit, schema)) == json.dumps(validate_config(default, schema))


def test_whole_numbers_written_as_floats_become_integers(schema, default):
    cfg = validate_config({**default, "study": {**default["study"], "trials": 3.0, "budgets": [1000.0, 2000]}}, schema)
    assert cfg["study"]["trials"] == 3 and type(cfg["study"]["trials"]) is int
    assert [type(b) for b in cfg["study"]["budgets"]] == [int, int]


def test_an_unknown_model_preset_is_caught_at_config_check_with_the_choices(schema, default):
    message = _error(schema, {**default, "model": {"source": "config", "preset": "llama-huge"}})
    assert (
        "model.preset: 'llama-huge' is not a preset; choose one of llama-small, llama-tiny, tinyllama-1.1b" in message
    )


def test_a_pretrained_folder_that_does_not_exist_is_caught_at_config_check(schema, default):
    message = _error(schema, {**default, "tokenizer": {"source": "pretrained", "name": "./no/such/tokenizer"}})
    assert "tokenizer.name: the folder ./no/such/tokenizer does not exist" in message


def test_an_unknown_carbon_country_is_caught_at_config_check(schema, default):
    message = _error(schema, {**default, "cost": {"carbon_intensity": "XYZ"}})
    assert "cost.carbon_intensity: 'XYZ' is not a country code" in message


def test_an_override_the_native_model_lacks_is_caught_at_config_check(schema, default):
    default["model"]["overrides"] = {"attention_bias": True}
    assert "model.overrides: ['attention_bias'] need model.implementation: hf" in _error(schema, default)
    default["model"]["implementation"] = "hf"
    validate_config(default, schema)


def test_the_native_model_with_pretrained_weights_is_caught_at_config_check(schema, default):
    default["model"] = {"source": "pretrained", "name": "org/model", "implementation": "native"}
    assert "model.implementation: native builds models from a preset" in _error(schema, default)


def test_compile_takes_yaml_booleans_or_auto(schema, default):
    for value in (True, False, "auto"):
        default["train"]["compile"] = value
        assert validate_config(default, schema)["train"]["compile"] == value
    default["train"]["compile"] = "sometimes"
    assert "train.compile" in _error(schema, default)


def _yaml(default, text):
    """The default config with ``text`` (YAML, as a user writes it) merged over it, section by section."""
    cfg = copy.deepcopy(default)
    for section, value in yaml.safe_load(text).items():
        cfg[section] = (
            {**cfg[section], **value} if isinstance(value, dict) and isinstance(cfg.get(section), dict) else value
        )
    return cfg


# --- numbers: finite, and not text
@pytest.mark.parametrize(
    "text,message",
    [
        ("train: {lr: .inf}", "train.lr: .inf is not a finite number; give a finite value"),
        ("metric: {K: .nan}", "metric.K: .nan is not a finite number; give a finite value"),
        ("design: {lr: [0.001, -.inf]}", "design.lr[1]: -.inf is not a finite number; give a finite value"),
        ("model: {overrides: {rms_norm_eps: .nan}}", "model.overrides.rms_norm_eps: .nan is not a finite number"),
    ],
)
def test_a_non_finite_number_is_refused_anywhere_naming_the_key(schema, default, text, message):
    error = _error(schema, _yaml(default, text))
    assert message in error
    assert error.count(message.split(":")[0] + ":") == 1  # once: not a second time from the schema's bounds


def test_a_oneof_error_says_what_is_allowed(schema, default):
    assert 'metric.cs_tflops: 0 is not allowed; give "measure" or a number > 0' in _error(
        schema, _yaml(default, "metric: {cs_tflops: 0}")
    )
    assert "cost.carbon_intensity: -5 is not allowed; give null, a number ≥ 0 or a 3-letter ISO country code" in _error(
        schema, _yaml(default, "cost: {carbon_intensity: -5}")
    )


@pytest.mark.parametrize(
    "text,message",
    [
        ("train: {lr: 3e-4}", "train.lr: '3e-4' is a string (YAML reads 3e-4 without a dot as text); write 3.0e-4"),
        (
            "train: {lr: 1.0e4}",
            "train.lr: '1.0e4' is a string (YAML reads 1.0e4, an exponent without a sign, as text); write 1.0e+4",
        ),
        (
            "study: {budgets: [1e6]}",
            "study.budgets[0]: '1e6' is a string (YAML reads 1e6 without a dot as text); write 1000000",
        ),
        (
            "metric: {cs_tflops: 2e2}",
            "metric.cs_tflops: '2e2' is a string (YAML reads 2e2 without a dot as text); write 2.0e+2",
        ),
    ],
)
def test_a_number_yaml_reads_as_text_says_how_to_write_it(schema, default, text, message):
    assert message in _error(schema, _yaml(default, text))


def test_a_gain_fraction_of_one_is_refused_by_the_schema_not_left_for_the_analysis(schema, default):
    # a fraction of the first segment's gain lies strictly between 0 and 1: at 1 every run would "fall" at once
    assert "analysis.gain_fraction" in _error(schema, _yaml(default, "analysis: {gain_fraction: 1}"))
    validate_config(_yaml(default, "analysis: {gain_fraction: 0.99}"), schema)


def test_a_quoted_number_is_named_as_a_string(schema, default):
    assert "train.lr: '0.5' is a string, not a number" in _error(schema, _yaml(default, "train: {lr: '0.5'}"))


# --- the architecture of a preset with its overrides
def test_heads_that_do_not_divide_the_hidden_size_are_refused_naming_the_level_key(schema, default):
    cfg = _yaml(
        default, "design: {model: {big: {preset: llama-tiny, overrides: {hidden_size: 32, num_attention_heads: 5}}}}"
    )
    assert (
        "design.model.big.overrides.num_attention_heads: num_attention_heads 5 does not divide hidden_size 32; "
        "give num_attention_heads one of 1, 2, 4, 8, 16, 32"
    ) in _error(schema, cfg)


def test_a_hidden_size_the_preset_heads_do_not_divide_names_the_hidden_size(schema, default):
    cfg = _yaml(default, "model: {overrides: {hidden_size: 30}}")
    assert "model.overrides.hidden_size: num_attention_heads 4 does not divide hidden_size 30" in _error(schema, cfg)


def test_kv_heads_that_do_not_divide_the_heads_are_refused(schema, default):
    cfg = _yaml(default, "model: {overrides: {num_key_value_heads: 3}}")
    assert (
        "model.overrides.num_key_value_heads: num_key_value_heads 3 does not divide num_attention_heads 4; "
        "give num_key_value_heads one of 1, 2, 4"
    ) in _error(schema, cfg)


def test_an_odd_head_dimension_is_refused(schema, default):
    cfg = _yaml(default, "model: {overrides: {hidden_size: 36}}")
    assert (
        "model.overrides.hidden_size: the head dimension hidden_size / num_attention_heads = 36 / 4 = 9 is odd"
        in _error(schema, cfg)
    )


def test_an_explicit_head_dim_frees_only_the_native_model_from_dividing_the_hidden_size(schema, default):
    cfg = _yaml(default, "model: {overrides: {hidden_size: 30, head_dim: 8}}")
    validate_config(cfg, schema)  # the native Llama projects 30 -> 4 x 8
    cfg["model"]["implementation"] = "hf"  # transformers' LlamaConfig refuses it
    assert "model.overrides.hidden_size: num_attention_heads 4 does not divide hidden_size 30" in _error(schema, cfg)


def test_an_override_the_tokenizer_decides_is_refused(schema, default):
    cfg = _yaml(default, "model: {overrides: {vocab_size: 5000}}")
    assert "model.overrides.vocab_size: vocab_size comes from the tokenizer" in _error(schema, cfg)


def test_a_size_that_is_not_a_whole_number_is_refused(schema, default):
    cfg = _yaml(default, "model: {overrides: {num_attention_heads: two}}")
    assert "model.overrides.num_attention_heads: 'two' is not allowed; give a whole number ≥ 1" in _error(schema, cfg)


def test_a_bad_base_override_is_named_once_not_again_for_each_level_inheriting_it(schema, default):
    cfg = _yaml(default, "model: {overrides: {num_key_value_heads: 3}}\ndesign: {model: {a: {}, b: {source: config}}}")
    assert _error(schema, cfg).count("num_key_value_heads 3 does not divide") == 1


# --- pretrained names: a folder here, or a Hub id in the local cache
def test_an_uncached_hub_id_offline_is_refused_with_both_readings(schema, default, hub_cache, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    message = _error(schema, {**default, "model": {"source": "pretrained", "name": "org/model"}})
    assert (
        "model.name: no folder org/model here, and no Hub id org/model in the local Hugging Face cache "
        "(HF_HUB_OFFLINE is set, so no job can download it); give ./org/model for a folder, or download it first"
    ) in message


def test_an_uncached_hub_id_online_says_its_job_would_download_it(schema, default, hub_cache, monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    message = _error(schema, {**default, "tokenizer": {"source": "pretrained", "name": "org/tok", "revision": "v2"}})
    assert (
        "tokenizer.name: no folder org/tok here, and no Hub id org/tok at revision v2 in the local Hugging Face cache: "
        "its job would try to download it mid-study"
    ) in message
    assert "download it first: hf download org/tok --revision v2" in message


def test_a_cached_hub_id_passes(schema, default, hub_cache):
    hub_cache("org/model")
    validate_config(
        {
            **default,
            "model": {"source": "pretrained", "name": "org/model"},
            "tokenizer": {"source": "pretrained", "name": "org/model"},
        },
        schema,
    )


def test_a_folder_named_like_a_hub_id_passes(schema, default, hub_cache, tmp_path, monkeypatch):
    (tmp_path / "org" / "model").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    validate_config({**default, "model": {"source": "pretrained", "name": "org/model"}}, schema)


def test_a_name_that_is_neither_a_folder_nor_a_hub_id_says_so(schema, default, hub_cache):
    message = _error(schema, {**default, "tokenizer": {"source": "pretrained", "name": "not a/valid/id"}})
    assert "tokenizer.name: no folder not a/valid/id here, and 'not a/valid/id' is not a Hub id either" in message


def test_a_model_level_names_its_own_pretrained_key(schema, default, hub_cache):
    cfg = {**default, "design": {"model": {"tl": {"source": "pretrained", "name": "org/model"}}}}
    assert "design.model.tl.name: no folder org/model here" in _error(schema, cfg)


# --- duplicate keys in the config files Snakemake read
def test_a_duplicate_key_is_named_with_its_file_and_both_lines(tmp_path):
    path = tmp_path / "study.yaml"
    path.write_text("design:\n  model:\n    big: {preset: llama-tiny}\n    big: {preset: llama-small}\n")
    assert duplicate_keys([path]) == [
        f"{os.path.relpath(path) if not os.path.relpath(path).startswith('..') else path} line 4: design.model.big is given "
        "twice (first on line 3); the loader keeps only the last, so remove or rename one"
    ]


def test_a_duplicate_key_on_one_line_of_a_json_config_is_named_by_column(tmp_path):
    path = tmp_path / "study.json"
    path.write_text('{"train": {"lr": 0.1, "lr": 0.2}}')
    [problem] = duplicate_keys([path])
    assert "line 1, column 23: train.lr is given twice (first on line 1, column 12)" in problem


def test_a_key_written_beside_a_yaml_merge_is_not_a_duplicate(tmp_path):
    path = tmp_path / "study.yaml"
    path.write_text("base: &b {lr: 0.1, epochs: 1}\ntrain: {<<: *b, lr: 0.2}\n")
    assert duplicate_keys([path]) == []


def test_duplicate_keys_and_schema_errors_are_reported_together(tmp_path, schema, default):
    path = tmp_path / "study.yaml"
    path.write_text("train: {epochs: 1, epochs: 2}\n")
    with pytest.raises(ConfigError) as exc:
        checked_config({**default, "chunk": {"length": 1}}, schema, [path])
    assert "train.epochs is given twice" in str(exc.value) and "chunk.length: 1 is less than the minimum of 2" in str(
        exc.value
    )


# --- a job's failure, as files.logged reports it
def test_a_tokenwatt_error_in_a_job_ends_it_with_a_sentence_and_its_traceback_in_a_file_of_its_own(tmp_path, capsys):
    log = tmp_path / "logs" / "corpus.log"
    with pytest.raises(SystemExit) as exc:
        with files.logged(log):
            print("reading a.txt")
            raise CorpusError("corpus file a.txt is not valid UTF-8; re-encode it as UTF-8")
    kept = tmp_path / "logs" / "corpus.traceback.log"
    line = f"tokenwatt: corpus file a.txt is not valid UTF-8; re-encode it as UTF-8 (the traceback is in {kept})\n"
    assert exc.value.code == 1 and capsys.readouterr().err == line
    assert log.read_text() == line  # the log a logger prints for a failed job: the sentence alone
    assert (
        kept.read_text().startswith("reading a.txt\nTraceback (most recent call last)")
        and "CorpusError" in kept.read_text()
    )


def test_where_snakemake_prints_a_failed_jobs_log_the_job_does_not_print_its_sentence_too(
    tmp_path, capsys, monkeypatch
):
    monkeypatch.setenv(files.LOG_SHOWN_ENV, "1")
    with pytest.raises(SystemExit):
        with files.logged(tmp_path / "job.log"):
            raise CorpusError("corpus file a.txt is empty")
    assert capsys.readouterr().err == "" and "corpus file a.txt is empty" in (tmp_path / "job.log").read_text()


def test_a_failed_jobs_sentence_names_the_job_it_is_given(tmp_path, capsys):
    job = files.job_label("train_trial", {"cell": "lr=50/b1000", "trial": "2"})
    with pytest.raises(SystemExit):
        with files.logged(tmp_path / "job.log", job=job):
            raise CorpusError("no CUDA device is visible")
    assert "tokenwatt: train_trial (cell lr=50/b1000, trial 2): no CUDA device is visible" in capsys.readouterr().err


def test_a_job_that_succeeds_leaves_no_traceback_of_an_earlier_failure(tmp_path):
    (tmp_path / "job.traceback.log").write_text("Traceback (most recent call last): an earlier run's\n")
    with files.logged(tmp_path / "job.log"):
        print("fine")
    assert not (tmp_path / "job.traceback.log").exists()


def test_a_job_stopped_by_a_signal_ends_in_a_sentence_naming_it(tmp_path, capsys):
    import os
    import signal

    from tokenwatt.common.failures import stop_with_a_sentence

    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    try:
        stop_with_a_sentence()
        with pytest.raises(SystemExit):
            with files.logged(tmp_path / "job.log", job="device_profile"):
                os.kill(os.getpid(), signal.SIGTERM)
    finally:
        signal.signal(signal.SIGTERM, before[0])
        signal.signal(signal.SIGINT, before[1])
    assert "tokenwatt: device_profile: stopped by SIGTERM before it finished" in capsys.readouterr().err


def test_a_bug_in_a_job_keeps_its_traceback(tmp_path, capsys):
    log = tmp_path / "job.log"
    with pytest.raises(KeyError):
        with files.logged(log):
            {}["missing"]
    assert "tokenwatt:" not in capsys.readouterr().err
    assert "KeyError: 'missing'" in log.read_text() and not (tmp_path / "job.traceback.log").exists()


def test_a_full_disk_names_the_file_being_written(tmp_path, capsys):
    def full(tmp):
        raise OSError(errno.ENOSPC, "No space left on device")  # as a write() raises it: no file name

    with pytest.raises(SystemExit):
        with files.logged(tmp_path / "job.log"):
            files._atomic(tmp_path / "results" / "chunks.parquet", full)
    assert (
        f"tokenwatt: no space left on the device while writing {tmp_path / 'results' / 'chunks.parquet'}; "
        "free space on that disk"
    ) in capsys.readouterr().err


def test_a_full_disk_reported_by_polars_is_recognised(tmp_path, capsys):
    import polars as pl

    with pytest.raises(SystemExit):
        with files.logged(tmp_path / "job.log"):
            raise pl.exceptions.ComputeError("parquet: underlying IO error: No space left on device (os error 28)")
    assert (
        "tokenwatt: no space left on the device while this job wrote its outputs; free space" in capsys.readouterr().err
    )


MARGINAL = {"rule": "marginal", "min_gain_per_kj": 0.5, "patience": 2}


def test_a_stopping_rule_without_evaluation_points_to_decide_at_is_refused(schema, default):
    message = _error(schema, {**default, "train": {**default["train"], "stop": MARGINAL}, "eval": {"points": 0}})
    assert "train.stop: a stopping rule is decided at evaluation points, and eval.points is 0" in message


def test_a_stopping_level_without_measured_energy_is_refused(schema, default):
    cfg = {**default, "design": {"stopping": {"full": "none", "early": MARGINAL}}, "meter": {"kind": "none"}}
    assert (
        "design.stopping.early: a marginal rule weighs quality against training energy, and meter.kind none"
        in _error(schema, cfg)
    )


def test_an_incomplete_rule_to_replay_is_refused_before_any_job(schema, default):
    message = _error(schema, {**default, "analysis": {"stopping": {"half": {"rule": "marginal"}}}})
    assert "analysis.stopping.half:" in message


def test_eval_filters_without_a_selection_factor_are_refused_naming_the_key(schema, default):
    cfg = _yaml(default, "selection: {eval_filters: {min_words: 20}}")
    assert "selection.eval_filters: it filters the eval set of a data-selection study" in _error(schema, cfg)


def test_a_selection_levels_quality_rules_keep_the_order_they_are_written_in(schema, default):
    cfg = _yaml(
        default, "design: {selection: {raw: none, strict: {filters: {min_words: 20, max_symbol_word_ratio: 1}}}}"
    )
    rules = validate_config(cfg, schema)["design"]["selection"]["strict"]["filters"]
    assert list(rules) == ["min_words", "max_symbol_word_ratio"]
    assert type(rules["max_symbol_word_ratio"]) is float


def _branched(default, **schedule):
    return {**default, "train": {**default["train"], "schedule": {"kind": "wsd", "branch_every": 500, **schedule}}}


def test_a_branched_schedule_is_accepted_with_a_wsd_cooldown_one_epoch_and_a_warmup_by_size(schema, default):
    validate_config(_branched(default, warmup_tokens_per_parameter=1.0), schema)


@pytest.mark.parametrize(
    "change, said",
    [
        (
            {"schedule": {"kind": "cosine", "branch_every": 500}},
            "a branch is a wsd cooldown; set train.schedule.kind: wsd",
        ),
        ({"epochs": 2}, "and train.epochs is 2 (a second epoch would repeat each budget's own subset)"),
        ({"schedule": {"kind": "wsd", "branch_every": 500, "warmup_fraction": 0.1}}, "warm up by size instead"),
        ({"stop": MARGINAL}, "a stopping rule (train.stop) would end the stable run every budget branches from"),
        ({"schedule": {"kind": "wsd", "branch_every": 100}}, "is under one optimizer step's 256 (batch_size × chunk"),
    ],
)
def test_a_branched_schedule_that_budgets_could_not_share_is_refused_by_its_key(schema, default, change, said):
    branched = _branched(default)
    cfg = {**branched, "train": {**branched["train"], **change}, "eval": {"points": 5}}
    assert "train.schedule.branch_every: " in _error(schema, cfg) and said in _error(schema, cfg)


def test_a_devices_factor_is_accepted_with_a_batch_every_device_gets_a_share_of(schema, default):
    cfg = {**default, "design": {"devices": [1, 2]}, "train": {**default["train"], "batch_size": 4}}
    assert validate_config(cfg, schema)["design"]["devices"] == [1, 2]


def test_a_devices_factor_checkpoints_and_branches_as_one_device_does(schema, default):
    branched = _branched(default)
    train = {**branched["train"], "batch_size": 4, "checkpoint_every": 10000}
    cfg = {**branched, "design": {"devices": [1, 2]}, "train": train, "eval": {"points": 5}}
    assert validate_config(cfg, schema)["train"]["checkpoint_every"] == 10000


@pytest.mark.parametrize(
    "change, said",
    [
        ({"meter": {"kind": "rapl"}}, "meter.kind rapl reads the whole CPU package, which each of 2 ranks would count"),
        ({"train": {"batch_size": 1}}, "train.batch_size (and every design.batch_size level) must be at least 2"),
        (
            {"train": {"batch_size": 4}, "design": {"devices": [1, 2], "batch_size": [1, 4]}},
            "must be at least 2; 1 would leave a device without a chunk",
        ),
    ],
)
def test_what_a_multi_device_trial_would_measure_wrong_is_refused_by_its_key(schema, default, change, said):
    cfg = {
        **default,
        "design": change.get("design", {"devices": [1, 2]}),
        "train": {**default["train"], "batch_size": 4, **change.get("train", {})},
        "meter": {**default["meter"], **change.get("meter", {})},
    }
    error = _error(schema, cfg)
    assert "design.devices: " in error and said in error
