"""System presets against their sources (verl b178a3c, AReaL 4aef98d, ROLL 8eb27cc, slime 624b824).

* AReaL's ``max_concurrent_rollouts`` counts rollout tasks, one per prompt group
  (``GroupedRolloutWorkflow``; ``StalenessManager`` counts per task). The preset passed it to
  ``AReaLThrottle``, which compares it with the running responses, so with 8 samples a prompt
  ``max_concurrent_rollouts=64`` capped 64 responses (8 groups) instead of 512.
* ROLL, both pipelines, aborts the requests in flight at the sync and offloads the engine's state
  (KV freed), then resends prompt + partial output: the presets re-prefill (``AbortReprefill``),
  where they paused and kept the KV (``PartialRollout``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from pipesim import run
from pipesim.core.validate import FieldError
from pipesim.plan.keys import KEYS
from pipesim.policies.updates import AbortReprefill
from pipesim.results.run import RunResult
from pipesim.testing import check_invariants
from pipesim.workload.durations import LogNormalDurations
from scenarios import systems
from tests.test_refusals_core import check_refusal

SMALL: dict[str, Any] = dict(n_slots=16, batch_size=8, train_time_s=20.0, sync_time_s=8.0, steps=8)


def checked(sc: Any) -> RunResult:
    r = run(sc)
    check_invariants(r, sc)
    return r


def most_running(r: RunResult) -> int:
    """The most episodes running at once, from the episode table's start and end times (an end
    before a start at the same instant: a freed slot refilled at once is not two running)."""
    eps = r.episode_table
    ends = eps["end_s"].fillna(np.inf).to_numpy()
    times = np.concatenate([eps["start_s"].to_numpy(), ends])
    steps = np.concatenate([np.ones(len(eps)), -np.ones(len(eps))])
    order = np.lexsort((steps, times))  # at a tie, the end (-1) first
    return int(np.cumsum(steps[order]).max())


def test_areal_max_concurrent_rollouts_counts_prompt_groups() -> None:
    """64 rollout tasks of 8 samples: 512 responses run at once, not 64 (the slots, the batch and
    the staleness bound all allow more)."""
    kw = dict(n_slots=1024, batch_size=512, train_time_s=20.0, sync_time_s=8.0, steps=2)
    sc = systems.areal(2, max_concurrent_rollouts=64, samples_per_prompt=8, **kw)
    assert sc.admission.max_concurrent == 512
    assert most_running(checked(sc)) == 512
    # None is still the slot count, and one sample a prompt is one response a task
    assert systems.areal(2).admission.max_concurrent is None
    assert systems.areal(2, max_concurrent_rollouts=10).admission.max_concurrent == 10


@pytest.mark.parametrize(
    ("knobs", "field"),
    [
        (dict(max_concurrent_rollouts=0), "max_concurrent_rollouts"),
        (dict(max_concurrent_rollouts=2.5, samples_per_prompt=4), "max_concurrent_rollouts"),
        (dict(max_concurrent_rollouts=True), "max_concurrent_rollouts"),
        (dict(max_concurrent_rollouts=0, samples_per_prompt=0), "max_concurrent_rollouts"),
        (dict(max_concurrent_rollouts=4, samples_per_prompt=0), "samples_per_prompt"),
    ],
)
def test_areal_bad_cap_is_refused_naming_its_knob(knobs: dict[str, Any], field: str) -> None:
    check_refusal(lambda: systems.areal(2, **knobs), FieldError, field)


@pytest.mark.parametrize(
    "make",
    [
        lambda: systems.roll(1, **SMALL),
        lambda: systems.roll(1, samples_per_prompt=4, **SMALL),
        lambda: systems.roll_rlvr(1, **SMALL),
        lambda: systems.roll_rlvr(2, samples_per_prompt=4, **SMALL),
    ],
    ids=["roll", "roll-groups", "roll_rlvr", "roll_rlvr-groups"],
)
def test_roll_reprefills_what_the_sync_aborted(make: Any) -> None:
    """ROLL aborts at the sync and frees the KV (agentic: ``suspend`` -> ``abort_all``, then the
    engine's state offloaded; RLVR: ``pause_sampling``): the episodes in flight re-prefill their
    prefix under the new weights, and only those."""
    sc = make().with_(durations=LogNormalDurations(40.0, 1.0))
    assert isinstance(sc.weight_update, AbortReprefill)
    r = checked(sc)
    assert r.summary()["reprefill_tokens"] > 0
    eps = r.episode_table.set_index("episode_id")
    reprefilled = [e.id for e in r.episodes if e.reprefill_s > 0]
    assert reprefilled  # each one ran across a sync: its newest version is past its own
    assert (eps.loc[reprefilled, "newest_version"] > eps.loc[reprefilled, "version"]).all()


def test_roll_docs_name_the_agentic_knobs_and_the_abort() -> None:
    roll = " ".join((systems.roll.__doc__ or "").split())
    assert "train_env_manager.group_size" in roll and "agentic_config.py`` line 122" in roll
    assert "(``num_return_sequences_in_group``) > 1" not in roll  # the RLVR knob, not the agentic one
    assert "abort_all" in roll and "Departure" in roll
    rlvr = " ".join((systems.roll_rlvr.__doc__ or "").split())
    assert "pause_sampling" in rlvr and "postprocess_paused_data" in rlvr and "sent again" not in rlvr
    # the agentic rollout_batch_size counts trajectories: B itself, and B / group_size prompts
    assert "rollout_batch_size (agentic)" in KEYS["workload.batch_size"][3]
    assert (
        "rollout_batch_size / train_env_manager.group_size (agentic)" in KEYS["workload.prompts_per_step"][3]
    )
