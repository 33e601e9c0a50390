"""Model families at one named size (``model.architecture``, ``design.architecture``): the size is a Llama's (a
preset with its overrides, ``presets.py``), and every other family keeps its hidden size, depth and vocabulary and
derives the width of its mixing or feed-forward block, so that its non-embedding parameters (every parameter but the
input embedding and the output head, which the shared hidden size and vocabulary make equal anyway) match the Llama's.

Counted here in closed form, without torch, so the config check can refuse a size no family can match before any job;
``tests/test_architectures.py`` holds every count to the parameters of the model ``training/model.py`` builds.
"""

from __future__ import annotations

import math
from typing import Any

# The families, the first the default: its shape is the named size itself.
FAMILIES = ("llama", "gpt-neox", "mamba")
# How far a derived family's non-embedding parameters may lie from the Llama's (the bar: 5 %).
MATCH_TOLERANCE = 0.05
# Pythia's GPT-NeoX: rotary embeddings on a quarter of each head, biases, parallel residual, GELU (transformers'
# GPTNeoXConfig defaults but the rotary share, which it takes as partial_rotary_factor).
NEOX_ROTARY_SHARE = 0.25
# Mamba (Gu & Dao 2023) as transformers' MambaConfig builds it: a 16-wide state, a 4-tap causal convolution, the
# step's rank ceil(hidden / 16); only the inner width (expand × hidden there) is derived here.
MAMBA_STATE = 16
MAMBA_CONV = 4


class ArchitectureError(ValueError):
    pass


def _head_dim(sizes: dict[str, Any]) -> int:
    return sizes.get("head_dim") or sizes["hidden_size"] // sizes["num_attention_heads"]


def llama_layer_params(sizes: dict[str, Any]) -> int:
    """One decoder layer: q and o projections, GQA's narrower k and v, the gated MLP's three matrices, two RMSNorms."""
    d, ff, hd = sizes["hidden_size"], sizes["intermediate_size"], _head_dim(sizes)
    q = sizes["num_attention_heads"] * hd
    kv = (sizes.get("num_key_value_heads") or sizes["num_attention_heads"]) * hd
    return 2 * d * q + 2 * d * kv + 3 * d * ff + 2 * d


def neox_layer_params(hidden: int, inner: int) -> int:
    """One GPT-NeoX layer: fused qkv and output projections with biases, two LayerNorms (weight and bias), the
    two-matrix MLP with biases."""
    return 4 * hidden * hidden + 4 * hidden + 4 * hidden + 2 * hidden * inner + inner + hidden


def mamba_layer_params(hidden: int, inner: int) -> int:
    """One Mamba block: in_proj (x and gate, no bias), the depthwise convolution with bias, x_proj (the step's rank
    and B, C), dt_proj with bias, A_log (inner × state), D, out_proj, one RMSNorm."""
    rank = math.ceil(hidden / 16)
    per_inner = 3 * hidden + (MAMBA_CONV + 1) + (rank + 2 * MAMBA_STATE) + (rank + 1) + MAMBA_STATE + 1
    return inner * per_inner + hidden


def non_embedding_params(family: str, sizes: dict[str, Any]) -> int:
    """The family's parameters but the input embedding and output head, for its config fields (``family_config``)."""
    d, layers = sizes["hidden_size"], sizes["num_hidden_layers"]
    if family == "llama":
        return layers * llama_layer_params(sizes) + d
    if family == "gpt-neox":
        return layers * neox_layer_params(d, sizes["intermediate_size"]) + 2 * d
    if family == "mamba":
        return layers * mamba_layer_params(d, sizes["intermediate_size"]) + d
    raise ArchitectureError(f"model.architecture is {family!r}; choose one of {', '.join(FAMILIES)}")


def _matched_width(family: str, sizes: dict[str, Any], target: int) -> int:
    """The inner width whose non-embedding parameters come nearest ``target`` (each count is linear in it)."""
    d, layers = sizes["hidden_size"], sizes["num_hidden_layers"]
    layer = neox_layer_params if family == "gpt-neox" else mamba_layer_params
    fixed = non_embedding_params(family, {**sizes, "intermediate_size": 0})
    per_width = layer(d, 1) - layer(d, 0)
    return max(1, round((target - fixed) / (layers * per_width)))


def family_config(family: str, sizes: dict[str, Any]) -> dict[str, Any]:
    """The config fields of ``family`` at the named size ``sizes`` (a Llama's fields, vocabulary and special ids
    included, as ``model.preset_sizes`` gives them): the Llama's own, or the other family's, with the same hidden size,
    depth, heads and vocabulary and the inner width that matches the Llama's non-embedding parameters within
    ``MATCH_TOLERANCE``; a size too small to match (a GPT-NeoX's full attention alone past the Llama's layer) is an
    error naming the key that sets it."""
    if family == "llama":
        return dict(sizes)
    if family not in FAMILIES:
        raise ArchitectureError(f"model.architecture is {family!r}; choose one of {', '.join(FAMILIES)}")
    target = non_embedding_params("llama", sizes)
    shared = {k: sizes[k] for k in ("vocab_size", "hidden_size", "num_hidden_layers", "max_position_embeddings")}
    ids = {k: sizes[k] for k in ("pad_token_id", "bos_token_id", "eos_token_id")}
    width = _matched_width(family, sizes, target)
    if family == "gpt-neox":
        head = sizes["hidden_size"] // sizes["num_attention_heads"]
        if head % 8:  # a quarter of the head's dimensions, rotated in pairs
            raise ArchitectureError(
                "model.overrides.num_attention_heads: gpt-neox rotates a quarter of each head's dimensions in pairs, "
                f"so hidden_size / num_attention_heads must be a multiple of 8 (it is {head})"
            )
        config = {**shared, **ids, "intermediate_size": width, "num_attention_heads": sizes["num_attention_heads"]}
        config["rope_parameters"] = {"rope_type": "default", "partial_rotary_factor": NEOX_ROTARY_SHARE}
        config["rope_parameters"]["rope_theta"] = sizes.get("rope_theta", 10000.0)
    else:
        config = {**shared, **ids, "intermediate_size": width, "state_size": MAMBA_STATE, "conv_kernel": MAMBA_CONV}
    config["tie_word_embeddings"] = False
    got = non_embedding_params(family, config)
    if abs(got / target - 1) > MATCH_TOLERANCE:
        raise ArchitectureError(
            f"model.preset: at this size (hidden_size {sizes['hidden_size']}, {target:,} non-embedding parameters) "
            f"the nearest {family} has {got:,}, more than {MATCH_TOLERANCE:.0%} away; give the Llama a wider "
            "intermediate_size (model.overrides) or another preset"
        )
    return config
