"""The ``events`` table of a run, vectorised: one row per generation segment, pause, step, sync.

:func:`event_table` is what ``RunResult.events`` returns. An episode that lived through ``k``
weight updates has ``2k + 1`` candidate rows (its segments interleaved with the pauses between
them), planned per episode from the update index (:class:`~pipesim.results.columns.UpdateIndex`),
written in blocks of :data:`CHUNK_EPISODES` episodes into preallocated columns, and the empty
ones dropped; lanes are named ``rR/slotS`` and stored, like the kinds, as Categoricals.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from pipesim.results.columns import S_ABORTED, int_dtype

if TYPE_CHECKING:
    from pipesim.results.run import RunResult

EVENT_COLUMNS = ["kind", "lane", "slot", "replica", "start_s", "end_s", "version", "episode_id", "complete"]
EVENT_KINDS = ["gen", "pause", "train", "sync"]
CHUNK_EPISODES = 1 << 16
"""Episodes per block when the event rows are generated (bounds the temporaries)."""


def event_table(self: RunResult) -> pd.DataFrame:
    """One row per interval: kind gen / pause / train / sync, its lane, times and version
    (``RunResult.events``)."""
    c, T = self.columns, self.sim_time_s
    n_train, n_sync = len(self.train_log), len(self.sync_log)
    plan = None
    if c.n:
        inc = np.nonzero(~(c.status_is(S_ABORTED) & ~c.ended))[0]
        if len(inc):
            plan = _row_plan(self, inc, T)
    bound = int(2 * plan[0].sum() + len(plan[0])) if plan is not None else 0
    # the rows of gen/pause are written in place; pause or empty rows dropped leave a gap
    cap = bound + n_train + n_sync
    kind = np.empty(cap, dtype=np.int8)
    f_start, f_end = np.empty(cap, dtype=np.float64), np.empty(cap, dtype=np.float64)
    f_version = np.empty(cap, dtype=_version_dtype(self))
    n_gen = 0
    if plan is not None:
        per_ep, n_gen = _fill_rows(self, plan, (kind, f_start, f_end, f_version))
        del plan
    n = n_gen + n_train + n_sync
    if n == 0:
        return pd.DataFrame([], columns=EVENT_COLUMNS)
    if n < cap:  # rows were dropped: the tail goes right after the kept ones
        if cap - n > cap // 16:  # many: compact, one column at a time
            kind, f_start, f_end, f_version = (
                _shrunk(x, n_gen, n) for x in (kind, f_start, f_end, f_version)
            )
        else:  # a few: views of the first n rows, the gap left unused
            kind, f_start, f_end, f_version = kind[:n], f_start[:n], f_end[:n], f_version[:n]

    f_slot, f_replica, f_id = (np.empty(n, dtype=int_dtype(x)) for x in (c.slot, c.replica, c.id))
    complete = np.ones(n, dtype=np.bool_)
    lane_names: list[str] = []
    lane_code = np.empty(n, dtype=np.int16)
    if n_gen:  # the temporaries are dropped as soon as they are used: this is a run's peak memory
        f_id[:n_gen] = np.repeat(c.id[inc], per_ep)
        has_rows = per_ep > 0
        running = np.nonzero(~c.ended[inc] & has_rows)[0]
        used = inc[has_rows]
        del inc
        lane_names, lane_of, lane_replica, lane_slot = _lanes(c.replica[used], c.slot[used])
        del used
        if len(lane_names) + 2 > np.iinfo(np.int16).max:
            lane_code = np.empty(n, dtype=np.int32)
        codes = lane_code[:n_gen]
        codes[:] = np.repeat(lane_of.astype(lane_code.dtype), per_ep[has_rows])
        del lane_of, has_rows
        # np.take into the columns: no temporary of one int64 per row ("clip": "raise" buffers `out`;
        # every code is a valid lane)
        np.take(lane_slot.astype(f_slot.dtype), codes, out=f_slot[:n_gen], mode="clip")
        np.take(lane_replica.astype(f_replica.dtype), codes, out=f_replica[:n_gen], mode="clip")
        del codes
        row_end = np.cumsum(per_ep)
        for i in running.tolist():  # the episodes still running
            complete[row_end[i] - per_ep[i] : row_end[i]] = False
        del row_end, per_ep
    tail = slice(n_gen, n)
    kind[n_gen : n_gen + n_train], kind[n_gen + n_train :] = 2, 3
    lane_code[n_gen : n_gen + n_train] = len(lane_names)
    lane_code[n_gen + n_train :] = len(lane_names) + 1
    f_slot[tail], f_replica[tail], f_id[tail] = -1, -1, -1
    if n_train:
        tl = np.array([(a, b, v) for _, a, b, v in self.train_log], dtype=object)
        f_start[n_gen : n_gen + n_train] = tl[:, 0].astype(np.float64)
        f_end[n_gen : n_gen + n_train] = tl[:, 1].astype(np.float64)
        f_version[n_gen : n_gen + n_train] = tl[:, 2].astype(np.int64)
    if n_sync:
        sl = np.array(self.sync_log, dtype=object)
        f_start[n_gen + n_train :] = sl[:, 0].astype(np.float64)
        f_end[n_gen + n_train :] = sl[:, 1].astype(np.float64)
        f_version[n_gen + n_train :] = sl[:, 2].astype(np.int64)
    lanes = pd.Categorical.from_codes(
        lane_code,  # type: ignore[arg-type]
        categories=pd.Index([*lane_names, "trainer", "sync"]),
    )
    del lane_code
    cols: dict[str, Any] = {
        "kind": pd.Categorical.from_codes(kind, categories=pd.Index(EVENT_KINDS)),
        "lane": lanes,
        "slot": f_slot,
        "replica": f_replica,
        "start_s": f_start,
        "end_s": f_end,
        "version": f_version,
        "episode_id": f_id,
        "complete": complete,
    }
    return pd.DataFrame(cols, copy=False)


def _version_dtype(self: RunResult) -> type[np.signedinteger[Any]]:
    logs = [v for *_, v in self.train_log] + [v for *_, v in self.sync_log]
    return int_dtype(self.columns.version, self.update_index.version_after, np.array(logs, dtype=np.int64))


def _row_plan(self: RunResult, idx: np.ndarray, T: float) -> tuple[np.ndarray, ...]:
    """For the episodes ``idx``: how many updates split each (``k``: ``2k + 1`` candidate
    rows), where they begin among the update boundaries, and its start, end and version."""
    c, u = self.columns, self.update_index
    complete = c.ended[idx]
    end = np.where(complete, c.end_s[idx], T)
    lo = c.update_from[idx].astype(np.int64)
    hi = np.where(complete, c.update_to[idx], u.m)
    del complete
    stop = u.first_start_after(lo, hi, end)
    k, pos = u.applying(self._rows(idx), lo, stop)
    return k, pos, c.start_s[idx], end, c.version[idx]


def _fill_rows(
    self: RunResult, plan: tuple[np.ndarray, ...], outs: tuple[np.ndarray, ...]
) -> tuple[np.ndarray, int]:
    """Write the gen and pause rows of the planned episodes into ``outs`` (kind code 0 gen /
    1 pause, start, end, version) from row 0 on; return the rows kept per episode and in all.

    Episode by episode, in order: its segments (version, start, end) interleaved with the
    pauses between them, as :meth:`Episode.segments` gives them; zero-length segments and
    pauses are dropped (an episode's only segment is kept). The ``2k + 1`` candidate rows of
    an episode under ``k`` updates run over its start, the updates' starts and ends
    interleaved (one slice of :attr:`UpdateIndex.boundaries`), and its end.
    """
    k, pos, start0, end, version0 = plan
    times, versions = self.update_index.boundaries
    times_next = times[1:]
    o_kind, o_start, o_end, o_version = outs
    counts = np.empty(len(k), dtype=np.int64)
    w = 0
    for c0 in range(0, len(k), CHUNK_EPISODES):
        c1 = min(c0 + CHUNK_EPISODES, len(k))
        kc = k[c0:c1]
        n_rows = 2 * kc + 1
        row_off = np.zeros(len(kc), dtype=np.int64)
        np.cumsum(n_rows[:-1], out=row_off[1:])
        total = int(row_off[-1] + n_rows[-1])
        # gi = 2 * pos + (row within the episode): the boundary a row starts at
        delta = 2 * pos[c0:c1] - row_off
        step = np.ones(total, dtype=np.int64)
        step[row_off[1:]] = 1 + np.diff(delta)
        step[0] = delta[0]
        gi = np.cumsum(step, out=step)
        r_start, r_end, r_version = times[gi], times_next[gi], versions[gi]
        r_kind = (gi & 1).astype(np.int8)  # odd rows are pauses
        del gi
        r_start[row_off] = start0[c0:c1]
        r_end[row_off + 2 * kc] = end[c0:c1]
        r_version[row_off] = version0[c0:c1]
        spans = kc > 0
        r_version[row_off[spans] + 1] = version0[c0:c1][spans]
        keep = r_end > r_start
        keep[row_off[~spans]] = True  # an episode's only segment is kept even if empty
        if keep.all():
            counts[c0:c1] = n_rows
            kept = total
        else:
            counts[c0:c1] = np.add.reduceat(keep, row_off, dtype=np.int64)
            r_kind, r_start, r_end, r_version = r_kind[keep], r_start[keep], r_end[keep], r_version[keep]
            kept = len(r_start)
        o_kind[w : w + kept], o_start[w : w + kept] = r_kind, r_start
        o_end[w : w + kept], o_version[w : w + kept] = r_end, r_version
        w += kept
    return counts, w


def _lanes(replica: np.ndarray, slot: np.ndarray) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    """Lane names ``r{replica}/slot{slot}`` ordered by (replica, slot), each pair's lane index, and
    each lane's replica and slot (with -1, -1 appended for the trainer and sync lanes)."""
    r_min, s_min = int(replica.min()), int(slot.min())
    width = int(slot.max()) - s_min + 1
    n_keys = (int(replica.max()) - r_min + 1) * width
    wide = np.int64 if n_keys >= 2**31 - 1 else np.int32  # int32 keys halve the temporaries
    key: np.ndarray = (replica.astype(wide) - r_min) * width
    np.add(key, slot.astype(wide) - s_min, out=key)
    if n_keys <= 4 * len(key) + 1024:
        present = np.zeros(n_keys, dtype=np.bool_)
        present[key] = True
        uniq = np.nonzero(present)[0]
        code_of = np.cumsum(present, dtype=wide) - 1
        lane_of = code_of[key]
    else:
        uniq, lane_of = np.unique(key, return_inverse=True)
    lane_replica = np.append(uniq // width + r_min, [-1, -1])
    lane_slot = np.append(uniq % width + s_min, [-1, -1])
    names = [f"r{r}/slot{q}" for r, q in zip(lane_replica[:-2].tolist(), lane_slot[:-2].tolist())]
    return names, lane_of, lane_replica, lane_slot


def _shrunk(x: np.ndarray, n_gen: int, n: int) -> np.ndarray:
    """The first ``n_gen`` entries of ``x`` in a new array of length ``n`` (the rest unset)."""
    out = np.empty(n, dtype=x.dtype)
    out[:n_gen] = x[:n_gen]
    return out
