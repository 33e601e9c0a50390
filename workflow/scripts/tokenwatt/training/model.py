"""Models: a Llama built from a named preset (no download) in either implementation, a GPT-NeoX or Mamba of the same
size through transformers (``model.architecture``, ``plan/architectures.py``), or pretrained weights."""

from __future__ import annotations

from typing import Any

import torch

from ..plan.architectures import ArchitectureError, family_config
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


def build_model(
    sizes: dict[str, Any], seed: int, implementation: str = "native", family: str = "llama"
) -> torch.nn.Module:
    """A freshly initialised model of ``family`` at the named size ``sizes``: a Llama in either implementation, the
    trial's seed fixing its initial weights identically for both (``llama.init_weights``); another family through
    transformers (``_build_family``)."""
    if family != "llama":
        return _build_family(family, sizes, seed, implementation)
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


def _build_family(family: str, sizes: dict[str, Any], seed: int, implementation: str) -> torch.nn.Module:
    """A GPT-NeoX or Mamba from its transformers config at the Llama size ``sizes`` (no download), initialised as
    transformers initialises the family, from the trial's seed: Mamba's A, D and step biases have initial values of
    their own, which a Llama's normal draw for every matrix would destroy."""
    if implementation != "hf":
        raise ModelError(
            f"model.implementation: native is tokenwatt's Llama; model.architecture {family} trains through "
            "transformers (implementation hf or auto)"
        )
    try:
        config = family_config(family, sizes)
    except ArchitectureError as err:
        raise ModelError(str(err)) from err
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM, MambaConfig, MambaForCausalLM

    with torch.random.fork_rng(devices=[]):  # the seed draws this model's weights and leaves the caller's stream alone
        torch.manual_seed(seed)
        if family == "gpt-neox":
            return GPTNeoXForCausalLM(GPTNeoXConfig(**config))
        width = config.pop("intermediate_size")
        mamba = MambaConfig(**config)
        mamba.intermediate_size = width  # MambaConfig derives it from an integer expand; the matched width is set
        return MambaForCausalLM(mamba)


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


# transformers' model types under the names of model.architecture; any other keeps its model type.
FAMILY_OF_MODEL_TYPE = {"llama": "llama", "gpt_neox": "gpt-neox", "mamba": "mamba"}


def describe(model: torch.nn.Module) -> dict[str, Any]:
    """Architecture facts the FLOP estimate needs (``analysis.efficiency.flops_per_token``): a state-space model's scan
    its inner width and state size."""
    cfg = model.config
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    model_type = getattr(cfg, "model_type", "llama")  # the native Llama's sizes carry none
    scan = {"ssm_inner_size": cfg.intermediate_size, "ssm_state_size": cfg.state_size} if model_type == "mamba" else {}
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
        "family": FAMILY_OF_MODEL_TYPE.get(model_type, model_type),
        **scan,
    }
