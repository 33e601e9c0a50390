"""Tokenizers: a byte-level BPE trained on the training documents, or any pretrained one.

Both end up as a directory that ``AutoTokenizer.from_pretrained(dir)`` loads, with a pad
token defined, so later stages need not care where the tokenizer came from.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

BOS, EOS, PAD = "<|bos|>", "<|eos|>", "<|pad|>"


class TokenizerError(ValueError):
    pass


def train_bpe(texts: Iterable[str], vocab_size: int, min_frequency: int = 2):
    """Train a byte-level BPE (``tokenizers``) and wrap it as a transformers fast tokenizer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=[PAD, BOS, EOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=BOS, eos_token=EOS, pad_token=PAD)


def load_tokenizer(name_or_path: str, revision: str | None = None):
    """``AutoTokenizer.from_pretrained``; a tokenizer without a pad token pads with its EOS.

    Padding positions are masked out of the loss and never counted as real tokens, so
    which id fills them does not change training. A folder holding the generic fast tokenizer
    (the BPE ``train_bpe`` makes) loads as that class directly: AutoTokenizer would choose the same
    class, after importing every model's tokenizer mapping (1.4 s of each chunk job here).
    """
    from transformers import PreTrainedTokenizerFast

    if _saved_class(name_or_path) in {"PreTrainedTokenizerFast", PreTrainedTokenizerFast.__name__}:
        tokenizer_class = PreTrainedTokenizerFast
    else:
        from transformers import AutoTokenizer as tokenizer_class
    try:
        tok = tokenizer_class.from_pretrained(name_or_path, revision=revision)
    except (OSError, ValueError) as err:  # ValueError: a name that is neither a Hub id nor a folder
        raise TokenizerError(
            f"tokenizer.name {name_or_path!r} could not be loaded ({err}); give a Hub id or an existing folder "
            "saved with save_pretrained (on an offline machine, a local folder)"
        ) from err
    if tok.pad_token_id is None:
        if tok.eos_token_id is None:
            raise TokenizerError(f"tokenizer {name_or_path!r} has neither a pad nor an EOS token to pad with")
        tok.pad_token = tok.eos_token
    return tok


def _saved_class(name_or_path: str) -> str | None:
    """The tokenizer class a folder saved with ``save_pretrained`` names (None for a Hub id)."""
    config = Path(name_or_path) / "tokenizer_config.json"
    try:
        return json.loads(config.read_text()).get("tokenizer_class")
    except (OSError, ValueError):
        return None


def tokenizer_info(tok, source: str) -> dict[str, Any]:
    """What the model stage must match: vocabulary size and special ids."""
    return {
        "source": source,
        "vocab_size": len(tok),
        "pad_token": tok.pad_token,
        "pad_token_id": tok.pad_token_id,
        "bos_token_id": tok.bos_token_id,
        "eos_token_id": tok.eos_token_id,
    }


def save_tokenizer(tok, out_dir: str | Path) -> None:
    tok.save_pretrained(str(out_dir))
