"""The trace's "episodes in flight" counter ended at 0 for a run that ended with episodes still
generating (it counted them as ending at the last event); it ends at the run's own
``episodes_in_flight``, and "buffered" at ``episodes_buffered``."""

from __future__ import annotations

import pytest

import pipesim
from pipesim.io.trace import run_to_trace


def _last(trace: dict, name: str) -> int:
    samples = [e for e in trace["traceEvents"] if e.get("ph") == "C" and e["name"] == name]
    return int(max(samples, key=lambda e: e["ts"])["args"]["episodes"])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_counters_end_at_the_runs_books(seed: int) -> None:
    sc = pipesim.Scenario(
        pipeline=pipesim.PipelineConfig(n_slots=16, batch_size=8, steps=3, max_staleness=2), seed=seed
    )
    r = pipesim.run(sc)
    s = r.summary()
    assert s["episodes_in_flight"] > 0  # the case: episodes still generating at the end
    trace = run_to_trace(r)
    assert _last(trace, "episodes in flight") == s["episodes_in_flight"]
    assert _last(trace, "buffered") == s["episodes_buffered"]
