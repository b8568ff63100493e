"""``step_breakdown`` sums only the syncs that can overlap each step's wait (bisect over the
syncs' starts and their running latest end): the same number as the sum over every sync, which
was quadratic in the log's length (37 s of a 2,000-step calibration)."""

from __future__ import annotations

from types import SimpleNamespace

from hypothesis import given
from hypothesis import strategies as st

from pipesim.compute.series import step_breakdown

spans = st.tuples(st.floats(0, 1e4, allow_nan=False), st.floats(0, 50, allow_nan=False))


@given(st.lists(spans, min_size=1, max_size=30), st.lists(spans, max_size=30))
def test_the_sync_sum_equals_the_sum_over_every_sync(steps: list, syncs: list) -> None:
    train, t = [], 0.0
    for i, (gap, span) in enumerate(steps):  # steps in order, each after the last one's end
        start = t + gap
        train.append((i, start, start + span, 0))
        t = start + span
    sync_log = [(a, a + d, 0) for a, d in syncs]  # any overlap, any order
    res = SimpleNamespace(train_log=train, sync_log=sync_log)
    got = step_breakdown(res)["timing_s/param_sync"].tolist()  # type: ignore[arg-type]
    want, prev = [], 0.0
    ordered = sorted((a, b) for a, b, _ in sync_log)
    for _, start, end, _ in train:
        sync = sum(max(0.0, min(b, start) - max(a, prev)) for a, b in ordered)
        want.append(min(sync, max(start - prev, 0.0)))
        prev = end
    assert got == want
