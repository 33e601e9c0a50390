import copy
import json

import pytest
import yaml

from tokenwatt.config import ConfigError, load_schema, schema_reference, validate_config


@pytest.fixture(scope="module")
def schema(root):
    return load_schema(root / "workflow/schemas/config.schema.yaml")


@pytest.fixture
def default(root):
    return yaml.safe_load((root / "config/config.yaml").read_text())


def test_shipped_configs_validate(root, schema):
    for name in ("config.yaml", "paper.yaml"):
        validate_config(yaml.safe_load((root / "config" / name).read_text()), schema)


def test_defaults_are_filled_in(schema, default):
    del default["train"]
    cfg = validate_config(default, schema)
    assert cfg["train"]["precision"] == "fp32" and cfg["corpus"]["hf"]["split"] == "train"


def _error(schema, cfg) -> str:
    with pytest.raises(ConfigError) as exc:
        validate_config(cfg, schema)
    return str(exc.value)


def test_negative_budget_names_the_key(schema, default):
    default["study"]["budgets"] = [20000, -5]
    assert "study.budgets[1]: -5 is less than the minimum of 1" in _error(schema, default)


def test_zero_trials_names_the_key(schema, default):
    default["study"]["trials"] = 0
    assert "study.trials: 0 is less than the minimum of 1" in _error(schema, default)


def test_chunk_length_below_two_names_the_key(schema, default):
    default["chunk"]["length"] = 1
    assert "chunk.length: 1 is less than the minimum of 2" in _error(schema, default)


def test_unknown_key_is_rejected(schema, default):
    default["train"]["learning_rate"] = 0.1
    assert "train: Additional properties are not allowed ('learning_rate' was unexpected)" in _error(schema, default)


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
    assert "model.preset: 'llama-huge' is not a preset; choose one of llama-small, llama-tiny, tinyllama-1.1b" in message


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
