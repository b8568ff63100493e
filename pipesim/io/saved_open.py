"""Opening a saved run: its files read once each (verified against the manifest where it has
one), its ``meta.json`` checked (format, version, engine), and the tables and pool parsed inside
:func:`~pipesim.io.saved_files.reading`, so that any failure names the file.

It lives apart from :mod:`pipesim.io.saved`, which builds a :class:`~pipesim.io.saved.SavedRun`
from what this module reads and writes runs: this is the file layer of a load, which never
executes code and never unpickles.
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pipesim.core.errors import shown
from pipesim.core.validate import FieldError, refuse
from pipesim.io.parquet import read_parquet
from pipesim.io.saved_checks import check_columns
from pipesim.io.saved_files import (
    MANIFEST,
    SavedRunError,
    UnverifiedRunWarning,
    read_bytes,
    reading,
    verified_files,
)
from pipesim.results.run import EVENT_KINDS

FORMAT, VERSION = "pipesim-run", 2
TABLES = {"events": "events.parquet", "trained": "trained.parquet", "episode_table": "episodes.parquet"}
REQUIRED = ("meta.json", "summary.json", "scenario.json", *TABLES.values())

__all__ = ["FORMAT", "REQUIRED", "TABLES", "VERSION"]


def _events_categoricals(ev: pd.DataFrame) -> pd.DataFrame:
    """Parquet keeps Categoricals (pyarrow dictionaries); make sure kind keeps every kind."""
    kind = ev.get("kind")
    if (
        kind is not None
        and isinstance(kind.dtype, pd.CategoricalDtype)
        and list(kind.cat.categories) != EVENT_KINDS
    ):
        ev["kind"] = ev["kind"].cat.set_categories(EVENT_KINDS)
    return ev


class _Files:
    """The files of one saved run, read once each: the verified contents (format 2), or read
    from disk on demand (format 1). Every parse goes through :func:`reading`."""

    def __init__(self, directory: Path, verified: dict[str, bytes] | None) -> None:
        self.dir, self.verified = directory, verified

    def has(self, name: str) -> bool:
        """Whether the run holds ``name``: a link that leads nowhere (a loop) is there, and read
        as what it is, not called missing."""
        if self.verified is not None:
            return name in self.verified
        return os.path.lexists(self.dir / name)

    def raw(self, name: str) -> bytes:
        if self.verified is not None:
            return self.verified[name]
        return read_bytes(self.dir / name)

    def json_of(self, name: str) -> Any:
        data = self.raw(name)
        with reading(self.dir / name):
            return json.loads(data.decode("utf-8"))

    def table(self, name: str, columns_of: str | None) -> pd.DataFrame:
        data = self.raw(name)
        with reading(self.dir / name):
            table = read_parquet(data)
            if columns_of is not None:
                check_columns(table, columns_of)
            return table


def _open(p: Path) -> tuple[_Files, dict[str, Any]]:
    """The run's files (verified against the manifest first where there is one) and its meta."""
    if not p.exists():
        raise SavedRunError(f"{p}: no such directory")
    if not p.is_dir():
        raise SavedRunError(f"{p}: not a directory (a saved run is a directory written by RunResult.save)")
    manifest = p / MANIFEST
    files = _Files(p, verified_files(p) if manifest.exists() or manifest.is_symlink() else None)
    if not files.has("meta.json"):
        raise SavedRunError(f"{p}: not a saved run (no meta.json)")
    meta = files.json_of("meta.json")
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise SavedRunError(f"{p / 'meta.json'}: not a pipesim saved run")
    version = meta.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or not 1 <= version <= VERSION:
        raise SavedRunError(
            f"{p / 'meta.json'}: saved-run format version {shown(version)}; this pipesim reads 1 to {VERSION}"
        )
    if files.verified is None:
        if version >= 2:
            raise SavedRunError(
                f"{manifest}: missing (a format-{version} saved run lists its files' hashes there)"
            )
        warnings.warn(
            UnverifiedRunWarning(
                f"{p}: saved in format 1, without content hashes, so a corrupted file in it cannot be "
                f"detected; save it again (pipesim.load(path).save(path)) to add them"
            ),
            stacklevel=3,
        )
    missing = [n for n in REQUIRED if not files.has(n)]
    if missing:
        raise SavedRunError(f"{p}: incomplete saved run, missing {', '.join(missing)}")
    return files, meta


def _engine(meta: dict[str, Any], p: Path) -> str:
    """meta.json's ``engine`` (absent: a slot run, as every run saved before it was written)."""
    engine = meta.get("engine", "slots")
    if engine not in ("slots", "compute"):
        with reading(p / "meta.json"):
            raise refuse("engine", f"must be slots or compute, got {shown(engine)}")
    return str(engine)


def _read_pool(files: _Files, pool_given: bool) -> np.ndarray | None:
    """pool.parquet's durations: present exactly when scenario.json says the run was given a pool."""
    pool_file = files.dir / "pool.parquet"
    if not pool_given and not files.has("pool.parquet"):
        return None
    with reading(pool_file):
        if not files.has("pool.parquet"):
            raise FieldError(
                "missing: the run was given a pool (scenario.json says pool_given), saved here", "pool_given"
            )
        if not pool_given:
            raise FieldError(
                "present, but scenario.json says the run drew its own pool (pool_given false)", "pool_given"
            )
    table = files.table("pool.parquet", None)
    with reading(pool_file):
        from pipesim.workload.durations import as_durations

        pool = as_durations(table["duration_s"].to_numpy(), "duration_s")
        if not len(pool):
            raise FieldError("holds no durations", "durations")
    return pool
