"""Gaps a mutation audit of the routing and admission rules found (stop 73): each test fails under
the mutant named in it.

* ``PerReplicaSync()`` (``sync_times_s=None``) uses the pipeline's ``sync_time_s`` for every
  replica (``replicas.py``, ``times_for``): a mutant that made it 0 s passed every test.
* ``StaleFraction`` rounds a fractional cap up, as ``QueueAhead`` does: a floor passed every test
  but the one with an infinite threshold.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

import pipesim
from pipesim import PipelineConfig, Replicas, Scenario
from pipesim.policies.admission import StaleFraction
from pipesim.policies.replicas import PerReplicaSync


def _per_replica(sync_time_s: float, times: tuple[float, ...] | None) -> float:
    cfg = PipelineConfig(n_slots=8, batch_size=4, steps=4, max_staleness=1, sync_time_s=sync_time_s)
    sc = Scenario(pipeline=cfg, weight_update=PerReplicaSync(times), replicas=Replicas(2), seed=1)
    return float(pipesim.run(sc).summary()["sim_time_s"])


@pytest.mark.parametrize("sync_time_s", [5.0, 30.0])
def test_per_replica_sync_without_times_takes_the_pipelines_sync_time(sync_time_s: float) -> None:
    """The default is the pipeline's sync time for each replica, and that time costs the run time
    (30 s: 501.5 s against 381.5 s at 0 s; the mutant ran 381.5 s)."""
    default = _per_replica(sync_time_s, None)
    assert default == _per_replica(sync_time_s, (sync_time_s, sync_time_s))
    assert default > _per_replica(0.0, None)


@pytest.mark.parametrize(
    ("threshold", "batch", "every"), [(0.5, 3, 1), (0.3, 4, 1), (0.25, 3, 2), (1.0, 4, 1), (0.0, 5, 3)]
)
def test_stale_fraction_rounds_a_fractional_cap_up(threshold: float, batch: int, every: int) -> None:
    """At most ceil((1 + threshold) B sync_every) starts per sync period (0.5 x 3: 4.5 -> 5): the
    start before the cap is admitted and the one at it is not."""
    rule = StaleFraction(threshold, every)
    cap = math.ceil((1 + threshold) * batch * every)
    for started, ok in [(cap - 1, True), (cap, False)]:
        p = SimpleNamespace(batch_size=batch, version=0, started_at_version=[0], started=started)
        assert rule.admits(p) is ok, (started, cap)  # type: ignore[arg-type]
