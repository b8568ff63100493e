"""How offpolicy's configs say a field is wrong: a ``ValueError`` naming the field; and how its
scripts say an output flag cannot be written (:func:`check_output`), a usage error naming the flag.

``offpolicy`` does not import ``pipesim`` (whose package imports SimPy), so it keeps these two
checks of its own; they mirror ``pipesim.core.errors.check_int`` / ``check_number``: a bool is
not a number, a float field takes an int or a float and must be finite, and a numpy scalar is
named with the conversion to use. Nor does it import ``scenarios`` (which imports offpolicy), so
:func:`check_output` is its own copy of ``scenarios.outputs.check_output``.
"""

from __future__ import annotations

import argparse
import math
import numbers
import os
import stat
import tempfile
from pathlib import Path


def _numpy_hint(value: object) -> str:
    """The conversion to name for a numpy scalar (or another real that is not a Python number)."""
    if isinstance(value, bool | int | float):
        return ""
    if isinstance(value, numbers.Integral):
        return f" (int(x) converts a {type(value).__name__})"
    if isinstance(value, numbers.Real):
        return f" (float(x) converts a {type(value).__name__})"
    return ""


#: The largest seed ``torch.Generator.manual_seed`` takes (it refuses 2**64 with an unnamed
#: ``RuntimeError``); every seed field is checked against it.
SEED_MAX = 2**64 - 1


def check_int(name: str, value: object, minimum: int, maximum: int | None = None) -> None:
    """ValueError naming ``name`` unless ``value`` is an int (not a bool) ``>= minimum`` (and
    ``<= maximum`` where given)."""
    bad = isinstance(value, bool) or not isinstance(value, int) or value < minimum
    if bad or (maximum is not None and value > maximum):  # type: ignore[operator]
        where = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum}]"
        raise ValueError(f"{name} must be an integer {where}{_numpy_hint(value)}, got {value!r}")


def check_seed(name: str, value: object) -> None:
    """ValueError naming ``name`` unless ``value`` is an int in ``[0, SEED_MAX]``."""
    check_int(name, value, 0, SEED_MAX)


def check_real(name: str, value: object, low: float, high: float = math.inf, open_low: bool = False) -> None:
    """ValueError naming ``name`` unless ``value`` is a finite int or float (not a bool) in
    ``[low, high]`` (``(low, high]`` with ``open_low``)."""
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or not (low < value if open_low else low <= value) or value > high:  # type: ignore[operator]
        if high < math.inf:
            where = f" in {'(' if open_low else '['}{low:g}, {high:g}]"
        elif low > -math.inf:
            where = f" {'>' if open_low else '>='} {low:g}"
        else:
            where = ""
        raise ValueError(f"{name} must be a finite number{where}{_numpy_hint(value)}, got {value!r}")


def check_output(parser: argparse.ArgumentParser, flag: str, path: str | None, replace: bool = False) -> None:
    """``parser.error`` (usage, exit 2) naming ``flag`` unless ``path`` (None: not given) can be
    written: a script writes it after minutes of training, so a missing directory, a path that is a
    directory or one this user cannot write must fail before. ``os.access`` is not enough (root
    passes it on ``/proc``), so the check writes as the script will: it opens the file for
    appending (and removes it if it was not there), or, where ``replace`` (the results JSON, which
    ``write_json`` replaces through a temporary file and a rename, making its directory first),
    makes the directory and a temporary file in it, removed again."""
    if not path:
        return
    if _special(path):  # a pipe, a terminal, /dev/null: opening it to test would block or drain it
        if replace:
            parser.error(f"{flag} {path}: not a regular file (a pipe or a device); it is written by a rename")
        return
    target = Path(path).resolve()
    folder = target.parent
    if replace:
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            parser.error(f"{flag} {path}: cannot make its directory {folder} ({exc.strerror})")
    if not folder.is_dir():
        parser.error(f"{flag} {path}: no directory {folder}")
    if target.is_dir():
        parser.error(f"{flag} {path}: is a directory; give a file name")
    existed = target.exists()
    try:
        if replace:
            with tempfile.NamedTemporaryFile(dir=folder, suffix=".tmp"):
                pass
        else:
            with open(target, "a"):
                pass
    except OSError as exc:
        parser.error(f"{flag} {path}: cannot write it ({exc.strerror})")
    if not replace and not existed:
        target.unlink()


def _special(path: str) -> bool:
    """Whether ``path`` is an existing pipe, character device or socket (``/dev/stdout``, a FIFO,
    ``>(cat)``), which a script writes as a stream: nothing to test by opening it."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISCHR(mode) or stat.S_ISSOCK(mode)
