"""A compact Llama in plain PyTorch, numerically the same model as transformers' LlamaForCausalLM.

Why it exists: at the sizes and batch of these studies a training step is bound by per-op
overhead, not arithmetic, and the transformers model spends much of each step on generality a
study never uses (mask building for padding it does not need, a KV cache, output records).
This module does the same arithmetic in the same order with fewer ops, and needs no import of
transformers, which shortens every trial's start.

Same parameter names as ``LlamaForCausalLM`` (``model.layers.0.self_attn.q_proj.weight``, …),
so a state dict loads either way; ``tests/test_llama.py`` holds both models to the same logits
and loss. Causal attention without a padding mask is exact here because tokenwatt's chunks are
right-padded: a real token never attends to a later (padding) position, and padding targets
carry no loss. ``check_right_padded`` guards that assumption at the start of a trial.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ..plan.presets import NATIVE_FIELDS


@dataclass(frozen=True)
class LlamaSizes:
    """The LlamaConfig fields this implementation supports, with LlamaConfig's defaults."""

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int | None = None
    head_dim: int | None = None
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    max_position_embeddings: int = 2048
    initializer_range: float = 0.02
    pad_token_id: int | None = None
    bos_token_id: int | None = None
    eos_token_id: int | None = None
    hidden_act: str = "silu"
    tie_word_embeddings: bool = False

    @property
    def kv_heads(self) -> int:
        return self.num_key_value_heads or self.num_attention_heads

    @property
    def dim_per_head(self) -> int:
        return self.head_dim or self.hidden_size // self.num_attention_heads


class ImplementationError(ValueError):
    pass


def sizes_from(settings: dict[str, Any]) -> LlamaSizes:
    """Preset sizes plus overrides and the tokenizer's ids; anything this model cannot do is an error."""
    unsupported = sorted(set(settings) - NATIVE_FIELDS)
    if unsupported:
        raise ImplementationError(
            f"model.overrides {unsupported} are not supported by model.implementation native; "
            "use model.implementation: hf, which takes every LlamaConfig field"
        )
    sizes = LlamaSizes(**settings)
    if sizes.hidden_act != "silu" or sizes.tie_word_embeddings:
        raise ImplementationError("model.implementation native supports hidden_act silu and untied embeddings; use hf")
    return sizes


class RMSNorm(nn.Module):
    def __init__(self, size: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype == torch.float32:  # the residual stream's usual dtype: no casts to dispatch
            return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))
        dtype = x.dtype
        x = x.to(torch.float32)
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


def rotate(x: torch.Tensor, cos: torch.Tensor, signed_sin: torch.Tensor) -> torch.Tensor:
    """RoPE as transformers writes it, ``x * cos + cat(-x2, x1) * sin``, with the sign moved into
    ``signed_sin = cat(-sin1, sin2)`` so the rotation is one ``roll``: the same products (a sign
    flip is exact), a third of the ops."""
    return x * cos + torch.roll(x, shifts=x.shape[-1] // 2, dims=-1) * signed_sin


class Attention(nn.Module):
    def __init__(self, s: LlamaSizes) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = s.num_attention_heads, s.kv_heads, s.dim_per_head
        self.q_proj = nn.Linear(s.hidden_size, self.heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(s.hidden_size, self.kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(s.hidden_size, self.kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(self.heads * self.head_dim, s.hidden_size, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, signed_sin: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        q, k = rotate(q, cos, signed_sin), rotate(k, cos, signed_sin)
        out = F.scaled_dot_product_attention(
            q, k, v, is_causal=t > 1, scale=self.head_dim**-0.5, enable_gqa=self.kv_heads != self.heads
        )
        return self.o_proj(out.transpose(1, 2).reshape(b, t, self.heads * self.head_dim))


class MLP(nn.Module):
    def __init__(self, s: LlamaSizes) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(s.hidden_size, s.intermediate_size, bias=False)
        self.up_proj = nn.Linear(s.hidden_size, s.intermediate_size, bias=False)
        self.down_proj = nn.Linear(s.intermediate_size, s.hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, s: LlamaSizes) -> None:
        super().__init__()
        self.self_attn = Attention(s)
        self.mlp = MLP(s)
        self.input_layernorm = RMSNorm(s.hidden_size, s.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(s.hidden_size, s.rms_norm_eps)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, signed_sin: torch.Tensor) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x), cos, signed_sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class Backbone(nn.Module):
    """``LlamaForCausalLM.model``: embeddings, decoder layers, final norm."""

    def __init__(self, s: LlamaSizes) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(s.vocab_size, s.hidden_size, padding_idx=s.pad_token_id)
        self.layers = nn.ModuleList(DecoderLayer(s) for _ in range(s.num_hidden_layers))
        self.norm = RMSNorm(s.hidden_size, s.rms_norm_eps)


class NativeLlama(nn.Module):
    implementation = "native"

    def __init__(self, sizes: LlamaSizes) -> None:
        super().__init__()
        self.config = sizes
        self.model = Backbone(sizes)
        self.lm_head = nn.Linear(sizes.hidden_size, sizes.vocab_size, bias=False)
        # RoPE inverse frequencies, computed on the CPU in float32 as transformers does, and the cosine and
        # signed sine of every position up to max_position_embeddings made from them once (non-persistent
        # buffers: they move with the model and are not weights). Each position's angle is the same product
        # transformers forms per step, so a slice of the tables holds the values it computes.
        dim = self.config.dim_per_head
        inv_freq = 1.0 / (self.config.rope_theta ** (torch.arange(0, dim, 2, dtype=torch.float) / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        cos, signed_sin = rope_tables(inv_freq, sizes.max_position_embeddings)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_signed_sin", signed_sin, persistent=False)

    def get_input_embeddings(self) -> nn.Embedding:
        return self.model.embed_tokens

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Logits; ``attention_mask`` is accepted and unused (right-padded chunks, see the module docstring)."""
        x = self.model.embed_tokens(input_ids)
        t = input_ids.shape[1]
        if t <= self.rope_cos.shape[2]:
            cos, signed_sin = self.rope_cos[:, :, :t], self.rope_signed_sin[:, :, :t]
        else:  # longer than max_position_embeddings: transformers extrapolates, and so does this
            cos, signed_sin = rope_tables(self.inv_freq, t)
        cos, signed_sin = cos.to(x.dtype), signed_sin.to(x.dtype)
        for layer in self.model.layers:
            x = layer(x, cos, signed_sin)
        return self.lm_head(self.model.norm(x))


def rope_tables(inv_freq: torch.Tensor, positions: int) -> tuple[torch.Tensor, torch.Tensor]:
    """RoPE's cosine and signed sine (see ``rotate``) for positions 0..positions-1, in float32, shaped
    (1, 1, positions, head_dim) to broadcast over batch and heads."""
    with torch.autocast(device_type=inv_freq.device.type, enabled=False):
        freqs = torch.arange(positions, device=inv_freq.device)[:, None].float() * inv_freq.float()
        sin = freqs.sin()
        return torch.cat((freqs, freqs), dim=-1).cos()[None, None], torch.cat((-sin, sin), dim=-1)[None, None]


def init_weights(model: nn.Module, seed: int, std: float, pad_token_id: int | None) -> None:
    """Llama's initialisation (normal(0, std) matrices, unit norms, a zero padding row), drawn in
    parameter-name order from one seeded generator, so both implementations start from the same
    weights and neither depends on the order a library happens to build its modules in."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in sorted(model.named_parameters()):
            if name.endswith("norm.weight"):
                param.fill_(1.0)
                continue
            values = torch.empty(param.shape, dtype=torch.float32).normal_(0.0, std, generator=generator)
            if name.endswith("embed_tokens.weight") and pad_token_id is not None:
                values[pad_token_id] = 0.0
            param.copy_(values)


def check_right_padded(mask: torch.Tensor, what: str) -> None:
    """Every chunk's real tokens come first (what makes the mask-free attention exact)."""
    if mask.numel() and bool((mask[:, 1:] > mask[:, :-1]).any()):
        raise ImplementationError(
            f"{what} has padding before real tokens, which model.implementation native cannot train on exactly; "
            "use model.implementation: hf"
        )
