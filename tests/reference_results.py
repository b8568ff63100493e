"""The per-episode implementation of ``RunResult``'s tables and summary, kept as a slow reference.

This is ``pipesim/results/run.py`` as it was before the columnar rewrite (commit b43b067), with one
change: durations are the seconds an episode generated (a truncated episode reports the timeout
cap, the item 7 fix). ``tests/test_results_columns.py`` checks the vectorised tables and summary
against it on many random scenarios.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import pandas as pd

from pipesim.config import Scenario
from pipesim.core.episode import ABORTED, BUFFERED, DISCARDED, FAILED, RUNNING, TRAINED, Episode, UpdateRecord

EVENT_COLUMNS = ["kind", "lane", "slot", "replica", "start_s", "end_s", "version", "episode_id", "complete"]


@dataclass(frozen=True)
class ReferenceRunResult:
    """What one simulated run produced. Build DataFrames lazily; all times are seconds."""

    scenario: Scenario
    sim_time_s: float
    episodes: list[Episode]
    updates: list[UpdateRecord]
    train_log: list[tuple[int, float, float, int]]
    sync_log: list[tuple[float, float, int]]
    extra: dict[str, float] = field(default_factory=dict)
    fix_truncated_duration: bool = True
    """Report a truncated episode's generated seconds (the cap); False is the old behaviour."""

    def _dur(self, e: Episode) -> float:
        timeout = self.scenario.timeout
        if self.fix_truncated_duration and timeout is not None:
            return min(e.duration_s, timeout.cap_s)
        return e.duration_s

    # -- tables ----------------------------------------------------------------------------------
    @cached_property
    def events(self) -> pd.DataFrame:
        """One row per interval: kind gen / pause / train / sync, its lane, times and version."""
        rows: list[tuple[Any, ...]] = []
        T = self.sim_time_s
        for ep in self.episodes:
            if ep.status == ABORTED and ep.end_s is None:
                continue
            complete = ep.end_s is not None
            lane = f"r{ep.replica}/slot{ep.slot}"
            segs = ep.segments(self.updates, until_s=T)
            for i, (v, a, b) in enumerate(segs):
                if b > a or len(segs) == 1:
                    rows.append(("gen", lane, ep.slot, ep.replica, a, b, v, ep.id, complete))
                if i + 1 < len(segs) and segs[i + 1][1] > b:
                    rows.append(("pause", lane, ep.slot, ep.replica, b, segs[i + 1][1], v, ep.id, complete))
        for _step, a, b, v in self.train_log:
            rows.append(("train", "trainer", -1, -1, a, b, v, -1, True))
        for a, b, v in self.sync_log:
            rows.append(("sync", "sync", -1, -1, a, b, v, -1, True))
        return pd.DataFrame(rows, columns=EVENT_COLUMNS)

    @cached_property
    def episode_table(self) -> pd.DataFrame:
        """One row per launched episode with its status, times and versions."""
        upd = self.updates
        return pd.DataFrame(
            {
                "episode_id": [e.id for e in self.episodes],
                "task_id": [e.task_id for e in self.episodes],
                "duration_s": [self._dur(e) for e in self.episodes],
                "status": [e.status for e in self.episodes],
                "slot": [e.slot for e in self.episodes],
                "replica": [e.replica for e in self.episodes],
                "start_s": [e.start_s for e in self.episodes],
                "end_s": [e.end_s for e in self.episodes],
                "version": [e.version for e in self.episodes],
                "newest_version": [e.newest_version(upd) for e in self.episodes],
                "truncated": [e.truncated for e in self.episodes],
                "discarded_s": [e.discarded_s for e in self.episodes],
            }
        )

    @cached_property
    def trained(self) -> pd.DataFrame:
        """One row per trained episode: staleness by starting and by newest version, duration, spans."""
        upd = self.updates
        eps = [e for e in self.episodes if e.status == TRAINED]
        eps.sort(key=lambda e: (e.trained_step, e.end_s, e.id))
        newest = [e.newest_version(upd) for e in eps]
        return pd.DataFrame(
            {
                "episode_id": [e.id for e in eps],
                "step": [e.trained_step for e in eps],
                "trained_version": [e.trained_version for e in eps],
                "version": [e.version for e in eps],
                "staleness": [e.trained_version - e.version for e in eps],
                "staleness_newest": [e.trained_version - n for e, n in zip(eps, newest)],
                "duration_s": [self._dur(e) for e in eps],
                "versions_spanned": [len({v for v, _, _ in e.segments(list(upd))}) for e in eps],
                "truncated": [e.truncated for e in eps],
            }
        )

    # -- summary ---------------------------------------------------------------------------------
    def _paused_within(self, ep: Episode, until: float) -> float:
        end = ep.end_s if ep.end_s is not None else until
        hi = ep.update_to if ep.end_s is not None else len(self.updates)
        ups = self.updates[ep.update_from : hi]
        return sum(min(u.end_s, end) - u.start_s for u in ups if u.start_s < end and u.applies_to(ep.replica))

    def summary(self) -> dict[str, float]:
        """A flat dict of the run's headline numbers (see the module docstring for definitions)."""
        T = self.sim_time_s
        n_slots = self.scenario.pipeline.n_slots
        eps = self.episodes
        done = [e for e in eps if e.end_s is not None and e.status != ABORTED]
        busy = sum((e.end_s or 0.0) - e.start_s for e in done)
        paused = sum(self._paused_within(e, T) for e in done if e.update_to > e.update_from)
        inflight = [e for e in eps if e.status == RUNNING]
        busy_inflight = sum(T - e.start_s for e in inflight)
        trained = [e for e in eps if e.status == TRAINED]
        stale = [e.trained_version - e.version for e in trained]
        stale_new = [e.trained_version - e.newest_version(self.updates) for e in trained]
        train_busy = sum(b - a for _, a, b, _ in self.train_log)
        denom = n_slots * T if T > 0 else float("nan")
        aborted_busy = sum(e.end_s - e.start_s for e in eps if e.status == ABORTED and e.end_s is not None)
        launched_mean = sum(self._dur(e) for e in eps) / len(eps) if eps else 0.0
        trained_mean = sum(self._dur(e) for e in trained) / len(trained) if trained else 0.0
        rollout_idle = 1 - (busy + busy_inflight + aborted_busy) / denom
        trainer_idle = 1 - train_busy / T if T > 0 else float("nan")
        # the summary's rule: an idle share within 1e-9 below zero or 1e-12 above is rounding, 0
        rollout_idle = 0.0 if -1e-9 < rollout_idle < 1e-12 else rollout_idle
        trainer_idle = 0.0 if -1e-9 < trainer_idle < 1e-12 else trainer_idle

        def share(x: float) -> float:  # and a busy share within 1e-9 above one is reported as 1
            return 1.0 if 1 < x < 1 + 1e-9 else x

        out = {
            "throughput_per_hour": len(trained) / T * 3600 if T > 0 else float("nan"),
            "gen_util": share(busy / denom),
            "gen_util_active": share((busy - paused) / denom),
            "gen_util_total": share((busy + busy_inflight) / denom),
            "staleness_mean": sum(stale) / len(stale) if stale else 0.0,
            "staleness_max": float(max(stale, default=0)),
            "staleness_newest_mean": sum(stale_new) / len(stale_new) if stale_new else 0.0,
            "staleness_newest_max": float(max(stale_new, default=0)),
            "trained_duration_mean": trained_mean,
            "launched_duration_mean": launched_mean,
            "length_bias": trained_mean / launched_mean if launched_mean > 0 else float("nan"),
            "episodes_launched": float(len(eps)),
            "episodes_trained": float(len(trained)),
            "episodes_in_flight": float(len(inflight)),
            "episodes_buffered": float(sum(e.status == BUFFERED for e in eps)),
            "episodes_discarded": float(sum(e.status == DISCARDED for e in eps)),
            "episodes_aborted": float(sum(e.status == ABORTED for e in eps)),
            "episodes_failed": float(sum(e.status == FAILED for e in eps)),
            "episodes_restarted": float(sum(e.parent >= 0 for e in eps)),
            "episodes_truncated": float(sum(e.truncated for e in eps)),
            "truncated_share": sum(e.truncated for e in trained) / len(trained) if trained else 0.0,
            "lost_work_s": sum(e.lost_s for e in eps),
            "reprefill_tokens": sum(e.reprefill_tokens for e in eps),
            "never_trained_share": 1 - len(trained) / len(eps) if eps else 0.0,
            "sim_time_s": T,
            "trainer/idle_ratio": trainer_idle,
            "rollouter/idle_ratio": rollout_idle,
        }
        out.update(self.extra)
        return out
