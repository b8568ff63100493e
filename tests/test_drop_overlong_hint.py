"""DropOverlong discards a timed-out episode whenever the trainer asks, short of a full batch too,
so its ``min_items`` hint must not wait for ``batch_size`` finished episodes (FullBatch's): with
that hint the discard came later and the run ended later (1265.2 s against 1199.6 s in the first
row). The testing kit's with-and-without-shortcuts check is the independent reference: the run
without hints asks ``select`` at every chance."""

from __future__ import annotations

import pytest

import pipesim
from pipesim.testing import check_promises


@pytest.mark.parametrize(
    ("n_slots", "batch_size", "eta"),
    [(4, 8, 0), (4, 8, 1), (4, 4, 1), (4, 4, 2)],
)
def test_drop_overlong_discards_at_the_same_times_with_and_without_its_hint(
    n_slots: int, batch_size: int, eta: int
) -> None:
    sc = pipesim.Scenario(
        pipeline=pipesim.PipelineConfig(n_slots=n_slots, batch_size=batch_size, steps=3, max_staleness=eta),
        batching=pipesim.DropOverlong(),
        admission=pipesim.AReaLThrottle(),
        timeout=pipesim.Timeout(cap_s=30.0),
        pool_size=400,
        seed=0,
    )
    assert (pipesim.run(sc).episode_table["status"] == "discarded").any()  # the case: cut episodes
    check_promises(sc)
