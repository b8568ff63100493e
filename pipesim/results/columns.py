"""Columnar views of a run's records, and the vectorised pieces its tables and summary are made of.

:class:`EpisodeColumns` gives the episodes of a run as numpy arrays, one attribute at a time and
only when a table or the summary first needs it. From the engine's
:class:`~pipesim.core.records.EpisodeRecords` it takes the archived (trained) episodes' arrays
as they are and writes in the values of the few episodes still kept as objects; from a plain
list of :class:`~pipesim.core.episode.Episode` objects it reads each attribute in one
``np.fromiter`` pass (no per-episode tuples). :class:`UpdateIndex` holds the update log as
arrays with, per replica, the prefix counts of the updates that apply to it, so the updates an
episode ran under (``update_from`` to ``update_to``) are found by index arithmetic instead of a
Python loop per episode.

Sums are *sequential* (:func:`seq_sum`, and per episode in ``RunResult``), in the order the
per-episode code added them, so every summary value is bit-for-bit the one Python's ``sum`` gives
(up to 3.11; 3.12 made ``sum`` of floats compensated, which can differ in the last bits).

Reading objects costs about 60 ns per attribute and episode (more where they are scattered in
memory); the engine pays it once per trained episode when it archives it, so the tables of a big
run read arrays only (:meth:`EpisodeColumns.from_arrays` builds the same view from given arrays).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cached_property
from itertools import compress
from typing import Any

import numpy as np

from pipesim.core.episode import (
    ABORTED,
    RUNNING,
    STATUSES,
    Episode,
    UpdateRecord,
    episode_column,
    episode_values,
)
from pipesim.core.records import ARCHIVED_FIELDS, EpisodeRecords
from pipesim.core.validate import FieldError

# STATUSES (pipesim.core.episode): status names in code order. ``EpisodeColumns.status`` holds
# indices into it (and into ``EpisodeColumns.status_names``, which extends it with any status a
# policy invented), as the records' own ``status`` array does.
S_RUNNING, S_BUFFERED, S_TRAINED, S_DISCARDED, S_ABORTED, S_FAILED = range(6)

IntArray = np.ndarray[Any, np.dtype[np.int64]]
FloatArray = np.ndarray[Any, np.dtype[np.float64]]
BoolArray = np.ndarray[Any, np.dtype[np.bool_]]


def seq_sum(x: np.ndarray) -> float:
    """``sum(x.tolist())`` without the list: a left-to-right float sum (0 when ``x`` is empty)."""
    if len(x) == 0:
        return 0
    return float(np.add.accumulate(x, dtype=np.float64)[-1])


def expand(counts: IntArray) -> tuple[IntArray, IntArray]:
    """For segments of ``counts[i]`` items: each item's segment index and its position inside it."""
    total = int(counts.sum())
    seg = np.repeat(np.arange(len(counts), dtype=np.int64), counts)
    starts = np.zeros(len(counts), dtype=np.int64)
    np.cumsum(counts[:-1], out=starts[1:])
    pos = np.arange(total, dtype=np.int64) - starts[seg]
    return seg, pos


def int_dtype(*columns: np.ndarray) -> type[np.signedinteger[Any]]:
    """int32 for a table column of these values where they fit in it (ids, slots, versions: a run
    would need 2**31 of them to overflow), else int64. Halves the tables' integer columns."""
    small = all(x.dtype.itemsize <= 4 or len(x) == 0 or abs(x).max() < 2**31 - 1 for x in columns)
    return np.int32 if small else np.int64


def _distinct(x: IntArray) -> IntArray:
    """The sorted distinct values of a small-range integer array (np.unique is slow on millions)."""
    if len(x) == 0:
        return np.zeros(0, dtype=np.int64)
    lo, hi = int(x.min()), int(x.max())
    if hi - lo > 4 * len(x) + 1024:
        return np.unique(x)
    present = np.zeros(hi - lo + 1, dtype=np.bool_)
    present[x - lo] = True
    return np.nonzero(present)[0] + lo


class EpisodeColumns:
    """The episodes of a run as numpy arrays; each column is read from the objects on first use.

    ``end_s`` is NaN where an episode has not ended, ``discarded_s`` where it was not discarded.
    ``status`` is an ``int8`` code into
    :attr:`status_names`. :meth:`from_arrays` builds the same view from arrays directly.
    """

    INT_COLUMNS = (
        "id",
        "task_id",
        "slot",
        "replica",
        "version",
        "update_from",
        "update_to",
        "trained_step",
        "trained_version",
        "parent",
    )
    FLOAT_COLUMNS = (
        "duration_s",
        "start_s",
        "lost_s",
        "reprefill_tokens",
        "reprefill_s",
        "tokens_before_update",
    )

    def __init__(self, episodes: Sequence[Episode]) -> None:
        self.n = len(episodes)
        self._records: EpisodeRecords | None = None
        self._dense_ids = isinstance(episodes, EpisodeRecords)  # a run's records: ids 0..n-1, in order
        if isinstance(episodes, EpisodeRecords):
            live = list(episodes.live.values())
            if episodes.n_archived:  # archived episodes are read from their arrays, the rest from objects
                self._records = episodes
                self._live_ids = np.fromiter(episodes.live.keys(), np.int64, count=len(live))
                self._inner = EpisodeColumns(live)
            episodes = live
        self._episodes = episodes

    @classmethod
    def from_arrays(cls, arrays: dict[str, Any], status_names: Sequence[str] = STATUSES) -> EpisodeColumns:
        """A view over given columns (``status`` as codes into ``status_names``); no episode objects."""
        lengths = {len(v) for v in arrays.values()}
        if len(lengths) > 1:
            raise FieldError(f"arrays: columns differ in length: {sorted(lengths)}", "arrays")
        self = cls([])
        self.n = lengths.pop() if lengths else 0
        self.__dict__["status_names"] = tuple(status_names)
        for name, values in arrays.items():
            self.__dict__[name] = np.asarray(values)
        return self

    def _read(self, name: str, dtype: Any) -> np.ndarray:
        r = self._records
        if r is None:
            return episode_column(self._episodes, name, dtype)
        if name in ARCHIVED_FIELDS:
            # the records' own array (no copy where the dtype matches), the live entries written in
            out = r.column(name, self.n).astype(dtype, copy=False)
        else:
            out = r.rare_column(name, dtype, self.n)
        out[self._live_ids] = episode_column(self._episodes, name, dtype)
        return out

    def _read_int(self, name: str) -> np.ndarray:
        r = self._records
        if r is None or name not in r.arrays or r.arrays[name].dtype != np.int64:
            try:  # int32 halves the cached columns; values beyond it fall back to int64
                return self._read(name, np.int32)
            except OverflowError:
                pass
        return self._read(name, np.int64)

    def total(self, name: str) -> float:
        """``sum(getattr(e, name) for e in episodes)`` (left to right) without keeping the column."""
        if name in self.__dict__:
            return seq_sum(self.__dict__[name])
        return seq_sum(self._read(name, np.float64))

    def count_nonnegative(self, name: str) -> int:
        """How many episodes have ``getattr(e, name) >= 0`` (without keeping the column)."""
        col = self.__dict__[name] if name in self.__dict__ else self._read_int(name)
        return int(np.count_nonzero(col >= 0))

    def __getattr__(self, name: str) -> np.ndarray:
        # only reached for columns not read yet (a read column lives in __dict__)
        if name == "id" and self.__dict__.get("_dense_ids"):
            return np.arange(self.n, dtype=int_dtype(np.array([self.n])))  # the records' ids: not kept
        if name in self.INT_COLUMNS:
            arr = self._read_int(name)
        elif name in self.FLOAT_COLUMNS:
            arr = self._read(name, np.float64)
        elif name == "truncated":
            arr = self._read(name, np.bool_)
        elif name == "end_s":
            arr = self._read_end_s()
        elif name == "discarded_s":  # None (not discarded) reads as NaN
            arr = self._read(name, object).astype(np.float64)
        elif name in ("status", "status_names"):
            self._read_status()
            return self.__dict__[name]  # type: ignore[no-any-return]
        else:
            raise AttributeError(name)
        self.__dict__[name] = arr
        return arr

    def _read_end_s(self) -> FloatArray:
        """``end_s`` with NaN for None. Only running (and aborted) episodes can lack an end, so the
        others are read as floats, which is much cheaper than reading objects; a None among them
        makes it read every episode as an object instead. Archived episodes have ended."""
        if self._records is not None:
            out = self._records.column("end_s", self.n)
            out[self._live_ids] = self._inner.end_s
            return out  # type: ignore[no-any-return]
        eps = self._episodes
        maybe_none = (self.status == STATUSES.index(RUNNING)) | (self.status == STATUSES.index(ABORTED))
        out = np.full(self.n, np.nan)
        few = np.nonzero(maybe_none)[0]
        if len(few):
            out[few] = np.array([eps[i].end_s for i in few.tolist()], dtype=object).astype(np.float64)
        rest = ~maybe_none
        n_rest = self.n - len(few)
        try:
            if len(few) == 0:
                out[:] = np.fromiter(episode_values(eps, "end_s"), np.float64, count=self.n)
            elif n_rest:
                it = episode_values(compress(eps, rest.tolist()), "end_s")
                out[rest] = np.fromiter(it, np.float64, count=n_rest)
        except TypeError:  # an episode that is neither running nor aborted and has no end
            out = self._read("end_s", object).astype(np.float64)
        return out

    def _read_status(self) -> None:
        if self._records is not None:  # archived episodes: the records' codes (the same order)
            live = self._inner.status
            codes = self._records.column("status", self.n).astype(live.dtype)
            codes[self._live_ids] = live
            self.__dict__["status"] = codes
            self.__dict__["status_names"] = self._inner.status_names
            return
        names = list(STATUSES)
        code = {s: i for i, s in enumerate(names)}
        try:  # in one pass over the objects, without a column of their strings
            statuses = episode_values(self._episodes, "status")
            codes = np.fromiter(map(code.__getitem__, statuses), np.int8, count=self.n)
        except KeyError:  # a status this module does not know: add it after the known ones
            raw = self._read("status", object)
            for s in dict.fromkeys(raw):
                if s not in code:
                    code[s] = len(names)
                    names.append(s)
            codes = np.fromiter(map(code.__getitem__, raw), np.int16, count=len(raw))
        self.__dict__["status"] = codes
        self.__dict__["status_names"] = tuple(names)

    def status_is(self, code: int) -> BoolArray:
        return self.status == code  # type: ignore[no-any-return]

    @cached_property
    def ended(self) -> BoolArray:
        return ~np.isnan(self.end_s)

    def generated_s(self, cap_s: float | None) -> FloatArray:
        """Seconds each episode generates: its duration, at most the timeout's cap. That holds for
        every episode drawn longer than the cap, not only the ``truncated`` ones (those that
        finished at it): one that failed, was aborted or is still running reports the cap too, as
        on the pool clamped at the cap (:mod:`pipesim.core.lifecycle`)."""
        dur = self.duration_s
        if cap_s is None:
            return dur  # type: ignore[no-any-return]
        cap = float(cap_s)
        if not (dur > cap).any():
            return dur  # type: ignore[no-any-return]
        return np.minimum(dur, cap)


class UpdateIndex:
    """The update log as arrays, with the updates that apply to each replica found by prefix counts.

    For replica row ``r`` (see :meth:`rows`), ``cum[r, i]`` counts the updates among the first
    ``i`` of the log that apply to it, and ``sub[base[r] + j]`` is the log index of its ``j``-th
    such update. The updates of ``[lo, hi)`` that apply to an episode on that replica are then
    ``sub[base[r] + cum[r, lo] : base[r] + cum[r, hi]]``. When every update applies to every
    replica (``shared``) there is one row, ``sub`` is the whole log, and ``rows`` is None.
    """

    def __init__(self, updates: Sequence[UpdateRecord], replicas: Callable[[], IntArray]) -> None:
        m = self.m = len(updates)
        self.start_s = np.fromiter((u.start_s for u in updates), np.float64, count=m)
        self.end_s = np.fromiter((u.end_s for u in updates), np.float64, count=m)
        version_after = np.fromiter((u.version_after for u in updates), np.int64, count=m)
        self.version_after = version_after.astype(int_dtype(version_after), copy=False)
        """int32 where it fits, so the newest versions of a million episodes are int32 too."""
        self.replica = np.fromiter((u.replica for u in updates), np.int64, count=m)
        self.shared = bool((self.replica < 0).all())
        """Every update applies to every replica: the episodes' replicas do not matter."""
        self.keys = np.zeros(1, dtype=np.int64) if self.shared else _distinct(replicas())
        n_keys = len(self.keys)
        applies = (self.replica[None, :] < 0) | (self.replica[None, :] == self.keys[:, None])
        self.cum = np.zeros((n_keys, m + 1), dtype=np.int64)
        np.cumsum(applies, axis=1, out=self.cum[:, 1:])
        counts = self.cum[:, m]
        self.base = np.zeros(n_keys, dtype=np.int64)
        if n_keys:
            np.cumsum(counts[:-1], out=self.base[1:])
        self.sub = np.nonzero(applies)[1].astype(np.int64)  # row-major: replica rows in order
        self.monotonic = bool(m < 2 or (np.diff(self.start_s) >= 0).all())
        ends = self.end_s[self.sub]  # in sub order: per replica row, then across rows
        rise = np.diff(ends) >= 0
        row_starts = self.base[1:][(self.base[1:] > 0) & (self.base[1:] < len(ends))]
        rise[row_starts - 1] = True  # a fall from one replica row to the next does not count
        self.ends_rise = bool(rise.all())
        """Within each replica row the applying updates end in log order (the engine's logs)."""

    @cached_property
    def boundaries(self) -> tuple[FloatArray, IntArray]:
        """The applying updates' start and end times interleaved, replica row by row, padded by one
        slot at each end: ``times[2j + 1]``, ``times[2j + 2]`` are the start and end of ``sub[j]``.
        ``versions`` beside it holds, at ``2j + 1``, the version before ``sub[j]`` (after
        ``sub[j - 1]``) and at ``2j + 2`` the version after it: the version of an event row that
        starts at that time."""
        n = len(self.sub)
        times = np.zeros(2 * n + 2, dtype=np.float64)
        versions = np.zeros(2 * n + 2, dtype=np.int64)
        times[1:-1:2], times[2:-1:2] = self.start_s[self.sub], self.end_s[self.sub]
        after = self.version_after[self.sub]
        versions[2:-1:2] = after
        versions[3:-1:2] = after[:-1]
        return times, versions

    def rows(self, replicas: IntArray) -> IntArray | None:
        """The row of each replica (None when the updates are shared: there is one row)."""
        if self.shared:
            return None
        keys = self.keys
        if keys[-1] - keys[0] == len(keys) - 1:  # contiguous replica ids
            return replicas.astype(np.int64) - int(keys[0])  # type: ignore[no-any-return]
        return np.searchsorted(keys, replicas)  # type: ignore[no-any-return]

    def applying(self, rows: IntArray | None, lo: IntArray, hi: IntArray) -> tuple[IntArray, IntArray]:
        """Per episode: how many updates of ``[lo, hi)`` apply to it, and where they begin in ``sub``."""
        if rows is None:  # shared: cum[0, i] == i and sub is the log itself
            lo = lo.astype(np.int64)
            return np.maximum(hi - lo, 0), lo
        flat = rows * (self.m + 1)
        cum = self.cum.ravel()
        c_lo = cum[flat + lo]
        count = np.maximum(cum[flat + np.maximum(hi, lo)] - c_lo, 0)
        return count, self.base[rows] + c_lo

    def newest_version(
        self, rows: IntArray | None, lo: IntArray, hi: IntArray, version: IntArray
    ) -> IntArray:
        """The version after the last update of ``[lo, hi)`` that applies, else ``version``."""
        if len(self.sub) == 0:
            return version.astype(np.int64)
        count, pos = self.applying(rows, lo, hi)
        last = self.sub[np.clip(pos + count - 1, 0, len(self.sub) - 1)]
        return np.where(count > 0, self.version_after[last], version)

    def first_start_after(self, lo: IntArray, hi: IntArray, end: FloatArray) -> IntArray:
        """Per episode, the first index of ``[lo, hi)`` whose update starts after ``end`` (else ``hi``)."""
        hi = np.maximum(hi, lo)
        if self.monotonic:
            # starts rise along the log, so only an episode whose last update starts after its end
            # stops early (the engine logs an update once it is over: that never happens there)
            out = hi.astype(np.int64)
            if self.m == 0:
                return out
            late = np.nonzero((hi > lo) & (self.start_s[np.maximum(hi - 1, 0)] > end))[0]
            if len(late):
                first = np.searchsorted(self.start_s, end[late], side="right")
                out[late] = np.maximum(np.minimum(first, hi[late]), lo[late])
            return out
        span = hi - lo
        seg, pos = expand(span)
        idx = lo[seg] + pos
        after = self.start_s[idx] > end[seg]
        out = hi.astype(np.int64)
        hit = np.nonzero(after)[0]
        # the first hit of each segment: hits are in segment order, so keep the first per segment
        first_of_seg = np.ones(len(hit), dtype=bool)
        first_of_seg[1:] = seg[hit[1:]] != seg[hit[:-1]]
        out[seg[hit[first_of_seg]]] = idx[hit[first_of_seg]]
        return out
