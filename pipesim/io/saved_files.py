"""The files of a saved run: a manifest of content hashes, one wrapper for every read, and a
directory that is written whole or not at all (used by :mod:`pipesim.io.saved`).

**The manifest.** ``manifest.json`` lists every other file of the run with its size and SHA-256::

    {"algorithm": "sha256", "format": "pipesim-run-manifest",
     "files": {"events.parquet": {"bytes": 5795, "sha256": "9f2c..."}, ...},
     "manifest_sha256": "41d0..."}

``manifest_sha256`` is the manifest's own hash: the SHA-256 of its other keys written as canonical
JSON (keys sorted, no spaces, ASCII), so it does not depend on how the file is indented. The loader
checks it before anything else: the manifest's own hash, then that the directory holds exactly the
listed files (one missing or one added is named), then each file's size and hash. The bytes it
hashed are the bytes it parses (each file is read once), so what was checked is what is loaded.

**What the hashes guarantee.** Any change to a file after the save (a flipped byte, a truncated
copy, an edit) is refused, naming the file. They detect corruption, not forgery: whoever rewrites
a file and its manifest entry and the manifest's own hash makes a run that verifies. Loading stays
safe on such a run (no code is executed, nothing is unpickled, and every read goes through
:func:`reading`), and the summary is still checked against the tables (:mod:`pipesim.io.saved_checks`).

**Every read through one wrapper.** :func:`reading` turns any error that reading or parsing a file
raises (a JSON error, a Parquet error of pyarrow, an unreadable file, a missing key) into a
:class:`SavedRunError` whose message starts with the file's path. Every file is read bounded
(:func:`read_bytes`, at most :data:`SAVED_FILE_MAX_BYTES`): a FIFO or a device link in a file's
place is refused as what it is, not waited on or read until memory runs out.

**Atomic saves.** :func:`write_run_dir` writes the files and the manifest into a new directory
next to the target (``.NAME.saving-XXXX``), flushes each to disk, and renames it into place. An
existing target (a saved run; :func:`pipesim.io.saved.save` refuses anything else) is first
renamed aside to ``.NAME.replaced-XXXX``, and removed only once the new run is in place. A save
that fails or is interrupted (an exception, Ctrl-C) removes its temporary directory and leaves the
target as it was. A crash of the process itself (power loss, SIGKILL) can leave a ``.NAME.saving-``
directory behind (never loaded; delete it), or, between the two renames, the previous run whole
under ``.NAME.replaced-`` and no target.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import secrets
import shutil
import stat
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pipesim.core.errors import shown
from pipesim.core.validate import FieldError, refuse

MANIFEST = "manifest.json"
MANIFEST_FORMAT = "pipesim-run-manifest"
ALGORITHM = "sha256"

SAVED_FILE_MAX_BYTES = 4 << 30
"""The largest file of a saved run read (4 GiB): its tables, its JSON. Nothing bounds a table's rows
but the memory of the run that wrote it: one row per episode of ``episodes``, ``trained`` and
``lineage`` (a slot run launches its pool's tasks, at most
:data:`pipesim.core.errors.MAX_DURATION_POOL`, 2**22, plus relaunches), and in ``events`` a row per
segment and pause, which grows as slots x weight updates. Measured (``pipesim run async-eta2
--save``): up to 36 bytes an episode in a table (410,414 episodes: events 14.6 MB, episodes 13.1 MB,
trained 5.6 MB), so at most about 150 MB a table at the pool's bound; and 1.45 bytes a row for the
pause rows of a run with many slots per update (4,096 slots, batch 64, 4,000 steps: 33.0M rows in 48
MB, a run of 1.6 GB whose load took 5.2 GB). At that rate the 256 MiB of
:data:`~pipesim.core.readfile.LOG_MAX_BYTES` is about 185M rows, a run of about 6 GB that a 16 GB
machine writes and a 64 GB one loads (about 30 GB): a real run, which that cap would refuse. 4 GiB
is about 3 billion rows, a run of about 90 GB whose load would take about 500 GB: no real run's
table; a file that large is refused before it is read. In a run with a manifest each file must also
be the size the manifest lists, checked before it is read (:func:`verified_files`)."""
MANIFEST_MAX_BYTES = 1 << 20
"""The largest ``manifest.json`` read (1 MiB): a run's lists its at most eight files, about 1 KB."""


class SavedRunError(FieldError):
    """A directory that is not a readable saved run (names the path and what is wrong).

    A :class:`~pipesim.core.validate.FieldError`: its message starts with the file (``err.file``;
    taken from the message where not given) and ``err.field`` is the key refused inside it
    (``summary.json``'s ``episodes_trained``, a manifest's ``files.x.sha256``), or ``""`` where
    the file as a whole is."""

    def __init__(self, message: str, field: str = "", file: str | None = None) -> None:
        super().__init__(message, field, file if file is not None else message.split(": ", 1)[0])


class UnverifiedRunWarning(UserWarning):
    """A saved run without a manifest (format 1, saved before pipesim kept content hashes): it
    loads, but a corrupted file in it cannot be detected."""


def _read_errors() -> tuple[type[BaseException], ...]:
    """What reading or parsing a file may raise: Python's errors, and pyarrow's (a runtime
    dependency; imported here so ``import pipesim`` does not pay for it)."""
    from pyarrow.lib import ArrowException

    return (
        KeyError,
        TypeError,
        ValueError,  # JSONDecodeError, UnicodeDecodeError, pyarrow's ArrowInvalid
        AttributeError,
        OSError,
        IndexError,
        NotImplementedError,
        RecursionError,  # deeply nested JSON
        OverflowError,
        ArrowException,
    )


@contextmanager
def reading(path: Path) -> Iterator[None]:
    """Any error reading or parsing ``path`` becomes a :class:`SavedRunError` naming it (one line)."""
    from pipesim.io.scenario_schema import ScenarioFileError

    try:
        yield
    except SavedRunError:
        raise  # names its file already
    except ScenarioFileError as exc:  # the scenario reader names its source (this file)
        text = " ".join(str(exc).split())
        raise SavedRunError(
            text if text.startswith(str(path)) else f"{path}: {text}", exc.field, str(path)
        ) from None
    except _read_errors() as exc:
        first = str(exc).splitlines()[0] if str(exc).strip() else type(exc).__name__
        field = exc.field if isinstance(exc, FieldError) else ""
        if isinstance(exc, KeyError):  # a key or column read and not there: it is the field
            first = f"lacks {first}"
            field = exc.args[0] if exc.args and isinstance(exc.args[0], str) else ""
        raise SavedRunError(f"{path}: {first[:300]}", field, str(path)) from None


def read_bytes(path: Path, max_bytes: int | None = None, what: str = "saved-run files") -> bytes:
    """The bytes of the saved run's file at ``path``, read as every command reads a user's file
    (:func:`pipesim.core.readfile.read_bytes`): a FIFO in its place was waited on (``pipesim trace
    DIR`` hung), a link to ``/dev/zero`` read until memory ran out, and a file past ``max_bytes``
    is not read at all (``what`` names such files in that refusal; ``max_bytes`` is
    :data:`SAVED_FILE_MAX_BYTES` where not given, read when called). Each is a
    :class:`SavedRunError` naming the file and what it is."""
    from pipesim.core.readfile import read_bytes as read_bounded

    try:
        return read_bounded(path, what, SAVED_FILE_MAX_BYTES if max_bytes is None else max_bytes)
    except OSError as exc:
        raise SavedRunError(f"{path}: cannot read: {exc.strerror or exc}", "", str(path)) from None


def read_manifest(path: Path) -> bytes:
    """The bytes of a ``manifest.json`` (or of the ``meta.json`` beside it), read bounded at
    :data:`MANIFEST_MAX_BYTES`: a large file in its place is no saved run's."""
    return read_bytes(path, MANIFEST_MAX_BYTES, "saved-run manifests")


def _size_on_disk(path: Path) -> int | None:
    """The size of the regular file at ``path``; None for anything else (:func:`read_bytes` says
    what it is)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_size if stat.S_ISREG(st.st_mode) else None


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _canonical(body: Mapping[str, Any]) -> bytes:
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def manifest_bytes(files: Mapping[str, bytes]) -> bytes:
    """The manifest of ``files`` (name -> content), its own hash included, as written."""
    body: dict[str, Any] = {
        "format": MANIFEST_FORMAT,
        "algorithm": ALGORITHM,
        "files": {n: {"bytes": len(d), ALGORITHM: sha256_hex(d)} for n, d in sorted(files.items())},
    }
    body["manifest_sha256"] = sha256_hex(_canonical(body))
    return (json.dumps(body, indent=1, sort_keys=True) + "\n").encode()


def _plain_name(name: object) -> bool:
    """A file directly in the run's directory: no separators, not '.', '..' or the manifest."""
    return (
        isinstance(name, str)
        and name not in ("", ".", "..", MANIFEST)
        and not any(c in name for c in "/\\\0")
        and len(name) <= 255
    )


def _is_hex_digest(x: object) -> bool:
    return isinstance(x, str) and len(x) == 64 and all(c in "0123456789abcdef" for c in x)


def _listed_files(path: Path, raw: bytes) -> dict[str, dict[str, Any]]:
    """The files the manifest at ``path`` lists, after checking its form and its own hash."""
    with reading(path):
        body = json.loads(raw.decode("utf-8"))
        if not isinstance(body, dict) or body.get("format") != MANIFEST_FORMAT:
            raise FieldError(f"not a pipesim saved-run manifest (format {shown(MANIFEST_FORMAT)})", "format")
        if body.get("algorithm") != ALGORITHM:
            raise refuse("algorithm", f"must be {shown(ALGORITHM)}")
        stored = body.pop("manifest_sha256", None)
        if not _is_hex_digest(stored):
            raise refuse("manifest_sha256", "must be a SHA-256 hex digest (the manifest's own hash)")
        if sha256_hex(_canonical(body)) != stored:
            raise FieldError(
                "the manifest's own hash does not match its content (corrupted or edited)", "manifest_sha256"
            )
        files = body.get("files")
        if not isinstance(files, dict):
            raise refuse("files", "must be an object of file name -> {bytes, sha256}")
        for name, entry in files.items():
            if not _plain_name(name):
                raise FieldError(
                    f"lists {shown(name)}, not a plain file name in the run's directory", f"files.{name}"
                )
            size = entry.get("bytes") if isinstance(entry, dict) else None
            if isinstance(size, bool) or not isinstance(size, int) or size < 0:
                raise refuse(f"files.{name}.bytes", "must be a size in bytes")
            if not _is_hex_digest(entry.get(ALGORITHM)):
                raise refuse(f"files.{name}.{ALGORITHM}", "must be a SHA-256 hex digest")
        return files


def verified_files(directory: Path) -> dict[str, bytes]:
    """The contents of every file the manifest of ``directory`` lists, each checked against its
    hash; a :class:`SavedRunError` naming the first file that is missing, added or changed."""
    manifest = directory / MANIFEST
    listed = _listed_files(manifest, read_manifest(manifest))
    with reading(directory):
        present = {entry.name for entry in directory.iterdir()} - {MANIFEST}
    added = sorted(present - listed.keys())
    if added:
        raise SavedRunError(
            f"{directory / added[0]}: not listed in {MANIFEST} (added after the save; "
            f"a saved run holds only its own files)"
        )
    missing = sorted(listed.keys() - present)
    if missing:
        raise SavedRunError(f"{directory / missing[0]}: listed in {MANIFEST} but missing")
    contents, bad = {}, []
    for name in sorted(listed):
        size = _size_on_disk(directory / name)
        if size is not None and size != listed[name]["bytes"]:  # changed: refused without reading it
            bad.append(name)
            continue
        data = read_bytes(directory / name)
        if len(data) != listed[name]["bytes"] or sha256_hex(data) != listed[name][ALGORITHM]:
            bad.append(name)
        contents[name] = data
    if bad:
        more = f" (and {len(bad) - 1} more: {', '.join(bad[1:])})" if len(bad) > 1 else ""
        raise SavedRunError(
            f"{directory / bad[0]}: content does not match its hash in {MANIFEST} "
            f"(corrupted or edited after the save){more}"
        )
    return contents


def _write_synced(path: Path, data: bytes) -> None:
    with open(path, "xb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _sync_dir(path: Path) -> None:
    """Flush a directory's entries (the renames) to disk, where the platform allows it."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # Windows cannot open a directory
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _sibling(target: Path, what: str) -> Path:
    return target.with_name(f".{target.name}.{what}-{secrets.token_hex(6)}")


def replaceable(target: Path) -> Path:
    """``target`` as the absolute directory a save will replace (a symbolic link followed); a
    :class:`SavedRunError` when it is the current directory or one above it, which a rename
    cannot replace under the running process."""
    if target.is_symlink():
        target = target.resolve()
    target = Path(os.path.abspath(target))
    cwd = Path.cwd()
    if target == cwd or target in cwd.parents:
        raise SavedRunError(
            f"{target}: the current directory or one above it; a save replaces its directory whole, "
            f"so give a new directory (e.g. {target / 'run'})"
        )
    return target


def write_run_dir(target: Path, files: Mapping[str, bytes]) -> None:
    """Write ``files`` (name -> content) and their manifest as the directory ``target``, atomically:
    into a new sibling directory first, then renamed into place (see the module docstring), at
    :func:`replaceable`'s path."""
    target = replaceable(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = _sibling(target, "saving")
    os.mkdir(tmp)  # not mkdtemp: its mode 0700 would become the saved run's
    try:
        for name, data in files.items():
            _write_synced(tmp / name, data)
        _write_synced(tmp / MANIFEST, manifest_bytes(files))
        _sync_dir(tmp)
        _put_in_place(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _sync_dir(target.parent)


def _put_in_place(tmp: Path, target: Path) -> None:
    """Rename ``tmp`` to ``target``; an existing ``target`` (a saved run, or an empty directory:
    POSIX's rename would replace that one, Windows' would not) is moved aside first, and put back
    if the rename fails."""
    if not target.exists():
        os.rename(tmp, target)
        return
    old = _sibling(target, "replaced")
    os.rename(target, old)
    try:
        os.rename(tmp, target)
    except BaseException:
        os.rename(old, target)  # put the previous run back
        raise
    shutil.rmtree(old, ignore_errors=True)


def same_value(a: float, b: float) -> bool:
    """Whether a saved summary value equals the one its tables give: to a relative 1e-9 (sums and
    means in another order), NaN equal to NaN."""
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
