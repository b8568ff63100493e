"""What a paused weight update does to the KV of the sequences in flight, per system preset.

Both systems pause vLLM with ``pause_generation(mode="keep")``; ``clear_cache`` decides the KV.
PipelineRL (HEAD 58d3934, ``vllm1.py`` line 160) passes ``clear_cache=False`` under vLLM 0.18.1:
the requests stay running with their blocks, so they pause and continue
(:class:`~pipesim.policies.base.PartialRollout`). OpenRLHF (HEAD 3c3be62, ``ray/vllm_engine.py``
line 133) leaves the default ``True`` under vLLM 0.27.1: the engine resets its caches with
``reset_running_requests=True`` and every running request is preempted and recomputes its context
on resume (:class:`~pipesim.policies.updates.AbortReprefill`). The main preset took OpenRLHF's
pause as KV kept: no sample ever re-prefilled.
"""

from __future__ import annotations

import pipesim
from pipesim.policies.base import PartialRollout
from pipesim.policies.updates import AbortReprefill, BatchDrain
from pipesim.testing import check_invariants
from scenarios import systems

SMALL = {"n_slots": 32, "batch_size": 64, "steps": 6}


def test_openrlhf_partial_rollout_reprefills_every_sample_a_sync_meets() -> None:
    """Every trained sample generated across a broadcast re-prefills (its KV was dropped), and no
    other does; with the lock (``BatchDrain``) no broadcast meets a sample, so none re-prefills."""
    sc = systems.openrlhf_async(partial_rollout=True, **SMALL)
    assert isinstance(sc.weight_update, AbortReprefill)
    r = pipesim.run(sc)
    check_invariants(r, sc)
    tr = r.trained
    spanned = set(tr.loc[tr["versions_spanned"] > 1, "episode_id"])
    assert spanned
    assert all(r.episodes[i].reprefill_tokens > 0 for i in spanned)
    assert all(r.episodes[i].reprefill_tokens == 0 for i in set(tr["episode_id"]) - spanned)
    assert r.summary()["reprefill_tokens"] > 0
    locked = systems.openrlhf_async(**SMALL)
    assert isinstance(locked.weight_update, BatchDrain)
    assert pipesim.run(locked).summary()["reprefill_tokens"] == 0


def test_pipelinerl_pause_keeps_the_kv() -> None:
    """``clear_cache=False``: samples that span a weight update pause and continue; none re-prefills."""
    sc = systems.pipelinerl(**SMALL)
    assert isinstance(sc.weight_update, PartialRollout)
    r = pipesim.run(sc)
    tr = r.trained
    assert (tr["versions_spanned"] > 1).any()
    assert r.summary()["reprefill_tokens"] == 0
