"""The weights files of a local checkpoint, checked before anything loads them.

``from_pretrained`` reads one of :data:`WEIGHTS_FILES` (or the file config.json names); a
directory without one, an index that lists a missing shard, or a file cut short by an interrupted
download made the probe fail after the tokenizer and the model had loaded (14 s and more), with a
``SafetensorError`` traceback or transformers' own message. :func:`check_weights` finds that file
and reads its header in about a second; :func:`load_errors` is what loading a damaged file past
its header raises, for :func:`mismatch.models.load_model` to name ``--model`` as well. Both raise
:class:`~mismatch.checks.FieldError` with field ``model`` and the file at fault.
"""

from __future__ import annotations

import json
import os
import pickle
import zipfile
from typing import Any

from mismatch.checks import FieldError

__all__ = ["WEIGHTS_FILES", "check_weights", "load_errors", "model_error"]

#: The weights files ``from_pretrained`` looks for in a local directory, in its order (transformers
#: 5: ``SAFE_WEIGHTS_NAME``, ``SAFE_WEIGHTS_INDEX_NAME``, ``WEIGHTS_NAME``, ``WEIGHTS_INDEX_NAME``),
#: unless config.json names its own (``transformers_weights``).
WEIGHTS_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)


def model_error(name_or_path: str, problem: str, file: str) -> FieldError:
    return FieldError(f"model {name_or_path!r} (--model): {problem}", "model", file)


def check_weights(name_or_path: str, path: str, cfg: dict[str, Any]) -> str:
    """The file ``from_pretrained`` will read in ``path`` (a sharded checkpoint's index) -> its
    path. FieldError (field ``model``, the file in ``file``) when there is none (naming the files
    looked for), an index lists a missing shard, or a file's header is damaged or cut short (an
    interrupted download): found here in a second, not after the tokenizer and the model load."""
    explicit = cfg.get("transformers_weights")
    names = (explicit,) if isinstance(explicit, str) else WEIGHTS_FILES
    found = next((os.path.join(path, n) for n in names if os.path.isfile(os.path.join(path, n))), None)
    if found is None:
        raise model_error(name_or_path, f"no weights file in {path} (looked for {', '.join(names)})", path)
    for file in _shards(name_or_path, found) if found.endswith(".index.json") else [found]:
        problem = _damage(file) if os.path.isfile(file) else f"missing, though {found} lists it"
        if problem:
            raise model_error(name_or_path, f"weights file {file}: {problem}; download it again", file)
    return found


def _shards(name_or_path: str, index: str) -> list[str]:
    """The shard files a ``*.index.json`` maps weights to (FieldError when it does not say)."""
    try:
        with open(index, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise model_error(name_or_path, f"cannot read the shard index {index} ({exc})", index) from None
    weight_map = data.get("weight_map") if isinstance(data, dict) else None
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise model_error(name_or_path, f"{index} has no weight_map of shard file names", index)
    if not isinstance(data.get("metadata"), dict):  # transformers reads it: a KeyError otherwise
        raise model_error(name_or_path, f"{index} has no metadata", index)
    return [os.path.join(os.path.dirname(index), n) for n in sorted(set(weight_map.values()))]


def _damage(file: str) -> str | None:
    """What is wrong with a weights file (None: nothing seen): a safetensors file's header is read
    and checked to cover the file, a zip-format ``.bin`` (torch.save) has its central directory
    read; a legacy pickle ``.bin`` is left to the loader."""
    errors: tuple[type[BaseException], ...] = (OSError, *load_errors())
    try:
        if file.endswith(".safetensors"):
            from safetensors import safe_open

            with safe_open(file, framework="pt"):
                return None
        with open(file, "rb") as fh:
            if fh.read(4) == b"PK\x03\x04":
                zipfile.ZipFile(file).close()
    except errors as exc:
        return f"{type(exc).__name__}: {exc} (damaged or incomplete, as an interrupted download leaves it)"
    return None


def load_errors() -> tuple[type[BaseException], ...]:
    """What reading a damaged weights file raises: safetensors' ``SafetensorError`` (looked up, so
    a package that does not export it costs only the name), a torch pickle's errors, a zip's."""
    try:
        import safetensors
    except ImportError:  # transformers needs it, but this error path must not
        return (pickle.UnpicklingError, EOFError, zipfile.BadZipFile)
    own = getattr(safetensors, "SafetensorError", None)
    found = (own,) if isinstance(own, type) and issubclass(own, Exception) else ()
    return (*found, pickle.UnpicklingError, EOFError, zipfile.BadZipFile)
