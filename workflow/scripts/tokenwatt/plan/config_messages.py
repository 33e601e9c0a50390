"""A config's problems in words: schema errors as sentences that name the key's path (``study.budgets[0]``) and
what is allowed, a value as the config file spells it, and the numbers YAML reads as text."""

from __future__ import annotations

import difflib
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


def _section_keys(schema: dict[str, Any], path: tuple[str, ...] = ()) -> dict[str, list[tuple[str, ...]]]:
    """Every key the schema names, at every depth: key → the paths it sits at (``lr`` → [("train", "lr")])."""
    found: dict[str, list[tuple[str, ...]]] = {}
    for name, sub in schema.get("properties", {}).items():
        found.setdefault(name, []).append((*path, name))
        if isinstance(sub, dict):
            for key, paths in _section_keys(sub, (*path, name)).items():
                found.setdefault(key, []).extend(paths)
    return found


def _unknown_keys(error: ValidationError, with_key: bool, root: dict[str, Any] | None) -> str:
    """A key the schema does not know, one sentence per key: the sections where the same name is a key (``lr`` under
    ``study`` is ``train.lr``), else the closest key at that level (difflib), else the keys allowed there.
    jsonschema's own sentence ("Additional properties are not allowed") names neither the key's path nor the fix."""
    known = sorted(error.schema.get("properties", {}))
    section = key_path(error.absolute_path) if error.absolute_path else "the top level"
    lines = []
    for key in (k for k in error.instance if k not in known):
        near = difflib.get_close_matches(str(key), known, n=1, cutoff=0.6)
        elsewhere = _section_keys(root or {}).get(str(key), [])
        if elsewhere:  # the exact name in another section beats a fuzzy match here (train.budgets is study.budgets)
            fix = "did you mean " + " or ".join(key_path(p) for p in elsewhere) + "?"
        elif near:
            fix = f"did you mean {key_path((*error.absolute_path, near[0])) if with_key else near[0]}?"
        else:
            fix = "the keys there: " + ", ".join(known)
        name = key_path((*error.absolute_path, key)) if with_key else repr(key)
        lines.append(f"{name}: not a key of {section} ({fix})" if with_key else f"{name} is not a key here ({fix})")
    # with the key, one problem per key (the caller joins problems with this separator); without, one sentence
    return ("\n  " if with_key else "; ").join(lines)


def message(error: ValidationError, with_key: bool = True, root: dict[str, Any] | None = None) -> str:
    """A schema error as a sentence naming the key and what is allowed (``root``: the whole schema, where a key
    given in the wrong section is looked for)."""
    if (
        error.validator == "additionalProperties"
        and error.validator_value is False
        and isinstance(error.instance, dict)
    ):
        return _unknown_keys(error, with_key, root)
    text = _number_as_text(error)
    if text is None and error.validator in ("oneOf", "anyOf") and error.context:  # no branch fits (not: two fit)
        options = [_branch(b) for b in error.validator_value]
        allowed = options[0] if len(options) == 1 else ", ".join(options[:-1]) + " or " + options[-1]
        text = f"{show(error.instance)} is not allowed; give {allowed}"
    text = text or error.message
    return f"{key_path(error.absolute_path)}: {text}" if with_key else text
