"""The default pool of a scenario whose ``WholeGroups`` filters groups has room for the groups it
rejects and relaunches (``Scenario.pool_for``), on the chapter's slots as on the compute engine.
Before, only ``run_compute`` sized it so: a slot run with ``filter_rate=0.3`` and no ``pool_size``
stopped with "durations pool exhausted" at every seed."""

from __future__ import annotations

import math

import numpy as np
import pytest

import pipesim
from pipesim.config import FILTER_POOL_MARGIN


def _scenario(rate: float, seed: int = 0, **kw: object) -> pipesim.Scenario:
    return pipesim.Scenario(
        pipeline=pipesim.PipelineConfig(n_slots=32, batch_size=32, steps=20),
        batching=pipesim.WholeGroups(8, filter_rate=rate),
        admission=pipesim.AReaLThrottle(),
        seed=seed,
        **kw,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_filtering_run_on_the_default_pool_trains_every_step(seed: int) -> None:
    r = pipesim.run(_scenario(0.3, seed))
    assert len(r.trained) == 20 * 32
    assert (r.episode_table["status"] == "discarded").any()  # the filter did reject groups


@pytest.mark.parametrize("rate", [0.0, 0.1, 0.3, 0.5, 0.9])
def test_the_default_pool_grows_with_the_filter_rate_and_not_without_one(rate: float) -> None:
    sc = _scenario(rate)
    p = sc.pipeline
    base = (p.steps + p.max_staleness + 1) * p.batch_size + p.n_slots
    assert sc.with_(batching=pipesim.OldestFinishedFirst()).default_pool_size == base
    if rate == 0:
        assert sc.default_pool_size == base
    else:
        assert sc.default_pool_size >= FILTER_POOL_MARGIN * base / (1 - rate)
        assert sc.default_pool_size == math.ceil(FILTER_POOL_MARGIN * base / (1 - rate)) + p.batch_size


def test_the_first_durations_do_not_depend_on_the_filters_larger_pool() -> None:
    """The default pool is drawn in fixed chunks: a filtered run's episodes begin as an unfiltered
    run's do, so a filter compares designs on the same episodes."""

    def by_task(rate: float) -> np.ndarray:
        t = pipesim.run(_scenario(rate)).episode_table
        return t.drop_duplicates("task_id").sort_values("task_id")["duration_s"].to_numpy()

    plain, filtered = by_task(0.0), by_task(0.3)
    n = min(len(plain), len(filtered))
    assert n >= 600 and np.array_equal(plain[:n], filtered[:n])
