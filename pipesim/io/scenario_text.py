"""What a scenario file's text and path say where a parser or the writer does not: the key a TOML
file gives twice (tomllib names only its line), the first array longer than a bound, and whether
a path can be written (the atomic writer would name its hidden temporary file). Split from
:mod:`pipesim.io.scenario_files`, which calls each before it parses, builds or writes."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pipesim.core.errors import shown
from pipesim.io.scenario_schema import ScenarioFileError

__all__ = ["check_writable", "repeated_toml_key", "too_long"]

_OVERWRITE = re.compile(r"^Cannot overwrite a value \(at line (\d+), column (\d+)\)$")
_TABLE = re.compile(r"^\s*\[\[?\s*([^\[\]#]+?)\s*\]\]?\s*(?:#.*)?$")
_KEY = re.compile(r"^\s*([A-Za-z0-9_\-]+(?:\s*\.\s*[A-Za-z0-9_\-]+)*)\s*=")


def repeated_toml_key(text: str, message: str) -> tuple[str, int, int] | None:
    """The dotted key a TOML file gives twice, with tomllib's line and column, read from the text
    (tomllib says only "Cannot overwrite a value (at line 4, column 12)"): the bare key that starts
    the line, below the nearest table header above it. None where the text does not say plainly
    (a quoted key, a value over several lines): the caller keeps tomllib's own message."""
    found = _OVERWRITE.match(message)
    if found is None:
        return None
    line, column = int(found[1]), int(found[2])
    lines = text.splitlines()
    if not 1 <= line <= len(lines) or (key := _KEY.match(lines[line - 1])) is None:
        return None
    if any('"""' in ln or "'''" in ln for ln in lines[:line]):  # a multi-line string may hide a line
        return None
    table = next((m[1] for ln in reversed(lines[: line - 1]) if (m := _TABLE.match(ln))), "")
    parts = [p.strip() for p in (table.split(".") if table else [])] + [p.strip() for p in key[1].split(".")]
    if not all(parts):
        return None
    return ".".join(parts), line, column


def too_long(data: Any, limit: int, where: str = "", seen: set[int] | None = None) -> tuple[str, int] | None:
    """The dotted key of the first array in ``data`` longer than ``limit``, and its length. Each
    container is visited once (``seen``): a YAML file of aliases shares one list ten times a level,
    and a walk of every path through it visited 10**8 leaves (28 s) before the field's own check."""
    seen = set() if seen is None else seen
    if id(data) in seen or not isinstance(data, list | Mapping):
        return None
    seen.add(id(data))
    if isinstance(data, Mapping):
        for k, v in data.items():
            if (found := too_long(v, limit, f"{where}.{k}" if where else str(k), seen)) is not None:
                return found
        return None
    if len(data) > limit:
        return where, len(data)
    for v in data:
        if (found := too_long(v, limit, where, seen)) is not None:
            return found
    return None


def check_writable(path: Path) -> None:
    """ScenarioFileError, naming ``path``, where it cannot be written: a directory, or a parent that
    is missing or not a directory (the atomic write would name its hidden temporary file)."""
    why = None
    if path.is_dir():
        why = "is a directory; give a file name"
    elif not path.parent.is_dir():
        gone = not path.parent.exists()
        why = f"cannot write: directory {shown(str(path.parent))} " + (
            "does not exist" if gone else "is not a directory"
        )
    if why is not None:
        raise ScenarioFileError(f"{path}: {why}", "", str(path))
