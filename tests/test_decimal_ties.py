"""Exact ties on decimal durations: the engine keeps the ties the chapter's loop keeps.

The chapter's loop moves each running episode's end by adding the sync time once per sync
(``end += sync_time``), so an episode paused twice ends at ``((start + d) + s) + s``. On decimal
durations (0.1, 0.7, ...) those float sums tie or miss each other by an ulp, and a tie decides
which episodes reach the buffer together, hence staleness. The slots add each pause the same
way (``Slots.due``), so the whole trace equals the oracle's (``tests/oracle.py``, the chapter's
semantics) float for float, not merely within a tolerance as in ``test_core_properties``.
"""

from __future__ import annotations

import importlib.util
import random
from pathlib import Path
from types import ModuleType

import pytest

import pipesim
from pipesim import Drain, PartialRollout, PipelineConfig, Scenario, TraceDurations, run, simulate_pipeline
from pipesim.testing import check_invariants
from tests.oracle import OracleResult, oracle_pipeline
from tests.test_kernel_survivors import SCENARIOS, _due_time_errors, _starts_while_paused

CHAPTER_LOOP = Path(__file__).resolve().parents[1] / ".." / "shared" / "reference" / "chapter_loop.py"

DECIMALS = ["0.1", "0.2", "0.3", "0.4", "0.6", "0.7", "1.0", "1.1"]


def compare(
    pool: list[float], n: int, b: int, train: float, sync: float, eta: int, interrupt: bool, steps: int
) -> None:
    """Assert that pipesim's trace equals the oracle's exactly (every float, every event)."""
    want: OracleResult = oracle_pipeline(pool, n, b, train, sync, eta, interrupt, steps)
    sc = Scenario(
        pipeline=PipelineConfig(n, b, train, sync, eta, steps),
        durations=TraceDurations.from_values(pool),
        weight_update=PartialRollout() if interrupt else Drain(),
        pool_size=len(pool),
    )
    r = run(sc)
    got_gen = sorted((e.slot, e.start_s, e.end_s, e.version) for e in r.episodes if e.end_s is not None)
    assert got_gen == sorted(want.gen)
    assert [(a, c, v) for _, a, c, v in r.train_log] == want.train
    assert [(a, c, v - 1) for a, c, v in r.sync_log] == want.sync  # ours: the version after
    trained = sorted(
        (e.trained_version, e.version, e.duration_s) for e in r.episodes if e.status == "trained"
    )
    assert trained == sorted(want.trained)
    assert r.sim_time_s == want.time
    facade = simulate_pipeline(pool, n, b, train, sync, max_staleness=eta, interrupt=interrupt, steps=steps)
    assert facade["staleness_max"] == max(tv - v for tv, v, _ in want.trained)
    assert facade["time"] == want.time


def test_a_pause_added_twice_keeps_its_tie() -> None:
    """The walkthrough's case: 0.4 + 0.1 + 0.1 ties 0.5 + 0.1 as in the chapter (staleness 2)."""
    durs = [0.4, 0.7, 0.1, 0.2, 1.1, 0.1, 0.6, 0.4, 0.3, 0.4, 1.1, 1.1, 0.2, 0.7, 0.2, 0.3]
    compare(durs, 4, 1, 0.1, 0.1, 3, True, 3)
    r = simulate_pipeline(durs, 4, 1, 0.1, 0.1, max_staleness=3, interrupt=True, steps=3)
    assert r["staleness_max"] == 2


def random_case(rnd: random.Random) -> tuple[list[float], int, int, float, float, int, bool, int]:
    n = rnd.choice([1, 2, 3, 4, 6, 8])
    b = rnd.choice([1, 2, 3, n])
    eta = rnd.choice([0, 1, 2, 3])
    steps = rnd.choice([3, 6, 10])
    train = float(rnd.choice(["0.3", "0.7", "0.1", "1.1", "0.2"]))
    sync = float(rnd.choice(["0.1", "0.2", "0.3", "0.7"]))
    pool = [float(rnd.choice(DECIMALS)) for _ in range((steps + eta + 3) * b + n + 20)]
    return pool, n, b, train, sync, eta, rnd.random() < 0.75, steps


@pytest.mark.parametrize("seed", range(6))
def test_decimal_pools_match_the_oracle_exactly(seed: int) -> None:
    """50 random decimal cases a seed (300 in all): partial rollouts and drains, several sizes."""
    rnd = random.Random(seed)
    for _ in range(50):
        compare(*random_case(rnd))


def chapter_loop() -> ModuleType:
    """The chapter's own ``simulate_pipeline`` (``../shared/reference``), or a skip."""
    pytest.importorskip("torch")
    if not CHAPTER_LOOP.is_file():
        pytest.skip(f"the chapter's loop is not at {CHAPTER_LOOP}")
    spec = importlib.util.spec_from_file_location("chapter_loop", CHAPTER_LOOP)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_decimal_pools_match_the_chapters_own_loop() -> None:
    """The chapter's code itself, on float64 decimal durations: the same events and staleness."""
    import torch

    chapter = chapter_loop()
    rnd = random.Random(99)
    for _ in range(40):
        pool, n, b, train, sync, eta, interrupt, steps = random_case(rnd)
        want = chapter.simulate_pipeline(
            torch.tensor(pool, dtype=torch.float64), n, b, train, sync, eta, interrupt, steps
        )
        got = simulate_pipeline(pool, n, b, train, sync, max_staleness=eta, interrupt=interrupt, steps=steps)
        assert sorted(got["events"]) == sorted(want["events"])
        assert (got["time"], got["staleness_max"]) == (want["time"], want["staleness_max"])


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_every_policy_family_ends_episodes_when_due_on_decimal_durations(name: str) -> None:
    """Re-prefills (a stretch re-keys every epoch), replicas, colocated pauses, per-replica syncs:
    on decimal durations every episode still ends at its due time, none starts while paused."""
    rnd = random.Random(name)
    values = [float(rnd.choice(DECIMALS)) for _ in range(97)]
    r = pipesim.run(SCENARIOS[name].with_(durations=TraceDurations.from_values(values, cycle=True)))
    check_invariants(r)
    assert _due_time_errors(r) == []
    assert _starts_while_paused(r) == []
