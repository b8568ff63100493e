"""The cyclic garbage collector, paused while a run allocates, for a caller that opts in.

A library call does not flip a process-wide switch on its own: a run pauses the collector only
inside :func:`pause_collector_during_runs`, which the caller that owns the process enters (the
``pipesim`` command, the benchmarks, a user's script). Runs are faster paused -- a large run
allocates many small long-lived objects that every full collection rescans -- and correct either
way: nothing a run makes needs the collector before the run returns.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from contextvars import ContextVar

__all__ = ["YOUNG_FIRST_MIN_EPISODES", "collector_paused", "during_run", "pause_collector_during_runs"]

_OPTED_IN: ContextVar[bool] = ContextVar("pipesim_pause_collector_during_runs", default=False)

YOUNG_FIRST_MIN_EPISODES = 4096
"""From this many planned episodes a run collects the young generation before it pauses the
collector (:func:`collector_paused`)."""


@contextmanager
def collector_paused(young_first: bool = False) -> Iterator[None]:
    """Pause Python's cyclic garbage collector inside the block (as it was, after it).

    A run allocates many small long-lived objects (episodes, heap entries, event tuples), and
    every full collection rescans all of them: nothing here creates cycles that must be freed
    before the block ends, so the collector waits until it does.

    ``young_first``: collect the young generation before pausing. What a run's setup made (its
    duration pool, a source's side table: lists that grow to one entry per episode) is young
    until a collection; collected now, while small, it is older by the end of the block, so the
    young collection after the block does not traverse it. That traversal was 3-4 ms after a
    compiled run of 40,000 samples; the collection first costs about 0.1 ms, which only a big
    run repays (the pipeline asks for it from :data:`YOUNG_FIRST_MIN_EPISODES` planned episodes).
    """
    was_enabled = gc.isenabled()
    if was_enabled and young_first:
        gc.collect(0)
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            # The young generation now holds what the block allocated, far past its threshold:
            # the next allocation scans it, and its counts move the older generations on as
            # they would have. (gc.freeze() + gc.unfreeze() skipped that scan, but it zeroed
            # the counts and no full collection ever ran again: runs back to back leaked their
            # cycles and the program's own; tests/test_core_bad_input.py checks it.)
            gc.enable()


@contextmanager
def pause_collector_during_runs(enabled: bool = True) -> Iterator[None]:
    """Inside the block, every run (``pipesim.run``, ``run_compute``, a closed loop, the chapter's
    ``simulate_pipeline``) pauses the cyclic collector while it runs and restores it after
    (:func:`collector_paused`); ``enabled=False`` opts out again. Outside, runs leave it alone."""
    token = _OPTED_IN.set(bool(enabled))
    try:
        yield
    finally:
        _OPTED_IN.reset(token)


def during_run(young_first: bool = False) -> AbstractContextManager[None]:
    """What a run enters: :func:`collector_paused` where the caller opted in, else nothing."""
    return collector_paused(young_first) if _OPTED_IN.get() else nullcontext()
