"""The run's episode records: Python objects while an episode can change, numpy arrays once it cannot.

An :class:`~pipesim.core.episode.Episode` is an object while it runs and waits in the buffer,
because the engine and the policies update it. Once the trainer has taken it, or it has been
dropped (discarded, aborted or failed: it will never run or be trained again), nothing changes
it, so the trainer hands each batch to :meth:`EpisodeRecords.archive` and the engine each drop
to :meth:`EpisodeRecords.retire`. The records gather :data:`ARCHIVE_BLOCK_EPISODES` of them and
write their fields into arrays indexed by episode id (the engine's launch counter: 0, 1, 2, ...),
then drop the objects. An archived episode costs about 53 bytes (seven ``int32`` fields, three
``float64`` and an ``int8`` status code) instead of about 400 bytes of objects, and the arrays
are the columns the results read (:class:`~pipesim.results.columns.EpisodeColumns`), so a table
needs no second copy of them.

The rare fields of an episode that differ from their defaults (``truncated``, ``parent``,
re-prefill and lost seconds, ...; :data:`~pipesim.core.episode.RARE_DEFAULTS`), a ``work_s`` that differs
from ``duration_s`` (a capped or re-prefilled episode) and a ``task_id`` that differs from the id
(a relaunch) are kept per episode, as they were. The
engine-internal ``offset_start`` (the replica's paused-time total at the start) is not kept: an
archived episode reads it as NaN.

:class:`EpisodeRecords` is a ``Sequence[Episode]`` in id order: indexing and iterating give the
live objects themselves and, for archived episodes, equal objects rebuilt from the arrays (new
objects at every access, so changing one changes nothing).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from operator import attrgetter
from typing import Any, overload

import numpy as np

from pipesim.core.episode import (
    ABORTED,
    DISCARDED,
    FAILED,
    RARE_DEFAULTS,
    STATUSES,
    TRAINED,
    Episode,
    episode_values,
)

ARCHIVE_BLOCK_EPISODES = 1024
"""Trained episodes gathered before they are written as arrays (a block's fixed cost is about a
dozen ``np.fromiter`` calls; at 1,024 episodes that is a few ns per episode)."""
_RARE_NAMES = tuple(RARE_DEFAULTS)
_RARE_VALUES = tuple(RARE_DEFAULTS.values())
_rare = attrgetter(*_RARE_NAMES)

ARCHIVE_MIN_EPISODES = 65536
"""A run that will train fewer episodes than this (steps x batch size) keeps every one an object:
archiving reads about a dozen attributes of each episode (1-2 µs, a tenth of a small run's time
per episode), which only a big run repays in memory; below this the objects take at most about
26 MB. A bigger run archives from its first batch on, so no early objects' memory lingers."""

INT_FIELDS = (
    "slot",
    "replica",
    "version",
    "update_from",
    "update_to",
    "trained_step",
    "trained_version",
)
FLOAT_FIELDS = ("duration_s", "start_s", "end_s")
ARCHIVED_FIELDS = (*INT_FIELDS, *FLOAT_FIELDS)
"""The fields kept as arrays indexed by id (besides ``status``, a code into ``STATUSES``)."""
READ_INT_FIELDS = INT_FIELDS[:-2]
"""The int fields read off the objects (the training step and version are the batch's)."""
RETIRED = {s: STATUSES.index(s) for s in (DISCARDED, ABORTED, FAILED)}
"""The statuses of dropped episodes the records archive (one a policy invents stays an object)."""
_TRAINED_CODE = STATUSES.index(TRAINED)
_FIRST_CAPACITY = 4096
_MAX_HINT = 1 << 24
"""The arrays are first sized for the episodes a run expects to train, and a quarter more (the
ids of trained episodes run ahead of their count), at most this many; past it they double. One
allocation avoids the freed smaller copies of a doubling, which the allocator keeps resident.
Pages never written cost no memory."""


def _grown(a: np.ndarray, capacity: int) -> np.ndarray:
    out = np.empty(capacity, dtype=a.dtype)  # untouched pages cost no memory until written
    out[: len(a)] = a
    return out


class EpisodeRecords(Sequence[Episode]):
    """Every episode of a run in id order: live objects, and archived (trained or dropped) ones as arrays.

    The engine adds an episode with ``records.live[ep.id] = ep`` (or :meth:`append`), hands
    each trained batch to :meth:`archive` and each drop to :meth:`retire`. ``archive_block`` is
    the number of final episodes gathered before they are written as arrays (0: never archive,
    every episode stays an object).
    ``expected``, the number of episodes the run will train, sizes the arrays.
    ``arrays[name][i]`` holds field ``name`` of archived episode ``i`` (entries of live episodes
    are unset): every id below ``len(self)`` that is not in ``live`` is archived.
    """

    def __init__(self, archive_block: int = ARCHIVE_BLOCK_EPISODES, expected: int = 0) -> None:
        self.live: dict[int, Episode] = {}
        """The episodes still kept as objects, by id (in id order: ids only grow)."""
        self.archive_block = archive_block
        self.n_archived = 0
        self.arrays: dict[str, np.ndarray] = {}
        self.work_s: dict[int, float] = {}
        """Id -> ``work_s`` of archived episodes where it is not ``duration_s``."""
        self.task_id: dict[int, int] = {}
        """Id -> ``task_id`` of archived episodes where it is not the id."""
        self.extras: dict[int, dict[str, Any]] = {}
        """Id -> an archived episode's rare fields that differ from :data:`RARE_DEFAULTS`, where any do."""
        self._pending: list[tuple[list[Episode], int, int, int]] = []  # (episodes, step, version, status)
        self._first_capacity = max(_FIRST_CAPACITY, min(expected + expected // 4, _MAX_HINT))
        self._n_pending = 0

    def append(self, ep: Episode) -> None:
        self.live[ep.id] = ep

    def archive(self, batch: list[Episode], step: int, version: int) -> None:
        """The trainer took ``batch`` (statuses, steps and versions already set)."""
        if self.archive_block <= 0:
            return
        self._pending.append((batch, step, version, _TRAINED_CODE))
        self._n_pending += len(batch)
        if self._n_pending >= self.archive_block:
            self.flush()

    def retire(self, episodes: list[Episode], status: str) -> None:
        """``episodes`` were dropped with ``status`` (already set): they will not change again.

        Only the engine's own drop statuses are archived, and only episodes that have an end (an
        abort sets it); any other stays an object."""
        code = RETIRED.get(status)
        if self.archive_block <= 0 or code is None:
            return
        done = [ep for ep in episodes if ep.end_s is not None]
        if not done:
            return
        self._pending.append((done, -1, -1, code))
        self._n_pending += len(done)  # written at the trainer's next archive (not now: the policy
        # that dropped them may still read them, and the failure policy of a lifecycle does)

    def flush(self) -> None:
        """Write the gathered final episodes into the arrays and drop their objects."""
        batches, self._pending, self._n_pending = self._pending, [], 0
        # each episode comes here once: the trainer takes only buffered episodes, the buffer
        # discards only buffered ones, and the port's drop refuses one that has ended already
        live = self.live
        eps = [ep for batch, *_ in batches for ep in batch]
        n = len(eps)
        if not n:
            return
        ids = np.fromiter(episode_values(eps, "id"), np.int64, count=n)
        self._reserve(int(ids.max()) + 1)
        arrays = self.arrays
        sizes = [len(batch) for batch, *_ in batches]  # step, version and status, per hand-over
        for name, values in (
            ("trained_step", [s for _, s, _, _ in batches]),
            ("trained_version", [v for _, _, v, _ in batches]),
            ("status", [c for *_, c in batches]),
        ):
            arrays[name][ids] = np.repeat(np.array(values, dtype=arrays[name].dtype), sizes)
        for name in READ_INT_FIELDS:
            col = arrays[name]
            try:
                col[ids] = np.fromiter(episode_values(eps, name), col.dtype, count=n)
            except OverflowError:  # a value beyond int32: this field is int64 from now on
                col = arrays[name] = col.astype(np.int64)
                col[ids] = np.fromiter(episode_values(eps, name), np.int64, count=n)
        for name in FLOAT_FIELDS:
            arrays[name][ids] = np.fromiter(episode_values(eps, name), np.float64, count=n)
        work = np.fromiter(episode_values(eps, "work_s"), np.float64, count=n)
        differs = np.nonzero(work != arrays["duration_s"][ids])[0]
        self.work_s.update(zip(ids[differs].tolist(), work[differs].tolist()))
        task = np.fromiter(episode_values(eps, "task_id"), np.int64, count=n)
        differs = np.nonzero(task != ids)[0]  # a relaunch runs an earlier task; the rest run their own
        self.task_id.update(zip(ids[differs].tolist(), task[differs].tolist()))
        # one tuple of the rare fields per episode, compared with the defaults' in one go
        extras = self.extras
        for ep in eps:
            if (rare := _rare(ep)) != _RARE_VALUES:
                extras[ep.id] = {k: v for k, v, d in zip(_RARE_NAMES, rare, _RARE_VALUES) if v != d}
        for ep in eps:
            del live[ep.id]
        self.n_archived += n

    def column(self, name: str, n: int) -> np.ndarray:
        """The array of field ``name`` for ids ``0..n-1`` (a view; entries of live episodes unset)."""
        self._reserve(n)
        return self.arrays[name][:n]

    def _reserve(self, size: int) -> None:
        cap = len(self.arrays["end_s"]) if self.arrays else 0
        if size <= cap:
            return
        while cap < size:
            cap = max(2 * cap, self._first_capacity)
        if not self.arrays:
            self.arrays = {name: np.empty(0, dtype=np.int32) for name in INT_FIELDS}
            self.arrays.update({name: np.empty(0, dtype=np.float64) for name in FLOAT_FIELDS})
            self.arrays["status"] = np.empty(0, dtype=np.int8)
        for name, a in self.arrays.items():
            self.arrays[name] = _grown(a, cap)

    def __len__(self) -> int:
        return self.n_archived + len(self.live)

    def rare_column(self, name: str, dtype: Any, n: int) -> np.ndarray:
        """A field not kept as an array (``id``, ``task_id``, ``work_s``, ``Episode``'s rare fields)
        for ids ``0..n-1``: the archived episodes' values, defaults elsewhere (the caller fills in
        the live ones)."""
        if name == "work_s":
            out = np.array(self.arrays["duration_s"][:n], dtype=dtype)
            for i, w in self.work_s.items():
                out[i] = w
            return out
        if name == "offset_start":
            return np.full(n, math.nan, dtype=dtype)
        if name == "id":
            return np.arange(n, dtype=dtype)
        if name == "task_id":
            out = np.arange(n, dtype=dtype)
            for i, t in self.task_id.items():
                out[i] = t
            return out
        if name not in RARE_DEFAULTS:
            raise KeyError(f"{name} is not a field the records keep per episode")
        default = RARE_DEFAULTS[name]
        as_nan = np.dtype(dtype) != np.dtype(object)
        out = np.full(n, math.nan if default is None and as_nan else default, dtype=dtype)
        for i, d in self.extras.items():
            if name in d:
                value = d[name]
                out[i] = math.nan if value is None and as_nan else value
        return out

    def _rebuilt(self, i: int) -> Episode:
        a = self.arrays
        ep = Episode(i, self.task_id.get(i, i), float(a["duration_s"][i]), int(a["version"][i]))
        ep.slot, ep.replica = int(a["slot"][i]), int(a["replica"][i])
        ep.start_s, ep.end_s = float(a["start_s"][i]), float(a["end_s"][i])
        ep.update_from, ep.update_to = int(a["update_from"][i]), int(a["update_to"][i])
        ep.trained_step, ep.trained_version = int(a["trained_step"][i]), int(a["trained_version"][i])
        ep.offset_start = math.nan
        ep.status = STATUSES[a["status"][i]]
        ep.work_s = self.work_s.get(i, ep.duration_s)
        for name, value in self.extras.get(i, {}).items():
            setattr(ep, name, value)
        return ep

    def _get(self, i: int) -> Episode:
        got = self.live.get(i)
        if got is not None:
            return got
        return self._rebuilt(i)  # ids 0..len-1 are each live or archived

    def __iter__(self) -> Iterator[Episode]:
        """Every episode in id order, one at a time (archived ones rebuilt as they come)."""
        if self.n_archived == 0:
            yield from list(self.live.values())
            return
        for i in range(len(self)):
            yield self._get(i)

    @overload
    def __getitem__(self, index: int) -> Episode: ...
    @overload
    def __getitem__(self, index: slice) -> list[Episode]: ...
    def __getitem__(self, index: int | slice) -> Episode | list[Episode]:
        n = len(self)
        if isinstance(index, slice):
            return [self._get(i) for i in range(n)[index]]
        i = index + n if index < 0 else index
        if not 0 <= i < n:
            raise IndexError(f"episode index {index} out of range for {n} episodes")
        return self._get(i)

    def __repr__(self) -> str:
        return f"EpisodeRecords({len(self)} episodes, {self.n_archived} archived)"
