"""A policy written on the command line (``--set 'weight_update=SyncEveryK(inner=Drain())'``), read
as :func:`pipesim.policies.catalog.parse_policy` reads it, with what the CLI adds around it.

* :func:`none_words`: a bare ``none`` or ``null`` argument is ``None`` (``--set timeout=none``
  spells None so elsewhere; ``AReaLThrottle(max_concurrent=none)`` was refused as an unknown name).
* :func:`inner_unknown`: an unknown policy nested in another is named by its dotted key
  (``weight_update.inner``) with only its own family's names, as a scenario file's refusal is; the
  CLI named the outer field and listed every family.
"""

from __future__ import annotations

import dataclasses
import re
import typing
from typing import Any

from pipesim.core.errors import FieldError

__all__ = ["inner_unknown", "none_words"]


def none_words(text: str) -> str:
    """``text`` with a bare ``none``/``null`` argument (``AReaLThrottle(max_concurrent=none)``, the
    CLI's spelling of None elsewhere: ``--set timeout=none``) read as ``None``; quoted text kept."""
    if "(" not in text:
        return text
    word = r"""('[^']*'|"[^"]*")|(?<![\w.])(?:none|null)(?![\w(])"""
    return re.sub(word, lambda m: m.group(1) or "None", text, flags=re.IGNORECASE)


def inner_unknown(text: str, key: str) -> FieldError | None:
    """The refusal of an unknown policy nested in ``text`` (``SyncEveryK(inner=Nope())``) naming
    its dotted key (``weight_update.inner``) and its family's names, as a file's refusal does;
    None where no nested name is unknown."""
    import ast

    from pipesim.io.scenario_schema import _PROTOCOL_KINDS
    from pipesim.policies.catalog import UnknownPolicyError, lookup

    def walk(node: ast.AST, where: str, hint: Any) -> FieldError | None:
        name = node.func.id if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) else None
        name = node.id if isinstance(node, ast.Name) and node.id not in ("inf", "nan", "None") else name
        if name is None:
            return None
        kind = _PROTOCOL_KINDS.get(getattr(hint, "__name__", ""))
        try:
            cls = lookup(name, kind)
        except UnknownPolicyError as exc:
            return FieldError(f"{where}: {exc}", where) if where != key else None
        hints = typing.get_type_hints(cls) if dataclasses.is_dataclass(cls) else {}
        fields = [f.name for f in dataclasses.fields(cls)] if dataclasses.is_dataclass(cls) else []
        named = list(zip(fields, node.args, strict=False)) if isinstance(node, ast.Call) else []
        named += [(k.arg, k.value) for k in getattr(node, "keywords", []) if k.arg is not None]
        found = (walk(v, f"{where}.{n}", hints.get(n)) for n, v in named)
        return next((e for e in found if e is not None), None)

    try:
        return walk(ast.parse(text.strip(), mode="eval").body, key, None)
    except (SyntaxError, TypeError, NameError, ValueError):
        return None
