"""OpenRLHF async refuses what its trainer cannot be (``systems:openrlhf_async``, HEAD 3c3be62).

* ``failures``: OpenRLHF has no per-sample retry or drop (a failed Ray task raises). The batch
  edges were counted by starts, relaunches included: ``RetryFailed(1e-4)`` broke the
  ``async_queue_size`` bound (staleness 4 at queue 1), ``DropFailed(1e-3)`` mixed versions in a
  step and ``RetryFailed(1e-3)`` ran the pool out at version 0.
* ``colocated``: async mode never puts vLLM on the training GPUs (``train_ppo_ray.py`` 56, 75).
* ``batching.filter_rate``: OpenRLHF's dynamic filtering refills a batch under one version; a
  filtering ``WholeGroups`` relaunched groups into later batches (steps mixed two versions).
"""

from __future__ import annotations

from typing import Any

import pytest

import pipesim
from pipesim.core.errors import PipelineError
from pipesim.core.validate import FieldError
from pipesim.policies.faults import DropFailed, RequeueFailed, RetryFailed
from pipesim.policies.groups import WholeGroups
from pipesim.policies.systems import OpenRLHFBatches
from pipesim.policies.updates import AbortRestart, InFlightUpdate
from scenarios import systems

SMALL: dict[str, Any] = dict(n_slots=16, batch_size=16, train_time_s=20.0, sync_time_s=5.0, steps=4)


@pytest.mark.parametrize(
    "failures", [RetryFailed(1e-4), RetryFailed(1e-3), DropFailed(1e-3), RequeueFailed(1e-3)]
)
def test_failures_added_with_with_are_refused_by_name(failures: Any) -> None:
    sc = systems.openrlhf_async(**SMALL).with_(failures=failures)
    with pytest.raises(FieldError) as info:
        pipesim.run(sc)
    assert info.value.field == "failures"


def test_the_chapter_sized_retry_no_longer_breaks_the_queue_bound() -> None:
    """The audit's case: it ran with staleness up to 4 at async_queue_size 1; now it is refused."""
    with pytest.raises(FieldError) as info:
        pipesim.run(systems.openrlhf_async().with_(failures=RetryFailed(1e-4)))
    assert info.value.field == "failures"


def test_colocated_is_refused_at_construction_and_at_the_run() -> None:
    with pytest.raises(FieldError) as info:
        systems.openrlhf_async(colocated=True, **SMALL)
    assert info.value.field == "colocated"
    with pytest.raises(FieldError) as info:
        pipesim.run(systems.openrlhf_async(**SMALL).with_(colocated=True))
    assert info.value.field == "colocated"


def test_dynamic_filtering_is_refused_by_name() -> None:
    sc = systems.openrlhf_async(**SMALL).with_(batching=WholeGroups(samples_per_group=8, filter_rate=0.3))
    with pytest.raises(FieldError) as info:
        pipesim.run(sc)
    assert info.value.field == "batching.filter_rate"


def test_whole_groups_without_a_filter_still_run_one_version_per_step() -> None:
    sc = systems.openrlhf_async(**SMALL).with_(batching=WholeGroups(samples_per_group=8))
    tr = pipesim.run(sc).trained
    assert len(tr) == 4 * 16
    assert all(g["version"].nunique() == 1 for _, g in tr.groupby("step"))


def test_a_weight_update_that_relaunches_is_stopped_at_the_next_batch_edge() -> None:
    """Any relaunch shifts the start-counted edges: a PipelineError, not a silent mixed run."""
    sc = systems.openrlhf_async(**SMALL).with_(weight_update=AbortRestart(restart=True))
    with pytest.raises(PipelineError, match="OpenRLHFBatches"):
        pipesim.run(sc)


def test_the_defaults_still_run() -> None:
    r = pipesim.run(systems.openrlhf_async(**SMALL))
    assert len(r.trained) == 4 * 16 and r.trained["staleness"].max() <= 1


def test_docstrings_cite_the_current_code() -> None:
    """The token pool (``rollout_slots``), not the superseded Queue; InFlightUpdate is not PipelineRL's."""
    doc = OpenRLHFBatches.__doc__ or ""
    assert "rollout_slots" in doc and "async_enable" in doc
    assert not (InFlightUpdate.__doc__ or "").startswith("PipelineRL")
