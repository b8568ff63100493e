"""System presets of one seed run on the same durations whatever their knobs, and refuse their
knobs when built (scenarios.systems_pool, scenarios.systems_checks)."""

from __future__ import annotations

import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import pipesim
from pipesim.core.errors import MAX_DURATION_POOL
from pipesim.core.validate import FieldError
from pipesim.io import scenario_files as sf
from pipesim.io.api import draw_pool
from pipesim.io.overrides import build
from pipesim.io.registry import get_entry
from scenarios import systems

# each preset's own knobs, at values that change its design (and for most its pool's size)
KNOBS: dict[str, list[dict[str, Any]]] = {
    "verl_one_step_off_policy": [{}],
    "verl_fully_async": [{}, {"staleness_threshold": 2.0}, {"samples_per_prompt": 4}],
    "areal": [{"max_head_offpolicyness": k} for k in (0, 1, 2, 8)],
    "slime_drain": [{}],
    "slime_fully_async": [{}, {"max_concurrent": 128}],
    "openrlhf_async": [{}, {"async_queue_size": 3}],
    "roll": [{"async_generation_ratio": r} for r in (0, 1, 3)],
    "roll_rlvr": [{"async_generation_ratio": r} for r in (1, 4)],
    "pipelinerl": [{}, {"max_lag": 0}],
    "april": [{}, {"partial_rollout": False}, {"n_samples_per_prompt": 4}],
}
FIRST = 1_000  # durations every variant's pool holds (the smallest, steps 3, holds 1,536)


@pytest.mark.parametrize("preset", list(systems.PRESETS))
def test_one_seed_gives_a_preset_the_same_first_durations_whatever_its_knobs(preset: str) -> None:
    """eta and steps acted as a second seed: each value drew a pool of its own size at once."""
    assert set(KNOBS) == set(systems.PRESETS)
    factory = systems.PRESETS[preset]
    pools = [
        draw_pool(factory(seed=3, steps=steps, **knobs)) for knobs in KNOBS[preset] for steps in (3, 20, 40)
    ]
    first = pools[0][:FIRST]
    assert all(len(p) >= FIRST and np.array_equal(p[:FIRST], first) for p in pools)
    assert not np.array_equal(draw_pool(factory(seed=4))[:FIRST], first)  # the seed still counts


def test_areal_throughput_is_flat_in_eta_once_eta_no_longer_binds() -> None:
    """With a pool per eta, throughput kept rising (2,071.5 / 2,075.7 / 2,083.5 at eta 2 / 4 / 8):
    the pools differed. On common durations it no longer changes once the throttle stops binding."""
    areal = get_entry("systems:areal")
    tput = {
        k: pipesim.run(areal.build(max_head_offpolicyness=k)).summary()["throughput_per_hour"]
        for k in (0, 2, 4, 8)
    }
    assert tput[0] < tput[2]
    assert tput[2] == tput[4] == tput[8]


def test_an_exported_preset_runs_with_set_steps_as_the_preset_does(tmp_path: Path) -> None:
    """The file kept ``pool_size = 6400``, drawn once at that size: 1,841/h against 1,860/h. It now
    keeps ``pool_draw = "stable"`` too, so its first durations are the preset's at any steps."""
    sc = systems.areal(seed=3)
    assert sc.pool_draw == "stable" and sc.pool_size is not None and sc.pool_size >= 4 * sc.min_pool_size
    path = sf.save_scenario(sc, tmp_path / "areal.toml")
    loaded = sf.load_scenario(path)
    assert loaded == sc
    a = pipesim.run(loaded.with_(steps=4)).summary()
    b = pipesim.run(systems.areal(seed=3, steps=4)).summary()
    assert a["throughput_per_hour"] == b["throughput_per_hour"]


def test_a_preset_keeps_its_pool_through_with_and_pickling() -> None:
    sc = systems.april(partial_rollout=False, n_samples_per_prompt=8, over_sampling_batch_size=24)
    assert sc.pool_size == 4 * ((sc.pipeline.steps + 2) * 64 + 64)
    for copy in (sc.with_(steps=5), pickle.loads(pickle.dumps(sc))):
        assert (copy.pool_size, copy.pool_draw) == (sc.pool_size, "stable")
    pipesim.run(sc)  # launches 2.7 x a count throttle's default pool: the larger pool holds it


def test_a_whole_pool_is_one_draw_and_a_stable_one_is_the_default_pools_prefix() -> None:
    """``pool_draw``: "whole" (the default, the chapter's) draws the set size at once, so its first
    durations follow the size; "stable" draws the default pool's chunks, cut at the size."""
    base = pipesim.Scenario(seed=5)
    whole = [draw_pool(base.with_(pool_size=n)) for n in (600, 6000)]
    stable = [draw_pool(base.with_(pool_size=n, pool_draw="stable")) for n in (600, 6000)]
    default = draw_pool(base.with_(steps=200))  # a default pool larger than both
    assert not np.array_equal(whole[0], whole[1][:600])
    assert np.array_equal(stable[0], stable[1][:600]) and np.array_equal(stable[1], default[:6000])
    with pytest.raises(ValueError) as info:
        base.with_(pool_draw="chunked")
    assert getattr(info.value, "field", None) == "pool_draw"


GROUPS = [
    (lambda: systems.areal(samples_per_prompt=3), "samples_per_prompt"),
    (lambda: systems.roll(samples_per_prompt=3), "samples_per_prompt"),
    (lambda: systems.roll_rlvr(samples_per_prompt=3), "samples_per_prompt"),
    (lambda: systems.verl_fully_async(samples_per_prompt=3), "samples_per_prompt"),
    (lambda: systems.april(n_samples_per_prompt=3), "n_samples_per_prompt"),
    (lambda: systems.areal(samples_per_prompt=4, batch_size=50), "samples_per_prompt"),
    (lambda: systems.verl_fully_async(max_queue_size=16), "max_queue_size"),
    (lambda: systems.areal(max_concurrent_rollouts=0), "max_concurrent_rollouts"),
    (lambda: systems.verl_fully_async(max_concurrent_samples=0), "max_concurrent_samples"),
    (lambda: systems.openrlhf_async(async_queue_size=0), "async_queue_size"),
    (lambda: systems.roll(samples_per_prompt=0), "samples_per_prompt"),
]


@pytest.mark.parametrize(("make", "field"), GROUPS)
def test_a_preset_refuses_its_knob_when_built_naming_it(make: Callable[[], Any], field: str) -> None:
    """These were refused mid-run by a policy (naming batch_size), or named the policy's field."""
    with pytest.raises(FieldError) as info:
        make()
    assert info.value.field == field and str(info.value).startswith(field)


def test_set_and_file_refuse_samples_per_prompt_naming_it() -> None:
    with pytest.raises(FieldError) as info:
        build(get_entry("systems:areal"), ["samples_per_prompt=3"])
    assert info.value.field == "samples_per_prompt"
    text = sf.dumps(sf.system_to_dict("systems:areal")).replace(
        "samples_per_prompt = 1", "samples_per_prompt = 3"
    )
    with pytest.raises(FieldError) as info:
        sf.loads(text)
    assert info.value.field.endswith("samples_per_prompt")


@pytest.mark.parametrize(
    ("preset", "pairs", "field"),
    [
        ("systems:areal", ["max_head_offpolicyness=100000"], "max_head_offpolicyness"),
        ("systems:areal", ["steps=20000"], "steps"),
        ("systems:roll_rlvr", ["async_generation_ratio=100000"], "async_generation_ratio"),
        ("systems:roll", ["steps=20000"], "steps"),
        ("systems:areal", ["n_slots=2000000"], "n_slots"),
    ],
)
def test_a_pool_past_the_real_limit_is_refused_at_build_naming_the_knob(
    preset: str, pairs: list[str], field: str
) -> None:
    """Checked against MAX_POOL_TASKS (2**28), these failed later naming pool_size, never set."""
    with pytest.raises(FieldError) as info:
        build(get_entry(preset), pairs)
    assert info.value.field == field and f"{MAX_DURATION_POOL:,}" in str(info.value)
    with pytest.raises(FieldError) as info:
        systems.areal(steps=20_000)
    assert info.value.field == "steps"
