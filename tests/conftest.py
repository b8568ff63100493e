"""Shared test setup: Hypothesis profiles, a private run cache for ``pipesim plan``, and fixtures
(``one_thread``; ``dealt_once``, which the calibration coverage tests use).

``ci`` (used by ``make test``) is derandomized with a bounded number of examples, no deadline and
no example database, so a CI run is the same run on any machine, loaded or not. ``dev`` draws
fresh random examples; run
it locally with ``HYPOTHESIS_PROFILE=dev pytest``.
"""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from tests.interpreters import Interpreters

settings.register_profile(
    "ci",
    deadline=None,
    max_examples=40,
    derandomize=True,
    database=None,  # a CI run replays nothing saved by an earlier run: the same examples every time
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "dev",
    deadline=None,
    max_examples=150,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))

# `pipesim plan` keeps its runs in $PIPESIM_CACHE (default ~/.cache/pipesim/plan): a test session
# gets a fresh one, so no test reads runs an earlier session (or other code) left there
os.environ.setdefault("PIPESIM_CACHE", tempfile.mkdtemp(prefix="pipesim-plan-cache-"))
# the chapter's torch draws kept on disk (pipesim.io.draw_cache): one fresh directory a session,
# shared by its workers and the commands they start, so a run reads no pool an earlier session kept
os.environ.setdefault("PIPESIM_DRAW_CACHE", tempfile.mkdtemp(prefix="pipesim-draw-cache-"))


RELEASE = threading.Event()
"""Set when a test's one-thread pool shuts down: a cell waiting on it (an interrupted sweep's
cell that must not finish) is let go."""


@pytest.fixture
def one_thread() -> Iterator[ThreadPoolExecutor]:
    """One thread runs a sweep's cells in order, so eta 0 and 1 have finished when eta 2 interrupts."""
    RELEASE.clear()
    ex = ThreadPoolExecutor(1)
    try:
        yield ex
    finally:
        RELEASE.set()
        ex.shutdown(wait=True)


@pytest.fixture
def dealt_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """For one test: :func:`pipesim.calibrate.trainer.dealt` simulates each (spec, steps, rows)
    once. A coverage test fits dozens of logs against one spec, and each fit re-ran the same
    seeded run to deal its samples (119 of 120 runs repeated one); the run depends only on the
    spec's compared fields, so the cached batches are the ones each fit would have simulated. Each
    call gets its own list (the rows are tuples). The library keeps no cache."""
    import functools

    from pipesim.calibrate import trainer, trainer_inputs

    once = functools.cache(trainer_inputs.dealt)

    def dealt(rs: Any, steps: int, per_row: int = 1) -> list[tuple[int, ...]] | None:
        got = once(rs, steps, per_row)
        return None if got is None else list(got)

    for module in (trainer_inputs, trainer):  # the name each module calls it by
        monkeypatch.setattr(module, "dealt", dealt)


@pytest.fixture
def fresh_runs() -> Iterator[None]:
    """The published table's memoised runs cleared before and after the test
    (``scenarios.published.RUNS``), so a test that replaces a run function sees it called."""
    import scenarios.published as published

    for f in published.RUNS:
        f.cache_clear()
    yield
    for f in published.RUNS:
        f.cache_clear()


@pytest.fixture(scope="module")
def interpreters() -> Iterator[Interpreters]:
    """Fresh interpreters forked from one that has imported pipesim (tests/interpreters.py): each
    docs block and ``pipesim`` command still runs in a process of its own, without paying that
    import again. One server a module, so one a pytest-xdist worker at a time."""
    server = Interpreters()
    yield server
    server.close()
