"""Presets: one function per real system, returning a :class:`~pipesim.Scenario` with its policies.

Each preset models the rule that system's own code implements; its docstring names the
repository, file and function it was read from, and the configuration keys it maps.
``tests/test_systems.py`` checks the behaviour that sets each one apart. Every preset takes the
pipeline's sizes and times as keyword overrides (``n_slots``, ``batch_size``, ``train_time_s``,
``sync_time_s``, ``steps``, ...); the defaults are the chapter's pipeline (64 slots, 64 episodes
per step, 60 s training, 10 s sync, 20 steps). ``max_staleness`` is the exception: each
system bounds staleness its own way, so a preset refuses it and names its own knob
(``max_head_offpolicyness``, ``staleness_threshold``, ``async_generation_ratio``, ...; slime's
fully asynchronous worker has none). Where the preset's admission rule never reads the field
(verl fully async, slime fully async, OpenRLHF, ROLL, PipelineRL), ``Scenario.with_`` refuses a
new ``max_staleness`` too, and so do sweeps and ``--set``: they ran the same design under the
new label. AReaL's throttle reads it (it is ``max_head_offpolicyness``), so there it is swept.

slime's presets (:func:`slime` and its two modes, and :func:`april`, in slime's own knob names)
live in :mod:`scenarios.systems_slime` and are re-exported here, the same objects, as are ROLL's
(:func:`roll`, :func:`roll_rlvr`: :mod:`scenarios.systems_roll`) and PipelineRL's; the helpers
every preset shares (:func:`_scenario`, ``CHAPTER``) stay here.

=====================  ===============================  ======================================
system                 admission                        weight update / batch
=====================  ===============================  ======================================
verl one-step off      BatchThrottle, eta=1             BatchDrain
verl fully async       VerlRollouter                    AbortReprefill / Drain, every k;
                                                        VerlMessageQueue
AReaL                  AReaLThrottle                    AbortReprefill (interruptible)
slime, drain           BatchThrottle, eta=1             BatchDrain
slime, fully async     SlimeAsyncWorker                 AbortReprefill (abort, resend prefix)
                                                        after the next batch (AfterNextBatch)
OpenRLHF async         OpenRLHFBatches                  BatchDrain / AbortReprefill
ROLL                   RollGroupAdmission               AbortReprefill (abort, resend);
                                                        RollGroupQueue
ROLL RLVR              AReaLThrottle, eta=ratio         AbortReprefill (abort, resend);
                                                        RollReplayBuffer
PipelineRL             PipelineRLLag                    PartialRollout / InFlightUpdate
APRIL                  OverSample, eta=0 (colocated)    AbortReprefill (carry over) / abort;
                                                        WholeGroups
=====================  ===============================  ======================================
"""

from __future__ import annotations

import dataclasses
from typing import Any

from pipesim import PipelineConfig, Scenario
from pipesim.core.errors import check_int
from pipesim.core.validate import FieldError, refuse
from pipesim.policies.admission import AReaLThrottle, BatchThrottle
from pipesim.policies.base import (
    Drain,
    OwnStalenessBound,
    WeightUpdate,
    not_a_knob,
)
from pipesim.policies.groups import WholeGroups
from pipesim.policies.systems import (
    OpenRLHFBatches,
    VerlMessageQueue,
    VerlRollouter,
    openrlhf_refusal,
)
from pipesim.policies.updates import AbortReprefill, BatchDrain, SyncEveryK
from scenarios.systems_checks import check_batch, renamed
from scenarios.systems_pipelinerl import pipelinerl as pipelinerl  # re-exported here
from scenarios.systems_pool import check_preset_pool, preset_pool_size
from scenarios.systems_roll import roll as roll  # ROLL's presets, re-exported here
from scenarios.systems_roll import roll_rlvr as roll_rlvr
from scenarios.systems_slime import april as april  # slime's presets, re-exported here
from scenarios.systems_slime import slime as slime
from scenarios.systems_slime import slime_drain as slime_drain
from scenarios.systems_slime import slime_fully_async as slime_fully_async

CHAPTER = PipelineConfig(
    n_slots=64, batch_size=64, train_time_s=60.0, sync_time_s=10.0, max_staleness=0, steps=20
)


def _bool(name: str, value: object) -> None:
    """FieldError for ``name`` unless ``value`` is a bool (the string 'False' is truthy)."""
    if not isinstance(value, bool):
        raise refuse(name, f"must be a bool (True or False), got {value!r}")


def _scenario(
    name: str,
    pipeline: dict[str, Any],
    max_staleness: int = 0,
    knob: str = "",
    group_knob: str = "samples_per_prompt",
    **policies: Any,
) -> Scenario:
    """The preset's scenario; ``knob`` names what sets its staleness bound, which a
    ``max_staleness`` override would otherwise fight (``dataclasses.replace`` got it twice).
    An admission rule with a bound of its own names it itself (``staleness_knob``), the one
    wording ``Scenario.with_`` uses too. ``group_knob``: the preset's name for a prompt's samples,
    named where the batch is not whole groups (:func:`~scenarios.systems_checks.check_batch`)."""
    if "max_staleness" in pipeline:
        adm = policies.get("admission")
        knob = adm.staleness_knob() if isinstance(adm, OwnStalenessBound) else knob
        raise FieldError(not_a_knob(name, "this preset", knob), "max_staleness")
    pool_size = pipeline.pop("pool_size", None)
    seed = pipeline.pop("seed", 0)
    cfg = dataclasses.replace(CHAPTER, max_staleness=max_staleness, **pipeline)
    if pool_size is None:  # a pool larger than the default (relaunches, drops): systems_pool says why
        check_preset_pool(cfg, knob if knob.isidentifier() else "max_staleness")
        pool_size = preset_pool_size(cfg)
    check_batch(cfg.batch_size, policies, group_knob)  # refused here, not mid-run by a policy
    # drawn stable: the first durations do not follow the size, so every knob value of one seed
    # runs on the same episodes (systems_pool)
    return Scenario(pipeline=cfg, name=name, pool_size=pool_size, pool_draw="stable", seed=seed, **policies)


def verl_one_step_off_policy(**pipeline: Any) -> Scenario:
    """verl one-step off-policy: batch n+1 is generated with weights v_n while batch n trains.

    Source: volcengine/verl ``recipe/one_step_off_policy/ray_trainer.py``, ``fit`` and
    ``_async_gen_next_batch`` (verl moved the recipe to
    ``verl/experimental/one_step_off_policy/ray_trainer.py``; at b178a3c ``fit`` is lines 412-515,
    the same code under the new path): each step awaits the batch generated during the previous step,
    syncs the weights to the rollout workers (``sync_rollout_weights``, then ``clear_kv_cache``),
    starts generating the next whole batch, and trains on the awaited one. So generation runs one
    whole batch ahead (eta = 1, :class:`~pipesim.policies.admission.BatchThrottle`: no episode of
    the next batch starts in the slots the current batch's stragglers leave free) and the sync
    waits for the whole batch to finish (:class:`~pipesim.policies.updates.BatchDrain`: with fewer
    slots than the batch, a sync asked for mid-batch waits for the batch's last episodes, where
    ``Drain`` would sync between two halves of it): every episode after the first batch is exactly
    one version stale (the first batch, generated before any step, is fresh) and none spans two
    versions.
    """
    knob = "fixed at 1 (one step off-policy; verl_fully_async has a staleness_threshold)"
    return _scenario(
        "verl one-step off-policy", pipeline, 1, knob, admission=BatchThrottle(), weight_update=BatchDrain()
    )


def verl_fully_async(
    staleness_threshold: float = 0.5,
    trigger_parameter_sync_step: int = 1,
    partial_rollout: bool = True,
    require_batches: int = 1,
    ppo_mini_batch_size: int | None = None,
    max_concurrent_samples: int | None = None,
    max_queue_size: int | None = None,
    samples_per_prompt: int = 1,
    **pipeline: Any,
) -> Scenario:
    """verl fully async (``recipe/fully_async_policy``), modelled on its code.

    Source: volcengine/verl ``recipe/fully_async_policy/fully_async_rollouter.py``
    (``FullyAsyncRollouter.set_max_required_samples``, ``update_param_version``,
    ``_processor_worker``, ``_should_pause_generation``, ``pause``) and ``message_queue.py``
    (``MessageQueue.put_sample``); :class:`~pipesim.policies.systems.VerlRollouter` says how.

    * The trainer takes ``require_batches * ppo_mini_batch_size`` samples per step (pipesim's B;
      ``ppo_mini_batch_size`` defaults to ``batch_size``, and giving both is an error) and syncs
      weights every ``trigger_parameter_sync_step`` (k) steps. **Units:** ``ppo_mini_batch_size``
      here counts responses; verl's counts prompts (``fsdp_workers.py`` multiplies it by
      ``rollout.n``), so from a verl config pass ``ppo_mini_batch_size * rollout.n``, as
      ``scenarios/published/verl.py`` does.
    * **Defaults are not verl's:** verl's ``fully_async_ppo_trainer.yaml`` sets
      ``staleness_threshold: 0.1`` and ``trigger_parameter_sync_step: 4``; this preset's 0.5 and 1
      are the chapter's asynchronous example. Pass verl's to model its default run.
    * verl moved the recipe to ``verl/experimental/fully_async_policy/`` (January 2026); the
      files cited here are the same code under the old path.
    * The stale-sample counter counts new starts and is reset at each parameter update to the work
      in flight and queued; no new sample starts while it reaches ``int((1 +
      staleness_threshold) * k * B)`` or the queue holds that many; at most
      ``min(max_concurrent_samples, that)`` run at once (``max_concurrent_samples`` None: the slots).
    * ``partial_rollout``: the sync cancels the samples in flight (``pause`` ->
      ``async_rollout_manager.cancel``, then ``clear_kv_cache``); after it they are sent again as
      ``prompt + response so far`` (``PartialSingleTurnAgentLoop.run``), so each re-prefills its
      prefix under the new weights (:class:`~pipesim.policies.updates.AbortReprefill`; the
      compute engine charges the real prefill). Off, the sync waits for them (``pause`` gathers
      the active tasks: :class:`~pipesim.policies.base.Drain`). verl's README: it acts only with a
      threshold above 0 -- with threshold 0 every started sample is needed before the sync, so
      none is in flight then, and both settings give the same run.
    * verl's modes: on-policy (k = 1, threshold 0: synchronous), stream off-policy (k > 1,
      threshold 0: exactly k * B samples per weight version, staleness up to k - 1 steps), and the
      asynchronous modes (threshold > 0, partial rollout off or on).
    * The message queue (:class:`~pipesim.policies.systems.VerlMessageQueue`): the trainer takes
      the oldest B; a full queue evicts its oldest sample; ``max_queue_size`` None is verl's
      ``max_required_samples`` (pass a smaller one to see eviction). Its freshness check
      (``put_sample``) compares versions that verl's sync order keeps equal at every put, so it
      never drops a sample (the class says why, and what hook other weight updates would need).
      ``samples_per_prompt`` (``rollout.n``) > 1: one episode is one response and a queue item
      is a prompt's ``rollout.n`` responses, queued once all are done.
    * ``samples_per_prompt`` > 1 also makes the rollouter work in prompts, as verl's does
      (``_processor_worker``: one ``active_tasks`` entry and one count per ``RolloutSample``):
      a prompt's responses start together, the counter's cap is a whole number of prompts, and
      ``max_concurrent_samples`` (given in responses) caps the prompts in flight, each holding
      its place until its last response finishes (:class:`~pipesim.policies.systems.VerlRollouter`).
    """
    check_int("trigger_parameter_sync_step", trigger_parameter_sync_step, 1)
    check_int("require_batches", require_batches, 1)
    check_int("samples_per_prompt", samples_per_prompt, 1)
    _bool("partial_rollout", partial_rollout)
    if ppo_mini_batch_size is not None:
        check_int("ppo_mini_batch_size", ppo_mini_batch_size, 1)
        if "batch_size" in pipeline:
            raise FieldError(
                "give batch_size or ppo_mini_batch_size (with require_batches), not both", "batch_size"
            )
        pipeline["batch_size"] = ppo_mini_batch_size * require_batches
    elif require_batches != 1:
        pipeline["batch_size"] = pipeline.get("batch_size", CHAPTER.batch_size) * require_batches
    inner: WeightUpdate = AbortReprefill() if partial_rollout else Drain()
    wu = inner if trigger_parameter_sync_step == 1 else SyncEveryK(trigger_parameter_sync_step, inner)
    k = trigger_parameter_sync_step
    with renamed({"max_concurrent": "max_concurrent_samples"}):
        adm = VerlRollouter(
            staleness_threshold, k, max_concurrent_samples, max_queue_size, samples_per_prompt
        )
    queue = VerlMessageQueue(max_queue_size, staleness_threshold, k, samples_per_prompt)
    return _scenario("verl fully async", pipeline, 0, admission=adm, weight_update=wu, batching=queue)


def areal(
    max_head_offpolicyness: int = 2,
    max_concurrent_rollouts: int | None = None,
    samples_per_prompt: int = 1,
    **pipeline: Any,
) -> Scenario:
    """AReaL: interruptible rollouts under a staleness-aware throttle.

    Source: inclusionAI/AReaL ``areal/core/staleness_manager.py`` (now
    ``areal/infra/staleness_manager.py``), ``StalenessManager.get_capacity``:
    capacity = min(max_concurrent_rollouts - running, (max_head_offpolicyness + v + 1) * B -
    (accepted + running)), rejected rollouts leaving both counts
    (:class:`~pipesim.policies.admission.AReaLThrottle`). The weight update aborts every request
    (``abort_all_requests`` in the update requests ``SGLangBackend`` builds,
    ``areal/engine/sglang_remote.py``); ``agenerate``'s resubmit loop (``RemoteInfEngine.agenerate``,
    ``areal/infra/remote_inf_engine.py`` lines 719-860 at 4aef98d, formerly in
    ``sglang_remote.py``) waits while the executor is paused, appends the tokens generated so far to
    ``input_ids`` and resubmits, so each interrupted rollout re-prefills its prefix under the new
    weights and continues (:class:`~pipesim.policies.updates.AbortReprefill`).

    ``samples_per_prompt`` > 1: one episode is one response. AReaL's ``GroupedRolloutWorkflow``
    (``areal/infra/remote_inf_engine.py`` lines 70-89) runs the workflow's ``arun_episode`` (one
    sample each: ``RLVRWorkflow``, ``areal/workflow/rlvr.py``, makes one since AReaL commit
    94974370d moved the grouping out of it) ``n_samples`` times together and returns them as one
    trajectory group, so the trainer takes whole groups
    (:class:`~pipesim.policies.groups.WholeGroups`).

    **Units:** ``max_concurrent_rollouts`` counts rollout tasks as AReaL's does: one task per prompt
    group (``GroupedRolloutWorkflow``; ``StalenessManager`` counts one per task). The throttle
    compares its cap with the running responses, so it gets ``max_concurrent_rollouts *
    samples_per_prompt``.

    **Departure:** AReaL's ``wait_results`` (``areal/infra/workflow_executor.py`` lines 588-592)
    hands the trainer the finished results oldest by task creation time; this preset takes them
    in completion order (the first episodes, or with ``samples_per_prompt`` > 1 the first whole
    groups, to finish). The difference measured negligible: mean staleness 3.336 and 3.370 under
    the two orders on the published AReaL run at eta 4 (``scenarios/published/areal.py``), and
    the same at the chapter's sizes (1.482 at eta 4, seed 0).

    **Defaults are not AReaL's:** ``max_concurrent_rollouts`` None is the slot count here, where
    AReaL's None is ``consumer_batch_size`` (``workflow_executor.py`` lines 760-761:
    ``max_concurrent_rollouts or consumer_batch_size``), and AReaL's ``max_head_offpolicyness``
    defaults to 0 (``cli_args.py``) where this preset takes the chapter's 2. They agree at the
    chapter's 64 slots and batch 64; with more slots than the batch pass
    ``max_concurrent_rollouts=batch_size // samples_per_prompt`` to model AReaL's default (128
    slots, batch 64: 3,016 episodes/h uncapped, 2,098/h capped at 64).
    """
    if max_concurrent_rollouts is not None:
        check_int("max_concurrent_rollouts", max_concurrent_rollouts, 1)
    check_int("samples_per_prompt", samples_per_prompt, 1)
    cap = None  # AReaL counts tasks (prompt groups); the throttle counts running responses
    if max_concurrent_rollouts is not None:
        cap = max_concurrent_rollouts * samples_per_prompt
    with renamed({"max_concurrent": "max_concurrent_rollouts"}):
        adm = AReaLThrottle(cap)
    check_int("max_head_offpolicyness", max_head_offpolicyness, 0)
    extra: dict[str, Any] = {}
    if samples_per_prompt > 1:
        extra["batching"] = WholeGroups(samples_per_prompt)
    return _scenario(
        "AReaL",
        pipeline,
        max_head_offpolicyness,
        "max_head_offpolicyness",
        admission=adm,
        weight_update=AbortReprefill(),
        **extra,
    )


def openrlhf_async(async_queue_size: int = 1, partial_rollout: bool = False, **pipeline: Any) -> Scenario:
    """OpenRLHF ``--train.async_enable``: whole batches, at most ``--train.async_queue_size`` ahead.

    Source: OpenRLHF/OpenRLHF ``openrlhf/trainer/ppo_trainer_async.py`` (HEAD 3c3be62).
    ``GenerateSamplesActor.fit`` takes one of ``async_queue_size`` ``rollout_slots`` tokens
    (lines 287-297), generates a whole batch and queues it (108-151); ``TrainingActor.fit``
    returns the token as it takes the batch (227-232): :class:`~pipesim.policies.systems.OpenRLHFBatches`.
    The generator holds ``VLLMLock`` (19-34) for the whole batch (128-140) and ``broadcast_to_vllm``
    takes it too (255-265): a broadcast asked for mid-batch waits, so each batch runs under one
    version (:class:`~pipesim.policies.updates.BatchDrain`). Commit 67302219's names
    (``--async_train``, ``OPENRLHF_ASYNC_QUEUE_SIZE``, ``_broadcast_to_vllm``) were superseded by
    these.

    ``partial_rollout`` (``--train.partial_rollout_enable``): no lock; the broadcast pauses the
    engines (255-265), and the samples in flight **lose their KV and re-prefill** on resume
    (:class:`~pipesim.policies.updates.AbortReprefill`), not pause and continue.
    ``ray/vllm_engine.py`` line 133 calls ``self.llm.pause_generation(mode="keep")`` (an
    ``AsyncLLM``, line 64), leaving ``clear_cache`` at its default ``True``, under the vLLM that
    ``setup.py`` pins (line 77, ``vllm==0.27.1``). In vLLM 0.27.1 ``AsyncLLM.pause_generation``
    (``v1/engine/async_llm.py`` 770-813, ``clear_cache: bool = True`` at 775) sends it to
    ``EngineCoreProc.pause_scheduler`` (``v1/engine/core.py`` 1838-1878): ``keep`` freezes the
    scheduler (``PAUSED_ALL``: ``scheduler.py`` 460-462 schedules nothing, 2382-2384 counts no
    work, so the engine idles after the step in flight) and the idle callback runs
    ``_reset_caches`` (814-827), ``reset_prefix_cache(reset_running_requests=True)``: every
    running request is preempted (``scheduler.py`` 2441-2443), its blocks freed and
    ``num_computed_tokens = 0`` (1290-1294), back to the waiting queue. After the load each
    recomputes its prompt and the tokens it generated under the new weights. (PipelineRL passes
    ``clear_cache=False`` and keeps the KV: :func:`~scenarios.systems_pipelinerl.pipelinerl`.)

    Refused, naming the field (:func:`~pipesim.policies.systems.openrlhf_refusal`): ``colocated``
    (async mode never shares the training GPUs with vLLM: ``train_ppo_ray.py`` 56, 75), here and
    at the run; and, at the run's first start, as ``Scenario.with_`` adds them, ``failures``
    (OpenRLHF has no per-sample retry or drop: a failed Ray task raises) and a filtering batch
    policy (``batching.filter_rate``: OpenRLHF's dynamic filtering refills a batch under one
    version, not modelled).
    """
    _bool("partial_rollout", partial_rollout)
    with renamed({"queue_size": "async_queue_size"}):
        adm = OpenRLHFBatches(async_queue_size)
    wu: WeightUpdate = AbortReprefill() if partial_rollout else BatchDrain()
    sc = _scenario("OpenRLHF async", pipeline, 0, admission=adm, weight_update=wu)
    if (err := openrlhf_refusal(sc)) is not None:
        raise err
    return sc


PRESETS = {
    "verl_one_step_off_policy": verl_one_step_off_policy,
    "verl_fully_async": verl_fully_async,
    "areal": areal,
    "slime_drain": slime_drain,
    "slime_fully_async": slime_fully_async,
    "openrlhf_async": openrlhf_async,
    "roll": roll,
    "roll_rlvr": roll_rlvr,
    "pipelinerl": pipelinerl,
    "april": april,
}
