"""Config validation against the JSON schema (draft 2020-12), with defaults filled in, in one canonical spelling.

Errors name the key's path (``study.budgets[0]``) and what is allowed, all at once, so a user fixes the file in one
pass before any job runs. The checks live by concern: the sentences in ``config_messages``, the rules across keys in
``config_rules`` (a model's in ``config_models``), a key written twice in a file in ``config_files``; here the entry
points the Snakefile calls (``checked_config``, ``config_hash``, ``quality_settings``) and the schema's key reference.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml
from jsonschema import Draft202012Validator

from .config_files import duplicate_keys, located, shown_name
from .config_messages import message, non_finite
from .config_models import NOT_CACHED
from .config_rules import requirements


class ConfigError(ValueError):
    pass


def quality_settings(config: dict[str, Any]) -> dict[str, Any]:
    """What the quality rules (``quality.py``) judge by: ``quality.*``, plus the cooldown target (the
    start-temperature limit), ``profile.max_cv`` (how steady the device profile must be) and the samples the poller
    aims at (``meter.target_samples``: whether a trial with few samples asked for enough). Here,
    not there, so the Snakefile gets it without importing polars and numpy at every start."""
    return {
        **config["quality"],
        "start_below_c": config["meter"]["cooldown_below_c"],
        "profile_cv_max": config["profile"]["max_cv"],
        "target_samples": config["meter"].get("target_samples", 0),
    }


def load_schema(path: str | Path) -> dict[str, Any]:
    # libyaml's loader where PyYAML was built with it: the pure-Python one took ~0.1 s of every Snakemake start
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return yaml.load(Path(path).read_text(encoding="utf-8"), Loader=loader)


def _fill_defaults(config: dict[str, Any], schema: dict[str, Any]) -> None:
    """Every default the schema gives, at every depth, inside named levels (design.hardware) and inside the object
    branch of a ``oneOf`` (a selection level's order.curriculum.direction) too."""
    schema = _object_branch(schema)
    for key, sub in schema.get("properties", {}).items():
        if key not in config and "default" in sub:
            config[key] = copy.deepcopy(sub["default"])
        if isinstance(config.get(key), dict):
            _fill_defaults(config[key], sub)
    if isinstance(schema.get("additionalProperties"), dict):  # named levels, e.g. design.hardware
        for value in config.values():
            if isinstance(value, dict):
                _fill_defaults(value, schema["additionalProperties"])


def _object_branch(schema: dict[str, Any]) -> dict[str, Any]:
    """The object schema a mapping is read by: the schema itself, or its one object branch of a ``oneOf`` (a selection
    level is ``none`` or a mapping), so that order-keeping and number spelling reach inside it."""
    if "properties" in schema or "additionalProperties" in schema:
        return schema
    return next((b for b in schema.get("oneOf", []) if b.get("type") == "object"), schema)


def canonical(value: Any, schema: dict[str, Any]) -> Any:
    """One spelling per study: keys sorted at every depth, whole numbers where the schema asks for
    integers, floats where it asks for numbers.

    Snakemake compares params by their printed form, so without this a reordered file, or
    ``trials: 3.0`` for ``3``, would rerun every job although the study is the same.
    """
    if isinstance(value, dict):
        schema = _object_branch(schema)
        props, other = schema.get("properties", {}), schema.get("additionalProperties")
        other = other if isinstance(other, dict) else {}
        # Named levels keep the order they were written in: it is the order of tables and figures.
        keys = list(value) if schema.get("x-ordered") else sorted(value)
        return {k: canonical(value[k], props.get(k, other)) for k in keys}
    if isinstance(value, list):
        return [canonical(v, schema.get("items", {})) for v in value]
    kinds = schema.get("type", [])
    kinds = kinds if isinstance(kinds, list) else [kinds]
    if "integer" in kinds and isinstance(value, float) and value.is_integer():
        return int(value)
    if kinds == ["number"] and isinstance(value, int) and not isinstance(value, bool):
        return float(value)  # `weight_decay: 0` is the default 0.0
    return value


def validate_config(
    config: dict[str, Any], schema: dict[str, Any], downloads: list[str] | None = None
) -> dict[str, Any]:
    """Return a validated, canonical copy of ``config`` with every default filled in (``downloads``: see ``checked_config``)."""
    cfg = copy.deepcopy(config)
    not_numbers = non_finite(cfg)
    bad_paths = {path for path, _ in not_numbers}
    errors = sorted(
        (e for e in Draft202012Validator(schema).iter_errors(cfg) if tuple(e.absolute_path) not in bad_paths),
        key=lambda e: [str(p) for p in e.absolute_path],
    )
    problems = sorted([problem for _, problem in not_numbers] + [message(e, root=schema) for e in errors])
    if not problems:
        _fill_defaults(cfg, schema)
        problems = requirements(cfg, schema)
        if downloads is not None:
            downloads += [p for p in problems if NOT_CACHED in p]
            problems = [p for p in problems if NOT_CACHED not in p]
    if problems:
        raise ConfigError("invalid tokenwatt config:\n  " + "\n  ".join(problems))
    return canonical(cfg, schema)


def checked_config(
    config: dict[str, Any],
    schema: dict[str, Any],
    configfiles: Iterable[str | os.PathLike] = (),
    downloads: list[str] | None = None,
) -> dict[str, Any]:
    """``validate_config`` after the config files' duplicate keys, every problem in one ConfigError; with
    ``downloads`` (a list: a dry run), a pretrained name that is only missing from the local cache is put there
    instead of refused, so a study can be planned before its weights are downloaded."""
    configfiles = list(configfiles)
    problems = duplicate_keys(configfiles)
    try:
        validated = validate_config(config, schema, downloads)
    except ConfigError as err:
        # each problem headed by the file and line that set its key: the fix is made there
        problems += located(str(err).split("\n  ")[1:], config, configfiles)
    if problems:
        raise ConfigError(f"invalid tokenwatt config{_read_from(configfiles)}:\n  " + "\n  ".join(problems))
    return validated


def _read_from(configfiles: list[str | os.PathLike]) -> str:
    """The config files a study was read from, in the order Snakemake merged them (a later one's keys win)."""
    names = [shown_name(f) for f in configfiles]
    if not names:
        return ""
    return f" (read from {names[0]})" if len(names) == 1 else f" (read from {', then '.join(names)})"


def config_hash(cfg: dict[str, Any]) -> str:
    """Short digest of the validated config, shown in the report's provenance."""
    return hashlib.sha256(json.dumps(cfg, sort_keys=True, default=str).encode()).hexdigest()[:12]


# a schema bound as the reference table writes it
_BOUNDS = (("minimum", "≥"), ("exclusiveMinimum", ">"), ("maximum", "≤"), ("exclusiveMaximum", "<"))


def _allowed(branch: dict[str, Any]) -> list[Any]:
    """What one branch of a ``oneOf`` allows, as the reference table lists it."""
    if "const" in branch:
        return [branch["const"]]
    if "enum" in branch:
        return list(branch["enum"])
    return [branch["type"] + "".join(f" {op} {branch[k]}" for k, op in _BOUNDS if k in branch)]


def schema_reference(schema: dict[str, Any]) -> str:
    """The key reference table of config/README.md, generated so it cannot drift from the schema."""
    rows = ["| key | type / allowed | default | meaning |", "| --- | --- | --- | --- |"]

    def walk(node: dict[str, Any], prefix: str) -> None:
        for name, sub in node.get("properties", {}).items():
            key = prefix + name
            if "properties" in sub:
                rows.append(f"| `{key}` | section | | {sub.get('description', '')} |")
                walk(sub, key + ".")
                continue
            if "oneOf" in sub:  # e.g. `measure` or a number; an optimizer's kind or a kind with its settings
                sub = {**sub, "enum": [value for o in sub["oneOf"] for value in _allowed(o)]}
            allowed = " \\| ".join(map(str, sub["enum"])) if "enum" in sub else sub.get("type", "")
            if isinstance(allowed, list):
                allowed = " or ".join(allowed)
            bounds = [f"{op} {sub[k]}" for k, op in _BOUNDS if k in sub]
            default = (
                f"`{json.dumps(sub['default'])}`"
                if "default" in sub
                else "required"
                if name in node.get("required", [])
                else "optional"
            )
            rows.append(f"| `{key}` | {' '.join([str(allowed), *bounds])} | {default} | {sub.get('description', '')} |")

    walk(schema, "")
    return "\n".join(rows) + "\n"
