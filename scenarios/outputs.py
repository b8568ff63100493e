"""The scripts' one check of an output flag (``--json``, ``--html``), made before any run.

A script writes its file after minutes of simulation, so a path it cannot write must be a usage
error up front, naming the flag: a missing directory, a path that is a directory, or a directory
this user cannot write. Asking ``os.access`` is not enough (root passes it on ``/proc``), so the
check opens the file for appending, as the write will, and removes it again if it was not there.
"""

from __future__ import annotations

import argparse
import os
import stat
from pathlib import Path


def check_output(ap: argparse.ArgumentParser, flag: str, path: str | None) -> None:
    """``ap.error`` (exit 2) naming ``flag`` unless ``path`` (None: not given) can be written."""
    if not path:
        return
    if _special(path):  # a pipe, a terminal, /dev/null: opening it to test would block or drain it
        return
    target = Path(path).resolve()
    if not target.parent.is_dir():
        ap.error(f"{flag} {path}: no directory {target.parent}")
    if target.is_dir():
        ap.error(f"{flag} {path}: is a directory; give a file name")
    existed = target.exists()
    try:
        with open(target, "a"):
            pass
    except OSError as exc:
        ap.error(f"{flag} {path}: cannot write it ({exc.strerror})")
    if not existed:
        target.unlink()


def _special(path: str) -> bool:
    """Whether ``path`` is an existing pipe, character device or socket (``/dev/stdout``, a FIFO,
    ``>(cat)``), which a script writes as a stream: nothing to test by opening it."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISCHR(mode) or stat.S_ISSOCK(mode)
