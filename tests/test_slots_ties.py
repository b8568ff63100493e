"""Quiet completions with due times an ulp apart (found by a deep Hypothesis run): the slots
process aimed past the quiet completions at the k + 1-th smallest key, whose due time equalled
now, while an episode with the same key but a due time one ulp later sat on top of the heap; the
wake-up finished nothing and repeated the same instant for ever (``pipesim.run`` never
returned). Integer durations under a pausing weight update whose sync time is not a round
number make such ties: every key is a whole number, every due time that number plus a float
offset computed two ways."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager

from hypothesis import given, settings
from hypothesis import strategies as st

import pipesim
from pipesim import CountThrottle, OldestFinishedFirst, PartialRollout, PipelineConfig, Scenario
from pipesim.testing import check_invariants

FOUND = [164.0, 0.0, 158.0, 82.0, 96.0, 35.0, 75.0, 91.0, 7.0, 178.0, 30.0, 6.0, 61.0, 61.0, 200.0]
FOUND += [74.0, 118.0, 151.0, 189.0, 171.0, 44.0, 117.0, 34.0, 145.0, 166.0, 184.0, 2.0, 195.0]
FOUND += [19.0, 6.0, 106.0, 36.0, 168.0, 68.0, 16.0, 199.0, 87.0, 1.0, 7.0, 2.0, 158.0, 170.0]
FOUND += [110.0, 160.0, 115.0, 99.0, 119.0, 22.0, 62.0, 52.0, 10.0, 141.0, 57.0, 183.0, 3.0, 5.0]
FOUND += [121.0, 22.0]


RUN_LIMIT_S = 10
"""A run of this size takes milliseconds; one that takes this long is the livelock."""


@contextmanager
def _bounded() -> Iterator[None]:
    """Each run under its own alarm, so a hang fails the example it hangs on (and each example
    Hypothesis shrinks to), instead of stalling the test until the suite's limit."""

    def stop(*_: object) -> None:
        raise TimeoutError(f"pipesim.run did not return in {RUN_LIMIT_S} s")

    before = signal.signal(signal.SIGALRM, stop)
    signal.alarm(RUN_LIMIT_S)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, before)


def _scenario(values: list[float], sync_time_s: float, seed: int, cycle: bool = False) -> Scenario:
    cfg = PipelineConfig(
        n_slots=10, batch_size=6, train_time_s=10.0, sync_time_s=sync_time_s, max_staleness=1, steps=6
    )
    return Scenario(
        pipeline=cfg,
        durations=pipesim.TraceDurations.from_values(values, cycle=cycle),
        admission=CountThrottle(),
        weight_update=PartialRollout(),
        batching=OldestFinishedFirst(),
        seed=seed,
        pool_size=len(values) if not cycle else 200,
    )


def test_the_found_case_ends() -> None:
    sc = _scenario(FOUND, 23.908054412593476, 1769)
    with _bounded():
        result = pipesim.run(sc)
    check_invariants(result, sc)


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(st.integers(0, 200).map(float), min_size=40, max_size=60),
    sync_time_s=st.floats(0.1, 50.0),
    seed=st.integers(0, 2**16),
)
def test_integer_durations_with_a_fractional_sync_end(
    values: list[float], sync_time_s: float, seed: int
) -> None:
    sc = _scenario(values, sync_time_s, seed, cycle=True)  # the trace repeats: no pool runs dry
    with _bounded():
        result = pipesim.run(sc)
    check_invariants(result, sc)
