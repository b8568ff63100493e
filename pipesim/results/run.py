"""Typed results of a run: raw records in, pandas DataFrames and a flat summary out.

The engine keeps its episodes as arrays once they are trained and as objects until then
(:mod:`pipesim.core.records`); :class:`RunResult` reads them as numpy columns
(:mod:`pipesim.results.columns`, one array per attribute, on first use: the records' own arrays,
with the live objects' values written in) and computes every table and the summary from those
arrays, vectorised. The integer columns of ``events`` and ``trained`` are int32 where every value
fits, else int64 (:func:`~pipesim.results.columns.int_dtype`); in ``episode_table`` the ids,
slots and ``version`` are int64 in every run (as saved runs hold them) and ``newest_version``
follows the int32 rule, and its float columns are float64, NaN where there is no value (``end_s``
of an episode in flight, ``discarded_s`` of one not discarded): :data:`EPISODE_DTYPES`. Tables
are built on first access and cached, so a sweep that only needs ``summary()`` never builds the
event table. In ``events`` the ``kind`` and ``lane`` columns are pandas Categoricals (a few
distinct strings over millions of rows).

Utilisation follows the chapter: ``gen_util`` is the slot time of episodes that ended on their
slot (trained, buffered, discarded and *failed*; not *aborted*), pauses included, over
``n_slots * sim_time_s``. ``gen_util_active`` excludes the pauses, and ``gen_util_total`` also
counts the episodes still in flight when the run ends. ``lost_work_s`` is the generated seconds of
*aborted* and *failed* episodes (their ``lost_s``); a *discarded* episode's seconds are not in it.

Metrics users of real systems ask for: staleness by the oldest version an episode ran under
(``staleness_*``) and by the newest (``staleness_newest_*``); length bias (``trained_duration_mean``
against ``launched_duration_mean``, their ratio ``length_bias``, and ``never_trained_share``);
idle ratios under verl's names only (``trainer/idle_ratio``, ``rollouter/idle_ratio``, the latter
counting aborted work as busy; the old ``trainer_idle_ratio`` and ``rollout_idle_ratio`` still read
through :class:`~pipesim.results.names.Summary`, see :mod:`pipesim.results.names`); counts
(integers) of discarded, aborted, restarted (relaunched after an abort or failure), failed
(infrastructure) and truncated episodes, the generation seconds lost (``lost_work_s``) and the
re-prefill tokens.

Durations are the seconds an episode generates: under a :class:`~pipesim.policies.faults.Timeout`
an episode drawn longer than the cap reports the cap, failed, aborted or in flight alike
(``duration_s`` in ``episode_table`` and ``trained``, and the ``*_duration_mean`` keys), so a run
with ``Timeout(cap)`` reports what a run on the pool clamped at ``cap`` reports. ``truncated``
flags only the episodes the cap cut, those that finished at it (:mod:`pipesim.core.lifecycle`).
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pipesim.config import Scenario
from pipesim.core.episode import Episode, UpdateRecord
from pipesim.results.columns import (
    S_ABORTED,
    S_BUFFERED,
    S_DISCARDED,
    S_FAILED,
    S_RUNNING,
    S_TRAINED,
    EpisodeColumns,
    UpdateIndex,
    int_dtype,
    seq_sum,
)
from pipesim.results.events import EVENT_COLUMNS as EVENT_COLUMNS  # re-exported: saved runs, tests
from pipesim.results.events import EVENT_KINDS as EVENT_KINDS
from pipesim.results.events import event_table
from pipesim.results.names import Summary
from pipesim.results.order import training_order as _training_order

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
EPISODE_DTYPES: dict[str, Any] = {
    "episode_id": np.int64,
    "task_id": np.int64,
    "duration_s": np.float64,
    "status": str,
    "slot": np.int64,
    "replica": np.int64,
    "start_s": np.float64,
    "end_s": np.float64,
    "version": np.int64,
    "newest_version": np.int32,  # int64 past 2**31 - 1 (columns.int_dtype), as in ``trained``
    "truncated": bool,
    "discarded_s": np.float64,
}
"""``episode_table``'s columns and types, the same in every run: ``discarded_s`` where nothing was
discarded is float64 NaN (it was object None), so two runs' tables concatenate as they are."""
EPISODE_COLUMNS = list(EPISODE_DTYPES)


@dataclass(frozen=True)
class RunResult:
    """What one simulated run produced. Build DataFrames lazily; all times are seconds."""

    scenario: Scenario
    sim_time_s: float
    episodes: Sequence[Episode]
    updates: list[UpdateRecord]
    train_log: list[tuple[int, float, float, int]]
    sync_log: list[tuple[float, float, int]]
    extra: dict[str, float] = field(default_factory=dict)
    ledger_log: list[tuple[int, int, int, int, int, int]] = field(default_factory=list)
    """(step, started, trained, running, buffered, dropped) as the engine counted them when the
    trainer took each batch (``Pipeline.ledger_log``); empty where the result was built without."""
    pool: np.ndarray | None = None
    """The durations given to ``pipesim.run`` in place of the scenario's duration model (the tasks
    the run consumed, in order), or None where the run drew its pool from the scenario. A saved
    run keeps it (``pool.parquet``), so ``pipesim.run(saved.scenario, saved.pool)`` runs it again."""
    engine: str = "slots"
    """The engine that ran it: ``"slots"`` (the chapter's fixed-duration slots, ``pipesim.run``)
    or ``"compute"`` (the compute-grounded engine, ``pipesim.run_compute``, which times episodes
    from tokens: their ``duration_s`` is not the work the slots ran)."""

    # -- columns ---------------------------------------------------------------------------------
    @cached_property
    def columns(self) -> EpisodeColumns:
        """The episodes as numpy arrays (each attribute read from the objects on first use)."""
        return EpisodeColumns(self.episodes)

    @cached_property
    def update_index(self) -> UpdateIndex:
        """The update log as arrays, indexed by the replicas the episodes ran on."""
        return UpdateIndex(self.updates, lambda: self.columns.replica)

    @property
    def timeout_cap_s(self) -> float | None:
        timeout = getattr(self.scenario, "timeout", None)
        return None if timeout is None else float(timeout.cap_s)

    @cached_property
    def generated_s(self) -> np.ndarray:
        """Per episode, the seconds it generates: its duration, at most the timeout's cap."""
        if self.timeout_cap_s is None:
            return self.columns.duration_s  # type: ignore[no-any-return]
        return self.columns.generated_s(self.timeout_cap_s)

    @property
    def truncated(self) -> np.ndarray:
        """Per episode, whether a timeout cut it: it finished at the cap (not failed, aborted, running)."""
        return self.columns.truncated  # type: ignore[no-any-return]

    def _rows(self, idx: np.ndarray | None) -> np.ndarray | None:
        """The update-index rows of episodes ``idx`` (all when None); None when updates are shared."""
        u = self.update_index
        if u.shared:
            return None
        rep = self.columns.replica
        return u.rows(rep if idx is None else rep[idx])

    @cached_property
    def newest_versions(self) -> np.ndarray:
        """Per episode, the newest version it generated under: its last segment's, as
        :meth:`Episode.segments` and the events table read it. An episode that has not ended has
        no ``update_to`` yet (it stays 0 until the episode finishes): it ran through every update
        logged since its start, up to the run's end."""
        c = self.columns
        if c.n == 0:
            return np.zeros(0, dtype=np.int64)
        u = self.update_index
        hi = c.update_to
        live = np.flatnonzero(~c.ended)  # as Episode.segments and Episode.newest_version read them
        if len(live):  # the finished episodes' values are left as they were, bit for bit
            hi = hi.astype(np.int64)  # a copy: the columns are not written
            lo = c.update_from[live].astype(np.int64)
            end = np.full(len(live), self.sim_time_s)
            hi[live] = u.first_start_after(lo, np.full(len(live), u.m, dtype=np.int64), end)
        return u.newest_version(self._rows(None), c.update_from, hi, c.version)

    # -- tables ----------------------------------------------------------------------------------
    @cached_property
    def events(self) -> pd.DataFrame:
        """One row per interval: kind gen / pause / train / sync, its lane, times and version."""
        return event_table(self)

    @cached_property
    def episode_table(self) -> pd.DataFrame:
        """One row per launched episode with its status, times and versions."""
        c = self.columns
        if c.n == 0:
            return pd.DataFrame({name: pd.Series([], dtype=t) for name, t in EPISODE_DTYPES.items()})
        newest = self.newest_versions
        return pd.DataFrame(
            {
                "episode_id": c.id.astype(np.int64),
                "task_id": c.task_id.astype(np.int64),
                "duration_s": self.generated_s,
                "status": np.array(c.status_names, dtype=object)[c.status],
                "slot": c.slot.astype(np.int64),
                "replica": c.replica.astype(np.int64),
                "start_s": c.start_s,
                "end_s": c.end_s,  # NaN: still running; float64 even where no episode has ended
                "version": c.version.astype(np.int64),
                "newest_version": newest.astype(int_dtype(newest), copy=False),  # as in ``trained``
                "truncated": self.truncated,
                "discarded_s": c.discarded_s,  # NaN: not discarded, in every run
            }
        )

    @cached_property
    def trained(self) -> pd.DataFrame:
        """One row per trained episode: staleness by starting and by newest version, duration, spans."""
        c = self.columns
        sel = np.flatnonzero(c.status_is(S_TRAINED)) if c.n else np.zeros(0, dtype=np.int64)
        if len(sel) == 0:
            return pd.DataFrame({name: [] for name in TRAINED_COLUMNS})
        sel = sel.astype(int_dtype(sel), copy=False)  # the temporaries below are a run's peak memory
        sel = sel[_training_order(c, sel)]
        # int32 where every value fits (columns.int_dtype), like the events table
        tv, v, newest = c.trained_version[sel], c.version[sel], self.newest_versions[sel]
        idt = int_dtype(tv, v, newest)
        tv, v, newest = tv.astype(idt, copy=False), v.astype(idt, copy=False), newest.astype(idt, copy=False)
        return pd.DataFrame(
            {
                "episode_id": c.id[sel].astype(int_dtype(c.id), copy=False),
                "step": c.trained_step[sel].astype(int_dtype(c.trained_step), copy=False),
                "trained_version": tv,
                "version": v,
                "staleness": tv - v,
                "staleness_newest": tv - newest,
                "duration_s": self.generated_s[sel],
                "versions_spanned": self._versions_spanned(sel).astype(idt, copy=False),
                "truncated": self.truncated[sel],
            },
            copy=False,
        )

    def _versions_spanned(self, sel: np.ndarray) -> np.ndarray:
        """Per ended episode of ``sel``, the weight versions it generated under, as
        :meth:`Episode.segments` lists them: its own and one per update that applied to it
        (``newest - version + 1`` counted versions ``SyncEveryK(k)`` never published: 0 -> 2 read 3)."""
        c, u = self.columns, self.update_index
        lo, hi = c.update_from[sel].astype(np.int64), c.update_to[sel].astype(np.int64)
        return 1 + u.applying(self._rows(sel), lo, hi)[0]

    # -- keeping and showing ----------------------------------------------------------------------
    def save(self, path: str | Path) -> Path:
        """Write this run as a directory (events, trained and episode tables as Parquet, scenario
        and summary as JSON); ``pipesim.load(path)`` reads it back. See :mod:`pipesim.io.saved`."""
        # io sits above results: imported by name on first use, so results never loads it otherwise
        return Path(importlib.import_module("pipesim.io.saved").save(self, path))

    # A notebook shows a run as a table: ``_repr_html_`` is attached by the io layer
    # (:func:`pipesim.io.html.attach_views`), so results never imports io for it.

    # -- summary ---------------------------------------------------------------------------------
    def _paused_within(self, ep: Episode, until: float) -> float:
        """Seconds one episode sat inside the updates it spanned, up to its end (or ``until``)."""
        end = ep.end_s if ep.end_s is not None else until
        hi = ep.update_to if ep.end_s is not None else len(self.updates)
        ups = self.updates[ep.update_from : hi]
        return sum(min(u.end_s, end) - u.start_s for u in ups if u.start_s < end and u.applies_to(ep.replica))

    def _paused_s(self, done: np.ndarray) -> float:
        """Seconds the finished episodes that spanned updates spent inside them, summed in order:
        per episode, its updates' overlaps left to right, then the episodes left to right."""
        c, u = self.columns, self.update_index
        sel = np.nonzero(done & (c.update_to > c.update_from))[0]
        if len(sel) == 0 or len(u.sub) == 0:
            return 0
        left, at = u.applying(self._rows(sel), c.update_from[sel], c.update_to[sel])
        per_episode = np.zeros(len(sel), dtype=np.float64)
        active = np.nonzero(left > 0)[0]
        at, left, end = at[active], left[active], c.end_s[sel][active]
        # an update over before the episode's end counts whole (the engine logs an update when it
        # is over, so that is every update an episode spanned); only the others need the clip
        whole = u.end_s[u.sub[at + left - 1]] <= end if u.ends_rise else np.zeros(len(at), dtype=bool)
        span = u.end_s - u.start_s

        def term(pos: np.ndarray, ep_end: np.ndarray, clip: bool) -> np.ndarray:
            upd = pos if u.shared else u.sub[pos]
            if not clip:
                return span[upd]  # type: ignore[no-any-return]
            u_start = u.start_s[upd]
            out = np.minimum(u.end_s[upd], ep_end) - u_start
            out[u_start >= ep_end] = 0.0  # an update from the episode's end on is not counted
            return out  # type: ignore[no-any-return]

        for part, clip in ((np.nonzero(whole)[0], False), (np.nonzero(~whole)[0], True)):
            if len(part) == 0:
                continue
            p_at, p_left, p_end = at[part], left[part], end[part]
            acc = term(p_at, p_end, clip)  # 0 + the first term
            more = np.nonzero(p_left > 1)[0]  # the episodes with a j-th term, j = 1, 2, ...
            j = 1
            while len(more):
                acc[more] += term(p_at[more] + j, p_end[more], clip)
                j += 1
                more = more[p_left[more] > j]
            per_episode[active[part]] = acc
        return seq_sum(per_episode)

    def summary(self) -> dict[str, float]:
        """A flat dict of the run's headline numbers (see the module docstring for definitions).

        ``gen_util`` counts failed episodes' slot time but not aborted ones'; ``lost_work_s`` counts
        aborted and failed work, not discarded; ``episodes_truncated`` counts episodes that finished
        at the timeout's cap."""
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
            truncated = self.truncated
            counts = {
                "buffered": int((status == S_BUFFERED).sum()),
                "discarded": int((status == S_DISCARDED).sum()),
                "aborted": int(aborted.sum()),
                "failed": int((status == S_FAILED).sum()),
                "restarted": int(c.count_nonnegative("parent")),
                "truncated": int(truncated.sum()),
            }
            n_trunc_trained = int(truncated[trained].sum())
            lost = c.total("lost_s")
            reprefill = c.total("reprefill_tokens")
        else:
            busy = paused = busy_inflight = aborted_busy = 0
            n_inflight = n_trained = n_trunc_trained = 0
            stale = stale_new = np.zeros(0, dtype=np.int64)
            launched_mean = trained_mean = 0.0
            counts = dict.fromkeys(
                ("buffered", "discarded", "aborted", "failed", "restarted", "truncated"), 0
            )
            lost = reprefill = 0
        train_busy = sum(b - a for _, a, b, _ in self.train_log)
        denom = n_slots * T if T > 0 else float("nan")
        rollout_idle = _idle(1 - (busy + busy_inflight + aborted_busy) / denom)
        trainer_idle = _idle(1 - train_busy / T) if T > 0 else float("nan")
        out = {
            "throughput_per_hour": n_trained / T * 3600 if T > 0 else float("nan"),
            "gen_util": _share(busy / denom),
            "gen_util_active": _share((busy - paused) / denom),
            "gen_util_total": _share((busy + busy_inflight) / denom),
            "staleness_mean": int(stale.sum()) / len(stale) if len(stale) else 0.0,
            "staleness_max": float(stale.max()) if len(stale) else 0.0,
            "staleness_newest_mean": int(stale_new.sum()) / len(stale_new) if len(stale_new) else 0.0,
            "staleness_newest_max": float(stale_new.max()) if len(stale_new) else 0.0,
            "trained_duration_mean": trained_mean,
            "launched_duration_mean": launched_mean,
            "length_bias": trained_mean / launched_mean if launched_mean > 0 else float("nan"),
            "episodes_launched": int(n_eps),  # counts are Python ints: JSON and CSV write 21504, not 21504.0
            "episodes_trained": int(n_trained),
            "episodes_in_flight": int(n_inflight),
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
            "trainer/idle_ratio": trainer_idle,  # verl's names; the old ones read through Summary
            "rollouter/idle_ratio": rollout_idle,
        }
        out.update(self.extra)
        return Summary(out)


def _share(share: float) -> float:
    """A busy share, with the rounding of a sum of busy intervals (a few ulps above one when the
    slots were never idle: AReaL's 1.0000000000000004) taken back to 1; a real overshoot is left
    for the invariants."""
    return 1.0 if 1 < share < 1 + 1e-9 else share


def _idle(share: float) -> float:
    """An idle share, with the rounding of a sum of busy intervals (a few ulps either side of zero
    when the GPUs were never idle: 1.11e-16 on systems:areal) taken back to 0; a real overshoot is
    left for the invariants."""
    return 0.0 if -1e-9 < share < 1e-12 else share
