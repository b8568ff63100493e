"""A Qwen3 checkpoint on disk: where it is (a local directory or the Hugging Face cache, never the
network), its config.json read and checked to be a Qwen3's, and its own tokenizer.

:func:`mismatch.models.load_model` builds the model from what this module finds; the checks run
before any weights are read, so a wrong directory costs no loading time.
"""

from __future__ import annotations

import json
import os
from typing import Any

from mismatch.checks import FieldError, shown
from mismatch.prompts import HFTokenizer, Tokenizer

TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json")
MODEL_TYPES = ("qwen3",)  # config.json model_type a --model checkpoint must have


def resolve_local(name_or_path: str) -> str:
    """A local directory, or a snapshot of the HF cache for a hub id; FileNotFoundError otherwise."""
    if os.path.isdir(name_or_path):
        if not os.path.isfile(os.path.join(name_or_path, "config.json")):
            raise FileNotFoundError(f"model path {name_or_path!r} is a directory without config.json")
        return name_or_path
    if os.path.exists(name_or_path):  # a file (or a device): there, but no checkpoint
        raise FileNotFoundError(
            f"model path {name_or_path!r} is a file, not a model directory; pass the checkpoint's "
            "directory (the one holding config.json and the weights)"
        )
    looks_like_path = name_or_path.startswith((".", "/", "~")) or name_or_path.count("/") != 1
    if looks_like_path:
        raise FileNotFoundError(
            f"model path {name_or_path!r} does not exist; pass a local checkpoint directory, a hub id "
            "already in the Hugging Face cache, or use --random-0.6b for a labelled random stand-in"
        )
    from huggingface_hub import snapshot_download

    try:
        return str(snapshot_download(name_or_path, local_files_only=True))
    except Exception as exc:  # huggingface_hub raises several types for "not cached"
        raise FileNotFoundError(
            f"weights for {name_or_path!r} are not in the local Hugging Face cache and this probe never "
            "downloads; pass a local directory, or use --random-0.6b for a labelled random stand-in"
        ) from exc


def read_config(name_or_path: str, path: str) -> dict[str, Any]:
    """``path/config.json`` as a dict; FieldError (field ``model``, naming ``--model``) when it
    cannot be read, is not valid JSON or is not a JSON object. Read before the tokenizer, whose
    loader would otherwise report a broken config.json as "no usable tokenizer files"."""
    file = os.path.join(path, "config.json")
    try:
        with open(file, encoding="utf-8") as fh:
            text = fh.read()
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise FieldError(
            f"model {name_or_path!r} (--model): cannot read {file} ({why})", "model", file
        ) from None
    try:
        cfg = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FieldError(
            f"model {name_or_path!r} (--model): {file} is not valid JSON ({exc})", "model", file
        ) from None
    if not isinstance(cfg, dict):
        raise FieldError(
            f"model {name_or_path!r} (--model): {file} is not a JSON object (got {type(cfg).__name__})",
            "model",
            file,
        )
    return cfg


def check_architecture(name_or_path: str, cfg: dict[str, Any], file: str | None = None) -> None:
    """FieldError (field ``model``, naming ``--model`` and the ``model_type`` found) unless
    config.json says the checkpoint is a Qwen3 (``model_type`` in :data:`MODEL_TYPES`). The probe
    is about Qwen3's computation paths; any other causal LM (GPT-2, Llama), or a model whose LM
    head ``from_pretrained`` would initialise at random (BERT), was run and labelled REAL."""
    found = cfg.get("model_type")
    if found not in MODEL_TYPES:
        what = f"model_type {shown(found)}" if "model_type" in cfg else "no model_type"
        raise FieldError(
            f"model {name_or_path!r} (--model): its config.json has {what}, but this probe measures "
            f"the Qwen3 architecture (model_type {' or '.join(map(repr, MODEL_TYPES))}); use a Qwen3 "
            "checkpoint, or --random-0.6b for a labelled random stand-in",
            "model",
            file,
        )


def load_tokenizer(name_or_path: str) -> Tokenizer:
    """The checkpoint's own tokenizer, from the same local directory or cache entry."""
    from transformers import AutoTokenizer

    path = resolve_local(name_or_path)
    if not any(os.path.isfile(os.path.join(path, f)) for f in TOKENIZER_FILES):
        # transformers 5 would silently build an empty tokenizer from config.json alone
        raise FileNotFoundError(
            f"no tokenizer files ({', '.join(TOKENIZER_FILES)}) for model {name_or_path!r} in {path}"
        )
    try:
        tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    except (OSError, ValueError) as exc:
        raise FileNotFoundError(f"no usable tokenizer files for model {name_or_path!r} in {path}") from exc
    return HFTokenizer(tok, name_or_path)


def config_vocab_size(cfg: dict[str, Any]) -> int | None:
    """``vocab_size`` of a config.json's dict (or of its ``text_config``), read without building
    the model; None where the file does not say (the model's own default then applies)."""
    for where in (cfg, cfg.get("text_config")):
        if isinstance(where, dict):
            value = where.get("vocab_size")
            if isinstance(value, int) and not isinstance(value, bool):
                return value
    return None


def check_vocab(model: str, vocab_size: int | None, n_tokens: int | None, pad_id: int | None = None) -> None:
    """FieldError (field ``vocab_size``) naming both sizes when the tokenizer can produce an id the
    model has no embedding row for: the forward pass would fail inside torch with "index out of
    range in self". A tokenizer smaller than the vocabulary is normal (Qwen3 pads its table)."""
    if vocab_size is None:
        return
    if n_tokens is not None and n_tokens > vocab_size:
        raise FieldError(
            f"model {model!r}: its tokenizer has {n_tokens} tokens but config.json's vocab_size is "
            f"{vocab_size}, so token ids {vocab_size} to {n_tokens - 1} have no embedding; are the "
            "tokenizer files from another model?",
            "vocab_size",
        )
    if pad_id is not None and not 0 <= pad_id < vocab_size:
        raise FieldError(
            f"model {model!r}: the tokenizer's pad id {pad_id} is outside config.json's vocab_size "
            f"{vocab_size} (ids 0 to {vocab_size - 1})",
            "vocab_size",
        )
