"""ROLL's presets (:func:`roll`, the agentic pipeline, and :func:`roll_rlvr`), from alibaba/ROLL's code.

Re-exported from :mod:`scenarios.systems` (``systems.roll``, the same objects), whose ``PRESETS``
registers them; the helpers they share with the other presets (``_scenario``) live there,
imported when called (that module imports this one). Split out of :mod:`scenarios.systems` (past
400 lines) when the ROLL presets' weight update became ROLL's abort and re-prefill.
"""

from __future__ import annotations

from typing import Any

from pipesim import Scenario
from pipesim.core.errors import check_int
from pipesim.policies.admission import AReaLThrottle
from pipesim.policies.roll import RollReplayBuffer
from pipesim.policies.systems import RollGroupAdmission, RollGroupQueue
from pipesim.policies.updates import AbortReprefill

__all__ = ["roll", "roll_rlvr"]


def roll(async_generation_ratio: int | float = 1, samples_per_prompt: int = 1, **pipeline: Any) -> Scenario:
    """ROLL asynchronous training (``async_generation_ratio``; 0 = synchronous), from its code.

    Source: alibaba/ROLL ``roll/distributed/scheduler/rollout_scheduler.py``, ``GroupQueue``
    (``advance_step``, ``put``, ``get``) and ``GroupQueueManager.get_batch`` (the agentic pipeline;
    :func:`roll_rlvr` is the RLVR one). One pipesim episode is one trajectory (one of ROLL's
    rollouts); a group is ``samples_per_prompt`` of them, ROLL's ``train_env_manager.group_size``
    (``agentic_config.py`` line 122; ``num_return_sequences_in_group`` is the RLVR pipeline's knob,
    ``rlvr_config.py`` line 95).

    * **Units:** pipesim's batch B counts trajectories, as the agentic ``rollout_batch_size`` does
      (``get_batch`` collects whole groups until ``len(ret) >= rollout_batch_size``, and
      ``agentic_config.py`` lines 318-334 require a multiple of ``group_size``): pass
      ``batch_size=rollout_batch_size`` and ``samples_per_prompt=train_env_manager.group_size``;
      a step trains ``rollout_batch_size / group_size`` groups.
    * Supply (:class:`~pipesim.policies.systems.RollGroupAdmission`): the first ``advance_step``
      creates ``async_generation_ratio`` extra steps of groups, each later one a step's worth, so
      by step v groups exist for ``(v + 1 + ratio) * B`` starts; expired groups are not replaced.
    * Batch (:class:`~pipesim.policies.systems.RollGroupQueue`): ``GroupQueue.get`` hands over the
      oldest group of its queue once complete, and ``get_batch`` takes one per env group per
      round, so step k trains the groups created for it (tasks ``k B`` .. ``(k + 1) B - 1``),
      waiting for the slowest; none is old enough for ``advance_step`` to expire
      (``step - create_step > async_generation_ratio``). No trained episode is more than the ratio
      stale. The number of env groups changes nothing here while the batch is a whole number of
      groups per env group (``max_traj_per_env`` in ``agentic_config.py``; ROLL's async examples:
      128 env groups x 8 = rollout_batch_size 1024).
    * The sync aborts the requests in flight and frees their KV
      (:class:`~pipesim.policies.updates.AbortReprefill`): ``agentic_pipeline.py`` lines 246-262
      call ``suspend()`` (``rollout_scheduler.py`` lines 627-630: ``suspend``, ``abort_all``,
      ``wait_complete``), offload the inference engine's state and update the model, then reload
      it; an aborted request returns None (``llm_proxy/policy_proxy.py`` lines 34-35), the env
      manager sees ``GenerateStopReason.ABORT`` and does not step (``traj_env_manager.py`` lines
      114-126, 241-242), so the next ``make_decision`` sends the same turn again: the turn is
      regenerated from scratch under the new weights, and the earlier turns, kept in the history,
      are prefilled again. **Departure:** ROLL loses the aborted turn's tokens; here they are kept
      and re-prefilled (pipesim's episode has no turn boundary to restart from), so a long
      single-turn episode costs less here than in ROLL.

    The ratio is an integer (``range(async_generation_ratio)`` in ``advance_step``). ROLL's own
    slack -- ``max_traj_per_env`` rounded up, and ``group_size_redundancy`` extra rollouts per
    group -- is not modelled, nor which env group runs which group: any free slot starts the next
    task. ``samples_per_prompt`` > 1: the trainer takes whole groups. The first B groups to
    finish, stragglers expired, is :class:`~pipesim.policies.systems.RollGroupExpiry`
    (``.with_(batching=RollGroupExpiry(r))``).
    """
    from scenarios.systems import _scenario  # that module imports this one

    ratio: Any = async_generation_ratio  # 1.0 is 1; 0.5 is refused by the policies
    if isinstance(ratio, float) and ratio.is_integer():
        ratio = int(ratio)
    check_int("samples_per_prompt", samples_per_prompt, 1)
    adm = RollGroupAdmission(ratio)
    batches = RollGroupQueue(ratio, samples_per_prompt)
    return _scenario("ROLL", pipeline, 0, admission=adm, weight_update=AbortReprefill(), batching=batches)


def roll_rlvr(async_generation_ratio: int = 1, samples_per_prompt: int = 1, **pipeline: Any) -> Scenario:
    """ROLL's RLVR pipeline asynchronous (``async_generation_ratio`` >= 1), from its code.

    Source: alibaba/ROLL ``roll/distributed/scheduler/generate_scheduler.py``, ``ReplayBuffer`` and
    ``ItemsGroup`` (:func:`roll` is the agentic pipeline's ``GroupQueue``): the supply is
    :class:`~pipesim.policies.admission.AReaLThrottle` at eta = ratio, and a prompt that ``gc``
    aborts (one still running from an expired step) frees its place for a new prompt; batches
    take the oldest start step first, waiting on its running prompts, then expire steps
    ``<= v - ratio`` (:class:`~pipesim.policies.roll.RollReplayBuffer`, whose docstring has the
    rules and its one departure). pipesim's batch B counts samples: ``rollout_batch_size x
    num_return_sequences_in_group`` (``samples_per_prompt``).

    The sync aborts the samples in flight, frees their KV and resends each as prompt + output so
    far (:class:`~pipesim.policies.updates.AbortReprefill`): ``rlvr_pipeline.py`` line 500 sets
    ``collect_unfinished`` when async, and lines 510-513 call ``pause_sampling`` and offload the
    inference engine's state before ``model_update``; ``pause_sampling``
    (``generate_scheduler.py`` lines 552-557) runs ``gc``, ``abort_all`` and ``wait_complete``;
    the rollout loop (``user_defined_rollout_loop.py`` lines 262-287) takes the unfinished response
    (``postprocess_paused_data`` appends its tokens to the request) and sends it again, so each
    re-prefills its prefix under the new weights and continues.
    """
    from scenarios.systems import _scenario  # that module imports this one

    check_int("async_generation_ratio", async_generation_ratio, 1)
    check_int("samples_per_prompt", samples_per_prompt, 1)
    return _scenario(
        "ROLL RLVR",
        pipeline,
        async_generation_ratio,
        "async_generation_ratio",
        admission=AReaLThrottle(),
        weight_update=AbortReprefill(),
        batching=RollReplayBuffer(async_generation_ratio, samples_per_prompt),
    )
