"""A config's problems in words: schema errors as sentences that name the key's path (``study.budgets[0]``) and
what is allowed, a value as the config file spells it, and the numbers YAML reads as text."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from typing import Any

from jsonschema.exceptions import ValidationError


def key_path(parts: Iterable[str | int]) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "(top level)"


def show(value: Any) -> str:
    """A value as the config file spells it: .inf, null, true, 'text', 0.5."""
    if isinstance(value, float) and not math.isfinite(value):
        return ".nan" if math.isnan(value) else ("-.inf" if value < 0 else ".inf")
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    return repr(value)


def non_finite(value: Any, path: tuple = ()) -> list[tuple[tuple, str]]:
    """Every .inf, -.inf and .nan in the config, at any depth (YAML and JSON both read them as numbers,
    and the schema's bounds let .inf through): (path, problem)."""
    if isinstance(value, float) and not math.isfinite(value):
        return [(path, f"{key_path(path)}: {show(value)} is not a finite number; give a finite value")]
    if isinstance(value, dict):
        return [found for k, v in value.items() for found in non_finite(v, (*path, k))]
    if isinstance(value, list):
        return [found for i, v in enumerate(value) for found in non_finite(v, (*path, i))]
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


def _number_as_text(error: ValidationError) -> str | None:
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
            f"{show(value)} is a string, not a number (quoted in a file, or nested in --config, which passes "
            f"nested values as text); write {fix} without quotes in a config file"
        )
    return f"{show(value)} is a string ({why}); write {fix}"


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


def message(error: ValidationError, with_key: bool = True) -> str:
    """A schema error as a sentence naming the key and what is allowed."""
    text = _number_as_text(error)
    if text is None and error.validator in ("oneOf", "anyOf") and error.context:  # no branch fits (not: two fit)
        options = [_branch(b) for b in error.validator_value]
        allowed = options[0] if len(options) == 1 else ", ".join(options[:-1]) + " or " + options[-1]
        text = f"{show(error.instance)} is not allowed; give {allowed}"
    text = text or error.message
    return f"{key_path(error.absolute_path)}: {text}" if with_key else text
