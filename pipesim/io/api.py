"""Entry points: :func:`run` for typed results, :func:`simulate_pipeline` for the chapter's dict."""

from __future__ import annotations

import math
import warnings
from itertools import repeat
from typing import Any

import numpy as np
import numpy.typing as npt

from pipesim.config import PipelineConfig, Scenario, check_int, check_time
from pipesim.core.collector import during_run
from pipesim.core.engine import Pipeline
from pipesim.core.errors import shown
from pipesim.core.records import EpisodeRecords
from pipesim.core.validate import refuse
from pipesim.io import user_code as _user_code  # noqa: F401 - its finder: workers import users' files
from pipesim.io.draw_cache import cached_pool
from pipesim.policies.base import CountThrottle, Drain, PartialRollout
from pipesim.policies.missing import refuse_missing
from pipesim.results.columns import S_ABORTED, S_TRAINED, seq_sum
from pipesim.results.run import RunResult
from pipesim.workload.durations import TraceDurations, as_durations, draw
from pipesim.workload.pools import draw_stable


def draw_pool(scenario: Scenario) -> npt.NDArray[np.float64]:
    """The scenario's duration pool (float64), drawn from a generator seeded with ``scenario.seed``.

    The generator is ``numpy.random.default_rng(scenario.seed)``, except for ``AgentDurations``
    with ``draws="chapter"`` (the default), drawn from the chapter's torch generator for its
    exact numbers (see :func:`pipesim.workload.durations.draw`). A set ``pool_size`` is one draw
    of that size, as the chapter's ``agent_episode_durations(n, generator)``, unless its
    ``pool_draw`` is ``"stable"``; the default pool,
    whose size follows the design, is drawn so that its first durations do not depend on its size
    (:func:`~pipesim.workload.pools.draw_stable`): designs that differ in steps or eta run on
    the same episodes. A trace that does not cycle is the whole default pool where it is shorter
    (a run refused a 200-duration trace for a default pool of 208 though it launched 176).
    The chapter's torch draws are kept on disk (:mod:`pipesim.io.draw_cache`): the same array, read
    back without importing torch.
    """
    model, seed = scenario.durations, scenario.seed
    if scenario.pool_size is not None and scenario.pool_draw == "whole":
        n = scenario.pool_size
        return cached_pool(model, n, "whole", seed, lambda: draw(model, n, seed))
    n = pool_len(scenario)
    return cached_pool(model, n, "stable", seed, lambda: draw_stable(model, n, seed))


def pool_len(scenario: Scenario) -> int:
    """How many durations ``scenario``'s pool holds: its ``pool_size``, else the default, cut to a
    trace that does not cycle (all the pool there is: a run that launches more is told so)."""
    if scenario.pool_size is not None:
        return int(scenario.pool_size)
    dur = scenario.durations
    if isinstance(dur, TraceDurations) and not dur.cycle:
        return min(scenario.default_pool_size, len(dur.values))
    return scenario.default_pool_size


def run(scenario: Scenario, durations: npt.ArrayLike | None = None) -> RunResult:
    """Simulate ``scenario`` and return a :class:`RunResult`.

    ``durations`` overrides the scenario's duration model with an explicit pool, consumed in
    order (the chapter's convention, so every design sees the same episodes): a list, a numpy
    array or a CPU torch tensor.
    """
    if not isinstance(scenario, Scenario):
        raise refuse("scenario", f"must be a pipesim.Scenario, got {type(scenario).__name__}")
    refuse_missing(scenario)  # a saved run's policy not rebuilt here (MissingPolicy): before any draw
    if durations is None:
        scenario.check_pool_size()  # a set pool_size below steps x batch_size: refused, not run dry
        pool = draw_pool(scenario)
    else:
        pool = _given_pool(scenario, durations)
    p = Pipeline(scenario, pool)  # the engine reads the array in place
    p.run()
    result = RunResult(
        scenario,
        p.env.now,
        p.episodes,
        p.updates,
        p.train_log,
        p.sync_log,
        ledger_log=p.ledger_log,
        pool=None if durations is None else pool[: p.next_task],  # the tasks it consumed
    )
    p.release()
    coarse_clock(result.sim_time_s, pool[: p.next_task])
    return result


CLOCK_RESOLUTION = 1e-6
"""The coarsest clock step a run may end on, as a share of its median episode: past it a float
clock rounds each episode's times (``train_time_s = 1e17`` with 10 s episodes ended at 3e17 s,
where a float steps by 32 s, and the events' gen intervals averaged 7.8 s for 10.3 s drawn)."""


def coarse_clock(end_s: float, durations: npt.NDArray[np.float64]) -> None:
    """A RuntimeWarning when the clock, at the run's end ``end_s``, resolves more coarsely than
    :data:`CLOCK_RESOLUTION` x the median positive duration the run drew: its times lost precision."""
    drawn = durations[durations > 0]
    if not drawn.size or not math.isfinite(end_s):
        return
    median, step = float(np.median(drawn)), float(np.spacing(end_s))
    if step > CLOCK_RESOLUTION * median:
        warnings.warn(
            f"the run ended at t = {end_s:.3g} s, where the clock (a float) steps by {step:.3g} s, more "
            f"than {CLOCK_RESOLUTION:g} of its median episode ({median:.3g} s): its times and "
            "durations have lost precision; give times on a smaller scale (train_time_s, sync_time_s)",
            RuntimeWarning,
            stacklevel=2,
        )


def _given_pool(scenario: Scenario, durations: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """``durations`` checked (:func:`~pipesim.workload.durations.as_durations`), and refused naming
    ``durations`` where it holds fewer than the run trains (``steps x batch_size``, each a task of
    its own): such a pool is exhausted part-way for certain, whatever the policies (the run's
    PipelineError named no field and advised a pool_size, which durations passed here override)."""
    pool = as_durations(durations)
    need = scenario.min_pool_size
    if len(pool) < need:
        cfg = scenario.pipeline
        raise refuse(
            "durations",
            f"holds {len(pool):,} episode durations but the run trains {need:,} (steps {cfg.steps:,} x "
            f"batch_size {cfg.batch_size:,}), each a duration of its own, consumed in order: pass at "
            f"least {need:,}, and more where the run launches more than it trains ("
            f"{scenario.default_pool_size:,}, (steps + max_staleness + 1) x batch_size + n_slots, more "
            "under a group filter, covers the count throttle)",
        )
    return pool


def _chapter_metrics(r: RunResult) -> dict[str, float]:
    """The four summary values the chapter's dict reports, computed as ``RunResult.summary`` does
    (the same arrays and sums, so the same floats; a test checks) without the other forty."""
    c = r.columns
    if not c.n:
        return r.summary()
    status = c.status
    done = c.ended & (status != S_ABORTED)
    busy = seq_sum(c.end_s[done] - c.start_s[done])
    trained = status == S_TRAINED
    n_trained = int(trained.sum())
    stale = c.trained_version[trained] - c.version[trained]
    T = r.sim_time_s
    denom = r.scenario.pipeline.n_slots * T if T > 0 else float("nan")
    return {
        "gen_util": busy / denom,
        "staleness_mean": int(stale.sum()) / len(stale) if len(stale) else 0.0,
        "staleness_max": float(stale.max()) if len(stale) else 0.0,
        "trained_duration_mean": seq_sum(r.generated_s[trained]) / n_trained if n_trained else 0.0,
    }


def simulate_pipeline(
    durations: npt.ArrayLike,
    n_slots: int,
    batch_size: int,
    train_time: float,
    sync_time: float,
    max_staleness: int = 0,
    interrupt: bool = True,
    steps: int = 10,
) -> dict[str, Any]:
    """The chapter's signature and dict, computed by the SimPy engine.

    Returns ``events`` (tuples ``(kind, lane, start, end, version)``), ``time``, ``throughput``
    (episodes trained per hour), ``gen_util``, ``staleness_mean``, ``staleness_max`` and
    ``trained_duration``.
    """
    if durations is None:
        raise refuse("durations", "must be given: the pool of episode seconds, consumed in order")
    check_int("n_slots", n_slots, 1)
    check_int("batch_size", batch_size, 1)
    check_time("train_time", train_time)
    check_time("sync_time", sync_time)
    check_int("max_staleness", max_staleness, 0)
    check_int("steps", steps, 1)
    if not isinstance(interrupt, bool):
        raise refuse("interrupt", f"must be a bool, got {shown(interrupt)}")
    cfg = PipelineConfig(n_slots, batch_size, float(train_time), float(sync_time), max_staleness, steps)
    scenario = Scenario(
        pipeline=cfg,
        admission=CountThrottle(),
        weight_update=PartialRollout() if interrupt else Drain(),
        name="simulate_pipeline",
    )
    with during_run():  # the events are many small tuples: no collection while they are built
        return _chapter_dict(run(scenario, durations), steps, batch_size)


def _chapter_dict(r: RunResult, steps: int, batch_size: int) -> dict[str, Any]:
    """The chapter's dict of run ``r``: its events (gen, train, sync) and its metrics."""
    s = _chapter_metrics(r)
    records = r.episodes
    events: list[tuple[str, int, float, float, int]]
    if isinstance(records, EpisodeRecords) and not records.n_archived:
        # every episode is still an object (a run below archive_min_episodes): a tuple from each
        # that ended, in id order, costs less than four columns, their lists and a zip
        events = [
            ("gen", e.slot, e.start_s, e.end_s, e.version)
            for e in records.live.values()
            if e.end_s is not None
        ]
    else:
        c = r.columns  # read once for the metrics above; the events come from the same arrays
        ended = c.ended
        gen = (
            c.slot[ended].tolist(),
            c.start_s[ended].tolist(),
            c.end_s[ended].tolist(),
            c.version[ended].tolist(),
        )
        events = list(zip(repeat("gen"), *gen))
    events += [("train", 0, a, b, v) for _, a, b, v in r.train_log]
    events += [("sync", 0, a, b, v - 1) for a, b, v in r.sync_log]
    return dict(
        events=events,
        time=r.sim_time_s,
        throughput=steps * batch_size / r.sim_time_s * 3600 if r.sim_time_s > 0 else float("nan"),
        gen_util=s["gen_util"],
        staleness_mean=s["staleness_mean"],
        staleness_max=int(s["staleness_max"]),
        trained_duration=s["trained_duration_mean"],
    )
