"""Files written whole or not at all (standard library only; ``pipesim/compute/profile.py`` loads
it by file path when it runs as a plain script, without the package).

An output is written beside its target under a temporary name and moved over it with
:func:`os.replace`, which is atomic on one file system: a reader sees the old file or the whole
new one, and an interrupt mid-write removes the temporary file (:func:`write_atomic`). A target
that is not a regular file (``/dev/stdout``, a pipe) is written in place, since renaming over it
would replace the device rather than write to it (:func:`writes_in_place`).
:mod:`pipesim.io.interrupts` re-exports these beside its signal handling."""

from __future__ import annotations

import os
import re
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

__all__ = ["write_atomic", "write_text_atomic", "writes_in_place"]


def _special(path: Path) -> bool:
    """Whether ``path`` exists and is not a regular file (a pipe, a terminal, ``/dev/null``)."""
    try:
        return not stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


_FD_PATH = re.compile(r"/dev/(stdout|stderr|fd/\d+)|/proc/(self|thread-self|\d+)/(task/\d+/)?fd/\d+")
"""A path that names one of the process's open files (``/dev/stdout``, ``/proc/self/fd/1``)."""


def writes_in_place(path: str | Path) -> bool:
    """Whether an output at ``path`` is written in place rather than replaced: ``path`` (or a link
    it goes through) names an open file of the process (``/dev/stdout``, ``/dev/fd/3``), or it
    ends at something that is not a regular file (a FIFO, a terminal, a socket, ``/dev/null``).
    Asked of the path as given, before any link is resolved: ``/dev/stdout`` on a pipe resolves to
    ``/proc/N/fd/pipe:[...]``, a name that does not exist, and the temporary file beside it could
    not be made, so ``--csv /dev/stdout | cat`` failed after all the work."""
    p = Path(path)
    for _ in range(40):  # the kernel's own limit on links followed
        if _special(p) or _FD_PATH.fullmatch(os.path.abspath(p)):
            return True
        try:
            link = os.readlink(p)
        except OSError:  # not a link (or gone): a regular file or a new one
            return False
        p = p.parent / link
    return False


def write_atomic(path: str | Path, write: Callable[[Path], object]) -> None:
    """``write(p)`` writes the whole output to ``p``; it is given a temporary sibling of ``path``,
    which then replaces ``path`` in one step. On any exception (an interrupt included) the temporary
    file is removed and ``path`` is left as it was. A target that is not a regular file, or that
    names an open file of the process (:func:`writes_in_place`), is written in place."""
    if writes_in_place(path):  # before any link is resolved: /dev/stdout on a pipe names no file
        try:
            write(Path(path))
        except OSError as e:  # /dev/full: "No space left on device", naming no file
            raise _named(e, path) from None
        return
    target = Path(path)
    if target.is_symlink():  # write the file it names, as open() would, rather than replace the link
        target = target.resolve()
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        try:
            write(tmp)
        except OSError as e:  # a full disk names the hidden temporary file, or nothing
            raise _named(e, path) from None
        # mkstemp makes the file private (0600); give it the mode the target had, or a plain file's
        os.chmod(tmp, stat.S_IMODE(os.stat(target).st_mode) if target.exists() else 0o644)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _named(e: OSError, path: str | Path) -> OSError:
    """``e`` as the output ``path``'s error (what the user asked to write, not a temporary name)."""
    return type(e)(e.errno, e.strerror or str(e), str(path))


def write_text_atomic(path: str | Path, text: str) -> None:
    """``Path(path).write_text(text, encoding="utf-8")``, whole or not at all (:func:`write_atomic`)."""
    write_atomic(path, lambda p: p.write_text(text, encoding="utf-8"))
