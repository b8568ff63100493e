"""The plan's run cache: what a run key hashes, and a run cached by another build.

A mutation audit of :mod:`pipesim.plan.cache` found no test holding these:

- :class:`~pipesim.plan.cache.DiskCache` keeps a run of each build apart: a key ``RUN-BUILD``
  put by one build is a miss for another (and counted in ``stale``), not an answer from other
  code;
- :func:`~pipesim.plan.cache.run_key` hashes every :class:`~pipesim.plan.PlanSpec` field a run
  reads, each float exactly (``mfu`` 0.4 and 0.4001 are two runs), and none of the constraints
  or search settings (:data:`~pipesim.plan.cache._NOT_RUN`, asserted member by member).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import tomllib

from pipesim import plan
from pipesim.compute.profiles import profile
from pipesim.plan import cache
from pipesim.plan.cache import DiskCache, run_key
from pipesim.plan.design import Design
from tests.test_plan_outputs import TINY

SPEC = plan.from_dict(tomllib.loads(TINY))
DESIGN = plan.candidates(SPEC)[0]

NOT_RUN = {
    "constraints",  # judged on a run's metrics after it, never read by the simulation
    "space",  # the designs to try; the design run is its own part of the key
    "steps",  # the run length is run_key's own argument (screening and full runs differ)
    "screen_steps",  # likewise
    "seeds",  # how many seeds a design is run on; each run's seed is run_key's own argument
    "sim_seed",  # the first of those seeds: likewise
    "method",  # grid / slices / optuna: which designs are run, not how one runs
    "trials",  # search budget
    "grid_limit",  # search setting (when auto picks the grid)
    "reduction",  # successive halving's cut between rungs
    "min_full",  # how many designs are run in full
    "batch",  # Optuna trials asked together
    "baseline",  # the user's design: run as a design of its own (its own key)
    "cost_per_gpu_hour",  # a price: cost_per_mtok is computed from a run's metrics after it
    "first_cut",  # whether the fluid cut rules designs out before screening: which designs run
}
"""The PlanSpec fields that do not change a run."""


def _first_float(obj: Any) -> Any:
    """``obj`` (a frozen spec dataclass) with its first positive float field 1% larger."""
    for f in dataclasses.fields(obj):
        v = getattr(obj, f.name)
        if isinstance(v, float) and not isinstance(v, bool) and v > 0:
            return dataclasses.replace(obj, **{f.name: v * 1.01})
    raise AssertionError(f"{type(obj).__name__} has no positive float field")


CHANGED: dict[str, Callable[[Any], Any]] = {
    "gpu": lambda s: _first_float(s.gpu),
    "n_gpus": lambda s: s.n_gpus * 2,
    "model": lambda s: dataclasses.replace(s.model, n_layers=s.model.n_layers + 4),
    "workload": lambda s: dataclasses.replace(s.workload, prompt=s.workload.prompt + 1),
    "batch_size": lambda s: s.batch_size + s.workload.samples_per_prompt,
    "max_model_len": lambda s: 8192,
    "max_num_seqs": lambda s: s.max_num_seqs + 1,
    "gpu_memory_utilization": lambda s: 0.85,
    "mfu": lambda s: 0.4001,  # a float is hashed exactly: not rounded to 3 places
    "share_group_prefix": lambda s: not s.share_group_prefix,
    "sync_time_s": lambda s: 2.0,
    "sync_scale": lambda s: 1.5,
    "inflight_load_time_s": lambda s: 5.0,
    "step_overhead_s": lambda s: 0.5,
    "iteration_overhead_s": lambda s: 0.001,
    "framework": lambda s: profile("fsdp2-dense"),
    "recompute_old_logp": lambda s: not s.recompute_old_logp,
    "reference_model": lambda s: not s.reference_model,
    "ppo_mini_batch_samples": lambda s: s.batch_size // 2,
    "micro_batch_tokens": lambda s: 65536,
    "log_prob_micro_batch_tokens": lambda s: 65536,
    "sequence_parallel": lambda s: 2,
    "balance": lambda s: "sorted",
    "env_workers": lambda s: 8,
    "tool_kv": lambda s: "drop",
    "weight_dtype": lambda s: "fp8",
    "kv_dtype": lambda s: "fp8",
    "episodes_per_replica": lambda s: 32,
}
"""A valid changed value for each PlanSpec field a run reads."""

SEARCH_CHANGED: dict[str, Callable[[Any], Any]] = {
    "constraints": lambda s: dataclasses.replace(s.constraints, mean_staleness=0.5),
    "space": lambda s: dataclasses.replace(s.space, eta=(0,)),
    "steps": lambda s: s.steps + 1,
    "screen_steps": lambda s: 1,
    "seeds": lambda s: s.seeds + 1,
    "sim_seed": lambda s: s.sim_seed + 1,
    "method": lambda s: "optuna",
    "trials": lambda s: 7,
    "grid_limit": lambda s: 3,
    "reduction": lambda s: s.reduction + 1,
    "min_full": lambda s: s.min_full + 1,
    "batch": lambda s: s.batch + 1,
    "baseline": lambda s: Design(trainer_gpus=2),
    "cost_per_gpu_hour": lambda s: 2.5,
    "first_cut": lambda s: not s.first_cut,
}
"""A valid changed value for each field of :data:`NOT_RUN`."""

KEY = run_key(SPEC, DESIGN, 4, 0)


def test_not_run_is_exactly_the_constraints_and_search_settings() -> None:
    assert cache._NOT_RUN == NOT_RUN
    fields = {f.name for f in dataclasses.fields(plan.PlanSpec)}
    assert set(CHANGED) == fields - NOT_RUN, "classify a new PlanSpec field here"
    assert set(SEARCH_CHANGED) == NOT_RUN


@pytest.mark.parametrize("name", sorted(CHANGED))
def test_each_field_a_run_reads_changes_its_key(name: str) -> None:
    value = CHANGED[name](SPEC)
    assert value != getattr(SPEC, name)
    changed = SPEC.with_(**{name: value})
    other = run_key(changed, DESIGN, 4, 0)
    assert other != KEY
    assert other.partition("-")[2] == KEY.partition("-")[2]  # same build: only the run differs


@pytest.mark.parametrize("name", sorted(SEARCH_CHANGED))
def test_a_constraint_or_search_setting_keeps_the_key(name: str) -> None:
    value = SEARCH_CHANGED[name](SPEC)
    assert value != getattr(SPEC, name)
    assert run_key(SPEC.with_(**{name: value}), DESIGN, 4, 0) == KEY


def test_the_length_seed_and_design_are_in_the_key() -> None:
    other = plan.candidates(SPEC)[1]
    keys = {KEY, run_key(SPEC, DESIGN, 5, 0), run_key(SPEC, DESIGN, 4, 1), run_key(SPEC, other, 4, 0)}
    assert len(keys) == 4


def test_a_run_cached_by_another_build_is_a_stale_miss(tmp_path: Path) -> None:
    run = "ab" * 32
    this, other = f"{run}-{'1' * 16}", f"{run}-{'2' * 16}"
    dc = DiskCache(tmp_path)
    dc.put(this, {"throughput": 1.0})
    assert dc.get(other) is None
    assert (dc.stale, dc.hits) == (1, 0)
    got = dc.get(this)
    assert got is not None and got["throughput"] == 1.0
    assert (dc.stale, dc.hits) == (1, 1)
    assert dc.files() == 1


def test_a_run_never_cached_is_a_miss_and_not_stale(tmp_path: Path) -> None:
    dc = DiskCache(tmp_path)
    dc.put(f"{'ab' * 32}-{'1' * 16}", {"throughput": 1.0})
    assert dc.get(f"{'cd' * 32}-{'1' * 16}") is None
    assert (dc.stale, dc.hits) == (0, 0)
