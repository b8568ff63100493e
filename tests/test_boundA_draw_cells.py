"""A whole draw of a set pool holds [pool_size, max_turns] arrays at once: bounded by
``MAX_WHOLE_DRAW_CELLS`` before anything runs.

Before, ``pipesim run synchronous --set durations.max_turns=4000`` drew 65,536 x 4,000 cells at once
(6.7 GB), ``max_turns=8000`` died with torch's raw "DefaultCPUAllocator: can't allocate memory"
naming no field, and ``AgentDurations.sample`` took any ``n x max_turns``. Now the scenario refuses
such a whole draw (a CrossFieldError naming ``pool_size``, which a later ``--set pool_size=none``
or ``pool_draw=stable`` settles), the direct draws refuse it naming ``n``, and the chunked pool
(:func:`pipesim.workload.pools.draw_stable`) stays within the bound per chunk.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from pipesim import Scenario
from pipesim.core.validate import CrossFieldError, FieldError
from pipesim.io.chapter_designs import CHAPTER_POOL_SIZE
from pipesim.io.registry import apply_overrides, build, resolve
from pipesim.workload import durations as dur
from pipesim.workload import pools
from pipesim.workload.durations import AgentDurations, ExponentialDurations, agent_episode_durations, draw
from tests.test_refusals_core import check_refusal

BOUND = dur.MAX_WHOLE_DRAW_CELLS
HUGE_N, HUGE_TURNS = 1 << 22, 1 << 16  # 2**38 cells: terabytes, refused before any allocation


def _chapter_scenario(**changes: Any) -> Scenario:
    return Scenario(pool_size=CHAPTER_POOL_SIZE, **changes)


# -- the scenario refuses a whole draw past the bound: a CrossFieldError naming pool_size ----------

SCENARIO_ROWS: list[tuple[str, Callable[[], Any]]] = [
    ("chapter-pool-4000-turns", lambda: _chapter_scenario(durations=AgentDurations(max_turns=4000))),
    ("chapter-pool-8000-turns", lambda: _chapter_scenario(durations=AgentDurations(max_turns=8000))),
    (
        "chapter-pool-65536-turns",
        lambda: _chapter_scenario(durations=AgentDurations(mean_turns=60000, max_turns=65536)),
    ),
    ("numpy-2000-turns", lambda: _chapter_scenario(durations=AgentDurations(max_turns=2000, draws="numpy"))),
    ("largest-pool-40-turns", lambda: Scenario(pool_size=1 << 22)),
    ("with-turns", lambda: _chapter_scenario().with_(durations=AgentDurations(max_turns=4000))),
    ("with-pool", lambda: Scenario(durations=AgentDurations(max_turns=4000)).with_(pool_size=65536)),
    (
        "with-whole",
        lambda: _chapter_scenario(durations=AgentDurations(max_turns=4000), pool_draw="stable").with_(
            pool_draw="whole"
        ),
    ),
]


@pytest.mark.parametrize("call", [r[1] for r in SCENARIO_ROWS], ids=[r[0] for r in SCENARIO_ROWS])
def test_a_whole_draw_past_the_bound_is_refused_naming_pool_size(call: Callable[[], Any]) -> None:
    err = check_refusal(call, CrossFieldError, "pool_size")
    assert "max_turns" in str(err)  # the other field that settles it


@pytest.mark.parametrize("turns", [1, 40, 1000, 4000, 65536])
def test_the_bound_is_exact_and_only_for_a_whole_draw(turns: int) -> None:
    model = AgentDurations(max_turns=turns)
    most = BOUND // turns
    assert Scenario(durations=model, pool_size=min(most, 1 << 22)).pool_size == min(most, 1 << 22)
    if most + 1 <= 1 << 22:
        check_refusal(lambda: Scenario(durations=model, pool_size=most + 1), CrossFieldError, "pool_size")
        # drawn in chunks, or the default pool: no whole draw to bound
        assert Scenario(durations=model, pool_size=most + 1, pool_draw="stable").pool_draw == "stable"
    assert Scenario(durations=model).pool_size is None


def test_models_that_draw_one_value_a_duration_are_not_bounded() -> None:
    sc = Scenario(durations=ExponentialDurations(), pool_size=1 << 22)
    assert pools.whole_draw_cells(sc.durations, sc.pool_size or 0) == 0


def test_the_chapter_pool_is_far_below_the_bound() -> None:
    assert pools.whole_draw_cells(AgentDurations(), CHAPTER_POOL_SIZE) * 16 <= BOUND


# -- the command line: refused at build, naming the key given; settled in either order --------------

CLI_ROWS: list[tuple[list[str], str]] = [
    (["durations.max_turns=4000", "steps=3"], "durations.max_turns"),
    (["durations.max_turns=8000", "steps=3"], "durations.max_turns"),
    (["durations=AgentDurations(mean_turns=60000, max_turns=65536)"], "durations"),
    (["durations=AgentDurations(max_turns=2000, draws='numpy')", "steps=3"], "durations"),
    (["pool_size=4194304", "steps=3"], "pool_size"),
]


@pytest.mark.parametrize(("pairs", "field"), CLI_ROWS, ids=[" ".join(r[0]) for r in CLI_ROWS])
def test_the_walkthrough_commands_are_refused_naming_the_key(pairs: list[str], field: str) -> None:
    with pytest.raises(FieldError) as info:
        build(resolve("synchronous"), pairs)
    assert info.value.field == field, str(info.value)
    assert "pool_size" in str(info.value) and "max_turns" in str(info.value)


@pytest.mark.parametrize(
    "pairs",
    [
        ["durations.max_turns=4000", "pool_size=none"],
        ["durations.max_turns=4000", "pool_draw=stable"],
        ["pool_size=4194304", "pool_draw=stable"],
    ],
)
def test_a_set_that_settles_the_bound_applies_in_either_order(pairs: list[str]) -> None:
    base, _ = build(resolve("synchronous"), [])
    forward, _ = apply_overrides(base, pairs)
    backward, _ = apply_overrides(base, pairs[::-1])
    assert forward == backward
    assert forward.pool_size is None or forward.pool_draw == "stable"


# -- the direct draws: refused naming n; a chunked pool stays within the bound ------------------------


def _torch_generator() -> Any:
    return dur.chapter_generator(0)


DRAW_ROWS: list[tuple[str, Callable[[], Any]]] = [
    ("sample-numpy", lambda: AgentDurations(max_turns=HUGE_TURNS).sample(HUGE_N, np.random.default_rng(0))),
    ("sample-torch", lambda: AgentDurations(max_turns=HUGE_TURNS).sample(HUGE_N, _torch_generator())),
    (
        "sample_turns",
        lambda: AgentDurations(max_turns=HUGE_TURNS).sample_turns(HUGE_N, np.random.default_rng(0)),
    ),
    ("draw-chapter", lambda: draw(AgentDurations(max_turns=HUGE_TURNS), HUGE_N, 0)),
    ("draw-numpy", lambda: draw(AgentDurations(max_turns=HUGE_TURNS, draws="numpy"), HUGE_N, 0)),
    ("chapter-function", lambda: agent_episode_durations(HUGE_N, _torch_generator(), max_turns=HUGE_TURNS)),
]


@pytest.mark.parametrize("call", [r[1] for r in DRAW_ROWS], ids=[r[0] for r in DRAW_ROWS])
def test_a_direct_draw_past_the_bound_is_refused_naming_n(call: Callable[[], Any]) -> None:
    err = check_refusal(call, FieldError, "n")
    assert "max_turns" in str(err)


def test_a_direct_draw_at_the_bound_is_drawn_and_one_past_it_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dur, "MAX_WHOLE_DRAW_CELLS", 25 * 40)  # a small bound: cheap to draw at
    model = AgentDurations(draws="numpy")
    assert draw(model, 25, 0).shape == (25,)
    check_refusal(lambda: draw(model, 26, 0), FieldError, "n")


def test_a_chunked_pool_past_the_bound_is_drawn(monkeypatch: pytest.MonkeyPatch) -> None:
    """draw_stable's chunks stay within the bound: a pool whose whole draw is refused is drawn."""
    monkeypatch.setattr(dur, "MAX_WHOLE_DRAW_CELLS", 4096)
    monkeypatch.setattr(pools, "MAX_CHUNK_CELLS", 4096)
    model = AgentDurations(draws="numpy")
    check_refusal(lambda: draw(model, 1000, 0), FieldError, "n")
    pool = pools.draw_stable(model, 1000, 0)
    assert pool.shape == (1000,) and bool(np.all(pool > 0))


@pytest.mark.parametrize("turns", [1, 40, 1000, 4000, 65536])
def test_every_chunk_of_a_default_pool_is_within_the_bound(turns: int) -> None:
    sizes = list(itertools.islice(pools.chunk_sizes(turns), 40))
    assert max(sizes) * turns <= pools.MAX_CHUNK_CELLS <= BOUND
