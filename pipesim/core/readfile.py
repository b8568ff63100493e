"""A user's file read whole, bounded: a regular file of at most a named size, or an error naming
what the path is instead.

``Path.read_bytes`` on a FIFO waits for a writer that never comes (``mkfifo ff.csv``: ``pipesim
calibrate ff.csv`` hung); on ``/dev/zero`` (``ln -s /dev/zero z.toml``) it reads until the process
is killed for memory; on a 50 MB YAML file the parser ran 65 s and 446 MB before the first
refusal. :func:`read_bytes` checks the path before opening it (a FIFO's ``open`` itself blocks),
opens without blocking, checks again on the open file (it may have been swapped since), and reads
at most its cap plus one byte, so no file costs more than the cap in time or memory.

Each refusal is an :class:`OSError` whose ``strerror`` says what the path is (``is a directory``,
``is a FIFO (a named pipe), not a file``, ``is 50.0 MiB; scenario files are at most 16 MiB``),
so a reader's ``except OSError as e: ... f"{path}: cannot read: {e.strerror}"`` names the file and
the reason in its own error type, as it does for a missing file.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import sys
from pathlib import Path
from typing import BinaryIO

__all__ = [
    "LOG_MAX_BYTES",
    "RUN_FILE_MAX_BYTES",
    "SCENARIO_MAX_BYTES",
    "SPEC_MAX_BYTES",
    "NotAFile",
    "NotText",
    "check_file",
    "not_utf8",
    "open_regular",
    "read_bytes",
    "read_text",
]

MiB = 1 << 20

SPEC_MAX_BYTES = 1 * MiB
"""The largest plan spec, run spec, ``--columns`` map or model ``config.json`` read. These are a
few tables of settings: the examples are 1-4 KB, a calibrated run spec under 10 KB, a Hugging Face
``config.json`` a few KB (tens with a label map). 1 MiB is hundreds of times any of them, and
TOML or YAML of that size parses in about a second."""

SCENARIO_MAX_BYTES = 16 * MiB
"""The largest scenario file read. A scenario is a few tables, except that ``pipesim fit
--model empirical --scenario-out`` writes every fitted duration into it (about 20 bytes each):
16 MiB holds about 800,000 of them. YAML is parsed by libyaml where PyYAML has it
(:mod:`pipesim.io.yamlfile`; about 1 MiB/s with its Python parser), so the largest file takes
about 10-20 s to read; a 50 MB file is refused before parsing."""

LOG_MAX_BYTES = 256 * MiB
"""The largest training log ``pipesim calibrate`` reads. A calibration takes at most 5,000 steps
(:data:`pipesim.calibrate.frame.MAX_LOG_STEPS`, ``docs/calibrate.md``), but a longer log may be
cut with ``--steps A:B``: 256 MiB is about 40,000 rows of verl's ~150 metrics (about 6 KB a row of
JSON lines), or a million rows of a CSV of the fit's columns. The other tables read whole are held
to it too: ``pipesim fit``'s traces, ``check-roofline``'s measurement CSVs and ``pipesim trace``'s
events tables (a trace takes at most :data:`pipesim.io.trace_bounds.MAX_TRACE_EVENTS`, a million
events, about 70-100 MB as CSV and 16 MB as Parquet, so a larger file is past that bound anyway)."""

RUN_FILE_MAX_BYTES = 256 * MiB
"""The largest run file (``pipesim run --json``) ``pipesim trace`` reads. A run file holds its
scenario twice (``scenario`` and ``scenario_file``), a trace's durations in each: about 4.7 MB for
an empirical fit's 100,000 values, and about 20 bytes a value of JSON. A scenario from a file (at
most :data:`SCENARIO_MAX_BYTES`) makes a run file of about 35 MiB; one built in Python may draw from
a pool of up to :data:`pipesim.core.errors.MAX_DURATION_POOL` (4,194,304) durations, about 170 MB
for both copies, which 256 MiB holds. ``json.loads`` reads that in a few seconds."""


_LOOP = "is a symlink loop (a link leading back to itself)"


class NotAFile(OSError):
    """A path that is not a regular file, or one past its cap: ``strerror`` says which."""


def _size(n: int) -> str:
    """``n`` bytes in the caps' units (``50.0 MiB``, ``3.2 KiB``)."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", MiB), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


def _cap(n: int) -> str:
    """A cap in bytes as it is defined (``16 MiB``)."""
    return f"{n // MiB} MiB" if n % MiB == 0 else f"{n:,} bytes"


def _kind(mode: int) -> str | None:
    """What a file of ``mode`` is, when it is not a regular file (None when it is)."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "is a directory"
    if stat.S_ISFIFO(mode):
        return "is a FIFO (a named pipe), not a file"
    if stat.S_ISCHR(mode):
        return "is a character device, not a file"
    if stat.S_ISBLK(mode):
        return "is a block device, not a file"
    if stat.S_ISSOCK(mode):
        return "is a socket, not a file"
    return "is not a regular file"


def _refuse(path: Path, code: int, why: str) -> NotAFile:
    if path.is_symlink():  # say where the link points: 'z.csv' alone does not say /dev/zero
        with contextlib.suppress(OSError):
            why = f"is a symlink to {os.readlink(path)}, which {why}"
    return NotAFile(code, why, str(path))


def _checked(path: Path, st: os.stat_result, max_bytes: int, what: str) -> None:
    kind = _kind(st.st_mode)
    if kind is not None:
        raise _refuse(path, errno.EISDIR if stat.S_ISDIR(st.st_mode) else errno.EINVAL, kind)
    if st.st_size > max_bytes:
        why = f"is {_size(st.st_size)}; {what} are at most {_cap(max_bytes)}"
        raise NotAFile(errno.EFBIG, why, str(path))


def check_file(path: str | os.PathLike[str]) -> None:
    """OSError where ``path`` is no regular file, without opening it (as :func:`read_bytes` refuses
    it: ``FileNotFoundError`` where nothing is there, :class:`NotAFile` for a directory, a FIFO, a
    device or a symlink loop). For a file another reader opens: Python's import of a user's ``.py``
    (``./fifo.py:make`` and ``--policies fifo.py`` were called "no such file"; imported, a FIFO
    waits for a writer that never comes)."""
    p = Path(path)
    try:
        _checked(p, os.stat(p), sys.maxsize, "files")  # no cap: the reader reads what it reads
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise NotAFile(errno.ELOOP, _LOOP, str(p)) from None
        raise


def open_regular(path: str | os.PathLike[str], what: str, max_bytes: int) -> BinaryIO:
    """The regular file at ``path`` (a symlink is followed) of at most ``max_bytes``, opened for
    reading in binary; the caller closes it (``with``). Checked before it is opened (opening a
    FIFO blocks) and again once open (the file opened, not the one looked at); opened without
    blocking. OSError as :func:`read_bytes` says it. For a reader that streams the file
    (:func:`pipesim.io.trace_bounds.csv_rows_at_least`) rather than reading it whole."""
    p = Path(path)
    try:
        _checked(p, os.stat(p), max_bytes, what)  # before open: opening a FIFO blocks
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise NotAFile(errno.ELOOP, _LOOP, str(p)) from None
        raise
    f = os.fdopen(fd, "rb")
    try:
        _checked(p, os.fstat(fd), max_bytes, what)
    except BaseException:
        f.close()
        raise
    return f


def read_bytes(path: str | os.PathLike[str], what: str, max_bytes: int) -> bytes:
    """The bytes of the regular file at ``path`` (a symlink is followed), at most ``max_bytes``.

    ``what`` names such files in a refusal (``"scenario files"``: "is 50.0 MiB; scenario files
    are at most 16 MiB"). OSError when the path cannot be read: missing or unreadable (the system's
    own error), a symlink loop, or not a regular file or too large (:class:`NotAFile`); each one's
    ``strerror`` says why, in a few words."""
    with open_regular(path, what, max_bytes) as f:
        data = f.read(max_bytes + 1)  # bounded: a file grown since cannot be read past its cap
    p = Path(path)
    if len(data) > max_bytes:
        raise NotAFile(errno.EFBIG, f"grew past {_cap(max_bytes)}, the most {what} may be", str(p))
    return data


class NotText(UnicodeDecodeError):
    """A file whose bytes are not its encoding: the message names the file, the byte offset and
    its line (a bare ``UnicodeDecodeError`` named neither)."""

    def __str__(self) -> str:
        return self.message

    message: str


def not_utf8(raw: bytes) -> str | None:
    """Where ``raw`` (a UTF-8 byte-order mark allowed) stops being UTF-8 text, as a line and a byte
    counted from the file's start (``line 3 is not UTF-8 text: byte 41 is 0xe9 (invalid
    continuation byte)``; lines split by ``\r`` alone are counted too), or None where it is text.
    A log's reader and a scenario file's add their own advice."""
    if raw.isascii():
        return None
    start = 3 if raw.startswith(b"\xef\xbb\xbf") else 0
    try:
        raw[start:].decode("utf-8")
    except UnicodeDecodeError as e:
        at = start + e.start
        line = (raw.count(b"\n", 0, at) or raw.count(b"\r", 0, at)) + 1
        return f"line {line} is not UTF-8 text: byte {at:,} is 0x{raw[at]:02x} ({e.reason})"
    return None


def read_text(path: str | os.PathLike[str], what: str, max_bytes: int, encoding: str = "utf-8-sig") -> str:
    """:func:`read_bytes` decoded: :class:`NotText` (a ``UnicodeDecodeError``, and so a
    ``ValueError``) naming the file, the byte offset and the line where the bytes are not
    ``encoding`` (a binary file, or a Latin-1 export)."""
    data = read_bytes(path, what, max_bytes)
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as e:
        at = e.start + len(data) - len(e.object)  # utf-8-sig decodes after the BOM, and counts from there
        err = NotText(e.encoding, data, at, at + e.end - e.start, e.reason)
        line = data.count(b"\n", 0, at) + 1
        err.message = (
            f"{path}: not {e.encoding} text: byte {at:,} (line {line}) is 0x{data[at]:02x} "
            f"({e.reason}); save the file as UTF-8"
        )
        raise err from None
