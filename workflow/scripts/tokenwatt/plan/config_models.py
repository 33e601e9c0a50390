"""What a model and its tokenizer need beyond the schema: a pretrained name to load from, a preset that exists, an
implementation that can build it, and an architecture the Llama can run (tokenwatt/training/model.py, llama.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .architectures import ArchitectureError, family_config
from .config_messages import show
from .presets import NATIVE_FIELDS, PRESETS


def model_problems(model: dict[str, Any], tokenizer: dict[str, Any], prefix: str) -> list[str]:
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


def pretrained_problems(
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


def base_key(model: dict[str, Any], field: str) -> str:
    return f"model.overrides.{field}" if field in model["overrides"] else "model.preset"


def level_key(base: dict[str, Any], spec: dict[str, Any], prefix: str, field: str) -> str:
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


def architecture_problems(model: dict[str, Any], key_of: Callable[[str], str], where: str) -> list[str]:
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
        f"{at(f)}: {show(sizes[f])} is not allowed; give a whole number ≥ 1"
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


def families_of(cfg: dict[str, Any]) -> tuple[list[str], str]:
    """The families the study builds (design.architecture, else model.architecture, absent: llama) and their key."""
    if levels := cfg["design"].get("architecture"):
        return list(levels), "design.architecture"
    return [cfg["model"].get("architecture", "llama")], "model.architecture"


def family_problems(model: dict[str, Any], families: list[str], key: str, where: str) -> list[str]:
    """What a family other than the Llama needs of a model the study builds (``where``: ``model`` or a design.model
    level): a preset to size it (not pretrained weights, whose family is their own), transformers to train it, and a
    size at which its inner width can match the Llama's parameters (``architectures.family_config``)."""
    others = [f for f in families if f != "llama"]
    if not others:
        return []
    if model["source"] != "config":
        return [f"{key}: {', '.join(others)} take the size of a preset; {where} loads pretrained weights instead"]
    problems = []
    if model["implementation"] == "native":
        problems.append(
            f"{where}.implementation: native is tokenwatt's Llama, and {key} asks for {', '.join(others)}, which "
            "train through transformers; set implementation auto (native for the Llama, hf for the others)"
        )
    # The tokenizer's ids and the context do not change the shape: placeholders size the check.
    sizes = {**PRESETS[model["preset"]], **model["overrides"], "max_position_embeddings": 1}
    sizes |= {f: 0 for f in FROM_TOKENIZER}
    for family in others:
        try:
            family_config(family, sizes)
        except ArchitectureError as err:
            problems.append(f"{key} {family} ({where}): {err}")
    return problems
