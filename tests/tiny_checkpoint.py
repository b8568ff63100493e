"""A local Qwen3 checkpoint small enough to build in a test: the real loading path of
:mod:`mismatch.models` (config.json, weights, a tokenizer) without a model hub.

Shared by the probe's walkthrough tests (a vocabulary larger than the tokenizer's, or smaller) and
its weights-file tests (a checkpoint to damage).
"""

from __future__ import annotations

from pathlib import Path


def tiny_checkpoint(
    path: Path, vocab_size: int = 64, n_tokens: int = 64, max_position: int = 512, seed: int | None = None
) -> Path:
    """Write a one-layer Qwen3 with ``vocab_size`` embedding rows and a word-level tokenizer of
    ``n_tokens`` tokens (the last two ``<unk>`` and ``<eos>``) into ``path``, as
    ``save_pretrained`` does (``model.safetensors``); weights seeded by ``seed`` when given (the
    global torch RNG is left as it was). Returns ``path``."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast, Qwen3Config

    words = {f"w{i}": i for i in range(n_tokens - 2)} | {"<unk>": n_tokens - 2, "<eos>": n_tokens - 1}
    raw = Tokenizer(models.WordLevel(words, unk_token="<unk>"))
    raw.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = PreTrainedTokenizerFast(
        tokenizer_object=raw, unk_token="<unk>", eos_token="<eos>", pad_token="<eos>"
    )
    tok.save_pretrained(path)
    cfg = Qwen3Config(
        vocab_size=vocab_size,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        max_position_embeddings=max_position,
        tie_word_embeddings=True,
    )
    with torch.random.fork_rng(devices=[]):
        if seed is not None:
            torch.manual_seed(seed)
        AutoModelForCausalLM.from_config(cfg, attn_implementation="eager").save_pretrained(path)
    return path
