"""Typed results of a run: raw records in, pandas DataFrames and a flat summary out.

The engine keeps plain Python records while it runs (cheap); :class:`RunResult` reads them once
into numpy columns (:mod:`pipesim.columns`, one array per attribute, read on first use) and
computes every table and the summary from those arrays, vectorised. Tables are built on first
access and cached, so a sweep that only needs ``summary()`` never builds the event table. In
``events`` the ``kind`` and ``lane`` columns are pandas Categoricals (a few distinct strings over
millions of rows).

Utilisation follows the chapter: ``gen_util`` is the slot time of *finished* episodes, pauses
included, over ``n_slots * sim_time_s``. ``gen_util_active`` excludes the pauses, and
``gen_util_total`` also counts the episodes still in flight when the run ends.

Metrics users of real systems ask for: staleness by the oldest version an episode ran under
(``staleness_*``) and by the newest (``staleness_newest_*``); length bias (``trained_duration_mean``
against ``launched_duration_mean``, their ratio ``length_bias``, and ``never_trained_share``);
idle ratios under verl's names (``trainer/idle_ratio``, ``rollouter/idle_ratio``, the latter
counting aborted work as busy); counts of discarded, aborted, restarted (relaunched after an abort
or failure), failed (infrastructure) and truncated episodes, the generation seconds lost
(``lost_work_s``) and the re-prefill tokens.

Durations are the seconds an episode generates: an episode cut by a :class:`~pipesim.faults.Timeout`
reports the cap, not the length it was drawn with (``duration_s`` in ``episode_table`` and
``trained``, and the ``*_duration_mean`` keys), so a run with ``Timeout(cap)`` reports what a run
on the pool clamped at ``cap`` reports.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd

from pipesim.columns import (
    S_ABORTED,
    S_BUFFERED,
    S_DISCARDED,
    S_FAILED,
    S_RUNNING,
    S_TRAINED,
    EpisodeColumns,
    UpdateIndex,
    expand,
    segment_seq_sums,
    seq_sum,
)
from pipesim.config import Scenario
from pipesim.episode import Episode, UpdateRecord

EVENT_COLUMNS = ["kind", "lane", "slot", "replica", "start_s", "end_s", "version", "episode_id", "complete"]
EVENT_KINDS = ["gen", "pause", "train", "sync"]
TRAINED_COLUMNS = [
    "episode_id",
    "step",
    "trained_version",
    "version",
    "staleness",
    "staleness_newest",
    "duration_s",
    "versions_spanned",
    "truncated",
]
EPISODE_COLUMNS = [
    "episode_id",
    "task_id",
    "duration_s",
    "status",
    "slot",
    "replica",
    "start_s",
    "end_s",
    "version",
    "newest_version",
    "truncated",
]
CHUNK_EPISODES = 1 << 16
"""Episodes per block when the event rows are generated (bounds the temporaries)."""


@dataclass(frozen=True)
class RunResult:
    """What one simulated run produced. Build DataFrames lazily; all times are seconds."""

    scenario: Scenario
    sim_time_s: float
    episodes: list[Episode]
    updates: list[UpdateRecord]
    train_log: list[tuple[int, float, float, int]]
    sync_log: list[tuple[float, float, int]]
    extra: dict[str, float] = field(default_factory=dict)

    # -- columns ---------------------------------------------------------------------------------
    @cached_property
    def columns(self) -> EpisodeColumns:
        """The episodes as numpy arrays (each attribute read from the objects on first use)."""
        return EpisodeColumns(self.episodes)

    @cached_property
    def update_index(self) -> UpdateIndex:
        """The update log as arrays, indexed by the replicas the episodes ran on."""
        return UpdateIndex(self.updates, self.columns.replica)

    @property
    def timeout_cap_s(self) -> float | None:
        timeout = getattr(self.scenario, "timeout", None)
        return None if timeout is None else float(timeout.cap_s)

    @cached_property
    def generated_s(self) -> np.ndarray:
        """Per episode, the seconds it generates: its duration, capped where it was truncated."""
        return self.columns.generated_s(self.timeout_cap_s)

    @cached_property
    def newest_versions(self) -> np.ndarray:
        """Per episode, the newest version it generated under."""
        c = self.columns
        if c.n == 0:
            return np.zeros(0, dtype=np.int64)
        u = self.update_index
        return u.newest_version(u.rows(c.replica), c.update_from, c.update_to, c.version)

    # -- tables ----------------------------------------------------------------------------------
    @cached_property
    def events(self) -> pd.DataFrame:
        """One row per interval: kind gen / pause / train / sync, its lane, times and version."""
        c, T = self.columns, self.sim_time_s
        n_train, n_sync = len(self.train_log), len(self.sync_log)
        if c.n:
            keep_ep = ~(c.status_is(S_ABORTED) & ~c.ended)
            ep_rows, odd, start, end, version = self._gen_pause_rows(np.nonzero(keep_ep)[0], T)
        else:
            ep_rows = np.zeros(0, dtype=np.int64)
        n_gen = len(ep_rows)
        n = n_gen + n_train + n_sync
        if n == 0:
            return pd.DataFrame([], columns=EVENT_COLUMNS)

        kind = np.empty(n, dtype=np.int8)
        f_start, f_end = np.empty(n, dtype=np.float64), np.empty(n, dtype=np.float64)
        f_version, f_slot = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
        f_replica, f_id = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
        complete = np.ones(n, dtype=np.bool_)
        lane_names: list[str] = []
        lane_code = np.empty(n, dtype=np.int32)
        if n_gen:
            kind[:n_gen] = odd
            f_start[:n_gen], f_end[:n_gen], f_version[:n_gen] = start, end, version
            del start, end, version, odd
            f_slot[:n_gen] = c.slot[ep_rows]
            f_replica[:n_gen] = c.replica[ep_rows]
            f_id[:n_gen] = c.id[ep_rows]
            complete[:n_gen] = c.ended[ep_rows]
            used = np.zeros(c.n, dtype=np.bool_)
            used[ep_rows] = True
            lane_names, per_episode = _lanes(c.replica, c.slot, used)
            lane_code[:n_gen] = per_episode[ep_rows]
        del ep_rows
        tail = slice(n_gen, n)
        kind[n_gen : n_gen + n_train], kind[n_gen + n_train :] = 2, 3
        lane_code[n_gen : n_gen + n_train], lane_code[n_gen + n_train :] = (
            len(lane_names),
            len(lane_names) + 1,
        )
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
            lane_code if len(lane_names) + 2 > 32767 else lane_code.astype(np.int16),
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

    def _gen_pause_rows(
        self, idx: np.ndarray, T: float
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The gen and pause rows of episodes ``idx``: episode index, is-pause, start, end, version.

        Episode by episode, in order: its segments (version, start, end) interleaved with the pauses
        between them, as :meth:`Episode.segments` gives them; zero-length segments and pauses are
        dropped (an episode's only segment is kept).
        """
        c, u = self.columns, self.update_index
        complete = c.ended[idx]
        end = np.where(complete, c.end_s[idx], T)
        lo = c.update_from[idx]
        hi = np.where(complete, c.update_to[idx], u.m)
        stop = u.first_start_after(lo, hi, end)
        k, pos = u.applying(u.rows(c.replica[idx]), lo, stop)
        del hi, stop, complete
        start0, version0 = c.start_s[idx], c.version[idx]
        sub, ustart, uend, uver = u.sub, u.start_s, u.end_s, u.version_after
        last_sub = max(len(sub) - 1, 0)
        out: list[tuple[np.ndarray, ...]] = []
        for c0 in range(0, len(idx), CHUNK_EPISODES):
            c1 = min(c0 + CHUNK_EPISODES, len(idx))
            kc = k[c0:c1]
            seg, j = expand(2 * kc + 1)
            i = j >> 1
            is_pause = (j & 1).astype(np.bool_)
            kk = kc[seg]
            if len(sub):
                p = pos[c0:c1][seg] + i
                prev_u = sub[np.maximum(p - 1, 0)]
                next_u = sub[np.minimum(p, last_sub)]
                has_prev, has_next = i > 0, i < kk
                a = np.where(has_prev, uend[prev_u], start0[c0:c1][seg])
                b = np.where(has_next, ustart[next_u], end[c0:c1][seg])
                v = np.where(has_prev, uver[prev_u], version0[c0:c1][seg])
                rs = np.where(is_pause, b, a)
                re = np.where(is_pause, uend[next_u], b)
            else:
                rs, re, v = start0[c0:c1][seg], end[c0:c1][seg], version0[c0:c1][seg]
            keep = (re > rs) | (~is_pause & (kk == 0))
            out.append((idx[c0:c1][seg[keep]], is_pause[keep], rs[keep], re[keep], v[keep]))
        if not out:
            z = np.zeros(0)
            return z.astype(np.int64), z.astype(np.bool_), z, z, z.astype(np.int64)
        parts = tuple(np.concatenate([o[f] for o in out]) for f in range(5))
        return parts  # type: ignore[return-value]

    @cached_property
    def episode_table(self) -> pd.DataFrame:
        """One row per launched episode with its status, times and versions."""
        c = self.columns
        if c.n == 0:
            return pd.DataFrame({name: [] for name in EPISODE_COLUMNS})
        end: Any = c.end_s if c.ended.any() else [None] * c.n
        return pd.DataFrame(
            {
                "episode_id": c.id,
                "task_id": c.task_id,
                "duration_s": self.generated_s,
                "status": np.array(c.status_names, dtype=object)[c.status],
                "slot": c.slot,
                "replica": c.replica,
                "start_s": c.start_s,
                "end_s": end,
                "version": c.version,
                "newest_version": self.newest_versions,
                "truncated": c.truncated,
            }
        )

    @cached_property
    def trained(self) -> pd.DataFrame:
        """One row per trained episode: staleness by starting and by newest version, duration, spans."""
        c = self.columns
        sel = np.nonzero(c.status_is(S_TRAINED))[0] if c.n else np.zeros(0, dtype=np.int64)
        if len(sel) == 0:
            return pd.DataFrame({name: [] for name in TRAINED_COLUMNS})
        sel = sel[np.lexsort((c.id[sel], c.end_s[sel], c.trained_step[sel]))]
        tv, v, newest = c.trained_version[sel], c.version[sel], self.newest_versions[sel]
        return pd.DataFrame(
            {
                "episode_id": c.id[sel],
                "step": c.trained_step[sel],
                "trained_version": tv,
                "version": v,
                "staleness": tv - v,
                "staleness_newest": tv - newest,
                "duration_s": self.generated_s[sel],
                "versions_spanned": newest - v + 1,
                "truncated": c.truncated[sel],
            },
            copy=False,
        )

    # -- summary ---------------------------------------------------------------------------------
    def _paused_within(self, ep: Episode, until: float) -> float:
        """Seconds one episode sat inside the updates it spanned, up to its end (or ``until``)."""
        end = ep.end_s if ep.end_s is not None else until
        hi = ep.update_to if ep.end_s is not None else len(self.updates)
        ups = self.updates[ep.update_from : hi]
        return sum(min(u.end_s, end) - u.start_s for u in ups if u.start_s < end and u.applies_to(ep.replica))

    def _paused_s(self, done: np.ndarray) -> float:
        """Seconds the finished episodes that spanned updates spent inside them, summed in order."""
        c, u = self.columns, self.update_index
        sel = np.nonzero(done & (c.update_to > c.update_from))[0]
        if len(sel) == 0 or len(u.sub) == 0:
            return 0
        k, pos = u.applying(u.rows(c.replica[sel]), c.update_from[sel], c.update_to[sel])
        seg, j = expand(k)
        upd = u.sub[pos[seg] + j]
        end = c.end_s[sel][seg]
        u_start = u.start_s[upd]
        term = np.minimum(u.end_s[upd], end) - u_start
        term[u_start >= end] = 0.0  # an update from the episode's end on is not counted
        return seq_sum(segment_seq_sums(term, k))

    def summary(self) -> dict[str, float]:
        """A flat dict of the run's headline numbers (see the module docstring for definitions)."""
        T = self.sim_time_s
        n_slots = self.scenario.pipeline.n_slots
        c = self.columns
        n_eps = c.n
        if n_eps:
            status, start = c.status, c.start_s
            ended = c.ended
            aborted = status == S_ABORTED
            done = ended & ~aborted
            busy = seq_sum(c.end_s[done] - start[done])
            paused = self._paused_s(done)
            running = status == S_RUNNING
            n_inflight = int(running.sum())
            busy_inflight = seq_sum(T - start[running])
            trained = status == S_TRAINED
            n_trained = int(trained.sum())
            stale = c.trained_version[trained] - c.version[trained]
            stale_new = c.trained_version[trained] - self.newest_versions[trained]
            abort_end = aborted & ended
            aborted_busy = seq_sum(c.end_s[abort_end] - start[abort_end])
            gen = self.generated_s
            launched_mean = seq_sum(gen) / n_eps
            trained_mean = seq_sum(gen[trained]) / n_trained if n_trained else 0.0
            truncated = c.truncated
            counts = {
                "buffered": float((status == S_BUFFERED).sum()),
                "discarded": float((status == S_DISCARDED).sum()),
                "aborted": float(aborted.sum()),
                "failed": float((status == S_FAILED).sum()),
                "restarted": float((c.parent >= 0).sum()),
                "truncated": float(truncated.sum()),
            }
            n_trunc_trained = int(truncated[trained].sum())
            lost, reprefill = seq_sum(c.lost_s), seq_sum(c.reprefill_tokens)
        else:
            busy = paused = busy_inflight = aborted_busy = 0
            n_inflight = n_trained = n_trunc_trained = 0
            stale = stale_new = np.zeros(0, dtype=np.int64)
            launched_mean = trained_mean = 0.0
            counts = dict.fromkeys(
                ("buffered", "discarded", "aborted", "failed", "restarted", "truncated"), 0.0
            )
            lost = reprefill = 0
        train_busy = sum(b - a for _, a, b, _ in self.train_log)
        denom = n_slots * T if T > 0 else float("nan")
        rollout_idle = 1 - (busy + busy_inflight + aborted_busy) / denom
        trainer_idle = 1 - train_busy / T if T > 0 else float("nan")
        out = {
            "throughput_per_hour": n_trained / T * 3600 if T > 0 else float("nan"),
            "gen_util": busy / denom,
            "gen_util_active": (busy - paused) / denom,
            "gen_util_total": (busy + busy_inflight) / denom,
            "staleness_mean": int(stale.sum()) / len(stale) if len(stale) else 0.0,
            "staleness_max": float(stale.max()) if len(stale) else 0.0,
            "staleness_newest_mean": int(stale_new.sum()) / len(stale_new) if len(stale_new) else 0.0,
            "staleness_newest_max": float(stale_new.max()) if len(stale_new) else 0.0,
            "trained_duration_mean": trained_mean,
            "launched_duration_mean": launched_mean,
            "length_bias": trained_mean / launched_mean if launched_mean > 0 else float("nan"),
            "episodes_launched": float(n_eps),
            "episodes_trained": float(n_trained),
            "episodes_in_flight": float(n_inflight),
            "episodes_buffered": counts["buffered"],
            "episodes_discarded": counts["discarded"],
            "episodes_aborted": counts["aborted"],
            "episodes_failed": counts["failed"],
            "episodes_restarted": counts["restarted"],
            "episodes_truncated": counts["truncated"],
            "truncated_share": n_trunc_trained / n_trained if n_trained else 0.0,
            "lost_work_s": lost,
            "reprefill_tokens": reprefill,
            "never_trained_share": 1 - n_trained / n_eps if n_eps else 0.0,
            "sim_time_s": T,
            "trainer_idle_ratio": trainer_idle,
            "rollout_idle_ratio": rollout_idle,
            "trainer/idle_ratio": trainer_idle,
            "rollouter/idle_ratio": rollout_idle,
        }
        out.update(self.extra)
        return out


def _lanes(replica: np.ndarray, slot: np.ndarray, used: np.ndarray) -> tuple[list[str], np.ndarray]:
    """Lane names ``r{replica}/slot{slot}`` of the episodes ``used``, ordered by (replica, slot),
    and per episode the index of its lane (meaningful for ``used`` only)."""
    r, s = replica[used], slot[used]
    r_min, s_min = int(r.min()), int(s.min())
    width = int(s.max()) - s_min + 1
    key = (replica - r_min) * width + (slot - s_min)
    n_keys = (int(r.max()) - r_min + 1) * width
    if n_keys <= 4 * len(replica) + 1024:
        present = np.zeros(n_keys, dtype=np.bool_)
        present[key[used]] = True
        uniq = np.nonzero(present)[0]
        code_of = np.cumsum(present, dtype=np.int64) - 1
        per_episode = code_of[np.clip(key, 0, n_keys - 1)]
    else:
        uniq, inverse = np.unique(key[used], return_inverse=True)
        per_episode = np.zeros(len(replica), dtype=np.int64)
        per_episode[used] = inverse
    names = [f"r{q // width + r_min}/slot{q % width + s_min}" for q in uniq.tolist()]
    return names, per_episode
