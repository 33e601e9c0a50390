"""Config validation against the JSON schema (draft 2020-12), with defaults filled in.

Errors name the key's path (``study.budgets[0]``) and what is allowed, all at once, so a
user fixes the file in one pass before any job runs.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import os
import re
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
    return {
        **config["quality"],
        "start_below_c": config["meter"]["cooldown_below_c"],
        "profile_cv_max": config["profile"]["max_cv"],
    }


def load_schema(path: str | Path) -> dict[str, Any]:
    return yaml.safe_load(Path(path).read_text(encoding="utf-8"))


def _key_path(parts) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "(top level)"


def _show(value: Any) -> str:
    """A value as the config file spells it: .inf, null, true, 'text', 0.5."""
    if isinstance(value, float) and not math.isfinite(value):
        return ".nan" if math.isnan(value) else ("-.inf" if value < 0 else ".inf")
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    return repr(value)


def _non_finite(value: Any, path: tuple = ()) -> list[tuple[tuple, str]]:
    """Every .inf, -.inf and .nan in the config, at any depth (YAML and JSON both read them as numbers,
    and the schema's bounds let .inf through): (path, problem)."""
    if isinstance(value, float) and not math.isfinite(value):
        return [(path, f"{_key_path(path)}: {_show(value)} is not a finite number; give a finite value")]
    if isinstance(value, dict):
        return [found for k, v in value.items() for found in _non_finite(v, (*path, k))]
    if isinstance(value, list):
        return [found for i, v in enumerate(value) for found in _non_finite(v, (*path, i))]
    return []


# A number as text: PyYAML (YAML 1.1) reads a float only with a dot and, with an exponent, a signed one,
# so 3e-4 and 1.0e4 arrive as strings.
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def _kinds(schema: Any) -> set[str]:
    kinds = schema.get("type", []) if isinstance(schema, dict) else []
    return set(kinds if isinstance(kinds, list) else [kinds])


def _yaml_number(text: str, integer: bool) -> str:
    """How to write ``text`` so that YAML reads a number: 3.0e-4, 1.0e+4, 1000000."""
    value = float(text)
    if integer and value.is_integer():
        return str(int(value))
    if "e" not in text.lower():
        return text
    mantissa, exponent = re.split("[eE]", text)
    mantissa = mantissa if "." in mantissa else mantissa + ".0"
    return f"{mantissa}e{exponent if exponent[0] in '+-' else '+' + exponent}"


def _number_as_text(error) -> str | None:
    """The sentence for a number that arrived as a string, where the schema asks for a number."""
    value = error.instance
    if not isinstance(value, str) or not _NUMBER.fullmatch(value.strip()):
        return None
    branches = error.validator_value if error.validator in ("oneOf", "anyOf") else [error.schema]
    kinds = set().union(*(_kinds(b) for b in branches))
    if error.validator not in ("type", "oneOf", "anyOf") or not kinds & {"number", "integer"}:
        return None
    text = value.strip()
    fix = _yaml_number(text, "number" not in kinds)
    if "e" in text.lower() and "." not in re.split("[eE]", text)[0]:
        why = f"YAML reads {text} without a dot as text"
    elif "e" in text.lower():
        why = f"YAML reads {text}, an exponent without a sign, as text"
    else:
        return (
            f"{_show(value)} is a string, not a number (quoted in a file, or nested in --config, which passes "
            f"nested values as text); write {fix} without quotes in a config file"
        )
    return f"{_show(value)} is a string ({why}); write {fix}"


def _branch(schema: dict[str, Any]) -> str:
    """One alternative of a oneOf in words: "measure", null, a number > 0, a 3-letter country code."""
    if "const" in schema:
        return json.dumps(schema["const"])
    if "enum" in schema:
        return " or ".join(json.dumps(v) for v in schema["enum"])
    if "description" in schema:
        return schema["description"]
    kinds = sorted(_kinds(schema))
    if kinds == ["null"]:
        return "null"
    noun = {
        "number": "a number",
        "integer": "a whole number",
        "string": "a string",
        "boolean": "true or false",
        "array": "a list",
        "object": "a mapping",
    }
    words = " or ".join(noun.get(k, k) for k in kinds) or "a value"
    bounds = [
        f"{op} {schema[k]}"
        for k, op in (("minimum", "≥"), ("exclusiveMinimum", ">"), ("maximum", "≤"), ("exclusiveMaximum", "<"))
        if k in schema
    ]
    if "pattern" in schema:
        bounds.append(f"matching {schema['pattern']}")
    return " ".join([words, *bounds])


def _message(error, with_key: bool = True) -> str:
    """A schema error as a sentence naming the key and what is allowed."""
    text = _number_as_text(error)
    if text is None and error.validator in ("oneOf", "anyOf") and error.context:  # no branch fits (not: two fit)
        options = [_branch(b) for b in error.validator_value]
        allowed = options[0] if len(options) == 1 else ", ".join(options[:-1]) + " or " + options[-1]
        text = f"{_show(error.instance)} is not allowed; give {allowed}"
    text = text or error.message
    return f"{_key_path(error.absolute_path)}: {text}" if with_key else text


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
    problems += _stopping_problems(cfg)
    problems += _eval_window_problems(cfg)
    base = _model_problems(cfg["model"], cfg["tokenizer"], "")
    base += _architecture_problems(cfg["model"], lambda f: _base_key(cfg["model"], f), "")
    base += _pretrained_problems(cfg["model"], cfg["tokenizer"], "model.", "tokenizer.")
    problems += base
    for level, spec in cfg["design"].get("model", {}).items():
        prefix = f"design.model.{level}."
        model = merged_model(cfg["model"], spec)
        tokenizer = {**cfg["tokenizer"], **spec.get("tokenizer", {})}
        found = [
            f"{prefix}{_key_path(e.absolute_path) if e.absolute_path else '(level)'}: {_message(e, with_key=False)}"
            for e in Draft202012Validator(schema["properties"]["model"]).iter_errors(model)
        ]
        found += [
            f"{prefix}tokenizer.{_key_path(e.absolute_path)}: {_message(e, with_key=False)}"
            for e in Draft202012Validator(schema["properties"]["tokenizer"]).iter_errors(tokenizer)
        ]
        if not found:
            found = _model_problems(model, tokenizer, prefix)
            found += _architecture_problems(
                model,
                lambda f, spec=spec, prefix=prefix: _level_key(cfg["model"], spec, prefix, f),
                f" (design.model.{level})",
            )
            # A level's own keys are named under it; what it inherits was checked (and named) as the base's.
            found += _pretrained_problems(
                model if {"source", "name", "revision"} & set(spec) else None,
                tokenizer if "tokenizer" in spec else None,
                prefix,
                prefix + "tokenizer.",
            )
        # What the level inherits unchanged fails as the base's does: named once, as the base's.
        problems += [p for p in found if p not in base and p.replace(f" (design.model.{level})", "", 1) not in base]
    return problems


def _stopping_problems(cfg: dict[str, Any]) -> list[str]:
    """Stopping rules that could never act, or act on nothing: a rule decided at evaluation points needs them, and
    measured training energy; a rule the analysis replays must be complete."""
    from .stopping import StopRuleError, stop_rule  # no torch, no polars

    problems = []
    online = {
        "train.stop": cfg["train"]["stop"],
        **{f"design.stopping.{k}": v for k, v in cfg["design"].get("stopping", {}).items()},
    }
    scheduled = cfg["eval"]["points"] > 1 or bool(cfg["eval"]["at_tokens"])
    for key, rule in online.items():
        if rule == "none":
            continue
        if not scheduled:
            problems.append(
                f"{key}: a stopping rule is decided at evaluation points, and eval.points is {cfg['eval']['points']} "
                "with no eval.at_tokens; set eval.points to 2 or more (or list eval.at_tokens)"
            )
        if cfg["meter"]["kind"] == "none":
            problems.append(
                f"{key}: a marginal rule weighs quality against training energy, and meter.kind none measures "
                "none; choose a meter or drop the rule"
            )
    for name, rule in cfg["analysis"]["stopping"].items():
        try:
            stop_rule(rule)
        except StopRuleError as err:
            problems.append(f"analysis.stopping.{name}: {err}")
    return problems


# A forward pass is about a third of a training step's arithmetic (forward + backward), and at the eval batch it is
# no slower per token: the plan's training tokens/s times this is what an evaluation is assumed to reach at most.
EVAL_SPEEDUP = 3.0


def measures_with_nvml(cfg: dict[str, Any]) -> bool:
    """The study's trials meter with NVML: meter.kind nvml, or auto on a CUDA device (train.device or a hardware level)."""
    if cfg["meter"]["kind"] == "nvml":
        return True
    devices = {cfg["train"]["device"]} | {
        spec.get("device") for spec in cfg["design"].get("hardware", {}).values() if isinstance(spec, dict)
    }
    return cfg["meter"]["kind"] == "auto" and "cuda" in devices


def _eval_window_problems(cfg: dict[str, Any]) -> list[str]:
    """An intermediate evaluation too short for NVML's energy counter, refused before any GPU time is spent: its
    length estimated from the pilot's throughput (plan.tokens_per_s); a trial refuses it too, once measured."""
    from ..measurement.meters import NvmlMeter, short_eval_window  # polars only, no torch

    schedule, tokens_per_s = cfg["eval"], cfg["plan"]["tokens_per_s"]
    intermediate = schedule["points"] > 1 or bool(schedule["at_tokens"])
    if not (intermediate and schedule["max_tokens"] and tokens_per_s and measures_with_nvml(cfg)):
        return []
    seconds = schedule["max_tokens"] / (EVAL_SPEEDUP * tokens_per_s)
    how = f"estimated at {EVAL_SPEEDUP:g} × plan.tokens_per_s, forward only"
    problem = short_eval_window(seconds, schedule["max_tokens"], NvmlMeter.update_period_s, how)
    return [problem] if problem else []


def _model_problems(model: dict[str, Any], tokenizer: dict[str, Any], prefix: str) -> list[str]:
    """What a model and its tokenizer need beyond the schema; ``prefix`` places them (a design level)."""
    problems = []
    for section, spec in (("tokenizer", tokenizer), ("model", model)):
        if spec["source"] == "pretrained" and not spec["name"]:
            problems.append(f"{prefix}{section}.name: {section}.source is pretrained, so give a Hub id or a local path")
    if model["source"] == "config" and model["preset"] not in PRESETS:
        problems.append(
            f"{prefix}model.preset: {model['preset']!r} is not a preset; choose one of {', '.join(sorted(PRESETS))}"
        )
    if model["implementation"] == "native" and model["source"] == "pretrained":
        problems.append(
            f"{prefix}model.implementation: native builds models from a preset; a pretrained model loads through "
            "transformers (implementation hf or auto)"
        )
    unsupported = sorted(set(model["overrides"]) - NATIVE_FIELDS)
    if model["source"] == "config" and model["implementation"] != "hf" and unsupported:
        problems.append(
            f"{prefix}model.overrides: {unsupported} need model.implementation: hf (the native Llama supports "
            f"{', '.join(sorted(NATIVE_FIELDS))})"
        )
    return problems


# How tokenwatt.plan.hub words a name that is a valid Hub id but not downloaded yet.
NOT_CACHED = "in the local Hugging Face cache"


def _pretrained_problems(
    model: dict[str, Any] | None, tokenizer: dict[str, Any] | None, model_key: str, tokenizer_key: str
) -> list[str]:
    """A pretrained name that is neither a folder here nor a Hub id in the local cache (``tokenwatt.plan.hub``)."""
    problems = []
    for kind, spec, key in (("tokenizer", tokenizer, tokenizer_key), ("model", model, model_key)):
        if spec is not None and spec["source"] == "pretrained" and spec["name"]:
            from .hub import pretrained_problem  # huggingface_hub only when a pretrained name is configured

            if (problem := pretrained_problem(kind, spec["name"], spec["revision"], key + "name")) is not None:
                problems.append(problem)
    return problems


# --- architecture: what the Llama built from a preset and its overrides needs (tokenwatt/training/model.py, llama.py)
# Set from the tokenizer by model.preset_sizes, whatever the overrides say: an override of them does nothing.
FROM_TOKENIZER = ("vocab_size", "pad_token_id", "bos_token_id", "eos_token_id")
WHOLE_SIZES = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads")
OPTIONAL_SIZES = ("num_key_value_heads", "head_dim")  # null: the LlamaConfig default


def _base_key(model: dict[str, Any], field: str) -> str:
    return f"model.overrides.{field}" if field in model["overrides"] else "model.preset"


def _level_key(base: dict[str, Any], spec: dict[str, Any], prefix: str, field: str) -> str:
    """The key that set ``field`` of a model level: its own overrides or preset, else what it inherits."""
    if field in spec.get("overrides", {}):
        return f"{prefix}overrides.{field}"
    if "preset" in spec:
        return f"{prefix}preset"
    if "overrides" in spec or field not in base["overrides"]:
        return "model.preset"
    return f"model.overrides.{field}"


def _divisors(n: int) -> str:
    return ", ".join(str(d) for d in range(1, n + 1) if n % d == 0)


def _architecture_problems(model: dict[str, Any], key_of, where: str) -> list[str]:
    """Heads that divide the hidden size, KV heads that divide the heads, an even head dimension (rotary
    embeddings rotate pairs), whole positive sizes, no override the tokenizer decides; ``key_of(field)``
    names the key that set a field, ``where`` the design level when that key is the base model's."""
    if model["source"] != "config" or model["preset"] not in PRESETS:
        return []
    sizes = {**PRESETS[model["preset"]], **model["overrides"]}
    at = lambda field: f"{key_of(field)}{where if not key_of(field).startswith('design.') else ''}"  # noqa: E731
    problems = [
        f"{at(f)}: {f} comes from the tokenizer (a trained BPE's tokenizer.vocab_size, or the pretrained "
        "tokenizer's own), never from the model; remove it"
        for f in FROM_TOKENIZER
        if f in model["overrides"]
    ]
    if model["overrides"].get("tie_word_embeddings"):
        problems.append(
            f"{at('tie_word_embeddings')}: tokenwatt always unties the input and output embeddings; remove it"
        )
    bad = [
        f
        for f in (*WHOLE_SIZES, *OPTIONAL_SIZES)
        if f in sizes
        and not (sizes[f] is None and f in OPTIONAL_SIZES)
        and not (isinstance(sizes[f], int) and not isinstance(sizes[f], bool) and sizes[f] >= 1)
    ]
    problems += [
        f"{at(f)}: {_show(sizes[f])} is not allowed; give a whole number ≥ 1"
        + (" (or null: the LlamaConfig default)" if f in OPTIONAL_SIZES else "")
        for f in bad
    ]
    if bad:
        return problems
    hidden, heads = sizes["hidden_size"], sizes["num_attention_heads"]
    kv, head_dim = sizes.get("num_key_value_heads") or heads, sizes.get("head_dim")
    native = model["implementation"] != "hf"  # auto builds a preset natively
    heads_key = "num_attention_heads" if "num_attention_heads" in model["overrides"] else "hidden_size"
    divides = hidden % heads == 0
    if not divides and not (native and head_dim):  # transformers' LlamaConfig asks for it even with head_dim
        problems.append(
            f"{at(heads_key)}: num_attention_heads {heads} does not divide hidden_size {hidden}; "
            f"give num_attention_heads one of {_divisors(hidden)}, or hidden_size a multiple of {heads}"
        )
    elif (dim := head_dim or hidden // heads) % 2:
        if head_dim:
            problems.append(
                f"{at('head_dim')}: head_dim {head_dim} is odd; rotary position embeddings rotate pairs of "
                "dimensions, so give an even head_dim"
            )
        else:
            even = (
                ", ".join(str(d) for d in range(1, hidden + 1) if hidden % d == 0 and (hidden // d) % 2 == 0) or "none"
            )
            problems.append(
                f"{at(heads_key)}: the head dimension hidden_size / num_attention_heads = {hidden} / {heads} = {dim} "
                f"is odd; rotary position embeddings rotate pairs of dimensions, so give num_attention_heads "
                f"one of {even}"
            )
    if heads % kv:
        kv_key = "num_key_value_heads" if "num_key_value_heads" in model["overrides"] else "num_attention_heads"
        problems.append(
            f"{at(kv_key)}: num_key_value_heads {kv} does not divide num_attention_heads {heads}; "
            f"give num_key_value_heads one of {_divisors(heads)}"
        )
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


def validate_config(
    config: dict[str, Any], schema: dict[str, Any], downloads: list[str] | None = None
) -> dict[str, Any]:
    """Return a validated, canonical copy of ``config`` with every default filled in (``downloads``: see ``checked_config``)."""
    cfg = copy.deepcopy(config)
    non_finite = _non_finite(cfg)
    bad_paths = {path for path, _ in non_finite}
    errors = sorted(
        (e for e in Draft202012Validator(schema).iter_errors(cfg) if tuple(e.absolute_path) not in bad_paths),
        key=lambda e: [str(p) for p in e.absolute_path],
    )
    problems = sorted([problem for _, problem in non_finite] + [_message(e) for e in errors])
    if not problems:
        _fill_defaults(cfg, schema)
        problems = _requirements(cfg, schema)
        if downloads is not None:
            downloads += [p for p in problems if NOT_CACHED in p]
            problems = [p for p in problems if NOT_CACHED not in p]
    if problems:
        raise ConfigError("invalid tokenwatt config:\n  " + "\n  ".join(problems))
    return canonical(cfg, schema)


class _KeyLoader(yaml.SafeLoader):
    """Composes a YAML file's nodes (nothing is constructed but keys), to see every key as written."""


def _key_value(loader: _KeyLoader, node: yaml.Node) -> Any:
    try:
        return loader.construct_object(node, deep=True) if isinstance(node, yaml.ScalarNode) else repr(node.value)
    except yaml.YAMLError:
        return (node.tag, node.value)


def _repeated_keys(loader: _KeyLoader, node: yaml.Node, path: tuple, name: str) -> list[str]:
    problems = []
    if isinstance(node, yaml.MappingNode):
        first: dict[Any, yaml.Mark] = {}
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *base`: keys written beside it override it, by design
                continue
            key = _key_value(loader, key_node)
            mark = key_node.start_mark
            here = (*path, key)
            try:
                seen = first.get(key)
            except TypeError:  # an unhashable key: not a config key anyway
                continue
            if seen is None:
                first[key] = mark
            else:
                where = (
                    f"line {mark.line + 1}"
                    if seen.line != mark.line
                    else f"line {mark.line + 1}, column {mark.column + 1}"
                )
                before = f"line {seen.line + 1}" + (f", column {seen.column + 1}" if seen.line == mark.line else "")
                problems.append(
                    f"{name} {where}: {_key_path(here)} is given twice (first on {before}); the loader keeps "
                    "only the last, so remove or rename one"
                )
            problems += _repeated_keys(loader, value_node, here, name)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            problems += _repeated_keys(loader, item, (*path, i), name)
    return problems


def duplicate_keys(paths) -> list[str]:
    """A key written twice in one mapping of a config file, with the file and both lines.

    Snakemake's loader (PyYAML, and json.load for JSON) keeps the last of two equal keys without a
    word, so a design with two levels of one name would silently lose one. A file that cannot be read
    or parsed is left to Snakemake, which has loaded it already and says so itself.
    """
    problems = []
    for path in paths:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        name = os.path.relpath(path) if not os.path.relpath(path).startswith("..") else str(path)
        loader = _KeyLoader(text)
        try:
            node = loader.get_single_node()
            if node is not None:
                problems += _repeated_keys(loader, node, (), name)
        except yaml.YAMLError:
            continue
        finally:
            loader.dispose()
    return problems


def checked_config(
    config: dict[str, Any], schema: dict[str, Any], configfiles=(), downloads: list[str] | None = None
) -> dict[str, Any]:
    """``validate_config`` after the config files' duplicate keys, every problem in one ConfigError; with
    ``downloads`` (a list: a dry run), a pretrained name that is only missing from the local cache is put there
    instead of refused, so a study can be planned before its weights are downloaded."""
    problems = duplicate_keys(configfiles)
    try:
        validated = validate_config(config, schema, downloads)
    except ConfigError as err:
        problems += str(err).split("\n  ")[1:]
    if problems:
        raise ConfigError("invalid tokenwatt config:\n  " + "\n  ".join(problems))
    return validated


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
                sub = {
                    **sub,
                    "enum": [
                        o["const"]
                        if "const" in o
                        else o["type"]
                        + "".join(f" {op} {o[k]}" for k, op in (("minimum", "≥"), ("exclusiveMinimum", ">")) if k in o)
                        for o in sub["oneOf"]
                    ],
                }
            allowed = " \\| ".join(map(str, sub["enum"])) if "enum" in sub else sub.get("type", "")
            if isinstance(allowed, list):
                allowed = " or ".join(allowed)
            bounds = [
                f"{op} {sub[k]}"
                for k, op in (("minimum", "≥"), ("exclusiveMinimum", ">"), ("maximum", "≤"))
                if k in sub
            ]
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
