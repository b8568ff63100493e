"""PipelineRL's preset (:func:`pipelinerl`), from ServiceNow/PipelineRL's code.

Re-exported from :mod:`scenarios.systems` (``systems.pipelinerl``, the same object), whose
``PRESETS`` registers it; the helpers it shares with the other presets (``_scenario``,
``CHAPTER``) live there, imported when called (that module imports this one). Split out of
:mod:`scenarios.systems` (past 400 lines) when one episode became one rollout.
"""

from __future__ import annotations

from typing import Any

from pipesim import Scenario
from pipesim.core.errors import check_int
from pipesim.policies.base import PartialRollout, WeightUpdate
from pipesim.policies.groups import WholeGroups
from pipesim.policies.systems import PipelineRLLag
from pipesim.policies.updates import InFlightUpdate

__all__ = ["pipelinerl"]


def pipelinerl(
    max_lag: int | None = None, load_time_s: float | None = None, attempts: int = 1, **pipeline: Any
) -> Scenario:
    """PipelineRL: generation runs ahead under its lag bound; a weight update pauses the engines.

    Source: ServiceNow/PipelineRL (HEAD 58d3934) ``pipelinerl/actor.py``, ``ActorLoop.run``
    (lines 509-562; :class:`~pipesim.policies.systems.PipelineRLLag`): groups are submitted while
    fewer than ``ceil(max_lag / attempts) + (v + 1) * groups_per_update``. ``max_lag`` counts
    samples. ``pipelinerl/vllm1.py``, ``receive_weight_update`` (lines 155-182) wraps the NCCL
    receive and ``load_weights`` in ``pause_generation(mode="keep", clear_cache=False)`` (line
    160): generation stops for the whole transfer, and sequences keep their KV and continue
    (:class:`~pipesim.policies.base.PartialRollout`). Under the vLLM ``pyproject.toml`` pins (line
    23, ``vllm==0.18.1``), ``keep`` freezes the scheduler (``PAUSED_ALL``: its
    ``scheduler.py`` 358-360 schedules no token) with the requests left running, blocks held, and
    ``EngineCoreProc.pause_scheduler`` (``v1/engine/core.py`` 1499-1538) resets the caches only
    ``if clear_cache`` (1519, 1532), whose default ``True`` (``v1/engine/async_llm.py`` 731)
    would preempt every running request (``reset_running_requests=True``, 599-600) and make it
    recompute its context on resume, as OpenRLHF's call does
    (:func:`~scenarios.systems.openrlhf_async`). The trainer's ZeRO-3 path, its default,
    gathers each parameter while the engines wait (``finetune_loop.py`` 205-243).

    ``attempts`` (PipelineRL's ``attempts``, samples per problem): a pipesim episode is one rollout.
    ``schedule_rollouts`` (``actor.py`` 257-285) gives each attempt its own slot, counted against
    ``actor.llm_max_rollouts`` (268-269), and tags it with the version at its own start (186, 210,
    216); a group is published once its last attempt finishes (220-225), so its latency is the
    slowest of its attempts'. So ``n_slots`` counts rollouts (``llm_max_rollouts`` x engines),
    ``batch_size`` counts samples and must be whole groups (refused naming ``attempts``), and the
    trainer takes whole groups (:class:`~pipesim.policies.groups.WholeGroups`). Approximated: a
    group counts against the lag bound when its first attempt starts, not when its problem enters
    PipelineRL's problem queue (the class says why that changes little), and the trainer takes the
    first complete groups, as PipelineRL's stream does. **PipelineRL's default is 8 attempts**
    (``conf/finetune/base.yaml`` line 96); this preset's is 1.

    ``load_time_s`` seconds instead models a double-buffered transfer that overlaps generation,
    each replica pausing only to load (:class:`~pipesim.policies.updates.InFlightUpdate`): what the
    planner's ``inflight`` design assumes, not PipelineRL's code (20 steps: 2,363.2 episodes/h at
    1 s against 2,173.7/h by default; 2,335.9 against 1,828.7 at ``sync_time_s=30``).

    The trainer streams its batch (``stream_batches=True``, :mod:`pipesim.core.training`): it runs
    forward and backward on each micro-batch as it arrives and steps once the step's samples are in
    (``finetune_loop.py`` 584-597, 692-701, 713). ``stream_batches=False`` is the batch trainer:
    2,114.8/h and mean staleness 1.48 by default, against 2,173.7/h and 0.94 streamed.

    **Defaults are not PipelineRL's:** its ``max_lag: null`` (``conf/base.yaml`` line 106) is no
    bound (``actor.py`` line 534), old data dropped by ``pop_old_data``: not modelled. The default
    here, ``max_lag=None``, is ``2 * batch_size`` samples (two batches ahead); an export writes it
    as the file's none marker, which in this preset means that bound, not PipelineRL's null. Give
    ``max_lag`` as a number to pin it.
    """
    from scenarios.systems import CHAPTER, _scenario  # that module imports this one

    check_int("attempts", attempts, 1)
    b = pipeline.get("batch_size", CHAPTER.batch_size)
    lag = max_lag if max_lag is not None else 2 * b
    wu: WeightUpdate = PartialRollout() if load_time_s is None else InFlightUpdate(load_time_s)
    extra: dict[str, Any] = {} if attempts == 1 else {"batching": WholeGroups(attempts)}
    return _scenario(
        "PipelineRL",
        {"stream_batches": True, **pipeline},
        0,
        group_knob="attempts",
        admission=PipelineRLLag(lag, attempts),
        weight_update=wu,
        **extra,
    )
