"""Deterministic bug-fix prompts and a byte-level tokenizer for models without one.

The chapter's probe feeds 30 "issue + source + '# the bug is'" prompts from its coding gym. We
do not depend on another package for them: ten small buggy Python snippets, each written in three
renamings, give 30 distinct prompts; asking for more cycles through the same snippets with a
numbered issue line, so ``make_prompts(n)`` is deterministic for every ``n``.

A model with random weights has no tokenizer. ``ByteTokenizer`` maps UTF-8 bytes to ids 0..255
and uses a separate pad id, so the same prompt text gives the same ids on every machine. With a
real checkpoint the probe uses that checkpoint's own tokenizer instead (``HFTokenizer``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from mismatch.checks import FieldError, refuse

# (issue text, source template). ``{f}`` is the function name, ``{x}`` the main argument name.
_BUGS: tuple[tuple[str, str], ...] = (
    (
        "mean of an empty list crashes",
        "def {f}({x}):\n    return sum({x}) / len({x})\n",
    ),
    (
        "off-by-one: the last element is skipped",
        "def {f}({x}):\n    total = 0\n    for i in range(len({x}) - 1):\n        total += {x}[i]\n"
        "    return total\n",
    ),
    (
        "mutable default argument leaks state between calls",
        "def {f}(item, {x}=[]):\n    {x}.append(item)\n    return {x}\n",
    ),
    (
        "string comparison with 'is' fails for built strings",
        "def {f}({x}):\n    if {x} is 'yes':\n        return True\n    return False\n",
    ),
    (
        "integer division drops the fraction",
        "def {f}({x}, n):\n    return {x} // n\n",
    ),
    (
        "dictionary lookup raises KeyError for a missing key",
        "def {f}({x}, key):\n    return {x}[key] + 1\n",
    ),
    (
        "the loop modifies the list it iterates over",
        "def {f}({x}):\n    for v in {x}:\n        if v < 0:\n            {x}.remove(v)\n    return {x}\n",
    ),
    (
        "file handle is never closed",
        "def {f}({x}):\n    fh = open({x})\n    return fh.read().splitlines()\n",
    ),
    (
        "max of the list is wrong for all-negative input",
        "def {f}({x}):\n    best = 0\n    for v in {x}:\n        if v > best:\n            best = v\n"
        "    return best\n",
    ),
    (
        "recursion has no base case for n == 0",
        "def {f}(n, {x}=1):\n    if n == 1:\n        return {x}\n    return {f}(n - 1, {x} * n)\n",
    ),
)
_NAMES: tuple[tuple[str, str], ...] = (("compute", "values"), ("process", "items"), ("helper", "data"))


def make_prompts(n: int = 30) -> list[str]:
    """``n`` deterministic bug-fix prompts: issue line, buggy source, then ``# the bug is``."""
    if n < 1:
        raise FieldError(f"n (number of prompts) must be >= 1, got {n}", "n")
    out: list[str] = []
    base = len(_BUGS) * len(_NAMES)
    for i in range(n):
        issue, template = _BUGS[i % len(_BUGS)]
        f, x = _NAMES[(i // len(_BUGS)) % len(_NAMES)]
        tag = f" (report {i // base + 1})" if i >= base else ""
        source = template.format(f=f, x=x)
        out.append(f"# Issue: {issue}{tag}\n{source}# the bug is")
    return out


class Tokenizer(Protocol):
    """What the probe needs from a tokenizer: text -> ids, and an id to pad with."""

    @property
    def pad_id(self) -> int: ...

    @property
    def name(self) -> str: ...

    def encode(self, text: str) -> list[int]: ...


@dataclass(frozen=True)
class ByteTokenizer:
    """UTF-8 bytes as ids 0..255; ``pad_id`` must lie outside that range and inside the vocab."""

    pad_id: int = 256
    name: str = "bytes"

    def __post_init__(self) -> None:
        if self.pad_id < 256:
            raise refuse("pad_id", f"must be >= 256 (ids 0..255 are bytes), got {self.pad_id}")

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))


class HFTokenizer:
    """A transformers tokenizer seen through the ``Tokenizer`` protocol (no special tokens added)."""

    def __init__(self, tokenizer: Any, name: str) -> None:
        self._tok = tokenizer
        self.name = name
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        if pad is None:
            raise FieldError(f"tokenizer {name!r} has neither a pad nor an eos token id", "tokenizer")
        self.pad_id = int(pad)
        self.n_tokens = len(tokenizer)  # with added tokens: the ids it can produce are below this

    def encode(self, text: str) -> list[int]:
        return [int(i) for i in self._tok(text, add_special_tokens=False)["input_ids"]]
