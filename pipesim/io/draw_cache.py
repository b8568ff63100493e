"""The chapter's duration pools kept on disk, so that a run of a chapter design need not import torch.

The chapter drew its pools with torch's generator, and
:class:`~pipesim.workload.durations.AgentDurations` with ``draws="chapter"`` (every chapter design
and system preset) reproduces them through it. Importing torch is most of what such a run costs
from the command line: ``pipesim run fig13.1-sync`` took 2.0 s, 1.4 s of them in ``import torch``
(cProfile). A pool is a pure function of the duration model, its size, how it is drawn (whole or
stable, :func:`pipesim.io.api.draw_pool`), the seed, torch's version and the drawing code, so
:func:`cached_pool` keeps each such pool as one ``.npy`` file named by the SHA-256 of exactly
those (the code as the bytes of ``pipesim/workload/*.py``): a later run, in any process, reads the
same float64 array back, bit for bit, and the same seed gives the same events. Pools the numpy
generator draws are not kept (numpy draws them in milliseconds), nor a subclass's, whose code the
key does not hold.

Where: ``$PIPESIM_DRAW_CACHE``, else ``~/.cache/pipesim/draws``; ``PIPESIM_DRAW_CACHE=off`` (or
empty) keeps nothing. Bounded: a pool of more than :data:`MAX_CACHED` durations is drawn, not kept,
and past :data:`MAX_FILES` files the oldest go. A file is written whole or not at all (a temporary
file renamed into place), read without pickles, and anything that does not read back as the
expected float64 array is drawn again; a cache that cannot be written (a read-only home) is
passed over in silence: it changes how long a run takes, never what it gives.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from functools import cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import numpy as np
import numpy.typing as npt

from pipesim.workload.durations import AgentDurations, DurationModel

__all__ = ["ENV", "MAX_CACHED", "MAX_FILES", "cache_dir", "cached_pool"]

ENV = "PIPESIM_DRAW_CACHE"
MAX_CACHED = 2_000_000
"""Durations a kept pool holds at most (16 MB); a larger one is drawn each time."""
MAX_FILES = 256
"""Pools kept at most (4 GB at the largest, a few MB for chapter-sized ones); the oldest go first."""


def cache_dir() -> Path | None:
    """``$PIPESIM_DRAW_CACHE``, else ``~/.cache/pipesim/draws``; None where it is ``off`` or empty."""
    env = os.environ.get(ENV)
    if env is not None:
        return None if env.strip() in ("", "off") else Path(env).expanduser()
    return Path.home() / ".cache" / "pipesim" / "draws"


@cache
def _code_and_torch() -> str:
    """The drawing code's bytes and torch's version, hashed once per process."""
    h = hashlib.sha256()
    for path in sorted((Path(__file__).resolve().parents[1] / "workload").glob("*.py")):
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    try:
        h.update(version("torch").encode())
    except PackageNotFoundError:  # the draw itself says torch is missing
        h.update(b"no torch")
    return h.hexdigest()


def _key(model: DurationModel, n: int, how: str, seed: int) -> str:
    text = json.dumps([repr(model), n, how, seed, _code_and_torch()])
    return hashlib.sha256(text.encode()).hexdigest()


def cached_pool(
    model: DurationModel, n: int, how: str, seed: int, draw: Callable[[], npt.NDArray[np.float64]]
) -> npt.NDArray[np.float64]:
    """The pool ``draw()`` returns (``n`` durations of ``model`` at ``seed``, drawn ``how``), read
    from the cache where a run kept it, else drawn and kept (module docstring)."""
    where = cache_dir()
    # AgentDurations itself: a subclass's drawing code is not in the key
    torch_drawn = type(model) is AgentDurations and model.draws == "chapter"
    if where is None or n > MAX_CACHED or not torch_drawn:
        return draw()
    path = where / f"{_key(model, n, how, seed)}.npy"
    try:
        kept = np.load(path, allow_pickle=False)
        if kept.dtype == np.float64 and kept.shape == (n,):
            return kept
    except (OSError, ValueError, EOFError):  # not there, or not a whole array: draw it
        pass
    pool = draw()
    with contextlib.suppress(OSError):  # not kept: the next run draws it again
        _keep(where, path, pool)
    return pool


def _keep(where: Path, path: Path, pool: npt.NDArray[np.float64]) -> None:
    """Write ``pool`` to ``path`` whole (a temporary file renamed into place), then drop the oldest
    files past :data:`MAX_FILES`."""
    where.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=where, prefix=".draw-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            np.save(out, pool, allow_pickle=False)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    files = sorted(where.glob("*.npy"), key=lambda p: p.stat().st_mtime)
    for old in files[: max(0, len(files) - MAX_FILES)]:
        old.unlink(missing_ok=True)
