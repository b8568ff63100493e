"""Paths that are no regular file, for the tests of every bounded reader (``pipesim.core.readfile``):
a directory, a FIFO (whose ``open`` blocks), a link to ``/dev/zero`` (endless), a symlink loop,
and a sparse file one byte over a reader's cap. Each reader must name what the path is, at once."""

from __future__ import annotations

import os
from pathlib import Path

KINDS: dict[str, str] = {
    "directory": "directory",
    "fifo": "FIFO",
    "dev-zero": "character device",
    "symlink-loop": "symlink loop",
}
"""The kind of path -> the word its refusal says (as :mod:`pipesim.core.readfile` says it)."""


def make_special(path: Path, kind: str, cap: int | None = None, loop_dir: Path | None = None) -> Path:
    """Put a path of ``kind`` (a key of :data:`KINDS`, or ``"over-the-cap"`` with ``cap``) at
    ``path``, removing a file or link already there; returns it. A symlink loop's other end goes
    in ``loop_dir`` (default: beside ``path``; a saved run's test puts it outside the run)."""
    if path.is_symlink() or path.is_file():
        path.unlink()
    if kind == "directory":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")
    elif kind == "symlink-loop":
        other = (loop_dir or path.parent) / f"loop-{path.name}"
        path.symlink_to(other)
        other.symlink_to(path)
    elif kind == "over-the-cap" and cap is not None:
        with open(path, "wb") as f:  # sparse: no disk, and never read
            f.truncate(cap + 1)
    else:
        raise AssertionError(kind)
    return path
