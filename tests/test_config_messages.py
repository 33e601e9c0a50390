"""A config error says where it is and what to do: an unknown key names its path and the key meant (at its level, or
the section that has it), and every problem names the user's file and the line that set the key."""

import copy
import os

import pytest
import yaml
from tokenwatt.plan.config import ConfigError, checked_config, load_schema
from workflow_helpers import config_error as _error


@pytest.fixture(scope="module")
def schema(root):
    return load_schema(root / "workflow/schemas/config.schema.yaml")


@pytest.fixture
def default(root):
    return yaml.safe_load((root / "config/config.yaml").read_text())


def test_unknown_key_is_rejected_naming_its_path(schema, default):
    default["train"]["learning_rate"] = 0.1
    assert "train.learning_rate: not a key of train" in _error(schema, default)


@pytest.mark.parametrize(
    "section,key,fix",
    [
        ("study", "budgetz", "(did you mean study.budgets?)"),
        ("train", "epoch", "(did you mean train.epochs?)"),
        (None, "tarin", "(did you mean train?)"),
        ("study", "lr", "(did you mean design.lr or train.lr?)"),
    ],
)
def test_an_unknown_key_gets_the_nearest_key_at_its_level_or_the_section_that_has_it(
    schema, default, section, key, fix
):
    (default[section] if section else default)[key] = 1
    path = f"{section}.{key}" if section else key
    assert f"{path}: not a key of {section or 'the top level'} {fix}" in _error(schema, default)


@pytest.mark.parametrize(
    "section,key,fix",
    [
        ("train", "budgets", "(did you mean study.budgets?)"),
        ("study", "interval_s", "(did you mean meter.interval_s?)"),
    ],
)
def test_an_exact_key_of_another_section_beats_a_near_key_at_the_same_level(schema, default, section, key, fix):
    default[section][key] = 1
    assert f"{section}.{key}: not a key of {section} {fix}" in _error(schema, default)


def test_every_unknown_key_of_one_section_is_a_problem_of_its_own(schema, default):
    default["study"] |= {"budgetz": 1, "trails": 2}
    problems = _error(schema, default).split("\n  ")[1:]
    assert {p.split(":")[0] for p in problems} == {"study.budgetz", "study.trails"}


def test_a_config_error_names_the_users_file_and_the_line_that_set_the_key(tmp_path, schema, default):
    base, mine = tmp_path / "config.yaml", tmp_path / "mine.yaml"
    base.write_text(yaml.safe_dump(default))
    mine.write_text("study:\n  budgets: [1000, 2000]\n  budgetz: 3\ntrain: {epochs: 0}\n")
    config = copy.deepcopy(default)
    config["study"] |= {"budgets": [1000, 2000], "budgetz": 3}
    config["train"]["epochs"] = 0
    with pytest.raises(ConfigError) as exc:
        checked_config(config, schema, [base, mine])  # mine.yaml last: it overrides config.yaml, as --configfile does
    text, name = str(exc.value), files_named(mine)
    assert text.startswith(f"invalid tokenwatt config (read from {files_named(base)}, then {name}):")
    assert f"{name} line 3: study.budgetz: not a key of study (did you mean study.budgets?)" in text
    assert f"{name} line 4: train.epochs: 0 is less than the minimum of 1" in text


def test_a_key_no_config_file_sets_is_named_without_a_file(tmp_path, schema, default):
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(default))
    with pytest.raises(ConfigError) as exc:  # a --config value: no file holds it
        checked_config({**default, "study": {**default["study"], "trials": 0}}, schema, [path])
    assert "\n  study.trials: 0 is less than the minimum of 1" in str(exc.value)


def files_named(path) -> str:
    """A config file as the messages name it: relative to the working directory where it lies below it."""
    return os.path.relpath(path) if not os.path.relpath(path).startswith("..") else str(path)
