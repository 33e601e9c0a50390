"""Models: a Llama built from a named preset (no download) in either implementation, or pretrained weights."""

from __future__ import annotations

from typing import Any

import torch

from ..plan.presets import PRESETS
from .llama import ImplementationError, NativeLlama, init_weights, sizes_from


class ModelError(ValueError):
    pass


IMPLEMENTATIONS = ("native", "hf")


def preset_sizes(
    preset: str, overrides: dict[str, Any], tokenizer: dict[str, Any], max_positions: int
) -> dict[str, Any]:
    """The LlamaConfig fields of a preset with its overrides; vocabulary and special ids from the tokenizer."""
    if preset not in PRESETS:
        raise ModelError(f"model.preset is {preset!r}; choose one of {sorted(PRESETS)}")
    sizes = {**PRESETS[preset], **overrides}
    return {
        **sizes,
        "vocab_size": tokenizer["vocab_size"],
        "pad_token_id": tokenizer["pad_token_id"],
        "bos_token_id": tokenizer["bos_token_id"],
        "eos_token_id": tokenizer["eos_token_id"],
        "max_position_embeddings": max(max_positions, sizes.get("max_position_embeddings", 0)),
        "tie_word_embeddings": False,
    }


def build_model(sizes: dict[str, Any], seed: int, implementation: str = "native") -> torch.nn.Module:
    """A freshly initialised Llama in either implementation; the trial's seed fixes the initial
    weights, identically for both (``llama.init_weights``)."""
    if implementation == "native":
        try:
            model = NativeLlama(sizes_from(sizes))
        except (ImplementationError, TypeError) as err:
            raise ModelError(str(err)) from err
    elif implementation == "hf":
        from transformers import LlamaConfig, LlamaForCausalLM

        try:
            config = LlamaConfig(**sizes)
        except (TypeError, ValueError) as err:
            raise ModelError(f"model.overrides: {err}") from err
        model = LlamaForCausalLM(config)
    else:
        raise ModelError(f"model.implementation is {implementation!r}; choose one of {IMPLEMENTATIONS}")
    init_weights(model, seed, std=sizes.get("initializer_range", 0.02), pad_token_id=sizes["pad_token_id"])
    return model


def load_pretrained(name: str, revision: str | None = None, trust_remote_code: bool = False) -> torch.nn.Module:
    """``from_pretrained`` with safetensors only: every trial starts from the same weights."""
    from transformers import AutoModelForCausalLM

    try:
        return AutoModelForCausalLM.from_pretrained(
            name, revision=revision, use_safetensors=True, trust_remote_code=trust_remote_code, dtype=torch.float32
        )
    except (OSError, ValueError) as err:  # ValueError: a name that is neither a Hub id nor a folder
        raise ModelError(
            f"model.name {name!r} could not be loaded with safetensors weights ({err}); give a Hub id or an existing "
            "folder saved with save_pretrained(safe_serialization=True) (on an offline machine, a local folder)"
        ) from err


def check_tokenizer_matches(model: torch.nn.Module, tokenizer: dict[str, Any]) -> list[str]:
    """Every token id must index the embedding, and the pad ids must agree; returns notes worth logging."""
    n_embed = model.get_input_embeddings().num_embeddings
    if tokenizer["vocab_size"] > n_embed:
        raise ModelError(
            f"the tokenizer has {tokenizer['vocab_size']} tokens but the model's embedding has {n_embed} rows; "
            "use the model's own tokenizer (tokenizer.name = model.name)"
        )
    model_pad = getattr(model.config, "pad_token_id", None)
    if model_pad is not None and model_pad != tokenizer["pad_token_id"]:
        raise ModelError(
            f"the tokenizer pads with id {tokenizer['pad_token_id']} but the model's pad_token_id is {model_pad}"
        )
    if n_embed > tokenizer["vocab_size"]:
        return [
            f"the model's embedding has {n_embed} rows but the tokenizer uses {tokenizer['vocab_size']} ids: "
            f"{n_embed - tokenizer['vocab_size']} rows are never used, yet counted in params (and so in PE)"
        ]
    return []


def parameter_count(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def describe(model: torch.nn.Module) -> dict[str, Any]:
    """Architecture facts the FLOP estimate needs."""
    cfg = model.config
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    return {
        "params": parameter_count(model),
        "embedding_params": model.get_input_embeddings().weight.numel(),
        # A head that shares the embedding's matrix still multiplies by it: the FLOP estimate must keep it.
        "tied_embeddings": head is not None and head.weight is model.get_input_embeddings().weight,
        "n_layers": cfg.num_hidden_layers,
        "hidden_size": cfg.hidden_size,
        "vocab_size": model.get_input_embeddings().num_embeddings,
        "architecture": type(model).__name__,
        "implementation": getattr(model, "implementation", "hf"),
    }
