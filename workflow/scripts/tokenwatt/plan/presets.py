"""Named Llama architectures for ``model.source: config``; kept apart from the model code so the
config check can name them without importing torch."""

from __future__ import annotations

from typing import Any

# Sizes of LlamaConfig; vocab_size and special ids always come from the tokenizer.
PRESETS: dict[str, dict[str, Any]] = {
    # ~0.1 M parameters with a 1 K vocabulary: the embedded default on a laptop CPU.
    "llama-tiny": dict(
        hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2
    ),
    # ~1.3 M parameters with a 1 K vocabulary: a larger CPU or small GPU study.
    "llama-small": dict(
        hidden_size=128, intermediate_size=344, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2
    ),
    # The reference architecture (TinyLlama 1.1B), initialised from scratch.
    "tinyllama-1.1b": dict(
        hidden_size=2048,
        intermediate_size=5632,
        num_hidden_layers=22,
        num_attention_heads=32,
        num_key_value_heads=4,
        rms_norm_eps=1e-5,
        rope_theta=10000.0,
    ),
}

# LlamaConfig fields the native implementation (tokenwatt/training/llama.py) supports; any other
# override needs model.implementation: hf. Here so the config check can say so without torch.
NATIVE_FIELDS = frozenset(
    {
        "vocab_size",
        "hidden_size",
        "intermediate_size",
        "num_hidden_layers",
        "num_attention_heads",
        "num_key_value_heads",
        "head_dim",
        "rms_norm_eps",
        "rope_theta",
        "max_position_embeddings",
        "initializer_range",
        "pad_token_id",
        "bos_token_id",
        "eos_token_id",
        "hidden_act",
        "tie_word_embeddings",
    }
)
