"""The results files of the experiment scripts: one JSON file of runs, rewritten after every run.

A grid of runs can take hours, so ``lr_sweep``, ``staleness`` and ``fp8`` write the whole file
after each run, atomically (a temporary file and a rename: Ctrl-C mid-write leaves the previous
file, never half of one), and ``--resume`` reads it back. :func:`read_runs` refuses a file of
another shape by name, so a wrong ``--json`` path fails before hours of work, not inside a table.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from offpolicy.checks import FieldError


def write_json(path: str | Path, payload: dict[str, Any]) -> None:
    """Atomic JSON write (temporary file + rename)."""
    write_text(path, json.dumps(payload, indent=1))


def write_text(path: str | Path, text: str) -> None:
    """Atomic text write (temporary file + rename): the results' JSON, table and figure."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; results are meant to be shared
        os.replace(tmp, path)
    except BaseException:  # Ctrl-C mid-write: the file stays as it was, no temporary one is left
        Path(tmp).unlink(missing_ok=True)
        raise


#: What every stored run carries that the tables and the figure read.
RUN_KEYS = frozenset({"seed", "correction", "heldout", "history"})


def read_runs(path: str | Path) -> list[dict[str, Any]]:
    """Runs stored in a results JSON (empty when the file does not exist); a file of another
    shape is a ``ValueError`` naming it (not a ``KeyError`` or ``min()`` of nothing in a table)."""
    path = Path(path)
    if not path.exists():
        return []
    bad = f"{path}: not a results file of these scripts (a 'runs' list of run records)"
    with open(path) as fh:
        try:
            payload = json.load(fh)
        except json.JSONDecodeError as exc:
            raise FieldError(f"{path}: not JSON ({exc})", "", str(path)) from None
    runs = payload.get("runs") if isinstance(payload, dict) else None
    if not isinstance(runs, list) or not all(isinstance(r, dict) and r.keys() >= RUN_KEYS for r in runs):
        raise FieldError(bad, "runs", str(path))
    return list(runs)
