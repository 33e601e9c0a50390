"""Typed records between rules: a trial's metrics.json is checked against its schema when
written and when read, so a partial or hand-edited file is named, never averaged over."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from jsonschema import Draft202012Validator

from .files import TRIAL_FIX


class RecordError(ValueError):
    pass


def load_validator(schema_path: str | Path) -> Draft202012Validator:
    return Draft202012Validator(yaml.safe_load(Path(schema_path).read_text(encoding="utf-8")))


def problems(record: Any, validator: Draft202012Validator) -> list[str]:
    """Every schema violation, each naming its key."""
    return [
        f"{'.'.join(map(str, e.absolute_path)) or '(top level)'}: {e.message}"
        for e in sorted(validator.iter_errors(record), key=lambda e: [str(p) for p in e.absolute_path])
    ]


def check_record(record: Any, validator: Draft202012Validator, path: str | Path) -> dict[str, Any]:
    """The record, or a RecordError naming the file, what is wrong and what to do."""
    found = problems(record, validator)
    if found:
        raise RecordError(
            f"{path} is not a valid trial record ({'; '.join(found[:5])}{'; …' if len(found) > 5 else ''}); {TRIAL_FIX}"
        )
    return record


def read_record(path: str | Path, validator: Draft202012Validator) -> dict[str, Any]:
    """Read and check one metrics.json; a truncated or invalid file is a RecordError naming it."""
    try:
        record = json.loads(Path(path).read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise RecordError(f"{path} is not readable JSON ({err}); {TRIAL_FIX}") from None
    return check_record(record, validator, path)
