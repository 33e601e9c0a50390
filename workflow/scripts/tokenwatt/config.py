"""Config validation against the JSON schema (draft 2020-12), with defaults filled in.

Errors name the key's path (``study.budgets[0]``) and what is allowed, all at once, so a
user fixes the file in one pass before any job runs.
"""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any

import yaml
from jsonschema import Draft202012Validator

from .cost import CostError, carbon_intensity
from .design import merged_model
from .presets import NATIVE_FIELDS, PRESETS


class ConfigError(ValueError):
    pass


def quality_settings(config: dict[str, Any]) -> dict[str, Any]:
    """What the quality rules (``quality.py``) judge by: ``quality.*``, plus the cooldown target (the
    start-temperature limit) and ``profile.max_cv`` (how steady the device profile must be). Here,
    not there, so the Snakefile gets it without importing polars and numpy at every start."""
    return {**config["quality"], "start_below_c": config["meter"]["cooldown_below_c"],
            "profile_cv_max": config["profile"]["max_cv"]}


def load_schema(path: str | Path) -> dict[str, Any]:
    return yaml.safe_load(Path(path).read_text(encoding="utf-8"))


def _key_path(parts) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "(top level)"


def _fill_defaults(config: dict[str, Any], schema: dict[str, Any]) -> None:
    for key, sub in schema.get("properties", {}).items():
        if key not in config and "default" in sub:
            config[key] = copy.deepcopy(sub["default"])
        if isinstance(config.get(key), dict) and sub.get("type") == "object":
            _fill_defaults(config[key], sub)
            if isinstance(sub.get("additionalProperties"), dict):  # named levels, e.g. design.hardware
                for value in config[key].values():
                    if isinstance(value, dict):
                        _fill_defaults(value, sub["additionalProperties"])


def _requirements(cfg: dict[str, Any], schema: dict[str, Any]) -> list[str]:
    """Cross-key rules that a schema would state only with unreadable if/then blocks."""
    problems = []
    if cfg["corpus"]["source"] == "local" and not cfg["corpus"]["local"]["files"]:
        problems.append("corpus.local.files: corpus.source is local, so list at least one file")
    if isinstance(cfg["cost"]["carbon_intensity"], str):
        try:
            carbon_intensity(cfg["cost"]["carbon_intensity"])
        except CostError as err:
            problems.append(str(err))
    problems += _model_problems(cfg["model"], cfg["tokenizer"], "")
    for level, spec in cfg["design"].get("model", {}).items():
        prefix = f"design.model.{level}."
        model = merged_model(cfg["model"], spec)
        tokenizer = {**cfg["tokenizer"], **spec.get("tokenizer", {})}
        found = [f"{prefix}{_key_path(e.absolute_path) if e.absolute_path else '(level)'}: {e.message}"
                 for e in Draft202012Validator(schema["properties"]["model"]).iter_errors(model)]
        found += [f"{prefix}tokenizer.{_key_path(e.absolute_path)}: {e.message}"
                  for e in Draft202012Validator(schema["properties"]["tokenizer"]).iter_errors(tokenizer)]
        problems += found or _model_problems(model, tokenizer, prefix)
    return problems


def _model_problems(model: dict[str, Any], tokenizer: dict[str, Any], prefix: str) -> list[str]:
    """What a model and its tokenizer need beyond the schema; ``prefix`` places them (a design level)."""
    problems = []
    for section, spec in (("tokenizer", tokenizer), ("model", model)):
        name = spec["name"]
        if spec["source"] == "pretrained" and not name:
            problems.append(f"{prefix}{section}.name: {section}.source is pretrained, so give a Hub id or a local path")
        if spec["source"] == "pretrained" and name and name.startswith(("/", "./", "../", "~")) \
                and not Path(name).expanduser().exists():
            problems.append(f"{prefix}{section}.name: the folder {name} does not exist; give an existing folder or a Hub id")
    if model["source"] == "config" and model["preset"] not in PRESETS:
        problems.append(f"{prefix}model.preset: {model['preset']!r} is not a preset; choose one of {', '.join(sorted(PRESETS))}")
    if model["implementation"] == "native" and model["source"] == "pretrained":
        problems.append(f"{prefix}model.implementation: native builds models from a preset; a pretrained model loads through "
                        "transformers (implementation hf or auto)")
    unsupported = sorted(set(model["overrides"]) - NATIVE_FIELDS)
    if model["source"] == "config" and model["implementation"] != "hf" and unsupported:
        problems.append(f"{prefix}model.overrides: {unsupported} need model.implementation: hf (the native Llama supports "
                        f"{', '.join(sorted(NATIVE_FIELDS))})")
    return problems


def canonical(value: Any, schema: dict[str, Any]) -> Any:
    """One spelling per study: keys sorted at every depth, whole numbers where the schema asks for
    integers, floats where it asks for numbers.

    Snakemake compares params by their printed form, so without this a reordered file, or
    ``trials: 3.0`` for ``3``, would rerun every job although the study is the same.
    """
    if isinstance(value, dict):
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


def validate_config(config: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """Return a validated, canonical copy of ``config`` with every default filled in."""
    cfg = copy.deepcopy(config)
    errors = sorted(Draft202012Validator(schema).iter_errors(cfg), key=lambda e: [str(p) for p in e.absolute_path])
    problems = [f"{_key_path(e.absolute_path)}: {e.message}" for e in errors]
    if not problems:
        _fill_defaults(cfg, schema)
        problems = _requirements(cfg, schema)
    if problems:
        raise ConfigError("invalid tokenwatt config:\n  " + "\n  ".join(problems))
    return canonical(cfg, schema)


def config_hash(cfg: dict[str, Any]) -> str:
    """Short digest of the validated config, shown in the report's provenance."""
    return hashlib.sha256(json.dumps(cfg, sort_keys=True, default=str).encode()).hexdigest()[:12]


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
            if "oneOf" in sub:  # e.g. `measure` or a number
                sub = {**sub, "enum": [o["const"] if "const" in o else o["type"] + "".join(
                    f" {op} {o[k]}" for k, op in (("minimum", "≥"), ("exclusiveMinimum", ">")) if k in o) for o in sub["oneOf"]]}
            allowed = " \\| ".join(map(str, sub["enum"])) if "enum" in sub else sub.get("type", "")
            if isinstance(allowed, list):
                allowed = " or ".join(allowed)
            bounds = [f"{op} {sub[k]}" for k, op in (("minimum", "≥"), ("exclusiveMinimum", ">"), ("maximum", "≤")) if k in sub]
            default = (f"`{json.dumps(sub['default'])}`" if "default" in sub
                       else "required" if name in node.get("required", []) else "optional")
            rows.append(f"| `{key}` | {' '.join([str(allowed), *bounds])} | {default} | {sub.get('description', '')} |")

    walk(schema, "")
    return "\n".join(rows) + "\n"
