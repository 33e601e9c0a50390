"""metrics.json is a typed record: checked when written and when read, with the file and the fix named."""

import pytest
from tokenwatt.common.records import RecordError, check_record, load_validator, read_record
from trial_records import raw_record


@pytest.fixture(scope="module")
def validator(root):
    return load_validator(root / "workflow/schemas/metrics.schema.yaml")


def test_a_complete_trial_record_is_valid(validator, tmp_path):
    path = tmp_path / "metrics.json"
    path.write_text(__import__("json").dumps(raw_record(1000, 1)))
    assert read_record(path, validator)["budget"] == 1000


def test_a_truncated_record_names_its_file_and_the_fix(validator, tmp_path):
    path = tmp_path / "metrics.json"
    path.write_text('{"budget": 10')
    with pytest.raises(RecordError, match=r"metrics.json is not readable JSON .*delete it and rerun"):
        read_record(path, validator)


def test_an_empty_record_lists_what_is_missing(validator):
    with pytest.raises(
        RecordError,
        match=r"x/metrics.json is not a valid trial record \(\(top level\): 'budget' is a required property",
    ):
        check_record({}, validator, "x/metrics.json")


def test_unmeasured_energy_must_be_null_and_never_a_string(validator):
    check_record(raw_record(1000, 1, energy_j=None), validator, "m.json")
    with pytest.raises(RecordError, match="energy_j"):
        check_record(raw_record(1000, 1, energy_j="0"), validator, "m.json")
